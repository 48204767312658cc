"""Bounded JSON requests to the identity provider (metadata, keys, introspection)."""

from __future__ import annotations

import json
from typing import Any

import httpx

#: A JWKS or a metadata document is a few KB; anything past this is not one.
MAX_BODY = 512 * 1024


class IssuerUnavailable(Exception):
    """The identity provider's metadata, keys or introspection cannot be had right now. Not
    the caller's fault: the transport answers 503 and the caller retries later. The message
    is for the gateway log only."""

    def __init__(self, message: str, *, status: int | None = None) -> None:
        super().__init__(message)
        self.status = status


async def fetch_json(
    http: httpx.AsyncClient,
    method: str,
    url: str,
    what: str,
    *,
    data: dict[str, str] | None = None,
    auth: httpx.Auth | None = None,
) -> dict[str, Any]:
    """The JSON object at ``url``; :class:`IssuerUnavailable` for anything else (no answer,
    a status other than 200, a body too large or not a JSON object). Redirects are not
    followed: keys come from where the configuration says, not from where a reply points."""
    try:
        async with http.stream(
            method, url, data=data, auth=auth, headers={"Accept": "application/json"}
        ) as resp:
            if resp.status_code != 200:
                raise IssuerUnavailable(
                    f"{what} answered HTTP {resp.status_code}", status=resp.status_code
                )
            chunks: list[bytes] = []
            size = 0
            async for chunk in resp.aiter_bytes():
                size += len(chunk)
                if size > MAX_BODY:
                    raise IssuerUnavailable(f"{what} sent more than {MAX_BODY} bytes")
                chunks.append(chunk)
    except httpx.HTTPError as exc:
        raise IssuerUnavailable(f"{what} cannot be reached ({type(exc).__name__})") from None
    try:
        value = json.loads(b"".join(chunks))
    except ValueError:
        raise IssuerUnavailable(f"{what} did not send JSON") from None
    if not isinstance(value, dict):
        raise IssuerUnavailable(f"{what} did not send a JSON object")
    return value
