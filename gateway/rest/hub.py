"""The core's hub of REST backends: one set of settings, one health check and one keep-alive
client per backend name, however many plugins declare it (see :mod:`gateway.rest.backend`).
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING

from ..config import unexpanded_problem
from ..errors import ErrorCode, GatewayError, Sanitizer
from ..spec import HealthCheck
from .backend import RestBackend, RestSettings

if TYPE_CHECKING:
    from .client import RestClient

log = logging.getLogger("gateway.rest")


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

    def __init__(
        self,
        read_settings: Callable[[type[RestSettings], str], RestSettings],
        sanitizer: Sanitizer | None = None,
        *,
        unexpanded: Mapping[str, str] | None = None,
    ):
        #: builds a backend's settings from its table and variables (GatewayConfig's)
        self._read = read_settings
        #: variables left out of ``env`` as unexpanded ``${NAME}`` references (see config)
        self._unexpanded = dict(unexpanded or {})
        self._entries: dict[str, _Entry] = {}
        #: Cleans what backends write before it is cut into messages; learns their secrets.
        self.sanitizer = sanitizer if sanitizer is not None else Sanitizer()

    def declare(self, backend: RestBackend, plugin: str) -> RestSettings:
        """Record that ``plugin`` uses ``backend``; build its settings the first time.

        Raises :class:`BackendConflict` when the name is declared differently elsewhere, and
        :class:`~gateway.config.ConfigError` (one line naming the setting) when the settings
        do not fit.
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
        settings = self._read(backend.settings, backend.settings_table)
        self.sanitizer.add_secrets(backend.secret_values(settings))
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

    def declared(self) -> list[tuple[RestBackend, RestSettings]]:
        """Every declared backend with its settings."""
        return [(e.backend, e.settings) for e in self._entries.values()]

    def add_unexpanded(self, references: Mapping[str, str]) -> None:
        """More variables left out as unexpanded references (a plugin's worker learns them
        as it is handed its settings)."""
        self._unexpanded.update(references)

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
        reason = self.not_configured(backend.name)
        if reason is not None:
            raise GatewayError(ErrorCode.BACKEND_UNAVAILABLE, reason, retryable=False)
        if entry.client is None:
            from .client import RestClient  # httpx is imported here, on first use

            entry.client = RestClient(entry.backend, entry.settings, self.sanitizer)
        return entry.client

    def not_configured(self, name: str) -> str | None:
        """Why the backend is not configured (``None`` when it is): its URL is unset, or holds
        a reference to a variable the client did not have (then that variable is named)."""
        entry = self._entries.get(name)
        if entry is None or entry.settings.configured:
            return None
        variable = entry.settings.env_name("URL")
        reference = self._unexpanded.get(variable)
        if reference is None:
            return entry.backend.not_configured()
        return f"{entry.backend.title} is not configured: {unexpanded_problem(variable, reference)}"

    def health_check(self, backend: RestBackend) -> HealthCheck:
        """The one check of a backend, shared by every plugin that declares it."""
        settings = self.settings(backend)

        async def check() -> str | None:
            client = self.client(backend)
            if backend.health_path is not None:
                answer = await client.answer(
                    "GET", backend.health_path, path_params={}, what="its health check"
                )
                if backend.health_detail is not None:
                    return backend.health_detail(answer.data)
            return f"{backend.title} answered at {settings.url}"

        return HealthCheck(
            name=f"{backend.name}_api",
            check=check,
            backend=backend.name,
            timeout=min(5.0, settings.request_timeout),
            not_configured=self.not_configured(backend.name),
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
