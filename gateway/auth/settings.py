"""The ``[auth]`` table: the gateway as an OAuth 2.1 resource server (MCP authorization spec).

```toml
[auth]
issuer = "https://idp.example/realms/team"    # MCP_GATEWAY_AUTH_ISSUER
resource = "https://gw.example/mcp"           # MCP_GATEWAY_AUTH_RESOURCE: the public /mcp URL
# audience = ["https://gw.example/mcp"]       # MCP_GATEWAY_AUTH_AUDIENCE; default: resource
# jwks_url = "https://idp.example/…/certs"    # else found through the issuer's metadata
scopes = { read = "gateway:read", mutate = "gateway:mutate" }

[auth.plugin_scopes.orchestrator]             # per plugin, either or both tiers
mutate = "orchestrator:operate"

[auth.tool_scopes]                            # per tool, wins over everything else
delete_job = "orchestrator:admin"

[auth.introspection]                          # RFC 7662, for opaque (non-JWT) tokens
client_id = "mcp-gateway"
client_secret = { "$env" = "MCP_GATEWAY_AUTH_INTROSPECTION_CLIENT_SECRET" }
```

Standalone on purpose: :func:`load_auth_config` takes the raw table and the environment, so
the core config can embed it without this module knowing its shape.
"""

from __future__ import annotations

import functools
import ipaddress
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, Literal
from urllib.parse import urlsplit, urlunsplit

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    SecretStr,
    ValidationError,
    field_validator,
    model_validator,
)

from ..configkit import NUMBER_ERRORS, ConfigError, closest, number_rule, resolve_env_refs
from ..spec import Tier
from .identity import Identity

ENV_PREFIX = "MCP_GATEWAY_AUTH_"

#: Signature algorithms a public key can verify. HS* (shared secrets) and ``none`` are never
#: accepted: with them, anyone who can read the issuer's public key could mint tokens.
ASYMMETRIC_ALGORITHMS = (
    "RS256",
    "RS384",
    "RS512",
    "PS256",
    "PS384",
    "PS512",
    "ES256",
    "ES384",
    "ES512",
    "EdDSA",
)

#: RFC 6749 §3.3 scope-token: printable ASCII without space, ``"`` and ``\\``, so a scope is
#: safe inside a ``WWW-Authenticate`` quoted string as it is.
_SCOPE_TOKEN = re.compile(r"^[\x21\x23-\x5b\x5d-\x7e]{1,128}$")
_TOOL_NAME = re.compile(r"^[a-zA-Z0-9_-]{1,64}$")

# The environment variable of each setting; nested ones as "table.key".
_ENV: dict[str, str] = {
    "issuer": "ISSUER",
    "audience": "AUDIENCE",
    "resource": "RESOURCE",
    "jwks_url": "JWKS_URL",
    "scopes.read": "READ_SCOPE",
    "scopes.mutate": "MUTATE_SCOPE",
    "introspection.endpoint": "INTROSPECTION_ENDPOINT",
    "introspection.client_id": "INTROSPECTION_CLIENT_ID",
    "introspection.client_secret": "INTROSPECTION_CLIENT_SECRET",
}


class AuthConfigError(ConfigError):
    """The ``[auth]`` settings cannot be used; the message names the setting."""


def is_loopback_host(host: str) -> bool:
    if host.lower() == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


def check_url(value: str, what: str, *, path_allowed: bool = True) -> str:
    """An absolute ``https`` URL (``http`` only to a loopback address), no query or fragment."""
    parts = urlsplit(value.strip())
    if parts.scheme not in ("https", "http") or not parts.hostname:
        raise ValueError(f"{what} must be an absolute https URL")
    if parts.scheme == "http" and not is_loopback_host(parts.hostname):
        raise ValueError(f"{what} must use https (plain http only to a loopback address)")
    if parts.query or parts.fragment or parts.username or parts.password:
        raise ValueError(f"{what} must not carry a query, fragment or credentials")
    if not path_allowed and parts.path not in ("", "/"):
        raise ValueError(f"{what} must not have a path")
    return urlunsplit(parts)


def _scope(value: str, what: str) -> str:
    if not _SCOPE_TOKEN.match(value):
        raise ValueError(
            f"{what} must be one OAuth scope token: printable ASCII without spaces, quotes or "
            "backslashes, at most 128 characters"
        )
    return value


class ScopeNames(BaseModel):
    """The scope each tier needs."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    read: str = "gateway:read"
    mutate: str = "gateway:mutate"

    @field_validator("read", "mutate")
    @classmethod
    def _valid(cls, value: str) -> str:
        return _scope(value, "a scope name")

    @model_validator(mode="after")
    def _distinct(self) -> ScopeNames:
        if self.read == self.mutate:
            raise ValueError(_SAME_SCOPE.format(scope=self.read))
        return self


#: One scope for both tiers would let every reader call every mutation tool.
_SAME_SCOPE = (
    "read and mutate are both {scope!r}: every token that may read could then call every "
    "mutation tool; give mutations a scope of their own"
)


class PluginScopes(BaseModel):
    """A plugin's own scope names; a tier left out keeps the global name."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    read: str | None = None
    mutate: str | None = None

    @field_validator("read", "mutate")
    @classmethod
    def _valid(cls, value: str | None) -> str | None:
        return None if value is None else _scope(value, "a scope name")


class IntrospectionConfig(BaseModel):
    """RFC 7662 token introspection, for access tokens that are not JWTs."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    endpoint: str | None = Field(
        None, description="Else the issuer metadata's introspection_endpoint."
    )
    client_id: str = Field(..., min_length=1, max_length=256)
    client_secret: SecretStr
    cache_seconds: float = Field(60.0, ge=0, le=3600)
    refusals_per_minute: int = Field(
        20,
        ge=1,
        le=100_000,
        description="Introspections one client address may cause per minute for tokens that "
        "turn out not to be valid (a burst of as many at once); further new tokens from it "
        "wait (429). Valid tokens and cached answers cost nothing.",
    )

    @field_validator("endpoint")
    @classmethod
    def _endpoint(cls, value: str | None) -> str | None:
        return None if value is None else check_url(value, "introspection.endpoint")


class AuthConfig(BaseModel):
    """The resource-server settings. Build with :func:`load_auth_config`."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    issuer: str
    resource: str | None = Field(
        None,
        description="The public URL of the /mcp endpoint, as clients reach it; default: the "
        "address the server is bound to.",
    )
    audience: tuple[str, ...] = Field((), description="Accepted `aud` values; default: resource.")
    jwks_url: str | None = None
    introspection: IntrospectionConfig | None = None
    scopes: ScopeNames = ScopeNames()
    plugin_scopes: dict[str, PluginScopes] = Field(default_factory=dict)
    tool_scopes: dict[str, str] = Field(default_factory=dict)
    algorithms: tuple[str, ...] = ASYMMETRIC_ALGORITHMS
    leeway_seconds: float = Field(30.0, ge=0, le=300)
    jwks_cache_seconds: float = Field(600.0, ge=0, le=86400)
    # At least a second: each made-up `kid` would otherwise cost the provider a fetch.
    jwks_refetch_seconds: float = Field(
        30.0, ge=1, le=3600, description="Least time between two fetches for an unknown `kid`."
    )
    http_timeout: float = Field(5.0, gt=0, le=60)
    metadata_document: Literal["auto", "openid", "oauth"] = "auto"

    @field_validator("issuer")
    @classmethod
    def _issuer(cls, value: str) -> str:
        # Kept exactly as written: `iss` and the metadata's `issuer` are compared as strings
        # (RFC 8414 §3.3), and some providers' issuers end in a slash, some do not.
        return check_url(value, "issuer")

    @field_validator("resource", "jwks_url")
    @classmethod
    def _urls(cls, value: str | None) -> str | None:
        return None if value is None else check_url(value, "this URL")

    @field_validator("audience", mode="before")
    @classmethod
    def _audience(cls, value: Any) -> Any:
        if isinstance(value, str):
            value = [v.strip() for v in value.split(",")]
        if isinstance(value, list | tuple):
            return tuple(str(v).strip() for v in value if str(v).strip())
        return value

    @field_validator("algorithms", mode="before")
    @classmethod
    def _algorithms(cls, value: Any) -> Any:
        items = [value] if isinstance(value, str) else list(value)
        bad = [str(a) for a in items if a not in ASYMMETRIC_ALGORITHMS]
        if bad:
            raise ValueError(
                f"not accepted: {', '.join(bad)} (only public-key algorithms: "
                f"{', '.join(ASYMMETRIC_ALGORITHMS)}; never none or HS*)"
            )
        if not items:
            raise ValueError("name at least one algorithm")
        return tuple(items)

    @field_validator("tool_scopes")
    @classmethod
    def _tool_scopes(cls, value: dict[str, str]) -> dict[str, str]:
        for tool, scope in value.items():
            if not _TOOL_NAME.match(tool):
                raise ValueError(f"{tool[:80]!r} is not a tool name")
            _scope(scope, f"the scope of {tool}")
        return value

    def resource_or(self, default: str) -> str:
        return self.resource or default

    def audiences(self, resource: str) -> tuple[str, ...]:
        return self.audience or (resource,)


def _env_value(key: str, raw: str) -> Any:
    return [v.strip() for v in raw.split(",") if v.strip()] if key == "audience" else raw


#: Where a value sits in the file: ``("auth", "issuer")`` → ``"gw.toml:7"`` (or ``""``).
Locate = Callable[[tuple[str, ...]], str]

# The model that holds the keys under each nested table, for "did you mean" hints.
_TABLE_MODELS: dict[str, type[BaseModel]] = {
    "scopes": ScopeNames,
    "introspection": IntrospectionConfig,
    "plugin_scopes": PluginScopes,
}


class _Origins:
    """Names where each ``[auth]`` setting came from: its variable, or its place in the file."""

    def __init__(self, locate: Locate | None) -> None:
        self.locate = locate
        self.variables: dict[tuple[str, ...], str] = {}

    def label(self, loc: tuple[str, ...]) -> str:
        """``MCP_GATEWAY_AUTH_ISSUER``, ``gw.toml:3: [auth] issuer`` or ``[auth.scopes] read``."""
        for depth in range(len(loc), 0, -1):
            if loc[:depth] in self.variables:
                return self.variables[loc[:depth]]
        # A check of a whole table (scopes): the variables that set its keys, if any did.
        inner = [name for key, name in self.variables.items() if loc and key[: len(loc)] == loc]
        if inner:
            return ", ".join(inner)
        table = ".".join(("auth", *loc[:-1])) if loc else "auth"
        text = f"[{table}] {loc[-1]}" if loc else "[auth]"
        place = self.locate(("auth", *loc)) if self.locate is not None else ""
        return f"{place}: {text}" if place else text


def _reason(error: Mapping[str, Any], loc: tuple[str, ...]) -> str:
    model = _TABLE_MODELS.get(loc[0], AuthConfig) if len(loc) > 1 else AuthConfig
    if error["type"] == "extra_forbidden":
        return "unknown setting" + closest(loc[-1], list(model.model_fields))
    field = model.model_fields.get(loc[-1]) if loc else None
    if field is not None and error["type"] in NUMBER_ERRORS:
        return f"must be {number_rule(field)}"
    msg = str(error["msg"]).removeprefix("Value error, ")
    return msg[:1].lower() + msg[1:]


def _reject_literal_secret(table: Mapping[str, Any], origins: _Origins) -> None:
    intro = table.get("introspection")
    if isinstance(intro, Mapping) and isinstance(intro.get("client_secret"), str):
        raise AuthConfigError(
            f"{origins.label(('introspection', 'client_secret'))}: secrets come from the "
            'environment: write { "$env" = "MCP_GATEWAY_AUTH_INTROSPECTION_CLIENT_SECRET" } '
            "or set that variable"
        )


def load_auth_config(
    table: Mapping[str, Any] | None,
    env: Mapping[str, str],
    *,
    static_token: bool | str = False,
    locate: Locate | None = None,
) -> AuthConfig | None:
    """The ``[auth]`` table with ``MCP_GATEWAY_AUTH_*`` variables over it (environment wins);
    ``None`` when no issuer is set (no OAuth). :class:`AuthConfigError` names what is wrong,
    where it came from (the variable, or ``locate``'s place in the file) and the closest valid
    name of a misspelt one.

    ``static_token``: a shared token is configured (where, if a string); with an issuer too it
    is an error, because which of the two would decide who may call is then anyone's guess.
    """
    origins = _Origins(locate)
    raw = dict(table or {})
    _reject_literal_secret(raw, origins)
    values: dict[str, Any] = resolve_env_refs(raw, env)
    for key, suffix in _ENV.items():
        given = env.get(ENV_PREFIX + suffix, "")
        if not given.strip():
            continue
        origins.variables[tuple(key.split("."))] = ENV_PREFIX + suffix
        if "." in key:
            outer, inner = key.split(".")
            nested = values.get(outer)
            values[outer] = {**(nested if isinstance(nested, Mapping) else {}), inner: given}
        else:
            values[key] = _env_value(key, given)
    if not values.get("issuer"):
        if values:
            raise AuthConfigError(
                f"{origins.label(())}: settings without an issuer; set issuer "
                "(MCP_GATEWAY_AUTH_ISSUER) to turn OAuth on, or remove the [auth] table"
            )
        return None
    if static_token:
        token = static_token if isinstance(static_token, str) else "MCP_GATEWAY_TOKEN"
        raise AuthConfigError(
            f"{origins.label(('issuer',))}: both a shared token ({token}) and an OAuth issuer "
            "are set: choose one; for a team behind an identity provider, unset the token"
        )
    try:
        config = AuthConfig.model_validate(values)
    except ValidationError as exc:
        error = exc.errors(include_url=False, include_input=False)[0]
        loc = tuple(str(p) for p in error["loc"])
        raise AuthConfigError(f"{origins.label(loc)}: {_reason(error, loc)}") from None
    for name, own in config.plugin_scopes.items():
        read = own.read or config.scopes.read
        if read == (own.mutate or config.scopes.mutate):
            where = origins.label(("plugin_scopes", name))
            raise AuthConfigError(f"{where}: {_SAME_SCOPE.format(scope=read)}")
    return config


def resolve_resource(config: AuthConfig, host: str, port: int, path: str = "/mcp") -> str:
    """The public URL of the MCP endpoint: ``resource`` if set, else the loopback address the
    server is bound to. Every token must carry this URL as its audience, so on any other
    address (behind a TLS proxy, on every interface) it cannot be guessed and must be set."""
    if config.resource:
        return config.resource
    if not is_loopback_host(host.strip("[]")):
        raise AuthConfigError(
            f"[auth] resource: serving on {host}, the gateway cannot tell the URL clients "
            "reach it at; set resource (MCP_GATEWAY_AUTH_RESOURCE), e.g. "
            "'https://gateway.example/mcp'"
        )
    shown = f"[{host.strip('[]')}]" if ":" in host else host
    return f"http://{shown}:{port}{path}"


# Tiers as scopes: which OAuth scope each tool needs, and whether a caller holds it.
#
# A pure function of the caller and the tool (tier, plugin, name), so ``tools/list`` filtering,
# the pipeline's ``PERMISSION_DENIED`` and the transport's early 403 cannot disagree.
# Precedence: ``tool_scopes[name]``, then ``plugin_scopes[plugin]`` for the tool's tier, then
# the global name of the tier. Each tool needs exactly one scope; a token that should both
# read and change things carries both (the tiers do not imply each other).


@dataclass(frozen=True)
class ScopePolicy:
    names: ScopeNames = field(default_factory=ScopeNames)
    plugins: Mapping[str, PluginScopes] = field(default_factory=dict)
    tools: Mapping[str, str] = field(default_factory=dict)

    @classmethod
    def from_config(cls, config: AuthConfig) -> ScopePolicy:
        return cls(config.scopes, dict(config.plugin_scopes), dict(config.tool_scopes))

    def required(self, *, tier: Tier, plugin: str, name: str) -> str:
        """The one scope a call of this tool needs."""
        if name in self.tools:
            return self.tools[name]
        own = self.plugins.get(plugin)
        if tier is Tier.MUTATION:
            return (own.mutate if own else None) or self.names.mutate
        return (own.read if own else None) or self.names.read

    def missing(self, identity: Identity, *, tier: Tier, plugin: str, name: str) -> str | None:
        """``None`` when the caller may use the tool, else the scope it lacks."""
        if identity.scopes is None:
            return None
        need = self.required(tier=tier, plugin=plugin, name=name)
        return None if need in identity.scopes else need

    def supported(self) -> list[str]:
        """Every scope some tool may need, for the protected-resource metadata."""
        found = [self.names.read, self.names.mutate]
        for own in self.plugins.values():
            found += [s for s in (own.read, own.mutate) if s]
        found += list(self.tools.values())
        return list(dict.fromkeys(found))

    def to_request(self) -> list[str]:
        """What a client should ask for by default: the global read and mutate scopes."""
        return list(dict.fromkeys([self.names.read, self.names.mutate]))

    def grants_anything(self, identity: Identity) -> bool:
        """Does the caller hold any scope that unlocks a tool (else the transport says 403)?"""
        if identity.scopes is None:
            return True
        return not identity.scopes.isdisjoint(self._unlocking)

    @functools.cached_property
    def _unlocking(self) -> frozenset[str]:  # asked on every request
        return frozenset(self.supported())
