"""The settings every REST backend has, and the credentials they send: plain data, cheap to
import (the client and the backend declaration both build on them).
"""

from __future__ import annotations

import base64
import re
from collections.abc import Mapping
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
