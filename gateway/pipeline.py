"""The one call pipeline every ``tools/call`` goes through (DESIGN.md, steps 1-7).

policy → validate (before any I/O) → breaker → run under timeout → shape → sanitize → audit
"""

from __future__ import annotations

import json
import logging
import time
import traceback
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import anyio
from pydantic import BaseModel, ValidationError
from pydantic_core import PydanticSerializationError

from .arguments import format_validation_error, validate_arguments
from .audit import AuditLog, redact_arguments
from .auth.identity import current_caller
from .callstate import CURRENT_CALL, CallState
from .errors import (
    ErrorCode,
    GatewayError,
    Sanitizer,
    encodable,
    encodable_data,
    error_payload,
)
from .health import HealthMonitor
from .lifecycle import plugin_fault
from .policy import Policy
from .registry import RegisteredTool, Registry
from .rest.status import classify_exception
from .spec import ProgressFn, Tier, ToolContext
from .telemetry import OFF, CallTrace, Telemetry
from .telemetry.scopes import NO_CALL

log = logging.getLogger("gateway.pipeline")

__all__ = ["CallResult", "Pipeline", "format_validation_error"]


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

    @property
    def code(self) -> str:
        return str(self.payload["error"]["code"]) if self.is_error else "OK"

    def text(self) -> str:
        """The same JSON, compact (error envelopes are encoded on first use)."""
        if self.encoded is None:
            self.encoded = _dumps(self.payload)
        return self.encoded


def _backend_answered(code: str) -> bool:
    """Error codes that only an answer of the backend produces (it is up)."""
    return code in (
        ErrorCode.NOT_FOUND,
        ErrorCode.CONFLICT,
        ErrorCode.PERMISSION_DENIED,
        ErrorCode.BACKEND_ERROR,
    )


def _frames(exc: BaseException) -> str:
    """Where it happened, as short relative names: enough to find it, no absolute paths."""
    parts = []
    for fr in traceback.extract_tb(exc.__traceback__)[-4:]:
        short = "/".join(fr.filename.replace("\\", "/").split("/")[-2:])
        parts.append(f"{short}:{fr.lineno} in {fr.name}")
    return " < ".join(reversed(parts))


class Pipeline:
    def __init__(
        self,
        registry: Registry,
        policy: Policy,
        health: HealthMonitor,
        sanitizer: Sanitizer,
        audit: AuditLog,
        *,
        default_timeout: float,
        debug: bool = False,
        unavailable_hint: Callable[[RegisteredTool], str | None] | None = None,
        telemetry: Telemetry = OFF,
    ) -> None:
        self.registry = registry
        self.policy = policy
        self.health = health
        self.sanitize = sanitizer
        self.audit = audit
        self.default_timeout = default_timeout
        self.debug = debug
        #: what a tool's BACKEND_UNAVAILABLE errors add (the tools to use meanwhile)
        self.unavailable_hint = unavailable_hint
        self.telemetry = telemetry

    def _error(
        self, err: GatewayError, tool: RegisteredTool | None, cid: str | None = None
    ) -> CallResult:
        message = err.message
        if err.code is ErrorCode.BACKEND_UNAVAILABLE and tool and self.unavailable_hint:
            hint = self.unavailable_hint(tool)
            message = f"{message}; {hint}" if hint else message
        payload = error_payload(
            err.code,
            self.sanitize(message),
            retryable=err.retryable,
            details=self._clean(err.details) if err.details else None,
            correlation_id=cid,
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

    async def call(
        self,
        name: str,
        arguments: dict[str, Any] | None,
        *,
        progress: ProgressFn | None = None,
    ) -> CallResult:
        with self.telemetry.tool_call(name) as trace:
            result = await self._call(name, arguments, progress, trace)
            error = result.payload["error"] if result.is_error else None
            trace.finish(error["code"] if error else None, correlation_id=result.correlation_id)
        return result

    async def _call(
        self,
        name: str,
        arguments: dict[str, Any] | None,
        progress: ProgressFn | None,
        trace: CallTrace,
    ) -> CallResult:
        # 1. policy
        tool = self.registry.get(name) if isinstance(name, str) else None
        if tool is None:
            trace.refused("unknown_tool")
            withheld = self.registry.why_withheld(name) if isinstance(name, str) else None
            return self._error(
                GatewayError(
                    ErrorCode.NOT_FOUND,
                    f"tool {name!r} is not served: {withheld}"
                    if withheld
                    else f"unknown tool {str(name)[:80]!r}; list the tools to see what exists",
                ),
                None,
            )
        trace.describe(
            tool.name,
            plugin=tool.plugin.name,
            tier=tool.tier.value,
            timeout=tool.spec.timeout or self.default_timeout,
            backend=tool.spec.backend_name,
        )
        hidden = self.policy.hidden_reason(tool)
        if hidden:
            trace.refused("denied" if tool.name in self.policy.deny_tools else "read_only")
            return self._error(
                GatewayError(ErrorCode.PERMISSION_DENIED, f"tool {name!r} is {hidden}"), tool
            )
        caller = current_caller()
        scope = self.policy.missing_scope(tool, caller)
        if scope is not None:
            return self._error(
                GatewayError(
                    ErrorCode.PERMISSION_DENIED,
                    f"tool {name!r} needs the OAuth scope {scope}, which the access token does "
                    "not carry; sign in again asking for it, or ask an administrator to grant it",
                    details={"missing_scope": scope},
                ),
                tool,
            )
        # 2. validation, before any I/O, as strict as the published schema
        try:
            args = validate_arguments(tool.spec.input_model, arguments, tool.arg_guard)
        except GatewayError as err:
            return self._error(err, tool)
        arguments = arguments or {}

        cid = uuid.uuid4().hex[:12]
        mutation = tool.tier is Tier.MUTATION
        started = time.perf_counter()
        if mutation and not self.audit.write(
            {
                "tool": name,
                "plugin": tool.plugin.name,
                "correlation_id": cid,
                "outcome": "STARTED",
                "arguments": redact_arguments(arguments),
                **caller.audit_fields(),
            }
        ):
            # Fail closed: a change nobody could trace afterwards is not made.
            trace.refused("audit_unavailable")
            return self._error(
                GatewayError(
                    ErrorCode.INTERNAL_ERROR,
                    f"tool {name!r} was not run: the audit log cannot be written, so the "
                    "gateway refuses every change until it can; nothing was done. Tell the "
                    "operator (the gateway log has the reason)",
                ),
                tool,
                cid,
            )

        def outcome(code: str) -> None:
            if mutation:
                self.audit.write(
                    {
                        "tool": name,
                        "plugin": tool.plugin.name,
                        "correlation_id": cid,
                        "outcome": code,
                        "duration_ms": round((time.perf_counter() - started) * 1000, 1),
                        **caller.audit_fields(),
                    }
                )

        try:
            result = await self._run(tool, args, cid, progress, trace)
        except BaseException:
            # Only a cancellation of the call (the client's, shutdown's) gets here: the change
            # may be half done, and the log must say so, not leave STARTED alone.
            outcome("CANCELLED")
            raise
        outcome(result.code)
        result.correlation_id = cid
        return result

    async def run(self, tool: RegisteredTool, args: BaseModel) -> CallResult:
        """Steps 3-6 for arguments already valid: what a call does after policy and validation,
        without the audit (the test kit's way to run a tool with a replaced handler)."""
        return await self._run(tool, args, uuid.uuid4().hex[:12], None)

    async def _run(
        self,
        tool: RegisteredTool,
        args: BaseModel,
        cid: str,
        progress: ProgressFn | None,
        trace: CallTrace = NO_CALL,
    ) -> CallResult:
        spec = tool.spec
        # 3. breaker (and "not configured") for the tool's backend
        breaker = None
        backend = spec.backend_name
        if backend:
            try:
                breaker = self.health.gate(backend)
            except GatewayError as err:
                trace.breaker(self.health.breaker_states()[backend]["state"])
                return self._error(err, tool)
            trace.breaker(breaker.state.value)

        async def report(p: float, total: float | None, message: str | None) -> None:
            if progress is not None:
                await progress(p, total, self.sanitize(message, max_chars=200) if message else None)

        ctx: ToolContext[Any] = ToolContext(tool.plugin, spec.name, cid, report)
        timeout = spec.timeout or self.default_timeout
        # 4. run under the timeout; a real cancellation passes straight through
        state = CallState()
        token = CURRENT_CALL.set(state)
        try:
            try:
                with anyio.fail_after(timeout):
                    raw = await spec.handler(args, ctx)
                payload, text = self._shape(tool, raw)
            except GatewayError as err:
                outcome = self._error(err, tool)
            except TimeoutError:
                outcome = self._error(
                    GatewayError(
                        ErrorCode.TIMEOUT,
                        f"tool {spec.name!r} did not finish within {timeout:g} s; "
                        "retry later or with a smaller request",
                        backend_down=backend is not None and state.cancelled_waiting_on == backend,
                    ),
                    tool,
                )
            except ValidationError as exc:
                outcome = self._internal(tool, cid, exc)
            except Exception as exc:
                mapped = classify_exception(exc)
                if mapped is not None:
                    log.warning(
                        "tool=%s correlation_id=%s %s: %s",
                        spec.name,
                        cid,
                        type(exc).__name__,
                        self.sanitize(str(exc)),
                    )
                    outcome = self._error(mapped, tool)
                else:
                    outcome = self._internal(tool, cid, exc)
            except BaseException as exc:
                # SystemExit, KeyboardInterrupt or a CancelledError nobody asked for, raised by
                # plugin code: it would end the process, and Claude Code never restarts a stdio
                # server. Only a cancellation of this call (the client's, shutdown's) goes on.
                if not plugin_fault(exc):
                    raise
                outcome = self._internal(tool, cid, exc)
            else:
                outcome = self._without_secrets(CallResult(payload, False, tool, text), cid)
        except BaseException:
            if breaker is not None:
                breaker.release()
            raise
        finally:
            CURRENT_CALL.reset(token)
        if breaker is not None:
            # Only the backend's own failures count: a plugin's local trouble (no git binary, a
            # handler timeout) or an error the backend answered says nothing about its health.
            if outcome.backend_down:
                breaker.record_failure()
            elif outcome.is_error and not _backend_answered(outcome.code):
                breaker.release()
            else:
                breaker.record_success()
        return outcome

    def _without_secrets(self, result: CallResult, cid: str) -> CallResult:
        # 6. a backend may echo a configured secret inside data (a tag name, a file). Search the
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

    def _shape(self, tool: RegisteredTool, raw: Any) -> tuple[dict[str, Any], str]:
        # 5. the complete JSON payload (Claude Code shows the model only structuredContent) and
        # the same JSON as compact text, both encodable: a lone surrogate from a backend would
        # make the transport's writer raise (stdio ended, HTTP answered 500). pydantic encodes
        # in native code and refuses a surrogate itself; a dict's text is checked, which costs
        # nothing for ASCII and one UTF-8 pass otherwise.
        model = tool.spec.output_model
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

    def _internal(self, tool: RegisteredTool, cid: str, exc: BaseException) -> CallResult:
        # 6. the client gets a generic message; the detail goes to stderr, redacted
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
        return self._error(
            GatewayError(
                ErrorCode.INTERNAL_ERROR,
                f"tool {tool.name!r} failed unexpectedly; report the correlation_id: the "
                "gateway log has the details under it",
            ),
            tool,
            cid,
        )
