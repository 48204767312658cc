"""Who is calling: the identity a verified token (or the local OS user) stands for.

An :class:`Identity` never holds the token itself, so nothing that logs, audits or shows an
identity can leak one. The HTTP guard sets :data:`CURRENT_CALLER` for the duration of a
request; the MCP SDK runs the request's handlers in tasks started from it, which copy the
context, so the call pipeline reads the caller with :func:`current_caller`.
"""

from __future__ import annotations

import functools
import os
from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass
from typing import Any, Literal

#: How the caller was established: a JWT or an introspected token (OAuth), the local OS user
#: (stdio), the static shared token, or nothing at all (HTTP on loopback without a token).
Via = Literal["jwt", "introspection", "local", "token", "anonymous"]


@dataclass(frozen=True)
class Identity:
    """``scopes`` is ``None`` for callers no scope limits: the local OS user on stdio, the
    holder of the static shared token and the anonymous loopback caller (those modes have one
    caller who may do everything the deployment's policy allows)."""

    subject: str | None
    client_id: str | None
    scopes: frozenset[str] | None
    via: Via
    issuer: str | None = None
    expires_at: int | None = None

    def holds(self, scope: str) -> bool:
        return self.scopes is None or scope in self.scopes

    def audit_fields(self) -> dict[str, str | None]:
        """What every audit line records about the caller."""
        return {"subject": self.subject, "client": self.client_id}

    def as_status(self) -> dict[str, Any]:
        """What ``gateway_status`` shows the caller about itself."""
        return {
            "subject": self.subject,
            "client": self.client_id,
            "scopes": None if self.scopes is None else sorted(self.scopes),
            "authenticated_by": self.via,
            "expires_at": self.expires_at,
        }


#: Over HTTP without OAuth: whoever holds the one shared token (it says nothing about who
#: that is), and a caller on loopback when no token is set.
TOKEN_HOLDER = Identity(subject=None, client_id=None, scopes=None, via="token")
ANONYMOUS = Identity(subject=None, client_id=None, scopes=None, via="anonymous")

#: The caller of the request being served; ``None`` outside a request (then see
#: :func:`current_caller`).
CURRENT_CALLER: ContextVar[Identity | None] = ContextVar("gateway_current_caller", default=None)


@functools.lru_cache(maxsize=1)
def local_identity() -> Identity:
    """The operating-system account running the gateway: who a stdio call comes from (the
    user who started the client, which launched the gateway). Asked of the system by user id,
    never read from ``LOGNAME``/``USER``, which whoever starts the process sets (a project's
    ``.mcp.json`` ``env`` can name anyone, newlines included)."""
    return Identity(subject=_os_account(), client_id="stdio", scopes=None, via="local")


def _os_account() -> str:
    if not hasattr(os, "getuid"):  # Windows: the logon session's user, not a variable
        try:
            return os.getlogin()
        except OSError:
            return "unknown"
    import pwd

    uid = os.getuid()
    try:
        return pwd.getpwuid(uid).pw_name
    except KeyError:  # no passwd entry (a container run with an arbitrary --user)
        return f"uid:{uid}"


def current_caller() -> Identity:
    """The caller of the running request; the local OS user when no transport set one."""
    return CURRENT_CALLER.get() or local_identity()


@contextmanager
def calling_as(identity: Identity) -> Iterator[Identity]:
    """Run the enclosed code as ``identity`` (what the HTTP guard does around a request)."""
    token = CURRENT_CALLER.set(identity)
    try:
        yield identity
    finally:
        CURRENT_CALLER.reset(token)
