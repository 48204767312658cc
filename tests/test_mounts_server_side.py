"""A mounted server's resources, templates, prompts, completions, input requests and log messages
through the gateway (issue 38), with the fixture server of the mounting tests
(``upstream_server.py``) over real stdio, spoken to by the official SDK client in-process."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import anyio
import mcp_types as t
import pytest
from mcp import Client, MCPError
from test_mounts import READ, Upstreams, answered, mounting, tool

from gateway import Plugin
from gateway.auth.identity import Identity, calling_as
from gateway.server import build_server
from gateway.testing import SENTINEL_SECRET, gateway_client, make_gateway

pytestmark = pytest.mark.anyio

RESOURCES = [
    {"uri": "up://notes/today", "name": "today", "mimeType": "text/plain", "text": "buy milk"},
    {"uri": "up://secret", "name": "secret", "text": f"token={SENTINEL_SECRET}"},
]
TEMPLATES = [{"uriTemplate": "up://notes/{day}", "name": "by_day", "mimeType": "text/plain"}]
PROMPTS = [
    {
        "name": "summarize",
        "description": "Summarize a day.",
        "arguments": [{"name": "day", "required": True}],
    }
]
TOOLS = [
    tool("ask", annotations=READ),
    tool("log", annotations=READ),
    tool("echo", annotations=READ),
]


@pytest.fixture
def upstreams(tmp_path: Path) -> Upstreams:
    return Upstreams(tmp_path)


@pytest.fixture(autouse=True)
def state_home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    state = tmp_path / "state"
    monkeypatch.setenv("XDG_STATE_HOME", str(state))
    return state


def table(upstreams: Upstreams, name: str = "up", **more: Any) -> dict[str, Any]:
    return upstreams.table(
        name,
        tools=TOOLS,
        resources=RESOURCES,
        templates=TEMPLATES,
        prompts=PROMPTS,
        completions={"day": ["monday", "tuesday"]},
        **more,
    )


async def test_resources_templates_and_prompts_pass_through_with_the_prefix_on_names(
    tmp_path, upstreams
):
    gw = mounting(tmp_path, {"up": {**table(upstreams), "prefix": "up_"}}, env={})
    async with gw:
        await answered(gw)
        async with gateway_client(gw) as client:
            resources = {r.uri: r.name for r in (await client.list_resources()).resources}
            templates = (await client.list_resource_templates()).resource_templates
            prompts = {p.name: p for p in (await client.list_prompts()).prompts}
            today = await client.read_resource("up://notes/today")
            by_day = await client.read_resource("up://notes/friday")
            got = await client.get_prompt("up_summarize", {"day": "friday"})
            days = await client.complete(
                t.PromptReference(type="ref/prompt", name="up_summarize"),
                {"name": "day", "value": "m"},
            )
            by_template = await client.complete(
                t.ResourceTemplateReference(type="ref/resource", uri="up://notes/{day}"),
                {"name": "day", "value": ""},
            )
    # URIs stay as the server wrote them; names get the prefix; calls upstream use its own.
    assert resources == {"up://notes/today": "up_today", "up://secret": "up_secret"}
    assert [(x.uri_template, x.name) for x in templates] == [("up://notes/{day}", "up_by_day")]
    assert prompts["up_summarize"].description == "Summarize a day."
    assert [a.name for a in prompts["up_summarize"].arguments or []] == ["day"]
    assert today.contents[0].text == "buy milk"
    assert by_day.contents[0].text == "read up://notes/friday"
    assert got.messages[0].content.text == 'summarize: {"day": "friday"}'
    assert days.completion.values == ["monday", "tuesday"]
    assert by_template.completion.values == ["monday", "tuesday"]
    journal = upstreams.journal()
    assert {m["method"] for m in journal if "method" in m} >= {
        "resources/read",
        "prompts/get",
        "completion/complete",
    }
    got_prompt = next(m for m in journal if m.get("method") == "prompts/get")
    assert got_prompt["params"]["name"] == "summarize"


async def test_a_configured_secret_in_a_read_is_redacted(tmp_path, upstreams):
    gw = mounting(tmp_path, {"up": table(upstreams)}, env={"UP_API_TOKEN": SENTINEL_SECRET})
    async with gw:
        await answered(gw)
        async with gateway_client(gw) as client:
            read = await client.read_resource("up://secret")
    assert read.contents[0].text == "token=[REDACTED]"


async def test_a_uri_or_prompt_two_sources_offer_is_served_by_neither_and_reported(
    tmp_path, upstreams
):
    from gateway import PromptSpec
    from gateway.spec import Args

    clash = Plugin(
        prompts=[PromptSpec("summarize", "A plugin's own.", Args, lambda args, ctx: "mine")]
    )
    gw = make_gateway(
        plugins=["servers", "clash"],
        objects={"clash": clash},
        plugin_config={
            "servers": {"servers": {"one": table(upstreams, "one"), "two": table(upstreams, "two")}}
        },
        cwd=tmp_path,
    )
    async with gw:
        await answered(gw)
        async with gateway_client(gw) as client:
            assert (await client.list_resources()).resources == []
            assert (await client.list_resource_templates()).resource_templates == []
            assert "summarize" not in {p.name for p in (await client.list_prompts()).prompts}
            with pytest.raises(MCPError) as err:
                await client.read_resource("up://notes/today")
        status = await gw.status(check_health=False)
    assert err.value.error.data == {"uri": "up://notes/today"}
    withheld = {p["name"]: p.get("withheld_tools", {}) for p in status["plugins"]}
    assert "resource up://notes/today" in withheld["one"]
    assert "resource template up://notes/{day}" in withheld["two"]
    assert "prompt summarize" in withheld["clash"] and "prompt summarize" in withheld["one"]


async def test_a_read_is_a_read_tier_call_an_oauth_caller_needs_the_scope_for(tmp_path, upstreams):
    from gateway.app import build_gateway
    from gateway.config import load_config

    config_file = tmp_path / "gw.toml"
    up = table(upstreams)
    config_file.write_text(
        '[gateway]\nplugins = ["servers"]\n[auth]\nissuer = "https://idp.example"\n'
        f"[servers.up]\ncommand = {json.dumps(up['command'])}\nargs = {json.dumps(up['args'])}\n"
    )
    gw = build_gateway(load_config(config_file, env={}, cwd=tmp_path))
    reader = Identity("r", "c", frozenset({"gateway:read"}), "jwt", "https://idp.example")
    other = Identity("o", "c", frozenset({"gateway:mutate"}), "jwt", "https://idp.example")
    async with gw:
        await answered(gw)
        with calling_as(reader):
            assert not (await gw.read_resource("up://notes/today")).is_error
        with calling_as(other):
            refused = await gw.read_resource("up://notes/today")
            with pytest.raises(Exception, match="gateway:read"):
                await gw.prompt("summarize", {"day": "x"})
    assert refused.payload["error"]["code"] == "PERMISSION_DENIED"


async def test_a_server_that_is_down_answers_backend_unavailable_on_a_read(tmp_path, upstreams):
    gw = mounting(tmp_path, {"up": table(upstreams)})
    async with gw:
        await answered(gw)
        upstream = gw.mounts.records["up"].upstream
        assert upstream is not None and upstream.process is not None
        upstream.process.kill()
        with anyio.fail_after(10):
            while upstream.session is not None:
                await anyio.sleep(0.02)
        async with gateway_client(gw) as client:
            with pytest.raises(MCPError) as err:
                await client.read_resource("up://notes/today")
    assert err.value.error.code == t.INTERNAL_ERROR
    assert err.value.error.message.startswith("BACKEND_UNAVAILABLE: MCP server 'up'")


# -- the server asks the client (2025, over its connection) -----------------------------------------


def elicit_args(message: str = "Your name?") -> dict[str, Any]:
    schema = {"type": "object", "properties": {"name": {"type": "string"}}}
    return {
        "method": "elicitation/create",
        "params": {"message": message, "requestedSchema": schema},
    }


async def test_a_servers_request_reaches_a_2025_client_and_its_answer_the_server(
    tmp_path, upstreams
):
    seen: list[str] = []

    async def on_elicit(ctx: Any, params: Any) -> t.ElicitResult:
        seen.append(params.message)
        return t.ElicitResult(action="accept", content={"name": "Ada"})

    gw = mounting(tmp_path, {"up": table(upstreams)})
    async with gw:
        await answered(gw)
        server = build_server(gw, stdio_session=True)
        async with Client(server, mode="legacy", elicitation_callback=on_elicit) as client:
            result = await client.call_tool("ask", elicit_args())
    assert seen == ["Your name?"]
    assert json.loads(result.content[0].text) == {"action": "accept", "content": {"name": "Ada"}}


async def test_a_servers_request_a_2025_client_cannot_answer_is_refused_to_the_server(
    tmp_path, upstreams
):
    gw = mounting(tmp_path, {"up": table(upstreams)})
    async with gw:
        await answered(gw)
        async with Client(build_server(gw), mode="legacy") as client:  # declares no elicitation
            result = await client.call_tool("ask", elicit_args())
    refused = json.loads(result.content[0].text)
    assert refused["code"] == t.INVALID_REQUEST
    assert refused["message"].startswith("the gateway cannot ask")


async def test_a_servers_request_reaches_a_2026_client_as_an_input_required_result(
    tmp_path, upstreams
):
    """A 2026-07-28 client has no back channel: the call waits apart (gateway.asking.Parking)
    while the client answers in its next request; the official client's driver does that."""
    seen: list[str] = []

    async def on_elicit(ctx: Any, params: Any) -> t.ElicitResult:
        seen.append(params.message)
        return t.ElicitResult(action="accept", content={"name": "Ada"})

    async def on_progress(progress: float, total: float | None, message: str | None) -> None:
        pass

    gw = mounting(tmp_path, {"up": table(upstreams)})
    async with gw:
        await answered(gw)
        server = build_server(gw)
        async with Client(server, mode="2026-07-28", elicitation_callback=on_elicit) as client:
            first = await client.session.call_tool(
                "ask", elicit_args("First?"), allow_input_required=True
            )
            assert isinstance(first, t.InputRequiredResult)
            assert list(first.input_requests or {}) == ["elicitation-1"]
            assert first.request_state and "parked" not in first.request_state  # sealed
            answer = {"elicitation-1": t.ElicitResult(action="accept", content={"name": "Eve"})}
            done = await client.session.call_tool(
                "ask",
                elicit_args("First?"),
                input_responses=answer,
                request_state=first.request_state,
                allow_input_required=True,
            )
            # The official client's driver answers by itself; the server reports progress
            # after the answer, when the request that started the call is long answered.
            result = await client.call_tool(
                "ask", {**elicit_args(), "progress_after": True}, progress_callback=on_progress
            )
            # The same answers again: the call they were for is over.
            with pytest.raises(MCPError) as gone:
                await client.session.call_tool(
                    "ask",
                    elicit_args("First?"),
                    input_responses=answer,
                    request_state=first.request_state,
                    allow_input_required=True,
                )
    assert seen == ["Your name?"]
    assert json.loads(result.content[0].text) == {"action": "accept", "content": {"name": "Ada"}}
    assert json.loads(done.content[0].text)["content"] == {"name": "Eve"}
    assert gone.value.error.code == t.INVALID_PARAMS
    assert "no longer waiting" in gone.value.error.message


async def test_a_2026_client_without_the_capability_the_server_asks_for_gets_32021(
    tmp_path, upstreams
):
    gw = mounting(tmp_path, {"up": table(upstreams)})
    async with gw:
        await answered(gw)
        async with Client(build_server(gw), mode="2026-07-28") as client:
            with pytest.raises(MCPError) as err:
                await client.call_tool("ask", elicit_args())
    assert err.value.error.code == t.MISSING_REQUIRED_CLIENT_CAPABILITY
    assert err.value.error.data == {"requiredCapabilities": {"elicitation": {"form": {}}}}


async def test_a_waiting_call_the_client_does_not_come_back_for_ends_at_its_timeout(
    tmp_path, upstreams
):
    async def never(ctx: Any, params: Any) -> t.ElicitResult:
        raise AssertionError("the test answers by hand")

    gw = mounting(tmp_path, {"up": {**table(upstreams), "timeout": 1}})
    async with gw:
        await answered(gw)
        server = build_server(gw)
        async with Client(server, mode="2026-07-28", elicitation_callback=never) as client:
            first = await client.session.call_tool("ask", elicit_args(), allow_input_required=True)
            assert isinstance(first, t.InputRequiredResult)
            await anyio.sleep(1.5)  # past the server's timeout: the waiting call ended
            answer = {"elicitation-1": t.ElicitResult(action="accept", content={"name": "Ada"})}
            late = await client.session.call_tool(
                "ask",
                elicit_args(),
                input_responses=answer,
                request_state=first.request_state,
                allow_input_required=True,
            )
    assert late.is_error
    assert json.loads(late.content[0].text)["error"]["code"] == "TIMEOUT"


async def test_a_servers_log_message_reaches_the_client_of_its_call(tmp_path, upstreams):
    got: list[tuple[str, Any]] = []

    async def on_log(params: t.LoggingMessageNotificationParams) -> None:
        got.append((params.level, params.data))

    gw = mounting(tmp_path, {"up": table(upstreams)})
    async with gw:
        await answered(gw)
        server = build_server(gw, stdio_session=True)
        async with Client(server, mode="legacy", logging_callback=on_log) as client:
            await client.call_tool("log", {"level": "error", "data": "disk almost full"})
            with anyio.move_on_after(5):
                while not got:
                    await anyio.sleep(0.02)
    assert got == [("error", "disk almost full")]
