"""One plugin in a process of its own: ``python -m gateway.worker NAME --distribution DIST``.

The gateway starts one such worker per isolated plugin (``isolate``) and mounts it like an MCP
server (:mod:`gateway.isolation`): whatever the plugin does (``os._exit``, a handler that
blocks or leaks, a patch of the core at import) ends or spoils only this process, which the
gateway starts again. Policy, validation, breakers, timeouts, sanitizing, audit and telemetry
stay in the gateway; here the plugin is loaded by the gateway's own loader and its tools are
run by the gateway's own runner, so they answer exactly as in process.

It speaks MCP on its stdin and stdout (JSON-RPC 2.0, one message per line): ``initialize``,
``ping``, ``tools/list`` and ``tools/call`` (progress, ``notifications/cancelled``),
``prompts/list`` and ``prompts/get``, ``resources/list``, ``resources/templates/list`` and
``resources/read``, ``resources/subscribe`` and ``resources/unsubscribe`` (then
``notifications/resources/updated`` for what the plugin says changed), ``completion/complete``,
and ``notifications/message`` for what a handler logs: everything a plugin offers in process. A handler that asks the client first is answered
with the 2026-07-28 input-required result whatever the revision (the gateway asks the client
as for a plugin in process), and the answers come in the request made again
(``inputResponses``, ``requestState``). Besides, three methods of the gateway's own:

- :data:`LOAD` hands the plugin its settings: the tables and variables it asks for (it answers
  ``{"needs": ...}`` until it has them all, see :class:`WorkerConfig`), and the deployment's
  data roots, ``read_only`` and time limits; it answers ``{"loaded": ...}`` (its health checks)
  or ``{"failed": ...}`` (why, as an in-process load failure reads). The first worker of a
  start is handed its settings before ``initialize``, while the gateway still starts;
- :data:`HEALTH` runs one of its health checks;
- :data:`CALLS` names the calls still running (the gateway ends a worker that does not give a
  cancelled call up).

An answer is at most the gateway's :data:`~gateway.content.MAX_MESSAGE_BYTES` long (it ends a
worker that sends more, and every call running there): one that would be longer is that
request's error instead (see :meth:`Worker._send`).

No MCP SDK is imported here: its server alone takes longer to import than the gateway takes to
start, and a worker must be ready when the gateway is. What the gateway needs of the protocol
is small, and it checks every answer itself.
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import sys
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

from pydantic import BaseModel, PrivateAttr

from .config import GatewayConfig, field_env_names
from .content import MAX_MESSAGE_BYTES

if TYPE_CHECKING:
    import anyio.abc

    from .errors import GatewayError
    from .inputs import InputRequired, Inputs
    from .pipeline import CallResult
    from .plugins import PluginLoader, PluginSource
    from .prompts import PromptRegistry
    from .registry import RegisteredTool, Registry

#: The gateway's own methods (see the module's docstring).
LOAD = "gateway/worker/load"
HEALTH = "gateway/worker/health"
CALLS = "gateway/worker/calls"
#: The ``_meta`` key of what only the gateway and its workers say to each other: in a call,
#: the correlation id; in a prompts/get, the tools offered and ``read_only``; in a listed
#: tool, its timeout and backend; in a listed prompt, its ``requires`` and ``free_text``; in
#: a result, that it is content (not JSON to shape); in an error's data, the error as the
#: gateway's pipeline takes it. The gateway removes it from all it publishes.
PRIVATE = "gateway/worker"
#: The protocol revision the worker answers ``initialize`` with, whatever was asked.
PROTOCOL = "2025-11-25"
#: JSON-RPC errors: the method is unknown, the request is refused, the worker is not loaded.
METHOD_NOT_FOUND = -32601
INVALID_PARAMS = -32602
INTERNAL = -32603
NOT_LOADED = -32002

log = logging.getLogger("gateway.worker")
_M = TypeVar("_M", bound=BaseModel)


class WorkerConfig(GatewayConfig):
    """The settings the gateway hands this worker, asked for as the loader needs them: a
    plugin's (or its REST backend's) settings read a table and variables; those not handed
    yet are asked for first (:attr:`ask`), so the worker gets no more than its plugin
    declares."""

    _ask: Callable[[list[str], str], None] | None = PrivateAttr(default=None)

    def plugin_settings(self, model: type[_M], table: str) -> _M:
        if self._ask is not None:
            names = [n for group in field_env_names(model).values() for n in group]
            self._ask(names, table)
        return super().plugin_settings(model, table)


def _line(message: Mapping[str, Any]) -> bytes:
    """One message on the wire. A lone surrogate (in an error's message, say) is replaced as
    the gateway replaces it in process (U+FFFD): the gateway takes no JSON that holds one."""
    text = json.dumps(message, separators=(",", ":"), ensure_ascii=False)
    try:
        return text.encode() + b"\n"
    except UnicodeEncodeError:
        from .errors import encodable_data

        text = json.dumps(encodable_data(message), separators=(",", ":"), ensure_ascii=False)
        return text.encode("utf-8", "replace") + b"\n"


def _error(ident: Any, code: int, message: str, data: Any = None) -> dict[str, Any]:
    error: dict[str, Any] = {"code": code, "message": message}
    if data is not None:
        error["data"] = data
    return {"jsonrpc": "2.0", "id": ident, "error": error}


def _result(ident: Any, result: Mapping[str, Any]) -> dict[str, Any]:
    return {"jsonrpc": "2.0", "id": ident, "result": result}


def _failure(ident: Any, err: GatewayError) -> dict[str, Any]:
    """The gateway's error a request raised, said so that the gateway takes it as raised there
    (:func:`gateway.isolation._said`)."""
    from .errors import ErrorCode

    said = {
        "code": err.code.value,
        "message": err.message,
        "retryable": err.retryable,
        "details": err.details,
        "backend_down": err.backend_down,
    }
    code = INTERNAL if err.code is ErrorCode.INTERNAL_ERROR else INVALID_PARAMS
    return _error(ident, code, err.message, {PRIVATE: said})


class Worker:
    """The worker's life: import the plugin at once, answer the gateway's ``initialize`` and
    :data:`LOAD` (on the main thread, before any event loop: the load-time hooks run there as
    they do in the gateway, under ``load_timeout``), then serve until stdin closes."""

    def __init__(self, name: str, distribution: str, load_timeout: float) -> None:
        self.name = name
        self.distribution = distribution
        self.load_timeout = load_timeout
        self.fd_in = -1
        self.fd_out = -1
        self._buffer = b""
        self._eof = False
        #: the id of the LOAD request still to be answered
        self._load_id: Any = None
        self.config: WorkerConfig | None = None
        self.loader: PluginLoader | None = None
        self.registry: Registry | None = None
        self.prompts: PromptRegistry | None = None
        self._import: tuple[object, BaseException | None] | None = None
        self._version = "0"
        #: what the gateway answered (variables, ``table:<name>``), handed over or not
        self._asked: set[str] = set()
        #: calls running: request id → (correlation id, its cancel scope)
        self._running: dict[Any, tuple[str, anyio.CancelScope]] = {}

    # -- the first part: blocking, on the main thread ------------------------------------------

    def _read(self) -> dict[str, Any] | None:
        """The next message (``None`` at the end of stdin); a line that is not one is
        answered with -32700 and skipped."""
        while True:
            end = self._buffer.find(b"\n")
            if end < 0:
                if self._eof:
                    return None
                chunk = os.read(self.fd_in, 1 << 16)
                if not chunk:
                    self._eof = True
                    chunk = b"\n" if self._buffer else b""
                self._buffer += chunk
                continue
            line, self._buffer = self._buffer[:end], self._buffer[end + 1 :]
            if not line.strip():
                continue
            try:
                message = json.loads(line)
            except (ValueError, RecursionError):
                message = None
            if isinstance(message, dict):
                return message
            self._write(_error(None, -32700, "Parse error"))

    def _write(self, message: Mapping[str, Any]) -> None:
        view = memoryview(_line(message))
        while view:
            view = view[os.write(self.fd_out, view) :]

    def _source(self) -> PluginSource | None:
        from .plugins import entry_point_sources

        for src in entry_point_sources():
            if src.name == self.name and src.distribution == self.distribution:
                return src
        return None

    def _import_now(self, src: PluginSource | None) -> None:
        """Import the plugin while the gateway itself starts; its outcome (the module, or what
        the import raised) is kept for the loader, which reports it as in process."""
        from .lifecycle import plugin_fault
        from .plugins import time_limit

        if src is None:
            return
        try:
            with time_limit(self.load_timeout):
                self._import = (src.load(), None)
        except BaseException as exc:
            if not plugin_fault(exc):
                raise
            self._import = (None, exc)

    def _imported(self) -> object:
        assert self._import is not None
        module, failure = self._import
        if failure is not None:
            raise failure
        return module

    def start(self) -> bool:
        """Answer the gateway until the plugin is loaded; ``False`` when stdin closed first."""
        src = self._source()
        self._version = src.version if src is not None else "0"
        self._import_now(src)
        _warm()
        while True:
            message = self._read()
            if message is None:
                return False
            method, ident = message.get("method"), message.get("id")
            if method == "initialize":
                self._write(_result(ident, self._initialized()))
            elif method == "ping":
                self._write(_result(ident, {}))
            elif method == LOAD and ident is not None:
                self._load_id = ident
                self._load(src, message.get("params") or {})
                return True
            elif ident is not None and method is not None:
                self._write(_error(ident, NOT_LOADED, "the plugin is not loaded yet"))

    def _initialized(self) -> dict[str, Any]:
        """The ``initialize`` result: before its LOAD (a worker started again), or after it (the
        first, handed its settings before the gateway's event loop ran: see
        :class:`gateway.isolation.FirstLoad`)."""
        return {
            "protocolVersion": PROTOCOL,
            "capabilities": {
                "tools": {},
                "prompts": {},
                # Whether each resource is, its listing says.
                "resources": {"subscribe": True},
                "completions": {},
                "logging": {},
            },
            "serverInfo": {"name": self.name, "version": self._version},
        }

    def _settings(self, params: Mapping[str, Any]) -> WorkerConfig:
        base = params.get("config") or {}
        config = WorkerConfig.model_construct(
            **{k: v for k, v in base.items() if k in GatewayConfig.model_fields},
            data_roots=[Path(p) for p in params.get("data_roots") or [os.getcwd()]],
            audit_log=Path(os.devnull),
            plugin_tables={},
            env={k: v for k, v in os.environ.items() if k in ("HOME", "XDG_CACHE_HOME")},
            origins={},
            references=set(),
            unexpanded={},
            source=str(params.get("source") or "the gateway"),
        )
        config.load_timeout = self.load_timeout
        self._merge(config, params)
        return config

    def _merge(self, config: WorkerConfig, params: Mapping[str, Any]) -> None:
        """What a LOAD request hands over, added to what the worker has."""
        from .errors import secret_name

        env = {str(k): str(v) for k, v in (params.get("env") or {}).items()}
        config.env.update(env)
        config.plugin_tables.update(params.get("tables") or {})
        config.origins.update(params.get("origins") or {})
        config.references.update(params.get("references") or [])
        config.unexpanded.update(params.get("unexpanded") or {})
        self._asked.update(params.get("answered") or [])
        if self.loader is not None:
            self.loader.sanitizer.add_secrets(v for k, v in env.items() if secret_name(k))
            self.loader.backends.add_unexpanded(config.unexpanded)

    def _ask(self, variables: list[str], table: str) -> None:
        """The loader needs these settings: ask the gateway for those it did not answer yet,
        and wait (reading stdin) for the LOAD request that hands them over."""
        assert self.config is not None
        missing_vars = [v for v in variables if v not in self._asked]
        missing_table = [] if f"table:{table}" in self._asked else [table]
        while missing_vars or missing_table:
            self._write(
                _result(
                    self._load_id, {"needs": {"variables": missing_vars, "tables": missing_table}}
                )
            )
            while True:
                message = self._read()
                if message is None:
                    raise SystemExit(0)  # the gateway went away while the plugin loaded
                if message.get("method") == LOAD and message.get("id") is not None:
                    self._load_id = message["id"]
                    self._merge(self.config, message.get("params") or {})
                    break
                if message.get("method") == "ping":
                    self._write(_result(message.get("id"), {}))
                elif message.get("id") is not None and message.get("method"):
                    self._write(_error(message["id"], NOT_LOADED, "the plugin is not loaded yet"))
            missing_vars = [v for v in variables if v not in self._asked]
            missing_table = [] if f"table:{table}" in self._asked else [table]

    def _load(self, src: PluginSource | None, params: Mapping[str, Any]) -> None:
        from dataclasses import replace

        from .backends import BackendHub
        from .errors import Sanitizer
        from .health import HealthMonitor
        from .logs import configure_logging
        from .plugins import PluginLoader, PluginRecord, PluginState
        from .prompts import PromptRegistry
        from .registry import Registry

        config = self.config = self._settings(params)
        sanitizer = Sanitizer.from_environment(roots=[*config.data_roots], env=dict(config.env))
        configure_logging(sanitizer, level=config.log_level, debug=config.debug, fmt=WORKER_LINE)
        self.registry = Registry()
        self.prompts = PromptRegistry()
        health = HealthMonitor(sanitizer, default_timeout=config.health_timeout)
        hub = BackendHub(config.plugin_settings, sanitizer, unexpanded=config.unexpanded)
        self.loader = PluginLoader(config, self.registry, health, sanitizer, hub, self.prompts)
        config._ask = self._ask
        if src is None:
            record = PluginRecord(self.name, "", PluginState.FAILED)
            record.reason = f"no installed distribution {self.distribution} provides it"
            self.loader.records.append(record)
            return
        self.loader.load_all([replace(src, load=self._imported)])
        config._ask = None
        record = self.loader.records[0]
        self._version = record.version
        if record.state is PluginState.LOADED and record.servers:
            self.loader._fail(
                record,
                "register_servers: a plugin in a worker cannot mount MCP servers; run it in "
                "the gateway's process (leave it out of isolate)",
            )

    def outcome(self) -> dict[str, Any]:
        """What the last LOAD request is answered with, once ``open_resources`` ran."""
        from .config import secret_values
        from .deployment import env_variables
        from .plugins import PluginState

        assert self.loader is not None and self.prompts is not None
        record = self.loader.records[0]
        if record.state is not PluginState.LOADED:
            return {
                "failed": {"reason": record.reason, "settings_mistake": record.settings_mistake}
            }
        context = record.context
        settings = context.settings if context is not None else None
        secrets = secret_values(settings)
        models = [type(settings)] if isinstance(settings, BaseModel) else []
        for backend, backend_settings in self.loader.backends.declared():
            secrets += backend.secret_values(backend_settings)
            models.append(type(backend_settings))
        return {
            "loaded": {
                "version": record.version,
                "checks": [
                    {
                        "name": c.name,
                        "backend": c.backend,
                        "timeout": c.timeout,
                        "required": c.required,
                        "not_configured": c.not_configured,
                        "shared": c.shared,
                    }
                    for _, c in self.loader.health.checks()
                ],
                "secrets": [s for s in secrets if s],
                # What claude-config copies into a client's entry, as for a plugin in process.
                "variables": [
                    {"names": names, "secret": secret}
                    for model in models
                    for names, secret in env_variables(model)
                ],
            }
        }

    # -- the second part: serving, on the event loop ---------------------------------------------

    async def serve(self) -> None:
        import anyio

        from .plugins import PluginState
        from .stdio import _PipeLines, _PipeOut

        assert self.loader is not None
        await self.loader.open_resources()
        out = _PipeOut(os.fdopen(self.fd_out, "wb", closefd=False))
        lines = _PipeLines(os.fdopen(self.fd_in, "rb", closefd=False), self._buffer)
        self._buffer = b""
        self._out = out
        await self._send(_result(self._load_id, self.outcome()))
        loaded = self.loader.records[0].state is PluginState.LOADED
        try:
            async with anyio.create_task_group() as tg:
                async for line in lines:
                    if not line.strip():
                        continue
                    try:
                        message = json.loads(line)
                    except (ValueError, RecursionError):
                        message = None
                    if not isinstance(message, dict):
                        await self._send(_error(None, -32700, "Parse error"))
                        continue
                    await self._dispatch(tg, message, loaded)
                tg.cancel_scope.cancel()
        finally:
            lines.close()
            with anyio.CancelScope(shield=True):
                await self.loader.close_resources()
            out.close()

    async def _send(
        self, message: Mapping[str, Any], request: tuple[str, Mapping[str, Any]] | None = None
    ) -> None:
        """Write one message. An answer (to ``request``: its method and params) longer than
        the gateway takes would end this worker, and every call running in it: that request
        is answered with its error instead, worded as the same plugin's in process is when
        its answer is over the bound there."""
        line = _line(message)
        ident = message.get("id")
        # The gateway's bound is of the line without its end.
        if len(line) - 1 > MAX_MESSAGE_BYTES and ident is not None:
            method, params = request or ("a request", {})
            err = _too_large(method, params, len(line) - 1)
            log.warning(
                "%s (correlation_id=%s) answered %d bytes, over the %d the gateway takes: "
                "answered %s instead",
                method,
                self._running[ident][0] if ident in self._running else "-",
                len(line) - 1,
                MAX_MESSAGE_BYTES,
                err.code.value,
            )
            line = _line(_failure(ident, err))
        await self._out.write(line)

    async def _dispatch(
        self, tg: anyio.abc.TaskGroup, message: dict[str, Any], loaded: bool
    ) -> None:
        method, ident = message.get("method"), message.get("id")
        params = message.get("params")
        params = params if isinstance(params, dict) else {}
        if ident is None:
            if method == "notifications/cancelled":
                running = self._running.get(params.get("requestId"))
                if running is not None:
                    running[1].cancel()
            return
        if method == "ping":
            await self._send(_result(ident, {}))
        elif method == CALLS:
            await self._send(_result(ident, {"running": [c for c, _ in self._running.values()]}))
        elif method == "initialize":
            await self._send(_result(ident, self._initialized()))
        elif method not in _SERVED:
            await self._send(_error(ident, METHOD_NOT_FOUND, f"Method not found: {method}"))
        elif not loaded:
            await self._send(_error(ident, NOT_LOADED, "the plugin did not load"))
        elif method in _LISTS:
            listed = {_LISTS[method]: self._listed(method)}
            await self._send(_result(ident, listed), (method, params))
        elif method in _SUBSCRIPTIONS:
            await self._send(await self._subscription(ident, method, params))
        else:
            serve = {
                "tools/call": self._call,
                "resources/read": self._read_resource,
                "prompts/get": self._prompt,
                "completion/complete": self._complete,
                HEALTH: self._health,
            }[method]
            tg.start_soon(self._answering, serve, ident, method, params)

    def _tools(self) -> list[dict[str, Any]]:
        """Each tool as the gateway publishes it in process (its registry's derived form), with
        what only the gateway needs (timeout, backend) under :data:`PRIVATE`."""
        assert self.registry is not None
        out = []
        for t in self.registry.all():
            hints = t.annotations
            tool: dict[str, Any] = {
                "name": t.name,
                "title": hints["title"],
                "description": t.description,
                "inputSchema": t.input_schema,
            }
            if t.output_schema is not None:
                tool["outputSchema"] = t.output_schema
            tool["annotations"] = {
                camel: hints[key]
                for key, camel in (
                    ("title", "title"),
                    ("read_only_hint", "readOnlyHint"),
                    ("destructive_hint", "destructiveHint"),
                    ("idempotent_hint", "idempotentHint"),
                    ("open_world_hint", "openWorldHint"),
                )
                if hints.get(key) is not None
            }
            tool["_meta"] = {
                **(t.meta or {}),
                PRIVATE: {"timeout": t.timeout, "backend": t.backend},
            }
            out.append(tool)
        return out

    def _listed(self, method: str) -> list[dict[str, Any]]:
        assert self.loader is not None and self.prompts is not None
        if method == "tools/list":
            return self._tools()
        if method == "prompts/list":
            return [
                {
                    "name": p.name,
                    **({"title": p.spec.title} if p.spec.title else {}),
                    "description": p.spec.description,
                    "arguments": [
                        {k: v for k, v in a.items() if v is not None} for a in p.arguments
                    ],
                    # What only the gateway needs to offer and render it as in process.
                    "_meta": {
                        PRIVATE: {"requires": list(p.spec.requires), "free_text": p.spec.free_text}
                    },
                }
                for p in self.prompts.all()
            ]
        resources = self.loader.resources
        found = resources.templates() if method == "resources/templates/list" else None
        return [
            # Which of them a client may subscribe to: what only the gateway needs.
            {**r.listed, "_meta": {**r.listed.get("_meta", {}), PRIVATE: {"subscribable": True}}}
            if r.subscribable
            else r.listed
            for r in (found if found is not None else resources.resources())
        ]

    async def _subscription(
        self, ident: Any, method: str, params: dict[str, Any]
    ) -> dict[str, Any]:
        """``resources/subscribe`` (or ``unsubscribe``) of the gateway, which subscribes while
        a client is: what the plugin says of that URI is relayed to it from now on
        (``notifications/resources/updated``)."""
        assert self.loader is not None
        uri = params.get("uri")
        found = self.loader.resources.find(uri) if isinstance(uri, str) else None
        if found is None or not found[0].subscribable:
            return _error(ident, INVALID_PARAMS, f"no subscribable resource {str(uri)[:200]!r}")
        assert isinstance(uri, str)
        hub = self.loader.resources.subscriptions
        if method == "resources/subscribe":
            await hub.add(uri, _GATEWAY, self._updated, found[0])
        else:
            await hub.remove(uri, _GATEWAY)
        return _result(ident, {})

    async def _updated(self, uri: str) -> None:
        note = {"uri": uri}
        await self._send(
            {"jsonrpc": "2.0", "method": "notifications/resources/updated", "params": note}
        )

    async def _answering(
        self,
        serve: Callable[[Any, dict[str, Any]], Any],
        ident: Any,
        method: str,
        params: dict[str, Any],
    ) -> None:
        """Run one request, cancellable by the gateway (its timeout, the client's
        cancellation); what it answers, or the gateway's error it raised, is sent."""
        import anyio

        from .errors import GatewayError

        meta = params.get("_meta") if isinstance(params.get("_meta"), dict) else {}
        assert isinstance(meta, dict)
        private = meta.get(PRIVATE) if isinstance(meta.get(PRIVATE), dict) else {}
        assert isinstance(private, dict)
        cid = str(private.get("correlation_id") or f"w{ident}")[:64]
        with anyio.CancelScope() as scope:
            self._running[ident] = (cid, scope)
            try:
                answer = await serve(cid, params)
            except GatewayError as err:
                await self._send(_failure(ident, err), (method, params))
            else:
                await self._send(_result(ident, answer), (method, params))
            finally:
                self._running.pop(ident, None)

    def _inputs(self, params: dict[str, Any]) -> Inputs:
        """The client's answers and what it can be asked, as the gateway forwards them: in
        the request, as at 2026-07-28 (:mod:`gateway.inputs`)."""
        from .inputs import FORWARDED_CAPABILITIES, NEEDS, Inputs

        meta = params.get("_meta") if isinstance(params.get("_meta"), dict) else {}
        assert isinstance(meta, dict)
        can = meta.get(FORWARDED_CAPABILITIES)
        capabilities = frozenset(
            k for k in (can if isinstance(can, dict) else {}) if k in NEEDS.values()
        )
        given = params.get("inputResponses")
        responses = {
            str(k): v
            for k, v in (given if isinstance(given, dict) else {}).items()
            if isinstance(v, dict)
        }
        state = params.get("requestState")
        return Inputs(responses, state if isinstance(state, str) else None, capabilities)

    def _log_to(self, params: dict[str, Any]) -> Callable[[str, str], Any]:
        """Sends the gateway a log message of this request, saying which call it is of."""
        from .inputs import CALL

        meta = params.get("_meta") if isinstance(params.get("_meta"), dict) else {}
        assert isinstance(meta, dict)
        call = meta.get(CALL)

        async def send(level: str, message: str) -> None:
            note: dict[str, Any] = {"level": level, "data": message}
            if isinstance(call, str):
                note["_meta"] = {CALL: call}
            await self._send({"jsonrpc": "2.0", "method": "notifications/message", "params": note})

        return send

    async def _run(
        self, tool: RegisteredTool, cid: str, params: dict[str, Any], arguments: Any, args: Any
    ) -> dict[str, Any]:
        """Run a tool (a plugin's, or a resource's read) with the gateway's runner, and say
        what it returned as the gateway takes it (see :meth:`_answer`)."""
        from .pipeline import Call, Runner

        assert self.loader is not None
        meta = params.get("_meta") if isinstance(params.get("_meta"), dict) else {}
        assert isinstance(meta, dict)
        token = meta.get("progressToken")

        async def progress(done: float, total: float | None, message: str | None) -> None:
            note: dict[str, Any] = {"progressToken": token, "progress": done}
            if total is not None:
                note["total"] = total
            if message is not None:
                note["message"] = message
            await self._send({"jsonrpc": "2.0", "method": "notifications/progress", "params": note})

        runner = Runner(self.loader.sanitizer, debug=self.loader.config.debug)
        call = Call(
            tool.name,
            arguments,
            progress if token is not None else None,
            tool=tool,
            args=args,
            correlation_id=cid,
            inputs=self._inputs(params),
            log=self._log_to(params),
        )
        return _answer(await runner(call))

    async def _call(self, cid: str, params: dict[str, Any]) -> dict[str, Any]:
        """One ``tools/call``: the arguments built into the tool's model, then the gateway's
        runner (its shaping, its handling of whatever the handler raises)."""
        from .errors import ErrorCode, GatewayError

        assert self.registry is not None
        tool = self.registry.get(str(params.get("name")))
        if tool is None:
            raise GatewayError(ErrorCode.NOT_FOUND, f"unknown tool {params.get('name')!r}")
        arguments = params.get("arguments")
        return await self._run(tool, cid, params, arguments, tool.validate(arguments))

    async def _read_resource(self, cid: str, params: dict[str, Any]) -> dict[str, Any]:
        """One ``resources/read``: the resource's read, run as the gateway runs it."""
        from .errors import ErrorCode, GatewayError

        assert self.loader is not None
        uri = params.get("uri")
        found = self.loader.resources.find(uri) if isinstance(uri, str) else None
        if found is None:
            raise GatewayError(ErrorCode.NOT_FOUND, f"no resource {str(uri)[:200]!r}")
        item, variables = found
        arguments = {"uri": uri, **variables}
        return await self._run(item.tool, cid, params, arguments, arguments)

    async def _prompt(self, cid: str, params: dict[str, Any]) -> dict[str, Any]:
        """One ``prompts/get``, rendered as in process: with the tools the gateway offers and
        its ``read_only`` (in :data:`PRIVATE`), the client's answers when it asked first."""
        from .errors import ErrorCode, GatewayError
        from .inputs import InputRequired
        from .lifecycle import plugin_fault
        from .prompts import render_messages

        assert self.prompts is not None and self.loader is not None
        meta = params.get("_meta") if isinstance(params.get("_meta"), dict) else {}
        assert isinstance(meta, dict)
        private = meta.get(PRIVATE) if isinstance(meta.get(PRIVATE), dict) else {}
        assert isinstance(private, dict)
        prompt = self.prompts.get(str(params.get("name")))
        if prompt is None:
            raise GatewayError(ErrorCode.NOT_FOUND, f"unknown prompt {params.get('name')!r}")
        arguments = params.get("arguments")
        try:
            rendered = await render_messages(
                prompt,
                arguments if isinstance(arguments, dict) else None,
                tools=frozenset(str(t) for t in private.get("tools") or []),
                read_only=bool(private.get("read_only")),
                sanitizer=self.loader.sanitizer,
                inputs=self._inputs(params),
            )
        except GatewayError:
            raise
        except BaseException as exc:  # what a render function raised, KeyboardInterrupt too
            if not plugin_fault(exc):
                raise
            log.error("prompt=%s render raised %s", prompt.name, type(exc).__name__)
            raise GatewayError(
                ErrorCode.INTERNAL_ERROR, "the prompt could not be rendered"
            ) from None
        if isinstance(rendered, InputRequired):
            return _asking(rendered)
        return {"description": prompt.spec.description, "messages": rendered}

    async def _complete(self, cid: str, params: dict[str, Any]) -> dict[str, Any]:
        """One ``completion/complete`` of a prompt's argument or a template's variable."""
        import inspect

        from .errors import ErrorCode, GatewayError
        from .prompts import MAX_COMPLETIONS, complete_argument

        assert self.prompts is not None and self.loader is not None
        ref = params.get("ref") if isinstance(params.get("ref"), dict) else {}
        argument = params.get("argument") if isinstance(params.get("argument"), dict) else {}
        context = params.get("context") if isinstance(params.get("context"), dict) else {}
        assert isinstance(ref, dict) and isinstance(argument, dict) and isinstance(context, dict)
        given = context.get("arguments") if isinstance(context.get("arguments"), dict) else {}
        assert isinstance(given, dict)
        name, value = str(argument.get("name") or ""), str(argument.get("value") or "")
        arguments = {str(k): str(v) for k, v in given.items()}
        if ref.get("type") == "ref/prompt":
            prompt = self.prompts.get(str(ref.get("name")))
            if prompt is None:
                raise GatewayError(ErrorCode.NOT_FOUND, f"unknown prompt {ref.get('name')!r}")
            values = await complete_argument(prompt, name, value, arguments)
        else:
            item = self.loader.resources.template(str(ref.get("uri")))
            if item is None:
                raise GatewayError(
                    ErrorCode.NOT_FOUND, f"unknown resource template {str(ref.get('uri'))!r}"
                )
            values = []
            if item.complete is not None:
                found = item.complete(name, value, arguments)
                if inspect.isawaitable(found):
                    found = await found
                values = [str(v) for v in list(found)[:MAX_COMPLETIONS]]
        return {"completion": {"values": values, "total": len(values), "hasMore": False}}

    async def _health(self, cid: str, params: dict[str, Any]) -> dict[str, Any]:
        from .errors import ErrorCode, GatewayError

        assert self.loader is not None
        name = params.get("name")
        found = [(p, c) for p, c in self.loader.health.checks() if c.name == name]
        if not found:
            raise GatewayError(ErrorCode.NOT_FOUND, f"unknown health check {name!r}")
        plugin, check = found[0]
        result = await self.loader.health._run_one(plugin, check)
        return {"status": result.status, "detail": result.detail}


#: The MCP methods a loaded worker serves (beside ``ping`` and the gateway's own), and the
#: key of each list's answer.
_LISTS = {
    "tools/list": "tools",
    "prompts/list": "prompts",
    "resources/list": "resources",
    "resources/templates/list": "resourceTemplates",
}
#: What the gateway subscribes the worker to for its clients, as one subscriber.
_SUBSCRIPTIONS = ("resources/subscribe", "resources/unsubscribe")
_GATEWAY = "gateway"
_SERVED = {
    *_LISTS,
    *_SUBSCRIPTIONS,
    "tools/call",
    "resources/read",
    "prompts/get",
    "completion/complete",
    HEALTH,
}


def _asking(asked: InputRequired) -> dict[str, Any]:
    """What a handler (a reader, a render function) asks the client first, as the
    2026-07-28 input-required result: the gateway asks the client as for one in process."""
    out: dict[str, Any] = {"resultType": "input_required", "inputRequests": asked.wire()}
    if asked.state is not None:
        out["requestState"] = asked.state
    return out


def _too_large(method: str, params: Mapping[str, Any], size: int) -> GatewayError:
    """The error of a request whose answer is ``size`` bytes, over what the gateway takes from
    a worker: a tool's result, a resource's read or a prompt's messages as the gateway words
    one over its bound in process."""
    from .errors import ErrorCode, GatewayError
    from .pipeline import result_too_large
    from .prompts import not_rendered
    from .resources import read_too_large

    if method == "tools/call":
        return result_too_large(str(params.get("name")), size, MAX_MESSAGE_BYTES)
    if method == "resources/read":
        return read_too_large(str(params.get("uri")), size, MAX_MESSAGE_BYTES)
    if method == "prompts/get":
        return not_rendered(str(params.get("name")))
    return GatewayError(
        ErrorCode.INTERNAL_ERROR,
        f"the answer to {method[:80]} is {size // (1024 * 1024)} MB, over the "
        f"{MAX_MESSAGE_BYTES // (1024 * 1024)} MB the gateway takes from a plugin's worker",
    )


def _answer(result: CallResult) -> dict[str, Any]:
    """A run's outcome as the gateway takes it (:meth:`gateway.isolation.Workers.result`): a
    JSON result shaped here, as the ``structuredContent`` of a tool result; content
    (a ``ToolResult``'s, a resource's contents) as the result itself, marked so under
    :data:`PRIVATE`; what it asks first as an input-required result. (What the runner raised
    is answered as an error, see :meth:`Worker._answering`.)"""
    if result.input_required is not None:
        return _asking(result.input_required)
    if result.mcp is not None:
        return {**result.mcp, "_meta": {PRIVATE: {"content": True}}}
    # The JSON once: the gateway encodes the text block from it (as it does in process).
    return {"content": [], "structuredContent": result.payload}


def _warm() -> None:
    """Import now what loading and serving need, while the gateway is still starting: once it
    connects, every millisecond here is one its first listing waits."""
    import anyio._backends._asyncio  # noqa: F401 - anyio's event loop, imported on first run

    from . import backends, health, pipeline, prompts, stdio  # noqa: F401


#: A worker's log line: the gateway adds the time when it logs it (see isolation.py).
WORKER_LINE = "%(levelname)s %(name)s: %(message)s"


def main(argv: list[str] | None = None) -> int:
    """Serve one plugin until stdin closes."""
    from .errors import Sanitizer
    from .lifecycle import run
    from .logs import configure_logging
    from .stdio import protected_stdio

    parser = argparse.ArgumentParser(prog="python -m gateway.worker")
    parser.add_argument("plugin")
    parser.add_argument("--distribution", required=True)
    parser.add_argument("--load-timeout", type=float, default=5.0)
    parser.add_argument("--log-level", default="INFO")
    parser.add_argument("--debug", action="store_true")
    args = parser.parse_args(argv)
    # Before the plugin is imported: what goes wrong in it is logged as one clean line (the
    # settings' secrets are added once the gateway hands them over).
    configure_logging(
        Sanitizer.from_environment(), level=args.log_level, debug=args.debug, fmt=WORKER_LINE
    )
    worker = Worker(args.plugin, args.distribution, args.load_timeout)
    # Before the plugin is imported: what it prints goes to stderr, never onto the protocol.
    with protected_stdio() as wire:
        worker.fd_in, worker.fd_out = wire.stdin.fileno(), wire.stdout.fileno()
        if not worker.start():
            return 0
        run(worker.serve)
    return 0


if __name__ == "__main__":
    # The module's own instance (``gateway.worker``), not this ``__main__`` copy: what the
    # plugin imports is what runs.
    from gateway.worker import main as _main

    sys.exit(_main())
