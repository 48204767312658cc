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

A mounted server opened at 2025-11-25 asks over its own connection, in the middle of a call;
a 2026-07-28 client has no back channel to forward that request on. Its call then runs apart
from the request (:class:`Parking`): the request is answered with an input-required result of
what the server asked, and the client's next request brings the answers to the waiting call
and waits for what comes next (another request of the server's, or the result).

Log messages a call sends (``ctx.log``) reach the client when it asked for that level: on
2026-07-28 in this request's ``_meta``, on 2025 with ``logging/setLevel`` (:class:`LogLevel`).
"""

from __future__ import annotations

import asyncio
import logging
import secrets
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Generic, TypeVar

import anyio
import mcp_types as t
from mcp import MCPError
from mcp.shared.message import ServerMessageMetadata
from mcp_types.version import HANDSHAKE_PROTOCOL_VERSIONS
from pydantic import BaseModel, TypeAdapter, ValidationError

from .errors import ErrorCode, GatewayError, Sanitizer
from .inputs import (
    CALL,
    MAX_ROUNDS,
    NEEDS,
    Forward,
    InputRequest,
    InputRequired,
    Inputs,
    MissingCapability,
    declared,
    in_round,
    required_capabilities,
    responses_json,
    round_of,
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


@dataclass(eq=False)  # compared by identity: no __eq__ to compile at start
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
        return declared(self.ctx.session.client_capabilities, self.ctx.meta)

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
        parking: Parking | None = None,
    ) -> R | t.InputRequiredResult:
        """``attempt`` with the request's inputs, asking the client as the module doc says
        until it gives something else than :class:`InputRequired`. ``parking``: on
        2026-07-28, the call may be asked for input over a mounted server's own connection:
        it runs apart from the request (:meth:`parked`)."""
        state = getattr(params, "request_state", None)
        if self.modern and parking is not None:
            return await self.parked(parking, params, attempt)
        if self.modern and isinstance(state, str) and state.startswith(PARKED):
            raise _gone()
        inputs = self.first_inputs(params)
        for _ in range(MAX_ROUNDS):
            try:
                out = await attempt(inputs)
            except MissingCapability as exc:
                raise _refused(self.sanitizer(exc.message), exc.required) from None
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
            raise _refused(
                "the client did not declare the capabilities this needs: "
                + ", ".join(sorted(missing)),
                required_capabilities(missing),
            )

    async def parked(
        self,
        parking: Parking,
        params: Any,
        attempt: Callable[[Inputs], Awaitable[R | InputRequired]],
    ) -> R | t.InputRequiredResult:
        """A call that a server may ask mid-call (2026-07-28): started apart from this
        request, or (its state names it) given the answers and resumed; then this request
        answers what the call asks next, or its result."""
        state = getattr(params, "request_state", None)
        if isinstance(state, str) and state.startswith(PARKED):
            call = parking.get(state[len(PARKED) :])
            if call is None:
                raise _gone()
            call.answer(responses_json(getattr(params, "input_responses", None)))
        else:
            capabilities = self.capabilities

            async def run(forward: Forward) -> Any:
                return await attempt(Inputs(capabilities=capabilities, forward=forward))

            call = parking.start(run)
        deadline: float | None = None
        while True:
            if call.done:
                parking.drop(call)
                out = call.outcome()
                if isinstance(out, MissingCapability):
                    raise _refused(self.sanitizer(out.message), out.required)
                if isinstance(out, BaseException):
                    raise out
                if isinstance(out, InputRequired):
                    self.check(out)
                    return self.result(out)
                return out  # type: ignore[no-any-return]
            asked = call.unanswered()
            if asked:
                missing = {NEEDS.get(r.method, r.method) for r in asked.values()}
                missing -= self.capabilities
                if missing:
                    parking.drop(call, cancel=True)
                    raise _refused(
                        "the client did not declare the capabilities this needs: "
                        + ", ".join(sorted(missing)),
                        required_capabilities(missing & set(NEEDS.values())),
                    )
                if call.round_open():
                    # The server said these belong to a round (another gateway, see
                    # gateway.inputs.ROUND) of which more are on their way: they go together.
                    deadline = deadline or anyio.current_time() + ROUND_WAIT
                    if anyio.current_time() < deadline:
                        with anyio.move_on_after(deadline - anyio.current_time()):
                            await call.next_change()
                        continue
                return self.result(InputRequired(asked, state=PARKED + call.id))
            deadline = None
            await call.next_change()

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

        names = list(asked.requests)
        call = (self.ctx.meta or {}).get(CALL)
        refused: list[GatewayError] = []

        async def one(key: str, request: InputRequest, scope: anyio.CancelScope) -> None:
            try:
                answers[key] = await self.forward(in_round(request, key, names, call))
            except GatewayError as err:  # the first refusal ends the round
                refused.append(err)
                scope.cancel()

        async with anyio.create_task_group() as tg:
            for key, request in asked.requests.items():
                tg.start_soon(one, key, request, tg.cancel_scope)
        if refused:
            raise refused[0]
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


#: The state of a request answered with what a parked call was asked (see :class:`Parking`).
PARKED = "parked:"


def _refused(message: str, required: dict[str, Any]) -> MCPError:
    return MCPError(
        t.MISSING_REQUIRED_CLIENT_CAPABILITY, message, data={"requiredCapabilities": required}
    )


def _gone() -> MCPError:
    return MCPError(
        t.INVALID_PARAMS,
        "the call these answers were for is no longer waiting (it ended, or the gateway "
        "restarted): make the call again",
    )


@dataclass(eq=False)  # compared by identity: no __eq__ to compile at start
class ParkedCall(Generic[R]):
    """One call running apart from the requests of its client, and what it was asked."""

    id: str
    started: float
    task: asyncio.Task[None] | None = None
    done: bool = False
    #: what it was asked and not yet answered: name -> (request, answered, the answer)
    asked: dict[str, tuple[InputRequest, anyio.Event, list[Any]]] = field(default_factory=dict)
    #: the names of what it was asked and got answers to
    answered: set[str] = field(default_factory=set)
    _result: list[Any] = field(default_factory=list)
    _changed: anyio.Event = field(default_factory=anyio.Event)
    _count: int = 0

    async def park(self, request: InputRequest) -> dict[str, Any]:
        """What a mounted server's request waits on: the client's answer in a later request.
        It is asked under the name its round gives it (:data:`gateway.inputs.ROUND`), else
        one made up."""
        self._count += 1
        named = round_of(request)
        key = named[0] if named else f"{request.method.split('/')[0]}-{self._count}"
        if key in self.asked or key in self.answered:
            key = f"{key}-{self._count}"
        answered = anyio.Event()
        holder: list[Any] = []
        self.asked[key] = (request, answered, holder)
        self._changed.set()
        await answered.wait()
        return holder[0]  # type: ignore[no-any-return]

    def unanswered(self) -> dict[str, InputRequest]:
        return {key: request for key, (request, answered, _) in self.asked.items()}

    def round_open(self) -> bool:
        """Does a request asked say more of its round are still to come?"""
        for request, _, _ in self.asked.values():
            named = round_of(request)
            if named and not set(named[1]) <= set(self.asked) | self.answered:
                return True
        return False

    def answer(self, responses: dict[str, dict[str, Any]]) -> None:
        """The client's answers, by the names it was asked under; what it left out is asked
        again (an answer to nothing asked is ignored)."""
        for key, answer in responses.items():
            found = self.asked.pop(key, None)
            if found is not None:
                self.answered.add(key)
                found[2].append(answer)
                found[1].set()

    async def next_change(self) -> None:
        """Wait until it is asked something more, or ends."""
        await self._changed.wait()
        self._changed = anyio.Event()

    def finish(self, value: Any) -> None:
        self._result.append(value)
        self.done = True
        self._changed.set()

    def outcome(self) -> Any:
        return self._result[0] if self._result else None


class Parking:
    """Calls that wait for their client's answers across requests (2026-07-28): a mounted
    server opened at 2025-11-25 asks mid-call over its own connection, which the client cannot
    be reached on. Such a call runs in a task of its own; each request of the client brings
    answers (by the state sealed into the previous answer, ``parked:<id>``) and waits for what
    the call asks next or its result. A call nobody comes back for is cancelled after
    :data:`PARKED_SECONDS` (the call's own timeout usually ends it first); at most
    :data:`MAX_PARKED` wait at once."""

    def __init__(self) -> None:
        self._calls: dict[str, ParkedCall[Any]] = {}

    def start(self, run: Callable[[Forward], Awaitable[Any]]) -> ParkedCall[Any]:
        self._sweep()
        if len(self._calls) >= MAX_PARKED:
            raise MCPError(
                t.INTERNAL_ERROR,
                f"{MAX_PARKED} calls already wait for their clients' answers: try again later",
            )
        call: ParkedCall[Any] = ParkedCall(secrets.token_urlsafe(16), time.monotonic())

        async def body() -> None:
            try:
                call.finish(await run(call.park))
            except asyncio.CancelledError:
                call.finish(GatewayError(ErrorCode.TIMEOUT, "the call waited too long"))
                raise
            except BaseException as exc:  # handed to the request that waits for it
                call.finish(exc)

        # A task of its own, not the request's: the call outlives the request that started it.
        call.task = asyncio.get_running_loop().create_task(body())
        self._calls[call.id] = call
        return call

    def get(self, ident: str) -> ParkedCall[Any] | None:
        self._sweep()
        return self._calls.get(ident)

    def drop(self, call: ParkedCall[Any], *, cancel: bool = False) -> None:
        self._calls.pop(call.id, None)
        if cancel and call.task is not None and not call.task.done():
            call.task.cancel()

    def _sweep(self) -> None:
        now = time.monotonic()
        for call in [c for c in self._calls.values() if now - c.started > PARKED_SECONDS]:
            self.drop(call, cancel=True)


#: How long a parked call waits for its client to come back, and how many may wait at once.
PARKED_SECONDS = 600.0
MAX_PARKED = 1000
#: How long the rest of a round a server announced may take to arrive (it is sent together).
ROUND_WAIT = 2.0
