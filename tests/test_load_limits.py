"""A load-time hook that overruns its limit, blocking or not, is skipped; start-up goes on."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time

import pytest
from conftest import gateway_env
from fixture_plugins import GOOD, KEEPS, SLOW

from gateway.plugins import PluginState
from gateway.testing import make_gateway

EXPECTED = {
    "slow_import": "import did not finish within 0.5 s",
    "slow_settings": "hook plugin_settings did not finish within 0.5 s",
    "slow_tools": "hook register_tools did not finish within 0.5 s",
    "slow_open_sync": "open_resources did not finish within 0.5 s",
    "slow_open_blocking": "open_resources did not finish within 0.5 s",
    "slow_open_await": "open_resources did not finish within 0.5 s",
}


@pytest.fixture
def slow(plugin_site):
    modules = {"gwfx_good": GOOD, "gwfx_keeps": KEEPS} | {f"gwfx_{k}": v for k, v in SLOW.items()}
    eps = {"good": "gwfx_good", "keeps": "gwfx_keeps"} | {k: f"gwfx_{k}" for k in SLOW}
    plugin_site("gwfx-slow", eps, modules)


@pytest.mark.anyio
async def test_overrunning_hooks_are_skipped_and_the_rest_serves(slow, tmp_path):
    started = time.monotonic()
    gw = make_gateway(
        plugins=["good", "keeps", *SLOW], cwd=tmp_path, load_timeout=0.5, resource_timeout=0.5
    )
    async with gw:
        elapsed = time.monotonic() - started
        records = {p.name: p for p in gw.plugins}
        for name, reason in EXPECTED.items():
            assert records[name].state is PluginState.FAILED, name
            assert reason in (records[name].reason or ""), (name, records[name].reason)
        assert not (await gw.call("good_echo", {"text": "x"})).is_error
        # What open_resources opened lives in the server's thread and loop.
        kept = await gw.call("keeps_use")
        assert kept.payload == {"sqlite": 42, "client_open": True}, kept.payload
        assert (await gw.call("slow_open_blocking_echo", {"text": "x"})).code == "NOT_FOUND"
    assert elapsed < 6 * 0.5 + 5  # six overruns of ~0.5 s each, not six minutes


@pytest.mark.e2e
def test_stdio_start_up_goes_on_past_blocking_plugins(slow, tmp_path):
    env = gateway_env(
        PYTHONPATH=os.environ["PYTHONPATH"],
        MCP_GATEWAY_PLUGINS=",".join(["good", *SLOW]),
        MCP_GATEWAY_LOAD_TIMEOUT="0.5",
        MCP_GATEWAY_RESOURCE_TIMEOUT="0.5",
    )
    init = {
        "protocolVersion": "2025-06-18",
        "capabilities": {},
        "clientInfo": {"name": "t", "version": "1"},
    }
    requests = [
        {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": init},
        {"jsonrpc": "2.0", "method": "notifications/initialized"},
        {"jsonrpc": "2.0", "id": 2, "method": "tools/list", "params": {}},
    ]
    proc = subprocess.Popen(
        [sys.executable, "-m", "gateway.cli", "serve"],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        cwd=tmp_path,
        env=env,
    )
    assert proc.stdin is not None and proc.stdout is not None
    try:
        started = time.monotonic()
        proc.stdin.write(b"".join(json.dumps(r).encode() + b"\n" for r in requests))
        proc.stdin.flush()
        proc.stdout.readline()
        listed = json.loads(proc.stdout.readline())
        elapsed = time.monotonic() - started
    finally:
        proc.kill()
        proc.wait()
    assert {t["name"] for t in listed["result"]["tools"]} == {"gateway_status", "good_echo"}
    assert elapsed < 20, elapsed
