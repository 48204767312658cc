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

from . import __version__
from .app import CallResult, Gateway, OfferedTool, RegisteredPrompt
from .auth.identity import Identity, current_caller
from .errors import ErrorCode, GatewayError, encodable
from .lifecycle import SignalGuard, plugin_fault, run
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


def build_server(gateway: Gateway, *, stdio_session: bool = False) -> Server[Any]:
    """The MCP server over ``gateway`` (loaded: what it lists is what its plugins publish).
    ``stdio_session``: it serves the one session of a stdio process, which is told when
    mounted servers' tools change."""
    # The visible tool list, computed on first use and again after mounted servers' tools
    # change (a plugin whose open_resources fails is withdrawn before the first listing).
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
        if stdio_session and not stdio:
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

    def input_schema(name: str) -> dict[str, Any] | None:
        offered = gateway.offered_tool(name)
        return offered.input_schema if offered is not None else None

    @asynccontextmanager
    async def lifespan(_: Server[Any]) -> AsyncIterator[dict[str, Any]]:
        import anyio

        try:
            await gateway.start()
            yield {}
        finally:
            # Also when the server is being cancelled (a stop signal): each plugin's
            # close_resources is bounded by resource_timeout.
            with anyio.CancelScope(shield=True):
                await gateway.stop()

    async def on_list_tools(
        ctx: ServerRequestContext[Any], params: t.PaginatedRequestParams | None
    ) -> t.ListToolsResult:
        remember(ctx)
        await gateway.settled()
        return listed_for(current_caller())

    async def on_call_tool(
        ctx: ServerRequestContext[Any], params: t.CallToolRequestParams
    ) -> t.CallToolResult:
        async def progress(p: float, total: float | None, message: str | None) -> None:
            await ctx.session.report_progress(p, total, message)

        remember(ctx)
        result = await gateway.call(params.name, params.arguments, progress=progress)
        return to_call_tool_result(result)

    async def on_list_prompts(
        ctx: ServerRequestContext[Any], params: t.PaginatedRequestParams | None
    ) -> t.ListPromptsResult:
        return t.ListPromptsResult(prompts=[mcp_prompt(p) for p in gateway.offered_prompts()])

    async def on_get_prompt(
        ctx: ServerRequestContext[Any], params: t.GetPromptRequestParams
    ) -> t.GetPromptResult:
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
        instructions=gateway.instructions(),
        lifespan=lifespan,
        get_tool_input_schema=input_schema,
        on_list_tools=on_list_tools,
        on_call_tool=on_call_tool,
        on_list_prompts=on_list_prompts,
        on_get_prompt=on_get_prompt,
    )

    # The gateway's span per request in place of the SDK's (which is removed when off).
    instrument_server(server, gateway.telemetry, gateway.serves_tool, gateway.serves_prompt)
    return server


def initialization_options(server: Server[Any]) -> Any:
    # Lists change when mounted MCP servers list their tools (or list others).
    return server.create_initialization_options(
        NotificationOptions(tools_changed=True, prompts_changed=True)
    )


async def serve_stdio(gateway: Gateway, wire: Wire) -> None:
    """Serve over the real stdin/stdout taken by :func:`gateway.stdio.protected_stdio` before
    the plugins were imported (fd 1 already points at stderr)."""
    server = build_server(gateway, stdio_session=True)
    async with json_rpc_streams(wire) as (read, write):
        await server.run(read, write, initialization_options(server))


def run_stdio(
    gateway: Gateway,
    wire: Wire,
    guard: SignalGuard,
    *,
    started: Callable[[Gateway], None] | None = None,
) -> None:
    """Serve until stdin closes or a real stop signal arrives; either way the plugins'
    resources are closed before this returns. The gateway starts first (its isolated plugins
    load in their workers meanwhile, so the instructions and the first listing know them);
    ``started`` may then refuse to serve by raising."""
    import anyio

    async def main() -> None:
        with anyio.CancelScope() as scope, guard.serving(scope.cancel):
            try:
                await gateway.start()
                if started is not None:
                    started(gateway)
                await serve_stdio(gateway, wire)
            finally:
                # Also when a stop signal came before the server's lifespan took over.
                with anyio.CancelScope(shield=True):
                    await gateway.stop()

    run(main, guard)
