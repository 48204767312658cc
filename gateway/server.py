"""Thin MCP wiring: the low-level ``Server`` of the official SDK over the gateway facade."""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from typing import Any

import mcp_types as t
from mcp import MCPError
from mcp.server import Server, ServerRequestContext
from mcp.server.caching import CacheHint
from mcp.server.lowlevel.server import NotificationOptions
from mcp_types.version import HANDSHAKE_PROTOCOL_VERSIONS
from pydantic import ValidationError

from . import __version__
from .app import CallResult, Gateway, OfferedTool, RegisteredPrompt
from .asking import Exchange, LogLevel, Parking, seal_request_state
from .auth.identity import Identity, current_caller
from .errors import ErrorCode, GatewayError, Sanitizer
from .inputs import InputRequired, Inputs
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


#: What a client may keep of a list or a read (SEP-2549): nothing, for itself only. Lists
#: depend on the caller's scopes, and change when mounted servers list something else (a
#: 2026-07-28 client is told only on a subscriptions/listen stream it opened). A resource that
#: may be kept says so itself (``ResourceSpec.cache_ttl``).
CACHE_HINTS: dict[Any, CacheHint] = {
    method: CacheHint(ttl_ms=0, scope="private")
    for method in (
        "tools/list",
        "prompts/list",
        "resources/list",
        "resources/templates/list",
        "resources/read",
    )
}


def principal() -> str | None:
    """Who the caller is, for binding request state to it: an OAuth caller's issuer, client
    and subject; ``None`` for the one caller of stdio, the shared token or loopback."""
    caller = current_caller()
    if caller.via not in ("jwt", "introspection"):
        return None
    return "\x1f".join(str(part) for part in (caller.issuer, caller.client_id, caller.subject))


def client_name(ctx: ServerRequestContext[Any]) -> str | None:
    info = getattr(ctx.session.client_params, "client_info", None)
    name = getattr(info, "name", None)
    return name if isinstance(name, str) else None


def read_error(error: dict[str, Any], uri: str) -> MCPError:
    """A read's error as the protocol's: a resource not found, or refused, is the client's
    mistake (``-32602`` with the URI, SEP-2164); anything else the server's."""
    code = str(error.get("code"))
    message = f"{code}: {error.get('message', '')}"
    if code in ("NOT_FOUND", "VALIDATION_ERROR", "PERMISSION_DENIED"):
        return MCPError(t.INVALID_PARAMS, message, data={"uri": uri})
    return MCPError(t.INTERNAL_ERROR, message)


def build_server(gateway: Gateway, *, stdio_session: bool = False) -> Server[Any]:
    """The MCP server over ``gateway`` (loaded: what it lists is what its plugins publish).
    ``stdio_session``: it serves the one session of a stdio process, which is told when
    mounted servers' tools change."""
    lists = _ToolLists(gateway)
    #: the stdio session (one per process) and its protocol revision, once it made a request
    stdio: list[Any] = []
    #: the level the stdio session asked for (over HTTP each request is its own session)
    stdio_levels = LogLevel()
    #: calls of mounted 2025 servers waiting for a 2026-07-28 client's answers
    parking = Parking()

    #: the 2026-07-28 clients' subscriptions/listen streams
    listens = _Listens(gateway)

    async def lists_changed() -> None:
        lists.forget()
        listens.lists_changed()
        if stdio:
            await _tell_lists_changed(*stdio[0])

    gateway.mounts.subscribe(lists_changed)

    def remember(ctx: ServerRequestContext[Any]) -> None:
        if stdio_session and not stdio:
            stdio.append((ctx.session, ctx.protocol_version))

    def exchange(ctx: ServerRequestContext[Any], source: str | None) -> Exchange:
        levels = stdio_levels if stdio_session else LogLevel()
        return Exchange(ctx, gateway.sanitizer, levels, source=source)

    server: Server[Any] = Server(
        gateway.config.server_name,
        version=__version__,
        instructions=gateway.instructions(),
        lifespan=_lifespan(gateway),
        **_tool_handlers(gateway, lists, remember, exchange, parking),
        **_prompt_handlers(gateway, exchange, parking),
        on_completion=_completion_handler(gateway),
        **_resource_handlers(gateway, exchange, parking),
        **(_subscribe_handlers(gateway) if stdio_session else {}),
        on_subscriptions_listen=listens,
        cache_hints=CACHE_HINTS,
    )
    # Here rather than in the constructor, which warns that 2026-07-28 has no logging/setLevel
    # (the SDK answers it there as an unknown method anyway).
    server.add_request_handler(
        "logging/setLevel",
        t.SetLevelRequestParams,
        _set_level_handler(stdio_levels if stdio_session else None),
    )
    server.add_request_handler(
        "server/discover", t.RequestParams, _discover_handler(server, gateway)
    )
    # The gateway's span per request in place of the SDK's (which is removed when off).
    instrument_server(server, gateway.telemetry, gateway.serves_tool, gateway.serves_prompt)
    # Inside the span: what a client sends back as request state is checked before anything.
    seal_request_state(server, principal)
    return server


class _ToolLists:
    """The visible tool list, computed on first use and again after mounted servers' tools
    change (a plugin whose open_resources fails is withdrawn before the first listing), and
    what each OAuth caller's scopes let it see."""

    def __init__(self, gateway: Gateway) -> None:
        self._gateway = gateway
        self._all: t.ListToolsResult | None = None
        self._scoped: dict[frozenset[str], t.ListToolsResult] = {}

    def all(self) -> t.ListToolsResult:
        if self._all is None:
            self._all = t.ListToolsResult(
                tools=[mcp_tool(x) for x in self._gateway.offered_tools()]
            )
        return self._all

    def for_caller(self, caller: Identity) -> t.ListToolsResult:
        """What this caller may use: an unlimited caller (stdio, the static token) gets the
        cached list itself; an OAuth caller the tools its scopes allow, cached per scope set."""
        if caller.scopes is None:
            return self.all()
        found = self._scoped.get(caller.scopes)
        if found is None:
            allowed = self._gateway.offered_to(caller)
            if allowed is None:
                return self.all()
            if len(self._scoped) >= 64:  # scope sets are few; odd ones must not grow this unbounded
                self._scoped.clear()
            tools = [x for x in self.all().tools if x.name in allowed]
            found = self._scoped[caller.scopes] = t.ListToolsResult(tools=tools)
        return found

    def forget(self) -> None:
        self._all = None
        self._scoped.clear()


async def _tell_lists_changed(session: Any, protocol_version: Any) -> None:
    """Tell the stdio session that mounted servers' lists changed."""
    if protocol_version in HANDSHAKE_PROTOCOL_VERSIONS:
        # 2025 sessions are told on their connection; 2026-07-28 clients on their listen
        # streams (_Listens), and HTTP requests are each their own session. What
        # changed (tools, prompts or resources of mounted servers) is not told apart: a
        # client lists again, which costs little.
        await session.send_tool_list_changed()
        await session.send_prompt_list_changed()
        await session.send_resource_list_changed()


def _lifespan(
    gateway: Gateway,
) -> Callable[[Server[Any]], AbstractAsyncContextManager[dict[str, Any]]]:
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

    return lifespan


#: How a handler of a call makes the :class:`Exchange` with its client (``source``: the name
#: its log messages go under).
MakeExchange = Callable[[ServerRequestContext[Any], str | None], Exchange]


def _tool_handlers(
    gateway: Gateway,
    lists: _ToolLists,
    remember: Callable[[ServerRequestContext[Any]], None],
    exchange: MakeExchange,
    parking: Parking,
) -> dict[str, Any]:
    """``tools/list`` and ``tools/call``, and the input schema the SDK checks arguments by."""

    def input_schema(name: str) -> dict[str, Any] | None:
        offered = gateway.offered_tool(name)
        return offered.input_schema if offered is not None else None

    async def on_list_tools(
        ctx: ServerRequestContext[Any], params: t.PaginatedRequestParams | None
    ) -> t.ListToolsResult:
        remember(ctx)
        await gateway.settled()
        return lists.for_caller(current_caller())

    async def on_call_tool(
        ctx: ServerRequestContext[Any], params: t.CallToolRequestParams
    ) -> t.CallToolResult | t.InputRequiredResult:
        async def progress(p: float, total: float | None, message: str | None) -> None:
            await ctx.session.report_progress(p, total, message)

        remember(ctx)
        talk = exchange(ctx, params.name if isinstance(params.name, str) else None)

        async def attempt(inputs: Inputs) -> t.CallToolResult | InputRequired:
            result = await gateway.call(
                params.name, params.arguments, progress=progress, inputs=inputs, log=talk.log
            )
            if result.input_required is not None:
                return result.input_required
            return to_call_tool_result(result)

        def refuse(err: GatewayError) -> t.CallToolResult:
            return to_call_tool_result(gateway.pipeline.errors.result(err, None))

        parks = parking if gateway.mounts and gateway.asks_mid_call(params.name) else None
        return await talk.run(params, attempt, refuse, parking=parks)

    return {
        "get_tool_input_schema": input_schema,
        "on_list_tools": on_list_tools,
        "on_call_tool": on_call_tool,
    }


def _prompt_error(err: GatewayError, sanitizer: Sanitizer) -> MCPError:
    # Prompts have no error result like tools: a protocol error the client shows.
    code = t.INTERNAL_ERROR if err.code is ErrorCode.INTERNAL_ERROR else t.INVALID_PARAMS
    return MCPError(code, sanitizer(f"{err.code.value}: {err.message}"))


async def _render_prompt(
    gateway: Gateway,
    name: str,
    arguments: dict[str, Any] | None,
    client: str | None,
    inputs: Inputs,
) -> t.GetPromptResult | InputRequired:
    """The prompt ``name`` rendered, as the protocol's result; what goes wrong as the
    protocol's error (a render function's own mistake logged, not shown)."""
    try:
        rendered = await gateway.prompt(name, arguments, client=client, inputs=inputs)
        if isinstance(rendered, InputRequired):
            return rendered
        messages = [t.PromptMessage.model_validate(m, by_name=False) for m in rendered]
    except GatewayError as err:
        raise _prompt_error(err, gateway.sanitizer) from None
    except ValidationError as exc:
        log.error("prompt=%s rendered what is not a message: %s", name, exc.title)
        raise MCPError(
            t.INTERNAL_ERROR, "INTERNAL_ERROR: the prompt could not be rendered"
        ) from None
    except BaseException as exc:  # KeyboardInterrupt & co. from a render function
        if not plugin_fault(exc):
            raise
        log.error("prompt=%s render raised %s", name, type(exc).__name__)
        raise MCPError(
            t.INTERNAL_ERROR, "INTERNAL_ERROR: the prompt could not be rendered"
        ) from None
    prompt = gateway.offered_prompt(name)
    return t.GetPromptResult(
        description=prompt.spec.description if prompt else None, messages=messages
    )


def _prompt_handlers(gateway: Gateway, exchange: MakeExchange, parking: Parking) -> dict[str, Any]:
    """``prompts/list`` and ``prompts/get``."""

    async def on_list_prompts(
        ctx: ServerRequestContext[Any], params: t.PaginatedRequestParams | None
    ) -> t.ListPromptsResult:
        return t.ListPromptsResult(prompts=[mcp_prompt(p) for p in gateway.offered_prompts()])

    async def on_get_prompt(
        ctx: ServerRequestContext[Any], params: t.GetPromptRequestParams
    ) -> t.GetPromptResult | t.InputRequiredResult:
        client = client_name(ctx)

        async def attempt(inputs: Inputs) -> t.GetPromptResult | InputRequired:
            return await _render_prompt(gateway, params.name, params.arguments, client, inputs)

        def refuse(err: GatewayError) -> t.GetPromptResult:
            raise _prompt_error(err, gateway.sanitizer)

        parks = (
            parking
            if gateway.mounts and gateway.asks_mid_call(params.name, kind="prompt")
            else None
        )
        return await exchange(ctx, params.name).run(params, attempt, refuse, parking=parks)

    return {"on_list_prompts": on_list_prompts, "on_get_prompt": on_get_prompt}


def _completion_handler(
    gateway: Gateway,
) -> Callable[[ServerRequestContext[Any], t.CompleteRequestParams], Awaitable[t.CompleteResult]]:
    """``completion/complete`` of a prompt's argument or a resource template's variable."""

    async def on_completion(
        ctx: ServerRequestContext[Any], params: t.CompleteRequestParams
    ) -> t.CompleteResult:
        ref = params.ref
        context = dict(params.context.arguments or {}) if params.context else {}
        try:
            if isinstance(ref, t.PromptReference):
                values = await gateway.complete_prompt(
                    ref.name, params.argument.name, params.argument.value, context
                )
            else:
                values = await gateway.complete_resource(
                    ref.uri, params.argument.name, params.argument.value, context
                )
        except GatewayError as err:
            raise _prompt_error(err, gateway.sanitizer) from None
        return t.CompleteResult(
            completion=t.Completion(values=values, total=len(values), has_more=False)
        )

    return on_completion


def _published(kind: type[Any], items: list[Any]) -> list[Any]:
    """``items`` (resources or templates) as the protocol's ``kind``; one that is not valid
    is left out of the list, and the log says so."""
    out = []
    for item in items:
        try:
            out.append(kind.model_validate(item.listed, by_name=False))
        except ValidationError:
            log.warning("resource %s is not listed: not a valid %s", item.key[:80], kind.__name__)
    return out


def _resource_handlers(
    gateway: Gateway, exchange: MakeExchange, parking: Parking
) -> dict[str, Any]:
    """``resources/list``, ``resources/templates/list`` and ``resources/read``."""

    async def on_list_resources(
        ctx: ServerRequestContext[Any], params: t.PaginatedRequestParams | None
    ) -> t.ListResourcesResult:
        await gateway.settled()
        return t.ListResourcesResult(resources=_published(t.Resource, gateway.offered_resources()))

    async def on_list_resource_templates(
        ctx: ServerRequestContext[Any], params: t.PaginatedRequestParams | None
    ) -> t.ListResourceTemplatesResult:
        await gateway.settled()
        templates = gateway.offered_resources(templates=True)
        return t.ListResourceTemplatesResult(
            resource_templates=_published(t.ResourceTemplate, templates)
        )

    async def on_read_resource(
        ctx: ServerRequestContext[Any], params: t.ReadResourceRequestParams
    ) -> t.ReadResourceResult | t.InputRequiredResult:
        talk = exchange(ctx, None)
        uri = params.uri

        async def attempt(inputs: Inputs) -> t.ReadResourceResult | InputRequired:
            result = await gateway.read_resource(uri, inputs=inputs, log=talk.log)
            if result.input_required is not None:
                return result.input_required
            if result.is_error or result.mcp is None:
                raise read_error(result.payload["error"], uri)
            try:
                return t.ReadResourceResult.model_validate(result.mcp, by_name=False)
            except ValidationError:
                raise MCPError(
                    t.INTERNAL_ERROR, "INTERNAL_ERROR: the resource's contents are malformed"
                ) from None

        def refuse(err: GatewayError) -> t.ReadResourceResult:
            raise read_error(
                {"code": err.code.value, "message": gateway.sanitizer(err.message)}, uri
            )

        parks = parking if gateway.mounts and gateway.asks_mid_call(uri, kind="resource") else None
        return await talk.run(params, attempt, refuse, parking=parks)

    return {
        "on_list_resources": on_list_resources,
        "on_list_resource_templates": on_list_resource_templates,
        "on_read_resource": on_read_resource,
    }


def _subscribe_handlers(gateway: Gateway) -> dict[str, Any]:
    """``resources/subscribe`` and ``resources/unsubscribe`` (2025) of a stdio session: the
    session is told ``notifications/resources/updated`` of each URI it subscribed to. Over
    HTTP each request is a session of its own, with nothing to tell it on afterwards."""

    # The subscriber: the one session of the stdio process (each request has a session object
    # of its own, all sending on the one connection).
    subscriber = object()

    def refused(err: GatewayError, uri: str) -> MCPError:
        return read_error({"code": err.code.value, "message": gateway.sanitizer(err.message)}, uri)

    async def on_subscribe_resource(
        ctx: ServerRequestContext[Any], params: t.SubscribeRequestParams
    ) -> t.EmptyResult:
        session, uri = ctx.session, str(params.uri)

        async def deliver(changed: str) -> None:
            await session.send_resource_updated(changed)

        try:
            await gateway.subscribe_resource(uri, subscriber, deliver)
        except GatewayError as err:
            raise refused(err, uri) from None
        return t.EmptyResult()

    async def on_unsubscribe_resource(
        ctx: ServerRequestContext[Any], params: t.UnsubscribeRequestParams
    ) -> t.EmptyResult:
        uri = str(params.uri)
        try:
            await gateway.unsubscribe_resource(uri, subscriber)
        except GatewayError as err:
            raise refused(err, uri) from None
        return t.EmptyResult()

    return {
        "on_subscribe_resource": on_subscribe_resource,
        "on_unsubscribe_resource": on_unsubscribe_resource,
    }


#: Open ``subscriptions/listen`` streams at most, and events each may have waiting (a stream
#: whose client reads none is ended there: it listens again and refetches, as after a drop).
MAX_LISTENS = 256
MAX_LISTEN_BACKLOG = 256
#: Seconds a stream's end waits for mounted servers to be unsubscribed from what it listened to.
LISTEN_CLEANUP = 5.0


class _Listens:
    """``subscriptions/listen`` (2026-07-28): each request is a stream of the changes its
    client asked for, on stdio and over HTTP (an event stream) alike. The stream is
    acknowledged with what is honored: the lists' changes asked for, and the resource URIs
    the client may subscribe to (served, subscribable, readable by it; the others are left
    out, as the protocol has it), then carries each change until the client ends it."""

    def __init__(self, gateway: Gateway) -> None:
        self._gateway = gateway
        self._streams: dict[object, tuple[t.SubscriptionFilter, Any]] = {}

    def lists_changed(self) -> None:
        """Mounted servers' lists changed (what changed is not told apart, as for 2025)."""
        from mcp.shared.subscriptions import (
            PromptsListChanged,
            ResourcesListChanged,
            ToolsListChanged,
        )

        for token, (honored, _) in list(self._streams.items()):
            if honored.tools_list_changed:
                self._put(token, ToolsListChanged())
            if honored.prompts_list_changed:
                self._put(token, PromptsListChanged())
            if honored.resources_list_changed:
                self._put(token, ResourcesListChanged())

    def _put(self, token: object, event: Any) -> None:
        import anyio

        stream = self._streams.get(token)
        if stream is None:
            return
        try:
            stream[1].send_nowait(event)
        except anyio.WouldBlock:
            log.warning("a listen stream's client reads nothing; the stream is ended")
            self._streams.pop(token, None)
            stream[1].close()
        except (anyio.ClosedResourceError, anyio.BrokenResourceError):
            self._streams.pop(token, None)

    async def __call__(
        self, ctx: ServerRequestContext[Any], params: t.SubscriptionsListenRequestParams
    ) -> t.SubscriptionsListenResult:
        import anyio
        from mcp.shared.subscriptions import (
            SUBSCRIPTION_ID_META_KEY,
            ResourceUpdated,
            ServerEvent,
            event_to_notification,
        )

        sid = ctx.request_id
        if sid is None:
            raise MCPError(t.INVALID_REQUEST, "subscriptions/listen requires a request id")
        if len(self._streams) >= MAX_LISTENS:
            raise MCPError(t.INTERNAL_ERROR, "too many listen streams are open; retry later")
        wanted = params.notifications
        meta: dict[str, Any] = {SUBSCRIPTION_ID_META_KEY: sid}
        send, receive = anyio.create_memory_object_stream[ServerEvent](MAX_LISTEN_BACKLOG)
        token = object()

        async def deliver(uri: str) -> None:
            self._put(token, ResourceUpdated(uri))

        try:
            honored_uris: list[str] = []
            for uri in dict.fromkeys(wanted.resource_subscriptions or ()):
                try:
                    await self._gateway.subscribe_resource(uri, token, deliver)
                    honored_uris.append(uri)
                except GatewayError as err:
                    log.info("listen: resource %s not honored: %s", uri[:200], err.code.value)
            honored = t.SubscriptionFilter(
                tools_list_changed=True if wanted.tools_list_changed else None,
                prompts_list_changed=True if wanted.prompts_list_changed else None,
                resources_list_changed=True if wanted.resources_list_changed else None,
                resource_subscriptions=honored_uris or None,
            )
            self._streams[token] = (honored, send)
            ack = t.SubscriptionsAcknowledgedNotificationParams(notifications=honored, _meta=meta)
            await ctx.session.send_notification(
                t.SubscriptionsAcknowledgedNotification(params=ack), related_request_id=sid
            )
            async for event in receive:
                await ctx.session.send_notification(
                    event_to_notification(event, meta), related_request_id=sid
                )
        finally:
            self._streams.pop(token, None)
            send.close()
            receive.close()
            # Bounded: a server that does not answer its unsubscribe holds no shut-down up.
            with anyio.move_on_after(LISTEN_CLEANUP, shield=True):
                await self._gateway.drop_subscriptions(token)
        return t.SubscriptionsListenResult(_meta=meta)


def _discover_handler(
    server: Server[Any], gateway: Gateway
) -> Callable[[ServerRequestContext[Any], t.RequestParams], Awaitable[t.DiscoverResult]]:
    """``server/discover`` as the SDK answers it, but for what a listen stream is told: the
    lists change only where a mounted server's may (a plugin's are installed code), and a
    resource may be subscribed to only where one is subscribable (as for ``initialize``)."""

    async def on_discover(
        ctx: ServerRequestContext[Any], params: t.RequestParams
    ) -> t.DiscoverResult:
        from mcp_types.version import MODERN_PROTOCOL_VERSIONS

        caps = server.get_capabilities(protocol_version=ctx.protocol_version)
        if not gateway.mounts.has_servers():
            for part in (caps.tools, caps.prompts, caps.resources):
                if part is not None:
                    part.list_changed = False
        if caps.resources is not None:
            caps.resources.subscribe = gateway.offers_subscriptions()
        return t.DiscoverResult(
            supported_versions=list(MODERN_PROTOCOL_VERSIONS),
            capabilities=caps,
            instructions=server.instructions,
        )

    return on_discover


def _set_level_handler(
    levels: LogLevel | None,
) -> Callable[[ServerRequestContext[Any], t.SetLevelRequestParams], Awaitable[t.EmptyResult]]:
    """``logging/setLevel``: the level of the stdio session (``levels``); over HTTP each
    request is its own session, and it changes nothing."""

    async def on_set_level(
        ctx: ServerRequestContext[Any], params: t.SetLevelRequestParams
    ) -> t.EmptyResult:
        if levels is not None:
            levels.level = params.level
        return t.EmptyResult()

    return on_set_level


def initialization_options(server: Server[Any]) -> Any:
    # Lists change when mounted MCP servers list their tools, prompts or resources.
    return server.create_initialization_options(
        NotificationOptions(tools_changed=True, prompts_changed=True, resources_changed=True)
    )


async def serve_stdio(gateway: Gateway, wire: Wire) -> None:
    """Serve over the real stdin/stdout taken by :func:`gateway.stdio.protected_stdio` before
    the plugins were imported (fd 1 already points at stderr)."""
    server = build_server(gateway, stdio_session=True)
    options = initialization_options(server)
    resources = options.capabilities.resources
    if resources is not None:
        # Known once the gateway started (its plugins, in process or isolated, are loaded).
        resources.subscribe = gateway.offers_subscriptions()
    async with json_rpc_streams(wire) as (read, write):
        await server.run(read, write, options)


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
