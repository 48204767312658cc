"""Mounted MCP servers as tools of the registry: tiers that fail closed, definitions pinned.

Each server a plugin registers (``register_servers``) is reported like a plugin of its name (a
:class:`ServerRecord` among the loader's records) and runs as an :class:`~gateway.upstream.Upstream`
once the gateway starts. Each time it lists its tools they are screened here:

- **chosen**: ``tools`` (allow-list) and ``deny_tools`` name the server's own tools; ``prefix``
  goes before the names the gateway publishes, the call upstream uses the server's name;
- **tiered, failing closed**: read only when the server's ``readOnlyHint`` is ``true`` or the
  server's ``tiers`` say ``read``; any other tool is a mutation (audited, asked for), with the
  server's ``destructiveHint`` (else destructive) and ``idempotentHint`` (else not) carried and
  a short ``MUTATION:`` paragraph after its description;
- **pinned** (trust on first use): each tool's definition as the server sent it (name,
  description, inputSchema, annotations) is recorded in the user's state directory
  (``$XDG_STATE_HOME/mcp-gateway/servers/<name>.json``) the first time the server answers; a
  definition that differs later, or a tool not recorded, is withheld and reported (which
  server, which tool, what changed) until ``mcp-gateway servers approve`` records it again.
  With ``pin = "approve"`` nothing is offered before that. A file that is not a regular file
  of this user, writable by others or too large approves nothing;
- **checked** against what Claude Code accepts: a description over 2,048 characters or a full
  name ``mcp__<server>__<tool>`` over 128 is reported.

The first ``tools/list`` of a client waits for servers still starting (:meth:`Mounts.settled`):
at most each server's ``list_wait`` from the gateway's start, and, once most servers have
answered, only as long again as their answers were apart (at least 50 ms): servers started
together answer close together, and one much slower than its peers does not hold their listing
(its tools come when it answers). When tools appear, change or go, the gateway's clients are told
(:meth:`Mounts.subscribe`).
"""

from __future__ import annotations

import datetime as dt
import hashlib
import json
import logging
import os
import re
import stat
import time
from collections.abc import Awaitable, Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar

import anyio
from pydantic import BaseModel, ConfigDict

from .config import GatewayConfig, default_audit_log
from .configkit import closest
from .errors import Sanitizer, secret_name
from .health import HealthMonitor
from .mounted import mount_extras
from .pipeline import McpResult
from .plugins import PluginLoader, PluginRecord, PluginState
from .registry import (
    MAX_DESCRIPTION_CHARS,
    MAX_FULL_NAME,
    RegisteredTool,
    RegistrationError,
    Registry,
    check_arguments,
    compile_schema,
    full_tool_name,
)
from .spec import HealthCheck, Mutation, PluginContext, ServerSpec, Tier, ToolContext, ToolSpec
from .upstream import Listing, State, Upstream

if TYPE_CHECKING:
    import asyncio

log = logging.getLogger("gateway.mounts")

#: What a tool name may be in MCP (letters, digits, ``_``, ``-``, ``.``; SEP-986).
MCP_TOOL_NAME = re.compile(r"^[A-Za-z0-9_.-]{1,128}$")
#: The parts of a tool's definition that are pinned.
PINNED = ("name", "description", "inputSchema", "annotations")
#: A pin file larger than this is not read.
MAX_PIN_FILE = 4 * 1024 * 1024
#: Once most servers answered, the first listing waits for the others as long after the last
#: answer as the first and the last were apart, at least STRAGGLER_SLACK seconds.
STRAGGLER_SLACK = 0.05


def mutation_paragraph(destructive: bool) -> str:
    """What a mounted mutation adds to its description: short, every byte is context."""
    how = "can change or delete data" if destructive else "can change data"
    return f"MUTATION: {how}. Ask the user to confirm before calling."


# --- pins ---------------------------------------------------------------------------------------


def definition(tool: dict[str, Any]) -> dict[str, Any]:
    """The pinned part of a tool as the server listed it."""
    return {key: tool[key] for key in PINNED if key in tool}


def digest(pinned: dict[str, Any]) -> str:
    text = json.dumps(pinned, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return hashlib.sha256(text.encode()).hexdigest()


def changes(old: dict[str, Any], new: dict[str, Any]) -> list[str]:
    """Which pinned parts differ (``description``, ``inputSchema``, ``annotations``)."""
    return [key for key in PINNED[1:] if old.get(key) != new.get(key)]


class Untrusted(Exception):
    """A pin file exists but is not one to approve anything from."""


class PinStore:
    """The approved definitions, one JSON file per server in ``folder`` (the user's state)."""

    def __init__(self, folder: Path) -> None:
        self.folder = folder

    def path(self, server: str) -> Path:
        safe = re.sub(r"[^A-Za-z0-9_.-]", "_", server) or "_"
        return self.folder / f"{safe}.json"

    def stamp(self, server: str) -> tuple[int, int] | None:
        """Changes when the file does (to notice an approval by another process)."""
        try:
            st = self.path(server).stat()
        except OSError:
            return None
        return (st.st_mtime_ns, st.st_size)

    def read(self, server: str) -> dict[str, dict[str, Any]] | None:
        """Tool name → pinned definition; ``None`` when nothing was recorded yet;
        :class:`Untrusted` when the file may not be used."""
        path = self.path(server)
        try:
            st = path.lstat()
        except FileNotFoundError:
            return None
        except OSError as exc:
            raise Untrusted(f"cannot be read ({exc.strerror})") from None
        if not stat.S_ISREG(st.st_mode):
            raise Untrusted("is not a regular file")
        if hasattr(os, "getuid") and st.st_uid != os.getuid():
            raise Untrusted("belongs to another user")
        if st.st_mode & 0o022:
            raise Untrusted("is writable by others")
        if st.st_size > MAX_PIN_FILE:
            raise Untrusted(f"is larger than {MAX_PIN_FILE // (1024 * 1024)} MB")
        try:
            data = json.loads(path.read_bytes())
            tools = data["tools"]
            return {
                str(name): dict(entry["definition"])
                for name, entry in tools.items()
                if digest(dict(entry["definition"])) == entry["digest"]
            }
        except (OSError, ValueError, KeyError, TypeError, AttributeError):
            raise Untrusted("is not a file of approved definitions") from None

    def write(self, server: str, tools: dict[str, dict[str, Any]]) -> None:
        """Record ``tools`` (name → pinned definition) as the approved ones, atomically."""
        self.folder.mkdir(parents=True, exist_ok=True, mode=0o700)
        body = {
            "server": server,
            "approved_at": dt.datetime.now(dt.UTC).isoformat(timespec="seconds"),
            "tools": {
                name: {"digest": digest(pinned), "definition": pinned}
                for name, pinned in sorted(tools.items())
            },
        }
        path = self.path(server)
        temp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
        fd = os.open(temp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        try:
            with os.fdopen(fd, "w", encoding="utf-8") as fh:
                json.dump(body, fh, indent=1, ensure_ascii=False)
                fh.write("\n")
            os.replace(temp, path)
        except BaseException:
            temp.unlink(missing_ok=True)
            raise


def pin_folder(config: GatewayConfig) -> Path:
    """Beside the default audit log: the user's state, not the project's folder."""
    return default_audit_log(config.env).parent / "servers"


# --- tools ------------------------------------------------------------------------------------


class UpstreamArguments(BaseModel):
    """A mounted tool's arguments have no model: its own ``inputSchema`` checks them."""

    model_config = ConfigDict(extra="allow")


@dataclass(eq=False)  # compared by identity: no __eq__ to compile at start
class MountedTool(RegisteredTool):
    """A tool of a mounted server: validated by the server's own ``inputSchema`` (by the draft
    its ``$schema`` names), called upstream by its own name."""

    upstream_name: str = ""

    def validate(self, arguments: Any) -> Any:
        if self._checker is None:
            self._checker = compile_schema(self.input_schema)
        return check_arguments(self._checker, None, arguments)


def mounted_tool(
    spec: ServerSpec, listed: dict[str, Any], plugin: PluginContext[Any], upstream: Upstream
) -> MountedTool:
    """The registry's tool for one listed tool of ``spec``'s server (see the module doc)."""
    original = str(listed["name"])
    name = spec.prefix + original
    hints = listed.get("annotations") or {}
    tier = spec.tiers.get(original) or (
        Tier.READ if hints.get("readOnlyHint") is True else Tier.MUTATION
    )
    read = tier is Tier.READ
    destructive = not read and hints.get("destructiveHint") is not False
    idempotent = read or hints.get("idempotentHint") is True
    description = str(listed.get("description") or "").strip()
    if not read:
        paragraph = mutation_paragraph(destructive)
        description = f"{description}\n\n{paragraph}" if description else paragraph
    title = str(listed.get("title") or hints.get("title") or name.replace("_", " ").capitalize())

    async def call_upstream(args: Any, ctx: ToolContext[Any]) -> McpResult:
        result = await upstream.call(original, args, ctx.progress, inputs=ctx.inputs, log=ctx.log)
        return McpResult(result)

    tool_spec: ToolSpec[Any] = ToolSpec(
        name=name,
        description=description,
        input_model=UpstreamArguments,
        handler=call_upstream,
        tier=tier,
        title=title,
        mutation=None
        if read
        else Mutation(
            consequence=f"changes what MCP server {spec.name} manages",
            requires="what the server requires",
            reversible=False,
            destructive=destructive,
            idempotent=idempotent,
        ),
        timeout=spec.timeout,
        backend=spec.name,
        open_world=hints.get("openWorldHint") is not False,
    )
    return MountedTool(
        spec=tool_spec,
        tier=tier,
        plugin=plugin,
        input_schema=listed.get("inputSchema") or {"type": "object"},
        output_schema=listed.get("outputSchema"),
        description=description,
        annotations={
            "title": title,
            "read_only_hint": read,
            "destructive_hint": destructive,
            "idempotent_hint": idempotent,
            "open_world_hint": hints.get("openWorldHint"),
        },
        upstream_name=original,
    )


# --- records ------------------------------------------------------------------------------------


@dataclass(eq=False)  # compared by identity: no __eq__ to compile at start
class ServerRecord(PluginRecord):
    """A mounted server, reported among the plugins (``mcp-gateway plugins``, ``gateway_status``)."""

    upstream: Upstream | None = None
    #: the last listing, as the server sent it (to screen again after an approval)
    listing: Listing | None = None
    pins: tuple[int, int] | None = None
    runs: str = "server"
    #: its definitions are pinned and approved (``servers approve``); a plugin's worker's
    #: are installed code, not pinned
    pinned: ClassVar[bool] = True

    @property
    def label(self) -> str:
        return f"MCP server {self.name}"

    def screen_listing(
        self, mounts: Mounts, listed: list[dict[str, Any]], *, record_first_use: bool
    ) -> Screened:
        """Which of its listed tools are served (see :meth:`Mounts.screen`)."""
        return mounts.screen(self, listed, record_first_use=record_first_use)

    def mount_extras(self, mounts: Mounts) -> tuple[list[str], list[str], list[str]]:
        """Its resources, templates and prompts in the registries (see :mod:`gateway.mounted`)."""
        assert self.upstream is not None and self.listing is not None
        assert self.context is not None
        return mount_extras(
            self.upstream.spec,
            self.listing,
            self.context,
            self.upstream,
            mounts.loader.resources,
            mounts.loader.prompts,
            **self.extras_options(),
        )

    def extras_options(self) -> dict[str, Any]:
        """What :func:`~gateway.mounted.mount_extras` takes besides, for this kind of source."""
        return {}

    def as_dict(self) -> dict[str, Any]:
        out = super().as_dict()
        if self.upstream is not None:
            out["server"] = self.upstream.status()
            if out["reason"] is None and self.upstream.state is not State.UP:
                out["reason"] = self.upstream.reason
        return out


@dataclass(eq=False)  # compared by identity: no __eq__ to compile at start
class Screened:
    tools: list[MountedTool] = field(default_factory=list)
    held: dict[str, str] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)


# --- all of them --------------------------------------------------------------------------------

Listener = Callable[[], Awaitable[None]]


def _approve_hint(spec: ServerSpec) -> str:
    return f"approve with: mcp-gateway servers approve {spec.name}"


def _chosen(
    spec: ServerSpec, listed: list[dict[str, Any]], notes: list[str]
) -> list[dict[str, Any]]:
    """The listed tools the server's settings select (``tools``, ``deny_tools``); a note for
    each name those settings give that the server does not list."""
    by_name = {str(t["name"]): t for t in listed if isinstance(t.get("name"), str)}
    for key, names in (
        ("tools", spec.tools or ()),
        ("deny_tools", spec.deny_tools),
        ("tiers", tuple(spec.tiers)),
    ):
        for missing in [n for n in names if n not in by_name]:
            hint = closest(missing, list(by_name))
            notes.append(f"{key} names {missing!r}, which the server does not list{hint}")
    return [
        t
        for n, t in by_name.items()
        if (spec.tools is None or n in spec.tools) and n not in spec.deny_tools
    ]


class Mounts:
    """The servers of one gateway: registered at load (no I/O), run from :meth:`start` to
    :meth:`stop`, their tools kept in the registry as they list them."""

    def __init__(
        self,
        config: GatewayConfig,
        registry: Registry,
        health: HealthMonitor,
        sanitizer: Sanitizer,
        loader: PluginLoader,
    ) -> None:
        self.config = config
        self.registry = registry
        self.health = health
        self.sanitizer = sanitizer
        self.loader = loader
        self.pins = PinStore(pin_folder(config))
        self.records: dict[str, ServerRecord] = {}
        self._listeners: list[Listener] = []
        self._task: asyncio.Task[None] | None = None
        self._started_at: float | None = None
        self._answered = anyio.Event()

    def __bool__(self) -> bool:
        return bool(self.records)

    # -- registration ------------------------------------------------------------------------------

    def add(self, specs: Iterable[tuple[str, ServerSpec]]) -> None:
        """Register servers (each with the plugin that mounts it); no I/O."""
        taken = {r.name for r in self.loader.records}
        for owner, spec in specs:
            record = ServerRecord(
                spec.name, "", PluginState.LOADED, source=f"mounted by plugin {owner}"
            )
            record.summary = f"tools of the MCP server {spec.name}"
            if spec.name in taken:
                record.state = PluginState.FAILED
                record.reason = (
                    f"the name {spec.name!r} is taken by a plugin or another server "
                    f"({spec.origin or owner}); rename the server"
                )
            elif not spec.enabled:
                record.state, record.reason = PluginState.DISABLED, "enabled = false"
            else:
                record.context = PluginContext(
                    name=spec.name,
                    version="",
                    settings=None,
                    data_roots=tuple(self.config.data_roots),
                    logger=logging.getLogger(f"gateway.server.{spec.name}"),
                    read_only=self.config.read_only,
                    sanitizer=self.sanitizer,
                )
                self._secrets(spec)
                upstream = Upstream(
                    spec,
                    env=self.config.env,
                    sanitizer=self.sanitizer,
                    on_listing=self._listed,
                    on_up=self.health.breaker(spec.name).record_success,
                )
                record.upstream = upstream
                self._tell_updates(record)
                record.checks = ["ping"]
                self.health.add_all(
                    spec.name,
                    [HealthCheck("ping", upstream.ping, backend=spec.name, timeout=5.0)],
                )
            taken.add(spec.name)
            self.loader.keep(record)
            self.records[spec.name] = record

    def _secrets(self, spec: ServerSpec) -> None:
        """Values a server's table configures as credentials are redacted like the gateway's."""
        values = [v for k, v in spec.env.items() if secret_name(k)]
        for key, value in spec.headers.items():
            if key.lower() in ("authorization", "cookie") or secret_name(key):
                values += [value, value.partition(" ")[2]]
        self.sanitizer.add_secrets(v for v in values if v)

    def add_record(self, record: ServerRecord) -> None:
        """Run a source of tools registered elsewhere (a plugin's worker) as a server."""
        self.records[record.name] = record
        self._tell_updates(record)

    def _tell_updates(self, record: ServerRecord) -> None:
        """The server's ``notifications/resources/updated`` go to the clients subscribed."""
        if record.upstream is not None:
            changed = self.loader.resources.subscriptions.changed
            name = record.name
            record.upstream.on_updated = lambda uri: changed(name, uri)

    def has_servers(self) -> bool:
        """Is an MCP server mounted (whose lists may change; a plugin's worker lists what is
        installed)?"""
        return any(r.pinned and r.upstream is not None for r in self.records.values())

    def may_subscribe(self) -> bool:
        """Has a server (a plugin's worker says it of each resource) declared
        ``resources.subscribe``, or not listed yet (it may)?"""
        return any(
            r.pinned
            and r.upstream is not None
            and r.upstream.state is not State.STOPPED
            and (r.listing is None or r.listing.subscribe)
            for r in self.records.values()
        )

    def subscribe(self, listener: Listener) -> None:
        """``listener`` is awaited each time the tools mounted servers serve change."""
        self._listeners.append(listener)

    # -- running ------------------------------------------------------------------------------------

    def running(self) -> list[Upstream]:
        return [r.upstream for r in self.records.values() if r.upstream is not None]

    async def start(self, only: set[str] | None = None) -> None:
        """Start every server (or those named) in the background; returns at once."""
        import asyncio

        upstreams = [u for u in self.running() if only is None or u.name in only]
        if self._task is not None or not upstreams:
            return
        self._started_at = time.monotonic()

        async def supervise() -> None:
            async with anyio.create_task_group() as tg:
                for upstream in upstreams:
                    tg.start_soon(upstream.run, name=f"mcp server {upstream.name}")

        self._task = asyncio.get_running_loop().create_task(supervise())

    async def stop(self) -> None:
        """Stop every server: each one's process group ends (bounded, see ``upstream``)."""
        import asyncio

        task, self._task = self._task, None
        if task is None:
            return
        task.cancel()
        with anyio.CancelScope(shield=True):
            await asyncio.gather(task, return_exceptions=True)
        for upstream in self.running():
            upstream.state = State.STOPPED

    async def settled(self) -> None:
        """Wait while servers are starting for the first time (see the module doc)."""
        if self._started_at is None:
            return
        await self._refresh_pins()
        while True:
            now = time.monotonic()
            elapsed = now - self._started_at
            upstreams = self.running()
            answered = sorted(u.answered_at - self._started_at for u in upstreams if u.answered_at)
            waiting = [
                u
                for u in upstreams
                if u.answered_at is None
                and elapsed < u.spec.list_wait
                and not (u.state is State.DOWN or u.state is State.STOPPED)
            ]
            if not waiting:
                return
            wake = min(self._started_at + u.spec.list_wait for u in waiting)
            if len(answered) > len(upstreams) // 2:
                enough = answered[-1] + max(STRAGGLER_SLACK, answered[-1] - answered[0])
                if elapsed >= enough:
                    return
                wake = min(wake, self._started_at + enough)
            event = self._answered
            with anyio.move_on_after(max(0.0, wake - now)):
                await event.wait()

    # -- listings ---------------------------------------------------------------------------------

    async def _listed(self, upstream: Upstream, listing: Listing) -> None:
        record = self.records[upstream.name]
        record.listing = listing
        record.version = listing.server_version or record.version
        if listing.server_name and record.pinned:  # a plugin's worker keeps its own summary
            record.summary = f"tools of the MCP server {listing.server_name}"
        if record.context is not None:
            record.context.version = record.version
        await self._apply(record)
        # The URIs clients are subscribed to, on a connection that is new.
        await upstream.rewatch()
        if upstream.answered_at is None:
            upstream.answered_at = time.monotonic()
        self._answered.set()
        self._answered = anyio.Event()

    async def _apply(self, record: ServerRecord) -> None:
        """Screen the record's last listing and put its tools in the registry."""
        assert record.upstream is not None and record.listing is not None
        before = self._served()
        record.pins = self.pins.stamp(record.name)
        screened = record.screen_listing(self, record.listing.tools, record_first_use=True)
        self.registry.remove_plugin(record.name)
        try:
            self.registry.add_all(list(screened.tools))
        except RegistrationError as exc:  # the server listed one name twice
            screened.notes.append(str(exc))
            unique = {t.name: t for t in screened.tools}
            self.registry.add_all(list(unique.values()))
            screened.tools = list(unique.values())
        record.tools = [t.name for t in screened.tools]
        record.held = screened.held
        self.registry.hold(record.name, screened.held)
        assert record.context is not None
        record.resources, record.prompts, extra = record.mount_extras(self)
        record.notes = screened.notes + extra
        record.reason = None
        self.loader.refresh_withheld()
        self.loader.refresh_offered()
        if self._served() != before:
            await self._tell()

    async def _refresh_pins(self) -> None:
        """Tools held for approval are screened again once their pin file changed (an
        approval by ``mcp-gateway servers approve`` while this gateway runs)."""
        for record in self.records.values():
            if not record.pinned:
                continue
            changed = self.pins.stamp(record.name) != record.pins
            if record.held and record.listing is not None and changed:
                await self._apply(record)

    def _served(self) -> str:
        return json.dumps(
            [
                (t.name, t.plugin.name, t.tier.value, t.description, t.input_schema)
                for t in self.registry.all()
            ]
            + [(p.name, p.plugin.name, p.arguments) for p in self.loader.prompts.all()]
            + [(r.key, r.plugin, r.listed) for r in self.loader.resources.served()],
            sort_keys=True,
            default=str,
        )

    async def _tell(self) -> None:
        for listener in list(self._listeners):
            try:
                await listener()
            except Exception as exc:  # a client gone; the others are still told
                log.warning("telling a client the tools changed failed: %s", type(exc).__name__)

    def screen(
        self, record: ServerRecord, listed: list[dict[str, Any]], *, record_first_use: bool
    ) -> Screened:
        """Which of ``listed`` are served, which are held and why, what to note."""
        upstream = record.upstream
        assert upstream is not None and record.context is not None
        out = Screened()
        chosen = _chosen(upstream.spec, listed, out.notes)
        approved = self._approved(upstream.spec, chosen, out, record_first_use=record_first_use)
        if approved is not None:
            for tool in chosen:
                self._admit(record, tool, approved.get(tool["name"]), out)
        return out

    def _approved(
        self,
        spec: ServerSpec,
        chosen: list[dict[str, Any]],
        out: Screened,
        *,
        record_first_use: bool,
    ) -> dict[str, Any] | None:
        """The approved definitions of the server's tools, those seen for the first time
        recorded (``pin = "first-use"``); ``None`` when none can be trusted (all held)."""
        approve = _approve_hint(spec)
        try:
            approved = self.pins.read(spec.name)
        except Untrusted as exc:
            path = self.pins.path(spec.name).name
            for tool in chosen:
                out.held[spec.prefix + tool["name"]] = (
                    f"the approved definitions ({path}) {exc}, so none is trusted; {approve}"
                )
            return None
        if approved is None and spec.pin == "approve":
            for tool in chosen:
                out.held[spec.prefix + tool["name"]] = (
                    f'not approved yet (pin = "approve"); {approve}'
                )
            return None
        # Trust on first use, tool by tool: what was never seen is recorded as it is now (a
        # server adding tools later adds them); what was seen must still be what it was.
        approved = dict(approved or {})
        first = {
            t["name"]: definition(t)
            for t in chosen
            if t["name"] not in approved and spec.pin == "first-use"
        }
        if first and record_first_use:
            try:
                self.pins.write(spec.name, {**approved, **first})
                log.info(
                    "server %s: recorded %d tool definition(s) on first use: %s",
                    spec.name,
                    len(first),
                    ", ".join(sorted(first))[:300],
                )
            except OSError as exc:
                out.notes.append(f"its tool definitions could not be recorded ({exc.strerror})")
        approved.update(first)
        return approved

    def _admit(
        self, record: ServerRecord, tool: dict[str, Any], pinned: Any, out: Screened
    ) -> None:
        """Serve one listed tool, or hold it with the reason: unapproved, changed since it was
        approved, an invalid name or input schema; note what Claude Code would cut."""
        upstream = record.upstream
        assert upstream is not None and record.context is not None
        spec = upstream.spec
        published = spec.prefix + tool["name"]
        now = definition(tool)
        if pinned is None:
            out.held[published] = (
                f'a new tool, not approved yet (pin = "approve"); {_approve_hint(spec)}'
            )
            return
        if pinned != now:
            what = ", ".join(changes(pinned, now)) or "its definition"
            out.held[published] = f"{what} changed since it was approved; {_approve_hint(spec)}"
            return
        if not MCP_TOOL_NAME.fullmatch(published):
            out.held[published] = "its name is not a valid MCP tool name"
            return
        try:
            checker = compile_schema(tool.get("inputSchema") or {"type": "object"})
            type(checker).check_schema(checker.schema)
        except Exception as exc:
            out.held[published] = self.sanitizer(
                f"its inputSchema is not a valid JSON Schema ({type(exc).__name__})"
            )
            return
        made = mounted_tool(spec, tool, record.context, upstream)
        made._checker = checker
        out.tools.append(made)
        if len(made.description) > MAX_DESCRIPTION_CHARS:
            out.notes.append(
                f"tool {published}: its description is {len(made.description)} characters; "
                f"Claude Code cuts it after {MAX_DESCRIPTION_CHARS}"
            )
        full = full_tool_name(self.config.server_name, published)
        if len(full) > MAX_FULL_NAME:
            out.notes.append(
                f"tool {published}: {full} is {len(full)} characters; Claude Code drops "
                f"tools whose full name is over {MAX_FULL_NAME} (a shorter prefix helps)"
            )

    def pinned_tools(self) -> list[MountedTool]:
        """The approved tools of servers that have not listed theirs in this process, from
        their pin files (nothing started): what ``claude-config`` describes."""
        out: list[MountedTool] = []
        for record, approved in self._unlisted():
            if approved:
                listed = [dict(d) for d in approved.values()]
                out += self.screen(record, listed, record_first_use=False).tools
        return out

    def unapproved(self) -> list[str]:
        """The servers of which nothing can be described without starting them: none of their
        tools is approved yet (or their file of approvals is not trusted)."""
        return [record.name for record, approved in self._unlisted() if not approved]

    def _unlisted(self) -> list[tuple[ServerRecord, dict[str, Any] | None]]:
        """The enabled, pinned servers that have not listed their tools in this process, with
        what their file approves (``None``: a file that approves nothing, being untrusted)."""
        out: list[tuple[ServerRecord, dict[str, Any] | None]] = []
        for record in self.records.values():
            if record.upstream is None or record.listing is not None or not record.pinned:
                continue
            try:
                out.append((record, self.pins.read(record.name)))
            except Untrusted:
                out.append((record, None))
        return out

    # -- approving ------------------------------------------------------------------------------

    async def approve(self, names: list[str]) -> tuple[int, list[str]]:
        """``mcp-gateway servers approve [NAME ...]``: start the servers named (default: all
        enabled), list their tools and record those definitions as the approved ones. Returns
        the exit status (1 when a server could not be listed) and a line per server."""
        servers = {n: r for n, r in self.records.items() if r.pinned}
        unknown = [n for n in names if n not in servers]
        if unknown:
            from .config import ConfigError

            configured = sorted(servers)
            raise ConfigError(
                f"servers approve: no MCP server called {unknown[0]!r} is configured "
                f"(configured: {', '.join(configured) or 'none'})"
                f"{closest(unknown[0], configured)}"
            )
        chosen = names or [n for n, r in servers.items() if r.upstream is not None]
        lines: list[str] = []
        code = 0
        before: dict[str, dict[str, dict[str, Any]] | None] = {}
        for name in chosen:
            if self.records[name].upstream is None:
                lines.append(f"{name}: not approved: {self.records[name].reason}")
                code = 1
                continue
            try:
                before[name] = self.pins.read(name)
            except Untrusted:
                before[name] = None
        await self._listings(list(before))
        for name, old in before.items():
            approved, line = self._record_approval(name, old)
            lines.append(line)
            code = code if approved else 1
        return code, lines

    async def _listings(self, names: list[str]) -> None:
        """Start the servers named and wait (``APPROVE_WAIT`` at most) until each has listed
        its tools or given up restarting; then stop them."""
        await self.start(only=set(names))
        try:
            with anyio.move_on_after(APPROVE_WAIT):
                for name in names:
                    upstream = self.records[name].upstream
                    assert upstream is not None
                    while not upstream.answered.is_set() and upstream.restarts < 2:
                        with anyio.move_on_after(0.2):
                            await upstream.answered.wait()
        finally:
            await self.stop()

    def _record_approval(
        self, name: str, old: dict[str, dict[str, Any]] | None
    ) -> tuple[bool, str]:
        """Record what server ``name`` listed as its approved definitions: whether it did,
        and the line that says so (what changed), or why it is not approved."""
        record = self.records[name]
        assert record.upstream is not None
        if record.listing is None:
            return False, f"{name}: not approved: {record.upstream.reason or 'no answer'}"
        spec = record.upstream.spec
        now = {
            str(t["name"]): definition(t)
            for t in record.listing.tools
            if (spec.tools is None or t.get("name") in spec.tools)
            and t.get("name") not in spec.deny_tools
        }
        try:
            self.pins.write(name, now)
        except OSError as exc:
            return False, f"{name}: not approved: {self.pins.path(name).name}: {exc.strerror}"
        return True, f"{name}: approved {len(now)} tools; {_what_changed(old, now)}"


#: How long ``servers approve`` waits for the servers to answer.
APPROVE_WAIT = 90.0


def _what_changed(old: dict[str, dict[str, Any]] | None, now: dict[str, dict[str, Any]]) -> str:
    if old is None:
        return "none were approved before"
    changed = [
        f"{n} ({', '.join(changes(old[n], d))})" for n, d in now.items() if n in old and old[n] != d
    ]
    new = [n for n in now if n not in old]
    gone = [n for n in old if n not in now]
    parts = [
        f"{label}: {', '.join(items)}"
        for label, items in (("changed", changed), ("new", new), ("no longer listed", gone))
        if items
    ]
    return "; ".join(parts) if parts else "nothing changed"
