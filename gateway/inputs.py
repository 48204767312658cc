"""Asking the client while a call runs: form elicitation, sampling, roots (MCP input requests).

A tool's handler (or a prompt's render function) that needs what only the client has returns
:class:`InputRequired`: requests by name, made with :func:`elicit`, :func:`sample` and
:func:`list_roots`, and optionally ``state``, text it wants back with the answers. The call is
then made again with the answers in ``ctx.inputs`` (:class:`Inputs`), and the handler decides
from them whether to ask more (another round, with new state) or finish::

    answer = ctx.inputs.accepted("user_name")
    if answer is None:
        return InputRequired({"user_name": elicit("What is your name?", NameForm)})
    return {"greeting": f"Hello, {answer['name']}!"}

The handler is written once for every client. On 2026-07-28 the gateway answers the request
with an input-required result and the client's next request brings the answers; the state
travels sealed (encrypted and bound to the call, :class:`~mcp.server.request_state.
RequestStateBoundary`), so a handler only ever sees state it wrote. On a 2025 session with a
back channel (stdio) the gateway asks the client itself with server-to-client requests and
calls again. A client that did not declare the capability a request needs is refused with
``-32021`` naming it, before anything is sent: ``ctx.inputs.can("sampling")`` lets a handler
ask only for what the client can answer.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from pydantic import BaseModel

from .errors import ErrorCode, GatewayError

#: The capability (of ``clientCapabilities``) each request needs.
NEEDS = {
    "elicitation/create": "elicitation",
    "sampling/createMessage": "sampling",
    "roots/list": "roots",
}
#: A call asks at most this many rounds on a back channel before it is refused.
MAX_ROUNDS = 10
#: At most this many requests in one round, and this many characters of state.
MAX_REQUESTS = 32
MAX_STATE_CHARS = 16 * 1024


@dataclass(frozen=True)
class InputRequest:
    """One request to the client, as the protocol's JSON (``method`` and ``params``). Make it
    with :func:`elicit`, :func:`sample` or :func:`list_roots`."""

    method: str
    params: Mapping[str, Any] = field(default_factory=dict)

    def wire(self) -> dict[str, Any]:
        return {"method": self.method, "params": dict(self.params)}


#: Forwards one request to the client over the call's back channel and returns its answer
#: (JSON); for a tool that relays another server's requests (a mounted server's).
Forward = Callable[[InputRequest], Awaitable[dict[str, Any]]]

#: In the ``_meta`` of a request the gateway sends a client over a 2025 back channel: its name,
#: the names of the round it belongs to, and (:data:`CALL`) the call it is made for. A gateway
#: mounting this one (at 2025-11-25) tells by them which of its calls the request is for, and
#: gives its own client the round whole, under these names, as an input-required result.
ROUND = "mcp-gateway/inputRound"
#: In the ``_meta`` of a call the gateway makes of a mounted server: a name for the call that
#: a request of the server's (of another gateway, see :data:`ROUND`) may say it is for.
CALL = "mcp-gateway/call"
#: In the ``_meta`` of a call the gateway makes of a mounted server: what the client of the
#: call declared it can be asked (``requiredCapabilities``' shape). A 2026-07-28 server gets it
#: in the protocol's own key; a gateway mounted at 2025-11-25, whose session was told the
#: mounting gateway's capabilities, narrows them by it (:func:`declared`).
FORWARDED_CAPABILITIES = "mcp-gateway/clientCapabilities"


def in_round(request: InputRequest, key: str, keys: list[str], call: Any = None) -> InputRequest:
    """``request`` saying it is ``key`` of a round of ``keys`` for ``call`` (see :data:`ROUND`)."""
    meta = dict(request.params.get("_meta") or {})
    meta[ROUND] = {"key": key, "keys": keys, **({"call": call} if isinstance(call, str) else {})}
    return InputRequest(request.method, {**request.params, "_meta": meta})


def _round(request: InputRequest) -> Mapping[str, Any] | None:
    meta = request.params.get("_meta")
    found = meta.get(ROUND) if isinstance(meta, Mapping) else None
    return found if isinstance(found, Mapping) else None


def round_of(request: InputRequest) -> tuple[str, list[str]] | None:
    """The name and round a request carries (:data:`ROUND`), if it carries them."""
    found = _round(request)
    if found is None:
        return None
    key, keys = found.get("key"), found.get("keys")
    if not isinstance(key, str) or not isinstance(keys, list) or len(keys) > MAX_REQUESTS:
        return None
    names = [k for k in keys if isinstance(k, str) and 0 < len(k) <= 100]
    return (key, names) if 0 < len(key) <= 100 and key in names else None


def call_of(request: InputRequest) -> str | None:
    """The call a request says it is for (:data:`ROUND`), if it says."""
    found = _round(request)
    call = found.get("call") if found is not None else None
    return call if isinstance(call, str) else None


def elicit(message: str, schema: type[BaseModel] | Mapping[str, Any]) -> InputRequest:
    """Ask the user to fill in a form: ``schema`` is a pydantic model of flat fields (strings,
    numbers, booleans, enums) or the JSON Schema of one."""
    if isinstance(schema, type) and issubclass(schema, BaseModel):
        from mcp.server.elicitation import render_elicitation_schema

        requested = render_elicitation_schema(schema)
    else:
        requested = dict(schema)
    return InputRequest("elicitation/create", {"message": message, "requestedSchema": requested})


def sample(
    prompt: str | Sequence[Mapping[str, Any]],
    *,
    max_tokens: int,
    system_prompt: str | None = None,
) -> InputRequest:
    """Ask the client's model for a completion of ``prompt``: a user's text, or messages as
    JSON (``{"role": "user", "content": {"type": "text", "text": …}}``)."""
    messages = (
        [{"role": "user", "content": {"type": "text", "text": prompt}}]
        if isinstance(prompt, str)
        else [dict(m) for m in prompt]
    )
    params: dict[str, Any] = {"messages": messages, "maxTokens": max_tokens}
    if system_prompt is not None:
        params["systemPrompt"] = system_prompt
    return InputRequest("sampling/createMessage", params)


def list_roots() -> InputRequest:
    """Ask for the client's roots (the folders it works in)."""
    return InputRequest("roots/list", {})


@dataclass(frozen=True)
class InputRequired:
    """What a handler returns to ask the client first: ``requests`` by the names the answers
    come back under, and ``state`` the handler wants back with them (at most 16 KiB)."""

    requests: Mapping[str, InputRequest]
    state: str | None = None

    def checked(self) -> InputRequired:
        """This, checked; ``TypeError``/``ValueError`` saying what is wrong."""
        if not isinstance(self.requests, Mapping):
            raise TypeError(
                "InputRequired.requests maps names to elicit(), sample() or list_roots()"
            )
        if not self.requests and self.state is None:
            raise ValueError("InputRequired needs requests or state")
        if len(self.requests) > MAX_REQUESTS:
            raise ValueError(
                f"{len(self.requests)} input requests, over the {MAX_REQUESTS} allowed"
            )
        for key, request in self.requests.items():
            if not isinstance(key, str) or not key or len(key) > 100:
                raise ValueError(f"input request name {str(key)[:40]!r} is not 1-100 characters")
            if not isinstance(request, InputRequest) or request.method not in NEEDS:
                raise TypeError(
                    f"input request {key!r} is a {type(request).__name__}; use elicit(), "
                    "sample() or list_roots()"
                )
        if self.state is not None and (
            not isinstance(self.state, str) or len(self.state) > MAX_STATE_CHARS
        ):
            raise ValueError(
                f"InputRequired.state must be text of at most {MAX_STATE_CHARS} characters"
            )
        return self

    def needs(self) -> set[str]:
        """The client capabilities these requests need."""
        return {NEEDS[r.method] for r in self.requests.values()}

    def wire(self) -> dict[str, dict[str, Any]]:
        """The requests as JSON (what ``inputRequests`` holds)."""
        return {key: r.wire() for key, r in self.requests.items()}

    @classmethod
    def from_wire(cls, requests: Mapping[str, Any] | None, state: str | None) -> InputRequired:
        """From an ``InputRequiredResult``'s JSON (a mounted server's); ``ValueError`` if bad."""
        parsed = {}
        for key, value in (requests or {}).items():
            if not isinstance(value, Mapping) or not isinstance(value.get("params", {}), Mapping):
                raise ValueError(f"input request {str(key)[:40]!r} is not a request")
            parsed[str(key)] = InputRequest(
                str(value.get("method")), dict(value.get("params") or {})
            )
        try:
            return cls(parsed, state).checked()
        except TypeError as exc:
            raise ValueError(str(exc)) from None


@dataclass(frozen=True)
class Inputs:
    """What a call brings back after it asked (``responses``: the client's answers by request
    name, as JSON; ``state``: what the handler put in :class:`InputRequired`), and what the
    client can be asked (``capabilities``: of ``elicitation``, ``sampling``, ``roots``).
    ``forward``: the call's back channel to the client, when its connection has one."""

    responses: Mapping[str, dict[str, Any]] = field(default_factory=dict)
    state: str | None = None
    capabilities: frozenset[str] = frozenset()
    forward: Forward | None = field(default=None, compare=False)

    def answer(self, key: str) -> dict[str, Any] | None:
        """The client's answer to request ``key`` (JSON), if it sent one."""
        found = self.responses.get(key)
        return found if isinstance(found, dict) else None

    def accepted(self, key: str) -> dict[str, Any] | None:
        """The form content of an elicitation ``key`` the user accepted; ``None`` otherwise
        (not answered yet, declined or cancelled)."""
        found = self.answer(key)
        if found is None or found.get("action") != "accept":
            return None
        content = found.get("content")
        return content if isinstance(content, dict) else {}

    def can(self, capability: str) -> bool:
        """Did the client declare ``elicitation``, ``sampling`` or ``roots``?"""
        return capability in self.capabilities


NO_INPUTS = Inputs()


def declared(capabilities: Any, meta: Mapping[str, Any] | None = None) -> frozenset[str]:
    """Which input requests a client's declared capabilities (the SDK's
    ``ClientCapabilities``) allow. A bare ``elicitation: {}`` (the only form before modes
    existed) counts as form elicitation; URL-only does not. A request's ``meta`` saying what
    the client behind a mounting gateway can do (:data:`FORWARDED_CAPABILITIES`) narrows them:
    it never adds one."""
    if capabilities is None:
        return frozenset()
    forwarded = (meta or {}).get(FORWARDED_CAPABILITIES)
    if isinstance(forwarded, Mapping):
        return declared(capabilities) & frozenset(forwarded)
    found = set()
    e = capabilities.elicitation
    if e is not None and (e.form is not None or e.url is None):
        found.add("elicitation")
    if capabilities.sampling is not None:
        found.add("sampling")
    if capabilities.roots is not None:
        found.add("roots")
    return frozenset(found)


def required_capabilities(missing: set[str]) -> dict[str, Any]:
    """``error.data.requiredCapabilities`` of a ``-32021`` refusal."""
    shapes: dict[str, dict[str, Any]] = {"elicitation": {"form": {}}, "sampling": {}, "roots": {}}
    return {name: shapes[name] for name in sorted(missing)}


def responses_json(responses: Mapping[str, Any] | None) -> dict[str, dict[str, Any]]:
    """The client's answers (the SDK's parsed models, or JSON) as JSON by request name."""
    out: dict[str, dict[str, Any]] = {}
    for key, value in (responses or {}).items():
        if isinstance(value, BaseModel):
            out[str(key)] = value.model_dump(by_alias=True, mode="json", exclude_none=True)
        elif isinstance(value, dict):
            out[str(key)] = value
    return out


class MissingCapability(GatewayError):
    """The client lacks a capability what it called needs (a mounted server said so with
    ``-32021``): the call is refused with ``-32021`` naming them, as the gateway refuses one of
    its own (``required``: the ``requiredCapabilities`` object)."""

    def __init__(self, required: Mapping[str, Any], message: str) -> None:
        super().__init__(ErrorCode.PERMISSION_DENIED, message)
        self.required = dict(required)

    @classmethod
    def from_error(cls, data: Any, server: str) -> MissingCapability:
        """From a server's ``-32021`` error data (kept to the capabilities the gateway knows)."""
        found = data.get("requiredCapabilities") if isinstance(data, dict) else None
        names = (
            {k for k in (found or {}) if k in NEEDS.values()} if isinstance(found, dict) else set()
        )
        return cls(
            required_capabilities(names),
            f"MCP server {server!r} needs capabilities the client did not declare: "
            + (", ".join(sorted(names)) or "unnamed ones"),
        )
