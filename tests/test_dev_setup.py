"""The deployment `python3 dev.py run` serves holds the first-party plugins only; the example
plugin is installed for the test run alone (on its PYTHONPATH), never offered to a client."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent
EXAMPLES_SITE = REPO / ".venv" / "examples-site"


def _entry_points(pythonpath: str | None) -> set[str]:
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    if pythonpath:
        env["PYTHONPATH"] = pythonpath
    code = (
        "import importlib.metadata as md, json;"
        "print(json.dumps(sorted(e.name for e in md.entry_points(group='mcp_gateway.plugins'))))"
    )
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True)
    return set(json.loads(out.stdout))


@pytest.mark.skipif(not EXAMPLES_SITE.is_dir(), reason="run through `python3 dev.py test`")
def test_deployment_venv_offers_no_example_plugin():
    deployed = _entry_points(None)
    assert {"queue", "scrape", "gitea"} <= deployed
    assert "notes" not in deployed
    assert "notes" in _entry_points(str(EXAMPLES_SITE))


def _dev_script():
    import importlib.util

    spec = importlib.util.spec_from_file_location("dev_script", REPO / "dev.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_run_installs_the_deployment_and_test_adds_the_test_tools():
    dev = _dev_script()
    run, test = dev.run_args(), dev.test_args()
    editable = [run[i + 1] for i, a in enumerate(run) if a == "-e"]
    assert editable == [str(p) for p in dev.runtime()]
    assert {Path(p).relative_to(REPO).as_posix() for p in editable[1:]} == {
        f"plugins/{p.name}" for p in (REPO / "plugins").iterdir() if (p / "pyproject.toml").exists()
    }
    # No extra, no test-support distribution, no test tool in a deployment.
    assert not any("[" in a or "testing" in a or "pytest" in a for a in run)
    assert {str(p) for p in dev.support()} <= set(test)
    assert any(a.startswith("pytest") for a in test) and "-e" in test
    # This repo's own distributions come from their folders, never from an index.
    assert not any(a.startswith("mcp-plugin-gateway") for a in test)


def test_the_suite_runs_on_one_worker_per_core_plus_one_unless_the_arguments_choose():
    dev = _dev_script()
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    spread = ["--numprocesses", str((cores or 1) + 1), "--dist", "loadscope"]
    assert dev.parallel([]) == spread
    assert dev.parallel(["-q", "-p", "no:cacheprovider", "tests/test_http.py", "-x"]) == spread
    for chosen in (["-n", "0"], ["-n0"], ["--numprocesses=3"], ["-p", "no:xdist"], ["--dist=no"]):
        assert dev.parallel(["-q", *chosen]) == [], chosen


@pytest.mark.skipif(not EXAMPLES_SITE.is_dir(), reason="run through `python3 dev.py test`")
def test_setup_says_nothing_when_nothing_changed():
    done = subprocess.run(
        [sys.executable, str(REPO / "dev.py"), "setup"], capture_output=True, text=True, timeout=600
    )
    assert done.returncode == 0 and done.stdout == "" and done.stderr == "", done.stderr


def _on_a_terminal(argv: list[str], env: dict[str, str]) -> tuple[str, int]:
    """Run ``argv`` with a pseudo-terminal as its controlling terminal (stdin, stdout, stderr),
    wait for the 'serving' line, type Ctrl-C, and return everything shown and the exit code."""
    import fcntl
    import pty
    import select
    import termios
    import time

    master, slave = pty.openpty()

    def controlling_terminal() -> None:
        fcntl.ioctl(0, termios.TIOCSCTTY, 0)

    proc = subprocess.Popen(
        argv,
        stdin=slave,
        stdout=slave,
        stderr=slave,
        env=env,
        cwd=REPO,
        start_new_session=True,
        preexec_fn=controlling_terminal,
    )
    os.close(slave)
    shown = b""
    deadline = time.monotonic() + 120
    typed = False
    try:
        while time.monotonic() < deadline:
            ready, _, _ = select.select([master], [], [], 0.2)
            if ready:
                try:
                    chunk = os.read(master, 4096)
                except OSError:  # the terminal's other side closed: the process ended
                    break
                if not chunk:
                    break
                shown += chunk
            if not typed and b"Ctrl-C to stop" in shown:
                os.write(master, b"\x03")  # the terminal turns it into SIGINT, as for a person
                typed = True
            if typed and proc.poll() is not None:
                break
        code = proc.wait(timeout=30)
    finally:
        if proc.poll() is None:
            proc.kill()
        os.close(master)
    return shown.decode(errors="replace"), code


def _env(**extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("MCP_GATEWAY_")}
    return {**env, **extra}


@pytest.mark.e2e
def test_serve_on_a_terminal_says_what_it_serves_and_ctrl_c_ends_it_quietly(tmp_path):
    exe = Path(sys.executable).parent / "mcp-gateway"
    shown, code = _on_a_terminal([str(exe), "serve"], _env(MCP_GATEWAY_PLUGINS="queue"))
    assert "mcp-gateway: serving 3 tools over stdio; Ctrl-C to stop" in shown, shown
    assert code == 0 and "Traceback" not in shown and "KeyboardInterrupt" not in shown, shown


@pytest.mark.e2e
def test_serve_on_a_terminal_says_which_tools_wait_and_for_which_variable(tmp_path):
    exe = Path(sys.executable).parent / "mcp-gateway"
    shown, code = _on_a_terminal([str(exe), "serve"], _env(MCP_GATEWAY_PLUGINS="orchestrator"))
    assert (
        "mcp-gateway: serving 1 tool over stdio; 30 tools wait for COCKPIT_API_URL; Ctrl-C to stop"
        in shown
    ), shown
    assert code == 0


@pytest.mark.e2e
@pytest.mark.skipif(not EXAMPLES_SITE.is_dir(), reason="run through `python3 dev.py test`")
def test_dev_run_on_a_terminal_serves_and_ctrl_c_ends_it_quietly():
    shown, code = _on_a_terminal(
        [sys.executable, str(REPO / "dev.py"), "run"],
        _env(MCP_GATEWAY_PLUGINS="queue,gitea", GITEA_URL="http://127.0.0.1:9"),
    )
    assert "serving 8 tools over stdio; Ctrl-C to stop" in shown, shown
    assert code == 0 and "Traceback" not in shown, shown
    assert "dev:" not in shown  # set up already: nothing to say


def test_version_names_the_core_and_every_installed_plugin(tmp_path, cli_main):
    import importlib.metadata as md

    # The entry point in this process: the console script itself starts in the tests above.
    out = cli_main(tmp_path, "--version", env=_env())
    assert out.returncode == 0 and out.stderr == ""
    lines = out.stdout.splitlines()
    assert lines[0] == f"mcp-plugin-gateway {md.version('mcp-plugin-gateway')}"
    expected = sorted(
        f"plugin {ep.name}: {ep.dist.name} {ep.dist.version}"
        for ep in md.entry_points(group="mcp_gateway.plugins")
        if ep.dist is not None
    )
    assert lines[1:] == expected and len(expected) >= 5
