"""The one call pipeline: every ``tools/call``, whatever provides the tool, through the same layers.

A layer is ``async (call, call_next) -> CallResult``, like FastMCP's ``on_call_tool(context,
call_next)``. The gateway composes the layers its configuration needs, outermost first::

    telemetry → errors → policy → scopes → limits → validation → audit → breaker → timeout → (run)

A layer refuses a call by raising :class:`~gateway.errors.GatewayError`; the errors layer turns
whatever was raised inside it into the one sanitized error result. Layers that must know how a
call ended (audit, breaker, telemetry) see either the result or that error on its way out.
Telemetry is installed only when it is on, scopes only with OAuth, limits only when a limit
is set; the others always run.
Innermost, :class:`Runner` runs the tool's own code (a plugin's handler, a mounted server's
call) and turns whatever it raised or returned into a deliberate error or the shaped result.
"""

from __future__ import annotations

import json
import logging
import time
import traceback
import uuid
from collections.abc import Awaitable, Callable, Sequence
from contextvars import ContextVar
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol

import anyio
from pydantic import BaseModel, ValidationError
from pydantic_core import PydanticSerializationError

from .audit import AuditTrail, redact_arguments
from .auth.identity import Identity, current_caller
from .content import MAX_CONTENT_BYTES, ToolResult, size_over
from .errors import (
    ErrorCode,
    GatewayError,
    Sanitizer,
    classify_exception,
    encodable,
    encodable_data,
    error_payload,
)
from .health import HealthMonitor
from .inputs import NO_INPUTS, InputRequired, Inputs, MissingCapability
from .lifecycle import plugin_fault
from .policy import Policy
from .registry import RegisteredTool, Registry
from .spec import LogFn, ProgressFn, Tier
from .telemetry import CallTrace, Telemetry
from .telemetry.scopes import NO_CALL

if TYPE_CHECKING:  # built (and imported) only when the deployment sets a limit: see app.py
    from .limits import Limiter

log = logging.getLogger("gateway.pipeline")


@dataclass(eq=False)  # compared by identity: no __eq__ to compile at start
class CallState:
    """What the pipeline learns about one running call from the code it runs: code deeper
    down (the REST client) records what it was doing when the call was cut off, so a tool
    timeout that interrupted a backend request counts for that backend's breaker."""

    cancelled_waiting_on: str | None = None


#: Set by the pipeline around a handler.
CURRENT_CALL: ContextVar[CallState | None] = ContextVar("gateway_current_call", default=None)


def note_cancelled_waiting(backend: str) -> None:
    """The running call was cancelled while waiting for ``backend`` to answer: if that was the
    tool's timeout, the backend did not answer in time (it counts for its breaker)."""
    state = CURRENT_CALL.get()
    if state is not None:
        state.cancelled_waiting_on = backend


__all__ = ["Call", "CallResult", "Layer", "McpResult", "Next", "Pipeline", "Shaped"]


def _dumps(payload: Any) -> str:
    return json.dumps(payload, separators=(",", ":"), ensure_ascii=False)


@dataclass
class CallResult:
    """``payload`` is the complete JSON result: the tool's output, or the error envelope.
    Both it and its compact text are encodable as UTF-8 (no lone surrogate): a transport can
    always send them."""

    payload: dict[str, Any]
    is_error: bool
    tool: RegisteredTool | None = None
    encoded: str | None = None  # the compact JSON text, when the pipeline has it already
    backend_down: bool = False  # the error says the tool's backend itself is down
    correlation_id: str | None = None  # of a call that passed validation (logs, audit, trace)
    #: a mounted server's ``CallToolResult`` as the client gets it (content of any type,
    #: ``structuredContent``, ``isError``), cleaned; ``None``: the result is built from payload
    mcp: dict[str, Any] | None = None
    #: the tool asks the client first (see :mod:`gateway.inputs`); ``payload`` names the requests
    input_required: InputRequired | None = None

    @property
    def code(self) -> str:
        if self.input_required is not None:
            return "INPUT_REQUIRED"
        return str(self.payload["error"]["code"]) if self.is_error else "OK"

    def text(self) -> str:
        """The same JSON, compact (error envelopes are encoded on first use)."""
        if self.encoded is None:
            self.encoded = _dumps(self.payload)
        return self.encoded


@dataclass(frozen=True)
class McpResult:
    """What a tool that is another MCP server's returns: that server's ``CallToolResult`` as
    JSON, passed on as sent. The runner only cleans it: configured secrets redacted, an error's
    text cleaned like a backend's words (:meth:`~gateway.errors.Sanitizer.backend_text`)."""

    result: dict[str, Any]


@dataclass(frozen=True)
class Shaped:
    """What a tool run elsewhere returns when it was shaped there as in process (an isolated
    plugin's, by the runner of its worker): the complete JSON payload. The runner encodes its
    text as for a tool in process, checks it and clears it of configured secrets."""

    payload: dict[str, Any]


#: Characters of one text block of a mounted server's error result the client gets.
MAX_UPSTREAM_ERROR_TEXT = 2000
#: Characters of one log message a tool sends the client.
MAX_LOG_CHARS = 1000


@dataclass(eq=False)  # compared by identity: no __eq__ to compile at start
class Call:
    """One ``tools/call`` as it passes down the layers: what the client sent, and what the
    layers learned on the way (the tool, the validated arguments, the correlation id)."""

    name: Any
    arguments: Any
    progress: ProgressFn | None = None
    caller: Identity = field(default_factory=current_caller)
    tool: RegisteredTool | None = None
    #: the arguments as the tool takes them (its input model, or the checked JSON object)
    args: Any = None
    #: set once the arguments are valid: the call's id in the log, the audit and the trace
    correlation_id: str | None = None
    trace: CallTrace = NO_CALL
    #: what code deeper down (the REST client) tells the pipeline about the running call
    state: CallState = field(default_factory=CallState)
    #: the client's answers when the call is made again after the tool asked
    inputs: Inputs = NO_INPUTS
    #: sends the client a log message (``None``: the call's client gets none)
    log: LogFn | None = None

    @property
    def served(self) -> RegisteredTool:
        """The tool, for the layers below the policy layer (which found it)."""
        assert self.tool is not None, "a layer below the policy layer ran without a tool"
        return self.tool


Next = Callable[[Call], Awaitable[CallResult]]


class Layer(Protocol):
    """One step of the pipeline: do something before and/or after ``call_next(call)``, or
    refuse the call by raising :class:`GatewayError` instead of calling it."""

    async def __call__(self, call: Call, call_next: Next) -> CallResult: ...


def compose(layers: Sequence[Layer], innermost: Next) -> Next:
    """``layers[0]`` outermost, each calling the next, the last calling ``innermost``."""
    chain = innermost
    for layer in reversed(layers):
        chain = _bind(layer, chain)
    return chain


def _bind(layer: Layer, call_next: Next) -> Next:
    async def step(call: Call) -> CallResult:
        return await layer(call, call_next)

    return step


class Pipeline:
    """The composed layers. :meth:`call` runs them all; :meth:`run` only those below the
    audit (breaker, timeout, the tool) for arguments already valid."""

    def __init__(
        self,
        outer: Sequence[Layer],
        refusals: Sequence[Layer],
        running: Sequence[Layer],
        runner: Runner,
        errors: Errors,
    ) -> None:
        self.errors = errors
        self._run = compose([errors, *running], runner)
        self._call = compose([*outer, errors, *refusals, *running], runner)
        # A read of what is not a listed tool (a resource): every layer but the lookup and the
        # check of arguments, which the read's own lookup did.
        access = [layer for layer in refusals if not isinstance(layer, PolicyLayer | Validation)]
        self._serve = compose([errors, *access, *running], runner)

    async def call(
        self,
        name: str,
        arguments: dict[str, Any] | None,
        *,
        progress: ProgressFn | None = None,
        inputs: Inputs = NO_INPUTS,
        log: LogFn | None = None,
    ) -> CallResult:
        return await self._call(Call(name, arguments, progress, inputs=inputs, log=log))

    async def serve(
        self,
        tool: RegisteredTool,
        arguments: dict[str, Any],
        *,
        inputs: Inputs = NO_INPUTS,
        log: LogFn | None = None,
    ) -> CallResult:
        """Run ``tool`` (found by the caller, not by name: a resource's read) through the
        layers a call passes once found and valid: scopes, audit, breaker, timeout, the
        runner's shaping and cleaning."""
        call = Call(
            tool.name,
            arguments,
            tool=tool,
            args=arguments,
            correlation_id=_new_id(),
            inputs=inputs,
            log=log,
        )
        return await self._serve(call)

    async def run(self, tool: RegisteredTool, args: Any) -> CallResult:
        """What a call does once its arguments are valid, without policy and audit: the test
        kit's way to run a tool whose handler it replaced."""
        call = Call(tool.name, None, tool=tool, args=args, correlation_id=_new_id())
        return await self._run(call)


def _new_id() -> str:
    return uuid.uuid4().hex[:12]


# -- the layers, outermost first ----------------------------------------------------------------


class Traced:
    """One span per call (installed only when telemetry is on)."""

    def __init__(self, telemetry: Telemetry) -> None:
        self.telemetry = telemetry

    async def __call__(self, call: Call, call_next: Next) -> CallResult:
        with self.telemetry.tool_call(str(call.name)) as trace:
            call.trace = trace
            result = await call_next(call)
            error = result.payload["error"] if result.is_error else None
            trace.finish(error["code"] if error else None, correlation_id=result.correlation_id)
        return result


class Errors:
    """Turns a refusal raised anywhere below into the error result: the message sanitized
    (no paths, secrets, SQL or tracebacks; bounded), details cleaned, the correlation id in
    the payload of an internal error (the log has the detail under it)."""

    def __init__(
        self, sanitizer: Sanitizer, unavailable_hint: Callable[[RegisteredTool], str | None]
    ) -> None:
        self.sanitize = sanitizer
        #: what a tool's BACKEND_UNAVAILABLE errors add (the tools to use meanwhile)
        self.unavailable_hint = unavailable_hint

    async def __call__(self, call: Call, call_next: Next) -> CallResult:
        try:
            result = await call_next(call)
        except MissingCapability:
            raise  # not a tool's failure: the server refuses the request (gateway.asking)
        except GatewayError as err:
            result = self.result(err, call.tool, call.correlation_id)
        result.correlation_id = call.correlation_id
        return result

    def result(
        self, err: GatewayError, tool: RegisteredTool | None, cid: str | None = None
    ) -> CallResult:
        message = err.message
        if err.code is ErrorCode.BACKEND_UNAVAILABLE and tool is not None:
            hint = self.unavailable_hint(tool)
            message = f"{message}; {hint}" if hint else message
        payload = error_payload(
            err.code,
            self.sanitize(message),
            retryable=err.retryable,
            details=self._clean(err.details) if err.details else None,
            correlation_id=cid if err.code is ErrorCode.INTERNAL_ERROR else None,
        )
        return CallResult(payload, True, tool, backend_down=err.backend_down, correlation_id=cid)

    def _clean(self, value: Any) -> Any:
        """Details are plugin data: sanitize every string in them too, so nothing slips out."""
        if isinstance(value, str):
            return self.sanitize(value, max_chars=300)
        if isinstance(value, dict):
            return {encodable(str(k)): self._clean(v) for k, v in value.items()}
        if isinstance(value, list | tuple):
            return [self._clean(v) for v in value[:100]]
        if value is None or isinstance(value, bool | int | float):
            return value
        return self.sanitize(str(value), max_chars=300)


class PolicyLayer:
    """Unknown, withheld, denied or hidden tools go no further."""

    def __init__(self, registry: Registry, policy: Policy, default_timeout: float) -> None:
        self.registry = registry
        self.policy = policy
        self.default_timeout = default_timeout

    async def __call__(self, call: Call, call_next: Next) -> CallResult:
        name = call.name
        tool = self.registry.get(name) if isinstance(name, str) else None
        if tool is None:
            call.trace.refused("unknown_tool")
            withheld = self.registry.why_withheld(name) if isinstance(name, str) else None
            raise GatewayError(
                ErrorCode.NOT_FOUND,
                f"tool {name!r} is not served: {withheld}"
                if withheld
                else f"unknown tool {str(name)[:80]!r}; list the tools to see what exists",
            )
        call.tool = tool
        call.trace.describe(
            tool.name,
            plugin=tool.plugin.name,
            tier=tool.tier.value,
            timeout=tool.timeout or self.default_timeout,
            backend=tool.backend,
        )
        hidden = self.policy.hidden_reason(tool)
        if hidden:
            call.trace.refused("denied" if tool.name in self.policy.deny_tools else "read_only")
            raise GatewayError(ErrorCode.PERMISSION_DENIED, f"tool {name!r} is {hidden}")
        return await call_next(call)


class Scopes:
    """With OAuth: a caller whose token lacks the tool's scope is refused (installed only
    when ``[auth]`` is configured)."""

    def __init__(self, policy: Policy) -> None:
        self.policy = policy

    async def __call__(self, call: Call, call_next: Next) -> CallResult:
        scope = self.policy.missing_scope(call.served, call.caller)
        if scope is not None:
            raise GatewayError(
                ErrorCode.PERMISSION_DENIED,
                f"tool {call.name!r} needs the OAuth scope {scope}, which the access token does "
                "not carry; sign in again asking for it, or ask an administrator to grant it",
                details={"missing_scope": scope},
            )
        return await call_next(call)


class RateLimits:
    """Calls and mutations per minute per caller (installed only when a limit is set): a
    call over a limit is refused, ``RATE_LIMITED``, saying when to retry; one the HTTP
    transport already counted (see :class:`~gateway.limits.LimitGate`) is not counted again."""

    def __init__(self, limiter: Limiter) -> None:
        self.limiter = limiter

    async def __call__(self, call: Call, call_next: Next) -> CallResult:
        tool = call.served
        if not self.limiter.counted(tool.name):
            try:
                await self.limiter.admit(call.caller, tool.name, tool.tier is Tier.MUTATION)
            except GatewayError as err:
                call.trace.refused(
                    "rate_limited" if err.code is ErrorCode.RATE_LIMITED else "limits_unavailable"
                )
                raise
        return await call_next(call)


class Validation:
    """The arguments, checked against the tool's published ``inputSchema`` before any I/O
    (see :meth:`RegisteredTool.validate`); a valid call gets its correlation id."""

    async def __call__(self, call: Call, call_next: Next) -> CallResult:
        call.args = call.served.validate(call.arguments)
        call.correlation_id = _new_id()
        return await call_next(call)


class Audit:
    """Every mutation call is written to the audit trail before it runs (``STARTED``; refused
    when a sink cannot take it) and when it ends (its outcome, or ``CANCELLED``)."""

    def __init__(self, audit: AuditTrail) -> None:
        self.audit = audit

    async def __call__(self, call: Call, call_next: Next) -> CallResult:
        tool = call.served
        if tool.tier is not Tier.MUTATION:
            return await call_next(call)
        started = time.perf_counter()
        common = {
            "tool": tool.name,
            "plugin": tool.plugin.name,
            "correlation_id": call.correlation_id,
        }
        failed = await self.audit.write(
            {
                **common,
                "outcome": "STARTED",
                "arguments": redact_arguments(call.arguments),
                **call.caller.audit_fields(),
            }
        )
        if failed:
            # Fail closed: a change nobody could trace afterwards is not made. The sinks that
            # took STARTED are told how it ended, so no STARTED is left open for nothing.
            call.trace.refused("audit_unavailable")
            took = [s for s in self.audit.sinks if s not in failed]
            error = _not_audited(tool.name, database=any(s.name == "postgres" for s in failed))
            if took:
                await self.audit.write(
                    {**common, "outcome": error.code.value, **call.caller.audit_fields()}, took
                )
            raise error

        async def outcome(code: str) -> None:
            duration = round((time.perf_counter() - started) * 1000, 1)
            await self.audit.write(
                {
                    **common,
                    "outcome": code,
                    "duration_ms": duration,
                    **call.caller.audit_fields(),
                }
            )

        try:
            result = await call_next(call)
        except GatewayError as err:
            await outcome(err.code.value)
            raise
        except BaseException:
            # Only a cancellation of the call (the client's, shutdown's) gets here: the change
            # may be half done, and the log must say so, not leave STARTED alone. Shielded:
            # the cancelled scope would end an awaited write at once.
            with anyio.CancelScope(shield=True):
                await outcome("CANCELLED")
            raise
        await outcome(result.code)
        return result


def _not_audited(tool: str, *, database: bool) -> GatewayError:
    """The error of a mutation refused because its STARTED record could not be written."""
    if database:
        return GatewayError(
            ErrorCode.BACKEND_UNAVAILABLE,
            f"tool {tool!r} was not run: the audit database cannot be reached, "
            "so the gateway refuses every change until it can; nothing was done. "
            "Retry in 30 s; if it persists, tell the operator",
        )
    return GatewayError(
        ErrorCode.INTERNAL_ERROR,
        f"tool {tool!r} was not run: the audit log cannot be written, so the "
        "gateway refuses every change until it can; nothing was done. Tell the "
        "operator (the gateway log has the reason)",
    )


class Breaker:
    """A tool whose backend is unconfigured, or whose breaker is open, fails fast; how the
    call ended tells the breaker whether the backend is up."""

    def __init__(self, health: HealthMonitor) -> None:
        self.health = health

    async def __call__(self, call: Call, call_next: Next) -> CallResult:
        backend = call.served.backend
        if not backend:
            return await call_next(call)
        try:
            breaker = self.health.gate(backend)
        except GatewayError:
            call.trace.breaker(self.health.breaker_states()[backend]["state"])
            raise
        call.trace.breaker(breaker.state.value)
        try:
            result = await call_next(call)
        except GatewayError as err:
            # Only the backend's own failures count: a plugin's local trouble (no git binary, a
            # handler timeout) or an error the backend answered says nothing about its health.
            if err.backend_down:
                breaker.record_failure()
            elif _backend_answered(err.code):
                breaker.record_success()
            else:
                breaker.release()
            raise
        except BaseException:
            breaker.release()
            raise
        breaker.record_success()
        return result


def _backend_answered(code: str) -> bool:
    """Error codes that only an answer of the backend produces (it is up)."""
    return code in (
        ErrorCode.NOT_FOUND,
        ErrorCode.CONFLICT,
        ErrorCode.PERMISSION_DENIED,
        ErrorCode.BACKEND_ERROR,
    )


class Runner:
    """Innermost: the tool's own code. Whatever it raises becomes a deliberate error (its own
    ``GatewayError``, a known client library's exception mapped, anything else
    ``INTERNAL_ERROR`` with the detail in the log only); what it returns is shaped into the
    result and cleared of configured secrets. Its progress messages are sanitized too."""

    def __init__(self, sanitizer: Sanitizer, *, debug: bool = False) -> None:
        self.sanitize = sanitizer
        self.debug = debug

    async def __call__(self, call: Call) -> CallResult:
        tool = call.served
        cid = call.correlation_id or _new_id()
        progress = call.progress

        async def report(p: float, total: float | None, message: str | None) -> None:
            if progress is not None:
                await progress(p, total, self.sanitize(message, max_chars=200) if message else None)

        log_to = call.log

        async def send_log(level: str, message: str) -> None:
            if log_to is not None:
                await log_to(level, self.sanitize(message, max_chars=MAX_LOG_CHARS))

        token = CURRENT_CALL.set(call.state)
        try:
            raw = await tool.invoke(call.args, cid, report, inputs=call.inputs, log=send_log)
            if isinstance(raw, McpResult):
                return self._passed_on(tool, raw.result, cid)
            if isinstance(raw, Shaped):
                payload = raw.payload
                text = _dumps(payload)
                if encodable(text) is not text:
                    payload = encodable_data(payload)
                    text = _dumps(payload)
            elif isinstance(raw, ToolResult):
                return self._own(tool, raw, cid)
            elif isinstance(raw, InputRequired):
                return self._asking(tool, raw)
            else:
                payload, text = _shape(tool, raw)
        except (GatewayError, TimeoutError):
            raise  # deliberate, or the timeout layer's to say
        except ValidationError as exc:  # the tool's own models refused what it built
            raise self._internal(tool, cid, exc) from None
        except Exception as exc:
            mapped = classify_exception(exc)
            if mapped is None:
                raise self._internal(tool, cid, exc) from None
            log.warning(
                "tool=%s correlation_id=%s %s: %s",
                tool.name,
                cid,
                type(exc).__name__,
                self.sanitize(str(exc)),
            )
            raise mapped from None
        except BaseException as exc:
            # SystemExit, KeyboardInterrupt or a CancelledError nobody asked for, raised by
            # plugin code: it would end the process, and Claude Code never restarts a stdio
            # server. Only a cancellation of this call (the client's, shutdown's, the
            # timeout's) goes on.
            if not plugin_fault(exc):
                raise
            raise self._internal(tool, cid, exc) from None
        finally:
            CURRENT_CALL.reset(token)
        _bounded(tool, text)
        return self._without_secrets(CallResult(payload, False, tool, text), cid)

    def _own(self, tool: RegisteredTool, raw: ToolResult, cid: str) -> CallResult:
        """A handler's :class:`~gateway.content.ToolResult`: its JSON (structured content
        checked against the tool's output model), then cleaned as a mounted server's is."""
        result = raw.wire()
        model = tool.output_model
        structured = result.get("structuredContent")
        if model is not None and structured is not None and not result.get("isError"):
            result["structuredContent"] = model.model_validate(structured).model_dump(mode="json")
        return self._passed_on(tool, result, cid)

    def _asking(self, tool: RegisteredTool, raw: InputRequired) -> CallResult:
        """A handler asks the client first: its requests checked and cleared of configured
        secrets; the server layer asks (or answers with an input-required result)."""
        asked = raw.checked()
        text = _dumps(asked.wire())
        if self.sanitize.checks_results and self.sanitize.result_has_secret(text):
            log.warning("tool=%s a configured secret in an input request was redacted", tool.name)
            cleaned = self.sanitize.redact_data(asked.wire())
            asked = InputRequired.from_wire(cleaned, asked.state)
        return CallResult(
            {"input_required": sorted(asked.requests)}, False, tool, input_required=asked
        )

    def _passed_on(self, tool: RegisteredTool, result: dict[str, Any], cid: str) -> CallResult:
        """A mounted server's result, unchanged but for what must never reach a client: a
        configured secret anywhere in it, and in an error's text what the sanitizer removes
        from a backend's words (paths, SQL, credentials). The error envelope of ``payload``
        (for the audit log, the trace and ``mcp-gateway call``) quotes its first text. A
        server that asks the client first (an input-required result) asks through the gateway."""
        if result.get("resultType") == "input_required":
            try:
                asked = InputRequired.from_wire(
                    result.get("inputRequests"), result.get("requestState")
                )
            except ValueError as exc:
                raise GatewayError(
                    ErrorCode.BACKEND_ERROR,
                    f"tool {tool.name!r} asked for input the gateway cannot pass on: {exc}",
                    retryable=False,
                ) from None
            return self._asking(tool, asked)
        text = _dumps(result)
        _bounded(tool, text)
        if encodable(text) is not text:
            result = encodable_data(result)
            text = _dumps(result)
        if self.sanitize.checks_results and self.sanitize.result_has_secret(text):
            log.warning(
                "tool=%s correlation_id=%s a configured secret was redacted", tool.name, cid
            )
            result = self.sanitize.redact_data(result)
        if result.get("isError") is not True:
            return CallResult(result, False, tool, mcp=result)
        content = result.get("content")
        cleaned = [
            {**block, "text": self.sanitize.backend_text(block["text"], MAX_UPSTREAM_ERROR_TEXT)}
            if isinstance(block, dict) and isinstance(block.get("text"), str)
            else block
            for block in (content if isinstance(content, list) else [])
        ]
        said = next((b["text"] for b in cleaned if isinstance(b, dict) and "text" in b), "")
        payload = error_payload(
            ErrorCode.BACKEND_ERROR,
            f"the tool reported an error: {said[:300]}" if said else "the tool reported an error",
            retryable=False,
        )
        return CallResult(payload, True, tool, mcp={**result, "content": cleaned})

    def _without_secrets(self, result: CallResult, cid: str) -> CallResult:
        # A backend may echo a configured secret inside data (a tag name, a file). Search the
        # encoded text once (transports need it anyway); only a hit pays for a rewrite.
        if not self.sanitize.checks_results or not self.sanitize.result_has_secret(result.text()):
            return result
        log.warning(
            "tool=%s correlation_id=%s a configured secret in the result was redacted",
            result.tool.name if result.tool else "?",
            cid,
        )
        payload = self.sanitize.redact_data(result.payload)
        return CallResult(payload, False, result.tool, _dumps(payload))

    def _internal(self, tool: RegisteredTool, cid: str, exc: BaseException) -> GatewayError:
        # The client gets a generic message; the detail goes to stderr, redacted.
        if self.debug:
            detail = "".join(traceback.format_exception(exc))
            log.error("tool=%s correlation_id=%s unexpected error\n%s", tool.name, cid, detail)
        else:
            log.error(
                "tool=%s correlation_id=%s unexpected %s: %s | at %s",
                tool.name,
                cid,
                type(exc).__name__,
                self.sanitize(str(exc)),
                _frames(exc),
            )
        return GatewayError(
            ErrorCode.INTERNAL_ERROR,
            f"tool {tool.name!r} failed unexpectedly; report the correlation_id: the "
            "gateway log has the details under it",
        )


def _bounded(tool: RegisteredTool, text: str) -> None:
    """A result's JSON, whatever the handler returned (a model, a dict, content, a mounted
    server's result), is at most :data:`~gateway.content.MAX_CONTENT_BYTES` in UTF-8: as a
    plugin's worker's line is, so a plugin answers alike wherever it runs."""
    size = size_over(text, MAX_CONTENT_BYTES)
    if size is not None:
        raise result_too_large(tool.name, size, MAX_CONTENT_BYTES)


def result_too_large(tool: str, size: int, limit: int) -> GatewayError:
    """A result of ``tool`` of ``size`` bytes, over the ``limit`` it may have: the client's
    error, here and in a plugin's worker (whose answer the gateway takes up to its own limit)."""
    return GatewayError(
        ErrorCode.INTERNAL_ERROR,
        f"tool {tool!r} returned {size // (1024 * 1024)} MB of content, over the "
        f"{limit // (1024 * 1024)} MB a result may have",
    )


def _frames(exc: BaseException) -> str:
    """Where it happened, as short relative names: enough to find it, no absolute paths."""
    parts = []
    for fr in traceback.extract_tb(exc.__traceback__)[-4:]:
        short = "/".join(fr.filename.replace("\\", "/").split("/")[-2:])
        parts.append(f"{short}:{fr.lineno} in {fr.name}")
    return " < ".join(reversed(parts))


def _shape(tool: RegisteredTool, raw: Any) -> tuple[dict[str, Any], str]:
    """The complete JSON payload (Claude Code shows the model only ``structuredContent``) and
    the same JSON as compact text, both encodable: a lone surrogate from a backend would make
    the transport's writer raise (stdio ended, HTTP answered 500). pydantic encodes in native
    code and refuses a surrogate itself; a dict's text is checked, which costs nothing for
    ASCII and one UTF-8 pass otherwise."""
    model = tool.output_model
    if model is not None and not isinstance(raw, model):
        raw = model.model_validate(raw)
    if isinstance(raw, BaseModel):
        payload = raw.model_dump(mode="json")
        try:
            return payload, raw.model_dump_json()
        except PydanticSerializationError:
            payload = encodable_data(payload)
            return payload, _dumps(payload)
    if isinstance(raw, dict):
        # Encode now: a dict that is not JSON must fail here, not in the transport.
        text = _dumps(raw)
        if encodable(text) is not text:
            raw = encodable_data(raw)
            text = _dumps(raw)
        return raw, text
    raise TypeError(f"handler returned {type(raw).__name__}; return a dict or a pydantic model")


class Timeout:
    """The tool runs under its timeout (the gateway default unless it sets its own); a real
    cancellation (the client's, shutdown's) passes straight through."""

    def __init__(self, default_timeout: float) -> None:
        self.default_timeout = default_timeout

    async def __call__(self, call: Call, call_next: Next) -> CallResult:
        tool = call.served
        timeout = tool.timeout or self.default_timeout
        try:
            with anyio.fail_after(timeout):
                return await call_next(call)
        except TimeoutError:
            backend = tool.backend
            raise GatewayError(
                ErrorCode.TIMEOUT,
                f"tool {tool.name!r} did not finish within {timeout:g} s; "
                "retry later or with a smaller request",
                backend_down=backend is not None and call.state.cancelled_waiting_on == backend,
            ) from None


def build_pipeline(
    registry: Registry,
    policy: Policy,
    health: HealthMonitor,
    sanitizer: Sanitizer,
    audit: AuditTrail,
    *,
    default_timeout: float,
    unavailable_hint: Callable[[RegisteredTool], str | None],
    debug: bool = False,
    telemetry: Telemetry | None = None,
    limiter: Limiter | None = None,
) -> Pipeline:
    """The layers this deployment needs, in their order (see the module's docstring)."""
    outer: list[Layer] = [Traced(telemetry)] if telemetry is not None and telemetry.enabled else []
    refusals: list[Layer] = [PolicyLayer(registry, policy, default_timeout)]
    if policy.scopes is not None:
        refusals.append(Scopes(policy))
    if limiter is not None:
        refusals.append(RateLimits(limiter))
    refusals += [Validation(), Audit(audit)]
    running: list[Layer] = [Breaker(health), Timeout(default_timeout)]
    return Pipeline(
        outer,
        refusals,
        running,
        Runner(sanitizer, debug=debug),
        Errors(sanitizer, unavailable_hint),
    )
