"""What reaches stderr when something goes wrong outside a call: one sanitized line, never a
Python traceback with absolute paths."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest
from conftest import gateway_env
from wire import run_cli

pytestmark = pytest.mark.e2e

THREAD_AND_DEL = """
import threading

class Leaky:
    def __del__(self):
        raise RuntimeError("cleanup failed in " + __file__)

def work():
    raise ValueError("worker failed in " + __file__)

t = threading.Thread(target=work, name="plugin-worker")
t.start()
t.join()
Leaky()  # dropped at once: its __del__ raises, which Python reports as unraisable
"""


def _no_traceback_or_absolute_path(text: str, *paths: Path) -> None:
    assert "Traceback (most recent call last)" not in text, text
    for path in (Path(sys.executable).parent, Path(__file__).parent, *paths):
        assert str(path.resolve()) not in text, (path, text)


def test_a_plugin_thread_and_an_unraisable_exception_log_one_line_each(plugin_site, tmp_path):
    site = plugin_site("gwfx-crashy", {"crashy": "gwfx_crashy"}, {"gwfx_crashy": THREAD_AND_DEL})
    env = gateway_env(PYTHONPATH=os.environ["PYTHONPATH"], MCP_GATEWAY_PLUGINS="crashy")
    run = run_cli(tmp_path, env, "plugins")
    assert run.returncode == 0
    _no_traceback_or_absolute_path(run.stderr, site)
    lines = run.stderr.splitlines()
    [worker] = [x for x in lines if "unexpected ValueError in thread plugin-worker" in x]
    assert "worker failed in " in worker and "gwfx_crashy.py:" in worker
    [unraisable] = [x for x in lines if "unexpected RuntimeError was ignored" in x]
    assert "cleanup failed in " in unraisable


def test_arguments_nested_too_deeply_on_the_command_line_are_a_usage_error(tmp_path):
    deep = '{"check_health": ' + "[" * 30_000 + "]" * 30_000 + "}"
    run = run_cli(
        tmp_path,
        gateway_env(MCP_GATEWAY_PLUGINS="gateway"),
        "call",
        "gateway_status",
        "--args",
        deep,
    )
    assert run.returncode == 2
    assert "--args is nested too deeply" in run.stderr
    _no_traceback_or_absolute_path(run.stderr)
