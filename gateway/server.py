"""Thin MCP wiring: the low-level ``Server`` of the official SDK over the gateway facade."""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from typing import Any

import mcp_types as t
from mcp import MCPError
from mcp.server import Server, ServerRequestContext
from mcp.server.lowlevel.server import NotificationOptions
from mcp_types.version import HANDSHAKE_PROTOCOL_VERSIONS
from pydantic import BaseModel

from . import __version__, startrecord
from .app import CallResult, Gateway, OfferedTool, RegisteredPrompt
from .auth.identity import Identity, current_caller
from .errors import ErrorCode, GatewayError, encodable
from .lifecycle import SignalGuard, plugin_fault, run
from .startrecord import Inputs, StartRecord
from .stdio import Wire, json_rpc_streams
from .telemetry.middleware import instrument_server

log = logging.getLogger("gateway.server")


def mcp_tool(tool: OfferedTool) -> t.Tool:
    return t.Tool(
        name=tool.name,
        title=tool.title,
        description=tool.description,
        input_schema=tool.input_schema,
        output_schema=tool.output_schema,
        annotations=t.ToolAnnotations(**tool.annotations),
        _meta=tool.meta,
    )


def mcp_prompt(prompt: RegisteredPrompt) -> t.Prompt:
    return t.Prompt(
        name=prompt.name,
        title=prompt.spec.title,
        description=prompt.spec.description,
        arguments=[t.PromptArgument(**a) for a in prompt.arguments],
    )


def to_call_tool_result(result: CallResult) -> t.CallToolResult:
    """Success: the complete JSON in ``structuredContent`` (all Claude Code shows the model) and
    the same JSON as text. Error: the error JSON as text only. Strict clients (the TypeScript
    SDK 1.x, so Claude Code and the Inspector) check any ``structuredContent`` against the
    tool's *success* ``outputSchema``, error or not, and would replace our error by their own.
    A mounted server's result goes as that server sent it (:attr:`CallResult.mcp`)."""
    if result.mcp is not None:
        # The model, not the JSON: it fills what the client's protocol revision requires and a
        # server of another revision did not send (2026-07-28's resultType).
        return t.CallToolResult.model_validate(result.mcp, by_name=False)
    return t.CallToolResult(
        content=[t.TextContent(type="text", text=result.text())],
        structured_content=None if result.is_error else result.payload,
        is_error=result.is_error,
    )


def published(result: BaseModel) -> dict[str, Any]:
    """A result as the SDK sends it."""
    return result.model_dump(by_alias=True, mode="json", exclude_none=True)


def start_record(gateway: Gateway) -> StartRecord:
    """What ``gateway`` (started) offers, as a start record (:mod:`gateway.startrecord`)."""
    return StartRecord(
        tools=[published(mcp_tool(x)) for x in gateway.offered_tools()],
        prompts=[published(mcp_prompt(p)) for p in gateway.offered_prompts()],
        instructions=gateway.instructions(),
        served_tools=sorted(t.name for t in gateway.tools()),
        served_prompts=sorted(p.name for p in gateway.prompts.all()),
        inputs=Inputs(
            roots=sorted(gateway.loader.package_roots),
            env_names=sorted(gateway.loader.consulted_env),
        ),
    )


#: Seconds a start answered from its record waits, after its first answer (the handshake's),
#: for the client's first listing before it loads the plugins anyway; a call or a prompt
#: asked for loads them at once. Clients list right after connecting (Claude Code within
#: milliseconds).
LISTING_WAIT = 1.0


class HeadStart:
    """A stdio start that answers from the last start's record while the plugins load.

    The plugins are loaded (on the event loop: their hooks run under the loader's time
    limits) once the first ``tools/list`` answered from the record has been written, or when
    a request needs them, or :data:`LISTING_WAIT` after the first answer. Afterwards the listing is compared
    with the record: if it differs, the record is replaced and the client told."""

    def __init__(self, gateway: Gateway, record: StartRecord | None) -> None:
        import anyio

        self.gateway = gateway
        self.record = record  # None once the plugins are loaded
        self.go = anyio.Event()
        self.answered = anyio.Event()
        self.ready = anyio.Event()
        #: the ids of the listings answered from the record
        self.listings: set[Any] = set()
        self.session: Any = None
        if record is None:
            self.ready.set()

    def wrote(self, message: t.JSONRPCMessage) -> None:
        """A message went out: once it is the answer to a listing, the plugins may load."""
        if isinstance(message, t.JSONRPCResponse | t.JSONRPCError):
            self.answered.set()
            if message.id in self.listings:
                self.go.set()

    async def loaded(self) -> None:
        if not self.ready.is_set():
            self.go.set()
            await self.ready.wait()

    def remember(self) -> None:
        """Record what the started gateway offers, for the next start (which only loses its
        head start if that fails)."""
        try:
            startrecord.save(self.gateway.config, start_record(self.gateway))
        except Exception as exc:
            log.warning("start record not kept: %s", type(exc).__name__)

    async def complete(self, changed: Callable[[], None]) -> None:
        """Load and start the plugins when the time comes; then check the record."""
        import anyio

        assert self.record is not None
        async with anyio.create_task_group() as tg:

            async def after_first_answer() -> None:
                await self.answered.wait()
                with anyio.move_on_after(LISTING_WAIT):
                    await self.go.wait()
                tg.cancel_scope.cancel()

            tg.start_soon(after_first_answer)
            await self.go.wait()
            tg.cancel_scope.cancel()
        try:
            await self.gateway.start()
            fresh = start_record(self.gateway)
            if fresh != self.record:
                startrecord.save(self.gateway.config, fresh)
            if not fresh.same_listing(self.record):
                log.warning("the plugins offer other tools than the last start's record said")
                self.record = None
                changed()
                if self.session is not None:
                    await self.session.send_tool_list_changed()
                    await self.session.send_prompt_list_changed()
        except Exception as exc:  # the plugins' own faults are the loader's; this is ours
            log.error("loading after the first listing failed: %s", type(exc).__name__)
        finally:
            self.record = None
            self.ready.set()


def build_server(gateway: Gateway, *, head: HeadStart | None = None) -> Server[Any]:
    """The MCP server over ``gateway``. With ``head`` (stdio) the start is remembered for the
    next one, and with a record in it the gateway's plugins are loaded only after the first
    listing, answered from the record."""
    record = head.record if head is not None else None
    # The visible tool list is fixed once plugin resources are open (a plugin whose
    # open_resources fails is withdrawn then): compute it once, on first use.
    cache: dict[str, Any] = {}

    def listed() -> t.ListToolsResult:
        if "tools" not in cache:
            cache["tools"] = t.ListToolsResult(tools=[mcp_tool(x) for x in gateway.offered_tools()])
        return cache["tools"]  # type: ignore[no-any-return]

    scoped: dict[frozenset[str], t.ListToolsResult] = {}
    #: the stdio session (one per process), told when mounted servers' tools change
    stdio: list[Any] = []

    async def tools_changed() -> None:
        cache.pop("tools", None)
        scoped.clear()
        if stdio and stdio[0][1] in HANDSHAKE_PROTOCOL_VERSIONS:
            # 2025 sessions are told on their connection; 2026-07-28 has no such notification
            # outside subscriptions/listen, and HTTP requests are each their own session.
            await stdio[0][0].send_tool_list_changed()

    gateway.mounts.subscribe(tools_changed)

    def remember(ctx: ServerRequestContext[Any]) -> None:
        if head is not None and not stdio:
            stdio.append((ctx.session, ctx.protocol_version))

    def listed_for(caller: Identity) -> t.ListToolsResult:
        """What this caller may use: an unlimited caller (stdio, the static token) gets the
        cached list itself; an OAuth caller the tools its scopes allow, cached per scope set."""
        if caller.scopes is None:
            return listed()
        found = scoped.get(caller.scopes)
        if found is None:
            allowed = gateway.offered_to(caller)
            if allowed is None:
                return listed()
            if len(scoped) >= 64:  # scope sets are few; odd ones must not grow this unbounded
                scoped.clear()
            tools = [x for x in listed().tools if x.name in allowed]
            found = scoped[caller.scopes] = t.ListToolsResult(tools=tools)
        return found

    def early() -> StartRecord | None:
        """The record answering for the plugins while they load, else ``None``."""
        return head.record if head is not None else None

    def input_schema(name: str) -> dict[str, Any] | None:
        if (rec := early()) is not None:
            tool = rec.tool(name)
            return tool.get("inputSchema") if tool is not None else None
        offered = gateway.offered_tool(name)
        return offered.input_schema if offered is not None else None

    @asynccontextmanager
    async def lifespan(_: Server[Any]) -> AsyncIterator[dict[str, Any]]:
        import anyio

        try:
            if head is None or head.record is None:
                await gateway.start()
                if head is not None:
                    head.remember()
                yield {}
                return
            async with anyio.create_task_group() as tg:
                tg.start_soon(head.complete, cache.clear)
                try:
                    yield {}
                finally:
                    tg.cancel_scope.cancel()
        finally:
            # Also when the server is being cancelled (a stop signal): each plugin's
            # close_resources is bounded by resource_timeout.
            with anyio.CancelScope(shield=True):
                await gateway.stop()

    async def on_list_tools(
        ctx: ServerRequestContext[Any], params: t.PaginatedRequestParams | None
    ) -> t.ListToolsResult:
        if head is not None:
            head.session = ctx.session
            remember(ctx)
            if (rec := early()) is not None:
                head.listings.add(ctx.request_id)
                if "early tools" not in cache:
                    cache["early tools"] = t.ListToolsResult.model_validate({"tools": rec.tools})
                return cache["early tools"]  # type: ignore[no-any-return]
        await gateway.settled()
        return listed_for(current_caller())

    async def on_call_tool(
        ctx: ServerRequestContext[Any], params: t.CallToolRequestParams
    ) -> t.CallToolResult:
        async def progress(p: float, total: float | None, message: str | None) -> None:
            await ctx.session.report_progress(p, total, message)

        if head is not None:
            await head.loaded()
            remember(ctx)
        result = await gateway.call(params.name, params.arguments, progress=progress)
        return to_call_tool_result(result)

    async def on_list_prompts(
        ctx: ServerRequestContext[Any], params: t.PaginatedRequestParams | None
    ) -> t.ListPromptsResult:
        if (rec := early()) is not None:
            return t.ListPromptsResult.model_validate({"prompts": rec.prompts})
        return t.ListPromptsResult(prompts=[mcp_prompt(p) for p in gateway.offered_prompts()])

    async def on_get_prompt(
        ctx: ServerRequestContext[Any], params: t.GetPromptRequestParams
    ) -> t.GetPromptResult:
        if head is not None:
            await head.loaded()
        try:
            info = getattr(ctx.session.client_params, "client_info", None)
            client = getattr(info, "name", None)
            text = await gateway.get_prompt(params.name, params.arguments, client=client)
        except GatewayError as err:
            # Prompts have no error result like tools: a protocol error the client shows.
            code = t.INTERNAL_ERROR if err.code is ErrorCode.INTERNAL_ERROR else t.INVALID_PARAMS
            raise MCPError(code, gateway.sanitizer(f"{err.code.value}: {err.message}")) from None
        except BaseException as exc:  # KeyboardInterrupt & co. from a render function
            if not plugin_fault(exc):
                raise
            log.error("prompt=%s render raised %s", params.name, type(exc).__name__)
            raise MCPError(
                t.INTERNAL_ERROR, "INTERNAL_ERROR: the prompt could not be rendered"
            ) from None
        prompt = gateway.offered_prompt(params.name)
        return t.GetPromptResult(
            description=prompt.spec.description if prompt else None,
            messages=[
                t.PromptMessage(
                    role="user", content=t.TextContent(type="text", text=encodable(text))
                )
            ],
        )

    server: Server[Any] = Server(
        gateway.config.server_name,
        version=__version__,
        instructions=record.instructions if record is not None else gateway.instructions(),
        lifespan=lifespan,
        get_tool_input_schema=input_schema,
        on_list_tools=on_list_tools,
        on_call_tool=on_call_tool,
        on_list_prompts=on_list_prompts,
        on_get_prompt=on_get_prompt,
    )

    def serves_tool(name: str) -> bool:
        rec = early()
        return name in rec.served_tools if rec is not None else gateway.serves_tool(name)

    def serves_prompt(name: str) -> bool:
        rec = early()
        return name in rec.served_prompts if rec is not None else gateway.serves_prompt(name)

    # The gateway's span per request in place of the SDK's (which is removed when off).
    instrument_server(server, gateway.telemetry, serves_tool, serves_prompt)
    return server


def initialization_options(server: Server[Any]) -> Any:
    # Lists change after a start answered from a record that proved stale, and when mounted
    # MCP servers list their tools (or list others).
    return server.create_initialization_options(
        NotificationOptions(tools_changed=True, prompts_changed=True)
    )


async def serve_stdio(gateway: Gateway, wire: Wire, record: StartRecord | None = None) -> None:
    """Serve over the real stdin/stdout taken by :func:`gateway.stdio.protected_stdio` before
    the plugins were imported (fd 1 already points at stderr). With ``record`` the plugins
    are loaded after the first listing (``gateway`` built with ``defer_loading``)."""
    head = HeadStart(gateway, record)
    server = build_server(gateway, head=head)
    async with json_rpc_streams(wire, wrote=head.wrote) as (read, write):
        await server.run(read, write, initialization_options(server))


def run_stdio(
    gateway: Gateway, wire: Wire, guard: SignalGuard, record: StartRecord | None = None
) -> None:
    """Serve until stdin closes or a real stop signal arrives; either way the plugins'
    resources are closed before this returns."""
    import anyio

    async def main() -> None:
        with anyio.CancelScope() as scope, guard.serving(scope.cancel):
            await serve_stdio(gateway, wire, record)

    run(main, guard)
