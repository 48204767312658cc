"""Resource subscriptions end to end (issue 38): a plugin's resource declared
``subscribable=True`` and ``ctx.resource_updated(uri)``, served by ``mcp-gateway serve`` over
stdio to the official SDK client: ``resources/subscribe`` and ``notifications/resources/updated``
on the 2025 protocol, ``subscriptions/listen`` on 2026-07-28 (stdio and HTTP). Each runs with
the plugin in the gateway's process (``MCP_GATEWAY_ISOLATE=none``) and in a worker of its own
(``MCP_GATEWAY_ISOLATE=watch``), which the gateway subscribes as it does a mounted server.

What a test waits for after something it must not see is a later change it did ask for:
changes are told in the order they are said, so one told too many would come first.
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path
from typing import Any

import anyio
import mcp_types as t
import pytest
from conftest import gateway_env
from mcp import Client, MCPError, StdioServerParameters
from mcp.client.subscriptions import ResourceUpdated, ToolsListChanged
from wire import HttpServer

pytestmark = [
    pytest.mark.anyio,
    pytest.mark.e2e,
    # What a 2025 client does is what is tested here.
    pytest.mark.filterwarnings(
        "ignore:resources/(un)?subscribe is removed:mcp.shared.exceptions.MCPDeprecationWarning"
    ),
]

WATCH = '''
from __future__ import annotations
from typing import Any
from gateway import Plugin, ResourceContext, Tier, ToolContext

plugin = Plugin()
COUNT = {"n": 0}

@plugin.resource("watch://counter", mime_type="text/plain", subscribable=True)
async def watch_counter() -> str:
    """A counter that changes."""
    return str(COUNT["n"])

@plugin.resource_template("watch://items/{id}", mime_type="text/plain", subscribable=True)
async def watch_item(id: str) -> str:
    """One item, which changes with the counter."""
    return f"item {id}: {COUNT['n']}"

@plugin.resource("watch://still", mime_type="text/plain")
async def watch_still() -> str:
    """Never said to change (not subscribable)."""
    return "still"

@plugin.tool(tier=Tier.READ)
async def watch_bump(uris: list[str], thread: bool = False, *, ctx: ToolContext) -> dict[str, Any]:
    """Bumps the counter and says each URI changed (from a thread of its own if asked)."""
    COUNT["n"] += 1
    for uri in uris:
        if thread:
            await ctx.run_sync(ctx.resource_updated, uri)
        else:
            ctx.resource_updated(uri)
    return {"n": COUNT["n"]}
'''

COUNTER = "watch://counter"


@pytest.fixture
def watch(plugin_site: Any) -> None:
    plugin_site("gwfx-watch", {"watch": "gwfx_watch:plugin"}, {"gwfx_watch": WATCH})


def _env(isolate: str) -> dict[str, str]:
    return gateway_env(
        PYTHONPATH=os.environ["PYTHONPATH"],
        MCP_GATEWAY_PLUGINS="watch",
        MCP_GATEWAY_ISOLATE=isolate,
    )


def _server(tmp_path: Path, isolate: str) -> StdioServerParameters:
    cwd = tmp_path / f"cwd-{isolate}"
    cwd.mkdir(exist_ok=True)
    return StdioServerParameters(
        command=sys.executable,
        args=["-m", "gateway.cli", "serve"],
        cwd=str(cwd),
        env=_env(isolate),
    )


class _Told:
    """The URIs a 2025 client is told changed, in order."""

    def __init__(self) -> None:
        self.uris: list[str] = []

    async def __call__(self, message: Any) -> None:
        if isinstance(message, t.ResourceUpdatedNotification):
            self.uris.append(str(message.params.uri))

    async def next(self) -> str:
        with anyio.fail_after(20):
            while not self.uris:
                await anyio.sleep(0.01)
        return self.uris.pop(0)


async def _error(call: Any) -> t.ErrorData:
    try:
        await call
    except MCPError as exc:
        return exc.error
    raise AssertionError("no error")


ISOLATION = pytest.mark.parametrize("isolate", ["none", "watch"])


@ISOLATION
async def test_a_subscribed_client_is_told_of_changes_until_it_unsubscribes(
    watch, tmp_path, isolate
):
    told = _Told()
    with anyio.fail_after(60):
        async with Client(_server(tmp_path, isolate), mode="legacy", message_handler=told) as c:
            caps = c.session.server_capabilities
            assert caps is not None and caps.resources is not None
            assert caps.resources.subscribe is True
            status = await c.call_tool("gateway_status", {"check_health": False})
            runs = {p["name"]: p["runs"] for p in status.structured_content["plugins"]}
            assert runs["watch"] == ("process" if isolate == "none" else "worker")
            assert (await c.read_resource(COUNTER)).contents[0].text == "0"
            await c.subscribe_resource(COUNTER)
            await c.call_tool("watch_bump", {"uris": [COUNTER]})
            assert await told.next() == COUNTER
            assert (await c.read_resource(COUNTER)).contents[0].text == "1"
            # From a plugin's thread too; a URI of its template is told as subscribed.
            await c.subscribe_resource("watch://items/7")
            await c.call_tool("watch_bump", {"uris": ["watch://items/7"], "thread": True})
            assert await told.next() == "watch://items/7"
            # Unsubscribed: the counter's next change is not told, the item's still is.
            await c.unsubscribe_resource(COUNTER)
            await c.call_tool("watch_bump", {"uris": [COUNTER, "watch://items/8"]})
            await c.call_tool("watch_bump", {"uris": ["watch://items/7"]})
            assert await told.next() == "watch://items/7"
            assert told.uris == []


@ISOLATION
async def test_a_subscription_the_gateway_cannot_serve_is_refused_and_changes_nothing(
    watch, tmp_path, isolate, caplog
):
    told = _Told()
    cwd = tmp_path / f"cwd-{isolate}"
    with anyio.fail_after(60):
        async with Client(_server(tmp_path, isolate), mode="legacy", message_handler=told) as c:
            unknown = await _error(c.subscribe_resource("watch://nothing"))
            assert unknown.code == t.INVALID_PARAMS
            assert unknown.data == {"uri": "watch://nothing"}
            assert "NOT_FOUND" in unknown.message
            still = await _error(c.subscribe_resource("watch://still"))
            assert still.code == t.INVALID_PARAMS
            assert "cannot be subscribed to" in still.message
            gone = await _error(c.unsubscribe_resource("other://x"))
            assert gone.code == t.INVALID_PARAMS
            # Unsubscribing what it never subscribed to is no error.
            await c.unsubscribe_resource(COUNTER)
            # A plugin that says a URI changed that it does not serve as subscribable is
            # told to no one, and its call goes on.
            await c.subscribe_resource("watch://items/1")
            bumped = await c.call_tool(
                "watch_bump", {"uris": ["watch://still", "nope://x", COUNTER, "watch://items/1"]}
            )
            assert bumped.structured_content == {"n": 1}
            assert await told.next() == "watch://items/1"
            assert told.uris == []
    del cwd


@pytest.mark.parametrize("isolate", ["none", "watch"])
async def test_a_2026_client_listens_on_stdio_to_what_it_asked_for(watch, tmp_path, isolate):
    with anyio.fail_after(60):
        async with (
            Client(_server(tmp_path, isolate), mode="2026-07-28") as c,
            c.listen(resource_subscriptions=[COUNTER, "watch://still", "x://none"]) as one,
            c.listen(resource_subscriptions=["watch://items/2"]) as two,
        ):
            # Its resources may be subscribed to; its lists never change (nothing is mounted).
            caps = (await c.session.send_discover("2026-07-28"))["capabilities"]
            assert (caps["resources"]["subscribe"], caps["tools"]["listChanged"]) == (True, False)
            # What it may not subscribe to is left out of what is honored.
            assert one.honored.resource_subscriptions == [COUNTER]
            assert two.honored.resource_subscriptions == ["watch://items/2"]
            await c.call_tool("watch_bump", {"uris": [COUNTER]})
            await c.call_tool("watch_bump", {"uris": ["watch://items/2"]})
            with anyio.fail_after(20):
                assert await one.__anext__() == ResourceUpdated(COUNTER)
                assert await two.__anext__() == ResourceUpdated("watch://items/2")


#: What both mounted servers below serve of resources: one resource, one template.
_UPSTREAM_RESOURCES = """
async def list_resources(ctx, params):
    return t.ListResourcesResult(resources=[t.Resource(uri="up://clock", name="clock")])


async def list_templates(ctx, params):
    room = t.ResourceTemplate(uri_template="up://rooms/{room}", name="room")
    return t.ListResourceTemplatesResult(resource_templates=[room])


async def read(ctx, params):
    return t.ReadResourceResult(contents=[t.TextResourceContents(uri=params.uri, text="now")])
"""

#: A mounted server (the official SDK's low-level server) whose resources are subscribable: it
#: notes each subscribe and unsubscribe it gets, says a URI changed when ``change`` is called,
#: lists one tool more and says so on ``grow``, and exits on ``crash``.
UPSTREAM = (
    """
import json, os, sys
import anyio
import mcp_types as t
from mcp.server import Server
from mcp.server.stdio import stdio_server

JOURNAL = sys.argv[1]
READ_ONLY = t.ToolAnnotations(read_only_hint=True)
GROWN = []


def note(*what):
    with open(JOURNAL, "a") as fh:
        fh.write(json.dumps(what) + "\\n")


"""
    + _UPSTREAM_RESOURCES
    + """

async def subscribe(ctx, params):
    note("subscribe", str(params.uri))
    return t.EmptyResult()


async def unsubscribe(ctx, params):
    note("unsubscribe", str(params.uri))
    return t.EmptyResult()


async def list_tools(ctx, params):
    schema = {"type": "object", "properties": {"uri": {"type": "string"}}}
    names = ["crash", "grow", *GROWN]
    return t.ListToolsResult(tools=[
        t.Tool(name="change", input_schema=schema, annotations=READ_ONLY),
        *[t.Tool(name=n, input_schema={"type": "object"}, annotations=READ_ONLY) for n in names],
    ])


async def call(ctx, params):
    if params.name == "crash":
        os._exit(3)
    if params.name == "grow":
        GROWN.append(f"grown{len(GROWN)}")
        await ctx.session.send_tool_list_changed()
        return t.CallToolResult(content=[t.TextContent(type="text", text="grown")])
    await ctx.session.send_resource_updated(params.arguments["uri"])
    return t.CallToolResult(content=[t.TextContent(type="text", text="changed")])


server = Server(
    "up",
    on_list_resources=list_resources,
    on_list_resource_templates=list_templates,
    on_read_resource=read,
    on_subscribe_resource=subscribe,
    on_unsubscribe_resource=unsubscribe,
    on_list_tools=list_tools,
    on_call_tool=call,
)


async def main():
    note("started")
    async with stdio_server() as (r, w):
        await server.run(r, w, server.create_initialization_options())


anyio.run(main)
"""
)


class _Mounted:
    """A stdio gateway mounting :data:`UPSTREAM`, and what the server noted."""

    def __init__(self, tmp_path: Path) -> None:
        self.script = tmp_path / "up_server.py"
        self.script.write_text(UPSTREAM)
        self.journal_path = tmp_path / "up.journal"
        self.config = tmp_path / "gw.toml"
        self.config.write_text(
            '[gateway]\nplugins = ["servers"]\n'
            f"[servers.up]\ncommand = {json.dumps(sys.executable)}\n"
            f"args = {json.dumps([str(self.script), str(self.journal_path)])}\n"
        )
        self.cwd = tmp_path

    def server(self) -> StdioServerParameters:
        env = gateway_env(MCP_GATEWAY_CONFIG=str(self.config), XDG_STATE_HOME=str(self.cwd))
        return StdioServerParameters(
            command=sys.executable, args=["-m", "gateway.cli", "serve"], cwd=str(self.cwd), env=env
        )

    def journal(self) -> list[list[str]]:
        if not self.journal_path.exists():
            return []
        return [json.loads(line) for line in self.journal_path.read_text().splitlines()]

    async def noted(self, *what: str, last: bool = True) -> None:
        """Wait until the server noted ``what`` (last, unless ``last=False``)."""
        with anyio.fail_after(20):
            while (self.journal()[-1:] if last else self.journal()).count(list(what)) == 0:
                await anyio.sleep(0.02)


async def test_a_mounted_servers_updates_reach_the_subscribed_client_and_survive_its_restart(
    tmp_path,
):
    up = _Mounted(tmp_path)
    told = _Told()
    with anyio.fail_after(90):
        async with Client(up.server(), mode="legacy", message_handler=told) as c:
            caps = c.session.server_capabilities
            assert caps is not None and caps.resources is not None
            assert caps.resources.subscribe is True
            await c.list_tools()  # the server listed: its resources are known
            await c.subscribe_resource("up://clock")
            await up.noted("subscribe", "up://clock")
            # A second subscription of the same URI does not subscribe the server again.
            await c.subscribe_resource("up://clock")
            await c.subscribe_resource("up://rooms/blue")
            await up.noted("subscribe", "up://rooms/blue")
            assert [e for e in up.journal() if e[0] == "subscribe"] == [
                ["subscribe", "up://clock"],
                ["subscribe", "up://rooms/blue"],
            ]
            await c.call_tool("change", {"uri": "up://clock"})
            assert await told.next() == "up://clock"
            # What the server says of a URI nobody subscribed to is told to no one.
            await c.call_tool("change", {"uri": "up://rooms/red"})
            await c.call_tool("change", {"uri": "up://rooms/blue"})
            assert await told.next() == "up://rooms/blue"
            assert told.uris == []
            # The last subscriber gone, the server is unsubscribed.
            await c.unsubscribe_resource("up://rooms/blue")
            await up.noted("unsubscribe", "up://rooms/blue")
            # Started again, the server is subscribed again to what is still subscribed.
            assert (await c.call_tool("crash", {})).is_error
            await up.noted("subscribe", "up://clock")
            assert up.journal()[-2] == ["started"]
            for _ in range(100):  # its tools are back once it listed them
                changed = await c.call_tool("change", {"uri": "up://clock"})
                if not changed.is_error:
                    break
                await anyio.sleep(0.1)
            assert await told.next() == "up://clock"


async def test_a_2026_client_is_told_on_its_listen_stream_that_a_mounted_servers_tools_changed(
    tmp_path,
):
    up = _Mounted(tmp_path)
    with anyio.fail_after(60):
        async with Client(up.server(), mode="2026-07-28") as c:
            caps = (await c.session.send_discover("2026-07-28"))["capabilities"]
            assert (caps["tools"]["listChanged"], caps["prompts"]["listChanged"]) == (True, True)
            found = await c.list_tools()
            assert "grown0" not in {x.name for x in found.tools}
            async with c.listen(tools_list_changed=True, prompts_list_changed=True) as sub:
                assert sub.honored.tools_list_changed is True
                await c.call_tool("grow", {})
                with anyio.fail_after(20):
                    assert await sub.__anext__() == ToolsListChanged()
            # Pinned on first use, the new tool is held until approved; the listing changed.
            assert "grow" in {x.name for x in (await c.list_tools()).tools}


async def test_two_2026_clients_over_http_are_each_told_only_what_they_listen_for(tmp_path):
    up = _Mounted(tmp_path)
    env = gateway_env(MCP_GATEWAY_CONFIG=str(up.config), XDG_STATE_HOME=str(tmp_path))
    with HttpServer(tmp_path, env) as server, anyio.fail_after(60):
        url = f"{server.url}/mcp"
        async with (
            Client(url, mode="2026-07-28") as first,
            Client(url, mode="2026-07-28") as second,
        ):
            await first.list_tools()  # the server listed: its resources are known
            async with (
                first.listen(resource_subscriptions=["up://clock"]) as clock,
                second.listen(
                    tools_list_changed=True, resource_subscriptions=["up://rooms/blue", "x://y"]
                ) as rooms,
            ):
                assert rooms.honored.resource_subscriptions == ["up://rooms/blue"]
                await up.noted("subscribe", "up://rooms/blue")
                await first.call_tool("change", {"uri": "up://clock"})
                await first.call_tool("change", {"uri": "up://rooms/blue"})
                await first.call_tool("grow", {})
                with anyio.fail_after(20):
                    assert await clock.__anext__() == ResourceUpdated("up://clock")
                    assert await rooms.__anext__() == ResourceUpdated("up://rooms/blue")
                    assert await rooms.__anext__() == ToolsListChanged()
                # The first stream was told the clock only: the blue room comes next there.
                await first.call_tool("change", {"uri": "up://rooms/blue"})
                await first.call_tool("change", {"uri": "up://clock"})
                with anyio.fail_after(20):
                    assert await clock.__anext__() == ResourceUpdated("up://clock")
            # Both streams ended: the server is unsubscribed from what they listened to.
            await up.noted("unsubscribe", "up://rooms/blue", last=False)
            await up.noted("unsubscribe", "up://clock", last=False)


@pytest.mark.parametrize("isolate", ["none", "watch"])
async def test_a_caller_who_may_not_read_a_resource_may_not_subscribe_to_it(
    watch, tmp_path, isolate
):
    from gateway.app import build_gateway
    from gateway.auth.identity import Identity, calling_as
    from gateway.config import load_config
    from gateway.server import build_server

    config = tmp_path / "gw.toml"
    config.write_text(
        f'[gateway]\nplugins = ["watch"]\nisolate = "{isolate}"\n'
        '[auth]\nissuer = "https://idp.example"\n'
        '[auth.plugin_scopes.watch]\nread = "watch:read"\n'
    )
    gw = build_gateway(load_config(config, env=_env(isolate), cwd=tmp_path))
    issuer = "https://idp.example"
    other = Identity("o", "c", frozenset({"gateway:read"}), "jwt", issuer)
    reader = Identity("r", "c", frozenset({"watch:read"}), "jwt", issuer)
    async with gw:
        with calling_as(other), anyio.fail_after(30):
            async with Client(build_server(gw, stdio_session=True), mode="legacy") as c:
                refused = await _error(c.subscribe_resource(COUNTER))
            async with (
                Client(build_server(gw), mode="2026-07-28") as c,
                c.listen(resource_subscriptions=[COUNTER]) as sub,
            ):
                assert sub.honored.resource_subscriptions is None
        with calling_as(reader), anyio.fail_after(30):
            async with Client(build_server(gw, stdio_session=True), mode="legacy") as c:
                await c.subscribe_resource(COUNTER)
    assert refused.code == t.INVALID_PARAMS
    assert refused.data == {"uri": COUNTER}
    assert "PERMISSION_DENIED" in refused.message and "watch:read" in refused.message


@ISOLATION
async def test_a_burst_of_changes_said_before_the_client_is_told_is_told_once(
    watch, tmp_path, isolate
):
    told = _Told()
    with anyio.fail_after(60):
        async with Client(_server(tmp_path, isolate), mode="legacy", message_handler=told) as c:
            await c.subscribe_resource(COUNTER)
            await c.subscribe_resource("watch://items/9")
            await c.call_tool("watch_bump", {"uris": [COUNTER] * 50})
            await c.call_tool("watch_bump", {"uris": ["watch://items/9"]})
            assert await told.next() == COUNTER
            assert await told.next() == "watch://items/9"
            assert told.uris == []


async def test_a_uri_a_plugin_does_not_serve_as_subscribable_is_logged_once(
    watch, tmp_path, caplog
):
    from gateway.app import build_gateway
    from gateway.config import load_config

    config = tmp_path / "gw.toml"
    config.write_text('[gateway]\nplugins = ["watch"]\nisolate = "none"\n')
    gw = build_gateway(load_config(config, env=_env("none"), cwd=tmp_path))
    record = gw.plugin("watch")
    assert record is not None and record.context is not None
    async with gw:
        for uri in ["nope://x", "nope://x", "watch://still", "watch://still", COUNTER, 7]:
            record.context.resource_updated(uri)  # type: ignore[arg-type]
    said = [r.getMessage() for r in caplog.records if "said resource" in r.getMessage()]
    assert said == [
        "watch said resource 'nope://x' changed, but it serves no subscribable resource of "
        "that URI (a plugin declares one subscribable=True): nobody is told",
        "watch said resource 'watch://still' changed, but it serves no subscribable resource "
        "of that URI (a plugin declares one subscribable=True): nobody is told",
        "watch said resource (int, not a URI) changed, but it serves no subscribable resource "
        "of that URI (a plugin declares one subscribable=True): nobody is told",
    ]


async def test_a_gateway_with_nothing_subscribable_does_not_declare_subscriptions(tmp_path):
    env = gateway_env(PYTHONPATH=os.environ["PYTHONPATH"], MCP_GATEWAY_PLUGINS="notes")
    server = StdioServerParameters(
        command=sys.executable, args=["-m", "gateway.cli", "serve"], cwd=str(tmp_path), env=env
    )
    with anyio.fail_after(60):
        async with Client(server, mode="legacy") as c:
            caps = c.session.server_capabilities
            assert caps is not None and caps.resources is not None
            assert caps.resources.subscribe is False
        async with Client(server, mode="2026-07-28") as c:
            caps26 = (await c.session.send_discover("2026-07-28"))["capabilities"]
            assert caps26["resources"]["subscribe"] is False


# --- a server mounted at 2026-07-28: it tells of changes on a subscriptions/listen stream -------

#: A mounted server (the official SDK's low-level server) spoken to at 2026-07-28: it serves
#: ``subscriptions/listen`` (the SDK's ListenHandler, so it declares ``tools.listChanged`` and
#: ``resources.subscribe``) and notes each listen request's filter; ``grow`` lists one tool
#: more and ``shrink`` one less, ``change`` says a URI changed, each on its listen streams (at
#: this revision the SDK drops a bare notification on the connection); ``drop`` breaks every
#: open stream with an error (a stream lost), ``crash`` exits. With ``refuse`` as its second
#: argument it answers every listen request with an error; with ``http PORT`` it serves
#: Streamable HTTP at ``http://127.0.0.1:PORT/mcp`` instead of stdio.
UPSTREAM_2026 = (
    """
import json, os, sys
import anyio
import mcp_types as t
from mcp import MCPError
from mcp.server import Server
from mcp.server.stdio import stdio_server
from mcp.server.subscriptions import (
    InMemorySubscriptionBus, ListenHandler, ResourceUpdated, ToolsListChanged,
)

JOURNAL = sys.argv[1]
REFUSE = sys.argv[2:] == ["refuse"]
READ_ONLY = t.ToolAnnotations(read_only_hint=True)
GROWN = []
BUS = InMemorySubscriptionBus()
SERVED = ListenHandler(BUS)
DROPS = []


def note(*what):
    with open(JOURNAL, "a") as fh:
        fh.write(json.dumps(what) + "\\n")


async def listen(ctx, params):
    note("listen", params.notifications.model_dump(by_alias=True, exclude_none=True))
    if REFUSE:
        raise MCPError(t.METHOD_NOT_FOUND, "no listening at /srv/private/listen here")
    dropped = anyio.Event()
    DROPS.append(dropped)
    result = None
    async with anyio.create_task_group() as tg:
        async def serve():
            nonlocal result
            result = await SERVED(ctx, params)
            tg.cancel_scope.cancel()
        tg.start_soon(serve)
        await dropped.wait()
        tg.cancel_scope.cancel()
    if result is None:
        raise MCPError(t.INTERNAL_ERROR, "the stream broke")
    return result


"""
    + _UPSTREAM_RESOURCES
    + """

async def list_tools(ctx, params):
    schema = {"type": "object", "properties": {"uri": {"type": "string"}}}
    names = ["crash", "grow", "shrink", "drop", *GROWN]
    return t.ListToolsResult(tools=[
        t.Tool(name="change", input_schema=schema, annotations=READ_ONLY),
        *[t.Tool(name=n, input_schema={"type": "object"}, annotations=READ_ONLY) for n in names],
    ])


def done(text):
    return t.CallToolResult(content=[t.TextContent(type="text", text=text)])


async def call(ctx, params):
    if params.name == "crash":
        os._exit(3)
    if params.name == "drop":
        for dropped in DROPS:
            dropped.set()
        DROPS.clear()
        return done("dropped")
    if params.name in ("grow", "shrink"):
        if params.name == "grow":
            GROWN.append(f"grown{len(GROWN)}")
        else:
            GROWN.pop()
        await BUS.publish(ToolsListChanged())
        return done(params.name)
    await BUS.publish(ResourceUpdated(params.arguments["uri"]))
    return done("changed")


server = Server(
    "up26",
    on_list_resources=list_resources,
    on_list_resource_templates=list_templates,
    on_read_resource=read,
    on_list_tools=list_tools,
    on_call_tool=call,
    on_subscriptions_listen=listen,
)


async def main():
    note("started")
    async with stdio_server() as (r, w):
        await server.run(r, w, server.create_initialization_options())


if sys.argv[2:3] == ["http"]:
    import uvicorn

    note("started")
    app = server.streamable_http_app(stateless_http=True, json_response=False)
    uvicorn.run(app, host="127.0.0.1", port=int(sys.argv[3]), log_level="warning")
else:
    anyio.run(main)
"""
)


class _Mounted2026(_Mounted):
    """A stdio gateway mounting :data:`UPSTREAM_2026` with ``protocol = "2026-07-28"``."""

    def __init__(self, tmp_path: Path, *extra: str) -> None:
        super().__init__(tmp_path)
        self.script.write_text(UPSTREAM_2026)
        args = [str(self.script), str(self.journal_path), *extra]
        self.config.write_text(
            '[gateway]\nplugins = ["servers"]\n'
            f"[servers.up]\ncommand = {json.dumps(sys.executable)}\n"
            f'args = {json.dumps(args)}\nprotocol = "2026-07-28"\n'
        )

    def listens(self) -> list[dict[str, Any]]:
        """The filter of each listen request the server got, in order."""
        return [e[1] for e in self.journal() if e[0] == "listen"]

    async def listened(self, expected: dict[str, Any]) -> None:
        """Wait until the last listen request the server got asked for ``expected``."""
        with anyio.fail_after(20):
            while self.listens()[-1:] != [expected]:
                await anyio.sleep(0.02)


#: What the gateway listens for on :data:`UPSTREAM_2026`: the lists it declares may change (it
#: lists no prompts, so it declares no ``prompts.listChanged``).
LISTS = {"toolsListChanged": True, "resourcesListChanged": True}


class _ToolsTold:
    """How many times a 2025 client was told the tools changed."""

    def __init__(self) -> None:
        self.count = 0

    async def __call__(self, message: Any) -> None:
        if isinstance(message, t.ToolListChangedNotification):
            self.count += 1

    async def another(self, seen: int) -> None:
        with anyio.fail_after(20):
            while self.count <= seen:
                await anyio.sleep(0.01)


async def _names(c: Client) -> set[str]:
    return {x.name for x in (await c.list_tools()).tools}


async def test_a_2026_mounted_servers_tools_come_and_go_without_a_restart(tmp_path):
    up = _Mounted2026(tmp_path)
    told = _ToolsTold()
    with anyio.fail_after(60):
        async with Client(up.server(), mode="legacy", message_handler=told) as c:
            assert {"grow", "shrink"} <= await _names(c)
            await up.listened(LISTS)  # once it listed, the gateway listens
            seen = told.count
            await c.call_tool("grow", {})
            await told.another(seen)
            assert "grown0" in await _names(c)
            seen = told.count
            await c.call_tool("shrink", {})
            await told.another(seen)
            assert "grown0" not in await _names(c)
        # One stream was enough: it was never opened again.
        assert up.listens() == [LISTS]


async def test_a_2026_client_is_told_on_its_listen_stream_when_a_2026_mounted_servers_tools_change(
    tmp_path,
):
    up = _Mounted2026(tmp_path)
    with anyio.fail_after(60):
        async with Client(up.server(), mode="2026-07-28") as c:
            assert "grown0" not in await _names(c)
            await up.listened(LISTS)
            async with c.listen(tools_list_changed=True) as sub:
                await c.call_tool("grow", {})
                with anyio.fail_after(20):
                    assert await sub.__anext__() == ToolsListChanged()
            assert "grown0" in await _names(c)


class _Heard(_Told):
    """The URIs a 2025 client is told changed, and how many times it was told the tools did."""

    def __init__(self) -> None:
        super().__init__()
        self.tools = _ToolsTold()

    async def __call__(self, message: Any) -> None:
        await super().__call__(message)
        await self.tools(message)


CLOCK = {**LISTS, "resourceSubscriptions": ["up://clock"]}


async def test_a_2026_mounted_servers_updates_reach_the_subscribed_client_and_survive_its_restart(
    tmp_path,
):
    up = _Mounted2026(tmp_path)
    told = _Told()
    with anyio.fail_after(90):
        async with Client(up.server(), mode="legacy", message_handler=told) as c:
            caps = c.session.server_capabilities
            assert caps is not None and caps.resources is not None
            assert caps.resources.subscribe is True
            await c.list_tools()  # the server listed: its resources are known
            await up.listened(LISTS)
            # A subscription opens the stream again with the URI, before it is answered.
            await c.subscribe_resource("up://clock")
            assert up.listens()[-1] == CLOCK
            # A second subscription of the same URI does not open it again.
            await c.subscribe_resource("up://clock")
            await c.subscribe_resource("up://rooms/blue")
            rooms = {**LISTS, "resourceSubscriptions": ["up://clock", "up://rooms/blue"]}
            assert up.listens() == [LISTS, CLOCK, rooms]
            await c.call_tool("change", {"uri": "up://clock"})
            assert await told.next() == "up://clock"
            # What the server says of a URI nobody subscribed to is told to no one.
            await c.call_tool("change", {"uri": "up://rooms/red"})
            await c.call_tool("change", {"uri": "up://rooms/blue"})
            assert await told.next() == "up://rooms/blue"
            assert told.uris == []
            # The last subscriber gone, the stream is opened again without the URI.
            await c.unsubscribe_resource("up://rooms/blue")
            assert up.listens()[-1] == CLOCK
            # Started again, the server is listened to for what is still subscribed.
            assert (await c.call_tool("crash", {})).is_error
            with anyio.fail_after(20):
                while up.journal().count(["started"]) < 2 or up.journal()[-1:] != [
                    ["listen", CLOCK]
                ]:
                    await anyio.sleep(0.02)
            assert up.journal()[-2] == ["started"]
            for _ in range(100):  # its tools are back once it listed them
                changed = await c.call_tool("change", {"uri": "up://clock"})
                if not changed.is_error:
                    break
                await anyio.sleep(0.1)
            assert await told.next() == "up://clock"
            assert told.uris == []


async def test_a_lost_listen_stream_is_opened_again_and_what_it_may_have_missed_is_told(
    tmp_path,
):
    up = _Mounted2026(tmp_path)
    heard = _Heard()
    with anyio.fail_after(60):
        async with Client(up.server(), mode="legacy", message_handler=heard) as c:
            await c.list_tools()
            await c.subscribe_resource("up://clock")
            assert up.listens()[-1] == CLOCK
            # The server breaks the stream: its tools still serve, and it is listened to again.
            assert not (await c.call_tool("drop", {})).is_error
            with anyio.fail_after(20):
                while len(up.listens()) < 3:
                    await anyio.sleep(0.02)
            assert up.listens()[-1] == CLOCK  # the same filter again
            # What changed meanwhile was not told: a subscribed client is told to read again.
            assert await heard.next() == "up://clock"
            seen = heard.tools.count
            await c.call_tool("grow", {})
            await heard.tools.another(seen)
            assert "grown0" in await _names(c)
            await c.call_tool("change", {"uri": "up://clock"})
            assert await heard.next() == "up://clock"
            assert heard.uris == []
    assert len(up.listens()) == 3


async def test_a_2026_mounted_server_that_refuses_to_listen_is_noted_once_and_still_serves(
    tmp_path, caplog
):
    from gateway.app import build_gateway
    from gateway.config import load_config
    from gateway.server import build_server

    up = _Mounted2026(tmp_path, "refuse")
    env = gateway_env(XDG_STATE_HOME=str(tmp_path))
    gw = build_gateway(load_config(up.config, env=env, cwd=tmp_path))
    refused = "refused subscriptions/listen"
    async with gw:
        with anyio.fail_after(30):
            async with Client(build_server(gw, stdio_session=True), mode="legacy") as c:
                await up.listened(LISTS)
                while not any(refused in r.getMessage() for r in caplog.records):
                    await anyio.sleep(0.02)
                # Its resources may still be subscribed to (it declares so); nobody is told.
                await c.subscribe_resource("up://clock")
                changed = await c.call_tool("change", {"uri": "up://clock"})
                assert not changed.is_error
                assert "grow" in await _names(c)
    # Not asked again on that connection, and said once, without the server's paths.
    assert up.listens() == [LISTS]
    [said] = [r.getMessage() for r in caplog.records if refused in r.getMessage()]
    assert said.startswith("server up refused subscriptions/listen")
    assert "no listening at" in said and "/srv/private" not in said


async def test_a_2026_server_mounted_over_http_is_listened_to_as_well(tmp_path):
    import socket
    import subprocess

    from services import free_port

    up = _Mounted2026(tmp_path)
    port = free_port()
    served = subprocess.Popen(
        [sys.executable, str(up.script), str(up.journal_path), "http", str(port)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        with anyio.fail_after(60):
            while True:
                with socket.socket() as probe:
                    if probe.connect_ex(("127.0.0.1", port)) == 0:
                        break
                await anyio.sleep(0.05)
        up.config.write_text(
            '[gateway]\nplugins = ["servers"]\n[servers.up]\ntype = "http"\n'
            f'url = "http://127.0.0.1:{port}/mcp"\nprotocol = "2026-07-28"\n'
        )
        heard = _Heard()
        with anyio.fail_after(60):
            async with Client(up.server(), mode="legacy", message_handler=heard) as c:
                assert "grown0" not in await _names(c)
                await up.listened(LISTS)
                await c.subscribe_resource("up://clock")
                assert up.listens()[-1] == CLOCK
                seen = heard.tools.count
                await c.call_tool("grow", {})
                await heard.tools.another(seen)
                assert "grown0" in await _names(c)
                await c.call_tool("change", {"uri": "up://clock"})
                assert await heard.next() == "up://clock"
                assert heard.uris == []
    finally:
        served.terminate()
        served.wait(10)
