"""Plugin loader: entry points → pluggy, one plugin at a time, every step isolated.

The loader never calls a hook across all plugins at once. It iterates the entry points
itself and, per plugin, loads it, registers it, checks its hook names, builds its settings,
collects its tools and checks; a failure at any step withdraws that plugin alone and records
why. Nothing here does network I/O.
"""

from __future__ import annotations

import contextlib
import enum
import inspect
import logging
import signal
import sys
import threading
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field, replace
from types import FrameType
from typing import Any

import pluggy
from pydantic import BaseModel

from . import hookspecs
from .backends import BackendConflict, BackendHub
from .config import (
    SERVERS_PLUGIN,
    ConfigError,
    GatewayConfig,
    same_distribution,
    secret_values,
)
from .entrypoints import installed_plugins
from .errors import Sanitizer
from .health import HealthMonitor
from .lifecycle import plugin_fault
from .prompts import PromptRegistry, RegisteredPrompt, build_prompt
from .registry import RegisteredTool, RegistrationError, Registry, build_tool
from .resources import RegisteredResource, ResourceRegistry, build_resource
from .schemacache import SchemaCache, cache_folder, deferred_models
from .spec import Backend, HealthCheck, PluginContext, ServerSpec, ToolSpec

HOOK_NAMES = (
    "plugin_settings",
    "register_tools",
    "register_prompts",
    "register_resources",
    "register_health_checks",
    "register_servers",
    "open_resources",
    "close_resources",
)

log = logging.getLogger("gateway.plugins")
#: The distribution named ``mcp-plugin-gateway-<name>`` owns the plugin name ``<name>``.
OWNER_PREFIX = "mcp-plugin-gateway-"
#: This project's distributions: what ``isolate = "third-party"`` (the default) runs in
#: process. Any other distribution's plugin runs in a worker of its own.
FIRST_PARTY = frozenset(
    {
        "mcp-plugin-gateway",
        *(
            OWNER_PREFIX + name
            for name in (
                "citations",
                "gitea",
                "orchestrator",
                "queue",
                "scrape",
                "servers",
                "gitea-testing",
                "orchestrator-testing",
                "conformance-testing",
                "bookmarks",
                "notes",
            )
        ),
    }
)


def first_party(distribution: str) -> bool:
    """Is ``distribution`` one of this project's (:data:`FIRST_PARTY`)?"""
    return any(same_distribution(distribution, d) for d in FIRST_PARTY)


def _loaded(module: object) -> Callable[[], object]:
    return lambda: module


#: The signal for blocking code fires a little after the cooperative timeout, so a hook that
#: awaits gets the ordinary TimeoutError.
_BLOCKING_SLACK = 0.1


class PluginState(enum.StrEnum):
    LOADED = "loaded"
    FAILED = "failed"
    DISABLED = "disabled"


@dataclass
class PluginRecord:
    name: str
    version: str
    state: PluginState
    reason: str | None = None
    source: str = "entry point"
    tools: list[str] = field(default_factory=list)
    prompts: list[str] = field(default_factory=list)
    checks: list[str] = field(default_factory=list)
    #: the URIs (and URI templates) of its resources
    resources: list[str] = field(default_factory=list)
    summary: str = ""
    context: PluginContext[Any] | None = None
    module: object | None = None
    #: tools of this plugin a name collision keeps from serving, and why
    withheld: dict[str, str] = field(default_factory=dict)
    #: tools of this plugin not offered because their backend is not configured, and why
    not_offered: dict[str, str] = field(default_factory=dict)
    #: its settings (its table or variables) do not fit: the one line naming the setting.
    #: A configuration mistake, which stops a command that serves or calls (cli.py).
    settings_mistake: str | None = None
    #: the MCP servers this plugin mounts (``register_servers``)
    servers: list[ServerSpec] = field(default_factory=list)
    #: tools the source itself keeps back (a mounted server's definition that changed since
    #: it was approved), and why: reported with the withheld ones
    held: dict[str, str] = field(default_factory=dict)
    #: what the operator should know that keeps nothing from serving (a description Claude
    #: Code will cut)
    notes: list[str] = field(default_factory=list)
    #: where its code runs: ``process`` (the gateway's), ``worker`` (a process of its own,
    #: ``isolate``) or ``server`` (a mounted MCP server)
    runs: str = "process"
    #: a plugin in a worker: per field of its settings and its REST backends', the variables
    #: it is read from (first set one wins) and whether it is a secret, as far as the gateway
    #: hands them over. In process they are read off its settings models (deployment.py).
    variables: list[tuple[list[str], bool]] | None = None

    @property
    def label(self) -> str:
        """What messages call it: ``plugin queue`` (a mounted server: ``MCP server fs``)."""
        return f"plugin {self.name}"

    def as_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "name": self.name,
            "version": self.version,
            "state": self.state.value,
            "runs": self.runs,
            "reason": self.reason,
            "tool_count": len(self.tools),
            "tools": list(self.tools),
            "prompts": list(self.prompts),
        }
        if self.resources:
            out["resources"] = list(self.resources)
        if self.withheld:
            out["withheld_tools"] = dict(self.withheld)
        if self.notes:
            out["notes"] = list(self.notes)
        if self.not_offered:
            reasons = list(self.not_offered.values())
            out["not_offered"] = [
                {"reason": why, "tools": [t for t, w in self.not_offered.items() if w == why]}
                for why in dict.fromkeys(reasons)
            ]
        return out


@dataclass(frozen=True)
class PluginSource:
    """Something to load: an entry point, or an object already in hand (tests, built-ins)."""

    name: str
    version: str
    load: Callable[[], object]
    origin: str
    summary: str = ""  # one line for the model: the distribution's Summary
    distribution: str = ""  # the installed distribution's name, for entry points
    module: str = ""  # the module an entry point names (its schemas can be cached)


def entry_point_sources(group: str = hookspecs.ENTRY_POINT_GROUP) -> list[PluginSource]:
    return [
        PluginSource(
            p.name,
            p.version,
            p.load,
            f"entry point from {p.distribution}",
            p.summary,
            p.distribution,
            p.module,
        )
        for p in installed_plugins(group)
    ]


def object_sources(objects: dict[str, object]) -> list[PluginSource]:
    def summary(obj: object) -> str:
        doc = (getattr(obj, "__doc__", None) or "").strip()
        return doc.splitlines()[0] if doc else ""

    return [
        PluginSource(
            name,
            str(getattr(obj, "__version__", "0")),
            _loaded(obj),
            "registered object",
            summary(obj),
        )
        for name, obj in objects.items()
    ]


def new_plugin_manager() -> pluggy.PluginManager:
    pm = pluggy.PluginManager(hookspecs.PROJECT)
    pm.add_hookspecs(hookspecs)
    return pm


def call_hook(pm: pluggy.PluginManager, hook_name: str, target: object, **kwargs: Any) -> list[Any]:
    """Call one hook of one plugin only (its implementations, with the arguments they take)."""
    caller = getattr(pm.hook, hook_name)
    results = []
    for impl in caller.get_hookimpls():
        if impl.plugin is not target:
            continue
        results.append(impl.function(*[kwargs[a] for a in impl.argnames]))
    return results


async def maybe_await(value: Any) -> Any:
    if inspect.isawaitable(value):
        return await value
    return value


@dataclass(eq=False)  # compared by identity: no __eq__ to compile at start
class _Declared:
    """What one plugin's register hooks handed over, built and checked."""

    tools: list[RegisteredTool]
    prompts: list[RegisteredPrompt]
    resources: list[RegisteredResource]
    checks: list[HealthCheck]
    servers: list[ServerSpec]


class PluginLoader:
    def __init__(
        self,
        config: GatewayConfig,
        registry: Registry,
        health: HealthMonitor,
        sanitizer: Sanitizer,
        backends: BackendHub | None = None,
        prompts: PromptRegistry | None = None,
        resources: ResourceRegistry | None = None,
    ) -> None:
        self.config = config
        self.registry = registry
        self.health = health
        self.sanitizer = sanitizer
        self.backends = backends or BackendHub(
            config.plugin_settings, sanitizer, unexpanded=config.unexpanded
        )
        self.prompts = prompts or PromptRegistry()
        self.resources = resources or ResourceRegistry()
        # One order of the sources for every listing and report: the order they are loaded or
        # mounted in (see keep), not the order their workers and servers happen to answer in.
        self.prompts.order = self.resources.order = self.health.order = self.registry.order
        self.pm = new_plugin_manager()
        self.records: list[PluginRecord] = []
        folder = cache_folder(config)
        self.schema_cache = SchemaCache(folder) if folder is not None else None
        #: Takes a plugin that runs in a worker of its own instead of being imported here, and
        #: returns its record (the gateway starts the worker: :mod:`gateway.isolation`).
        #: ``None``: every plugin is imported here.
        self.isolate: Callable[[PluginSource], PluginRecord] | None = None

    def isolated(self, src: PluginSource) -> bool:
        """Does ``src`` run in a worker of its own (``isolate``)? Only an installed entry
        point can (a worker finds it by name); the plugin that hands the core its MCP
        servers' configuration never does."""
        setting = self.config.isolate
        if self.isolate is None or not src.distribution or src.name == SERVERS_PLUGIN:
            return False
        if setting == "all":
            return True
        if setting == "third-party":
            return not first_party(src.distribution)
        return isinstance(setting, list) and src.name in setting

    def _selected(self, name: str) -> str | None:
        cfg = self.config
        if cfg.plugins and name not in cfg.plugins:
            return "not in the allow-list (MCP_GATEWAY_PLUGINS / [gateway] plugins)"
        if name in cfg.disable_plugins:
            return "disabled by MCP_GATEWAY_DISABLE_PLUGINS / [gateway] disable_plugins"
        return None

    def load_all(
        self, sources: Iterable[PluginSource], *, builtin: Iterable[PluginSource] = ()
    ) -> None:
        builtin_names = set()
        for src in builtin:
            self._load_one(src, selectable=False)
            builtin_names.add(src.name)
        groups: dict[str, list[PluginSource]] = {}
        for src in sources:
            groups.setdefault(src.name, []).append(src)
        plan: list[PluginSource] = []
        for name, group in groups.items():
            if name in builtin_names:
                for src in group:
                    self._skip(src, PluginState.FAILED, "the name belongs to the built-in plugin")
                continue
            chosen = group
            if self._selected(name) is None and len(group) > 1:
                skipped = self._not_chosen(name, group)
                for src, why in skipped:
                    self._skip(src, PluginState.DISABLED, why)
                dropped = {id(src) for src, _ in skipped}
                chosen = [src for src in group if id(src) not in dropped]
                if len(chosen) > 1:
                    chosen = self._import_contenders(name, chosen)
            plan += chosen
        # Workers first: they start while the plugins that run here are imported.
        workers = {
            id(src): self.isolate(src)
            for src in plan
            if self.isolate is not None and self._selected(src.name) is None and self.isolated(src)
        }
        for src in plan:
            record = workers.get(id(src))
            if record is not None:
                self.keep(record)
            else:
                self._load_one(src, selectable=True)
        self.refresh_withheld()
        self.refresh_offered()
        if self.schema_cache is not None:
            self.schema_cache.save()

    def _not_chosen(self, name: str, group: list[PluginSource]) -> list[tuple[PluginSource, str]]:
        """Entry points of one plugin name that are not loaded, and why: ``providers`` picks a
        distribution, else the distribution named ``mcp-plugin-gateway-<name>`` owns the name
        (so a third-party plugin never replaces a first-party one unless the operator says)."""
        wanted = self.config.providers.get(name)
        if wanted:
            picked = [s for s in group if same_distribution(s.distribution, wanted)]
            if not picked:
                return [
                    (
                        s,
                        f"providers.{name} = {wanted!r} names no distribution that provides "
                        f"plugin {name!r}",
                    )
                    for s in group
                ]
            why = f"not chosen: providers.{name} = {wanted!r}"
            return [(s, why) for s in group if s not in picked]
        owners = [s for s in group if same_distribution(s.distribution, OWNER_PREFIX + name)]
        if len(owners) != 1:
            return []
        owner = owners[0]
        return [
            (
                s,
                f"plugin name {name!r} belongs to {owner.distribution}; set providers.{name} = "
                f"{s.distribution or s.origin!r} to use this one instead",
            )
            for s in group
            if s is not owner
        ]

    def _import_contenders(self, name: str, group: list[PluginSource]) -> list[PluginSource]:
        """Several distributions provide ``name`` and none owns it: those that fail to import do
        not hold the name; if more than one imports, none is loaded (neither silently wins)."""
        imported: list[PluginSource] = []
        for src in group:
            if self.isolated(src):  # not imported here: it counts as one that would import
                imported.append(src)
                continue
            try:
                with time_limit(self.config.load_timeout):
                    module = src.load()
            except BaseException as exc:
                if not plugin_fault(exc):
                    raise
                self._skip(
                    src, PluginState.FAILED, f"failed to import: {type(exc).__name__}: {exc}"
                )
                continue
            imported.append(replace(src, load=_loaded(module)))
        if len(imported) < 2:
            return imported
        names = ", ".join(s.distribution or s.origin for s in imported)
        for src in imported:
            self._skip(
                src,
                PluginState.FAILED,
                f"plugin name {name!r} is provided by several distributions ({names}), so none "
                f"is loaded; choose one with providers.{name} = '<distribution>' "
                f"(MCP_GATEWAY_PROVIDERS={name}=<distribution>)",
            )
        return []

    def keep(self, rec: PluginRecord) -> None:
        """A source's record, in the order its tools, prompts and resources are listed in."""
        self.records.append(rec)
        self.registry.order.setdefault(rec.name, len(self.registry.order))

    def _skip(self, src: PluginSource, state: PluginState, reason: str) -> None:
        rec = PluginRecord(src.name, src.version, state, self.sanitizer(reason), source=src.origin)
        rec.summary = src.summary
        self.keep(rec)
        log.error("plugin %s (%s) not loaded: %s", src.name, src.origin, rec.reason)

    def refresh_withheld(self) -> None:
        """Record, per loaded plugin, the tools a name collision keeps from serving."""
        for rec in self.records:
            rec.withheld = (
                {
                    **self.registry.withheld(rec.name),
                    **self.resources.withheld(rec.name),
                    **self.prompts.withheld(rec.name),
                    **rec.held,
                }
                if rec.state is PluginState.LOADED
                else {}
            )
            for tool, why in rec.withheld.items():
                log.error("%s: tool %s withheld: %s", rec.label, tool, why)

    def refresh_offered(self) -> None:
        """Record, per loaded plugin, the tools whose backend is not configured: they are not
        offered (listed, named in prompts and instructions) unless the deployment sets
        ``offer_unconfigured_tools``. Called by name they still answer why."""
        unconfigured = {
            check.backend: check.not_configured
            for _, check in self.health.checks()
            if check.backend and check.not_configured
        }
        for rec in self.records:
            rec.not_offered = {}
            if rec.state is not PluginState.LOADED or self.config.offer_unconfigured_tools:
                continue
            for name in rec.tools:
                tool = self.registry.get(name)
                if tool is None or tool.plugin.name != rec.name:
                    continue  # withheld: reported as such
                reason = unconfigured.get(tool.spec.backend_name or "")
                if reason:
                    rec.not_offered[name] = self.sanitizer(reason)

    def _fail(self, rec: PluginRecord, reason: str, *, level: int = logging.ERROR) -> None:
        rec.state = PluginState.FAILED
        rec.reason = self.sanitizer(reason)
        rec.tools, rec.checks, rec.prompts, rec.resources = [], [], [], []
        self.registry.remove_plugin(rec.name)
        self.prompts.remove_plugin(rec.name)
        self.resources.remove_plugin(rec.name)
        self.health.remove_plugin(rec.name)
        # Clients are opened on first use only, never during loading: nothing to close here.
        self.backends.remove_plugin(rec.name)
        if rec.module is not None and self.pm.is_registered(rec.module):
            self.pm.unregister(rec.module)
        log.log(level, "plugin %s %s skipped: %s", rec.name, rec.version, rec.reason)

    def _load_one(self, src: PluginSource, *, selectable: bool) -> None:
        rec = PluginRecord(src.name, src.version, PluginState.LOADED, source=src.origin)
        rec.summary = src.summary
        self.keep(rec)
        if selectable:
            why = self._selected(src.name)
            if why:
                rec.state, rec.reason = PluginState.DISABLED, why
                rec.runs = "worker" if self.isolated(src) else "process"
                return
        steps: list[str] = ["import"]
        try:
            with time_limit(self.config.load_timeout):
                self._load_steps(src, rec, steps.append)
        except HookOverrun:
            what = "import" if steps[-1] == "import" else f"hook {steps[-1]}"
            self._fail(
                rec,
                f"{what} did not finish within {self.config.load_timeout:g} s "
                "(load_timeout); it blocks start-up",
            )
        except RegistrationError as exc:
            self._fail(rec, f"invalid tool declaration: {exc}")
        except BackendConflict as exc:
            self._fail(rec, str(exc))
        except ConfigError as exc:
            # A configuration mistake: the command that built this gateway reports it as one
            # (cli.py), on one line, so the log does not say it again.
            self._fail(rec, f"invalid settings: {exc}", level=logging.DEBUG)
            rec.settings_mistake = str(exc)  # worded to hold no secret (config.plugin_settings)
        except _PluginInvalid as exc:
            self._fail(rec, str(exc))
        except BaseException as exc:
            # KeyboardInterrupt, CancelledError, GeneratorExit, an exception group or a
            # BaseException of the plugin's own: the plugin failed, the process goes on.
            if not plugin_fault(exc):
                raise
            step = steps[-1]
            what = {"import": "failed to import", "register": "cannot be registered"}.get(
                step, f"raised in hook {step}"
            )
            self._fail(rec, f"{what}: {type(exc).__name__}: {exc}")

    def _declare_backends(self, plugin: str, tools: list[RegisteredTool]) -> list[HealthCheck]:
        """The backends the tools name as objects: settings built (once per backend name, shared with
        other plugins that use it), secrets made known, one shared health check each."""
        backends = {
            t.spec.backend.name: t.spec.backend
            for t in tools
            if isinstance(t.spec.backend, Backend)
        }
        checks = []
        for backend in backends.values():
            self.backends.declare(backend, plugin)
            checks.append(self.backends.health_check(backend))
        return checks

    def _load_steps(
        self, src: PluginSource, rec: PluginRecord, step: Callable[[str], None]
    ) -> None:
        """Import one plugin and run its load-time hooks; ``step`` is told what runs now.
        Runs on the calling thread under :func:`time_limit`, so blocking code is stopped."""
        step("import")
        cached = self.schema_cache is not None and bool(src.module)
        with deferred_models() if cached else contextlib.nullcontext():
            module = src.load()
        step("register")
        rec.module = module
        self.pm.register(module, name=src.name)
        self._check_hook_names(module)
        step("plugin_settings")
        rec.context = ctx = self._context(module, src)
        declared = self._declared(module, ctx, src, step)
        step("backend settings")
        declared.checks += self._declare_backends(src.name, declared.tools)
        for t in declared.tools:
            name = t.spec.backend_name
            if name and not any(c.backend == name for c in declared.checks):
                raise RegistrationError(
                    f"tool {t.name!r} depends on backend {name!r}, "
                    "but no health check declares that backend"
                )
        self._add(src.name, rec, declared)

    def _context(self, module: object, src: PluginSource) -> PluginContext[Any]:
        """The plugin's settings (its secrets made known) in the context its hooks get."""
        settings = self._settings(module, src.name)
        self.sanitizer.add_secrets(secret_values(settings))
        return PluginContext(
            name=src.name,
            version=src.version,
            settings=settings,
            data_roots=tuple(self.config.data_roots),
            logger=logging.getLogger(f"gateway.plugin.{src.name}"),
            read_only=self.config.read_only,
            sanitizer=self.sanitizer,
            backends=self.backends,
            _updates=self.resources.subscriptions.changed,
        )

    def _declared(
        self,
        module: object,
        ctx: PluginContext[Any],
        src: PluginSource,
        step: Callable[[str], None],
    ) -> _Declared:
        """What the plugin's register hooks hand over, each checked as it is built."""
        step("register_tools")
        specs: list[ToolSpec] = []
        call_hook(self.pm, "register_tools", module, register=specs.append, plugin=ctx)
        schemas = self.schema_cache if src.module else None
        tools: list[RegisteredTool] = [build_tool(s, ctx, schemas) for s in specs]
        step("register_prompts")
        prompt_specs: list[object] = []
        call_hook(self.pm, "register_prompts", module, register=prompt_specs.append, plugin=ctx)
        try:
            prompts = [build_prompt(p, ctx) for p in prompt_specs]
        except ValueError as exc:
            raise _PluginInvalid(f"invalid prompt declaration: {exc}") from None
        step("register_resources")
        resource_specs: list[object] = []
        call_hook(self.pm, "register_resources", module, register=resource_specs.append, plugin=ctx)
        try:
            resources = [build_resource(r, ctx) for r in resource_specs]
        except ValueError as exc:
            raise _PluginInvalid(f"invalid resource declaration: {exc}") from None
        step("register_health_checks")
        checks: list[HealthCheck] = []
        call_hook(self.pm, "register_health_checks", module, register=checks.append, plugin=ctx)
        step("register_servers")
        servers: list[object] = []
        call_hook(self.pm, "register_servers", module, register=servers.append, plugin=ctx)
        for server in servers:
            if not isinstance(server, ServerSpec):
                raise _PluginInvalid(
                    f"register_servers: register() takes a ServerSpec, got {type(server).__name__}"
                )
        return _Declared(
            tools, prompts, resources, checks, [s for s in servers if isinstance(s, ServerSpec)]
        )

    def _add(self, plugin: str, rec: PluginRecord, declared: _Declared) -> None:
        """Into the registries, all or nothing: a prompt or resource refused withdraws the
        plugin's tools (and prompts) again."""
        self.registry.add_all(declared.tools)
        try:
            self.prompts.add_all(declared.prompts)
        except ValueError as exc:
            self.registry.remove_plugin(plugin)
            raise _PluginInvalid(f"invalid prompt declaration: {exc}") from None
        try:
            self.resources.add_all(declared.resources)
        except ValueError as exc:
            self.registry.remove_plugin(plugin)
            self.prompts.remove_plugin(plugin)
            raise _PluginInvalid(f"invalid resource declaration: {exc}") from None
        self.health.add_all(plugin, declared.checks)
        rec.tools = [t.name for t in declared.tools]
        rec.prompts = [p.name for p in declared.prompts]
        rec.resources = [r.key for r in declared.resources]
        rec.checks = [c.name for c in declared.checks]
        rec.servers = declared.servers

    def _check_hook_names(self, module: object) -> None:
        # A misspelt hook (``register_tool``) would otherwise be silently ignored.
        try:
            self.pm.check_pending()
        except pluggy.PluginValidationError as exc:
            raise _PluginInvalid(f"unknown hook: {exc}") from None
        for hook in HOOK_NAMES:
            fn = getattr(module, hook, None)
            if callable(fn) and not hasattr(fn, f"{hookspecs.PROJECT}_impl"):
                log.warning("plugin function %s looks like a hook but lacks @hookimpl", hook)

    def _settings(self, module: object, name: str) -> Any:
        models = call_hook(self.pm, "plugin_settings", module)
        model = next((m for m in models if m is not None), None)
        if model is None:
            return None
        if not (isinstance(model, type) and issubclass(model, BaseModel)):
            raise _PluginInvalid("plugin_settings must return a pydantic BaseModel subclass")
        return self.config.plugin_settings(model, name)

    async def open_resources(self) -> None:
        """Run ``open_resources`` per loaded plugin under a timeout; failures skip the plugin."""
        import anyio

        for rec in self.records:
            if rec.state is not PluginState.LOADED or rec.module is None:
                continue
            limit = self.config.resource_timeout
            try:
                # fail_after stops a hook that awaits; time_limit one that blocks the loop.
                with anyio.fail_after(limit), time_limit(limit + _BLOCKING_SLACK):
                    for r in call_hook(self.pm, "open_resources", rec.module, plugin=rec.context):
                        await maybe_await(r)
            except (TimeoutError, HookOverrun):
                await self._close_one(rec)
                self._fail(rec, f"open_resources did not finish within {limit:g} s")
            except BaseException as exc:
                if not plugin_fault(exc):
                    raise
                await self._close_one(rec)
                self._fail(rec, f"raised in hook open_resources: {type(exc).__name__}: {exc}")
        self.refresh_withheld()  # a withdrawn plugin may leave a contested name to another
        self.refresh_offered()

    async def _close_one(self, rec: PluginRecord) -> None:
        import anyio

        if rec.module is None or not self.pm.is_registered(rec.module):
            return
        limit = self.config.resource_timeout
        try:
            with (
                anyio.move_on_after(limit, shield=True),
                time_limit(limit + _BLOCKING_SLACK),
            ):
                for r in call_hook(self.pm, "close_resources", rec.module, plugin=rec.context):
                    await maybe_await(r)
        except HookOverrun:
            log.error("plugin %s: close_resources did not finish within %g s", rec.name, limit)
        except BaseException as exc:  # shielded: only the plugin can have raised it
            log.error(
                "plugin %s: close_resources failed: %s: %s",
                rec.name,
                type(exc).__name__,
                self.sanitizer(str(exc)),
            )

    async def close_resources(self) -> None:
        for rec in reversed(self.records):
            if rec.state is PluginState.LOADED:
                await self._close_one(rec)


class _PluginInvalid(Exception):
    pass


# A time limit that also stops *blocking* plugin code at load time.
#
# ``anyio.fail_after`` only stops code that awaits; a hook that calls ``time.sleep()`` or a
# blocking client never gives it the chance. Running hooks in a worker thread would stop the
# wait but not the work, and what a hook creates must live where the server uses it: an
# ``httpx.AsyncClient`` or an aiosqlite connection from ``open_resources`` belongs to the
# server's event loop, a ``sqlite3`` connection to its thread. So hooks keep running on the main
# thread, in the server's loop, and a timer signal (``SIGALRM``) interrupts them there when they
# overrun: the handler raises :class:`HookOverrun` into the hook's own frames.
#
# The handler only raises while the guarded code is on the stack. An async hook that is merely
# suspended (awaiting I/O) is left to ``anyio.fail_after``; raising then would hit the event loop
# itself. Where signals cannot be used (not the main thread, no ``SIGALRM`` on Windows) the limit
# is not enforced for blocking code, only for code that awaits.

#: After raising once, raise again at this interval in case the hook swallowed it.
_AGAIN = 0.5
#: While the hook is suspended (awaiting), look again this often.
_POLL = 0.05


class HookOverrun(BaseException):
    """Raised into a hook that overran its limit. A ``BaseException`` so that a hook's own
    ``except Exception`` cannot swallow it."""


def enforceable() -> bool:
    """Can blocking code be interrupted here (POSIX, main thread)?"""
    return hasattr(signal, "setitimer") and threading.current_thread() is threading.main_thread()


def _on_stack(target: FrameType, frame: FrameType | None) -> bool:
    while frame is not None:
        if frame is target:
            return True
        frame = frame.f_back
    return False


@contextmanager
def time_limit(seconds: float) -> Iterator[None]:
    """Interrupt the code run inside this block (by the caller's frame) after ``seconds``.

    Use it around the call of a hook, in the function that calls it; in an ``async def`` the
    block's frame is the coroutine's, which is on the stack exactly while the hook runs.
    """
    if not enforceable() or seconds <= 0:
        yield
        return
    guarded = sys._getframe(2)  # the caller's frame (1 is contextmanager's __enter__)

    def on_alarm(signum: int, frame: FrameType | None) -> None:
        if _on_stack(guarded, frame):
            signal.setitimer(signal.ITIMER_REAL, _AGAIN)
            raise HookOverrun
        signal.setitimer(signal.ITIMER_REAL, _POLL)

    previous: Any = signal.signal(signal.SIGALRM, on_alarm)
    signal.setitimer(signal.ITIMER_REAL, seconds)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)
