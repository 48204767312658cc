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

[telemetry]                # OpenTelemetry; see gateway.telemetry.settings
enabled = true
```
Core variables are ``MCP_GATEWAY_*``; plugins declare their own (``GITEA_URL``) with
:func:`env_field`; ``[telemetry]`` also reads the standard ``OTEL_*`` ones. Precedence:
environment, then file, then defaults.

Every mistake is a :class:`ConfigError` whose message is one line: where the value came from
(``file:line`` or the variable), the setting, what is wrong and the closest valid name.
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal, TypeVar, get_args

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    PrivateAttr,
    SecretStr,
    ValidationError,
    ValidationInfo,
    field_validator,
)

# Re-exported: plugins, tests and the docs import these from here.
from .configkit import ConfigError as ConfigError
from .configkit import TomlLines, closest, file_value_problem, is_secret
from .configkit import env_field as env_field
from .configkit import field_env_names as field_env_names
from .configkit import resolve_env_refs as resolve_env_refs
from .configkit import value_reason as value_reason

_Model = TypeVar("_Model", bound=BaseModel)

if TYPE_CHECKING:
    # Imported where they are used: importing the config does not import those packages.
    from .auth.settings import AuthConfig
    from .telemetry.settings import TelemetrySettings

ENV_PREFIX = "MCP_GATEWAY_"
ConfirmEachCall = Literal["destructive", "mutations", "none"]
#: Which mutation tools only a person in Claude Code's terminal UI may approve (see policy.py).
CONFIRM_CHOICES: tuple[str, ...] = get_args(ConfirmEachCall)
#: Which plugins run in a worker process of their own (``isolate``), besides a list of names:
#: those not from this project's distributions, every one, or none.
ISOLATE_CHOICES = ("third-party", "all", "none")
LogLevel = Literal["DEBUG", "INFO", "WARNING", "ERROR", "CRITICAL"]
#: Where mutation calls are recorded (gateway/audit.py).
AuditSinkName = Literal["file", "stderr", "postgres"]
_REPLICA_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._:-]{0,252}")
_TABLE = re.compile(r"([a-z_][a-z0-9_]{0,62}\.)?[a-z_][a-z0-9_]{0,62}")
#: The shortest time a time setting takes: below it, every call or check would time out.
LEAST_SECONDS = 0.1
#: A day: the longest a call may run, a result be reused or a breaker stay open.
DAY = 86400.0


def _seconds(default: float, most: float, description: str) -> Any:
    return Field(default, ge=LEAST_SECONDS, le=most, allow_inf_nan=False, description=description)


SECTIONS = ("gateway", "plugins", "telemetry", "auth", "servers")
#: The plugin that mounts the ``[servers.<name>]`` tables (MCP servers behind the gateway): the
#: core hands them to it as its settings (``servers``, with ``origins``), see ``_servers``.
SERVERS_PLUGIN = "servers"
SERVERS_DISTRIBUTION = "mcp-plugin-gateway-servers"


def default_audit_log(env: Mapping[str, str]) -> Path:
    """``$XDG_STATE_HOME/mcp-gateway/audit.jsonl``, else ``~/.local/state/…``: the user's
    state, not the project the gateway happens to be started in."""
    state = env.get("XDG_STATE_HOME", "")
    if not Path(state).is_absolute():  # the XDG spec: a relative value is invalid, ignore it
        state = str(Path(env.get("HOME") or Path.home()) / ".local" / "state")
    return Path(state) / "mcp-gateway" / "audit.jsonl"


class GatewaySettings(BaseModel):
    """The ``[gateway]`` table. Each field is also the variable ``MCP_GATEWAY_<FIELD>``."""

    model_config = ConfigDict(extra="forbid")

    server_name: str = Field("gateway", min_length=1, description="The server's MCP name")
    read_only: bool = Field(False, description="Hide and refuse every mutation tool")
    deny_tools: list[str] = Field(default_factory=list, description="Tools hidden and refused")
    plugins: list[str] = Field(
        default_factory=list, description="Allow-list of plugins; empty means every installed one"
    )
    disable_plugins: list[str] = Field(default_factory=list, description="Plugins not loaded")
    providers: dict[str, str] = Field(
        default_factory=dict,
        description=(
            "Which plugin provides a tool or plugin name that two installed plugins both "
            "claim: the tool or plugin name maps to the providing plugin's name or "
            "distribution name"
        ),
    )
    default_timeout: float = _seconds(30.0, DAY, "Seconds per call unless a tool sets its own")
    data_roots: list[Path] = Field(
        default_factory=list,
        description="Folders path arguments must stay inside; empty means the working directory",
    )
    audit_log: Path | None = Field(
        None, description="Mutation audit log; unset means the user's state directory"
    )
    health_timeout: float = _seconds(5.0, 300.0, "Seconds per health check by default")
    health_cache_seconds: float = _seconds(15.0, DAY, "How long a health result is reused")
    breaker_failures: int = Field(
        3, ge=1, le=1000, description="Failures in a row that open a breaker"
    )
    breaker_reset_seconds: float = _seconds(30.0, DAY, "Then one probe call is let through")
    resource_timeout: float = _seconds(10.0, 600.0, "Per plugin open/close_resources")
    load_timeout: float = _seconds(5.0, 600.0, "Per plugin import and load-time hooks")
    token: SecretStr | None = Field(None, description="Bearer token for the HTTP transport")
    allowed_hosts: list[str] = Field(default_factory=list, description="Host headers HTTP accepts")
    allowed_origins: list[str] = Field(default_factory=list, description="Origins HTTP accepts")
    confirm_each_call: ConfirmEachCall = Field(
        "none", description="Which mutation tools only a person in Claude Code's UI may approve"
    )
    offer_unconfigured_tools: bool = Field(
        False,
        description="List the tools of backends that are not configured too (each call then "
        "answers BACKEND_UNAVAILABLE naming the setting); off: they are not offered",
    )
    isolate: str | list[str] = Field(
        "third-party",
        description="Plugins that run in a worker process of their own, so that nothing they "
        "do can end the gateway: a list of plugin names, third-party (every plugin not from "
        "this project's distributions), all or none",
    )
    max_worker_memory_mb: int = Field(
        1024,
        ge=0,
        le=1024 * 1024,
        description="A plugin's worker process whose memory grows past this many MB is "
        "started again between calls; 0: no limit",
    )
    schema_cache: bool = Field(
        True,
        description="Keep the tools' schemas in the user's cache directory, each under a "
        "fingerprint of the model it was generated from (a faster start)",
    )
    debug: bool = Field(False, description="Full tracebacks in the stderr log")
    log_level: LogLevel = Field("INFO", description="Level of the stderr log")
    # Many replicas behind one balancer (docs/deploy.md, "What scales how").
    replica_name: str | None = Field(
        None, description="This replica's name in every audit record; unset: the host name"
    )
    audit_sinks: list[AuditSinkName] = Field(
        default_factory=lambda: list[AuditSinkName](["file"]),
        min_length=1,
        description="Where mutation calls are recorded: file (audit_log), stderr (JSON "
        "lines), postgres (audit_database_url); each must take a call's first record",
    )
    audit_database_url: SecretStr | None = Field(
        None, description="PostgreSQL URL of the postgres audit sink (postgresql://...)"
    )
    audit_table: str = Field(
        "mcp_gateway_audit", description="The postgres sink's table, created if missing"
    )
    limit_calls_per_minute: int | None = Field(
        None, ge=1, le=1_000_000, description="Tool calls per minute per caller; unset: none"
    )
    limit_mutations_per_minute: int | None = Field(
        None, ge=1, le=1_000_000, description="Mutation calls per minute per caller; unset: none"
    )
    limit_redis_url: SecretStr | None = Field(
        None, description="Redis URL (redis://...) holding the limits for every replica"
    )

    @field_validator(
        "token", "audit_database_url", "limit_redis_url", "replica_name", mode="before"
    )
    @classmethod
    def _empty_is_none(cls, value: Any) -> Any:
        return None if value == "" else value

    @field_validator("replica_name")
    @classmethod
    def _replica_name(cls, value: str | None) -> str | None:
        if value is not None and not _REPLICA_NAME.fullmatch(value):
            raise ValueError(
                "must be letters, digits, '.', '_', ':' or '-' (at most 253, starting with a "
                "letter or digit), e.g. the pod's name"
            )
        return value

    @field_validator("audit_table")
    @classmethod
    def _audit_table(cls, value: str) -> str:
        if not _TABLE.fullmatch(value):
            raise ValueError(
                "must be a table name of lower-case letters, digits and '_' (at most 63), "
                "optionally after a schema name and '.', e.g. audit.mcp_gateway"
            )
        return value

    @field_validator("audit_sinks")
    @classmethod
    def _once_each(cls, value: list[str]) -> list[str]:
        return list(dict.fromkeys(value))

    @field_validator("isolate", mode="before")
    @classmethod
    def _isolate(cls, value: Any) -> Any:
        """A keyword, or plugin names (one name alone is a list of one)."""
        if isinstance(value, str):
            word = value.strip()
            return word.lower() if word.lower() in ISOLATE_CHOICES else [word]
        if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
            raise ValueError(f"must be {', '.join(ISOLATE_CHOICES)} or a list of plugin names")
        for item in value:
            if item.strip().lower() in ISOLATE_CHOICES:
                raise ValueError(
                    f"{item.strip()!r} is a keyword, not a plugin name: write isolate = "
                    f'"{item.strip().lower()}"'
                )
        return value

    @field_validator("log_level", "confirm_each_call", mode="before")
    @classmethod
    def _any_case(cls, value: Any, info: ValidationInfo) -> Any:
        if not isinstance(value, str):
            return value
        return value.strip().upper() if info.field_name == "log_level" else value.strip().lower()


class GatewayConfig(GatewaySettings):
    """Core settings plus what the plugins read. Build with :func:`load_config`."""

    # Built from settings already validated, never validated itself: its validator (tens of
    # milliseconds at start-up) is only built if something asks for it.
    model_config = ConfigDict(extra="forbid", defer_build=True)

    data_roots: list[Path] = Field(default_factory=lambda: [Path.cwd()])
    audit_log: Path = Field(default_factory=lambda: default_audit_log(os.environ))
    plugin_tables: dict[str, dict[str, Any]] = Field(default_factory=dict)
    #: The ``[auth]`` table (OAuth resource server, gateway/auth/settings.py); None: no OAuth.
    auth: AuthConfig | None = None
    env: dict[str, str] = Field(default_factory=lambda: dict(os.environ))
    telemetry: TelemetrySettings = Field(default_factory=lambda: _telemetry({}, {}))
    source: str = "embedded defaults"
    #: Variables left out of ``env`` because they hold a reference to an unset variable
    #: (``${NAME}``, as Claude Code leaves it), with the ``NAME`` each refers to.
    unexpanded: dict[str, str] = Field(default_factory=dict)
    #: Where each setting, ``[plugins.<name>]`` table and key in one came from, for error
    #: messages (``plugins.gitea.url`` → ``gw.toml:7``).
    origins: dict[str, str] = Field(default_factory=dict)
    #: The ``plugins.<name>.<key>`` the file wrote as ``{ "$env" = "NAME" }`` references.
    references: set[str] = Field(default_factory=set)
    _consulted: set[str] = PrivateAttr(default_factory=set)

    def plugin_table(self, name: str) -> dict[str, Any]:
        self._consulted.add(name)
        return dict(self.plugin_tables.get(name, {}))

    def plugin_settings(self, model: type[_Model], table: str) -> _Model:
        """``model`` filled from ``[plugins.<table>]``, each field's variables over it (the
        first set one wins; a REST backend's ``env_suffix`` fields read
        ``<env_prefix>_<suffix>``): how every plugin and REST backend gets its settings.

        A value that does not fit is a :class:`ConfigError` of one line, as for the core's own
        settings: the variable or the file's line and key, what is wrong (with the range of a
        number) and the closest valid name, e.g. ``gw.toml:5: [plugins.orchestrator] urll:
        unknown setting; did you mean url?`` or ``COCKPIT_API_URL: must be an http:// or
        https:// URL …, not 'ftp://x'``. A secret's value is never shown."""
        raw = self.plugin_table(table)
        variables = field_env_names(model)

        def where(key: str) -> str:
            line = self.origins.get(f"plugins.{table}.{key}") or self.origins.get(
                f"plugins.{table}"
            )
            return f"{line}: [plugins.{table}] {key}" if line else f"[plugins.{table}] {key}"

        for key, value in raw.items():
            if f"plugins.{table}.{key}" in self.origins and (
                f"plugins.{table}.{key}" not in self.references
            ):
                names = variables.get(key) or []
                problem = file_value_problem(
                    model, key, value, variable=names[0] if names else None
                )
                if problem:
                    raise ConfigError(f"{where(key)}{problem}")
        values = resolve_env_refs(raw, self.env)
        chosen: dict[str, str] = {}
        for key, names in variables.items():
            name = next((n for n in names if self.env.get(n, "") != ""), None)
            if name is not None:
                values[key], chosen[key] = self.env[name], name
        try:
            return model.model_validate(values)
        except ValidationError as exc:
            error = exc.errors(include_url=False)[0]
            key = str(error["loc"][0]) if error["loc"] else ""
            # Never shown: a secret's value, or a URL's with credentials in it.
            hidden = frozenset(k for k, f in model.model_fields.items() if is_secret(f.annotation))
            given = error.get("input")
            if isinstance(given, str) and "@" in given:
                hidden |= {key}
            if not key:  # the model's own check of several fields: its message says which
                msg = str(error["msg"]).removeprefix("Value error, ")
                raise ConfigError(f"{where('').rstrip()}: {msg}") from None
            reason = value_reason(key, error, model, hidden=hidden)
            raise ConfigError(f"{chosen.get(key) or where(key)}: {reason}") from None

    @property
    def consulted_tables(self) -> set[str]:
        """The ``[plugins.<name>]`` tables loaded plugins and their backends asked for."""
        return set(self._consulted)


_LISTS = {
    "deny_tools",
    "plugins",
    "disable_plugins",
    "allowed_hosts",
    "allowed_origins",
    "audit_sinks",
}


def _from_env(key: str, value: str, name: str) -> Any:
    """A variable's text as the field's shape; scalars are left to the model to check."""
    if key in _LISTS or (key == "isolate" and value.strip().lower() not in ISOLATE_CHOICES):
        return [v.strip() for v in value.split(",") if v.strip()]
    if key == "data_roots":
        return [v for v in value.split(os.pathsep) if v.strip()]
    if key == "providers":
        pairs = [p.strip() for p in value.split(",") if p.strip()]
        bad = [p for p in pairs if p.count("=") != 1 or not all(s.strip() for s in p.split("="))]
        if bad:
            raise ConfigError(
                f"{name}: {bad[0][:60]!r} is not NAME=PROVIDER; write e.g. "
                f"{name}=get_job=orchestrator,queue=mcp-plugin-gateway-queue"
            )
        return {k.strip(): v.strip() for k, v in (p.split("=") for p in pairs)}
    return value


#: ``${NAME}``: what Claude Code leaves in an entry's ``env`` when ``NAME`` is unset where it
#: runs (it expands set ones, and ``${NAME:-default}`` always).
_REFERENCE = re.compile(r"\$\{([A-Za-z_][A-Za-z0-9_]*)\}")


def unexpanded_references(env: Mapping[str, str]) -> dict[str, str]:
    """The variables whose value still holds a ``${NAME}`` reference, each with that ``NAME``.

    Such a value is never what the deployment meant (a URL or a token that reads
    ``${COCKPIT_API_TOKEN}``): :func:`load_config` leaves these variables out, so they count as
    unset everywhere and nothing sends them (as a bearer token, say)."""
    out = {}
    for name, value in env.items():
        found = _REFERENCE.search(value)
        if found:
            out[name] = found.group(1)
    return out


def unexpanded_problem(variable: str, name: str) -> str:
    """One line for a variable left out by :func:`unexpanded_references`."""
    return (
        f"{variable} holds ${{{name}}}, which the client passed on as it is because {name} was "
        f"unset where it started, so {variable} counts as unset: export {name} before "
        "starting the client"
    )


def label(where: str, key: str, table: str = "gateway") -> str:
    """``gw.toml:3: [gateway] read_only``, or just the variable (``MCP_GATEWAY_READ_ONLY``)."""
    return where if where.startswith(ENV_PREFIX) else f"{where}: [{table}] {key}"


def setting_label(config: GatewayConfig, key: str) -> str:
    """Where ``[gateway]`` setting ``key`` came from, as :func:`label` says it (just ``key``
    for a default or a value given in code)."""
    where = config.origins.get(key)
    return label(where, key) if where and where != key else key


def _validate(values: dict[str, Any], origins: Mapping[str, str]) -> GatewaySettings:
    try:
        return GatewaySettings.model_validate(values)
    except ValidationError as exc:
        error = exc.errors(include_url=False)[0]
        key = str(error["loc"][0]) if error["loc"] else "(settings)"
        item = ".".join(str(p) for p in error["loc"][1:])
        setting = label(origins.get(key, key), key) + (f"[{item}]" if item else "")
        raise ConfigError(f"{setting}: {value_reason(key, error, GatewaySettings)}") from None


def _resolve_refs(value: Any, env: Mapping[str, str], where: str) -> Any:
    """Every ``{"$env": "NAME"}`` replaced by that variable; an unset one is an error."""
    if isinstance(value, dict):
        if set(value) == {"$env"}:
            name = str(value["$env"])
            if name not in env:
                raise ConfigError(f"{where}: $env variable {name} is not set")
            return env[name]
        return {k: _resolve_refs(v, env, where) for k, v in value.items()}
    if isinstance(value, list):
        return [_resolve_refs(v, env, where) for v in value]
    return value


#: A configuration file is a few kilobytes: more is not one (a log, a device), and is not read.
MAX_CONFIG_BYTES = 1024 * 1024


def _read_file(path: Path) -> tuple[dict[str, Any], TomlLines]:
    """The file's settings and lines. Only a regular file is read, and only up to
    :data:`MAX_CONFIG_BYTES`: a FIFO, a device or a folder given as the file is refused at
    once, never waited on or read without end. Errors name the path as it was given."""
    import stat
    import tomllib  # only a deployment with a file pays for the parser (~3 ms of import)

    shown = str(path)
    try:
        # Non-blocking: opening a FIFO must not wait for a writer (its type is refused below).
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0))
    except FileNotFoundError:
        raise ConfigError(f"config file {shown!r} not found") from None
    except OSError as exc:
        raise ConfigError(f"config file {shown!r} cannot be read: {exc.strerror}") from None
    try:
        mode = os.fstat(fd).st_mode
        if stat.S_ISDIR(mode):
            raise ConfigError(f"config file {shown!r} is a folder, not a file")
        if not stat.S_ISREG(mode):
            kind = "a FIFO" if stat.S_ISFIFO(mode) else "a socket" if stat.S_ISSOCK(mode) else ""
            kind = kind or "a device"
            raise ConfigError(f"config file {shown!r} is {kind}, not a regular file")
        data = b""
        while len(data) <= MAX_CONFIG_BYTES:
            chunk = os.read(fd, MAX_CONFIG_BYTES + 1 - len(data))
            if not chunk:
                break
            data += chunk
        if len(data) > MAX_CONFIG_BYTES:
            raise ConfigError(
                f"config file {shown!r} is larger than {MAX_CONFIG_BYTES // 1024 // 1024} MiB: "
                "not a configuration file"
            )
    except OSError as exc:
        raise ConfigError(f"config file {shown!r} cannot be read: {exc.strerror}") from None
    finally:
        os.close(fd)
    try:
        text = data.decode()
        return tomllib.loads(text), TomlLines(path.name, text)
    except (tomllib.TOMLDecodeError, UnicodeDecodeError) as exc:
        raise ConfigError(f"config file {shown!r} cannot be read: {exc}") from None


def _check_sections(data: Mapping[str, Any], lines: TomlLines) -> None:
    fields = GatewaySettings.model_fields
    for key, value in data.items():
        if key in SECTIONS and isinstance(value, dict):
            continue
        where = lines.where((key,))
        if key in SECTIONS:
            raise ConfigError(f"{where}: {key} must be a table ([{key}])")
        if key in fields:
            raise ConfigError(f"{where}: {key} belongs in the [gateway] table")
        hint = closest(key, SECTIONS, template="[{}]")
        raise ConfigError(
            f"{where}: unknown section [{key}] "
            f"(known: [gateway], [plugins.*], [servers.*], [telemetry], [auth]){hint}"
        )
    for key in data.get("gateway", {}):
        if key not in fields:
            hint = closest(key, list(fields))
            where = lines.where(("gateway", key))
            raise ConfigError(f"{where}: [gateway] {key}: unknown setting{hint}")
    for name, table in data.get("plugins", {}).items():
        if not isinstance(table, dict):
            raise ConfigError(f"{lines.where(('plugins', name))}: [plugins.{name}] must be a table")
    for name, table in data.get("servers", {}).items():
        if not isinstance(table, dict):
            raise ConfigError(
                f"{lines.where(('servers', name))}: [servers.{name}] must be a table "
                "(command, args, env ... or url, headers)"
            )


def load_config(
    path: str | Path | None = None,
    *,
    env: Mapping[str, str] | None = None,
    overrides: Mapping[str, Any] | None = None,
    cwd: Path | None = None,
) -> GatewayConfig:
    """Read the TOML file (``path``, else ``MCP_GATEWAY_CONFIG``, else none) and the environment."""
    env = dict(os.environ if env is None else env)
    unexpanded = unexpanded_references(env)
    env = {k: v for k, v in env.items() if k not in unexpanded}
    base = (cwd or Path.cwd()).resolve()
    path = path or env.get(f"{ENV_PREFIX}CONFIG") or None
    data: dict[str, Any] = {}
    lines = TomlLines("", "")
    source = "embedded defaults"
    if path:
        data, lines = _read_file(Path(path))
        source = Path(path).name
        _check_sections(data, lines)

    values, origins = _gateway_values(data, lines, env, overrides)
    settings = _validate(values, origins)
    _check_shared_services(settings, origins)
    tables, references = _plugin_tables(data, lines, env, origins)
    if data.get("servers"):
        tables[SERVERS_PLUGIN] = _servers(data["servers"], tables.get(SERVERS_PLUGIN), env, lines)
        origins["servers"] = lines.where(("servers", next(iter(data["servers"]))))
        origins.setdefault(f"plugins.{SERVERS_PLUGIN}", origins["servers"])

    def telemetry_where(key: str) -> str:
        return f"{lines.where(('telemetry', key))}: [telemetry] {key}"

    if data.get("telemetry"):
        from .telemetry.settings import TelemetrySettings

        for k, v in data["telemetry"].items():
            _check_written(TelemetrySettings, k, v, telemetry_where(k))
    telemetry_table = {
        k: _resolve_refs(v, env, telemetry_where(k)) for k, v in data.get("telemetry", {}).items()
    }
    auth = _load_auth(data.get("auth"), env, lines, settings, origins)
    roots = [(r if r.is_absolute() else base / r).resolve() for r in settings.data_roots]
    audit = settings.audit_log or default_audit_log(env)
    audit = audit if audit.is_absolute() else base / audit
    if settings.audit_log is not None:
        _check_audit_log(audit, label(origins.get("audit_log", "audit_log"), "audit_log"))
    resolved: dict[str, Any] = {
        "data_roots": roots or [base],
        "audit_log": audit,
        "plugin_tables": tables,
        "auth": auth,
        "env": env,
        "unexpanded": unexpanded,
        "telemetry": _telemetry(telemetry_table, env, telemetry_where),
        "source": source,
        "origins": origins,
        "references": references,
    }
    return GatewayConfig.model_construct(**{**dict(settings), **resolved})


def _gateway_values(
    data: dict[str, Any],
    lines: TomlLines,
    env: dict[str, str],
    overrides: Mapping[str, Any] | None,
) -> tuple[dict[str, Any], dict[str, str]]:
    """The ``[gateway]`` table, then ``MCP_GATEWAY_*`` variables, then ``overrides``, each
    value with where it came from (file:line, variable or key), not yet validated."""
    fields = GatewaySettings.model_fields
    values: dict[str, Any] = {}
    origins: dict[str, str] = {}
    for key, value in data.get("gateway", {}).items():
        origins[key] = lines.where(("gateway", key))
        _check_written(GatewaySettings, key, value, f"{origins[key]}: [gateway] {key}")
        values[key] = _resolve_refs(value, env, f"{origins[key]}: [gateway] {key}")
    for name, value in env.items():
        if not name.startswith(ENV_PREFIX) or name == f"{ENV_PREFIX}CONFIG" or value == "":
            continue  # an empty variable counts as unset
        key = name[len(ENV_PREFIX) :].lower()
        if key in fields:  # other MCP_GATEWAY_* variables may be a plugin's (env_field)
            values[key], origins[key] = _from_env(key, value, name), name
    for key, value in (overrides or {}).items():
        if key not in fields:
            raise ConfigError(f"unknown gateway setting {key!r}{closest(key, list(fields))}")
        values[key], origins[key] = value, key
    for key in _LISTS & set(values):
        if isinstance(values[key], list):
            values[key] = [v.strip() if isinstance(v, str) else v for v in values[key]]
            values[key] = [v for v in values[key] if v != ""]
    return values, origins


def _plugin_tables(
    data: dict[str, Any], lines: TomlLines, env: dict[str, str], origins: dict[str, str]
) -> tuple[dict[str, dict[str, Any]], set[str]]:
    """The ``[plugins.*]`` tables, references resolved, and which keys were written as
    ``$env`` references; each key's line goes into ``origins``."""
    tables: dict[str, dict[str, Any]] = {}
    references: set[str] = set()
    for name, table in data.get("plugins", {}).items():
        origins[f"plugins.{name}"] = lines.where(("plugins", name))
        tables[name] = {}
        for k, v in table.items():
            # Each key's line, and whether it was written as a $env reference: a plugin's
            # settings are checked against its model only once the plugin is loaded.
            origins[f"plugins.{name}.{k}"] = lines.where(("plugins", name, k))
            if _is_reference(v):
                references.add(f"plugins.{name}.{k}")
            tables[name][k] = _resolve_refs(
                v, env, f"{origins[f'plugins.{name}.{k}']}: [plugins.{name}] {k}"
            )
    return tables, references


def _is_reference(value: Any) -> bool:
    return isinstance(value, dict) and set(value) == {"$env"}


def _check_written(model: type[BaseModel], key: str, value: Any, where: str) -> None:
    """A value as the file has it fits the file's stricter rules (see file_value_problem)."""
    if _is_reference(value):
        return
    names = field_env_names(model).get(key) or (
        [ENV_PREFIX + key.upper()] if model is GatewaySettings else []
    )
    problem = file_value_problem(model, key, value, variable=names[0] if names else None)
    if problem:
        raise ConfigError(f"{where}{problem}")


def _check_shared_services(settings: GatewaySettings, origins: Mapping[str, str]) -> None:
    """The settings of the audit database and the limit store go together: a URL that
    nothing uses, or a sink or limit store without its URL, is a mistake (the operator meant
    one of them), and a URL must name the service it is for. The URLs hold passwords: only
    their scheme is ever shown."""

    def where(key: str) -> str:
        return label(origins.get(key, key), key)

    postgres = "postgres" in settings.audit_sinks
    url = settings.audit_database_url
    if postgres and url is None:
        raise ConfigError(
            f"{where('audit_sinks')}: the postgres sink needs audit_database_url "
            f"({ENV_PREFIX}AUDIT_DATABASE_URL=postgresql://user:password@host/db)"
        )
    if url is not None:
        if not postgres:
            raise ConfigError(
                f"{where('audit_database_url')}: set, but audit_sinks does not name postgres: "
                'add it (audit_sinks = ["file", "postgres"]) or unset the URL'
            )
        scheme = url.get_secret_value().partition("://")[0].lower()
        if scheme not in ("postgresql", "postgres"):
            raise ConfigError(
                f"{where('audit_database_url')}: must be a postgresql:// URL "
                "(postgresql://user:password@host:5432/db)"
            )
    redis = settings.limit_redis_url
    limited = settings.limit_calls_per_minute or settings.limit_mutations_per_minute
    if redis is not None:
        if not limited:
            raise ConfigError(
                f"{where('limit_redis_url')}: set, but no limit is: set "
                "limit_calls_per_minute and/or limit_mutations_per_minute, or unset the URL"
            )
        scheme = redis.get_secret_value().partition("://")[0].lower()
        if scheme not in ("redis", "rediss", "unix"):
            raise ConfigError(
                f"{where('limit_redis_url')}: must be a redis://, rediss:// or unix:// URL "
                "(redis://:password@host:6379/0)"
            )


def _check_audit_log(path: Path, setting: str) -> None:
    """A configured audit log must be a file the gateway can append to, or one it can create:
    otherwise every mutation would be refused at its call (the log fails closed), so the
    start is refused instead. Its folders are created on the first write."""
    shown = path.name or str(path)
    if path.is_dir():
        raise ConfigError(f"{setting}: {shown!r} is a folder; name a file, e.g. audit.jsonl")
    if path.exists():
        if not path.is_file():
            raise ConfigError(f"{setting}: {shown!r} is not a regular file")
        if not os.access(path, os.W_OK):
            raise ConfigError(f"{setting}: {shown!r} cannot be written (permission denied)")
        return
    parent = path.parent
    while not parent.exists() and parent != parent.parent:
        parent = parent.parent
    if not parent.is_dir():
        raise ConfigError(
            f"{setting}: {shown!r} cannot be created: {parent.name!r} on its path is a file, "
            "not a folder"
        )
    if not os.access(parent, os.W_OK | os.X_OK):
        raise ConfigError(
            f"{setting}: {shown!r} cannot be created: its folder {parent.name or parent!s} "
            "cannot be written (permission denied)"
        )


def _servers(
    servers: dict[str, Any], own: dict[str, Any] | None, env: Mapping[str, str], lines: TomlLines
) -> dict[str, Any]:
    """The settings table of the plugin that mounts servers: its own ``[plugins.servers]``
    keys, the ``[servers.<name>]`` tables (``$env`` resolved) and where each came from."""
    table = dict(own or {})
    for key in ("servers", "origins", "source"):
        if key in table:
            where = lines.where(("plugins", SERVERS_PLUGIN, key))
            raise ConfigError(
                f"{where}: [plugins.{SERVERS_PLUGIN}] {key}: servers are configured as "
                "[servers.<name>] tables"
            )
    resolved: dict[str, Any] = {}
    origins: dict[str, str] = {}
    for name, server in servers.items():
        origins[f"servers.{name}"] = lines.where(("servers", name))
        resolved[name] = {
            k: _resolve_refs(v, env, f"{lines.where(('servers', name, k))}: [servers.{name}] {k}")
            for k, v in server.items()
        }
        for key in server:
            origins[f"servers.{name}.{key}"] = lines.where(("servers", name, key))
    return {**table, "servers": resolved, "origins": origins, "source": lines.name}


def check_servers_plugin(config: GatewayConfig, record: Any, installed: set[str]) -> None:
    """``[servers.*]`` tables or ``MCP_GATEWAY_SERVERS`` need the plugin that mounts servers,
    loaded: missing, disabled or refusing its configuration, the command stops here.
    ``record`` is that plugin's (``PluginRecord`` or ``None``)."""
    table = config.plugin_tables.get(SERVERS_PLUGIN) or {}
    variable = f"{ENV_PREFIX}SERVERS"
    if table.get("servers"):
        where = f"{config.origins.get('servers', config.source)}: [servers]"
    elif config.env.get(variable):
        where = variable
    else:
        return
    if record is not None and getattr(record.state, "value", "") == "loaded":
        return
    if record is None or SERVERS_PLUGIN not in installed:
        raise ConfigError(
            f"{where}: mounting MCP servers needs the plugin {SERVERS_DISTRIBUTION}, which is "
            f"not installed: pip install {SERVERS_DISTRIBUTION}"
        )
    if getattr(record.state, "value", "") == "disabled":
        raise ConfigError(
            f"{where}: the plugin {SERVERS_PLUGIN} that mounts them is {record.reason}"
        )
    raise ConfigError(getattr(record, "settings_mistake", None) or str(record.reason))


def _telemetry(
    table: Mapping[str, Any], env: Mapping[str, str], where: Any = None
) -> TelemetrySettings:
    from .telemetry.settings import TelemetrySettings

    return TelemetrySettings.load(table, env, where=where)


def _load_auth(
    table: dict[str, Any] | None,
    env: Mapping[str, str],
    lines: TomlLines,
    settings: GatewaySettings,
    origins: dict[str, str],
) -> AuthConfig | None:
    """The ``[auth]`` table and its ``MCP_GATEWAY_AUTH_*`` variables; ``None``: no OAuth."""
    for key, value in (table or {}).items():  # unset $env variables are errors, as elsewhere
        _resolve_refs(value, env, f"{lines.where(('auth', key))}: [auth] {key}")
    if table is None and not any(k.startswith(f"{ENV_PREFIX}AUTH_") and v for k, v in env.items()):
        return None  # nothing to read: stdio start-up does not import the auth settings
    from .auth.settings import load_auth_config

    token = label(origins.get("token", "token"), "token") if settings.token else False
    for kind in ("plugin_scopes", "tool_scopes"):  # for check_auth_names
        for name in (table or {}).get(kind) or {}:
            origins[f"auth.{kind}.{name}"] = lines.where(("auth", kind, name))
    return load_auth_config(table, env, static_token=token, locate=lines.where)


@dataclass(frozen=True)
class ToolNames:
    """The tool names this deployment's sources register, offered or not: what the settings
    that name tools (``deny_tools``, ``[auth.tool_scopes]``, ``providers``) are checked
    against, so that a misspelt name stops the start instead of leaving a tool callable, or
    needing less than the deployment meant.

    Each source of tools adds its names: the loaded plugins (a tool a name collision withholds
    counts), and a later source (an upstream MCP server) the same way. A plugin that is not
    loaded (not selected) is not imported, so its tools are not known: ``not_loaded`` names
    those plugins for the message. A source that failed before it registered (a plugin that
    cannot be imported) leaves its names unknown, ``unknown``: a name no known source registers
    is then let through, as it may be one of those, rather than stopping every other plugin
    over one already reported broken."""

    known: frozenset[str]
    not_loaded: tuple[str, ...] = ()
    unknown: tuple[str, ...] = ()

    def problem(self, name: str) -> str | None:
        """Why ``name`` names no tool (with the closest one), or ``None``."""
        if name in self.known or self.unknown:
            return None
        if not self.not_loaded:
            return f"no plugin registers a tool called {name!r}{closest(name, sorted(self.known))}"
        return (
            f"no loaded plugin registers a tool called {name!r} (not loaded: "
            f"{', '.join(self.not_loaded)}){closest(name, sorted(self.known))}"
        )


def check_tool_names(config: GatewayConfig, tools: ToolNames) -> None:
    """Every name in ``deny_tools`` (file or variable) and every key of ``[auth.tool_scopes]``
    names a tool of ``tools``: a misspelt one would leave that tool offered and callable, or
    needing only its tier's scope."""
    for name in config.deny_tools:
        problem = tools.problem(name)
        if problem:
            setting = label(config.origins.get("deny_tools", "deny_tools"), "deny_tools")
            raise ConfigError(f"{setting}: {problem}")
    for name in config.auth.tool_scopes if config.auth is not None else {}:
        problem = tools.problem(name)
        if problem:
            where = config.origins.get(f"auth.tool_scopes.{name}", config.source)
            raise ConfigError(f"{where}: [auth.tool_scopes] {name}: {problem}")


def check_auth_plugins(config: GatewayConfig, plugins: set[str]) -> None:
    """Every ``[auth.plugin_scopes.<name>]`` names an installed plugin (loaded or not)."""
    for name in config.auth.plugin_scopes if config.auth is not None else {}:
        if name in plugins:
            continue
        where = config.origins.get(f"auth.plugin_scopes.{name}", config.source)
        raise ConfigError(
            f"{where}: [auth.plugin_scopes] {name}: no plugin called {name!r} is installed"
            f"{closest(name, sorted(plugins))}"
        )


#: Variables of the core's own besides ``MCP_GATEWAY_<setting>``: ``[auth]``'s, ``[telemetry]``'s
#: and OpenTelemetry's.
_CORE_PREFIXES = (f"{ENV_PREFIX}AUTH_", f"{ENV_PREFIX}TELEMETRY", "OTEL_")


def core_variable(name: str) -> bool:
    """Is ``name`` a variable the core itself reads: a ``[gateway]`` setting's, the
    configuration file's or the servers file's path, ``[auth]``'s, ``[telemetry]``'s or
    OpenTelemetry's? Any other ``MCP_GATEWAY_*`` variable may be a plugin's own
    (:func:`env_field`, as the scrape plugin's ``MCP_GATEWAY_SCRAPE_TIMEOUT``)."""
    if name.startswith(_CORE_PREFIXES):
        return True
    key = name[len(ENV_PREFIX) :].lower() if name.startswith(ENV_PREFIX) else None
    return key is not None and (key in GatewaySettings.model_fields or key in ("config", "servers"))


def same_distribution(a: str, b: str) -> bool:
    """Distribution names compare normalized (PEP 503): case, ``-``, ``_`` and ``.``."""

    def norm(n: str) -> str:
        return re.sub(r"[-_.]+", "-", n).lower()

    return bool(a) and norm(a) == norm(b)


def check_providers(
    config: GatewayConfig, tools: ToolNames, installed: Mapping[str, set[str]]
) -> None:
    """Each ``providers`` entry settles a name two plugins could claim: a plugin name
    (``installed``: each installed plugin's distributions) mapped to a distribution that
    provides it, or a tool name of ``tools`` mapped to an installed plugin. An entry that
    names neither would settle nothing, silently."""
    setting = label(config.origins.get("providers", "providers"), "providers")
    plugins = sorted(installed)
    for name, provider in config.providers.items():
        where = f"{setting}[{name}]"
        if name in installed:
            dists = sorted(installed[name])
            if not any(same_distribution(provider, d) for d in dists):
                raise ConfigError(
                    f"{where}: no installed distribution {provider!r} provides plugin "
                    f"{name!r} (provided by: {', '.join(dists)}){closest(provider, dists)}"
                )
            continue
        if tools.problem(name) is None:
            if provider not in installed:
                raise ConfigError(
                    f"{where}: {provider!r} is no installed plugin (installed: "
                    f"{', '.join(plugins)}){closest(provider, plugins)}"
                )
            continue
        loaded = "plugin" if not tools.not_loaded else "loaded plugin"
        raise ConfigError(
            f"{where}: {name!r} is neither an installed plugin nor a tool a {loaded} registers"
            f"{closest(name, [*plugins, *sorted(tools.known)])}"
        )


def check_plugin_names(config: GatewayConfig, installed: set[str], *, builtin: str) -> None:
    """Every name in ``plugins`` / ``disable_plugins`` / ``isolate`` names an installed
    plugin."""
    if isinstance(config.isolate, list):
        setting = label(config.origins.get("isolate", "isolate"), "isolate")
        for name in config.isolate:
            if name == SERVERS_PLUGIN and name in installed:
                raise ConfigError(
                    f"{setting}: the plugin {name!r} hands the gateway the MCP servers to "
                    "mount (each runs in a process of its own already); it runs in process"
                )
            if name in installed:
                continue
            if name == builtin:
                raise ConfigError(
                    f"{setting}: the built-in plugin {name!r} is part of the gateway; it "
                    "cannot run in a worker"
                )
            raise ConfigError(
                f"{setting}: unknown plugin {name!r} (installed: "
                f"{', '.join(sorted(installed)) or 'none'}; or one of "
                f"{', '.join(ISOLATE_CHOICES)})"
                f"{closest(name, [*sorted(installed), *ISOLATE_CHOICES])}"
            )
    for key in ("plugins", "disable_plugins"):
        for name in getattr(config, key):
            if name in installed or (name == builtin and key == "plugins"):
                continue
            setting = label(config.origins.get(key, key), key)
            if name == builtin:
                raise ConfigError(f"{setting}: the built-in plugin {name!r} cannot be disabled")
            raise ConfigError(
                f"{setting}: unknown plugin {name!r} (installed: "
                f"{', '.join(sorted(installed)) or 'none'}){closest(name, sorted(installed))}"
            )


def check_plugin_tables(config: GatewayConfig, known: set[str]) -> None:
    """Every ``[plugins.<name>]`` names an installed plugin or a loaded plugin's backend table."""
    for name in config.plugin_tables:
        if name in known:
            continue
        where = config.origins.get(f"plugins.{name}", config.source)
        hint = closest(name, sorted(known), template="[plugins.{}]")
        raise ConfigError(
            f"{where}: unknown plugin table [plugins.{name}] (a table names an installed "
            f"plugin or a backend a loaded plugin uses: {', '.join(sorted(known)) or 'none'})"
            f"{hint}"
        )


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
