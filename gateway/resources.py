"""MCP resources and resource templates: what plugins offer to read (``register_resources``).

A resource is data too: a URI, a name, and a reader (an async function returning the text, or
the bytes, of what the URI names) or the ``path`` of a file inside the data roots. A template
(``test://template/{id}/data``, RFC 6570) names many: its reader gets the variables of the
URI a client asks for. A read is a call of the read tier: it goes through the same layers
of the pipeline as a tool call but the lookup (:meth:`~gateway.pipeline.Pipeline.serve`),
so the OAuth scope of reads, the audit (where reads are audited), the breaker and timeout
of its backend, the sanitizer and the bounds hold for it as for a read tool.

A resource (or a template's) may be ``subscribable``: its source says when it changed
(:meth:`~gateway.PluginContext.resource_updated`, a mounted server's
``notifications/resources/updated``) and :class:`ResourceSubscriptions` tells the clients
that subscribed to that URI, and no one else.

File-backed resources are read only inside the data roots (checked when read, after
following links) and up to :data:`MAX_RESOURCE_BYTES`. A URI registered by two sources is
served by neither and reported, like a tool name.

The SDK's URI template parser is imported on the first listing or read, never while plugins
load.
"""

from __future__ import annotations

import asyncio
import inspect
import json
import logging
import mimetypes
import re
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict

from .content import MAX_CONTENT_BYTES, contents, size_over
from .errors import ErrorCode, GatewayError
from .inputs import InputRequired
from .prompts import Completer
from .registry import RegisteredTool
from .spec import PluginContext, SettingsT, Tier, ToolContext, ToolSpec

log = logging.getLogger("gateway.resources")

#: A file-backed resource (or :meth:`ResourceContext.read_file`) is read up to this size.
MAX_RESOURCE_BYTES = 4 * 1024 * 1024
#: What a reader may return: the text, the raw bytes, or a request to ask the client first.
ResourceBody = str | bytes | InputRequired
_SCHEME = re.compile(r"^[A-Za-z][A-Za-z0-9+.-]*:")
_TEXT_TYPES = ("application/json", "application/xml", "application/javascript", "application/toml")


class _NoArguments(BaseModel):
    model_config = ConfigDict(extra="allow")


@dataclass(kw_only=True)
class ResourceContext(ToolContext[SettingsT]):
    """What a reader gets: the :class:`~gateway.ToolContext` of the read (settings, logger,
    ``run_sync``, ``inputs`` …) and the ``uri`` read."""

    uri: str = ""

    async def read_file(self, path: str | Path) -> str | bytes:
        """A file inside the data roots (``VALIDATION_ERROR`` outside), as text when it is
        UTF-8 text, else its bytes; ``NOT_FOUND`` when missing; at most
        :data:`MAX_RESOURCE_BYTES`."""
        resolved = self.plugin.resolve_data_path(path, field_name="path")
        shown = self.plugin.display_path(resolved)

        def load() -> bytes:
            if not resolved.is_file():
                raise GatewayError(ErrorCode.NOT_FOUND, f"no file {shown}")
            if resolved.stat().st_size > MAX_RESOURCE_BYTES:
                raise GatewayError(
                    ErrorCode.VALIDATION_ERROR,
                    f"{shown} is larger than {MAX_RESOURCE_BYTES // (1024 * 1024)} MB",
                )
            return resolved.read_bytes()[: MAX_RESOURCE_BYTES + 1]

        data = await self.run_sync(load)
        if len(data) > MAX_RESOURCE_BYTES:
            raise GatewayError(ErrorCode.VALIDATION_ERROR, f"{shown} grew while it was read")
        try:
            return data.decode("utf-8")
        except UnicodeDecodeError:
            return data


#: A resource's reader: ``async def read(ctx: ResourceContext) -> str | bytes``.
ResourceReader = Callable[[ResourceContext[Any]], Awaitable[ResourceBody]]
#: A template's reader: ``async def read(variables, ctx) -> str | bytes``.
TemplateReader = Callable[[Mapping[str, str], ResourceContext[Any]], Awaitable[ResourceBody]]
#: Subscribes a resource's source to a URI (``True``) or unsubscribes it (``False``).
Watch = Callable[[str, bool], Awaitable[None]]
#: Tells one subscriber (a client's session, a listen stream) that a URI changed.
Deliver = Callable[[str], Awaitable[None]]


@dataclass(frozen=True)
class ResourceSpec:
    """One resource. Exactly one of ``read`` (an async function of the
    :class:`ResourceContext`) and ``path`` (a file inside the data roots, relative to the first
    one) says what it holds. ``mime_type`` is published and sent with the contents (guessed
    from a path's name when not given). ``cache_ttl``: seconds a client may keep what it read
    (it is told ``0``, keep nothing, otherwise). ``subscribable``: clients may subscribe to
    it, and the plugin calls :meth:`~gateway.PluginContext.resource_updated` when it changed."""

    uri: str
    name: str
    read: ResourceReader | None = None
    path: str | None = None
    title: str | None = None
    description: str | None = None
    mime_type: str | None = None
    cache_ttl: float | None = None
    subscribable: bool = False


@dataclass(frozen=True)
class ResourceTemplateSpec:
    """Resources by a URI template (RFC 6570, ``test://items/{id}``): ``read(variables, ctx)``
    gets the variables of the URI asked for. ``complete`` suggests values for a variable the
    user is typing (``completion/complete``). ``subscribable``: clients may subscribe to each
    URI it names (as :attr:`ResourceSpec.subscribable`)."""

    uri_template: str
    name: str
    read: TemplateReader
    title: str | None = None
    description: str | None = None
    mime_type: str | None = None
    cache_ttl: float | None = None
    complete: Completer | None = None
    subscribable: bool = False


@dataclass
class RegisteredResource:
    """A resource or template as the gateway serves it: what ``resources/list`` (or
    ``resources/templates/list``) publishes, and the read tier's tool that reads it."""

    key: str  # the URI, or the template
    listed: dict[str, Any]
    tool: RegisteredTool
    plugin: str
    template: bool = False
    complete: Completer | None = None
    #: clients may subscribe to it (to each URI a template names)
    subscribable: bool = False
    #: what subscribes its source to a URI (``True``) and unsubscribes it (``False``): a
    #: mounted server's; ``None`` for a plugin in process, which says every change anyway
    watch: Watch | None = field(default=None, repr=False)
    #: how a template URI is matched (parsed on first use)
    _matcher: Any = field(default=None, repr=False)

    def match(self, uri: str) -> dict[str, str] | None:
        """The variables of ``uri`` when this template names it."""
        if self._matcher is None:
            from mcp.shared.uri_template import UriTemplate

            self._matcher = UriTemplate.parse(self.key)
        found = self._matcher.match(uri)
        if found is None:
            return None
        return {k: v if isinstance(v, str) else ",".join(v) for k, v in found.items()}


def _checked_common(kind: str, key: object, name: object, where: str) -> None:
    if not isinstance(key, str) or not key or len(key) > 2048 or not _SCHEME.match(key):
        raise ValueError(
            f"{where}: {kind} must be an absolute URI (scheme:…) of up to 2048 characters"
        )
    if not isinstance(name, str) or not name.strip() or len(name) > 200:
        raise ValueError(f"{where}: name must be 1-200 characters")


def build_resource(spec: object, plugin: PluginContext[Any]) -> RegisteredResource:
    """Check a resource or template spec and make what serves it; ``ValueError`` with why."""
    if isinstance(spec, ResourceSpec):
        where = f"resource {str(spec.uri)[:80]!r}"
        _checked_common("uri", spec.uri, spec.name, where)
        if (spec.read is None) == (spec.path is None):
            raise ValueError(f"{where}: give exactly one of read= and path=")
        if spec.read is not None and not inspect.iscoroutinefunction(spec.read):
            raise ValueError(f"{where}: read must be an async function")
        mime = spec.mime_type or (mimetypes.guess_type(spec.path)[0] if spec.path else None)
        reader = spec.read or _file_reader(str(spec.path))
        listed = _listed(
            uri=spec.uri,
            name=spec.name,
            title=spec.title,
            description=spec.description,
            mime_type=mime,
        )
        tool = _read_tool(spec.name, spec.uri, plugin, _static(reader), mime, spec.cache_ttl)
        return RegisteredResource(
            spec.uri, listed, tool, plugin.name, subscribable=spec.subscribable is True
        )
    if isinstance(spec, ResourceTemplateSpec):
        where = f"resource template {str(spec.uri_template)[:80]!r}"
        _checked_common("uri_template", spec.uri_template, spec.name, where)
        if spec.uri_template.count("{") != spec.uri_template.count("}"):
            raise ValueError(f"{where}: its braces do not pair")
        if not inspect.iscoroutinefunction(spec.read):
            raise ValueError(f"{where}: read must be an async function")
        if spec.complete is not None and not callable(spec.complete):
            raise ValueError(f"{where}: complete must be a function")
        listed = _listed(
            uriTemplate=spec.uri_template,
            name=spec.name,
            title=spec.title,
            description=spec.description,
            mime_type=spec.mime_type,
        )
        tool = _read_tool(
            spec.name,
            spec.uri_template,
            plugin,
            spec.read,
            spec.mime_type,
            spec.cache_ttl,
        )
        return RegisteredResource(
            spec.uri_template,
            listed,
            tool,
            plugin.name,
            template=True,
            complete=spec.complete,
            subscribable=spec.subscribable is True,
        )
    raise ValueError(
        f"register() takes a ResourceSpec or ResourceTemplateSpec, got {type(spec).__name__}"
    )


def _listed(*, mime_type: str | None, **fields: Any) -> dict[str, Any]:
    out = {k: v for k, v in fields.items() if v is not None}
    if mime_type is not None:
        out["mimeType"] = mime_type
    return out


def _file_reader(path: str) -> ResourceReader:
    async def read(ctx: ResourceContext[Any]) -> ResourceBody:
        return await ctx.read_file(path)

    return read


def _static(read: ResourceReader) -> TemplateReader:
    async def call(variables: Mapping[str, str], ctx: ResourceContext[Any]) -> ResourceBody:
        return await read(ctx)

    return call


def _read_tool(
    name: str,
    uri: str,
    plugin: PluginContext[Any],
    read: TemplateReader,
    mime_type: str | None,
    cache_ttl: float | None,
) -> RegisteredTool:
    """The read tier's tool that reads ``uri`` (its pipeline call): its arguments are the
    URI read and a template's variables."""
    from .pipeline import McpResult  # the pipeline is not imported with the plugin API

    async def handler(args: Any, ctx: ToolContext[Any]) -> Any:
        asked = dict(args)
        target = str(asked.pop("uri"))
        rctx: ResourceContext[Any] = ResourceContext(
            plugin=ctx.plugin,
            tool=ctx.tool,
            correlation_id=ctx.correlation_id,
            _progress=ctx._progress,
            inputs=ctx.inputs,
            _log=ctx._log,
            uri=target,
        )
        body = await read({k: str(v) for k, v in asked.items()}, rctx)
        if isinstance(body, InputRequired):
            return body
        return McpResult(read_result(target, body, mime_type, cache_ttl))

    spec: ToolSpec[Any] = ToolSpec(
        name=name,
        description=f"reads {uri}",
        input_model=_NoArguments,
        handler=handler,
        tier=Tier.READ,
    )
    return RegisteredTool(
        spec=spec,
        tier=Tier.READ,
        plugin=plugin,
        input_schema={"type": "object"},
        output_schema=None,
        description=spec.description,
        annotations={"title": name},
    )


def read_result(
    uri: str, body: object, mime_type: str | None, cache_ttl: float | None
) -> dict[str, Any]:
    """A ``ReadResourceResult`` (JSON) of one text or binary content; ``TypeError`` for what
    a reader may not return, ``GatewayError`` when it is too large."""
    if isinstance(body, str):
        one = contents(uri, body, None, mime_type)
    elif isinstance(body, bytes | bytearray):
        one = contents(uri, None, bytes(body), mime_type)
    else:
        raise TypeError(f"a resource reader returned {type(body).__name__}; return a str or bytes")
    result: dict[str, Any] = {"contents": [one]}
    if cache_ttl:
        result["ttlMs"] = int(cache_ttl * 1000)
    size = size_over(json.dumps(result, ensure_ascii=False), MAX_CONTENT_BYTES)
    if size is not None:
        raise read_too_large(uri, size, MAX_CONTENT_BYTES)
    return result


def read_too_large(uri: str, size: int, limit: int) -> GatewayError:
    """A read of ``uri`` of ``size`` bytes, over the ``limit`` it may return: the client's
    error, here and in a plugin's worker (whose answer the gateway takes up to its own limit)."""
    return GatewayError(
        ErrorCode.INTERNAL_ERROR,
        f"resource {uri[:200]} is {size // (1024 * 1024)} MB, over the "
        f"{limit // (1024 * 1024)} MB a read may return",
    )


class ResourceRegistry:
    """The resources and templates of every source, by URI (or template). A key two sources
    register is served by neither and reported for both (:meth:`withheld`)."""

    def __init__(self) -> None:
        self._claims: dict[str, list[RegisteredResource]] = {}
        #: each source's place in a listing (as the tool registry's ``order``)
        self.order: dict[str, int] = {}
        #: who is subscribed to which of them
        self.subscriptions = ResourceSubscriptions(self)

    def add_all(self, items: list[RegisteredResource]) -> None:
        """One source's resources; a key it registers twice refuses the lot (``ValueError``)."""
        seen: set[str] = set()
        for item in items:
            if item.key in seen:
                raise ValueError(f"resource {item.key[:80]!r} is registered twice by this plugin")
            seen.add(item.key)
        for item in items:
            self._claims.setdefault(item.key, []).append(item)
        self.subscriptions.forget()

    def remove_plugin(self, plugin: str) -> None:
        for key in list(self._claims):
            self._claims[key] = [r for r in self._claims[key] if r.plugin != plugin]
            if not self._claims[key]:
                del self._claims[key]
        self.subscriptions.forget()

    def served(self) -> list[RegisteredResource]:
        last = len(self.order)
        served = [claims[0] for claims in self._claims.values() if len(claims) == 1]
        return sorted(served, key=lambda r: self.order.get(r.plugin, last))

    def resources(self) -> list[RegisteredResource]:
        return [r for r in self.served() if not r.template]

    def templates(self) -> list[RegisteredResource]:
        return [r for r in self.served() if r.template]

    def of(self, plugin: str) -> list[str]:
        return [k for k, claims in self._claims.items() if any(r.plugin == plugin for r in claims)]

    def withheld(self, plugin: str) -> dict[str, str]:
        """This source's resources another's claim keeps from serving, and why."""
        out = {}
        for key, claims in self._claims.items():
            if len(claims) > 1 and any(r.plugin == plugin for r in claims):
                owners = " and ".join(repr(r.plugin) for r in claims)
                what = "resource template" if claims[0].template else "resource"
                out[f"{what} {key[:120]}"] = (
                    f"{owners} both provide {what} {key[:120]!r}, so neither serves it"
                )
        return out

    def find(self, uri: str) -> tuple[RegisteredResource, dict[str, str]] | None:
        """What serves ``uri``: the resource of that URI, else the first template that names
        it, with the URI's variables."""
        claims = self._claims.get(uri)
        if claims is not None:
            if len(claims) == 1 and not claims[0].template:
                return claims[0], {}
            return None
        for item in self.templates():
            try:
                found = item.match(uri)
            except ValueError:  # a template the SDK cannot parse names nothing
                continue
            if found is not None:
                return item, found
        return None

    def template(self, uri_template: str) -> RegisteredResource | None:
        claims = self._claims.get(uri_template)
        if claims is None or len(claims) != 1 or not claims[0].template:
            return None
        return claims[0]


#: A subscriber (a client's session, a listen stream) holds at most this many subscriptions: a
#: template names URIs without end, and each costs memory here and, for a mounted server's,
#: a subscription there.
MAX_SUBSCRIPTIONS = 1000
#: How many (source, URI) answers :meth:`ResourceSubscriptions.changed` keeps.
_CHECKED_MAX = 4096


class ResourceSubscriptions:
    """Who is subscribed to which URI, and telling them when it changed.

    A subscriber (a 2025 client's session, a 2026-07-28 listen stream) is any hashable object
    with a :data:`Deliver`. The first subscriber of a URI subscribes its source
    (:attr:`RegisteredResource.watch`: a mounted server's ``resources/subscribe``), the last
    one to go unsubscribes it. Whether a subscriber may subscribe (the URI is served,
    subscribable, readable by the caller) is checked before :meth:`add`
    (:meth:`gateway.app.Gateway.subscribe_resource`)."""

    def __init__(self, registry: ResourceRegistry) -> None:
        self._registry = registry
        self._by_uri: dict[str, dict[object, Deliver]] = {}
        self._by_who: dict[object, set[str]] = {}
        #: whether a source serves a URI as subscribable, by (source, URI), as last checked
        self._checked: dict[tuple[str, str], bool] = {}
        self._loop: asyncio.AbstractEventLoop | None = None
        self._tasks: set[asyncio.Task[None]] = set()
        #: URIs whose subscribers are about to be told
        self._pending: set[str] = set()

    async def add(self, uri: str, who: object, deliver: Deliver, item: RegisteredResource) -> None:
        """From now on ``deliver`` is awaited when ``uri`` (served by ``item``) changed;
        ``ValueError`` when ``who`` holds :data:`MAX_SUBSCRIPTIONS` already."""
        mine = self._by_who.setdefault(who, set())
        watchers = self._by_uri.setdefault(uri, {})
        if uri not in mine and len(mine) >= MAX_SUBSCRIPTIONS:
            if not watchers:
                del self._by_uri[uri]
            raise ValueError(f"at most {MAX_SUBSCRIPTIONS} subscriptions at a time")
        self._loop = asyncio.get_running_loop()
        first = not watchers
        mine.add(uri)
        watchers[who] = deliver
        if first and item.watch is not None:
            await item.watch(uri, True)

    async def remove(self, uri: str, who: object) -> bool:
        """``who`` is told no more of ``uri``; ``False`` when it was not subscribed to it."""
        mine = self._by_who.get(who)
        if mine is None or uri not in mine:
            return False
        mine.discard(uri)
        if not mine:
            del self._by_who[who]
        if self._last_gone(uri, who):
            await self._unwatch(uri)
        return True

    async def drop(self, who: object) -> None:
        """Every subscription of ``who`` (its session or stream ended): gone at once, its
        sources unsubscribed after (which a caller may cut short)."""
        emptied = [uri for uri in sorted(self._by_who.pop(who, ())) if self._last_gone(uri, who)]
        for uri in emptied:
            await self._unwatch(uri)

    def _last_gone(self, uri: str, who: object) -> bool:
        watchers = self._by_uri.get(uri, {})
        watchers.pop(who, None)
        if watchers:
            return False
        self._by_uri.pop(uri, None)
        return True

    async def _unwatch(self, uri: str) -> None:
        found = self._registry.find(uri)
        if found is not None and found[0].watch is not None:
            await found[0].watch(uri, False)

    def forget(self) -> None:
        """What sources serve changed: check their word again."""
        self._checked.clear()

    def changed(self, source: str, uri: object) -> None:
        """``source`` (a plugin, a mounted server) says ``uri`` changed: its subscribers are
        told, in a task of their own (the caller does not wait for them; changes said again
        before they are told are told once). A URI ``source`` does not serve as subscribable
        is its mistake: logged once, told to no one. Costs a lookup when no one is
        subscribed; safe to call from any thread; never raises."""
        try:
            loop = self._loop
            try:
                running: asyncio.AbstractEventLoop | None = asyncio.get_running_loop()
            except RuntimeError:  # a thread of the plugin's own (run_sync)
                running = None
            if loop is not None and running is not loop:
                if not loop.is_closed():  # the registries are the loop's to read
                    loop.call_soon_threadsafe(self.changed, source, uri)
                return
            if not self._serves(source, uri) or not isinstance(uri, str):
                return
            if uri in self._by_uri and uri not in self._pending:
                self._pending.add(uri)
                task = asyncio.get_running_loop().create_task(self._tell(uri))
                self._tasks.add(task)  # held until done: a task nobody holds may be collected
                task.add_done_callback(self._tasks.discard)
        except Exception as exc:  # never into the plugin: a change it says is best effort
            log.error("telling subscribers of a change failed: %s", type(exc).__name__)

    def _serves(self, source: str, uri: object) -> bool:
        key = (source, uri if isinstance(uri, str) else "")
        known = self._checked.get(key)
        if known is not None:
            return known
        found = self._registry.find(uri) if isinstance(uri, str) and uri else None
        ok = found is not None and found[0].plugin == source and found[0].subscribable
        if len(self._checked) >= _CHECKED_MAX:
            self._checked.clear()
        self._checked[key] = ok
        if not ok:
            shown = (
                repr(uri[:200]) if isinstance(uri, str) else f"({type(uri).__name__}, not a URI)"
            )
            log.warning(
                "%s said resource %s changed, but it serves no subscribable resource of that "
                "URI (a plugin declares one subscribable=True): nobody is told",
                source,
                shown,
            )
        return ok

    async def _tell(self, uri: str) -> None:
        self._pending.discard(uri)  # a change said from now on is told again
        for deliver in list(self._by_uri.get(uri, {}).values()):
            try:
                await deliver(uri)
            except Exception as exc:  # a subscriber gone; the others are still told
                log.info("a subscriber of %s could not be told: %s", uri[:200], type(exc).__name__)
