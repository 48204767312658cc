"""What every settings table builds on: the error, the environment-backed field, the
``$env`` references and the one-phrase reason a value does not fit.

Below :mod:`gateway.config` so that the tables it embeds (``[auth]``, ``[telemetry]``) use
these without importing it; :mod:`gateway.config` re-exports them.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any, get_args

from pydantic import BaseModel, Field

from .configfile import closest


class ConfigError(Exception):
    """The deployment's configuration cannot be used; the message says which setting."""


def env_field(*names: str, default: Any = ..., description: str | None = None) -> Any:
    """A settings field that environment variables ``names`` (first set one wins) override."""
    return Field(default, description=description, json_schema_extra={"env": list(names)})


def value_reason(
    key: str,
    error: Mapping[str, Any],
    model: type[BaseModel],
    *,
    hidden: frozenset[str] = frozenset({"token"}),
) -> str:
    """Why the value of setting ``key`` of ``model`` does not fit, from pydantic's ``error``:
    one phrase, with the value unless ``key`` is hidden."""
    value = error.get("input")
    text = repr(value[:60]) if isinstance(value, str) else str(value)[:60]
    shown = "" if key in hidden else f", not {text}"
    kind = error["type"]
    if kind in ("bool_parsing", "bool_type"):
        return f"must be true or false{shown}"
    if kind == "finite_number" or (isinstance(value, float) and not math.isfinite(value)):
        return f"must be a finite number greater than 0{shown}"
    if kind in ("greater_than", "greater_than_equal"):
        return f"must be greater than {error['ctx'].get('gt', error['ctx'].get('ge')):g}{shown}"
    if kind == "literal_error":
        choices = _literals(model.model_fields[key].annotation)
        hint = closest(str(value), choices)
        return f"must be one of {', '.join(choices)}{shown}{hint}"
    if kind == "value_error":
        return f"{error['ctx']['error']}{shown}"
    return f"{error['msg'][:1].lower()}{error['msg'][1:]}{shown}"


def _literals(annotation: Any) -> tuple[str, ...]:
    """The strings a ``Literal`` (or a tuple of one) allows."""
    args = get_args(annotation)
    if args and all(isinstance(a, str) for a in args):
        return args
    return tuple(c for a in args for c in _literals(a))


def field_env_names(model: type[BaseModel]) -> dict[str, list[str]]:
    """Per field of a settings model that environment variables set: those variables, the
    first set one winning (:func:`env_field` names them; an ``env_suffix`` field reads
    ``<model.env_prefix>_<suffix>``)."""
    prefix = getattr(model, "env_prefix", "")
    out: dict[str, list[str]] = {}
    for name, info in model.model_fields.items():
        extra = info.json_schema_extra
        names = extra.get("env") if isinstance(extra, dict) else None
        suffix = extra.get("env_suffix") if isinstance(extra, dict) else None
        if names is None and isinstance(suffix, str) and isinstance(prefix, str) and prefix:
            names = [f"{prefix}_{suffix}"]
        if isinstance(names, list) and names:
            out[name] = [n for n in names if isinstance(n, str)]
    return out


def resolve_env_refs(value: Any, env: Mapping[str, str]) -> Any:
    """Replace every ``{"$env": "NAME"}`` in a table given in code (tests, embedders) by that
    variable; an unset one is dropped. A config file's references are resolved, strictly, by
    :func:`gateway.config.load_config`."""
    if isinstance(value, dict):
        if set(value) == {"$env"}:
            return env.get(str(value["$env"]), _MISSING)
        out = {k: resolve_env_refs(v, env) for k, v in value.items()}
        return {k: v for k, v in out.items() if v is not _MISSING}
    if isinstance(value, list):
        return [v for v in (resolve_env_refs(v, env) for v in value) if v is not _MISSING]
    return value


_MISSING = object()
