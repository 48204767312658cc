"""The core's hub of backends declared as objects: one set of settings, one health check and one
client per backend name, however many plugins declare it.

A tool names its backend by a string (its plugin registers the check) or by an object that
follows :class:`gateway.spec.Backend` (the REST kit's :class:`gateway.rest.RestBackend`). The
hub holds such objects by name and knows them only through that protocol: two plugins that talk
to the same API share its settings, check, breaker and client when installed together, and each
still works alone.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from pydantic import BaseModel

from .errors import ErrorCode, GatewayError, Sanitizer
from .spec import Backend, BackendClient, HealthCheck

log = logging.getLogger("gateway.backends")


class BackendConflict(Exception):
    """A plugin declares a backend name already declared differently."""


@dataclass(eq=False)  # compared by identity: no __eq__ to compile at start
class _Entry:
    backend: Backend
    settings: Any
    users: list[str]
    client: BackendClient | None = None


class BackendHub:
    """The declared backends: settings built once per name, clients opened on first use (so a
    client library is imported by the first call, not at start-up) and closed at shut-down."""

    def __init__(
        self,
        read_settings: Callable[[type[Any], str], BaseModel],
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

    def declare(self, backend: Backend, plugin: str) -> Any:
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

    def remove_plugin(self, plugin: str) -> list[BackendClient]:
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

    def declared(self) -> list[tuple[Backend, Any]]:
        """Every declared backend with its settings."""
        return [(e.backend, e.settings) for e in self._entries.values()]

    def add_unexpanded(self, references: Mapping[str, str]) -> None:
        """More variables left out as unexpanded references (a plugin's worker learns them
        as it is handed its settings)."""
        self._unexpanded.update(references)

    def settings(self, backend: Backend | str) -> Any:
        """The settings a declared backend was built with."""
        name = backend if isinstance(backend, str) else backend.name
        return self._entries[name].settings

    def users(self, name: str) -> list[str]:
        entry = self._entries.get(name)
        return list(entry.users) if entry else []

    def client(self, backend: Backend) -> Any:
        """The backend's one client, opened now if it is not yet; ``BACKEND_UNAVAILABLE``
        saying why when the backend is not configured."""
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
            entry.client = entry.backend.open_client(entry.settings, self.sanitizer)
        return entry.client

    def not_configured(self, name: str) -> str | None:
        """Why the backend is not configured (``None`` when it is, or is not declared)."""
        entry = self._entries.get(name)
        if entry is None:
            return None
        return entry.backend.not_configured(entry.settings, self._unexpanded)

    def health_check(self, backend: Backend) -> HealthCheck:
        """The one check of a backend, shared by every plugin that declares it."""
        return backend.health_check(
            self.settings(backend),
            lambda: self.client(backend),
            self.not_configured(backend.name),
        )

    async def aclose(self) -> None:
        for entry in self._entries.values():
            if entry.client is not None:
                client, entry.client = entry.client, None
                try:
                    await client.aclose()
                except Exception as exc:  # closing must never stop the shut-down
                    log.warning("closing the %s client failed: %s", entry.backend.name, exc)
