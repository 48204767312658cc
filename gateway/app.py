"""The assembled gateway: config + loaded plugins + registry + health + pipeline, behind one
facade that the transports, the CLI and the test kit use."""

from __future__ import annotations

import dataclasses
import inspect
import logging
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import anyio
from pydantic import BaseModel, ConfigDict, Field

from . import __version__
from .audit import build_audit_trail
from .auth.identity import Identity, current_caller
from .backends import BackendHub
from .config import GatewayConfig, ToolNames, load_config, unexpanded_problem
from .errors import ErrorCode, GatewayError, Sanitizer
from .health import HealthMonitor, HealthResult
from .hookspecs import hookimpl
from .inputs import NO_INPUTS, InputRequired, Inputs
from .instructions import build_instructions
from .isolation import Workers
from .mounts import Mounts
from .pipeline import CallResult, Pipeline, build_pipeline
from .plugins import (
    PluginLoader,
    PluginRecord,
    PluginSource,
    PluginState,
    entry_point_sources,
    object_sources,
)
from .policy import Policy
from .prompts import (
    WORD_SPLITTING_CLIENTS,
    PromptRegistry,
    RegisteredPrompt,
    command_words,
    complete_argument,
    render_messages,
    render_prompt,
)
from .registry import RegisteredTool, Registry
from .resources import Deliver, RegisteredResource, ResourceRegistry
from .spec import (
    Backend,
    HealthCheck,
    LogFn,
    PluginContext,
    ProgressFn,
    Tier,
    ToolContext,
    ToolHandler,
    ToolSpec,
)
from .telemetry import Telemetry, build_telemetry, header_secrets

if TYPE_CHECKING:
    from .limits import Limiter

__all__ = [
    "BUILTIN",
    "CallResult",
    "Gateway",
    "HealthResult",
    "OfferedTool",
    "RegisteredPrompt",
    "RegisteredTool",
    "build_gateway",
]

BUILTIN = "gateway"
log = logging.getLogger("gateway.app")
#: Seconds :meth:`Gateway.stop` waits for the telemetry exporters to send what is pending.
TELEMETRY_STOP_SECONDS = 5.0
#: Builds a gateway's telemetry around its sanitizer (see ``Gateway(telemetry=...)``).
TelemetryFactory = Callable[[Sanitizer], Telemetry]


@dataclass(frozen=True)
class OfferedTool:
    """A tool as this deployment offers it: what ``tools/list`` publishes (``meta`` with the
    policy's confirmation flag) and what the CLI and ``claude-config`` report."""

    name: str
    plugin: str
    tier: Tier
    title: str
    description: str
    input_schema: dict[str, Any]
    output_schema: dict[str, Any] | None
    annotations: dict[str, Any]
    meta: dict[str, Any] | None
    #: only a person may approve a call (``confirm_each_call``), never a headless approver
    person_must_approve: bool


def _sanitizer(config: GatewayConfig) -> Sanitizer:
    """The gateway's sanitizer, knowing the secrets the configuration holds so far (the
    plugins' are added as they load)."""
    roots = [*config.data_roots, Path.cwd()]
    sanitizer = Sanitizer.from_environment(roots=roots, env=dict(config.env))
    if config.token is not None:
        sanitizer.add_secrets([config.token.get_secret_value()])
    sanitizer.add_secrets(header_secrets(config.env))
    return sanitizer


def _policy(config: GatewayConfig) -> Policy:
    scopes = None
    if config.auth is not None:  # the OAuth modules are imported only for OAuth
        from .auth.settings import ScopePolicy

        scopes = ScopePolicy.from_config(config.auth)
    return Policy(
        read_only=config.read_only,
        deny_tools=frozenset(config.deny_tools),
        confirm_each_call=config.confirm_each_call,
        scopes=scopes,
    )


class Gateway:
    """Build with :func:`build_gateway`. Loading happens in the constructor and does no I/O
    beyond importing plugins; :meth:`start` opens plugin resources, :meth:`stop` closes them.

    What decides which tools, prompts and resources a client is offered, and every call, go
    through the methods below, so that every surface follows them. Besides those, the
    transports, the CLI and the test kit read a few parts directly: ``config``, ``sanitizer``
    and ``telemetry`` (their own names, messages and spans), ``policy.scopes`` and ``limiter``
    (the HTTP transport), ``mounts`` (a changed tool list, ``approve``), ``workers`` (whether
    the isolated plugins loaded), ``pipeline.errors`` (a call refused before it runs) and
    ``backends`` (the settings ``claude-config`` finds unset). The other parts (``registry``,
    ``health``, ``loader``, ``prompts``, ``resources``) stay reachable for the core's own tests.

    ``telemetry`` builds the gateway's :class:`~gateway.telemetry.Telemetry` from its
    sanitizer; by default it is what ``config.telemetry`` asks for (``TelemetryError`` when
    that cannot run), exported until :meth:`stop`."""

    def __init__(
        self,
        config: GatewayConfig,
        sources: list[PluginSource],
        *,
        telemetry: TelemetryFactory | None = None,
    ) -> None:
        self.config = config
        self.started_at = time.time()
        self.sanitizer = _sanitizer(config)
        # Before any plugin is imported: telemetry asked for but not installed stops here.
        self.telemetry = (telemetry or self._configured_telemetry)(self.sanitizer)
        if config.auth is not None and config.auth.introspection is not None:
            self.sanitizer.add_secrets([config.auth.introspection.client_secret.get_secret_value()])
        self.registry = Registry(config.providers, builtin=BUILTIN)
        self.health = HealthMonitor(
            self.sanitizer,
            default_timeout=config.health_timeout,
            cache_seconds=config.health_cache_seconds,
            breaker_failures=config.breaker_failures,
            breaker_reset_seconds=config.breaker_reset_seconds,
            on_breaker_change=self.telemetry.breaker_changed if self.telemetry.enabled else None,
        )
        self.policy = _policy(config)
        self.backends = BackendHub(
            config.plugin_settings, self.sanitizer, unexpanded=config.unexpanded
        )
        self.prompts = PromptRegistry()
        self.resources = ResourceRegistry()
        self.loader = PluginLoader(
            config,
            self.registry,
            self.health,
            self.sanitizer,
            self.backends,
            self.prompts,
            self.resources,
        )
        #: the MCP servers plugins mount (``register_servers``), reported among the plugins
        self.mounts = Mounts(config, self.registry, self.health, self.sanitizer, self.loader)
        #: the audit sinks and the per-caller limits (``None``: no limit), built before the
        #: built-in plugin registers their health checks; nothing connects yet
        self.audit = build_audit_trail(config)
        self.limiter: Limiter | None = None
        if config.limit_calls_per_minute or config.limit_mutations_per_minute:
            from .limits import build_limiter  # most deployments set no limit: not imported

            self.limiter = build_limiter(config)
        #: the plugins that run in a worker process of their own (``isolate``)
        self.workers = Workers(
            config,
            self.mounts,
            self.loader,
            self.registry,
            self.health,
            self.prompts,
            self.sanitizer,
        )
        self.workers.offered = lambda: frozenset(t.name for t in self.visible_tools())
        self.loader.isolate = self.workers.add
        self._load(sources)
        self.workers.begin()
        self.pipeline = self._pipeline()
        self._started = False

    def _pipeline(self) -> Pipeline:
        return build_pipeline(
            self.registry,
            self.policy,
            self.health,
            self.sanitizer,
            self.audit,
            default_timeout=self.config.default_timeout,
            debug=self.config.debug,
            unavailable_hint=self.meanwhile,
            telemetry=self.telemetry,
            limiter=self.limiter,
        )

    def _load(self, sources: list[PluginSource]) -> None:
        """The plugins (the built-in one first), then the servers they mount."""
        builtin = object_sources({BUILTIN: _StatusPlugin(self)})
        self.loader.load_all(sources, builtin=builtin)
        loaded = [p for p in self.loader.records if p.state is PluginState.LOADED]
        self.mounts.add((p.name, server) for p in loaded for server in p.servers)

    def _configured_telemetry(self, sanitizer: Sanitizer) -> Telemetry:
        return build_telemetry(
            self.config.telemetry, sanitizer, self.config.env, version=__version__
        )

    @property
    def plugins(self) -> list[PluginRecord]:
        return self.loader.records

    def plugin(self, name: str) -> PluginRecord | None:
        return next((p for p in self.plugins if p.name == name), None)

    # -- what is installed and what is offered ----------------------------------------------

    def tools(self, plugin: str | None = None) -> list[RegisteredTool]:
        """Every tool the registry serves (of one plugin, or all), offered or not."""
        return [t for t in self.registry.all() if plugin is None or t.plugin.name == plugin]

    def visible_tools(self) -> list[RegisteredTool]:
        """The served tools a client is offered (as the registry holds them): visible under
        the policy, and with a configured backend (unless ``offer_unconfigured_tools``)."""
        unoffered = self._unoffered()
        return [t for t in self.registry.all() if self._offers(t, unoffered)]

    def meanwhile(self, tool: RegisteredTool) -> str | None:
        """What an error saying ``tool``'s backend is unavailable adds: the tools its backend
        names as fallbacks that this deployment offers (Gitea's: get_workspace_file)."""
        fallbacks = getattr(tool.spec.backend, "fallbacks", ())
        if not fallbacks:
            return None
        offered = {t.name for t in self.visible_tools()}
        found = [f"{name} {what}" for name, what in fallbacks if name in offered]
        return "meanwhile " + "; ".join(found) if found else None

    def offered_tools(self, *, unconfigured: bool = False) -> list[OfferedTool]:
        """The tools a client is offered, in their published form; ``unconfigured``: also
        those offered once their backend is configured (the policy still applies), which a
        client's settings must already allow (``claude-config``)."""
        if unconfigured:
            return [self._offered(t) for t in self.registry.all() if self.policy.visible(t)]
        return [self._offered(t) for t in self.visible_tools()]

    def tool_names(self) -> ToolNames:
        """The tool names this deployment's sources register, offered or not: what the
        settings naming tools are checked against (:class:`gateway.config.ToolNames`). A
        mounted server's are its approved tools; one that has none yet leaves names unknown."""
        loaded = {p.name for p in self.plugins if p.state is PluginState.LOADED}
        plugins = [p for p in self.plugins if p.name not in self.mounts.records]
        pinned = self.mounts.pinned_tools()
        # An isolated plugin's tools are known once its worker loaded it.
        isolated = [w for w in self.workers.records.values() if w.loaded]
        unpinned = {r.name for r in self.mounts.records.values() if r.upstream is not None} - {
            t.plugin.name for t in pinned
        }
        unpinned -= {w.name for w in isolated}
        return ToolNames(
            known=frozenset(
                [
                    *(name for p in plugins for name in p.tools),
                    *(t.name for t in pinned),
                    *(name for w in isolated for name in w.tools),
                ]
            ),
            not_loaded=tuple(
                sorted({p.name for p in plugins if p.state is PluginState.DISABLED} - loaded)
            ),
            unknown=tuple(
                sorted({p.name for p in plugins if p.state is PluginState.FAILED} | unpinned)
            ),
        )

    def described_tools(self, *, unconfigured: bool = False) -> list[OfferedTool]:
        """The offered tools (``unconfigured``: see :meth:`offered_tools`), and the approved
        tools of mounted servers that have not listed theirs yet (from their recorded
        definitions; nothing is started): what ``claude-config`` and ``mcp-gateway tools``
        describe."""
        offered = self.offered_tools(unconfigured=unconfigured)
        names = {t.name for t in offered}
        pinned = [t for t in self.mounts.pinned_tools() if t.name not in names]
        return offered + [self._offered(t) for t in pinned if self.policy.visible(t)]

    async def settled(self) -> None:
        """Return once no mounted server holds a listing any more: at once, unless servers
        are still starting (bounded by their ``list_wait``, see :mod:`gateway.mounts`)."""
        if self.mounts:
            await self.mounts.settled()

    def offered_tool(self, name: str) -> OfferedTool | None:
        tool = self.registry.get(name)
        if tool is None or not self._offers(tool, self._unoffered()):
            return None
        return self._offered(tool)

    def offered_to(self, caller: Identity) -> set[str] | None:
        """The names of the offered tools ``caller``'s scopes allow; ``None`` when the caller is
        not limited by scopes (stdio, the shared token, a deployment without OAuth)."""
        if self.policy.scopes is None or caller.scopes is None:
            return None
        return {
            t.name for t in self.visible_tools() if self.policy.missing_scope(t, caller) is None
        }

    def serves_tool(self, name: str) -> bool:
        """Whether some plugin registered a tool of this name (offered or not)."""
        return self.registry.get(name) is not None

    def serves_prompt(self, name: str) -> bool:
        return self.prompts.get(name) is not None

    def _unoffered(self) -> set[str]:
        """Tools of loaded plugins not offered because their backend is not configured."""
        return {name for p in self.plugins for name in p.not_offered}

    def _offers(self, tool: RegisteredTool, unoffered: set[str]) -> bool:
        return self.policy.visible(tool) and tool.name not in unoffered

    def _offered(self, tool: RegisteredTool) -> OfferedTool:
        return OfferedTool(
            name=tool.name,
            plugin=tool.plugin.name,
            tier=tool.tier,
            title=tool.annotations["title"],
            description=tool.description,
            input_schema=tool.input_schema,
            output_schema=tool.output_schema,
            annotations=tool.annotations,
            meta=self.policy.published_meta(tool),
            person_must_approve=self.policy.confirms_each_call(tool),
        )

    def offered_prompts(self) -> list[RegisteredPrompt]:
        """The prompts of loaded plugins whose required tools this deployment offers."""
        return self.prompts.offered(t.name for t in self.visible_tools())

    def offered_prompt(self, name: str) -> RegisteredPrompt | None:
        return next((p for p in self.offered_prompts() if p.name == name), None)

    def unoffered_summary(self) -> str:
        """What a start line adds about the tools not offered, and why, in a few words:
        ``38 tools wait for COCKPIT_API_URL, 5 for GITEA_URL; plugin x failed to load``
        (``""`` when every loaded tool is offered or hidden by the policy on purpose)."""
        waiting: dict[str, int] = {}
        for p in self.plugins:
            for name in p.not_offered:
                tool = self.registry.get(name)
                backend = tool.spec.backend if tool is not None else None
                if isinstance(backend, Backend):
                    what = backend.enabled_by()
                else:
                    what = f"plugin {p.name}'s backend settings"
                waiting[what] = waiting.get(what, 0) + 1
        parts = []
        ranked = sorted(waiting.items(), key=lambda item: -item[1])  # the most first
        for i, (what, count) in enumerate(ranked):
            tools = f"{count} tool{'s' if count != 1 else ''} " if i == 0 else f"{count} "
            verb = ("waits" if count == 1 else "wait") + " for " if i == 0 else "for "
            parts.append(f"{tools}{verb}{what}")
        out = ", ".join(parts)
        failed = [p.name for p in self.plugins if p.state is PluginState.FAILED]
        if failed:
            plugins = "plugin" if len(failed) == 1 else "plugins"
            out += "; " if out else ""
            out += f"{plugins} {', '.join(failed)} failed to load (mcp-gateway plugins says why)"
        return out

    def instructions(self) -> str:
        return build_instructions(
            self.plugins,
            self.offered_prompts(),
            {t.name for t in self.visible_tools()},
            server=self.config.server_name,
            builtin=BUILTIN,
        )

    async def get_prompt(
        self, name: str, arguments: dict[str, Any] | None, *, client: str | None = None
    ) -> str:
        """Render an offered prompt for ``client`` (its ``clientInfo.name``); ``GatewayError``
        (``NOT_FOUND``, ``VALIDATION_ERROR``)."""
        prompt = self.offered_prompt(name) if isinstance(name, str) else None
        if prompt is None:
            raise GatewayError(
                ErrorCode.NOT_FOUND,
                f"unknown prompt {str(name)[:80]!r}; list the prompts to see what exists",
            )
        return await render_prompt(
            prompt,
            arguments,
            tools=frozenset(t.name for t in self.visible_tools()),
            read_only=self.config.read_only,
            sanitizer=self.sanitizer,
            client=client,
        )

    async def prompt(
        self,
        name: str,
        arguments: dict[str, Any] | None,
        *,
        client: str | None = None,
        inputs: Inputs = NO_INPUTS,
    ) -> list[dict[str, Any]] | InputRequired:
        """Render an offered prompt's messages (JSON ``PromptMessage``s), or what it asks the
        client first; ``GatewayError`` (``NOT_FOUND``, ``VALIDATION_ERROR``)."""
        if self.mounts and isinstance(name, str) and self.prompts.get(name) is None:
            await self.settled()  # a mounted server's prompt, asked for before it answered
        prompt = self.offered_prompt(name) if isinstance(name, str) else None
        if prompt is None:
            raise GatewayError(
                ErrorCode.NOT_FOUND,
                f"unknown prompt {str(name)[:80]!r}; list the prompts to see what exists",
            )
        if prompt.tool is not None:  # a mounted server's: a read-tier call through the pipeline
            arguments = dict(arguments or {})
            if client in WORD_SPLITTING_CLIENTS:  # an isolated plugin's prompt may say free_text
                arguments = command_words(prompt, arguments)
            result = await self.pipeline.serve(prompt.tool, {"arguments": arguments}, inputs=inputs)
            if result.input_required is not None:
                return result.input_required
            if result.is_error or result.mcp is None:
                error = result.payload["error"]
                raise GatewayError(ErrorCode(error["code"]), str(error["message"]))
            messages = result.mcp.get("messages")
            return (
                [m for m in messages if isinstance(m, dict)] if isinstance(messages, list) else []
            )
        return await render_messages(
            prompt,
            arguments,
            tools=frozenset(t.name for t in self.visible_tools()),
            read_only=self.config.read_only,
            sanitizer=self.sanitizer,
            client=client,
            inputs=inputs,
        )

    async def complete_prompt(
        self, name: str, argument: str, value: str, arguments: dict[str, str]
    ) -> list[str]:
        """Suggestions for a prompt's argument (``completion/complete``)."""
        prompt = self.offered_prompt(name) if isinstance(name, str) else None
        if prompt is None:
            raise GatewayError(ErrorCode.NOT_FOUND, f"unknown prompt {str(name)[:80]!r}")
        try:
            return await complete_argument(prompt, argument, value, arguments)
        except Exception as exc:
            log.error("prompt=%s complete raised %s", name, type(exc).__name__)
            return []

    def asks_mid_call(self, name: str, *, kind: str = "tool") -> bool:
        """Is ``name`` (a tool, a ``prompt`` or a ``resource``'s URI) of a mounted server that
        asks the client over its own connection (opened at 2025-11-25), in the middle of a
        call (see gateway.asking.Parking)?"""
        if not isinstance(name, str):
            return False
        source: str | None = None
        if kind == "tool":
            tool = self.registry.get(name)
            source = tool.plugin.name if tool is not None else None
        elif kind == "prompt":
            prompt = self.prompts.get(name)
            source = prompt.plugin.name if prompt is not None and prompt.tool else None
        else:
            found = self.resources.find(name)
            source = found[0].plugin if found is not None else None
        record = self.mounts.records.get(source) if source is not None else None
        upstream = record.upstream if record is not None else None
        # A plugin's worker asks with input-required results, as a plugin in process does.
        return upstream is not None and not upstream.modern and not upstream.answers_inputs

    # -- resources ------------------------------------------------------------------------------

    def offered_resources(self, *, templates: bool = False) -> list[RegisteredResource]:
        """The resources (or templates) the caller may read: every served one, less those an
        OAuth caller's scopes do not reach."""
        found = self.resources.templates() if templates else self.resources.resources()
        caller = current_caller()
        return [r for r in found if self.policy.missing_scope(r.tool, caller) is None]

    async def read_resource(
        self, uri: str, *, inputs: Inputs = NO_INPUTS, log: LogFn | None = None
    ) -> CallResult:
        """Read ``uri`` through the pipeline (a read-tier call): a result whose ``mcp`` is the
        ``ReadResourceResult``, an error result, or what it asks the client first."""
        if self.mounts and self.resources.find(uri) is None:
            await self.settled()
        found = self.resources.find(uri) if isinstance(uri, str) else None
        if found is None:
            err = GatewayError(
                ErrorCode.NOT_FOUND,
                f"no resource {str(uri)[:200]!r}; list the resources and templates to see "
                "what exists",
            )
            return self.pipeline.errors.result(err, None)
        item, variables = found
        return await self.pipeline.serve(
            item.tool, {"uri": uri, **variables}, inputs=inputs, log=log
        )

    async def subscribe_resource(self, uri: str, subscriber: object, deliver: Deliver) -> None:
        """From now on ``deliver(uri)`` is awaited each time ``uri`` changed, until
        :meth:`unsubscribe_resource` (or :meth:`drop_subscriptions`) for ``subscriber``.
        ``GatewayError`` and nothing changes when ``uri`` is no resource served,
        ``NOT_FOUND``, is not subscribable, ``VALIDATION_ERROR``, or is one the caller may
        not read, ``PERMISSION_DENIED`` (what refuses a read refuses a subscription)."""
        item = await self._subscribable(uri)
        try:
            await self.resources.subscriptions.add(uri, subscriber, deliver, item)
        except ValueError as exc:
            raise GatewayError(ErrorCode.VALIDATION_ERROR, str(exc)) from None

    async def unsubscribe_resource(self, uri: str, subscriber: object) -> None:
        """``subscriber`` is told no more of ``uri``; one it was not subscribed to is checked
        as :meth:`subscribe_resource` checks it, and changes nothing."""
        if not await self.resources.subscriptions.remove(uri, subscriber):
            await self._subscribable(uri)

    async def drop_subscriptions(self, subscriber: object) -> None:
        """Every subscription of ``subscriber`` (its session or stream ended)."""
        await self.resources.subscriptions.drop(subscriber)

    def offers_subscriptions(self) -> bool:
        """May a client subscribe to some resource? One served is subscribable, or a mounted
        server that has not listed yet (an ``initialize`` does not wait for it) may have some."""
        return any(r.subscribable for r in self.resources.served()) or self.mounts.may_subscribe()

    async def _subscribable(self, uri: str) -> RegisteredResource:
        if self.mounts and self.resources.find(uri) is None:
            await self.settled()
        found = self.resources.find(uri) if isinstance(uri, str) else None
        if found is None:
            raise GatewayError(
                ErrorCode.NOT_FOUND,
                f"no resource {str(uri)[:200]!r}; list the resources and templates to see "
                "what exists",
            )
        item = found[0]
        if not item.subscribable:
            raise GatewayError(
                ErrorCode.VALIDATION_ERROR,
                f"resource {uri[:200]!r} cannot be subscribed to (its source does not say when "
                "it changes); read it again when you need it",
            )
        missing = self.policy.missing_scope(item.tool, current_caller())
        if missing is not None:
            raise GatewayError(
                ErrorCode.PERMISSION_DENIED,
                f"resource {uri[:200]!r} needs the OAuth scope {missing}, which the access "
                "token does not carry; sign in again asking for it, or ask an administrator "
                "to grant it",
                details={"missing_scope": missing},
            )
        return item

    async def complete_resource(
        self, uri_template: str, argument: str, value: str, arguments: dict[str, str]
    ) -> list[str]:
        """Suggestions for a resource template's variable (``completion/complete``)."""
        item = self.resources.template(uri_template) if isinstance(uri_template, str) else None
        if item is None:
            raise GatewayError(
                ErrorCode.NOT_FOUND, f"unknown resource template {str(uri_template)[:200]!r}"
            )
        if item.complete is None:
            return []
        try:
            found = item.complete(argument, value, arguments)
            if inspect.isawaitable(found):
                found = await found
            return [str(v) for v in list(found)[:100]]
        except Exception as exc:
            log.error("template=%s complete raised %s", uri_template[:80], type(exc).__name__)
            return []

    # -- lifecycle -----------------------------------------------------------------------------

    async def start(self) -> None:
        if not self._started:
            self._started = True
            await self.loader.open_resources()
            self.health.start_probing()
            await self.mounts.start()
            # As plugins in process are loaded before serving: the listing is then exact.
            await self.workers.loaded()

    async def load_isolated(self) -> None:
        """Start the isolated plugins' workers, wait until they loaded, stop them: what a
        command that reports on plugins and tools without serving needs to know of them."""
        if not self.workers or self._started:
            return
        await self.mounts.start(only=set(self.workers.records))
        try:
            await self.workers.loaded()
        finally:
            await self.workers.stop()
            await self.mounts.stop()

    async def stop(self) -> None:
        """Stop probing, stop the mounted servers, close the plugins' resources and the REST
        clients, flush telemetry: each step runs even when one before it failed."""
        if not self._started:
            return
        self._started = False
        steps: list[Callable[[], Awaitable[None]]] = [
            self.health.stop_probing,  # before the resources close: a probe's check uses them
            self.workers.stop,
            self.mounts.stop,
            self.loader.close_resources,
            self.backends.aclose,
            self.audit.aclose,
        ]
        if self.limiter is not None:
            steps.append(self.limiter.aclose)
        if self.telemetry.enabled:
            steps.append(
                lambda: anyio.to_thread.run_sync(self.telemetry.shutdown, TELEMETRY_STOP_SECONDS)
            )
        failure: BaseException | None = None
        for step in steps:
            try:
                await step()
            except BaseException as exc:  # the first failure is raised once all have run
                failure = failure or exc
        if failure is not None:
            raise failure

    async def __aenter__(self) -> Gateway:
        await self.start()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.stop()

    # -- calling -------------------------------------------------------------------------------

    async def call(
        self,
        name: str,
        arguments: dict[str, Any] | None = None,
        *,
        progress: ProgressFn | None = None,
        inputs: Inputs = NO_INPUTS,
        log: LogFn | None = None,
    ) -> CallResult:
        """One ``tools/call`` through the pipeline (DESIGN.md, steps 1-7); ``inputs``: the
        client's answers when the call is made again after the tool asked (gateway.inputs)."""
        if self.mounts and self.registry.get(name) is None:
            await self.settled()  # a mounted server's tool, called before the server answered
        return await self.pipeline.call(name, arguments, progress=progress, inputs=inputs, log=log)

    async def call_with_handler(self, name: str, handler: ToolHandler[Any]) -> CallResult:
        """Run served tool ``name`` as a call runs it once its arguments are valid (breaker,
        timeout, shaping, sanitizing), with ``handler`` in place of its own and arguments its
        model never checked; no policy, no audit. The test kit shows with it that whatever a
        handler raises reaches the client clean, for tools whose arguments it cannot guess."""
        tool = self.registry.get(name)
        if tool is None:
            raise KeyError(f"no served tool {name!r}")
        replaced = dataclasses.replace(tool, spec=dataclasses.replace(tool.spec, handler=handler))
        return await self.pipeline.run(replaced, tool.spec.input_model.model_construct())

    # -- status and health ---------------------------------------------------------------------

    def health_checks(self, plugin: str | None = None) -> list[HealthCheck]:
        """The registered health checks (of one plugin, or all)."""
        return [c for p, c in self.health.checks() if plugin is None or p == plugin]

    async def check_health(
        self, *, plugin: str | None = None, use_cache: bool = True
    ) -> list[HealthResult]:
        """Run the health checks (of one plugin, or all) concurrently, each under its timeout;
        results younger than the cache time are reused unless ``use_cache`` is false."""
        return await self.health.run(plugin=plugin, use_cache=use_cache)

    def backend_settings(self, backend: Backend) -> Any:
        """The settings a declared backend was built with."""
        return self.backends.settings(backend)

    async def status(self, *, check_health: bool = True) -> dict[str, Any]:
        results = await self.check_health() if check_health else []
        by_plugin: dict[str, list[dict[str, Any]]] = {}
        for r in results:
            for name in (r.plugin, *r.shared_with):
                by_plugin.setdefault(name, []).append(r.as_dict())
        visible = {t.name for t in self.visible_tools()}
        plugins = []
        for rec in self.plugins:
            d = rec.as_dict()
            d["visible_tool_count"] = len([t for t in rec.tools if t in visible])
            d["health"] = by_plugin.get(rec.name, [])
            plugins.append(d)
        return {
            "gateway": {
                "version": __version__,
                "read_only": self.config.read_only,
                "config": self.config.source,
                "uptime_seconds": round(time.time() - self.started_at, 1),
                "tool_count": len(visible),
            },
            "plugins": plugins,
            "backends": self.health.breaker_states(),
            "problems": self._problems(results, plugins),
        }

    def _problems(self, results: list[HealthResult], plugins: list[dict[str, Any]]) -> list[str]:
        """What needs the operator's attention, each said once: failed plugins, withheld and
        unoffered tools, failing checks, variables the client did not have."""
        # An unconfigured backend whose tools are not offered is said once, by the plugins.
        unoffered = {
            t.spec.backend_name
            for p in self.plugins
            for name in p.not_offered
            if (t := self.registry.get(name)) is not None
        }
        failing = [
            r
            for r in results
            if not r.ok and not (r.status == "unconfigured" and r.backend in unoffered)
        ]
        problems = (
            [
                f"{p.label}: {p.state.value}: {p.reason}"
                for p in self.plugins
                if p.state is PluginState.FAILED
            ]
            + [
                f"{p.label}: tool {tool} withheld: {why}"
                for p in self.plugins
                for tool, why in p.withheld.items()
            ]
            + [f"{p.label}: {note}" for p in self.plugins for note in p.notes]
            + [
                f"plugin {p['name']}: {len(g['tools'])} tool(s) not offered: {g['reason']}"
                for p in plugins
                for g in p.get("not_offered", [])
            ]
            + [f"{r.plugin}/{r.name}: {r.status}: {r.detail or ''}".rstrip(": ") for r in failing]
        )
        from .deployment import read_variables  # for this report only, not for a start

        read = read_variables(self)
        for variable, name in self.config.unexpanded.items():
            line = self.sanitizer(unexpanded_problem(variable, name))
            if variable in read and not any(line in p for p in problems):  # said once
                problems.append(line)
        return problems


class _StatusInput(BaseModel):
    model_config = ConfigDict(extra="forbid")
    check_health: bool = Field(
        True, description="Run the plugins' health checks (cached for a few seconds)."
    )


class _StatusPlugin:
    """The built-in plugin; it cannot be disabled and provides ``gateway_status``."""

    __version__ = __version__

    def __init__(self, gateway: Gateway) -> None:
        self._gateway = gateway

    @hookimpl
    def register_tools(self, register: Any, plugin: PluginContext[Any]) -> None:
        gateway = self._gateway

        async def gateway_status(args: _StatusInput, ctx: ToolContext[Any]) -> dict[str, Any]:
            status = await gateway.status(check_health=args.check_health)
            # Here, not in status(): /readyz shows the same status to no caller in particular.
            return {**status, "caller": current_caller().as_status()}

        register(
            ToolSpec(
                name="gateway_status",
                title="Gateway status",
                description=(
                    "Report the gateway's plugins (version, state, tool count, why any failed "
                    "or is disabled), backend health and circuit breakers. Call this when a "
                    "tool is missing or fails with BACKEND_UNAVAILABLE."
                ),
                input_model=_StatusInput,
                handler=gateway_status,
                tier=Tier.READ,
            )
        )

    @hookimpl
    def register_health_checks(self, register: Any) -> None:
        """The services replicas share, when configured: reported by ``/readyz`` and
        ``mcp-gateway health``, not required (reads still work while they are down, and a
        readiness probe failing on every replica at once would stop those too)."""
        database = self._gateway.audit.database
        if database is not None:
            register(HealthCheck(name="audit_database", check=database.check, required=False))
        limiter = self._gateway.limiter
        if limiter is not None and limiter.store is not None:
            register(HealthCheck(name="limit_store", check=limiter.store.check, required=False))


def build_gateway(
    config: GatewayConfig | None = None,
    *,
    objects: dict[str, object] | None = None,
    entry_points: bool = True,
    telemetry: TelemetryFactory | None = None,
) -> Gateway:
    """Load the installed plugins (``entry_points``) and/or plugin ``objects`` by name."""
    config = config or load_config()
    sources = entry_point_sources() if entry_points else []
    if objects:
        sources = sources + object_sources(objects)
    return Gateway(config, sources, telemetry=telemetry)
