"""Configuration: one TOML file per deployment, overridden by environment variables.

```toml
[gateway]
read_only = false
deny_tools = ["delete_job"]
plugins = []               # allow-list; empty means every installed plugin
disable_plugins = []
default_timeout = 30

[plugins.gitea]
url = "http://127.0.0.1:3000"
token = { "$env" = "GITEA_TOKEN" }   # secrets come from the environment
```
Core variables are ``MCP_GATEWAY_*``; plugins declare their own (``GITEA_URL``) with
:func:`env_field`. Precedence: environment, then file, then defaults.
"""

from __future__ import annotations

import os
import tomllib
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pydantic import BaseModel, Field, SecretStr, ValidationError

ENV_PREFIX = "MCP_GATEWAY_"
#: Which tools Claude Code must confirm on every call, even in auto or bypass modes.
CONFIRM_CHOICES = ("destructive", "mutations", "none")
_TRUE = {"1", "true", "yes", "on"}
_FALSE = {"0", "false", "no", "off", ""}


class ConfigError(Exception):
    """The deployment's configuration cannot be used; the message says which setting."""


def env_field(*names: str, default: Any = ..., description: str | None = None) -> Any:
    """A settings field that environment variables ``names`` (first set one wins) override."""
    return Field(default, description=description, json_schema_extra={"env": list(names)})


def _as_bool(name: str, value: str) -> bool:
    v = value.strip().lower()
    if v in _TRUE:
        return True
    if v in _FALSE:
        return False
    raise ConfigError(f"{name} must be one of 1/0/true/false, not {value!r}")


def _as_list(value: str | list[str]) -> list[str]:
    if isinstance(value, list):
        return [str(v).strip() for v in value if str(v).strip()]
    return [v.strip() for v in value.split(",") if v.strip()]


def _pairs(value: str) -> list[tuple[str, str]]:
    """``"get_job=orchestrator,queue=mcp-plugin-gateway-queue"`` as pairs."""
    pairs = []
    for item in _as_list(value):
        key, sep, val = item.partition("=")
        if not sep or not key.strip() or not val.strip():
            raise ValueError(f"expected name=provider, not {item!r}")
        pairs.append((key, val))
    return pairs


def resolve_env_refs(value: Any, env: Mapping[str, str]) -> Any:
    """Replace every ``{"$env": "NAME"}`` in a config value by that variable (missing → drop)."""
    if isinstance(value, dict):
        if set(value) == {"$env"}:
            return env.get(str(value["$env"]), _MISSING)
        out = {k: resolve_env_refs(v, env) for k, v in value.items()}
        return {k: v for k, v in out.items() if v is not _MISSING}
    if isinstance(value, list):
        return [v for v in (resolve_env_refs(v, env) for v in value) if v is not _MISSING]
    return value


_MISSING = object()


@dataclass
class GatewayConfig:
    """Core settings. Build with :func:`load_config`."""

    server_name: str = "gateway"
    read_only: bool = False
    deny_tools: list[str] = field(default_factory=list)
    plugins: list[str] = field(default_factory=list)
    disable_plugins: list[str] = field(default_factory=list)
    default_timeout: float = 30.0
    data_roots: list[Path] = field(default_factory=lambda: [Path.cwd()])
    audit_log: Path = Path("data/gateway/audit.jsonl")
    health_timeout: float = 5.0
    health_cache_seconds: float = 15.0
    breaker_failures: int = 3
    breaker_reset_seconds: float = 30.0
    resource_timeout: float = 10.0
    load_timeout: float = 5.0
    token: SecretStr | None = None
    allowed_hosts: list[str] = field(default_factory=list)
    allowed_origins: list[str] = field(default_factory=list)
    confirm_each_call: str = "destructive"
    #: who provides a contested name: tool name -> plugin, plugin name -> distribution
    providers: dict[str, str] = field(default_factory=dict)
    debug: bool = False
    log_level: str = "INFO"
    plugin_tables: dict[str, dict[str, Any]] = field(default_factory=dict)
    env: Mapping[str, str] = field(default_factory=lambda: dict(os.environ))
    source: str = "embedded defaults"

    def plugin_table(self, name: str) -> dict[str, Any]:
        return dict(self.plugin_tables.get(name, {}))


_GATEWAY_KEYS: dict[str, str] = {
    # key in [gateway] -> kind
    "server_name": "str",
    "read_only": "bool",
    "deny_tools": "list",
    "plugins": "list",
    "disable_plugins": "list",
    "default_timeout": "float",
    "data_roots": "paths",
    "audit_log": "path",
    "health_timeout": "float",
    "health_cache_seconds": "float",
    "breaker_failures": "int",
    "breaker_reset_seconds": "float",
    "resource_timeout": "float",
    "load_timeout": "float",
    "token": "secret",
    "allowed_hosts": "list",
    "allowed_origins": "list",
    "confirm_each_call": "confirm",
    "providers": "mapping",
    "debug": "bool",
    "log_level": "str",
}


def _convert(key: str, kind: str, value: Any, where: str) -> Any:
    try:
        if kind == "bool":
            return _as_bool(where, value) if isinstance(value, str) else bool(value)
        if kind == "list":
            return _as_list(value)
        if kind == "float":
            f = float(value)
            if f <= 0:
                raise ValueError("must be positive")
            return f
        if kind == "int":
            i = int(value)
            if i <= 0:
                raise ValueError("must be positive")
            return i
        if kind == "path":
            return Path(str(value))
        if kind == "paths":
            items = value.split(os.pathsep) if isinstance(value, str) else list(value)
            return [Path(str(p)) for p in items if str(p).strip()]
        if kind == "confirm":
            choice = str(value).strip().lower()
            if choice not in CONFIRM_CHOICES:
                raise ValueError(f"use one of {', '.join(CONFIRM_CHOICES)}, not {value!r}")
            return choice
        if kind == "mapping":
            pairs = value.items() if isinstance(value, dict) else _pairs(str(value))
            return {str(k).strip(): str(v).strip() for k, v in pairs}
        if kind == "secret":
            return SecretStr(str(value)) if str(value) else None
        return str(value)
    except ConfigError:
        raise
    except (TypeError, ValueError) as exc:
        raise ConfigError(f"{where}: invalid value for {key} ({exc})") from None


def load_config(
    path: str | Path | None = None,
    *,
    env: Mapping[str, str] | None = None,
    overrides: Mapping[str, Any] | None = None,
    cwd: Path | None = None,
) -> GatewayConfig:
    """Read the TOML file (``path``, else ``MCP_GATEWAY_CONFIG``, else none) and the environment."""
    env = dict(os.environ if env is None else env)
    base = (cwd or Path.cwd()).resolve()
    path = path or env.get(f"{ENV_PREFIX}CONFIG") or None
    data: dict[str, Any] = {}
    source = "embedded defaults"
    if path:
        p = Path(path)
        try:
            with p.open("rb") as fh:
                data = tomllib.load(fh)
        except FileNotFoundError:
            raise ConfigError(f"config file {p.name!r} not found") from None
        except (tomllib.TOMLDecodeError, OSError) as exc:
            raise ConfigError(f"config file {p.name!r} cannot be read: {exc}") from None
        source = p.name

    gw_table = resolve_env_refs(data.get("gateway", {}), env)
    unknown = set(gw_table) - set(_GATEWAY_KEYS)
    if unknown:
        raise ConfigError(f"[gateway]: unknown setting(s) {', '.join(sorted(unknown))}")
    values: dict[str, Any] = {}
    for key, kind in _GATEWAY_KEYS.items():
        if key in gw_table:
            values[key] = _convert(key, kind, gw_table[key], f"[gateway] {key}")
        env_name = f"{ENV_PREFIX}{key.upper()}"
        if env_name in env:
            values[key] = _convert(key, kind, env[env_name], env_name)
    for key, value in (overrides or {}).items():
        if key not in _GATEWAY_KEYS:
            raise ConfigError(f"unknown gateway setting {key!r}")
        values[key] = _convert(key, _GATEWAY_KEYS[key], value, key)

    roots = [
        (r if r.is_absolute() else base / r).resolve() for r in values.pop("data_roots", [base])
    ]
    audit = values.pop("audit_log", GatewayConfig.audit_log)
    audit = audit if audit.is_absolute() else base / audit
    plugins = data.get("plugins", {})
    if not isinstance(plugins, dict) or any(not isinstance(v, dict) for v in plugins.values()):
        raise ConfigError("[plugins.<name>] must be tables")
    return GatewayConfig(
        **values,
        data_roots=roots or [base],
        audit_log=audit,
        plugin_tables={k: dict(v) for k, v in plugins.items()},
        env=env,
        source=source,
    )


def build_settings(
    model: type[BaseModel], table: Mapping[str, Any], env: Mapping[str, str]
) -> BaseModel:
    """Fill a plugin's settings model: env vars declared by :func:`env_field` beat the table.

    A field may instead name only a suffix (``json_schema_extra={"env_suffix": "URL"}``); it is
    then read from ``<model.env_prefix>_<suffix>`` (how REST backends name their variables).
    """
    values = resolve_env_refs(dict(table), env)
    prefix = getattr(model, "env_prefix", "")
    for name, info in model.model_fields.items():
        extra = info.json_schema_extra
        names = extra.get("env") if isinstance(extra, dict) else None
        suffix = extra.get("env_suffix") if isinstance(extra, dict) else None
        if names is None and isinstance(suffix, str) and isinstance(prefix, str) and prefix:
            names = [f"{prefix}_{suffix}"]
        for env_name in names if isinstance(names, list) else []:
            if isinstance(env_name, str) and env.get(env_name, "") != "":
                values[name] = env[env_name]
                break
    return model.model_validate(values)


def settings_error(exc: ValidationError) -> str:
    """A readable one-line reason for a plugin whose settings do not validate."""
    parts = []
    for err in exc.errors(include_url=False, include_input=False):
        loc = ".".join(str(p) for p in err["loc"]) or "(settings)"
        parts.append(f"{loc}: {err['msg']}")
    return "invalid settings: " + "; ".join(parts)


def secret_values(settings: BaseModel | None) -> list[str]:
    """Every ``SecretStr`` value in a settings model, for the sanitizer (or what the model's own
    ``secret_values()`` names, e.g. passwords inside URLs)."""
    if settings is None:
        return []
    own = getattr(settings, "secret_values", None)
    if callable(own):
        return [str(v) for v in own()]
    out = []
    for name in type(settings).model_fields:
        value = getattr(settings, name, None)
        if isinstance(value, SecretStr):
            out.append(value.get_secret_value())
    return out
