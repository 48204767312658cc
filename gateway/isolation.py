"""Isolated plugins: each in a worker process of its own, mounted like an MCP server.

A plugin the deployment isolates (``isolate``: a list of names, ``third-party`` by default, or
``all``) is not imported by the gateway. The loader hands it to :meth:`Workers.add`, which
starts ``python -m gateway.worker NAME`` at once (so the worker imports its plugin while the
gateway starts) and mounts it through the machinery of mounted servers
(:class:`~gateway.upstream.Upstream`, :class:`~gateway.mounts.Mounts`): restarted with backoff
when it exits, its tools answering ``BACKEND_UNAVAILABLE`` meanwhile. What differs from a
mounted server:

- **offered exactly as in process.** The worker loads the plugin with the gateway's loader and
  lists each tool in the form the registry derives (schemas, ``MUTATION:`` paragraph,
  annotations, ``_meta``); those are published as listed, byte for byte, with the tiers they
  declare (read only where ``readOnlyHint`` is true: a worker is trusted no more than a
  mounted server). Its health checks come with its load, each tool's timeout and backend
  with its listing. Its prompts, resources, templates and completions are mounted as a
  mounted server's are (:func:`~gateway.mounted.mount_extras`), with what only a plugin has
  (a prompt's ``requires`` and ``free_text``, rendered with the tools offered). What a call
  returns (JSON shaped in the worker, content, an input-required result) is checked here as
  a mounted server's answer is, then cleaned and bounded by the runner as a plugin's in
  process; the client's answers go back in the request made again, as at 2026-07-28. Its
  definitions are not pinned: they are installed code, not a server's word.
- **its own settings only.** The worker asks for the tables and variables its plugin's
  settings (and REST backends) declare; it is handed those, except the gateway's own
  (its settings' ``MCP_GATEWAY_*``, ``[auth]``'s, ``[telemetry]``'s and ``OTEL_*``, and any
  variable holding the token) and, for a plugin not of this project's distributions, a table
  of another installed plugin or of a backend a plugin in process uses, and a variable another
  plugin in process declares (this project's plugins share a backend by design). Its
  process starts with ``PATH``, ``HOME``, the locale, the temporary and XDG folders and
  Python's ``PYTHON*`` variables, nothing else of the gateway's environment.
- **faults cost only the plugin.** Policy, validation, breakers, timeouts, sanitizing, audit
  and telemetry run here, in the gateway. A call the worker does not give up once it was
  cancelled (its timeout, the client) ends the worker: ``GIVE_UP_SECONDS`` later, it must say
  the call stopped; one whose event loop is blocked cannot even answer. A worker whose memory
  grows past ``max_worker_memory_mb`` is started again once no call is running. A plugin
  that fails to load (an import error, a hook that raises, ``os._exit`` while loading) is
  reported as in process, and its worker is not started again.
"""

from __future__ import annotations

import asyncio
import json
import logging
import os
import select
import sys
import threading
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from functools import partial
from typing import TYPE_CHECKING, Any, ClassVar

import anyio
from pydantic import BaseModel

from .config import GatewayConfig, core_variable, field_env_names
from .errors import ErrorCode, GatewayError, Sanitizer, secret_name
from .health import HealthMonitor
from .mounts import (
    MountedTool,
    Mounts,
    Screened,
    ServerRecord,
    UpstreamArguments,
    mutation_paragraph,
)
from .pipeline import McpResult, Shaped
from .plugins import PluginLoader, PluginRecord, PluginSource, PluginState, first_party
from .prompts import PromptRegistry
from .registry import Registry, compile_schema
from .spec import (
    TOOL_NAME,
    HealthCheck,
    Mutation,
    NotInitialized,
    PluginContext,
    ServerSpec,
    Tier,
    ToolContext,
    ToolSpec,
)
from .upstream import (
    Abandon,
    ServerProcess,
    State,
    Upstream,
    server_environment,
    start_process,
)
from .worker import CALLS, HEALTH, LOAD, PRIVATE

if TYPE_CHECKING:
    import subprocess

log = logging.getLogger("gateway.isolation")

#: Seconds a worker has to end a call once it was cancelled, and then to say so.
GIVE_UP_SECONDS = 2.0
#: Seconds a worker may take to start, on top of its plugin's load and open times.
START_SECONDS = 15.0
#: What of the gateway's environment a worker starts with besides :data:`INHERITED`: the
#: temporary and XDG folders, and Python's own variables (where its packages are); see
#: :data:`gateway.upstream.INHERITED` for what every stdio process gets.
_WORKER_ENV = ("TMPDIR", "TEMP", "TMP")
_WORKER_PREFIXES = ("XDG_", "PYTHON")
_LEVELS = {name: getattr(logging, name) for name in ("DEBUG", "INFO", "WARNING", "ERROR")}
_LEVELS["CRITICAL"] = logging.CRITICAL


def _said(error: Any) -> GatewayError | None:
    """An error a worker answered with: the plugin's own, as the gateway's pipeline takes it
    (its code, message and details, cleaned by the pipeline as any), when it says one."""
    data = error.data
    said = data.get(PRIVATE) if isinstance(data, dict) else None
    if not isinstance(said, dict) or said.get("code") not in ErrorCode.__members__:
        return None
    details = said.get("details")
    retryable = said.get("retryable")
    return WorkerSaid(
        ErrorCode(said["code"]),
        str(said.get("message") or ""),
        retryable=retryable if isinstance(retryable, bool) else None,
        details=details if isinstance(details, dict) else None,
        backend_down=said.get("backend_down") is True,
    )


def _without_private(result: dict[str, Any]) -> dict[str, Any]:
    meta = result.get("_meta")
    out = {k: v for k, v in result.items() if k != "_meta"}
    rest = {k: v for k, v in meta.items() if k != PRIVATE} if isinstance(meta, dict) else {}
    return {**out, "_meta": rest} if rest else out


def worker_environment(env: dict[str, str]) -> dict[str, str]:
    """What a worker's process starts with, of the gateway's environment ``env`` (on top of
    :data:`~gateway.upstream.INHERITED`, which every stdio process gets)."""
    return {
        k: v
        for k, v in env.items()
        if k in _WORKER_ENV or (k.startswith(_WORKER_PREFIXES) and k != "PYTHONSTARTUP")
    }


class FirstLoad:
    """A worker's first :data:`~gateway.worker.LOAD` exchange, run by a thread before the
    gateway's event loop runs.

    A worker is started while the plugins load (:meth:`Workers.add`) and is ready long before
    the loop runs: most of what the gateway still does then is importing the SDK. Handing it
    its settings meanwhile (:meth:`Workers.begin`, once every plugin in process loaded, so what
    is theirs is known) takes the worker's load off the first listing's path; the loop then
    only initializes the connection and lists. The thread reads and writes the worker's pipes
    itself (a JSON line per message, nothing of the SDK) until it has the last answer, the
    worker stops, or ``limit`` seconds pass; the loop takes the pipes over once it is done
    (:meth:`finished`), with what it read past its answers."""

    def __init__(self, popen: subprocess.Popen[bytes]) -> None:
        self._popen = popen
        self._buffer = b""
        self._answer: dict[str, Any] | None = None
        self._failure: BaseException | None = None
        self._began = False
        self._done = threading.Event()

    def begin(
        self,
        params: dict[str, Any],
        hand: Callable[[dict[str, Any]], dict[str, Any]],
        limit: float,
    ) -> None:
        if self._began:
            return
        self._began = True
        deadline = time.monotonic() + limit
        thread = threading.Thread(
            target=self._run, args=(params, hand, deadline), name="mcp-gateway worker load"
        )
        thread.daemon = True
        thread.start()

    def _run(
        self,
        params: dict[str, Any],
        hand: Callable[[dict[str, Any]], dict[str, Any]],
        deadline: float,
    ) -> None:
        try:
            for n in range(20):  # as Workers._prepare: a table and its variables at a time
                answer = self._ask(f"gw-first-{n}", params, deadline)
                needs = answer.get("needs")
                if not isinstance(needs, dict):
                    break
                params = hand(needs)
            self._answer = answer
        except Exception as exc:  # the connection reports it (see answer)
            self._failure = exc
        finally:
            self._done.set()

    def _ask(self, ident: str, params: dict[str, Any], deadline: float) -> dict[str, Any]:
        message = {"jsonrpc": "2.0", "id": ident, "method": LOAD, "params": params}
        assert self._popen.stdin is not None and self._popen.stdout is not None
        data = memoryview(json.dumps(message, separators=(",", ":")).encode() + b"\n")
        while data:
            data = data[os.write(self._popen.stdin.fileno(), data) :]
        before = b""  # lines that are not the answer (none is expected): the loop's
        fd = self._popen.stdout.fileno()
        while True:
            end = self._buffer.find(b"\n")
            if end < 0:
                left = deadline - time.monotonic()
                if left <= 0:
                    raise TimeoutError(f"no answer to {LOAD}")
                if select.select([fd], [], [], left)[0]:
                    chunk = os.read(fd, 1 << 16)
                    if not chunk:
                        raise EOFError("its worker stopped while it loaded")
                    self._buffer += chunk
                continue
            line, self._buffer = self._buffer[: end + 1], self._buffer[end + 1 :]
            try:
                said = json.loads(line)
            except ValueError:
                said = None
            if isinstance(said, dict) and said.get("id") == ident:
                self._buffer = before + self._buffer
                result = said.get("result")
                if not isinstance(result, dict):
                    raise RuntimeError(f"its worker refused {LOAD}: {said.get('error')!r}"[:300])
                return result
            before += line

    async def finished(self) -> bytes:
        """Once the exchange ended (at once when it never began): what it read past it."""
        if self._began and not self._done.is_set():
            import anyio.to_thread

            await anyio.to_thread.run_sync(self._done.wait, abandon_on_cancel=True)
        self._began = True  # no exchange begins once the loop took the pipes
        return self._buffer

    def answer(self) -> dict[str, Any] | None:
        """Its last answer (``None`` when it never began); raises what ended it early."""
        if self._failure is not None:
            raise self._failure
        return self._answer


@dataclass
class WorkerRecord(ServerRecord):
    """An isolated plugin, reported among the plugins like one in process."""

    pinned: ClassVar[bool] = False
    runs: str = "worker"
    distribution: str = ""
    #: what it was handed (settings tables, variables), handed again when it restarts
    handed: dict[str, Any] = field(default_factory=dict)
    #: what it asked for and was refused (the gateway's own, another plugin's)
    refused: set[str] = field(default_factory=set)
    #: calls running in it now; why it is to be started again once there are none
    running: int = 0
    recycle_due: str | None = None
    #: its plugin loaded once (a later failure to load is a restart's, tried again)
    loaded: bool = False
    #: the gateway's workers (set when it is added)
    workers: Workers | None = None
    #: its first LOAD exchange, while the gateway starts (taken by its first connection)
    first_load: FirstLoad | None = None
    #: its resident memory in bytes once loaded, before any call (measured at each start)
    loaded_memory: int | None = None
    #: it was told that its memory once loaded is past max_worker_memory_mb
    memory_told: bool = False

    @property
    def label(self) -> str:
        return f"plugin {self.name}"

    def as_dict(self) -> dict[str, Any]:
        out = PluginRecord.as_dict(self)
        upstream = self.upstream
        if upstream is not None and self.state is PluginState.LOADED:
            status = upstream.status()
            process = upstream.process
            if process is not None and upstream.state is State.UP:
                memory = process.memory()
                if memory is not None:
                    status["memory_mb"] = round(memory / (1024 * 1024), 1)
            out["worker"] = status
            if out["reason"] is None and upstream.state is not State.UP:
                out["reason"] = upstream.reason
        return out

    def screen_listing(
        self, mounts: Mounts, listed: list[dict[str, Any]], *, record_first_use: bool
    ) -> Screened:
        """Each tool as the worker listed it, which is as the registry derives it in process;
        only what the worker says to the gateway alone (:data:`PRIVATE`) is taken out."""
        assert self.workers is not None
        return self.workers.screen(self, listed)

    def extras_options(self) -> dict[str, Any]:
        """Its prompts, resources and templates are mounted as a mounted server's are, with
        what a plugin in process has besides (see :mod:`gateway.mounted`)."""
        assert self.workers is not None
        return {"private": PRIVATE, "prompt_meta": self.workers.prompt_context}


@dataclass
class WorkerTool(MountedTool):
    """A tool of an isolated plugin. Its ``inputSchema`` (the registry's, in the worker) is
    compiled on its first call, as a plugin's in process is: not while the gateway starts. A
    worker whose plugin tampered with it so that it is no JSON Schema gets its calls refused."""

    def validate(self, arguments: Any) -> Any:
        if self._checker is None:
            try:
                checker = compile_schema(self.input_schema)
                type(checker).check_schema(checker.schema)
            except Exception as exc:
                raise GatewayError(
                    ErrorCode.BACKEND_ERROR,
                    f"plugin {self.plugin.name!r} (in a worker) published an inputSchema that is "
                    f"not a valid JSON Schema ({type(exc).__name__}); nothing was sent",
                    retryable=False,
                ) from None
            self._checker = checker
        return super().validate(arguments)


class WorkerSaid(GatewayError):
    """An error the plugin raised in its worker (not the worker's own failure)."""


def _variables(said: Any, refused: set[str]) -> list[tuple[list[str], bool]]:
    """The variables a worker says its settings read, those it was refused left out: what
    ``claude-config`` copies into a client's entry. A name that looks like a secret's is taken
    for one whatever the worker says (its value is then copied as a ``${NAME}`` reference)."""
    out = []
    for field_said in said if isinstance(said, list) else []:
        names = field_said.get("names") if isinstance(field_said, dict) else None
        if not isinstance(names, list):
            continue
        kept = [n for n in names if isinstance(n, str) and n and n not in refused]
        if kept:
            secret = field_said.get("secret") is not False or any(map(secret_name, kept))
            out.append((kept, secret))
    return out


def _declared_tier(hints: dict[str, Any]) -> tuple[Tier, Mutation | None]:
    """The tier a worker's tool declares by its annotations, failing closed: read only when it
    says it is read-only; otherwise a mutation, destructive unless it says it is not and
    idempotent only when it says so."""
    if hints.get("readOnlyHint") is True:
        return Tier.READ, None
    return Tier.MUTATION, Mutation(
        consequence="as its description says",
        requires="as its description says",
        reversible=False,
        destructive=hints.get("destructiveHint") is not False,
        idempotent=hints.get("idempotentHint") is True,
    )


class Workers:
    """The isolated plugins of one gateway (see the module's docstring)."""

    def __init__(
        self,
        config: GatewayConfig,
        mounts: Mounts,
        loader: PluginLoader,
        registry: Registry,
        health: HealthMonitor,
        prompts: PromptRegistry,
        sanitizer: Sanitizer,
    ) -> None:
        self.config = config
        self.mounts = mounts
        self.loader = loader
        self.registry = registry
        self.health = health
        self.prompts = prompts
        self.sanitizer = sanitizer
        self.records: dict[str, WorkerRecord] = {}
        self._watching: set[asyncio.Task[None]] = set()
        #: the names of the tools the deployment offers (its policy applied): what a prompt
        #: of a plugin in process is rendered with; the gateway sets it
        self.offered: Callable[[], frozenset[str]] = lambda: frozenset(
            t.name for t in registry.all()
        )

    def prompt_context(self) -> dict[str, Any]:
        """What a worker renders a prompt with, as a plugin in process does."""
        return {"tools": sorted(self.offered()), "read_only": self.config.read_only}

    def __bool__(self) -> bool:
        return bool(self.records)

    @property
    def settled(self) -> bool:
        """Has every worker loaded its plugin (or failed to)? Only then is known which
        tables their plugins read."""
        return all(r.loaded or r.state is not PluginState.LOADED for r in self.records.values())

    # -- starting ------------------------------------------------------------------------------

    def add(self, src: PluginSource) -> PluginRecord:
        """The loader's hand-over of a plugin to isolate: its worker starts now."""
        record = WorkerRecord(
            src.name, src.version, PluginState.LOADED, source=f"worker: {src.origin}"
        )
        record.summary = src.summary
        record.distribution = src.distribution
        record.workers = self
        record.context = PluginContext(
            name=src.name,
            version=src.version,
            settings=None,
            data_roots=tuple(self.config.data_roots),
            logger=logging.getLogger(f"gateway.plugin.{src.name}"),
            read_only=self.config.read_only,
            sanitizer=self.sanitizer,
        )
        spec = ServerSpec(
            name=src.name,
            command=sys.executable,
            args=(
                "-m",
                "gateway.worker",
                src.name,
                "--distribution",
                src.distribution,
                "--load-timeout",
                f"{self.config.load_timeout:g}",
                "--log-level",
                self.config.log_level,
                *(["--debug"] if self.config.debug else []),
            ),
            env=worker_environment(self.config.env),
            origin=src.origin,
        )
        started: subprocess.Popen[bytes] | None = None
        try:
            started = start_process(spec, server_environment(spec, self.config.env))
        except OSError as exc:  # started by the upstream then, which reports why
            log.warning("plugin %s: its worker could not be started yet: %s", src.name, exc)
        else:
            record.first_load = FirstLoad(started)
        record.upstream = Upstream(
            spec,
            env=self.config.env,
            sanitizer=self.sanitizer,
            on_listing=self.mounts._listed,
            prepare=self._prepare,
            started=started,
            handover=record.first_load.finished if record.first_load is not None else None,
            on_stderr=self._stderr(src.name),
            stdin_grace=self.config.resource_timeout + 1.0,
            title=f"plugin {src.name!r}",
            retry_unanswered=False,
            answers_inputs=True,
            errors=_said,
            quiet_start=True,
        )
        self.records[src.name] = record
        self.mounts.add_record(record)
        return record

    def _stderr(self, name: str) -> Callable[[str], None]:
        """A worker's log lines (``LEVEL logger: message``) into the gateway's log, at their
        level; anything else it writes (a plugin's print) at INFO."""
        fallback = logging.getLogger(f"gateway.worker.{name}")

        def line(text: str) -> None:
            level, _, rest = text.partition(" ")
            logger, sep, message = rest.partition(": ")
            if level in _LEVELS and sep and logger and " " not in logger:
                logging.getLogger(logger).log(_LEVELS[level], "[%s] %s", name, message)
            else:
                fallback.info("%s", text)

        return line

    def begin(self) -> None:
        """Once every plugin in process loaded: hand each worker started with the gateway its
        settings now, before the event loop runs (see :class:`FirstLoad`)."""
        limit = self.config.load_timeout + self.config.resource_timeout + START_SECONDS
        for record in self.records.values():
            if record.first_load is not None:
                record.first_load.begin(self._base(record), partial(self._hand, record), limit)

    async def loaded(self) -> None:
        """Wait until every worker loaded its plugin, or failed to (bounded)."""
        if not self.records:
            return
        limit = self.config.load_timeout + self.config.resource_timeout + START_SECONDS
        with anyio.move_on_after(limit):
            for record in self.records.values():
                if record.upstream is not None:
                    await record.upstream.settled.wait()
        for record in self.records.values():
            upstream = record.upstream
            if upstream is None or record.state is not PluginState.LOADED:
                continue
            if not upstream.settled.is_set():
                self._failed(record, f"its worker did not load it within {limit:g} s")
                if upstream.process is not None:
                    upstream.process.kill()
            elif not upstream.answered.is_set():
                self._failed(record, f"its worker stopped while it loaded: {upstream.reason}")

    def _failed(
        self, record: WorkerRecord, reason: str, mistake: str | None = None, *, said: bool = False
    ) -> None:
        """The plugin failed to load (``said``: its worker logged why already)."""
        record.state = PluginState.FAILED
        record.reason = self.sanitizer(reason, max_chars=1000)
        record.settings_mistake = mistake
        record.tools, record.checks, record.prompts, record.resources = [], [], [], []
        self.registry.remove_plugin(record.name)
        self.prompts.remove_plugin(record.name)
        self.loader.resources.remove_plugin(record.name)
        self.health.remove_plugin(record.name)
        self.loader.refresh_withheld()
        self.loader.refresh_offered()
        if mistake is None and not said:
            log.error("plugin %s %s skipped: %s", record.name, record.version, record.reason)

    async def stop(self) -> None:
        for task in list(self._watching):
            task.cancel()

    # -- loading -------------------------------------------------------------------------------

    async def _prepare(self, upstream: Upstream) -> None:
        """Hand the worker its settings (:data:`~gateway.worker.LOAD`, as it asks), then take
        its health checks. A plugin that fails to load the first time is given
        up, as one in process is skipped."""
        record = self.records[upstream.name]
        process = upstream.process
        assert process is not None
        first, record.first_load = record.first_load, None
        answer = first.answer() if first is not None else None  # handed before the loop ran
        if answer is None:
            answer = await self._hand_over(record, process)
        failed = answer.get("failed")
        loaded = answer.get("loaded")
        if not isinstance(loaded, dict):
            why = failed if isinstance(failed, dict) else {}
            reason = str(why.get("reason") or "its worker did not load it")
            mistake = why.get("settings_mistake")
            if record.loaded:
                raise RuntimeError(reason)  # it loaded before: started again, with backoff
            self._failed(record, reason, mistake if isinstance(mistake, str) else None, said=True)
            raise Abandon(reason)
        self._take(record, loaded)
        record.loaded = True
        record.loaded_memory = process.memory()

    async def _hand_over(self, record: WorkerRecord, process: ServerProcess) -> dict[str, Any]:
        """The LOAD exchange over the connection: its last answer."""
        params = self._base(record)
        for _ in range(20):  # a table and its variables at a time; no plugin needs more
            with anyio.fail_after(self.config.load_timeout + self.config.resource_timeout + 5):
                answer = await process.request(LOAD, params)
            needs = answer.get("needs")
            if not isinstance(needs, dict):
                break
            params = self._hand(record, needs)
        return answer

    def _base(self, record: WorkerRecord) -> dict[str, Any]:
        """The first LOAD request: the deployment's settings that apply to any plugin, its own
        table, and whatever it was handed before (when it is started again)."""
        config = self.config
        params: dict[str, Any] = {
            "config": {
                "read_only": config.read_only,
                "debug": config.debug,
                "log_level": config.log_level,
                "resource_timeout": config.resource_timeout,
                "health_timeout": config.health_timeout,
                "offer_unconfigured_tools": config.offer_unconfigured_tools,
                "schema_cache": config.schema_cache,
                "server_name": config.server_name,
            },
            "data_roots": [str(p) for p in config.data_roots],
            "source": config.source,
        }
        if not record.handed:
            record.handed = self._values(record, [], [record.name])
        for key, value in record.handed.items():
            params[key] = value
        return params

    def _hand(self, record: WorkerRecord, needs: dict[str, Any]) -> dict[str, Any]:
        variables = [str(v) for v in needs.get("variables") or [] if isinstance(v, str)]
        tables = [str(t) for t in needs.get("tables") or [] if isinstance(t, str)]
        more = self._values(record, variables, tables)
        handed = record.handed
        for key in ("env", "tables", "origins", "unexpanded"):
            handed.setdefault(key, {}).update(more.get(key) or {})
        for key in ("references", "answered"):
            handed[key] = sorted({*handed.get(key, []), *more.get(key, [])})
        return more

    def _values(
        self, record: WorkerRecord, variables: list[str], tables: list[str]
    ) -> dict[str, Any]:
        """The settings a worker asked for that are its own (see the module's docstring)."""
        config = self.config
        out: dict[str, Any] = {
            "env": {},
            "tables": {},
            "origins": {},
            "unexpanded": {},
            "references": [],
            "answered": [*variables, *(f"table:{t}" for t in tables)],
        }
        claimed_vars, claimed_tables = self._claimed(record)
        if first_party(record.distribution):
            # One of this project's plugins asks for what another one claims only where they
            # share a backend by design (citations and orchestrator: the orchestrator's API,
            # its table and variables): handed, as in process.
            claimed_vars, claimed_tables = set(), set()
        refused = []
        for table in tables:
            if table in claimed_tables:
                refused.append(f"[plugins.{table}]")
                continue
            if table in config.plugin_tables:
                out["tables"][table] = config.plugin_table(table)  # read: not an unknown table
            for key, where in config.origins.items():
                if key == f"plugins.{table}" or key.startswith(f"plugins.{table}."):
                    out["origins"][key] = where
            out["references"] += [r for r in config.references if r.startswith(f"plugins.{table}.")]
        for name in variables:
            if core_variable(name) or name in claimed_vars:
                refused.append(name)
                continue
            value = config.env.get(name)
            if value is not None and value in self._gateway_secrets():
                refused.append(name)
                continue
            if value is not None:
                out["env"][name] = value
            if name in config.unexpanded:
                out["unexpanded"][name] = config.unexpanded[name]
        record.refused.update(refused)
        if refused:
            log.warning(
                "plugin %s (in a worker) asked for %s, which belong to the gateway or another "
                "plugin: not handed over",
                record.name,
                ", ".join(refused),
            )
        return out

    def _claimed(self, record: WorkerRecord) -> tuple[set[str], set[str]]:
        """Variables and tables of others: what plugins in process declare and read, and the
        tables named after other installed plugins."""
        variables: set[str] = set()
        tables = {r.name for r in self.loader.records if r.name != record.name}
        from .entrypoints import installed_plugins

        tables |= {p.name for p in installed_plugins() if p.name != record.name}
        for other in self.loader.records:
            if other.runs != "process" or other.context is None:
                continue
            settings = other.context.settings
            if isinstance(settings, BaseModel):
                variables |= {n for g in field_env_names(type(settings)).values() for n in g}
        for backend, settings in self.loader.backends.declared():
            variables |= {n for g in field_env_names(type(settings)).values() for n in g}
            tables.add(backend.settings_table)
        return variables, tables

    def _gateway_secrets(self) -> set[str]:
        config = self.config
        secrets = set()
        if config.token is not None:
            secrets.add(config.token.get_secret_value())
        if config.auth is not None and config.auth.introspection is not None:
            secrets.add(config.auth.introspection.client_secret.get_secret_value())
        return secrets

    def _take(self, record: WorkerRecord, loaded: dict[str, Any]) -> None:
        """The plugin's health checks, as the worker loaded them (its tools, prompts,
        resources and templates come with its listing, as a mounted server's)."""
        record.version = str(loaded.get("version") or record.version)
        if record.context is not None:
            record.context.version = record.version
        self.sanitizer.add_secrets(str(s) for s in loaded.get("secrets") or [])
        record.variables = _variables(loaded.get("variables"), record.refused)
        checks = []
        for c in loaded.get("checks") or []:
            if not isinstance(c, dict) or not isinstance(c.get("name"), str):
                continue
            timeout = c.get("timeout")
            checks.append(
                HealthCheck(
                    name=c["name"],
                    check=self._remote_check(record, c["name"]),
                    backend=c.get("backend") if isinstance(c.get("backend"), str) else None,
                    timeout=float(timeout) if isinstance(timeout, int | float) else 5.0,
                    required=c.get("required") is not False,
                    not_configured=c["not_configured"]
                    if isinstance(c.get("not_configured"), str)
                    else None,
                    shared=c.get("shared") is True,
                )
            )
        self.health.remove_plugin(record.name)
        self.health.add_all(record.name, checks)
        record.checks = [c.name for c in checks]

    def _remote_check(self, record: WorkerRecord, name: str) -> Callable[[], Awaitable[str | None]]:
        async def check() -> str | None:
            answer = await self._request(record, HEALTH, {"name": name})
            status, detail = answer.get("status"), answer.get("detail")
            detail = str(detail) if detail is not None else None
            if status == "ok":
                return detail
            if status == "uninitialized":
                raise NotInitialized(detail or "")
            if status == "unconfigured":
                raise GatewayError(ErrorCode.BACKEND_UNAVAILABLE, detail or "not configured")
            code = ErrorCode.TIMEOUT if status == "timeout" else ErrorCode.BACKEND_ERROR
            raise GatewayError(code, detail or "failed")

        return check

    async def _request(
        self, record: WorkerRecord, method: str, params: dict[str, Any]
    ) -> dict[str, Any]:
        upstream = record.upstream
        assert upstream is not None
        process = upstream.process
        if upstream.session is None or process is None:
            raise self._unavailable(record)
        from mcp import MCPError

        try:
            return await process.request(method, params)
        except MCPError as exc:
            if exc.error.code == -32000:  # it went away meanwhile
                raise self._unavailable(record) from None
            raise

    # -- its tools -----------------------------------------------------------------------------

    def screen(self, record: WorkerRecord, listed: list[dict[str, Any]]) -> Screened:
        out = Screened()
        assert record.context is not None
        for tool in listed:
            name = tool.get("name")
            if not isinstance(name, str) or not TOOL_NAME.fullmatch(name):
                out.notes.append(f"its worker listed a tool with an invalid name {name!r}")
                continue
            try:
                made = self._tool(record, tool)
            except (ValueError, TypeError, KeyError) as exc:
                out.held[name] = self.sanitizer(f"its worker listed it wrongly ({exc})")
                continue
            out.tools.append(made)
        return out

    def _tool(self, record: WorkerRecord, listed: dict[str, Any]) -> WorkerTool:
        """The registry's tool for one the worker listed: its published form as listed (what
        only the gateway is told taken out of ``_meta``), its tier as it declares it."""
        assert record.context is not None
        name = str(listed["name"])
        meta = dict(listed.get("_meta") or {})
        private = meta.pop(PRIVATE, None) or {}
        hints = listed.get("annotations") or {}
        tier, mutation = _declared_tier(hints)
        description = str(listed.get("description") or "")
        if mutation is not None and "MUTATION:" not in description:  # never offered as safer
            description = f"{description}\n\n{mutation_paragraph(mutation.destructive)}".strip()
        title = str(hints.get("title") or listed.get("title") or name)
        input_schema = listed.get("inputSchema")
        if not isinstance(input_schema, dict) or input_schema.get("type") != "object":
            raise ValueError("its inputSchema is not a JSON Schema of an object")
        timeout = private.get("timeout")
        backend = private.get("backend")
        open_world = hints.get("openWorldHint") is not False

        async def call_worker(args: Any, ctx: ToolContext[Any]) -> Shaped | McpResult:
            return await self.call(record, name, args, ctx)

        spec: ToolSpec[Any] = ToolSpec(
            name=name,
            description=description,
            input_model=UpstreamArguments,
            handler=call_worker,
            tier=tier,
            title=title,
            mutation=mutation,
            timeout=float(timeout) if isinstance(timeout, int | float) and timeout > 0 else None,
            backend=backend if isinstance(backend, str) and backend else None,
            open_world=open_world,
        )
        return WorkerTool(
            spec=spec,
            tier=tier,
            plugin=record.context,
            input_schema=input_schema,
            output_schema=listed.get("outputSchema"),
            description=description,
            annotations={
                "title": title,
                "read_only_hint": mutation is None,
                "destructive_hint": mutation is not None and mutation.destructive,
                "idempotent_hint": mutation is None or mutation.idempotent,
                "open_world_hint": open_world,
            },
            meta=meta or None,
            upstream_name=name,
        )

    def _unavailable(self, record: WorkerRecord) -> GatewayError:
        """``BACKEND_UNAVAILABLE`` naming the plugin; not counted against its backends'
        breakers (the worker is down, not they)."""
        assert record.upstream is not None
        err = record.upstream.unavailable()
        err.backend_down = False
        return err

    async def call(
        self, record: WorkerRecord, name: str, args: Any, ctx: ToolContext[Any]
    ) -> Shaped | McpResult:
        """One call in the worker: its result as shaped there (or its content, or what it
        asks the client first), or its error as raised there (the gateway's layers take it as
        one raised here). The client's answers and its log go with the call."""
        upstream = record.upstream
        assert upstream is not None
        if upstream.recycling is not None:
            await upstream.up.wait()  # started again on purpose: back in a moment
        if upstream.session is None or record.state is not PluginState.LOADED:
            raise self._unavailable(record)
        cid = ctx.correlation_id
        process = upstream.process
        record.running += 1
        try:
            raw = await upstream.call(
                name,
                args,
                ctx.progress,
                inputs=ctx.inputs,
                log=ctx.log,
                meta={PRIVATE: {"correlation_id": cid}},
            )
        except anyio.get_cancelled_exc_class():
            if process is not None:
                self._watch(record, process, cid, name)
            raise
        except WorkerSaid:
            raise  # the plugin's own error, as raised in process
        except GatewayError as err:
            if err.code is ErrorCode.BACKEND_UNAVAILABLE:
                err.backend_down = False
            raise
        finally:
            record.running -= 1
            self._mind_memory(record)
        return self._result(record, raw)

    def _result(self, record: WorkerRecord, raw: dict[str, Any]) -> Shaped | McpResult:
        """What the worker answered (checked as a tool result, or an input-required one, by
        the upstream already): JSON it shaped, to be checked and cleaned here as in process;
        or content and input requests, which the runner here cleans and bounds as it does a
        plugin's in process."""
        if raw.get("resultType") == "input_required":
            return McpResult(raw)
        meta = raw.get("_meta")
        said = meta.get(PRIVATE) if isinstance(meta, dict) else None
        if isinstance(said, dict) and said.get("content") is True:
            return McpResult(_without_private(raw))
        payload = raw.get("structuredContent")
        # Its text is the payload's JSON, encoded here: what a worker sends as text is not
        # read (the JSON goes once over the pipe, and the text cannot say something else).
        if raw.get("isError") is True or not isinstance(payload, dict):
            raise GatewayError(
                ErrorCode.BACKEND_ERROR,
                f"plugin {record.name!r} (in a worker) answered with something that is not a "
                "tool result",
                retryable=False,
            )
        return Shaped(payload)

    # -- faults --------------------------------------------------------------------------------

    def _watch(self, record: WorkerRecord, process: ServerProcess, cid: str, tool: str) -> None:
        """A call was cancelled: the worker must give it up (see :data:`GIVE_UP_SECONDS`)."""
        task = asyncio.get_running_loop().create_task(self._gave_up(record, process, cid, tool))
        self._watching.add(task)
        task.add_done_callback(self._watching.discard)

    async def _gave_up(
        self, record: WorkerRecord, process: ServerProcess, cid: str, tool: str
    ) -> None:
        await anyio.sleep(GIVE_UP_SECONDS)
        upstream = record.upstream
        if upstream is None or upstream.process is not process or process.closed.is_set():
            return
        try:
            with anyio.fail_after(GIVE_UP_SECONDS):
                answer = await process.request(CALLS, {})
        except TimeoutError:
            why = "does not answer (something blocks it)"
        except Exception:
            return  # it went away by itself
        else:
            running = answer.get("running")
            if not isinstance(running, list) or cid not in running:
                return
            why = "did not stop it"
        log.error(
            "plugin %s: a call of %s (correlation_id=%s) was cancelled and its worker %s "
            "%g s later; the worker is ended and started again",
            record.name,
            tool,
            cid,
            why,
            GIVE_UP_SECONDS,
        )
        process.kill()

    def _mind_memory(self, record: WorkerRecord) -> None:
        """Between calls: a worker grown past ``max_worker_memory_mb`` is started again. One
        past it as soon as it loaded is not (no restart could bring it under the limit, and
        each call would wait for one); the log says so once."""
        limit = self.config.max_worker_memory_mb
        upstream = record.upstream
        if not limit or upstream is None or upstream.process is None:
            return
        loaded = record.loaded_memory
        if loaded is not None and loaded > limit * 1024 * 1024:
            if not record.memory_told:
                record.memory_told = True
                log.warning(
                    "plugin %s takes %.0f MB once loaded, past max_worker_memory_mb = %d: "
                    "starting it again cannot bring it under, so it is not; set the limit "
                    "above what it needs (gateway_status shows each worker's memory_mb)",
                    record.name,
                    loaded / (1024 * 1024),
                    limit,
                )
            return
        if record.recycle_due is None:
            memory = upstream.process.memory()
            if memory is None or memory <= limit * 1024 * 1024:
                return
            record.recycle_due = (
                f"its memory grew to {memory / (1024 * 1024):.0f} MB, past "
                f"max_worker_memory_mb = {limit}; started again"
            )
        if record.running == 0:
            log.warning("plugin %s: %s", record.name, record.recycle_due)
            upstream.recycle(record.recycle_due)
            record.recycle_due = None
