"""An isolated plugin offers and answers everything a plugin in process does (issues 38 + 39):
content results of every type, input requests on both protocol eras, log messages, resources
and templates, prompts with messages, completions.

One third-party plugin using each feature is served by ``mcp-gateway serve`` over stdio,
spoken to by the official SDK client, once in the gateway's process
(``MCP_GATEWAY_ISOLATE=none``) and once in a worker process of its own
(``MCP_GATEWAY_ISOLATE=feat``); every answer must be the same. The conformance suite with its
fixtures plugin isolated is the other proof (``tests/test_conformance_isolated.py``).
"""

from __future__ import annotations

import json
import os
import re
import sys
from pathlib import Path
from typing import Any

import anyio
import mcp_types as t
import pytest
from conftest import gateway_env
from mcp import Client, MCPError, StdioServerParameters

pytestmark = [pytest.mark.anyio, pytest.mark.e2e]

SECRET = "feat-secret-8c1f0e2d9b7a"
PRIVATE_PATH = "/srv/private/feat/secret-file.db"

FEATURES = f'''
from __future__ import annotations
import base64, json, os
from typing import Any
from pydantic import BaseModel, ConfigDict, SecretStr
from gateway import (ErrorCode, GatewayError, InputRequired, Message, Plugin, PromptContext,
                     ResourceContext, Tier, ToolContext, ToolResult, elicit, embedded, env_field,
                     image, audio, link, list_roots, message, sample, text)
from gateway.content import MAX_CONTENT_BYTES

PNG = base64.b64decode(
    "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8DwHwAFBQIAX8jx0gAAAABJRU5ErkJggg=="
)
NAME_FORM = {{"type": "object", "properties": {{"name": {{"type": "string"}}}}, "required": ["name"]}}

class Settings(BaseModel):
    model_config = ConfigDict(extra="forbid")
    token: SecretStr | None = env_field("FEAT_API_TOKEN", default=None)

plugin = Plugin(settings=Settings)

def leaked(ctx) -> str:
    return ctx.settings.token.get_secret_value() if ctx.settings.token else "none"

@plugin.tool(tier=Tier.READ)
async def feat_media(*, ctx: ToolContext[Settings]) -> ToolResult:
    """Every content type at once."""
    return ToolResult(
        [text("The chart:"), image(PNG, "image/png"), audio(b"RIFF0000WAVE", "audio/wav"),
         embedded("feat://notes/1", text="a note"), embedded("feat://blob", blob=b"\\0\\1"),
         link("feat://text", "text", mime_type="text/plain")],
        structured={{"points": 3}},
    )

@plugin.tool(tier=Tier.READ)
async def feat_leaky(*, ctx: ToolContext[Settings]) -> ToolResult:
    """Echoes its configured secret (a backend that leaks)."""
    return ToolResult([f"the token is {{leaked(ctx)}}", embedded("x://a", text=leaked(ctx))])

@plugin.tool(tier=Tier.READ)
async def feat_failing() -> ToolResult:
    """Fails, telling it with content."""
    return ToolResult(["could not open {PRIVATE_PATH}: denied"], is_error=True)

@plugin.tool(tier=Tier.READ)
async def feat_huge() -> ToolResult:
    """Returns more than a result may hold."""
    return ToolResult(["x" * (MAX_CONTENT_BYTES + 1)])

@plugin.tool(tier=Tier.READ)
async def feat_json() -> dict[str, Any]:
    """A plain JSON result."""
    return {{"ok": True, "n": 2}}

@plugin.tool(tier=Tier.READ)
async def feat_everything(*, ctx: ToolContext[Settings]) -> ToolResult | InputRequired:
    """Asks the user, the model and the roots at once, then once more."""
    inputs = ctx.inputs
    if inputs.state == "round-2" and inputs.accepted("color") is not None:
        return ToolResult([f"color={{inputs.accepted('color')['color']}}"])
    if inputs.state == "round-1" and all(inputs.answer(k) for k in ("who", "model", "roots")):
        said = inputs.answer("model")["content"]["text"]
        roots = [r["uri"] for r in inputs.answer("roots")["roots"]]
        who = inputs.accepted("who")["name"]
        color = elicit(
            f"{{who}}, {{said}} / {{roots[0]}}: your favourite colour?",
            {{"type": "object", "properties": {{"color": {{"type": "string"}}}}, "required": ["color"]}},
        )
        return InputRequired({{"color": color}}, state="round-2")
    return InputRequired(
        {{"who": elicit("Name?", NAME_FORM), "model": sample("Say hi", max_tokens=5),
         "roots": list_roots()}},
        state="round-1",
    )

@plugin.tool(tier=Tier.READ)
async def feat_chatty(*, ctx: ToolContext[Settings]) -> dict[str, Any]:
    """Logs at two levels."""
    await ctx.log("debug", "a detail")
    await ctx.log("warning", f"trouble with {PRIVATE_PATH} and {{leaked(ctx)}}")
    return {{"ok": True}}

PAIRED = set()

@plugin.tool(tier=Tier.READ)
async def feat_pair(tag: str, *, ctx: ToolContext[Settings]) -> dict[str, Any]:
    """Logs, waits until another call of it runs too, logs again."""
    import anyio
    await ctx.log("info", f"{{tag}} first")
    PAIRED.add(tag)
    with anyio.fail_after(20):
        while len(PAIRED) < 2:
            await anyio.sleep(0.01)
    await ctx.log("info", f"{{tag}} second")
    return {{"tag": tag}}

@plugin.resource("feat://text", mime_type="text/plain", cache_ttl=60)
async def feat_text(ctx: ResourceContext[Settings]) -> str:
    """Some text."""
    return f"hello; {{leaked(ctx)}}"

@plugin.resource("feat://blob", mime_type="image/png")
async def feat_blob() -> bytes:
    """An image."""
    return PNG

@plugin.resource_template(
    "feat://items/{{id}}",
    mime_type="application/json",
    complete=lambda name, value, arguments: [i for i in ("10", "11", "20") if i.startswith(value)],
)
async def feat_item(id: str, ctx: ResourceContext[Settings]) -> str:
    """One item."""
    if id == "missing":
        raise GatewayError(ErrorCode.NOT_FOUND, f"no item {{id}}")
    return json.dumps({{"id": id, "uri": ctx.uri}})

@plugin.resource("feat://asks")
async def feat_asks(ctx: ResourceContext[Settings]) -> str | InputRequired:
    """Asks who reads first."""
    answer = ctx.inputs.accepted("who")
    if answer is None:
        return InputRequired({{"who": elicit("Who reads?", NAME_FORM)}})
    return f"read by {{answer['name']}}"

@plugin.prompt(complete=lambda name, value, arguments: ["alpha", "beta"])
def feat_pictured(topic: str) -> list[Message]:
    """A prompt with an image and an embedded resource."""
    return [message(image(PNG, "image/png")), message(embedded("feat://text", text="hi")),
            message(f"Describe {{topic}} in the image.", role="assistant")]

@plugin.prompt
def feat_asking(*, ctx: PromptContext) -> list[Message] | InputRequired:
    """Asks for context first."""
    answer = ctx.inputs.accepted("context")
    if answer is None:
        return InputRequired({{"context": elicit("Context?", NAME_FORM)}}, state="p-1")
    return [message(f"Context: {{answer['name']}} ({{ctx.inputs.state}})")]

@plugin.prompt
def feat_broken(word: str) -> str:
    """Fails to render."""
    raise RuntimeError(f"cannot read {PRIVATE_PATH}")
'''

_CID = re.compile(r'"correlation_id": ?"[^"]*"')


def _same(value: Any) -> Any:
    """``value`` without what differs from one run to the next (correlation ids)."""
    if isinstance(value, str):
        return _CID.sub('"correlation_id":"-"', value)
    if isinstance(value, dict):
        return {k: "-" if k == "correlation_id" else _same(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_same(v) for v in value]
    return value


def _dump(model: Any) -> Any:
    return _same(model.model_dump(mode="json", by_alias=True, exclude_none=True))


class _Asked:
    """The client's side of input requests: it answers each and notes what it was asked."""

    def __init__(self) -> None:
        self.asked: list[Any] = []
        self.logs: list[tuple[str, str | None, Any]] = []

    async def elicit(self, ctx: Any, params: Any) -> t.ElicitResult:
        self.asked.append(("elicit", params.message))
        field = next(iter(params.requested_schema.get("properties", {})), "name")
        return t.ElicitResult(action="accept", content={field: "Ada"})

    async def sample(self, ctx: Any, params: Any) -> t.CreateMessageResult:
        self.asked.append(("sample", params.messages[0].content.text))
        return t.CreateMessageResult(
            role="assistant", content=t.TextContent(type="text", text="hi"), model="m"
        )

    async def roots(self, ctx: Any) -> t.ListRootsResult:
        self.asked.append(("roots", None))
        return t.ListRootsResult(roots=[t.Root(uri="file:///work", name="work")])

    async def log(self, params: t.LoggingMessageNotificationParams) -> None:
        self.logs.append((params.level, params.logger, _same(params.data)))


def _server(tmp_path: Path, isolate: str) -> StdioServerParameters:
    env = gateway_env(
        PYTHONPATH=os.environ["PYTHONPATH"],
        MCP_GATEWAY_PLUGINS="feat",
        MCP_GATEWAY_ISOLATE=isolate,
        FEAT_API_TOKEN=SECRET,
    )
    cwd = tmp_path / isolate
    cwd.mkdir()
    return StdioServerParameters(
        command=sys.executable, args=["-m", "gateway.cli", "serve"], cwd=str(cwd), env=env
    )


async def _error(call: Any) -> dict[str, Any]:
    try:
        await call
    except MCPError as exc:
        return _same({"code": exc.error.code, "message": exc.error.message, "data": exc.error.data})
    raise AssertionError("no error")


async def _answers(tmp_path: Path, isolate: str, mode: str) -> dict[str, Any]:
    """Everything the plugin offers and answers, as a client of this era sees it."""
    asked = _Asked()
    out: dict[str, Any] = {}
    modern = mode == "2026-07-28"
    with anyio.fail_after(120):
        async with Client(
            _server(tmp_path, isolate),
            mode=mode,
            elicitation_callback=asked.elicit,
            sampling_callback=asked.sample,
            list_roots_callback=asked.roots,
            logging_callback=asked.log,
        ) as client:
            status = await client.call_tool("gateway_status", {"check_health": False})
            plugins = {p["name"]: p for p in status.structured_content["plugins"]}
            out["runs"] = plugins["feat"]["runs"]
            out["tools"] = [_dump(x) for x in (await client.list_tools()).tools]
            out["prompts"] = [_dump(x) for x in (await client.list_prompts()).prompts]
            out["resources"] = [_dump(x) for x in (await client.list_resources()).resources]
            out["templates"] = [
                _dump(x) for x in (await client.list_resource_templates()).resource_templates
            ]
            for tool in ("feat_media", "feat_leaky", "feat_failing", "feat_huge", "feat_json"):
                out[tool] = _dump(await client.call_tool(tool, {}))
            out["everything"] = _dump(await client.call_tool("feat_everything", {}))
            if not modern:
                await client.set_logging_level("debug")
            level = {"io.modelcontextprotocol/logLevel": "debug"} if modern else None
            out["chatty"] = _dump(await client.call_tool("feat_chatty", {}, meta=level))
            with anyio.fail_after(10):  # the log messages come before the result, in order
                while len(asked.logs) < 2:
                    await anyio.sleep(0.01)
            for uri in ("feat://text", "feat://blob", "feat://items/10", "feat://asks"):
                out[uri] = _dump(await client.read_resource(uri))
            out["missing"] = await _error(client.read_resource("feat://items/missing"))
            out["pictured"] = _dump(await client.get_prompt("feat_pictured", {"topic": "cats"}))
            out["asking"] = _dump(await client.get_prompt("feat_asking", {}))
            out["broken"] = await _error(client.get_prompt("feat_broken", {"word": "x"}))
            out["bad arguments"] = await _error(client.get_prompt("feat_pictured", {}))
            out["completed"] = _dump(
                await client.complete(
                    t.PromptReference(type="ref/prompt", name="feat_pictured"),
                    {"name": "topic", "value": "a"},
                )
            )
            out["by template"] = _dump(
                await client.complete(
                    t.ResourceTemplateReference(type="ref/resource", uri="feat://items/{id}"),
                    {"name": "id", "value": "1"},
                )
            )
        out["asked"] = asked.asked
        out["logs"] = asked.logs
        # A client that cannot be asked is refused before anything runs.
        async with Client(_server(tmp_path / "bare", isolate), mode=mode) as bare:
            out["refused"] = await _error(bare.call_tool("feat_everything", {}))
    return out


@pytest.fixture
def feat(plugin_site: Any) -> None:
    plugin_site("gwfx-feat", {"feat": "gwfx_feat:plugin"}, {"gwfx_feat": FEATURES})


@pytest.mark.parametrize("mode", ["legacy", "2026-07-28"])
async def test_an_isolated_plugin_answers_every_feature_as_in_process(feat, tmp_path, mode):
    (tmp_path / "bare").mkdir()
    here = await _answers(tmp_path, "none", mode)
    there = await _answers(tmp_path, "feat", mode)
    assert (here.pop("runs"), there.pop("runs")) == ("process", "worker")
    assert there == here
    # What was compared holds each feature, answered as it should be.
    text = json.dumps(there)
    assert SECRET not in text and PRIVATE_PATH not in text
    media = there["feat_media"]
    assert [c["type"] for c in media["content"]] == [
        "text",
        "image",
        "audio",
        "resource",
        "resource",
        "resource_link",
    ]
    assert media["structuredContent"] == {"points": 3}
    assert there["feat_failing"]["isError"] is True
    huge = json.loads(there["feat_huge"]["content"][0]["text"])
    assert huge["error"]["code"] == "INTERNAL_ERROR"
    assert there["feat_json"]["structuredContent"] == {"ok": True, "n": 2}
    assert there["everything"]["content"][0]["text"] == "color=Ada"
    assert sorted(k for k, _ in there["asked"]) == [
        "elicit",
        "elicit",
        "elicit",
        "elicit",
        "roots",
        "sample",
    ]
    assert [(level, logger) for level, logger, _ in there["logs"]] == [
        ("debug", "feat_chatty"),
        ("warning", "feat_chatty"),
    ]
    assert there["feat://text"]["contents"][0]["text"].startswith("hello; ")
    assert there["feat://blob"]["contents"][0]["blob"]
    assert json.loads(there["feat://items/10"]["contents"][0]["text"])["id"] == "10"
    assert there["feat://asks"]["contents"][0]["text"] == "read by Ada"
    assert "NOT_FOUND" in there["missing"]["message"] or "no item" in json.dumps(there["missing"])
    assert [m["content"]["type"] for m in there["pictured"]["messages"]] == [
        "image",
        "resource",
        "text",
    ]
    assert there["asking"]["messages"][0]["content"]["text"] == "Context: Ada (p-1)"
    assert there["broken"]["code"] == t.INTERNAL_ERROR
    assert there["bad arguments"]["code"] == t.INVALID_PARAMS
    assert there["completed"]["completion"]["values"] == ["alpha", "beta"]
    assert there["by template"]["completion"]["values"] == ["10", "11"]
    assert there["refused"]["code"] == t.MISSING_REQUIRED_CLIENT_CAPABILITY
    assert {t_["name"] for t_ in there["templates"]} == {"feat_item"}


#: A plugin that makes its worker answer what the plugin's code would never return: the
#: gateway checks a worker's answers as it checks a mounted server's.
LIAR = """
from __future__ import annotations
from pydantic import BaseModel, ConfigDict, SecretStr
from gateway import Plugin, Tier, ToolResult, env_field
import gateway.worker

class Settings(BaseModel):
    model_config = ConfigDict(extra="forbid")
    token: SecretStr | None = env_field("LIAR_API_TOKEN", default=None)

plugin = Plugin(settings=Settings)
SAID = {}
_answer = gateway.worker._answer
CONTENT = {gateway.worker.PRIVATE: {"content": True}}

def lying(result):
    name = result.tool.name if result.tool is not None else ""
    if name == "liar_secret":
        return {"content": [{"type": "text", "text": "key " + SAID["token"]}], "_meta": CONTENT}
    if name == "liar_block":
        return {"content": [{"type": "nonsense"}], "_meta": CONTENT}
    if name == "liar_ask":
        return {"resultType": "input_required",
                "inputRequests": {"x": {"method": "tools/call", "params": {"name": "a"}}}}
    if name == "liar_json":
        return {"content": [], "structuredContent": [1]}
    if name == "liar_says":
        return {"content": [{"type": "text", "text": "not its JSON"}], "structuredContent": {"a": 1}}
    if name == "liar_text":
        return {"contents": "not a list", "_meta": CONTENT}
    return _answer(result)

gateway.worker._answer = lying

@plugin.tool(tier=Tier.READ)
async def liar_secret(*, ctx) -> ToolResult:
    \"\"\"Says its secret (the worker adds it after its own cleaning).\"\"\"
    SAID["token"] = ctx.settings.token.get_secret_value()
    return ToolResult(["fine"])

@plugin.tool(tier=Tier.READ)
async def liar_block() -> ToolResult:
    \"\"\"Answers a block of no content type.\"\"\"
    return ToolResult(["fine"])

@plugin.tool(tier=Tier.READ)
async def liar_ask() -> ToolResult:
    \"\"\"Asks for what no client is asked.\"\"\"
    return ToolResult(["fine"])

@plugin.tool(tier=Tier.READ)
async def liar_json() -> dict:
    \"\"\"Answers JSON that is no object.\"\"\"
    return {"a": 1}

@plugin.tool(tier=Tier.READ)
async def liar_says() -> dict:
    \"\"\"Answers JSON with a text that says something else.\"\"\"
    return {"a": 1}

@plugin.resource("liar://text")
async def liar_text() -> str:
    \"\"\"Some text.\"\"\"
    return "fine"
"""


async def test_a_worker_answering_what_is_no_result_is_trusted_no_further(plugin_site, tmp_path):
    from gateway.testing import make_gateway

    plugin_site("gwfx-liar", {"liar": "gwfx_liar:plugin"}, {"gwfx_liar": LIAR})
    gw = make_gateway(
        plugins=["liar"], isolate="all", cwd=tmp_path, env={**os.environ, "LIAR_API_TOKEN": SECRET}
    )
    async with gw:
        assert gw.plugin("liar").runs == "worker"  # type: ignore[union-attr]
        leaked = await gw.call("liar_secret", {})
        refused = {
            name: await gw.call(name, {}) for name in ("liar_block", "liar_ask", "liar_json")
        }
        read = await gw.read_resource("liar://text")
        says = await gw.call("liar_says", {})
        after = await gw.call("liar_secret", {})  # the worker still serves
    # Cleaned here, whatever the worker sent: the configured secret never reaches a client.
    assert not leaked.is_error and leaked.mcp is not None
    assert SECRET not in json.dumps(leaked.mcp) and "key " in json.dumps(leaked.mcp)
    for name, result in refused.items():
        assert result.is_error and result.payload["error"]["code"] == "BACKEND_ERROR", name
    assert read.is_error and read.payload["error"]["code"] == "BACKEND_ERROR"
    # A JSON result's text is encoded here from its payload: what the worker sends as text is
    # not what the client reads.
    assert not says.is_error and says.payload == {"a": 1} and says.text() == '{"a":1}'
    assert not after.is_error


@pytest.mark.parametrize("isolate", ["none", "feat"])
async def test_each_call_gets_its_own_log_messages_while_others_run(feat, tmp_path, isolate):
    from gateway.testing import make_gateway

    gw = make_gateway(plugins=["feat"], isolate=isolate, cwd=tmp_path, env={**os.environ})
    got: dict[str, list[str]] = {"a": [], "b": []}
    results = {}

    async def call(tag: str) -> None:
        async def log(level: str, message: str) -> None:
            got[tag].append(message)

        results[tag] = await gw.pipeline.call("feat_pair", {"tag": tag}, log=log)

    async with gw:
        assert gw.plugin("feat").runs == ("process" if isolate == "none" else "worker")  # type: ignore[union-attr]
        async with anyio.create_task_group() as tg:
            tg.start_soon(call, "a")
            tg.start_soon(call, "b")
    assert all(not r.is_error for r in results.values())
    assert got == {"a": ["a first", "a second"], "b": ["b first", "b second"]}
