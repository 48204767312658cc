"""stdout carries only the protocol (or the CLI's output), whatever plugins write or read."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest
from conftest import gateway_env
from fixture_plugins import NOISY

pytestmark = pytest.mark.e2e

INIT = {
    "protocolVersion": "2025-06-18",
    "capabilities": {},
    "clientInfo": {"name": "t", "version": "1"},
}


def _line(id_: int | None, method: str, params: dict) -> bytes:
    msg: dict = {"jsonrpc": "2.0", "method": method, "params": params}
    if id_ is not None:
        msg["id"] = id_
    return json.dumps(msg).encode() + b"\n"


@pytest.fixture
def noisy(plugin_site):
    plugin_site("gwfx-noisy", {"noisy": "gwfx_noisy"}, {"gwfx_noisy": NOISY})


def test_plugin_output_at_load_time_and_in_handlers_never_reaches_the_wire(noisy, tmp_path):
    requests = b"".join(
        [
            _line(1, "initialize", INIT),
            _line(None, "notifications/initialized", {}),
            _line(2, "tools/list", {}),
            _line(3, "tools/call", {"name": "noisy_echo", "arguments": {"text": "hi"}}),
        ]
    )
    env = gateway_env(PYTHONPATH=os.environ["PYTHONPATH"], MCP_GATEWAY_PLUGINS="noisy")
    proc = subprocess.Popen(
        [sys.executable, "-m", "gateway.cli", "serve"],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        cwd=tmp_path,
        env=env,
    )
    assert proc.stdin is not None and proc.stdout is not None
    proc.stdin.write(requests)
    proc.stdin.flush()
    answered = [proc.stdout.readline() for _ in range(3)]  # the server answers in order here
    proc.stdin.close()  # then stdin ends: the server shuts down, flushing what plugins left
    assert proc.stderr is not None
    rest, err = proc.stdout.read(), proc.stderr.read()  # both end when the process exits
    proc.wait(timeout=30)
    stdout = b"".join(answered) + rest
    messages = [json.loads(line) for line in stdout.decode().splitlines()]  # all JSON-RPC
    assert [m.get("id") for m in messages] == [1, 2, 3]
    assert all(m["jsonrpc"] == "2.0" for m in messages)
    result = messages[2]["result"]
    # The plugin's stdin read at import saw nothing: the protocol's bytes were not its to take.
    assert result["structuredContent"] == {"stdin_at_import": "", "echo": "hi"}
    stderr = err.decode()
    for noise in (
        "print at import",
        "raw fd 1 write at import",
        "print in register_tools",
        "print in open_resources",
        "raw write in open_resources",
        "print in the handler",
        "raw write in the handler",
        "unflushed, no newline",
    ):
        assert f"noise: {noise}" in stderr
        assert noise not in stdout.decode()


def test_cli_json_output_stays_parseable_when_a_plugin_prints(noisy, tmp_path):
    env = gateway_env(PYTHONPATH=os.environ["PYTHONPATH"], MCP_GATEWAY_PLUGINS="noisy")
    proc = subprocess.run(
        [sys.executable, "-m", "gateway.cli", "tools", "--json"],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert proc.returncode == 0
    assert {t["name"] for t in json.loads(proc.stdout)} == {"gateway_status", "noisy_echo"}
    assert "noise: print at import" in proc.stderr
    call = subprocess.run(
        [sys.executable, "-m", "gateway.cli", "call", "noisy_echo", "--args", '{"text": "x"}'],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert json.loads(call.stdout)["echo"] == "x" and "noise: print in the handler" in call.stderr
