from __future__ import annotations

import gc
import importlib
import logging
import os
import subprocess
import sys
import textwrap
import threading
import warnings
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent
FIXTURE_PLUGINS = Path(__file__).resolve().parent / "fixture_plugins"


def pytest_collection_finish(session: pytest.Session) -> None:
    """Everything collection built (test modules, Hypothesis strategies, the gateway and its
    SDK) lives for the whole run: keep the collector from walking it again in every full
    collection, which was ~7 % of an in-process test's time."""
    gc.collect()
    gc.freeze()


def write_dist(
    site: Path, dist: str, entry_points: dict[str, str], modules: dict[str, str]
) -> None:
    """A real installed distribution, as importlib.metadata sees one: a module plus a
    ``*.dist-info`` folder with METADATA and entry_points.txt, in a folder on sys.path."""
    site.mkdir(parents=True, exist_ok=True)
    for name, source in modules.items():
        (site / f"{name}.py").write_text(textwrap.dedent(source))
    info = site / f"{dist.replace('-', '_')}-1.2.3.dist-info"
    info.mkdir(exist_ok=True)
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {dist}\nVersion: 1.2.3\n")
    lines = ["[mcp_gateway.plugins]"] + [f"{k} = {v}" for k, v in entry_points.items()]
    (info / "entry_points.txt").write_text("\n".join(lines) + "\n")


@pytest.fixture
def plugin_site(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Callable[..., Path]:
    """Install throw-away plugin distributions for this test only (in-process and for
    subprocesses through PYTHONPATH)."""
    site = tmp_path / "site"
    site.mkdir()
    monkeypatch.syspath_prepend(str(site))
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join([str(site), os.environ.get("PYTHONPATH", "")]))
    added: list[str] = []

    def install(dist: str, entry_points: dict[str, str], modules: dict[str, str]) -> Path:
        write_dist(site, dist, entry_points, modules)
        added.extend(modules)
        importlib.invalidate_caches()
        return site

    yield install
    for name in added:
        sys.modules.pop(name, None)
    from gateway import entrypoints

    entrypoints.forget_installed()  # its distributions leave sys.path with this test


@pytest.fixture(autouse=True, scope="session")
def _state_home(tmp_path_factory: pytest.TempPathFactory) -> Iterator[None]:
    """Gateways without an ``audit_log`` write to the user's state directory, and keep tool
    schemas in the user's cache directory: the core tests' (and the subprocesses they start,
    which inherit the environment) use temporary ones."""
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("XDG_STATE_HOME", str(tmp_path_factory.mktemp("state")))
        # The schema cache too: the tests never share one with the user's gateways.
        mp.setenv("XDG_CACHE_HOME", str(tmp_path_factory.mktemp("cache")))
        yield


def gateway_env(**extra: str) -> dict[str, str]:
    """Environment for a gateway subprocess: this one, minus anything that would change it."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("MCP_GATEWAY_")}
    env.update(extra)
    return env


def _serve_beyond_its_checks(*args: object) -> int:
    raise AssertionError(
        "serve passed its configuration checks in the test process: start it as a subprocess"
    )


@pytest.fixture
def cli_main(
    monkeypatch: pytest.MonkeyPatch, capfd: pytest.CaptureFixture[str]
) -> Callable[..., subprocess.CompletedProcess[str]]:
    """``mcp-gateway ARGS`` through its real entry point, ``gateway.cli.main``, in this
    process: for tests of what a command answers, where a process boundary adds nothing they
    check (a fresh process costs ~0.5 s of CPU). The environment is exactly ``env``, as a
    subprocess's would be; stdout and stderr are read at the descriptors, as a parent reads
    them. The logging, warning and crash hooks a command installs are undone after each run.
    ``serve`` only gets as far as its configuration checks: serving is a subprocess's job, as
    is a ``call`` with telemetry on (it makes its providers the process's, for good)."""
    import gateway.cli
    from gateway.testing import refresh_installed

    def run(cwd: Path, *args: str, env: Mapping[str, str]) -> subprocess.CompletedProcess[str]:
        refresh_installed()  # as a fresh process would, it sees what the test installed
        root = logging.getLogger()
        handlers = list(root.handlers)
        quiet = ("mcp", "uvicorn.access", "httpx", "httpcore")
        levels = {name: logging.getLogger(name).level for name in (*quiet, "")}
        with monkeypatch.context() as mp:
            for name in set(os.environ) - set(env):
                mp.delenv(name)
            for name, value in env.items():
                mp.setenv(name, value)
            mp.chdir(cwd)
            mp.setattr(gateway.cli, "_serve", _serve_beyond_its_checks)
            for hook in ("excepthook", "unraisablehook"):
                mp.setattr(sys, hook, getattr(sys, hook))
            mp.setattr(threading, "excepthook", threading.excepthook)
            # What logging.captureWarnings(True) changes, to be put back as it was.
            mp.setattr(warnings, "showwarning", warnings.showwarning)
            mp.setattr(logging, "_warnings_showwarning", logging._warnings_showwarning)  # type: ignore[attr-defined]
            capfd.readouterr()
            try:
                code = gateway.cli.main(list(args))
            except SystemExit as exc:  # argparse: --version, a usage error
                code = exc.code if isinstance(exc.code, int) else int(exc.code is not None)
            finally:
                for handler in set(root.handlers) - set(handlers):
                    root.removeHandler(handler)
                    handler.close()  # its thread writes what is queued to fd 2 first
                for name, level in levels.items():
                    logging.getLogger(name).setLevel(level)
            out, err = capfd.readouterr()
        return subprocess.CompletedProcess(["mcp-gateway", *args], code, out, err)

    return run
