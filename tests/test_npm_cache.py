"""The npm cache the tests share between runs, checkouts and parallel workers: nobody installs
into a folder while another run uses the package in it."""

from __future__ import annotations

import fcntl
import shutil
import sys
import time
from pathlib import Path

import pytest
from npm_cache import npm_package

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
