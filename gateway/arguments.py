"""Tool arguments, checked exactly as strictly as the published ``inputSchema`` says.

pydantic's lax mode accepts more than a JSON Schema allows (``true`` or ``"5"`` for an
integer, ``"yes"`` for a boolean), and an optional argument is published without ``null``
(see :func:`gateway.registry.optional_without_null`) while its model still takes ``None``.
So arguments are validated in strict mode, and an explicit ``null`` where the published
schema has none is refused too. Arguments nested deeper than any tool needs are refused
before anything walks them recursively.
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
_ITEMS = "[]"  # a NullGuard key: every item of an array
_ARGUMENTS = "(arguments)"


@dataclass
class NullGuard:
    """Where the published schema refuses ``null`` although the model accepts ``None``.

    ``refuse``: ``null`` is refused at this position; ``inner``: positions below it, by
    property name (``"[]"`` for every item of an array)."""

    refuse: bool = False
    inner: dict[str, NullGuard] = field(default_factory=dict)

    def __bool__(self) -> bool:
        return self.refuse or bool(self.inner)


def null_guard(model_schema: Any, published: Any) -> NullGuard:
    """Compare a schema before and after ``optional_without_null``: every property that lost
    its ``null`` is a position where ``null`` must be refused."""
    guard = NullGuard()
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
            _merge(guard, null_guard(b_before, b_after))
    return guard


def _value_guard(before: Any, after: Any) -> NullGuard:
    if not (isinstance(before, dict) and isinstance(after, dict)):
        return NullGuard()
    guard = null_guard(before, after)
    if _allows_null(before) and not _allows_null(after):
        guard.refuse = True
        # The kept branch of ``anyOf: [X, null]`` is what the value must be otherwise.
        for branch in before.get("anyOf") or []:
            if isinstance(branch, dict) and branch != {"type": "null"}:
                _merge(guard, null_guard(branch, after))
    return guard


def _merge(into: NullGuard, other: NullGuard) -> None:
    into.refuse = into.refuse or other.refuse
    for key, sub in other.inner.items():
        if key in into.inner:
            _merge(into.inner[key], sub)
        else:
            into.inner[key] = sub


def _allows_null(schema: dict[str, Any]) -> bool:
    kinds = schema.get("type")
    if kinds == "null" or (isinstance(kinds, list) and "null" in kinds):
        return True
    return any(isinstance(b, dict) and _allows_null(b) for b in schema.get("anyOf") or [])


def _refused_nulls(value: Any, guard: NullGuard, path: str) -> Iterator[str]:
    if value is None:
        if guard.refuse:
            yield path
        return
    if isinstance(value, dict):
        for key, sub in guard.inner.items():
            if key != _ITEMS and key in value:
                yield from _refused_nulls(value[key], sub, f"{path}.{key}" if path else key)
    elif isinstance(value, list) and _ITEMS in guard.inner:
        sub = guard.inner[_ITEMS]
        for index, item in enumerate(value):
            yield from _refused_nulls(item, sub, f"{path}.{index}" if path else str(index))


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
    model: type[BaseModel], arguments: object, guard: NullGuard | None = None
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
    nulls = [
        {
            "field": path,
            "rule": "null_not_allowed",
            "message": "null is not allowed here; leave the field out to use its default",
        }
        for path in (_refused_nulls(arguments, guard, "") if guard else ())
    ]
    try:
        args = model.model_validate(arguments, strict=True)
    except ValidationError as exc:
        reported = {f["field"] for f in nulls}
        raise invalid(
            nulls + [f for f in field_errors(exc) if f["field"] not in reported]
        ) from None
    if nulls:
        raise invalid(nulls)
    return args
