"""The whole server side over real transports (issue 38): a ``mcp-gateway serve`` subprocess
serving the conformance fixtures' plugin (testing/conformance), spoken to over stdio by the
official SDK client and over HTTP byte by byte, on both protocol eras."""

from __future__ import annotations

import json
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anyio
import mcp_types as t
import pytest
from conformance import FIXTURES_PLUGIN, with_fixtures
from conftest import gateway_env
from mcp import Client, MCPError, StdioServerParameters
from wire import HttpServer, run_cli

pytestmark = pytest.mark.e2e

MODERN = "2026-07-28"
LEGACY = "2025-11-25"


def fixtures_env(tmp: Path, **extra: str) -> dict[str, str]:
    return with_fixtures(gateway_env(MCP_GATEWAY_PLUGINS=FIXTURES_PLUGIN, **extra), tmp / "site")


@pytest.fixture(scope="module")
def http(tmp_path_factory: pytest.TempPathFactory) -> Iterator[HttpServer]:
    cwd = tmp_path_factory.mktemp("fixtures-http")
    with HttpServer(cwd, fixtures_env(cwd)) as server:
        yield server


def post(server: HttpServer, body: dict[str, Any], version: str, accept: str) -> Any:
    headers = {
        "Content-Type": "application/json",
        "Accept": accept,
        "MCP-Protocol-Version": version,
    }
    if version == MODERN:
        headers["Mcp-Method"] = body["method"]
        if "name" in body.get("params", {}):
            headers["Mcp-Name"] = body["params"]["name"]
    return server.client.post(f"{server.url}/mcp", json=body, headers=headers, timeout=30)


def events(response: Any) -> list[dict[str, Any]]:
    return [json.loads(x[5:]) for x in response.text.splitlines() if x.startswith("data:")]


def call(name: str, meta: dict[str, Any] | None = None, **params: Any) -> dict[str, Any]:
    body = {"name": name, "arguments": {}, **params}
    if meta is not None:
        body["_meta"] = meta
    return {"jsonrpc": "2.0", "id": 9, "method": "tools/call", "params": body}


def modern_meta(**more: Any) -> dict[str, Any]:
    return {
        "io.modelcontextprotocol/protocolVersion": MODERN,
        "io.modelcontextprotocol/clientInfo": {"name": "wire-test", "version": "1"},
        "io.modelcontextprotocol/clientCapabilities": {},
        **more,
    }


BOTH = "application/json, text/event-stream"


def test_a_2025_call_asking_for_progress_is_answered_as_an_event_stream(http):
    streamed = post(http, call("test_tool_with_progress", {"progressToken": "p1"}), LEGACY, BOTH)
    assert streamed.headers["content-type"].startswith("text/event-stream")
    got = events(streamed)
    progress = [e["params"] for e in got if e.get("method") == "notifications/progress"]
    assert [(p["progressToken"], p["progress"]) for p in progress] == [
        ("p1", 0),
        ("p1", 50),
        ("p1", 100),
    ]
    assert got[-1]["result"]["content"][0]["text"] == "Progress complete"


@pytest.mark.parametrize(
    ("body", "accept"),
    [
        (call("test_tool_with_progress"), BOTH),  # no progressToken
        (call("test_tool_with_progress", {"progressToken": "p1"}), "application/json"),
        ({"jsonrpc": "2.0", "id": 1, "method": "tools/list", "params": {}}, BOTH),
    ],
)
def test_any_other_2025_request_is_answered_with_plain_json(http, body, accept):
    answer = post(http, body, LEGACY, accept)
    assert answer.status_code == 200
    assert answer.headers["content-type"].startswith("application/json")
    assert "result" in answer.json()


def test_a_2025_http_client_is_told_it_cannot_be_asked_for_input(http):
    answer = post(http, call("test_input_required_result_elicitation"), LEGACY, "application/json")
    result = answer.json()["result"]
    assert result["isError"] is True
    error = json.loads(result["content"][0]["text"])["error"]
    assert error["code"] == "PERMISSION_DENIED"
    assert "cannot carry" in error["message"] and "elicitation" in error["message"]


def test_a_2026_call_gets_log_messages_only_at_the_level_its_request_asks(http):
    quiet = post(http, call("test_logging_tool", modern_meta()), MODERN, BOTH)
    assert not [e for e in events(quiet) if e.get("method") == "notifications/message"]
    meta = modern_meta(**{"io.modelcontextprotocol/logLevel": "warning"})
    loud = post(http, call("test_logging_tool", meta), MODERN, BOTH)
    logged = [e["params"] for e in events(loud) if e.get("method") == "notifications/message"]
    assert [(p["level"], p["logger"]) for p in logged] == [("warning", "test_logging_tool")]


def test_a_2026_client_lacking_a_capability_gets_32021_and_http_400(http):
    answer = post(http, call("test_missing_capability", modern_meta()), MODERN, "application/json")
    assert answer.status_code == 400
    error = answer.json()["error"]
    assert error["code"] == -32021
    assert error["data"] == {"requiredCapabilities": {"sampling": {}}}


def test_logging_set_level_is_not_a_2026_method(http):
    body = {
        "jsonrpc": "2.0",
        "id": 3,
        "method": "logging/setLevel",
        "params": {"level": "debug", "_meta": modern_meta()},
    }
    answer = post(http, body, MODERN, "application/json")
    assert answer.status_code == 404 and answer.json()["error"]["code"] == -32601


def test_a_call_from_the_command_line_says_the_tool_asks_for_input(tmp_path):
    done = run_cli(tmp_path, fixtures_env(tmp_path), "call", "test_input_required_result_sampling")
    assert done.returncode == 1 and done.stdout == ""
    assert "asks the client for input first (sampling)" in done.stderr
    ok = run_cli(tmp_path, fixtures_env(tmp_path), "call", "test_image_content")
    assert ok.returncode == 0 and json.loads(ok.stdout)["content"][0]["type"] == "image"


# -- stdio, the official client --------------------------------------------------------------------


def stdio(tmp_path: Path) -> StdioServerParameters:
    return StdioServerParameters(
        command=sys.executable,
        args=["-m", "gateway.cli", "serve"],
        env=fixtures_env(tmp_path),
        cwd=str(tmp_path),
    )


def answering(**kwargs: Any) -> dict[str, Any]:
    async def on_elicit(ctx: Any, params: Any) -> t.ElicitResult:
        field = next(iter(params.requested_schema.get("properties", {})))
        return t.ElicitResult(action="accept", content={field: "Ada"})

    async def on_sample(ctx: Any, params: Any) -> t.CreateMessageResult:
        text = t.TextContent(type="text", text="Paris")
        return t.CreateMessageResult(role="assistant", content=text, model="m")

    async def on_roots(ctx: Any) -> t.ListRootsResult:
        return t.ListRootsResult(roots=[t.Root(uri="file:///work", name="work")])

    return {
        "elicitation_callback": on_elicit,
        "sampling_callback": on_sample,
        "list_roots_callback": on_roots,
        **kwargs,
    }


@pytest.mark.anyio
@pytest.mark.parametrize("mode", ["legacy", MODERN])
async def test_over_stdio_a_tool_asks_in_rounds_and_finishes(tmp_path, mode):
    async with Client(stdio(tmp_path), mode=mode, **answering()) as client:
        several = await client.call_tool("test_input_required_result_multiple_inputs", {})
        rounds = await client.call_tool("test_input_required_result_multi_round", {})
        sampled = await client.call_tool("test_input_required_result_sampling", {})
    assert several.content[0].text == "All three inputs arrived"
    assert rounds.content[0].text == "Favourite colour: {'color': 'Ada'}"
    assert sampled.content[0].text == "The model answered: Paris"


@pytest.mark.anyio
async def test_over_stdio_a_2025_client_without_sampling_gets_32021(tmp_path):
    async with Client(stdio(tmp_path), mode="legacy") as client:
        with pytest.raises(MCPError) as err:
            await client.call_tool("test_missing_capability", {})
    assert err.value.error.code == t.MISSING_REQUIRED_CLIENT_CAPABILITY


@pytest.mark.anyio
async def test_over_stdio_the_level_a_2025_session_sets_holds_for_its_calls(tmp_path):
    levels: list[str] = []

    async def on_log(params: t.LoggingMessageNotificationParams) -> None:
        levels.append(params.level)

    async with Client(stdio(tmp_path), mode="legacy", logging_callback=on_log) as client:
        await client.session.set_logging_level("error")
        await client.call_tool("test_logging_tool", {})
        await client.session.set_logging_level("info")
        await client.call_tool("test_logging_tool", {})
        with anyio.move_on_after(2):
            while len(levels) < 2:
                await anyio.sleep(0.02)
    assert levels == ["info", "warning"]
