"""Tool arguments, checked exactly as strictly as the published ``inputSchema`` says.

pydantic's lax mode accepts more than a JSON Schema allows (``true`` or ``"5"`` for an
integer, ``1`` or ``"yes"`` for a boolean), and an optional argument is published without
``null`` (see :func:`gateway.registry.optional_without_null`) while its model still takes
``None``. Strict mode is no answer: for Python input it refuses a string for a UUID, a date
or an enum, which the published ``"type": "string"`` allows. So an :class:`ArgGuard`, derived
from the published schema at registration, checks just those positions (integers, numbers,
booleans, and arguments whose ``null`` was dropped) before the model validates in its own
mode. Arguments nested deeper than any tool needs are refused before anything walks them.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

from pydantic import BaseModel, ValidationError

from .errors import MAX_MESSAGE_CHARS, ErrorCode, GatewayError

#: Nesting no tool needs; deeper arguments (a 100,000-deep list) are refused before any
#: recursive code (validation, encoding, a handler) sees them.
MAX_DEPTH = 64
_MAX_FIELD_ERRORS = 20
#: Room for the fields' messages in the error message (the sanitizer cuts at 600 characters).
_MESSAGE_ROOM = MAX_MESSAGE_CHARS - 100
_ITEMS = "[]"  # an ArgGuard key: every item of an array
_ARGUMENTS = "(arguments)"
#: Published types whose values pydantic's lax mode takes from other JSON types.
_LAX = frozenset({"integer", "number", "boolean"})
_NOT_NULL = frozenset({"string", "integer", "number", "boolean", "object", "array"})
_RULES = {
    "integer": ("int_type", "Input should be a valid integer"),
    "number": ("float_type", "Input should be a valid number"),
    "boolean": ("bool_type", "Input should be a valid boolean"),
    "string": ("string_type", "Input should be a valid string"),
    "object": ("dict_type", "Input should be a valid object"),
    "array": ("list_type", "Input should be a valid array"),
}


@dataclass
class ArgGuard:
    """The positions where pydantic would accept what the published schema forbids.

    ``kinds``: the JSON types allowed at this position (``None``: not checked here);
    ``inner``: positions below it, by property name (``"[]"`` for every item of an array)."""

    kinds: frozenset[str] | None = None
    inner: dict[str, ArgGuard] = field(default_factory=dict)

    def __bool__(self) -> bool:
        return self.kinds is not None or bool(self.inner)


def arg_guard(model_schema: Any, published: Any) -> ArgGuard:
    """The guard of a published schema; ``model_schema`` is the same before
    ``optional_without_null``, to see where ``null`` was dropped."""
    guard = ArgGuard()
    if not (isinstance(model_schema, dict) and isinstance(published, dict)):
        return guard
    before, after = model_schema.get("properties"), published.get("properties")
    if isinstance(before, dict) and isinstance(after, dict):
        for name, prop in before.items():
            sub = _value_guard(prop, after.get(name))
            if sub:
                guard.inner[name] = sub
    items = _value_guard(model_schema.get("items"), published.get("items"))
    if items:
        guard.inner[_ITEMS] = items
    for key in ("anyOf", "oneOf"):
        for b_before, b_after in zip(
            model_schema.get(key) or [], published.get(key) or [], strict=False
        ):
            _merge(guard, arg_guard(b_before, b_after))
    return guard


def _value_guard(before: Any, after: Any) -> ArgGuard:
    if not (isinstance(before, dict) and isinstance(after, dict)):
        return ArgGuard()
    guard = arg_guard(before, after)
    kinds = _types(after)
    if _allows_null(before) and not _allows_null(after):
        guard.kinds = kinds or _NOT_NULL
        # The kept branch of ``anyOf: [X, null]`` is what the value must be otherwise.
        for branch in before.get("anyOf") or []:
            if isinstance(branch, dict) and branch != {"type": "null"}:
                _merge(guard, arg_guard(branch, after))
    elif kinds and kinds & _LAX and "string" not in kinds:
        guard.kinds = kinds
    return guard


def _merge(into: ArgGuard, other: ArgGuard) -> None:
    if other.kinds is not None:
        # Branches of an anyOf: a value may be any of theirs.
        into.kinds = other.kinds if into.kinds is None else into.kinds | other.kinds
    for key, sub in other.inner.items():
        if key in into.inner:
            _merge(into.inner[key], sub)
        else:
            into.inner[key] = sub


def _types(schema: dict[str, Any]) -> frozenset[str] | None:
    kinds = schema.get("type")
    if isinstance(kinds, str):
        return frozenset([kinds])
    if isinstance(kinds, list) and all(isinstance(k, str) for k in kinds):
        return frozenset(kinds)
    return None


def _allows_null(schema: dict[str, Any]) -> bool:
    kinds = _types(schema)
    if kinds is not None and "null" in kinds:
        return True
    return any(isinstance(b, dict) and _allows_null(b) for b in schema.get("anyOf") or [])


def _json_type(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, int):
        return "integer"
    if isinstance(value, float):
        return "integer" if value.is_integer() else "number"  # JSON Schema: 5.0 is an integer
    if isinstance(value, str):
        return "string"
    if isinstance(value, dict):
        return "object"
    return "array" if isinstance(value, list | tuple) else "other"


def _refused(value: Any, guard: ArgGuard, path: str) -> Iterator[dict[str, str]]:
    if guard.kinds is not None:
        kind = _json_type(value)
        if kind not in guard.kinds and not (kind == "integer" and "number" in guard.kinds):
            if value is None:
                rule, message = (
                    "null_not_allowed",
                    ("null is not allowed here; leave the field out to use its default"),
                )
            else:
                rule, message = _RULES.get(min(guard.kinds - {"null"}), _RULES["string"])
            yield {"field": path or _ARGUMENTS, "rule": rule, "message": message}
            return
    if isinstance(value, dict):
        for key, sub in guard.inner.items():
            if key != _ITEMS and key in value:
                yield from _refused(value[key], sub, f"{path}.{key}" if path else key)
    elif isinstance(value, list) and _ITEMS in guard.inner:
        sub = guard.inner[_ITEMS]
        for index, item in enumerate(value):
            yield from _refused(item, sub, f"{path}.{index}" if path else str(index))


def too_deep(value: Any, limit: int = MAX_DEPTH) -> str | None:
    """The top-level argument nested deeper than ``limit`` levels, if any (iterative: a
    100,000-deep value cannot exhaust the stack here)."""
    if not isinstance(value, dict):
        return None
    for key, top in value.items():
        stack: list[tuple[Any, int]] = [(top, 1)]
        while stack:
            node, depth = stack.pop()
            if depth > limit:
                return str(key)
            if isinstance(node, dict):
                stack.extend((v, depth + 1) for v in node.values())
            elif isinstance(node, list):
                stack.extend((v, depth + 1) for v in node)
    return None


def field_errors(exc: ValidationError) -> list[dict[str, str]]:
    """Each field and rule a validation error names, never the input value."""
    fields = []
    for err in exc.errors(include_url=False, include_input=False, include_context=False):
        loc = ".".join(str(p) for p in err["loc"]) or _ARGUMENTS
        rule = err["type"]
        msg = err["msg"]
        if rule == "extra_forbidden":
            msg = "unknown field; it is not a parameter of this tool"
        elif rule == "missing":
            msg = "required field is missing"
        elif msg.startswith("Value error, "):
            msg = msg[len("Value error, ") :]
        fields.append({"field": loc, "rule": rule, "message": msg})
    return fields


def invalid(fields: list[dict[str, str]]) -> GatewayError:
    """The one validation error, each thing said once: the message describes each field's
    failure (the words a client was written against), ``details.fields`` names each field and
    rule; a field's message is there only when the message had no room for it."""
    fields = fields[:_MAX_FIELD_ERRORS]
    parts: list[str] = []
    for f in fields:
        part = f"{f['field']}: {f['message']}"
        if parts and sum(len(p) + 2 for p in parts) + len(part) > _MESSAGE_ROOM:
            break
        parts.append(part)
    rest = len(fields) - len(parts)
    return GatewayError(
        ErrorCode.VALIDATION_ERROR,
        "Invalid arguments: " + "; ".join(parts) + (f" (+{rest} more in details)" if rest else ""),
        details={
            "fields": [
                {"field": f["field"], "rule": f["rule"]}
                if i < len(parts)
                else {"field": f["field"], "rule": f["rule"], "message": f["message"]}
                for i, f in enumerate(fields)
            ]
        },
    )


def format_validation_error(exc: ValidationError) -> GatewayError:
    return invalid(field_errors(exc))


def validate_arguments(
    model: type[BaseModel], arguments: object, guard: ArgGuard | None = None
) -> BaseModel:
    """``arguments`` as ``model``, or a ``VALIDATION_ERROR`` naming every field and rule."""
    if arguments is None:
        arguments = {}
    if not isinstance(arguments, dict):
        raise invalid(
            [{"field": _ARGUMENTS, "rule": "dict_type", "message": "must be a JSON object"}]
        )
    deep = too_deep(arguments)
    if deep is not None:
        raise invalid(
            [
                {
                    "field": deep,
                    "rule": "too_deep",
                    "message": f"nested deeper than {MAX_DEPTH} levels",
                }
            ]
        )
    fields = list(_refused(arguments, guard, "")) if guard else []
    try:
        args = model.model_validate(arguments)
    except ValidationError as exc:
        reported = {f["field"] for f in fields}
        fields += [f for f in field_errors(exc) if f["field"] not in reported]
    else:
        if not fields:
            return args
    # In the order the client wrote the arguments (missing ones last).
    order = {key: i for i, key in enumerate(arguments)}
    fields.sort(key=lambda f: order.get(f["field"].split(".")[0], len(order)))
    raise invalid(fields)
