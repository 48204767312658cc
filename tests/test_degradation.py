"""A dead, black-holed or failing backend degrades its own tools, nothing else."""

from __future__ import annotations

import os
import re
import sys
import time

import anyio
import pytest
from backends import backend, closed_port_url
from conftest import gateway_env
from fixture_plugins import GOOD, SVC
from mcp import Client, StdioServerParameters

from gateway.testing import make_gateway, tool_error
from gateway.testing.backends import FakeBackend, FaultMode, ReceivedRequest, Reply


@pytest.fixture
def svc_installed(plugin_site):
    plugin_site(
        "gwfx-svc", {"svc": "gwfx_svc", "good": "gwfx_good"}, {"gwfx_svc": SVC, "gwfx_good": GOOD}
    )


def _gw(tmp_path, url, **env_vars):
    env = (
        dict(os.environ, SVC_URL=url, **env_vars)
        if url
        else {k: v for k, v in os.environ.items() if k != "SVC_URL"}
    )
    return make_gateway(
        plugins=["svc", "good"],
        env=env,
        cwd=tmp_path,
        breaker_failures=2,
        breaker_reset_seconds=0.5,
    )


@pytest.mark.anyio
async def test_refused_connections_give_backend_unavailable_then_the_breaker_fails_fast(
    svc_installed, tmp_path
):
    gw = _gw(tmp_path, closed_port_url())
    async with gw:
        for _ in range(2):
            r = await gw.call("svc_fetch")
            assert r.code == "BACKEND_UNAVAILABLE" and r.payload["error"]["retryable"] is True
        fast = await gw.call("svc_fetch")
        assert fast.code == "BACKEND_UNAVAILABLE"
        assert (
            "'svc'" in fast.payload["error"]["message"]
            and "retry after" in fast.payload["error"]["message"]
        )
        assert gw.health.breaker_states()["svc"]["state"] == "open"
        # Other plugins are untouched.
        ok = await gw.call("good_echo", {"text": "fine"})
        assert not ok.is_error


@pytest.mark.anyio
async def test_a_black_holed_backend_times_out_within_the_tool_timeout_and_recovers_half_open(
    svc_installed, tmp_path
):
    with backend() as b:
        b.mode = "hang"
        gw = _gw(tmp_path, b.url)
        async with gw:
            for _ in range(2):
                started = time.monotonic()
                r = await gw.call("svc_fetch")
                assert r.code == "TIMEOUT" and r.payload["error"]["retryable"] is True
                assert time.monotonic() - started < 5  # the 1 s tool timeout, not the client's 30 s
            assert (
                await gw.call("svc_fetch")
            ).code == "BACKEND_UNAVAILABLE"  # open: no request sent
            seen = b.requests
            assert (await gw.call("svc_fetch")).code == "BACKEND_UNAVAILABLE"
            assert b.requests == seen
            b.mode = "ok"
            await anyio.sleep(0.6)  # past breaker_reset_seconds: half-open lets one probe through
            probe = await gw.call("svc_fetch")
            assert not probe.is_error and probe.payload["value"] == 42
            assert gw.health.breaker_states()["svc"]["state"] == "closed"


class _Svc(FakeBackend):
    def respond(self, request: ReceivedRequest) -> Reply:
        return Reply.json({"value": 42, "path": request.path})


@pytest.mark.anyio
async def test_calls_resume_soon_after_the_backend_is_back_not_after_the_reset_time(
    svc_installed, tmp_path
):
    # The breaker's own half-open probe would come after breaker_reset_seconds (60 s here);
    # the health check run in the background a few seconds apart closes it first.
    with _Svc() as svc:
        gw = make_gateway(
            plugins=["svc"],
            env=dict(os.environ, SVC_URL=svc.url, SVC_TIMEOUT="10"),
            cwd=tmp_path,
            breaker_failures=2,
            breaker_reset_seconds=60,
        )
        async with gw:
            assert not (await gw.call("svc_fetch")).is_error
            svc.mode = FaultMode.REFUSE  # down: nothing listens on its port
            for _ in range(2):
                assert (await gw.call("svc_fetch")).code == "BACKEND_UNAVAILABLE"
            paused = await gw.call("svc_fetch")
            assert "paused" in paused.payload["error"]["message"]
            assert gw.health.breaker_states()["svc"]["state"] == "open"
            svc.mode = FaultMode.NORMAL  # back, on the same port
            with anyio.fail_after(20):  # a third of the reset time: only a probe explains it
                while (result := await gw.call("svc_fetch")).is_error:
                    assert result.code == "BACKEND_UNAVAILABLE"
                    await anyio.sleep(0.2)
            assert result.payload["value"] == 42
            assert gw.health.breaker_states()["svc"]["state"] == "closed"
            assert [r.path for r in svc.requests][-2:] == ["/health", "/data"]


@pytest.mark.anyio
async def test_a_backend_that_stays_down_is_probed_one_check_at_a_time_until_shutdown(
    svc_installed, tmp_path
):
    with backend() as b:
        b.mode = "hang"  # every check runs into its timeout (1 s)
        gw = make_gateway(
            plugins=["svc"],
            env=dict(os.environ, SVC_URL=b.url),
            cwd=tmp_path,
            breaker_failures=2,
            breaker_reset_seconds=60,
        )
        gw.health.probe_seconds = 0.1  # many chances to overlap, had it a mind to
        async with gw:
            pings = sys.modules["gwfx_svc"].PINGS
            for _ in range(2):
                assert (await gw.call("svc_fetch")).code == "TIMEOUT"
            opened = time.monotonic()
            assert gw.health.breaker_states()["svc"]["state"] == "open"
            with anyio.fail_after(30):
                while pings["started"] < 3:
                    await anyio.sleep(0.05)
            # Failed probes do not extend the pause (they would make it start again): the
            # reset time still counts from the opening, so the promised wait has shrunk.
            message = (await gw.call("svc_fetch")).payload["error"]["message"]
            wait = int(re.search(r"retry after (\d+) s", message).group(1))
            assert wait <= 60 - (time.monotonic() - opened) + 1
            assert "checked every 0.1 s" in message
        # Stopped with the gateway: none running, none started afterwards.
        stopped_at = pings["started"]
        assert pings["running"] == 0
        await anyio.sleep(0.5)
        assert pings["started"] == stopped_at
    assert pings["most"] == 1


@pytest.mark.anyio
async def test_a_failed_half_open_probe_opens_the_breaker_again(svc_installed, tmp_path):
    gw = _gw(tmp_path, closed_port_url())
    async with gw:
        for _ in range(2):
            await gw.call("svc_fetch")
        await anyio.sleep(0.6)
        assert (await gw.call("svc_fetch")).code == "BACKEND_UNAVAILABLE"  # the probe, refused
        assert gw.health.breaker_states()["svc"]["state"] == "open"


@pytest.mark.anyio
async def test_http_500_is_a_backend_error_and_does_not_open_the_breaker(svc_installed, tmp_path):
    with backend() as b:
        b.mode = "error"
        gw = _gw(tmp_path, b.url, SVC_TIMEOUT="10")  # every 500 in time, however loaded
        async with gw:
            for _ in range(3):
                r = await gw.call("svc_fetch")
                assert r.code == "BACKEND_ERROR", r.payload
                assert "500" in r.payload["error"]["message"]
            assert gw.health.breaker_states()["svc"]["state"] == "closed"


@pytest.mark.anyio
async def test_an_unconfigured_backend_is_reported_as_such_not_as_a_crash(svc_installed, tmp_path):
    gw = _gw(tmp_path, None)
    async with gw:
        r = await gw.call("svc_fetch")
        status = await gw.status()
    assert r.code == "BACKEND_UNAVAILABLE"
    assert "set SVC_URL" in r.payload["error"]["message"]
    checks = {c["check"]: c for p in status["plugins"] for c in p["health"]}
    assert checks["svc_ping"]["status"] == "unconfigured"


@pytest.mark.anyio
async def test_health_checks_of_a_black_holed_backend_finish_within_their_timeout(
    svc_installed, tmp_path
):
    with backend() as b:
        b.mode = "hang"
        gw = _gw(tmp_path, b.url)
        async with gw:
            with anyio.fail_after(4):
                results = await gw.health.run(use_cache=False)
    assert [r.status for r in results if r.name == "svc_ping"] == ["timeout"]


@pytest.mark.e2e
@pytest.mark.anyio
async def test_stdio_gateway_starts_at_once_and_survives_every_backend_failure(
    svc_installed, tmp_path
):
    with backend() as b:
        b.mode = "hang"
        env = gateway_env(
            PYTHONPATH=os.environ["PYTHONPATH"],
            SVC_URL=b.url,
            # The client's read timeout must end each call, not the tool's (twice as long):
            # only the backend's own timeout counts for its breaker, and on a loaded machine
            # the half second between the two of the default was not always enough.
            SVC_TIMEOUT="2",
            MCP_GATEWAY_PLUGINS="svc,good",
            MCP_GATEWAY_BREAKER_FAILURES="2",
        )
        params = StdioServerParameters(
            command=sys.executable, args=["-m", "gateway.cli", "serve"], cwd=str(tmp_path), env=env
        )
        with anyio.fail_after(60):
            async with Client(params, mode="legacy") as client:
                # initialize and tools/list do not wait for the black-holed backend
                names = {t.name for t in (await client.list_tools()).tools}
                assert {"svc_fetch", "good_echo"} <= names
                codes = [
                    tool_error(await client.call_tool("svc_fetch", {}))["code"] for _ in range(3)
                ]
                assert codes == ["TIMEOUT", "TIMEOUT", "BACKEND_UNAVAILABLE"]
                b.mode = "error"
                echo = await client.call_tool("good_echo", {"text": "alive"})
                assert echo.structured_content == {"echo": "alive"}
                status = await client.call_tool("gateway_status", {})
                assert status.structured_content["backends"]["svc"]["state"] in {
                    "open",
                    "half_open",
                }


@pytest.mark.anyio
async def test_check_raising_not_initialized_is_reported_not_failed(gateway_factory):
    from gateway import HealthCheck, NotInitialized, hookimpl

    class Fresh:
        @hookimpl
        def register_health_checks(self, register):
            async def store() -> str:
                raise NotInitialized("data/x.db does not exist yet; the first import creates it")

            register(HealthCheck(name="store", check=store, backend="store"))

    gw = gateway_factory(objects={"fresh": Fresh()}, entry_points=False)
    async with gw:
        [result] = await gw.health.run(plugin="fresh", use_cache=False)
        status = await gw.status()
    assert result.status == "uninitialized" and not result.blocking
    assert "first import creates it" in (result.detail or "")
    assert status["backends"].get("store", {}).get("state", "closed") == "closed"
