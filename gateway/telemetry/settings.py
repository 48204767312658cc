"""The ``[telemetry]`` table, overridden by the standard ``OTEL_*`` variables.

```toml
[telemetry]
enabled = true                        # MCP_GATEWAY_TELEMETRY; OTEL_SDK_DISABLED=true wins
service_name = "mcp-gateway"          # OTEL_SERVICE_NAME
endpoint = "http://127.0.0.1:4318"    # OTEL_EXPORTER_OTLP_ENDPOINT
traces_exporter = ["otlp"]            # OTEL_TRACES_EXPORTER: otlp, console, none
metrics_exporter = ["otlp"]           # OTEL_METRICS_EXPORTER
```
Telemetry is off unless switched on here or by ``MCP_GATEWAY_TELEMETRY``: a client such as
Claude Code may pass its own ``OTEL_*`` variables to the servers it starts, and those alone
must not make the gateway export anything. The OTLP exporters read their other variables
themselves (``OTEL_EXPORTER_OTLP_HEADERS``, ``…_TIMEOUT``, ``…_CERTIFICATE``, the per-signal
forms), as do the sampler (``OTEL_TRACES_SAMPLER``), the batch processor (``OTEL_BSP_*``) and
the resource (``OTEL_RESOURCE_ATTRIBUTES``).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any, Literal
from urllib.parse import unquote, urlsplit

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from ..configkit import (
    ConfigError,
    closest,
    env_field,
    field_env_names,
    resolve_env_refs,
    value_reason,
)

Exporter = Literal["otlp", "console", "none"]
Protocol = Literal["http/protobuf", "grpc"]
Signal = Literal["traces", "metrics"]

_DEFAULT_PORT: dict[str, int] = {"http/protobuf": 4318, "grpc": 4317}
_HEADER_VARS = (
    "OTEL_EXPORTER_OTLP_HEADERS",
    "OTEL_EXPORTER_OTLP_TRACES_HEADERS",
    "OTEL_EXPORTER_OTLP_METRICS_HEADERS",
)


class TelemetryError(ConfigError):
    """Telemetry was asked for but cannot run as configured; the message says what to do."""


class TelemetrySettings(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    enabled: bool = env_field("MCP_GATEWAY_TELEMETRY", default=False)
    sdk_disabled: bool = env_field(
        "OTEL_SDK_DISABLED",
        default=False,
        description="The standard kill switch: true turns telemetry off whatever else says.",
    )
    service_name: str = env_field("OTEL_SERVICE_NAME", default="mcp-gateway")
    endpoint: str | None = env_field(
        "OTEL_EXPORTER_OTLP_ENDPOINT",
        default=None,
        description="Base URL of the OTLP collector; /v1/traces and /v1/metrics are added "
        "for http/protobuf. Default http://localhost:4318 (grpc: 4317).",
    )
    protocol: Protocol = env_field("OTEL_EXPORTER_OTLP_PROTOCOL", default="http/protobuf")
    traces_exporter: tuple[Exporter, ...] = env_field("OTEL_TRACES_EXPORTER", default=("otlp",))
    metrics_exporter: tuple[Exporter, ...] = env_field("OTEL_METRICS_EXPORTER", default=("otlp",))
    metric_export_interval_ms: int = Field(
        60_000,
        gt=0,
        json_schema_extra={"env": ["OTEL_METRIC_EXPORT_INTERVAL"]},
        description="How often metrics are exported, in milliseconds.",
    )

    @field_validator("traces_exporter", "metrics_exporter", mode="before")
    @classmethod
    def _comma_list(cls, value: Any) -> Any:
        # The variables are comma-separated lists ("otlp,console"); the table may use either.
        if isinstance(value, str):
            return tuple(v.strip().lower() for v in value.split(",") if v.strip()) or ("none",)
        return value

    @field_validator("endpoint")
    @classmethod
    def _http_url(cls, value: str | None) -> str | None:
        if value is None or not value.strip():
            return None
        parts = urlsplit(value.strip())
        if parts.scheme not in ("http", "https") or not parts.hostname:
            raise ValueError("must be an http:// or https:// URL such as http://127.0.0.1:4318")
        return value.strip().rstrip("/")

    @property
    def active(self) -> bool:
        return self.enabled and not self.sdk_disabled

    def exporters(self, signal: Signal) -> tuple[Exporter, ...]:
        chosen = self.traces_exporter if signal == "traces" else self.metrics_exporter
        return tuple(e for e in dict.fromkeys(chosen) if e != "none")

    def otlp_endpoint(self, signal: Signal, env: Mapping[str, str]) -> str:
        """Where the OTLP exporter of ``signal`` sends, by the variables' own rules: the
        per-signal variable as it is, else the base URL plus ``/v1/<signal>`` (http only)."""
        own = env.get(f"OTEL_EXPORTER_OTLP_{signal.upper()}_ENDPOINT", "").strip()
        if own:
            return own
        base = self.endpoint or f"http://localhost:{_DEFAULT_PORT[self.protocol]}"
        return base if self.protocol == "grpc" else f"{base}/v1/{signal}"

    @classmethod
    def load(
        cls,
        table: Mapping[str, Any] | None,
        env: Mapping[str, str],
        *,
        where: Callable[[str], str] | None = None,
    ) -> TelemetrySettings:
        """The ``[telemetry]`` table with the environment on top. A mistake is a
        :class:`TelemetryError` of one line naming the setting and where its value came from:
        the variable, or ``where(key)`` for the table's (``gw.toml:3: [telemetry] endpoint``).

        The ``OTEL_*`` variables are read only when telemetry is switched on: a client passes
        its own environment to the servers it starts, and a value meant for another program
        (``OTEL_METRICS_EXPORTER=prometheus``) must not stop a gateway that exports nothing.
        """
        where = where or (lambda key: f"[telemetry] {key}")
        values = resolve_env_refs(dict(table or {}), env)
        for key in values:
            if key not in cls.model_fields:
                hint = closest(key, list(cls.model_fields))
                raise TelemetryError(f"{where(key)}: unknown setting{hint}")
        origins = {key: where(key) for key in values}
        otel: dict[str, tuple[str, str]] = {}
        for key, names in field_env_names(cls).items():
            for name in names:
                if env.get(name, "").strip():
                    if name.startswith("OTEL_"):
                        otel[key] = (name, env[name])
                    else:
                        values[key], origins[key] = env[name], name
                    break
        settings = cls._checked(values, origins, where)
        # The kill switch first: once it is set, the other variables do not matter either.
        for keys in (["sdk_disabled"], list(otel)):
            if not settings.active or not any(key in otel for key in keys):
                continue
            for key in keys:
                if key in otel:
                    name, value = otel.pop(key)
                    values[key], origins[key] = value, name
            settings = cls._checked(values, origins, where)
        return settings

    @classmethod
    def _checked(
        cls, values: dict[str, Any], origins: dict[str, str], where: Callable[[str], str]
    ) -> TelemetrySettings:
        try:
            return cls.model_validate(values)
        except ValidationError as exc:
            error = exc.errors(include_url=False)[0]
            key = str(error["loc"][0])
            # An endpoint may carry credentials (http://user:secret@host): never shown.
            reason = value_reason(key, error, cls, hidden=frozenset({"endpoint"}))
            raise TelemetryError(f"{origins.get(key, where(key))}: {reason}") from None


def header_secrets(env: Mapping[str, str]) -> list[str]:
    """The values of the OTLP exporter headers (``key=value,…``, URL-encoded): usually an API
    key, which the sanitizer must know so that no log line or message ever shows it."""
    values = []
    for name in _HEADER_VARS:
        for pair in env.get(name, "").split(","):
            _, sep, value = pair.partition("=")
            if sep and value.strip():
                values.append(unquote(value.strip()))
    return values
