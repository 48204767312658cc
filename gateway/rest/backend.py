"""A REST backend as plugins declare it: plain data, cheap to build at import.

A :class:`RestBackend` is the backend's identity: its name, its settings and where they come
from, how to check its health, how to authenticate. Tools name it (see
:class:`gateway.rest.RestTool`); the core then builds its settings once, registers one health
check, keeps one circuit breaker and opens one keep-alive client for it, however many plugins
use it (:mod:`gateway.rest.hub`): two plugins that talk to the same API (declaring backends with
the same ``name``) share all of that when installed together, and each still works alone.
"""

from __future__ import annotations

import base64
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from .settings import RestSettings, basic_credentials, basic_secrets


def bearer_auth(settings: RestSettings) -> dict[str, str]:
    """The default: ``Authorization: Bearer <token>`` when a token is set."""
    if settings.token is None:
        return {}
    return {"Authorization": f"Bearer {settings.token.get_secret_value()}"}


def basic_auth(user: str, password: str) -> dict[str, str]:
    return {"Authorization": "Basic " + basic_credentials(user, password)}


def header_secrets(headers: Mapping[str, str]) -> list[str]:
    """The credentials inside the headers an ``auth`` function returns, for the sanitizer: of
    ``Authorization`` the value after the scheme word (``Bearer``, ``token``, ``Basic``), and
    for basic auth also the decoded ``user:password`` and password; any other header's value
    (``X-Api-Key``) whole."""
    out: list[str] = []
    for name, value in headers.items():
        scheme, _, credential = value.strip().partition(" ")
        credential = credential.strip()
        if name.lower() not in ("authorization", "proxy-authorization") or not credential:
            out.append(value.strip())
            continue
        out.append(credential)
        if scheme.lower() == "basic":
            try:
                pair = base64.b64decode(credential, validate=True).decode()
            except ValueError:
                continue
            user, _, password = pair.partition(":")
            out.extend(basic_secrets(user, password))
    return out


@dataclass(frozen=True)
class RestBackend:
    """One REST API. ``name`` is its identity (one breaker, health check and client per name).

    ``settings``: a :class:`RestSettings` subclass (its ``env_prefix`` names the variables).
    ``settings_table``: the ``[plugins.<table>]`` that configures it; every plugin declaring the
    backend reads the same table. ``title`` names it in messages ("the orchestrator API").
    ``health_path``: a GET that answers 2xx when the API is up; ``health_detail`` turns its
    decoded answer into the short detail health reports (raising ``ValueError`` when the
    answer is not what this API sends). ``api_prefix`` is put before every path ("/api/v1").
    ``auth`` turns the settings into request headers (default: bearer token).
    ``down_message``: what tools answer when the backend refuses or drops connections (default:
    a sentence naming ``title`` and its URL). ``fallbacks``: tools, of any plugin, that give
    part of what this API gives, each with what it gives ("reads …"): while the API is
    unconfigured or down, its tools' errors name those the deployment offers.
    """

    name: str
    settings: type[RestSettings]
    settings_table: str
    title: str
    health_path: str | None = None
    health_detail: Callable[[Any], str] | None = field(default=None, compare=False)
    api_prefix: str = ""
    auth: Callable[[Any], Mapping[str, str]] = field(default=bearer_auth, compare=False)
    user_agent: str = "mcp-gateway"
    down_message: str | None = None
    fallbacks: tuple[tuple[str, str], ...] = ()

    @classmethod
    def define(
        cls,
        name: str,
        *,
        env_prefix: str,
        settings_table: str,
        title: str,
        health_path: str | None = None,
        api_prefix: str = "",
    ) -> RestBackend:
        """A backend with the standard settings only, in one statement: what two plugins that
        share an API both write (they then share it, see the module docstring)."""
        settings = type(
            f"{env_prefix.title().replace('_', '')}Settings",
            (RestSettings,),
            {"env_prefix": env_prefix, "__module__": __name__},
        )
        return cls(
            name=name,
            settings=settings,
            settings_table=settings_table,
            title=title,
            health_path=health_path,
            api_prefix=api_prefix,
        )

    def secret_values(self, settings: RestSettings) -> list[str]:
        """Every secret of this backend for the sanitizer: those of its settings, and the
        credentials its ``auth`` puts into headers (a basic-auth pair encoded, too)."""
        out = settings.secret_values()
        if settings.configured:
            try:
                headers = self.auth(settings)
            except Exception:  # a broken auth function fails the first call, not start-up
                return out
            out.extend(header_secrets(headers))
        return out

    def not_configured(self) -> str:
        env = self.settings.env_prefix
        where = f"{env}_URL" if env else "url"
        return (
            f"{self.title} is not configured: set {where} (or url in "
            f"[plugins.{self.settings_table}]) to enable these tools"
        )

    def same_identity(self, other: RestBackend) -> bool:
        """Two declarations of one backend (e.g. in two plugins that share it)."""
        return (
            self.name == other.name
            and self.settings_table == other.settings_table
            and self.api_prefix == other.api_prefix
            and self.health_path == other.health_path
            and self.settings.env_prefix == other.settings.env_prefix
            and set(self.settings.model_fields) == set(other.settings.model_fields)
        )
