"""What the server does with the client during one request: ask it, and log to it.

A tool or a prompt that returns :class:`~gateway.inputs.InputRequired` is answered the way the
client's protocol allows (:meth:`Exchange.run`):

- the capabilities its requests need are checked against those the client declared
  (``-32021`` naming the missing ones, before anything is sent);
- on 2026-07-28: an input-required result; the client's next request brings the answers and
  the state (sealed against tampering by :class:`~mcp.server.request_state.
  RequestStateBoundary`, which :func:`seal_request_state` installs);
- on a 2025 session with a back channel (stdio): the requests are sent to the client as
  server-to-client requests, together, and the tool is run again with the answers (at most
  :data:`~gateway.inputs.MAX_ROUNDS` rounds);
- on a 2025 connection without one (stateless HTTP): an error saying so.

Log messages a call sends (``ctx.log``) reach the client when it asked for that level: on
2026-07-28 in this request's ``_meta``, on 2025 with ``logging/setLevel`` (:class:`LogLevel`).
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, TypeVar

import anyio
import mcp_types as t
from mcp import MCPError
from mcp.shared.message import ServerMessageMetadata
from mcp_types.version import HANDSHAKE_PROTOCOL_VERSIONS
from pydantic import BaseModel, TypeAdapter, ValidationError

from .errors import ErrorCode, GatewayError, Sanitizer
from .inputs import (
    MAX_ROUNDS,
    NEEDS,
    InputRequest,
    InputRequired,
    Inputs,
    MissingCapability,
    declared,
    required_capabilities,
    responses_json,
)
from .spec import LOG_LEVELS

if TYPE_CHECKING:
    from mcp.server import Server, ServerRequestContext

log = logging.getLogger("gateway.asking")

R = TypeVar("R")

_REQUEST: TypeAdapter[t.InputRequest] = TypeAdapter(t.InputRequest)
_RESULT = {
    "elicitation/create": t.ElicitResult,
    "sampling/createMessage": t.CreateMessageResult,
    "roots/list": t.ListRootsResult,
}


class LogLevel:
    """The level a 2025 session asked for with ``logging/setLevel`` (what it gets before it
    asks: ``info`` and above). A stdio process serves one session; over stateless HTTP each
    request is its own, so there the level holds for nothing after the request."""

    def __init__(self) -> None:
        self.level = "info"

    def allows(self, level: str) -> bool:
        return LOG_LEVELS.index(level) >= LOG_LEVELS.index(self.level)


@dataclass
class Exchange:
    """One request's dealings with its client."""

    ctx: ServerRequestContext[Any]
    sanitizer: Sanitizer
    levels: LogLevel | None = None
    #: who sends logs (``logger`` of ``notifications/message``): the tool or prompt
    source: str | None = None

    @property
    def modern(self) -> bool:
        return self.ctx.protocol_version not in HANDSHAKE_PROTOCOL_VERSIONS

    @property
    def capabilities(self) -> frozenset[str]:
        return declared(self.ctx.session.client_capabilities)

    def first_inputs(self, params: Any) -> Inputs:
        """The answers and state this request brings (2026-07-28's retry of a request that
        asked), and what the client can be asked; a back channel to forward requests to."""
        forward = self.forward if self._back_channel() else None
        return Inputs(
            responses=responses_json(getattr(params, "input_responses", None)),
            state=getattr(params, "request_state", None),
            capabilities=self.capabilities,
            forward=forward,
        )

    def _back_channel(self) -> bool:
        return not self.modern and self.ctx.session.can_send_request

    async def run(
        self,
        params: Any,
        attempt: Callable[[Inputs], Awaitable[R | InputRequired]],
        refuse: Callable[[GatewayError], R],
    ) -> R | t.InputRequiredResult:
        """``attempt`` with the request's inputs, asking the client as the module doc says
        until it gives something else than :class:`InputRequired`."""
        inputs = self.first_inputs(params)
        for _ in range(MAX_ROUNDS):
            try:
                out = await attempt(inputs)
            except MissingCapability as exc:
                raise MCPError(
                    t.MISSING_REQUIRED_CLIENT_CAPABILITY,
                    self.sanitizer(exc.message),
                    data={"requiredCapabilities": exc.required},
                ) from None
            if not isinstance(out, InputRequired):
                return out
            if not self.modern and not self._back_channel():
                # Stateless 2025 HTTP: no initialize reaches this request, so what the client
                # declared is unknown; what matters is that it could not be asked anyway.
                return refuse(
                    GatewayError(
                        ErrorCode.PERMISSION_DENIED,
                        "this asks the client for input ("
                        + ", ".join(sorted(out.needs()))
                        + "), which this connection cannot carry: use stdio, or the "
                        "2026-07-28 protocol over HTTP",
                    )
                )
            self.check(out)
            if self.modern:
                return self.result(out)
            try:
                answers = await self.ask_all(out)
            except GatewayError as err:
                return refuse(err)
            inputs = Inputs(answers, out.state, inputs.capabilities, inputs.forward)
        return refuse(
            GatewayError(
                ErrorCode.INTERNAL_ERROR,
                f"asked the client for input {MAX_ROUNDS} times without finishing; given up",
            )
        )

    def check(self, asked: InputRequired) -> None:
        """``-32021`` when the client did not declare a capability the requests need."""
        missing = asked.needs() - self.capabilities
        if missing:
            raise MCPError(
                t.MISSING_REQUIRED_CLIENT_CAPABILITY,
                "the client did not declare the capabilities this needs: "
                + ", ".join(sorted(missing)),
                data={"requiredCapabilities": required_capabilities(missing)},
            )

    def result(self, asked: InputRequired) -> t.InputRequiredResult:
        """The input-required result (2026-07-28); its state is sealed on its way out."""
        try:
            requests = {
                k: _REQUEST.validate_python(v, by_name=False) for k, v in asked.wire().items()
            }
        except ValidationError as exc:
            log.error("an input request is malformed: %s", self.sanitizer(str(exc)))
            raise MCPError(t.INTERNAL_ERROR, "INTERNAL_ERROR: a malformed input request") from None
        return t.InputRequiredResult(input_requests=requests or None, request_state=asked.state)

    async def ask_all(self, asked: InputRequired) -> dict[str, dict[str, Any]]:
        """Send every request to the client together; their answers by name (JSON)."""
        answers: dict[str, dict[str, Any]] = {}

        async def one(key: str, request: InputRequest) -> None:
            answers[key] = await self.forward(request)

        async with anyio.create_task_group() as tg:
            for key, request in asked.requests.items():
                tg.start_soon(one, key, request)
        return answers

    async def forward(self, request: InputRequest) -> dict[str, Any]:
        """One request to the client over the back channel; its answer as JSON. A capability
        the client lacks, a refusal or a malformed answer is a :class:`GatewayError`."""
        need = NEEDS.get(request.method)
        if need is None or need not in self.capabilities:
            raise GatewayError(
                ErrorCode.PERMISSION_DENIED,
                f"the client did not declare the {need or request.method} capability",
            )
        session: Any = self.ctx.session
        try:
            typed = _REQUEST.validate_python(request.wire(), by_name=False)
            answer: BaseModel = await session.send_request(
                typed,
                _RESULT[request.method],
                metadata=ServerMessageMetadata(related_request_id=self.ctx.request_id),
            )
        except MCPError as exc:
            said = self.sanitizer.backend_text(exc.error.message or "", 300)
            raise GatewayError(
                ErrorCode.PERMISSION_DENIED,
                f"the client refused the {request.method} request: {said}",
            ) from None
        except ValidationError:
            raise GatewayError(
                ErrorCode.BACKEND_ERROR,
                f"the client's answer to {request.method} is not one",
                retryable=False,
            ) from None
        return answer.model_dump(by_alias=True, mode="json", exclude_none=True)

    async def log(self, level: str, message: str) -> None:
        """A ``notifications/message`` on this request's stream, when the client asked for
        ``level``; a client gone meanwhile loses it."""
        from mcp.server.connection import allowed_log_levels

        if self.modern:
            if level not in allowed_log_levels(self.ctx.protocol_version, self.ctx.meta):
                return
        elif self.levels is not None and not self.levels.allows(level):
            return
        notification = t.LoggingMessageNotification(
            params=t.LoggingMessageNotificationParams(
                level=level,  # type: ignore[arg-type]
                data=message,
                logger=self.source,
            )
        )
        try:
            await self.ctx.session.send_notification(
                notification, related_request_id=self.ctx.request_id
            )
        except Exception as exc:  # the client went away: the call goes on
            log.debug("a log message was not delivered: %s", type(exc).__name__)


def seal_request_state(server: Server[Any], principal: Callable[[], str | None]) -> None:
    """Put the SDK's :class:`RequestStateBoundary` on ``server``: every ``requestState`` the
    gateway sends is encrypted and bound to its request (method, name, arguments), its audience
    (the server's name) and its caller (``principal``: who the caller is, ``None`` for callers
    no token names); what comes back is verified before any handler runs (``-32602``
    otherwise). The key is made for this server, so state outlives neither a restart nor a
    move to another replica: the client is then asked again."""
    import os

    from mcp.server.request_state import RequestStateBoundary, RequestStateSecurity

    security = RequestStateSecurity(keys=[os.urandom(32)], bind_principal=lambda ctx: principal())
    server.middleware.append(RequestStateBoundary(security, default_audience=server.name))
