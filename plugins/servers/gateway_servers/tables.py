"""Server tables as people already write them, checked, into :class:`~gateway.spec.ServerSpec`.

The keys of an ``mcpServers`` entry of Claude Code's ``.mcp.json`` and Claude Desktop's config
(``command``, ``args``, ``env``, ``cwd``; ``type = "http"``, ``url``, ``headers``) plus the
gateway's own (``tools``, ``deny_tools``, ``prefix``, ``tiers``, ``timeout``, ``enabled``,
``pin``, ``list_wait``, ``protocol``). A string may hold ``${NAME}`` or ``${NAME:-default}`` (in
``command``, ``args``, ``env``, ``cwd``, ``url`` and ``headers``, as Claude Code expands them);
the config file also takes ``{ "$env" = "NAME" }`` (resolved by the core). Every mistake is a
:class:`~gateway.config.ConfigError` of one line: where, which server and key, what is wrong,
and the closest valid name.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from gateway.config import ConfigError, value_reason
from gateway.configkit import closest
from gateway.spec import ServerSpec, Tier

#: A server's name: it names its tools' plugin, its log, its breaker and its approvals file.
SERVER_NAME = re.compile(r"^[A-Za-z0-9_.-]{1,64}$")
_REFERENCE = re.compile(r"\$\{([A-Za-z_][A-Za-z0-9_]*)(?::-([^}]*))?\}")
#: Keys whose strings are expanded (as Claude Code does in an ``.mcp.json``).
EXPANDED = ("command", "args", "env", "cwd", "url", "headers")


class ServerTable(BaseModel):
    """One ``[servers.<name>]`` table, or one entry of ``mcpServers``."""

    model_config = ConfigDict(extra="forbid")

    type: Literal["stdio", "http"] | None = Field(
        None, description="stdio (a command) or http (Streamable HTTP at url); from the keys"
    )
    command: str | None = Field(None, min_length=1, description="The program of a stdio server")
    args: list[str] = Field(default_factory=list, description="Its arguments")
    env: dict[str, str] = Field(
        default_factory=dict, description="Its environment, besides PATH, HOME and the locale"
    )
    cwd: str | None = Field(None, description="Its working directory (default: the gateway's)")
    url: str | None = Field(
        None, pattern=r"^https?://\S+$", description="A Streamable HTTP endpoint"
    )
    headers: dict[str, str] = Field(default_factory=dict, description="Sent with every request")
    tools: list[str] | None = Field(None, description="Only these of its tools (its own names)")
    deny_tools: list[str] = Field(default_factory=list, description="None of these")
    prefix: str = Field(
        "", pattern=r"^[A-Za-z0-9_.-]*$", max_length=32, description="Before each published name"
    )
    tiers: dict[str, Literal["read", "mutation"]] = Field(
        default_factory=dict, description="A tool's tier, where its readOnlyHint is not the truth"
    )
    timeout: float | None = Field(None, gt=0, allow_inf_nan=False, description="Seconds a call")
    enabled: bool = Field(True, description="false: configured, not started")
    pin: Literal["first-use", "approve"] = Field(
        "first-use", description="first-use: approve what it lists first; approve: nothing yet"
    )
    list_wait: float = Field(
        5.0, ge=0, allow_inf_nan=False, description="Seconds a first listing waits for it"
    )
    protocol: Literal["2025-11-25", "2026-07-28"] = Field(
        "2025-11-25", description="The revision it is spoken to at (2026-07-28: server/discover)"
    )

    @model_validator(mode="after")
    def _one_transport(self) -> ServerTable:
        if self.type == "http" or (self.type is None and self.url is not None):
            if self.url is None:
                raise ValueError("url: an http server needs url")
            if self.command is not None:
                raise ValueError("command: a server has either command (stdio) or url (http)")
            for key in ("args", "env", "cwd"):
                if getattr(self, key):
                    raise ValueError(f"{key}: only a stdio server (command) takes {key}")
        else:
            if self.command is None:
                raise ValueError("command: a stdio server needs command (or type = 'http' and url)")
            if self.url is not None:
                raise ValueError("url: a server has either command (stdio) or url (http)")
            if self.headers:
                raise ValueError("headers: only an http server (url) takes headers")
        return self


def _expand(value: Any, env: Mapping[str, str], where: str) -> Any:
    """``${NAME}`` and ``${NAME:-default}`` replaced; an unset one without default is an error."""
    if isinstance(value, str):

        def one(match: re.Match[str]) -> str:
            name, default = match.group(1), match.group(2)
            if name in env and env[name] != "":
                return env[name]
            if default is not None:
                return default
            raise ConfigError(
                f"{where}: ${{{name}}} is not set; export {name} or write ${{{name}:-default}}"
            )

        return _REFERENCE.sub(one, value)
    if isinstance(value, list):
        return [_expand(v, env, where) for v in value]
    if isinstance(value, dict):
        return {k: _expand(v, env, where) for k, v in value.items()}
    return value


def server_spec(
    name: str, table: Any, env: Mapping[str, str], *, where: str, label: str
) -> ServerSpec:
    """``table`` (one server's keys) as a spec; ``where`` is its origin (``gw.toml:12``),
    ``label`` how messages name it (``[servers.fs]``)."""
    if not SERVER_NAME.fullmatch(name):
        raise ConfigError(
            f"{where}: {label}: a server name is letters, digits, _ - . (at most 64), "
            f"not {name[:70]!r}"
        )
    if not isinstance(table, dict):
        raise ConfigError(f"{where}: {label} must be a table of keys (command, args, ... or url)")
    if table.get("type") == "sse":
        raise ConfigError(
            f"{where}: {label} type: 'sse' (the old HTTP+SSE transport) is not supported; "
            "use the server's Streamable HTTP endpoint with type = 'http'"
        )
    for key in table:
        if key not in ServerTable.model_fields:
            hint = closest(str(key), list(ServerTable.model_fields))
            raise ConfigError(f"{where}: {label} {key}: unknown key{hint}")
    values = {
        k: _expand(v, env, f"{where}: {label} {k}") if k in EXPANDED else v
        for k, v in table.items()
    }
    try:
        parsed = ServerTable.model_validate(values)
    except ValidationError as exc:
        error = exc.errors(include_url=False)[0]
        loc = [str(p) for p in error["loc"]]
        key = loc[0] if loc else ""
        if not key:  # the model's own check: its message starts with the key
            message = (
                str(error["ctx"].get("error", error["msg"])) if "ctx" in error else error["msg"]
            )
            raise ConfigError(f"{where}: {label} {message}") from None
        item = "." + ".".join(loc[1:]) if len(loc) > 1 else ""
        hidden = frozenset({"env", "headers"})  # their values may be credentials
        reason = value_reason(key, error, ServerTable, hidden=hidden)
        raise ConfigError(f"{where}: {label} {key}{item}: {reason}") from None
    return ServerSpec(
        name=name,
        command=parsed.command,
        args=tuple(parsed.args),
        env=dict(parsed.env),
        cwd=parsed.cwd,
        url=parsed.url,
        headers=dict(parsed.headers),
        tools=tuple(parsed.tools) if parsed.tools is not None else None,
        deny_tools=tuple(parsed.deny_tools),
        prefix=parsed.prefix,
        tiers={k: Tier(v) for k, v in parsed.tiers.items()},
        timeout=parsed.timeout,
        enabled=parsed.enabled,
        pin=parsed.pin,
        list_wait=parsed.list_wait,
        origin=where,
        protocol=parsed.protocol,
    )


def from_tables(
    tables: Mapping[str, Any], origins: Mapping[str, str], env: Mapping[str, str], source: str
) -> list[ServerSpec]:
    """The ``[servers.<name>]`` tables of the config file."""
    out = []
    for name, table in tables.items():
        where = origins.get(f"servers.{name}", source)
        out.append(server_spec(name, table, env, where=where, label=f"[servers.{name}]"))
    return out


def from_mcp_json(path: str, env: Mapping[str, str], variable: str) -> list[ServerSpec]:
    """Every entry of the ``mcpServers`` object of the JSON file at ``path``."""
    shown = Path(path).name
    where = f"{variable} ({shown})"
    try:
        data = json.loads(Path(path).read_bytes())
    except FileNotFoundError:
        raise ConfigError(f"{variable}: {shown} not found") from None
    except (OSError, ValueError) as exc:
        reason = exc.strerror if isinstance(exc, OSError) else "not valid JSON"
        raise ConfigError(f"{variable}: {shown} cannot be read ({reason})") from None
    servers = data.get("mcpServers") if isinstance(data, dict) else None
    if not isinstance(servers, dict):
        raise ConfigError(f"{where}: no mcpServers object (the shape of a .mcp.json file)")
    return [
        server_spec(name, table, env, where=where, label=f"mcpServers.{name}")
        for name, table in servers.items()
    ]
