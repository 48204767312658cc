"""What every settings table builds on: the error, the environment-backed field, the
``$env`` references, the one-phrase reason a value does not fit, where a value sits in the
TOML file and the valid name closest to a misspelt one.

Below :mod:`gateway.config` so that the tables it embeds (``[auth]``, ``[telemetry]``) use
these without importing it; :mod:`gateway.config` re-exports them.
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterable, Mapping
from typing import TYPE_CHECKING, Any, get_args

if TYPE_CHECKING:  # pydantic on use: `serve` imports this before it pauses the collector
    from pydantic import BaseModel
    from pydantic.fields import FieldInfo


class ConfigError(Exception):
    """The deployment's configuration cannot be used; the message says which setting."""


def env_field(*names: str, default: Any = ..., description: str | None = None) -> Any:
    """A settings field that environment variables ``names`` (first set one wins) override."""
    from pydantic import Field

    return Field(default, description=description, json_schema_extra={"env": list(names)})


def value_reason(
    key: str,
    error: Mapping[str, Any],
    model: type[BaseModel],
    *,
    hidden: frozenset[str] = frozenset({"token"}),
) -> str:
    """Why the value of setting ``key`` of ``model`` does not fit, from pydantic's ``error``:
    one phrase, with the value unless ``key`` is hidden, and for a number the range that
    fits (``must be a finite number greater than 0 and at most 3600, not 1e+308``)."""
    value = error.get("input")
    text = repr(value[:60]) if isinstance(value, str) else str(value)[:60]
    shown = "" if key in hidden else f", not {text}"
    kind = error["type"]
    if kind == "extra_forbidden":
        return f"unknown setting{closest(key, list(model.model_fields))}"
    if kind in ("bool_parsing", "bool_type"):
        return f"must be true or false{shown}"
    numeric = kind in NUMBER_ERRORS or (isinstance(value, float) and not math.isfinite(value))
    if numeric and key in model.model_fields:
        return f"must be {number_rule(model.model_fields[key])}{shown}"
    if kind == "literal_error":
        choices = _literals(model.model_fields[key].annotation)
        hint = closest(str(value), choices)
        return f"must be one of {', '.join(choices)}{shown}{hint}"
    if kind == "value_error":
        return f"{error['ctx']['error']}{shown}"
    return f"{error['msg'][:1].lower()}{error['msg'][1:]}{shown}"


#: pydantic's error types for a number that is not one, or not in its range.
NUMBER_ERRORS = frozenset(
    {
        "finite_number",
        "float_parsing",
        "float_type",
        "int_parsing",
        "int_parsing_size",
        "int_type",
        "int_from_float",
        "greater_than",
        "greater_than_equal",
        "less_than",
        "less_than_equal",
    }
)


def _number(value: Any) -> str:
    return str(int(value)) if float(value).is_integer() else f"{value:g}"


def number_rule(info: FieldInfo) -> str:
    """What a numeric setting must be, bounds included: ``a whole number from 1 to 1000``."""
    kind = "a whole number" if _is_int(info.annotation) else "a finite number"
    low = high = ""
    for rule in info.metadata:
        for attr, words in (("gt", "greater than"), ("ge", "at least")):
            if getattr(rule, attr, None) is not None:
                low = f"{words} {_number(getattr(rule, attr))}"
        for attr, words in (("lt", "less than"), ("le", "at most")):
            if getattr(rule, attr, None) is not None:
                high = f"{words} {_number(getattr(rule, attr))}"
    if low.startswith("at least") and high.startswith("at most"):
        return f"{kind} from {low[len('at least ') :]} to {high[len('at most ') :]}"
    return " and ".join(p for p in (f"{kind} {low}".strip(), high) if p)


def _is_int(annotation: Any) -> bool:
    return annotation is int or (int in get_args(annotation) and float not in get_args(annotation))


def _is_bool(annotation: Any) -> bool:
    return annotation is bool or bool in get_args(annotation)


def is_secret(annotation: Any) -> bool:
    """A ``SecretStr`` field (or an optional one)."""
    from pydantic import SecretStr

    return annotation is SecretStr or any(is_secret(a) for a in get_args(annotation))


def file_value_problem(
    model: type[BaseModel], key: str, value: Any, *, variable: str | None
) -> str | None:
    """Why ``value``, written as it is in a TOML file (not a ``$env`` reference), does not
    fit where the model's own parsing would take it, as the words after the setting's name
    (``": must be true or false …"``), else ``None``: a boolean must be a TOML boolean (``1``,
    ``yes`` or ``"true"`` are a variable's forms), and a secret is never written in the file
    (``variable``: the one to set instead). Worded so that the sanitizer leaves it whole."""
    info = model.model_fields.get(key)
    if info is None:
        return None
    if _is_bool(info.annotation) and not isinstance(value, bool):
        text = repr(value[:60]) if isinstance(value, str) else str(value)[:60]
        return f": must be true or false (a TOML boolean, without quotes), not {text}"
    if is_secret(info.annotation) and isinstance(value, str):
        instead = f"set {variable} instead, or " if variable else ""
        return (
            " holds a secret, which comes from the environment, never from the file: "
            f'{instead}name a variable with {{ "$env" = "NAME" }}'
        )
    return None


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


# Where a value sits in a TOML file, and the valid name closest to a misspelt one.
#
# ``tomllib`` gives values without positions; :class:`TomlLines` finds the line of a table or
# key by reading the file's headers (``[a.b]``), dotted keys (``a.b = 1``) and inline tables
# (``a = { b = 1 }``), which is all a configuration file uses.

_HEADER = re.compile(r"\s*\[\[?\s*(?P<name>[^\]]+?)\s*\]\]?\s*(#.*)?$")
_KEY = re.compile(
    r"""\s*(?P<key>(?:[A-Za-z0-9_-]+|"[^"]*"|'[^']*')(?:\s*\.\s*(?:[A-Za-z0-9_-]+|"[^"]*"|'[^']*'))*)\s*="""
)
_PART = re.compile(r"""[A-Za-z0-9_-]+|"[^"]*"|'[^']*'""")


def _dotted(text: str) -> tuple[str, ...]:
    return tuple(p.strip("\"'") for p in _PART.findall(text))


class TomlLines:
    """``where(("plugins", "gitea", "token"))`` → ``"gw.toml:7"`` (just the name if unknown)."""

    def __init__(self, name: str, text: str) -> None:
        self.name = name
        self._entries: list[tuple[int, tuple[str, ...], str]] = []
        table: tuple[str, ...] = ()
        for number, line in enumerate(text.splitlines(), 1):
            header = _HEADER.match(line)
            if header:
                table = _dotted(header["name"])
                self._entries.append((number, table, ""))
                continue
            key = _KEY.match(line)
            if key:
                self._entries.append((number, (*table, *_dotted(key["key"])), line[key.end() :]))

    def line(self, path: tuple[str, ...]) -> int | None:
        for number, found, _ in self._entries:
            if found == path:
                return number
        # A key inside an inline table (``gateway = { read_only = 1 }``) or a table that is
        # only ever written as dotted keys (``gateway.read_only = 1``): the closest line.
        for depth in range(len(path) - 1, 0, -1):
            for number, found, rest in self._entries:
                if found == path[:depth] and re.search(rf"\b{re.escape(path[depth])}\s*=", rest):
                    return number
            for number, found, _ in self._entries:
                if found[:depth] == path[:depth]:
                    return number
        return None

    def where(self, path: tuple[str, ...]) -> str:
        number = self.line(path)
        return f"{self.name}:{number}" if number is not None else self.name


def closest(word: str, choices: Iterable[str], *, template: str = "{}", upper: bool = False) -> str:
    """``"; did you mean <name>?"`` for the valid name nearest ``word``, or ``""``."""
    import difflib  # only a mistake needs it: a start that has none skips its import

    pool = {c.lower(): c for c in choices}
    match = difflib.get_close_matches(word.lower(), list(pool), n=1, cutoff=0.6)
    if not match:
        return ""
    name = pool[match[0]]
    return f"; did you mean {template.format(name.upper() if upper else name)}?"
