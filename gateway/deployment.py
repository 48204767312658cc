"""The settings a deployment's loaded plugins read from the environment.

A client that starts the gateway itself (Claude Code runs the ``.mcp.json`` entry) must give it
the same settings, so ``claude-config`` copies every one that is set into the entry's ``env``:
plain values as they are, secrets as ``${VAR}`` references that Claude Code expands from its
own environment when it starts the server, so no secret is ever printed.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, get_args
from urllib.parse import urlsplit

from pydantic import BaseModel, SecretStr

from .config import field_env_names
from .plugins import PluginState
from .rest.backend import RestBackend

if TYPE_CHECKING:
    from .app import Gateway


@dataclass
class PluginEnv:
    env: dict[str, str] = field(default_factory=dict)
    warnings: list[str] = field(default_factory=list)


def _is_secret(annotation: Any) -> bool:
    return annotation is SecretStr or any(_is_secret(a) for a in get_args(annotation))


def env_variables(model: type[BaseModel]) -> Iterator[tuple[list[str], bool]]:
    """Per field of a settings model: the variables it is read from, first one winning (as
    :func:`gateway.config.build_settings` reads them), and whether the field is a secret."""
    for name, names in field_env_names(model).items():
        yield names, _is_secret(model.model_fields[name].annotation)


def _reference(name: str, value: str, secret: bool) -> str:
    carries_password = "://" in value and urlsplit(value).password is not None
    return f"${{{name}}}" if secret or carries_password else value


def plugin_env(gateway: Gateway) -> PluginEnv:
    """The set variables of every loaded plugin's settings and REST backends, and a warning per
    plugin whose backend is not configured (its tools could only answer BACKEND_UNAVAILABLE)."""
    out = PluginEnv()
    environment = gateway.config.env
    for record in gateway.plugins:
        if record.state is not PluginState.LOADED:
            continue
        own = gateway.tools(record.name)
        backends = {
            t.spec.backend.name: t.spec.backend
            for t in own
            if isinstance(t.spec.backend, RestBackend)
        }
        models: list[type[BaseModel]] = [b.settings for b in backends.values()]
        settings = record.context.settings if record.context is not None else None
        if isinstance(settings, BaseModel):
            models.insert(0, type(settings))
        for model in models:
            for names, secret in env_variables(model):
                name = next((n for n in names if environment.get(n, "") != ""), None)
                if name is not None:
                    out.env[name] = _reference(name, environment[name], secret)
        for backend in backends.values():
            settings = gateway.backend_settings(backend)
            if settings.configured:
                continue
            count = sum(1 for t in own if t.spec.backend is backend)
            out.warnings.append(
                f"plugin {record.name!r}: {backend.title} is not configured, so its {count} "
                f"tool(s) would answer BACKEND_UNAVAILABLE in Claude Code: set "
                f"{settings.env_name('URL')} (or url in [plugins.{backend.settings_table}]) "
                "and run claude-config again"
            )
    return out
