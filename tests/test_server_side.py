"""The whole server side for plugins (issue 38), in-process through the official SDK client:
results of any content type, resources and templates, prompts with messages, completions,
input requests on both protocol eras, log messages. Over real transports: the conformance
suite (test_conformance.py) and test_server_side_wire.py."""

from __future__ import annotations

import base64
import json
import os
from pathlib import Path
from typing import Any

import anyio
import mcp_types as t
import pytest
from hypothesis import given
from hypothesis import strategies as st
from mcp import Client, MCPError

from gateway import (
    GatewayError,
    InputRequired,
    Message,
    Mutation,
    Plugin,
    PromptContext,
    ResourceContext,
    ResourceSpec,
    Tier,
    ToolContext,
    ToolResult,
    elicit,
    embedded,
    image,
    list_roots,
    message,
    sample,
    text,
)
from gateway.content import MAX_CONTENT_BYTES, size_over
from gateway.errors import ErrorCode
from gateway.resources import MAX_RESOURCE_BYTES
from gateway.server import build_server
from gateway.testing import SENTINEL_SECRET, gateway_client, make_gateway, tool_error

pytestmark = pytest.mark.anyio

PNG = base64.b64decode(
    "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8DwHwAFBQIAX8jx0gAAAABJRU5ErkJggg=="
)
NAME_FORM = {"type": "object", "properties": {"name": {"type": "string"}}, "required": ["name"]}
PRIVATE = "/srv/private/conformance/secret-file.db"

demo = Plugin()


@demo.tool(tier=Tier.READ)
async def chart() -> ToolResult:
    """A chart as an image."""
    return ToolResult([text("The chart:"), image(PNG, "image/png")], structured={"points": 3})


@demo.tool(tier=Tier.READ)
async def leaky() -> ToolResult:
    """Echoes a configured secret (a backend that leaks)."""
    return ToolResult([f"the token is {SENTINEL_SECRET}", embedded("x://a", text=SENTINEL_SECRET)])


@demo.tool(tier=Tier.READ)
async def failing() -> ToolResult:
    """Fails, telling it with content."""
    return ToolResult([f"could not open {PRIVATE}: denied"], is_error=True)


@demo.tool(tier=Tier.READ)
async def huge() -> ToolResult:
    """Returns more than a result may hold."""
    return ToolResult(["x" * (MAX_CONTENT_BYTES + 1)])


@demo.tool(tier=Tier.READ)
async def not_content() -> ToolResult:
    """Returns what is not a content block."""
    return ToolResult([{"type": "text", "text": "a dict"}])  # type: ignore[list-item]


@demo.tool(tier=Tier.READ)
async def greet(*, ctx: ToolContext[Any]) -> ToolResult | InputRequired:
    """Asks the user's name, then greets them."""
    answer = ctx.inputs.accepted("user_name")
    if answer is None:
        return InputRequired(
            {"user_name": elicit("What is your name?", NAME_FORM)}, state="greet-state-v1"
        )
    return ToolResult([f"Hello, {answer['name']}! state={ctx.inputs.state}"])


@demo.tool(tier=Tier.READ)
async def everything(*, ctx: ToolContext[Any]) -> ToolResult | InputRequired:
    """Asks the user, the model and the roots at once, in two rounds."""
    inputs = ctx.inputs
    if inputs.state == "round-2" and inputs.accepted("color") is not None:
        return ToolResult([f"color={inputs.accepted('color')['color']}"])
    if inputs.state == "round-1" and all(inputs.answer(k) for k in ("who", "model", "roots")):
        said = inputs.answer("model")["content"]["text"]  # type: ignore[index]
        roots = [r["uri"] for r in inputs.answer("roots")["roots"]]  # type: ignore[index]
        color = elicit(
            f"{said} / {roots[0]}: your favourite colour?",
            {"type": "object", "properties": {"color": {"type": "string"}}, "required": ["color"]},
        )
        return InputRequired({"color": color}, state="round-2")
    return InputRequired(
        {
            "who": elicit("Name?", NAME_FORM),
            "model": sample("Say hi", max_tokens=5),
            "roots": list_roots(),
        },
        state="round-1",
    )


@demo.tool(
    tier=Tier.MUTATION,
    mutation=Mutation(
        consequence="forgets everything",
        requires="nothing",
        reversible=False,
        destructive=True,
        idempotent=True,
    ),
)
async def forget(*, ctx: ToolContext[Any]) -> ToolResult | InputRequired:
    """Asks for a confirmation first."""
    if ctx.inputs.accepted("sure") is None:
        return InputRequired({"sure": elicit("Really?", {"type": "object", "properties": {}})})
    return ToolResult(["forgotten"])


@demo.tool(tier=Tier.READ)
async def chatty(*, ctx: ToolContext[Any]) -> dict[str, Any]:
    """Logs at several levels."""
    await ctx.log("debug", "a detail")
    await ctx.log("warning", f"trouble with {PRIVATE}")
    return {"ok": True}


@demo.resource("demo://text", mime_type="text/plain", cache_ttl=60)
async def demo_text() -> str:
    """Some text."""
    return f"hello; {SENTINEL_SECRET}"


@demo.resource("demo://blob", mime_type="image/png")
async def demo_blob() -> bytes:
    """An image."""
    return PNG


@demo.resource_template(
    "demo://items/{id}",
    mime_type="application/json",
    complete=lambda name, value, arguments: [i for i in ("10", "11", "20") if i.startswith(value)],
)
async def demo_item(id: str, ctx: ResourceContext[Any]) -> str:
    """One item."""
    if id == "missing":
        raise GatewayError(ErrorCode.NOT_FOUND, f"no item {id}")
    return json.dumps({"id": id, "uri": ctx.uri})


@demo.resource("demo://asks")
async def demo_asks(ctx: ResourceContext[Any]) -> str | InputRequired:
    """Asks who reads first."""
    answer = ctx.inputs.accepted("who")
    if answer is None:
        return InputRequired({"who": elicit("Who reads?", NAME_FORM)})
    return f"read by {answer['name']}"


@demo.prompt(complete=lambda name, value, arguments: ["alpha", "beta"])
def pictured(topic: str) -> list[Message]:
    """A prompt with an image."""
    return [message(image(PNG, "image/png")), message(f"Describe {topic} in the image.")]


@demo.prompt
def asking_prompt(*, ctx: PromptContext) -> list[Message] | InputRequired:
    """Asks for context first."""
    answer = ctx.inputs.accepted("context")
    if answer is None:
        return InputRequired({"context": elicit("Context?", NAME_FORM)})
    return [message(f"Context: {answer['name']}")]


def files_plugin() -> Plugin:
    plugin = Plugin(
        resources=[
            ResourceSpec(uri="file://inside", name="inside", path="data/inside.md"),
            ResourceSpec(uri="file://outside", name="outside", path="../outside.txt"),
            ResourceSpec(uri="file://escape", name="escape", path="data/escape.txt"),
            ResourceSpec(uri="file://big", name="big", path="data/big.bin"),
            ResourceSpec(uri="file://absent", name="absent", path="data/absent.txt"),
        ]
    )
    return plugin


@pytest.fixture
def gw(tmp_path: Path) -> Any:
    root = tmp_path / "root"
    (root / "data").mkdir(parents=True)
    (root / "data" / "inside.md").write_text("# inside\n")
    (tmp_path / "outside.txt").write_text("outside the root")
    os.symlink(tmp_path / "outside.txt", root / "data" / "escape.txt")
    (root / "data" / "big.bin").write_bytes(b"\0" * (MAX_RESOURCE_BYTES + 1))
    return make_gateway(
        entry_points=False,
        objects={"demo": demo, "files": files_plugin()},
        env={"DEMO_API_TOKEN": SENTINEL_SECRET},
        cwd=root,
    )


# -- content of any type --------------------------------------------------------------------------


async def test_a_tool_returns_an_image_with_text_and_structured_content(gw):
    async with gw, gateway_client(gw) as client:
        result = await client.call_tool("chart", {})
    assert not result.is_error
    assert [c.type for c in result.content] == ["text", "image"]
    assert base64.b64decode(result.content[1].data) == PNG
    assert result.content[1].mime_type == "image/png"
    assert result.structured_content == {"points": 3}


async def test_configured_secrets_are_redacted_from_every_content_block(gw):
    async with gw, gateway_client(gw) as client:
        result = await client.call_tool("leaky", {})
    dumped = result.model_dump_json()
    assert SENTINEL_SECRET not in dumped
    assert "the token is" in result.content[0].text


async def test_an_error_told_with_content_is_sanitized_like_any_error(gw):
    async with gw, gateway_client(gw) as client:
        result = await client.call_tool("failing", {})
    assert result.is_error
    assert PRIVATE not in result.content[0].text and "could not open" in result.content[0].text


@pytest.mark.parametrize("tool", ["huge", "not_content"])
async def test_content_that_is_too_large_or_not_content_is_an_internal_error(gw, tool, caplog):
    async with gw, gateway_client(gw) as client:
        result = await client.call_tool(tool, {})
    error = tool_error(result)
    assert error["code"] == "INTERNAL_ERROR"
    if tool == "huge":
        assert "over the 8 MB a result may have" in error["message"]


@given(st.text(), st.integers(min_value=0, max_value=64))
def test_a_bound_counts_the_bytes_a_line_carries(text, limit):
    # Characters of two to four bytes and lone surrogates (counted as the U+FFFD replacing them).
    size = len(text.encode("utf-8", "surrogatepass"))
    assert size_over(text, limit) == (size if size > limit else None)


async def test_a_default_json_result_is_unchanged(gw):
    async with gw, gateway_client(gw) as client:
        result = await client.call_tool("chatty", {})
    assert result.structured_content == {"ok": True}
    assert [c.text for c in result.content] == ['{"ok":true}']


# -- input requests, 2025 session with a back channel --------------------------------------------------


def answering_client(gw: Any, **kwargs: Any) -> Client:
    asked: list[tuple[str, Any]] = []

    async def on_elicit(ctx: Any, params: Any) -> t.ElicitResult:
        asked.append(("elicit", params.message))
        field = next(iter(params.requested_schema.get("properties", {})), "name")
        return t.ElicitResult(action="accept", content={field: "Ada"} if field else {})

    async def on_sample(ctx: Any, params: Any) -> t.CreateMessageResult:
        asked.append(("sample", params.messages[0].content.text))
        return t.CreateMessageResult(
            role="assistant", content=t.TextContent(type="text", text="hi"), model="m"
        )

    async def on_roots(ctx: Any) -> t.ListRootsResult:
        asked.append(("roots", None))
        return t.ListRootsResult(roots=[t.Root(uri="file:///work", name="work")])

    client = Client(
        build_server(gw),
        elicitation_callback=on_elicit,
        sampling_callback=on_sample,
        list_roots_callback=on_roots,
        **kwargs,
    )
    client.asked = asked  # type: ignore[attr-defined]
    return client


@pytest.mark.parametrize("mode", ["legacy", "2026-07-28"])
async def test_a_tool_asks_the_user_and_finishes_with_the_answer_on_either_era(gw, mode):
    client = answering_client(gw, mode=mode)
    async with gw, client:
        result = await client.call_tool("greet", {})
    assert result.content[0].text == "Hello, Ada! state=greet-state-v1"
    assert client.asked == [("elicit", "What is your name?")]  # type: ignore[attr-defined]


@pytest.mark.parametrize("mode", ["legacy", "2026-07-28"])
async def test_three_kinds_of_requests_at_once_then_another_round(gw, mode):
    client = answering_client(gw, mode=mode)
    async with gw, client:
        result = await client.call_tool("everything", {})
    assert result.content[0].text == "color=Ada"
    kinds = sorted(k for k, _ in client.asked)  # type: ignore[attr-defined]
    assert kinds == ["elicit", "elicit", "roots", "sample"]


@pytest.mark.parametrize("mode", ["legacy", "2026-07-28"])
async def test_a_client_without_the_capability_is_refused_with_32021(gw, mode):
    async with gw, Client(build_server(gw), mode=mode) as client:
        with pytest.raises(MCPError) as err:
            await client.call_tool("everything", {})
    assert err.value.error.code == t.MISSING_REQUIRED_CLIENT_CAPABILITY
    required = err.value.error.data["requiredCapabilities"]
    assert set(required) == {"elicitation", "sampling", "roots"}


async def test_a_mutation_that_asks_first_is_audited_for_each_round(gw, tmp_path):
    client = answering_client(gw, mode="legacy")
    async with gw, client:
        result = await client.call_tool("forget", {})
    assert result.content[0].text == "forgotten"
    lines = [json.loads(x) for x in (tmp_path / "root" / "audit.jsonl").read_text().splitlines()]
    assert [line["outcome"] for line in lines] == ["STARTED", "INPUT_REQUIRED", "STARTED", "OK"]


async def test_state_changed_by_the_client_is_refused_before_the_tool_runs(gw):
    async with gw, answering_client(gw, mode="2026-07-28") as client:
        first = await client.session.call_tool("greet", {}, allow_input_required=True)
        assert isinstance(first, t.InputRequiredResult)
        assert first.request_state and "greet-state" not in first.request_state  # sealed
        answer = {"user_name": t.ElicitResult(action="accept", content={"name": "Eve"})}
        with pytest.raises(MCPError) as err:
            await client.session.call_tool(
                "greet",
                {},
                input_responses=answer,
                request_state=first.request_state[:-2] + "AA",
                allow_input_required=True,
            )
        assert err.value.error.code == t.INVALID_PARAMS
        # State sealed for one tool does not open another's call.
        with pytest.raises(MCPError):
            await client.session.call_tool(
                "everything",
                {},
                input_responses=answer,
                request_state=first.request_state,
                allow_input_required=True,
            )
        done = await client.session.call_tool(
            "greet",
            {},
            input_responses=answer,
            request_state=first.request_state,
            allow_input_required=True,
        )
        assert done.content[0].text == "Hello, Eve! state=greet-state-v1"


# -- resources ---------------------------------------------------------------------------------------


async def test_resources_and_templates_are_listed_and_read(gw):
    async with gw, gateway_client(gw) as client:
        listed = {r.uri: r for r in (await client.list_resources()).resources}
        templates = (await client.list_resource_templates()).resource_templates
        text_read = await client.read_resource("demo://text")
        blob_read = await client.read_resource("demo://blob")
        item = await client.read_resource("demo://items/42")
    assert listed["demo://text"].name == "demo_text"
    assert listed["demo://text"].description == "Some text."
    assert listed["file://inside"].mime_type == "text/markdown"
    assert [x.uri_template for x in templates] == ["demo://items/{id}"]
    assert text_read.contents[0].text == "hello; [REDACTED]"
    assert base64.b64decode(blob_read.contents[0].blob) == PNG
    assert json.loads(item.contents[0].text) == {"id": "42", "uri": "demo://items/42"}


async def test_caching_hints_say_keep_nothing_unless_the_resource_says_how_long(gw):
    # Hints are 2026-07-28's: a 2025 client does not get them.
    async with gw, Client(build_server(gw), mode="2026-07-28") as client:
        tools = await client.list_tools()
        kept = await client.read_resource("demo://text")
        fresh = await client.read_resource("demo://blob")
    assert (tools.ttl_ms, tools.cache_scope) == (0, "private")
    assert (kept.ttl_ms, kept.cache_scope) == (60_000, "private")
    assert (fresh.ttl_ms, fresh.cache_scope) == (0, "private")


async def test_an_unknown_resource_is_invalid_params_naming_the_uri(gw):
    async with gw, gateway_client(gw) as client:
        for uri in ("demo://nothing", "demo://items/missing"):
            with pytest.raises(MCPError) as err:
                await client.read_resource(uri)
            assert err.value.error.code == t.INVALID_PARAMS
            assert err.value.error.data == {"uri": uri}
            assert err.value.error.message.startswith("NOT_FOUND: ")


async def test_a_file_resource_is_read_inside_the_data_roots_only(gw):
    async with gw, gateway_client(gw) as client:
        inside = await client.read_resource("file://inside")
        assert inside.contents[0].text == "# inside\n"
        for uri, says in (
            ("file://outside", "outside the configured data roots"),
            ("file://escape", "outside the configured data roots"),
            ("file://big", "larger than 4 MB"),
            ("file://absent", "no file data/absent.txt"),
        ):
            with pytest.raises(MCPError) as err:
                await client.read_resource(uri)
            assert says in err.value.error.message, (uri, err.value.error.message)
            assert "outside the root" not in err.value.error.message
            assert str(gw.config.data_roots[0]) not in err.value.error.message


async def test_a_uri_two_plugins_register_is_served_by_neither_and_reported(tmp_path):
    one = Plugin(resources=[ResourceSpec(uri="same://x", name="a", path="a.txt")])
    two = Plugin(resources=[ResourceSpec(uri="same://x", name="b", path="b.txt")])
    gw = make_gateway(entry_points=False, objects={"one": one, "two": two}, cwd=tmp_path)
    async with gw, gateway_client(gw) as client:
        assert (await client.list_resources()).resources == []
    status = await gw.status(check_health=False)
    withheld = {p["name"]: p.get("withheld_tools", {}) for p in status["plugins"]}
    assert "resource same://x" in withheld["one"] and "resource same://x" in withheld["two"]


@pytest.mark.parametrize(
    ("spec", "says"),
    [
        (ResourceSpec(uri="relative/path", name="r", path="x"), "must be an absolute URI"),
        (ResourceSpec(uri="a://b", name="r"), "exactly one of read= and path="),
    ],
)
def test_a_bad_resource_skips_its_plugin_with_the_reason(tmp_path, spec, says):
    gw = make_gateway(entry_points=False, objects={"bad": Plugin(resources=[spec])}, cwd=tmp_path)
    record = gw.plugin("bad")
    assert record is not None and record.state.value == "failed"
    assert "invalid resource declaration" in (record.reason or "") and says in (record.reason or "")


async def test_a_resource_may_ask_the_client_first(gw):
    client = answering_client(gw, mode="legacy")
    async with gw, client:
        read = await client.read_resource("demo://asks")
    assert read.contents[0].text == "read by Ada"


async def test_an_oauth_caller_without_the_read_scope_neither_lists_nor_reads(tmp_path):
    from gateway.app import build_gateway
    from gateway.auth.identity import Identity, calling_as
    from gateway.config import load_config

    (tmp_path / "gw.toml").write_text('[auth]\nissuer = "https://idp.example"\n')
    config = load_config(tmp_path / "gw.toml", env={}, cwd=tmp_path)
    gw = build_gateway(config, objects={"demo": demo}, entry_points=False)
    reader = Identity("r", "c", frozenset({"gateway:read"}), "jwt", "https://idp.example")
    other = Identity("n", "c", frozenset({"gateway:mutate"}), "jwt", "https://idp.example")
    async with gw:
        with calling_as(reader):
            assert "demo://text" in {r.key for r in gw.offered_resources()}
            assert not (await gw.read_resource("demo://text")).is_error
        with calling_as(other):
            assert gw.offered_resources() == []
            refused = await gw.read_resource("demo://text")
    assert refused.is_error and refused.payload["error"]["code"] == "PERMISSION_DENIED"
    assert refused.payload["error"]["details"] == {"missing_scope": "gateway:read"}


# -- prompts and completions ---------------------------------------------------------------------


async def test_a_prompt_returns_an_image_message_and_completes_its_argument(gw):
    async with gw, gateway_client(gw) as client:
        got = await client.get_prompt("pictured", {"topic": "cats"})
        completed = await client.complete(
            t.PromptReference(type="ref/prompt", name="pictured"), {"name": "topic", "value": "a"}
        )
        by_template = await client.complete(
            t.ResourceTemplateReference(type="ref/resource", uri="demo://items/{id}"),
            {"name": "id", "value": "1"},
        )
    assert [m.content.type for m in got.messages] == ["image", "text"]
    assert got.messages[1].content.text == "Describe cats in the image."
    assert completed.completion.values == ["alpha", "beta"]
    assert by_template.completion.values == ["10", "11"]


@pytest.mark.parametrize("mode", ["legacy", "2026-07-28"])
async def test_a_prompt_may_ask_the_client_first(gw, mode):
    async with gw, answering_client(gw, mode=mode) as client:
        got = await client.get_prompt("asking_prompt", {})
    assert got.messages[0].content.text == "Context: Ada"


async def test_completing_an_unknown_prompt_is_invalid_params(gw):
    async with gw, gateway_client(gw) as client:
        with pytest.raises(MCPError) as err:
            await client.complete(
                t.PromptReference(type="ref/prompt", name="nope"), {"name": "x", "value": ""}
            )
    assert err.value.error.code == t.INVALID_PARAMS


# -- logging -----------------------------------------------------------------------------------------


async def test_log_messages_reach_a_client_at_the_level_it_set_sanitized(gw):
    got: list[t.LoggingMessageNotificationParams] = []

    async def on_log(params: t.LoggingMessageNotificationParams) -> None:
        got.append(params)

    # The server a stdio process serves: one session, whose level holds until it changes it.
    server = build_server(gw, stdio_session=True)
    async with gw, Client(server, mode="legacy", logging_callback=on_log) as client:
        await client.call_tool("chatty", {})
        await anyio.sleep(0.05)
        default = [(p.level, p.logger) for p in got]
        got.clear()
        await client.set_logging_level("debug")
        await client.call_tool("chatty", {})
        await anyio.sleep(0.05)
    # Before setLevel: info and above; after "debug": everything.
    assert default == [("warning", "chatty")]
    assert [p.level for p in got] == ["debug", "warning"]
    assert all(PRIVATE not in str(p.data) for p in got)


async def test_a_2026_client_gets_log_messages_only_when_its_request_asks(gw):
    got: list[str] = []

    async def on_log(params: t.LoggingMessageNotificationParams) -> None:
        got.append(params.level)

    async with gw, Client(build_server(gw), mode="2026-07-28", logging_callback=on_log) as c:
        await c.call_tool("chatty", {})
        await anyio.sleep(0.05)
        assert got == []
        await c.call_tool("chatty", {}, meta={"io.modelcontextprotocol/logLevel": "warning"})
        await anyio.sleep(0.05)
    assert got == ["warning"]


async def test_the_capabilities_say_what_is_served(gw):
    async with gw, gateway_client(gw) as client:
        caps = client.session.server_capabilities
    assert caps is not None
    assert caps.resources is not None and caps.completions is not None and caps.logging is not None
    assert caps.prompts is not None and caps.tools is not None


def test_the_fixtures_plugin_passes_the_kits_conformance_checks(tmp_path, monkeypatch):
    """The test kit's checks hold for a plugin of content results and input requests too."""
    import importlib

    from conformance import FIXTURES_PLUGIN, fixtures_site

    from gateway.testing import assert_plugin_conforms, run_check

    monkeypatch.syspath_prepend(str(fixtures_site(tmp_path / "site")))
    importlib.invalidate_caches()
    run_check(assert_plugin_conforms(FIXTURES_PLUGIN, cwd=tmp_path))


async def test_a_request_the_client_refuses_ends_the_round_with_an_error_result(gw):
    async def on_elicit(ctx: Any, params: Any) -> t.ElicitResult:
        await anyio.sleep(5)  # cancelled by the refusal below
        return t.ElicitResult(action="accept", content={"name": "Ada"})

    async def on_sample(ctx: Any, params: Any) -> t.ErrorData:
        return t.ErrorData(code=t.INVALID_REQUEST, message=f"no model here ({PRIVATE})")

    async def on_roots(ctx: Any) -> t.ListRootsResult:
        return t.ListRootsResult(roots=[])

    client = Client(
        build_server(gw),
        mode="legacy",
        elicitation_callback=on_elicit,
        sampling_callback=on_sample,
        list_roots_callback=on_roots,
    )
    async with gw, client:
        result = await client.call_tool("everything", {})
    error = tool_error(result)
    assert error["code"] == "PERMISSION_DENIED"
    assert error["message"].startswith("the client refused the sampling/createMessage request")
    assert PRIVATE not in error["message"]
