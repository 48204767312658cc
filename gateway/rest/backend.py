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
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, ClassVar
from urllib.parse import unquote, urlsplit

from pydantic import BaseModel, ConfigDict, Field, SecretStr, field_validator, model_validator

# The settings every REST backend has, named after the backend's usual variables.
#
# Subclass :class:`RestSettings` and set ``env_prefix``: with ``env_prefix = "COCKPIT_API"`` the
# fields read ``COCKPIT_API_URL``, ``COCKPIT_API_TOKEN``, ``COCKPIT_API_REQUEST_TIMEOUT``,
# ``COCKPIT_API_MAX_CONCURRENCY``, ``COCKPIT_API_VERIFY_TLS``, ``COCKPIT_API_MAX_RESPONSE_BYTES``
# and ``COCKPIT_API_MAX_RESPONSE_VALUES``, and the same keys (``url``, ``token``, …) in the backend's
# ``[plugins.<table>]``. A subclass adds fields of its own with :func:`gateway.env_field`.

_HTTP_URL = re.compile(r"^https?://[^/\s?#]+(/[^\s?#]*)?$")


def env_suffix(suffix: str, default: Any, *, description: str, **rules: Any) -> Any:
    """A field read from ``<env_prefix>_<suffix>`` (see :func:`gateway.config.build_settings`)."""
    return Field(
        default, description=description, json_schema_extra={"env_suffix": suffix}, **rules
    )


class RestSettings(BaseModel):
    """Connection settings of one REST backend; ``configured`` is true once ``url`` is set."""

    model_config = ConfigDict(extra="forbid")
    env_prefix: ClassVar[str] = ""

    url: str | None = env_suffix(
        "URL", None, description="Base URL of the API, e.g. http://127.0.0.1:8085"
    )
    token: SecretStr | None = env_suffix(
        "TOKEN", None, description="Sent as 'Authorization: Bearer <token>' when set"
    )
    request_timeout: float = env_suffix(
        "REQUEST_TIMEOUT", 15.0, gt=0, le=600, description="Seconds per HTTP request"
    )
    max_concurrency: int = env_suffix(
        "MAX_CONCURRENCY",
        8,
        ge=1,
        le=64,
        description="Requests in flight at once over one keep-alive client",
    )
    verify_tls: bool = env_suffix("VERIFY_TLS", True, description="Verify the TLS certificate")
    max_response_bytes: int = env_suffix(
        "MAX_RESPONSE_BYTES",
        8 * 1024 * 1024,
        ge=1024,
        le=1024 * 1024 * 1024,
        description="Answers larger than this (after decompression) are refused, not read",
    )
    max_response_values: int = env_suffix(
        "MAX_RESPONSE_VALUES",
        200_000,
        ge=1000,
        le=10_000_000,
        description="Answers holding more JSON values than this are refused before they are parsed",
    )

    @field_validator("url")
    @classmethod
    def _url(cls, value: str | None) -> str | None:
        if value is None or not value.strip():
            return None
        value = value.strip().rstrip("/")
        if not _HTTP_URL.match(value):
            raise ValueError(
                "must be an http:// or https:// URL without query or fragment, "
                "e.g. http://127.0.0.1:8085"
            )
        return value

    @model_validator(mode="after")
    def _one_kind_of_credentials(self) -> RestSettings:
        if self.url and self.token is not None and urlsplit(self.url).username is not None:
            name = f"{self.env_prefix}_TOKEN" if self.env_prefix else "token"
            raise ValueError(
                f"url carries user:password@ and {name} is set too; only one of them would be "
                "sent: remove the credentials from the URL or unset the token"
            )
        return self

    @property
    def configured(self) -> bool:
        return self.url is not None

    def env_name(self, suffix: str) -> str:
        """The variable a field is read from, for messages ("set COCKPIT_API_URL")."""
        return f"{self.env_prefix}_{suffix}" if self.env_prefix else suffix.lower()

    def secret_values(self) -> list[str]:
        """Every secret these settings hold, for the sanitizer: tokens, passwords, and the
        credentials of a URL's ``user:password@`` in every form they travel in."""
        out = []
        for name in type(self).model_fields:
            value = getattr(self, name, None)
            if isinstance(value, SecretStr):
                out.append(value.get_secret_value())
            elif isinstance(value, str) and "://" in value:
                parts = urlsplit(value)
                if parts.password:
                    out.append(parts.password)  # as written, perhaps percent-encoded
                    # httpx sends URL credentials decoded, as basic auth.
                    out.extend(
                        basic_secrets(unquote(parts.username or ""), unquote(parts.password))
                    )
        return out


def basic_credentials(user: str, password: str) -> str:
    """What ``Authorization: Basic …`` carries: base64 of ``user:password``."""
    return base64.b64encode(f"{user}:{password}".encode()).decode("ascii")


def basic_secrets(user: str, password: str) -> list[str]:
    """Basic-auth credentials in every form a backend may echo them: the password, the
    ``user:password`` pair and its base64 (padded and not)."""
    encoded = basic_credentials(user, password)
    return [password, f"{user}:{password}", encoded, encoded.rstrip("=")]


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
