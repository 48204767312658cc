"""A REST backend as plugins declare it, and the core's hub of backends.

A :class:`RestBackend` is the backend's identity: its name, its settings and where they come
from, how to check its health, how to authenticate. Tools name it in ``ToolSpec.backend``; the
core then builds its settings once, registers one health check, keeps one circuit breaker and
opens one keep-alive client for it, however many plugins use it: two plugins that talk to the
same API (declaring backends with the same ``name``) share all of that when installed together,
and each still works alone.
"""

from __future__ import annotations

import base64
import logging
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from ..config import build_settings
from ..errors import ErrorCode, GatewayError
from ..spec import HealthCheck
from .settings import RestSettings

if TYPE_CHECKING:
    from .client import RestClient

log = logging.getLogger("gateway.rest")


def bearer_auth(settings: RestSettings) -> dict[str, str]:
    """The default: ``Authorization: Bearer <token>`` when a token is set."""
    if settings.token is None:
        return {}
    return {"Authorization": f"Bearer {settings.token.get_secret_value()}"}


def basic_auth(user: str, password: str) -> dict[str, str]:
    raw = f"{user}:{password}".encode()
    return {"Authorization": "Basic " + base64.b64encode(raw).decode("ascii")}


@dataclass(frozen=True)
class RestBackend:
    """One REST API. ``name`` is its identity (one breaker, health check and client per name).

    ``settings``: a :class:`RestSettings` subclass (its ``env_prefix`` names the variables).
    ``settings_table``: the ``[plugins.<table>]`` that configures it; every plugin declaring the
    backend reads the same table. ``title`` names it in messages ("the orchestrator API").
    ``health_path``: a GET that answers 2xx when the API is up; or ``health``, a function of the
    client returning a short detail. ``api_prefix`` is put before every path ("/api/v1").
    ``auth`` turns the settings into request headers (default: bearer token).
    ``down_message``: what tools answer when the backend refuses or drops connections (default:
    a sentence naming ``title`` and its URL).
    """

    name: str
    settings: type[RestSettings]
    settings_table: str
    title: str
    health_path: str | None = None
    health: Callable[[RestClient], Awaitable[str | None]] | None = field(
        default=None, compare=False
    )
    api_prefix: str = ""
    auth: Callable[[Any], Mapping[str, str]] = field(default=bearer_auth, compare=False)
    user_agent: str = "mcp-gateway"
    down_message: str | None = None

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


class BackendConflict(Exception):
    """A plugin declares a backend name already declared differently."""


@dataclass
class _Entry:
    backend: RestBackend
    settings: RestSettings
    users: list[str]
    client: RestClient | None = None


class BackendHub:
    """The core's REST backends: settings built once per name, clients opened on first use
    (so httpx is imported by the first call, not at start-up) and closed at shut-down."""

    def __init__(self, plugin_tables: Callable[[str], dict[str, Any]], env: Mapping[str, str]):
        self._tables = plugin_tables
        self._env = env
        self._entries: dict[str, _Entry] = {}

    def declare(self, backend: RestBackend, plugin: str) -> RestSettings:
        """Record that ``plugin`` uses ``backend``; build its settings the first time.

        Raises :class:`BackendConflict` when the name is declared differently elsewhere, and
        pydantic's ``ValidationError`` when the settings do not validate.
        """
        entry = self._entries.get(backend.name)
        if entry is not None:
            if not entry.backend.same_identity(backend):
                raise BackendConflict(
                    f"backend {backend.name!r} is already declared differently by plugin "
                    f"{entry.users[0]!r}; a shared backend needs the same settings table, "
                    "fields, prefix and health path"
                )
            if plugin not in entry.users:
                entry.users.append(plugin)
            return entry.settings
        settings = build_settings(backend.settings, self._tables(backend.settings_table), self._env)
        assert isinstance(settings, RestSettings)
        self._entries[backend.name] = _Entry(backend, settings, [plugin])
        return settings

    def remove_plugin(self, plugin: str) -> list[RestClient]:
        """Forget a plugin; return the clients of backends no other plugin uses (to close)."""
        orphans = []
        for name, entry in list(self._entries.items()):
            if plugin in entry.users:
                entry.users.remove(plugin)
                if not entry.users:
                    del self._entries[name]
                    if entry.client is not None:
                        orphans.append(entry.client)
        return orphans

    def settings(self, backend: RestBackend | str) -> RestSettings:
        name = backend if isinstance(backend, str) else backend.name
        return self._entries[name].settings

    def users(self, name: str) -> list[str]:
        entry = self._entries.get(name)
        return list(entry.users) if entry else []

    def client(self, backend: RestBackend) -> RestClient:
        entry = self._entries.get(backend.name)
        if entry is None:
            raise GatewayError(
                ErrorCode.INTERNAL_ERROR,
                f"backend {backend.name!r} was not declared by any loaded plugin",
            )
        if not entry.settings.configured:
            raise GatewayError(
                ErrorCode.BACKEND_UNAVAILABLE, entry.backend.not_configured(), retryable=False
            )
        if entry.client is None:
            from .client import RestClient  # httpx is imported here, on first use

            entry.client = RestClient(entry.backend, entry.settings)
        return entry.client

    def health_check(self, backend: RestBackend) -> HealthCheck:
        """The one check of a backend, shared by every plugin that declares it."""
        settings = self.settings(backend)

        async def check() -> str | None:
            client = self.client(backend)
            if backend.health is not None:
                return await backend.health(client)
            if backend.health_path is not None:
                await client.request("GET", backend.health_path, what="its health check")
            return f"{backend.title} answered at {settings.url}"

        return HealthCheck(
            name=f"{backend.name}_api",
            check=check,
            backend=backend.name,
            timeout=min(5.0, settings.request_timeout),
            not_configured=None if settings.configured else backend.not_configured(),
            shared=True,
        )

    async def aclose(self) -> None:
        for entry in self._entries.values():
            if entry.client is not None:
                client, entry.client = entry.client, None
                try:
                    await client.aclose()
                except Exception as exc:  # closing must never stop the shut-down
                    log.warning("closing the %s client failed: %s", entry.backend.name, exc)
