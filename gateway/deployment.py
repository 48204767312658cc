"""The settings a deployment's loaded plugins read from the environment.

A client that starts the gateway itself (Claude Code runs the ``.mcp.json`` entry) must give it
the same settings, so ``claude-config`` copies every one that is set into the entry's ``env``:
plain values as they are, secrets as ``${VAR}`` references that Claude Code expands from its
own environment when it starts the server, so no secret is ever printed.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Protocol
from urllib.parse import urlsplit

from pydantic import BaseModel

from .backends import BackendHub
from .config import ENV_PREFIX, GatewayConfig, GatewaySettings, field_env_names
from .configkit import is_secret
from .health import HealthMonitor
from .plugins import PluginRecord, PluginState
from .registry import RegisteredTool
from .spec import Backend


class Deployment(Protocol):
    """What this module reads of a :class:`gateway.app.Gateway`; typed here rather than
    imported, because the gateway itself asks :func:`read_variables` for its status."""

    @property
    def config(self) -> GatewayConfig: ...

    @property
    def plugins(self) -> list[PluginRecord]: ...

    @property
    def backends(self) -> BackendHub: ...

    @property
    def health(self) -> HealthMonitor: ...

    def tools(self, plugin: str | None = None) -> list[RegisteredTool]: ...


@dataclass
class PluginEnv:
    env: dict[str, str] = field(default_factory=dict)
    warnings: list[str] = field(default_factory=list)


def env_variables(model: type[BaseModel]) -> Iterator[tuple[list[str], bool]]:
    """Per field of a settings model: the variables it is read from, first one winning (as
    :func:`gateway.config.build_settings` reads them), and whether the field is a secret."""
    for name, names in field_env_names(model).items():
        yield names, is_secret(model.model_fields[name].annotation)


def _reference(name: str, value: str, secret: bool) -> str:
    carries_password = "://" in value and urlsplit(value).password is not None
    return f"${{{name}}}" if secret or carries_password else value


def _plugin_variables(
    gateway: Deployment,
) -> Iterator[tuple[PluginRecord, list[Backend], list[tuple[list[str], bool]]]]:
    """Per loaded plugin: the backends its tools declare as objects (in process), and per field
    of the settings it reads (its own first, then its backends'), the variables and whether
    the field is a secret. A plugin in a worker says its variables itself."""
    tools = gateway.tools()
    for record in gateway.plugins:
        if record.state is not PluginState.LOADED:
            continue
        backends = {
            t.spec.backend.name: t.spec.backend
            for t in tools
            if t.plugin.name == record.name and isinstance(t.spec.backend, Backend)
        }
        if record.variables is not None:
            yield record, list(backends.values()), record.variables
            continue
        models: list[type[BaseModel]] = [b.settings for b in backends.values()]
        settings = record.context.settings if record.context is not None else None
        if isinstance(settings, BaseModel):
            models.insert(0, type(settings))
        yield record, list(backends.values()), [v for m in models for v in env_variables(m)]


def read_variables(gateway: Deployment) -> set[str]:
    """Every variable this deployment reads: the core's and its loaded plugins' settings."""
    out = {ENV_PREFIX + key.upper() for key in GatewaySettings.model_fields}
    for _record, _backends, variables in _plugin_variables(gateway):
        for names, _secret in variables:
            out.update(names)
    return out


def plugin_env(gateway: Deployment) -> PluginEnv:
    """The set variables of every loaded plugin's settings and REST backends, and a warning per
    plugin whose backend is not configured (its tools are not offered, or with
    ``offer_unconfigured_tools`` could only answer BACKEND_UNAVAILABLE)."""
    out = PluginEnv()
    environment = gateway.config.env
    tools = gateway.tools()
    # A plugin in a worker has no backend objects here: its health checks say which of its
    # backends are not configured, and why.
    unconfigured = {
        check.backend: check.not_configured
        for _, check in gateway.health.checks()
        if check.backend and check.not_configured
    }
    for record, backends, variables in _plugin_variables(gateway):
        for names, secret in variables:
            name = next((n for n in names if environment.get(n, "") != ""), None)
            if name is not None:
                out.env[name] = _reference(name, environment[name], secret)
        reasons: dict[str, str | None] = {
            b.name: gateway.backends.not_configured(b.name) for b in backends
        }
        if record.variables is not None:
            reasons = {
                str(t.spec.backend_name): unconfigured.get(str(t.spec.backend_name))
                for t in tools
                if t.plugin.name == record.name and t.spec.backend_name
            }
        for backend_name, reason in reasons.items():
            if reason is None:
                continue
            count = sum(
                1
                for t in tools
                if t.plugin.name == record.name and t.spec.backend_name == backend_name
            )
            effect = (
                "would answer BACKEND_UNAVAILABLE in Claude Code"
                if gateway.config.offer_unconfigured_tools
                else "are not offered"
            )
            out.warnings.append(
                f"plugin {record.name!r}: its {count} tool(s) {effect}: {reason}; the "
                "settings block already allows or asks for them; once it is set, run "
                "claude-config again to copy it into the entry"
            )
    return out
