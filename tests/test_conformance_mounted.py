"""The official conformance suite through mounted servers: ``serve --transport http`` fronting
a server that passes scenarios passes them as that server does alone.

- Issue 37, the tool scenarios: the server (``conformance_upstream.py``) is measured served by
  itself over Streamable HTTP, and mounted over stdio behind the gateway, which the suite then
  speaks to over its own HTTP transport (the 2026-07-28 wire; the gateway talks 2025-11-25 to
  the server).
- Issue 38, every required scenario: a second gateway serving the test-support plugin of the
  suite's fixtures (testing/conformance), which passes all 37 by itself (test_conformance.py),
  mounted over stdio: its resources, templates, prompts, completions and input requests pass
  through the front gateway, whether it is mounted at 2026-07-28 (``protocol =
  "2026-07-28"``: its input-required results are passed on) or at the default 2025-11-25 (it
  asks over its own connection mid-call; the front parks the call and asks the 2026-07-28
  client with input-required results, gateway.asking.Parking).
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from conformance import (
    FIXTURES_PLUGIN,
    REQUIRED,
    Run,
    Suite,
    conformance_suite,
    fixtures_site,
    run_server_suite,
)
from conftest import gateway_env
from wire import HttpServer, free_port

pytestmark = pytest.mark.e2e

UPSTREAM = Path(__file__).with_name("conformance_upstream.py")
#: The scenarios of tools: the server passes each alone, and so must the gateway in front of it.
TOOL_SCENARIOS = [
    "tools-list",
    "tools-call-simple-text",
    "tools-call-image",
    "tools-call-audio",
    "tools-call-embedded-resource",
    "tools-call-mixed-content",
    "tools-call-error",
    "tools-call-with-progress",
    "json-schema-2020-12",
]


@pytest.fixture(scope="module")
def suite() -> Iterator[Suite]:
    with conformance_suite() as found:
        if isinstance(found, str):
            pytest.skip(f"{found}: needed to run the MCP conformance suite")
        yield found


@pytest.fixture(scope="module")
def alone(suite: Suite, tmp_path_factory: pytest.TempPathFactory) -> Run:
    cwd = tmp_path_factory.mktemp("conformance-alone")
    port = free_port()
    proc = subprocess.Popen(
        [sys.executable, str(UPSTREAM), "http", str(port)],
        cwd=cwd,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        with httpx.Client() as client:
            for _ in range(300):
                try:
                    client.get(f"http://127.0.0.1:{port}/", timeout=1)
                    break
                except httpx.TransportError:
                    if proc.poll() is not None:
                        raise AssertionError("the conformance upstream exited") from None
                    time.sleep(0.1)
        return run_server_suite(suite, f"http://127.0.0.1:{port}/mcp", cwd / "results")
    finally:
        proc.terminate()
        proc.wait(timeout=20)


@pytest.fixture(scope="module")
def gateway(tmp_path_factory: pytest.TempPathFactory) -> Iterator[HttpServer]:
    """``serve --transport http`` with the upstream mounted over stdio."""
    cwd = tmp_path_factory.mktemp("conformance-mounted")
    config = cwd / "gw.toml"
    config.write_text(
        f'[servers.conformance]\ncommand = "{sys.executable}"\nargs = ["{UPSTREAM}", "stdio"]\n'
    )
    env = gateway_env(MCP_GATEWAY_CONFIG=str(config), MCP_GATEWAY_PLUGINS="servers")
    with HttpServer(cwd, env) as server:
        yield server


@pytest.fixture(scope="module")
def mounted(suite: Suite, gateway: HttpServer, tmp_path_factory: pytest.TempPathFactory) -> Run:
    return run_server_suite(suite, f"{gateway.url}/mcp", tmp_path_factory.mktemp("results"))


def test_the_server_alone_passes_every_tool_scenario(alone: Run) -> None:
    failing = {
        n: alone.scenarios[n].failures() for n in TOOL_SCENARIOS if not alone.scenarios[n].passed
    }
    assert not failing, failing


@pytest.mark.parametrize("scenario", TOOL_SCENARIOS)
def test_through_the_gateway_a_tool_scenario_passes_as_the_server_alone(
    alone: Run, mounted: Run, scenario: str
) -> None:
    assert alone.scenarios[scenario].passed
    result = mounted.scenarios[scenario]
    assert result.passed, "\n".join(result.failures())


MODERN = "2026-07-28"


def modern_call(gateway: HttpServer, accept: str) -> httpx.Response:
    """A 2026-07-28 ``tools/call`` of the tool that reports progress."""
    meta = {
        "progressToken": "p-1",
        "io.modelcontextprotocol/protocolVersion": MODERN,
        "io.modelcontextprotocol/clientInfo": {"name": "test", "version": "1"},
        "io.modelcontextprotocol/clientCapabilities": {},
    }
    body = {
        "jsonrpc": "2.0",
        "id": 7,
        "method": "tools/call",
        "params": {"name": "test_tool_with_progress", "arguments": {}, "_meta": meta},
    }
    headers = {
        "Content-Type": "application/json",
        "Accept": accept,
        "MCP-Protocol-Version": MODERN,
        "Mcp-Method": "tools/call",
        "Mcp-Name": "test_tool_with_progress",
    }
    return gateway.client.post(f"{gateway.url}/mcp", json=body, headers=headers, timeout=30)


def test_a_2026_call_streams_progress_to_a_client_that_takes_event_streams(
    gateway: HttpServer,
) -> None:
    streamed = modern_call(gateway, "application/json, text/event-stream")
    plain = modern_call(gateway, "application/json")
    assert streamed.status_code == 200 and plain.status_code == 200
    assert streamed.headers["content-type"].startswith("text/event-stream")
    events = [
        json.loads(line[5:]) for line in streamed.text.splitlines() if line.startswith("data:")
    ]
    progress = [
        e["params"]["progress"] for e in events if e.get("method") == "notifications/progress"
    ]
    assert progress == [0, 50, 100]
    assert events[-1]["result"]["content"][0]["text"] == "Progress complete"
    # A client that takes JSON only gets the result as before, without the progress.
    assert plain.headers["content-type"].startswith("application/json")
    assert plain.json()["result"]["content"][0]["text"] == "Progress complete"


# -- every required scenario, through a gateway mounting a gateway ------------------------------------


def front(tmp: Path, protocol: str | None) -> HttpServer:
    """A gateway serving nothing of its own but a second gateway, mounted over stdio, that
    serves the fixtures' plugin."""
    site = fixtures_site(tmp / "site")
    protocol_line = f'protocol = "{protocol}"\n' if protocol else ""
    (tmp / "gw.toml").write_text(
        "[servers.fixtures]\n"
        f'command = "{sys.executable}"\n'
        'args = ["-m", "gateway.cli", "serve"]\n'
        f'env = {{ PYTHONPATH = "{site}", MCP_GATEWAY_PLUGINS = "{FIXTURES_PLUGIN}", '
        'MCP_GATEWAY_ISOLATE = "none" }\n' + protocol_line
    )
    env = gateway_env(MCP_GATEWAY_CONFIG=str(tmp / "gw.toml"), MCP_GATEWAY_PLUGINS="servers")
    return HttpServer(tmp, env)


@pytest.fixture(scope="module", params=["2026-07-28", None], ids=["2026-mount", "2025-mount"])
def through_a_mount(
    request: pytest.FixtureRequest, suite: Suite, tmp_path_factory: pytest.TempPathFactory
) -> Run:
    cwd = tmp_path_factory.mktemp("gateway-behind-gateway")
    with front(cwd, request.param) as server:
        return run_server_suite(suite, f"{server.url}/mcp", cwd / "results")


@pytest.mark.parametrize("scenario", REQUIRED)
def test_a_gateway_fronting_a_gateway_passes_every_required_scenario(
    through_a_mount: Run, scenario: str
) -> None:
    result = through_a_mount.scenarios[scenario]
    assert result.passed, "\n".join(result.failures())
