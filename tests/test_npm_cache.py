"""The npm cache the tests share between runs, checkouts and parallel workers: nobody installs
into a folder while another run uses the package in it."""

from __future__ import annotations

import fcntl
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest
from npm_cache import cache_dir, npm_package

pytestmark = [
    pytest.mark.skipif(sys.platform == "win32", reason="flock locks"),
    pytest.mark.skipif(shutil.which("npm") is None, reason="the cache is used with npm only"),
]


def _installable(folder: Path) -> bool:
    """Could an installer take the folder's lock now (it waits for the lock alone)?"""
    with open(folder / ".lock", "w") as fh:
        try:
            fcntl.flock(fh, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            return False
        return True


def test_a_package_in_use_is_never_reinstalled_and_users_share_it(tmp_path):
    probe = tmp_path / "node_modules" / "pkg" / "package.json"
    probe.parent.mkdir(parents=True)
    probe.write_text("{}")
    (tmp_path / ".installed").write_text("pkg@1\n")  # fresh: nothing to install
    with npm_package(tmp_path, "pkg@1", probe):
        assert not _installable(tmp_path)
        started = time.monotonic()
        with npm_package(tmp_path, "pkg@1", probe):  # a second user does not wait
            assert not _installable(tmp_path)
        assert time.monotonic() - started < 5
        assert not _installable(tmp_path)
    assert _installable(tmp_path)


def test_the_packages_stay_in_the_users_cache_not_the_suites_throw_away_one(tmp_path):
    # conftest gives this process a temporary XDG_CACHE_HOME once the session starts.
    assert not cache_dir("pkg").is_relative_to(os.environ["XDG_CACHE_HOME"])
    env = {**os.environ, "TEST_NPM_CACHE": str(tmp_path)}  # what the test command passes on
    printed = subprocess.run(
        [sys.executable, "-c", "import npm_cache; print(npm_cache.cache_dir('pkg'))"],
        cwd=Path(__file__).parent,
        env=env,
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    assert Path(printed.strip()) == tmp_path / "mcp-plugin-gateway-tests" / "pkg"


def _registry(monkeypatch: pytest.MonkeyPatch, url: str) -> None:
    monkeypatch.setenv("npm_config_registry", url)
    monkeypatch.setenv("npm_config_fetch_retries", "0")
    monkeypatch.setenv("npm_config_cache", str(Path(os.environ["XDG_CACHE_HOME"]) / "npm"))


def test_offline_without_an_earlier_copy_the_tests_that_need_it_are_skipped(tmp_path, monkeypatch):
    from gateway.testing.backends import closed_port_url

    _registry(monkeypatch, closed_port_url() + "/")  # the registry cannot be reached
    probe = tmp_path / "node_modules" / "left-pad" / "package.json"
    with npm_package(tmp_path, "left-pad@1", probe) as why:
        assert why is not None and "npm registry cannot be reached" in why
    assert not probe.exists()


def test_an_install_the_registry_refuses_still_fails(tmp_path, monkeypatch):
    from gateway.testing.backends import FakeBackend

    with FakeBackend() as registry:  # answers, but knows no package: not being offline
        _registry(monkeypatch, registry.url + "/")
        probe = tmp_path / "node_modules" / "left-pad" / "package.json"
        with (
            pytest.raises(AssertionError, match="npm install left-pad@1 failed"),
            npm_package(tmp_path, "left-pad@1", probe),
        ):
            pass
