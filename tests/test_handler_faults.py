"""A handler cannot end the process; real cancellation and shutdown still work."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time

import anyio
import pytest
from conftest import gateway_env
from fixture_plugins import FAULTS
from mcp import Client, StdioServerParameters

from gateway.testing import make_gateway, tool_error

FAULTY = ["faults_exit", "faults_interrupt", "faults_stray_cancel", "faults_cancelled_future"]


@pytest.fixture
def faults(plugin_site):
    plugin_site("gwfx-faults", {"faults": "gwfx_faults"}, {"gwfx_faults": FAULTS})
    import gwfx_faults  # type: ignore[import-not-found]

    return gwfx_faults


@pytest.mark.anyio
@pytest.mark.parametrize("tool", FAULTY)
async def test_a_handler_raising_a_process_ending_exception_gives_internal_error(
    faults, tmp_path, tool
):
    gw = make_gateway(plugins=["faults"], cwd=tmp_path)
    async with gw:
        result = await gw.call(tool)
        assert result.code == "INTERNAL_ERROR" and result.payload["error"]["correlation_id"]
        assert not (await gw.call("gateway_status", {"check_health": False})).is_error


@pytest.mark.anyio
async def test_cancelling_the_call_still_cancels_the_handler(faults, tmp_path):
    gw = make_gateway(plugins=["faults"], cwd=tmp_path)
    async with gw:
        with anyio.move_on_after(0.3) as scope:
            await gw.call("faults_sleep")
        assert scope.cancelled_caught  # the cancellation came out of the pipeline, not a result
        async with anyio.create_task_group() as tg:  # shutdown: the server's task group goes
            tg.start_soon(gw.call, "faults_sleep")
            await anyio.sleep(0.2)
            tg.cancel_scope.cancel()
    assert faults.STATE["cancelled"] == 2


def _params(tmp_path, plugins: str = "faults") -> StdioServerParameters:
    env = gateway_env(PYTHONPATH=os.environ["PYTHONPATH"], MCP_GATEWAY_PLUGINS=plugins)
    return StdioServerParameters(
        command=sys.executable, args=["-m", "gateway.cli", "serve"], cwd=str(tmp_path), env=env
    )


CHECK_EXITS = """
from gateway import HealthCheck, hookimpl

async def boom():
    raise SystemExit(3)

@hookimpl
def register_health_checks(register):
    register(HealthCheck(name="boom", check=boom))
"""


@pytest.mark.e2e
@pytest.mark.anyio
async def test_the_stdio_server_survives_faulty_handlers_and_health_checks_and_honours_cancellation(
    faults, plugin_site, tmp_path
):
    plugin_site("gwfx-hcexit", {"hcexit": "gwfx_hcexit"}, {"gwfx_hcexit": CHECK_EXITS})
    with anyio.fail_after(60):
        async with Client(_params(tmp_path, "faults,hcexit"), mode="legacy") as client:
            for tool in FAULTY:
                error = tool_error(await client.call_tool(tool, {}))
                assert error["code"] == "INTERNAL_ERROR", tool
            with anyio.move_on_after(0.5):
                await client.call_tool("faults_sleep", {})  # cancelled by the client
            status = await client.call_tool("gateway_status", {"check_health": False})
            assert not status.is_error
            # A health check raising SystemExit is a failed check, not the end.
            checked = (await client.call_tool("gateway_status", {})).structured_content
            assert checked is not None
            [check] = next(p for p in checked["plugins"] if p["name"] == "hcexit")["health"]
            assert check["status"] == "failed" and check["detail"] == "SystemExit"
            assert (await client.list_tools()).tools  # still serving


def _rpc(proc: subprocess.Popen[bytes], id_: int, method: str, params: dict) -> None:
    assert proc.stdin is not None
    proc.stdin.write(
        json.dumps({"jsonrpc": "2.0", "id": id_, "method": method, "params": params}).encode()
        + b"\n"
    )
    proc.stdin.flush()


def _start(tmp_path) -> subprocess.Popen[bytes]:
    params = _params(tmp_path)
    proc = subprocess.Popen(
        [params.command, *params.args],
        cwd=tmp_path,
        env=params.env,
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
    )
    init = {
        "protocolVersion": "2025-06-18",
        "capabilities": {},
        "clientInfo": {"name": "t", "version": "1"},
    }
    _rpc(proc, 1, "initialize", init)
    assert proc.stdout is not None and json.loads(proc.stdout.readline())["id"] == 1
    proc.stdin.write(b'{"jsonrpc":"2.0","method":"notifications/initialized"}\n')  # type: ignore[union-attr]
    _rpc(proc, 2, "tools/call", {"name": "faults_sleep", "arguments": {}})
    time.sleep(0.5)  # the handler is sleeping now
    return proc


@pytest.mark.e2e
@pytest.mark.parametrize("how", ["sigint", "sigterm", "stdin closed"])
def test_the_stdio_server_still_shuts_down_during_a_call(faults, tmp_path, how):
    proc = _start(tmp_path)
    try:
        if how == "sigint":
            proc.send_signal(signal.SIGINT)
        elif how == "sigterm":
            proc.send_signal(signal.SIGTERM)
        else:
            assert proc.stdin is not None
            proc.stdin.close()
        proc.wait(timeout=15)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert proc.returncode is not None
