"""A backend's answer as a model, at the cost of its first error only.

pydantic collects every error of a failed validation: a list of a million ``{}`` under a model
with required fields is millions of errors, each built (and ``errors()`` turns each into a
dict) only for the message to name the first. So an answer is first checked by a validator
made from the model's schema whose lists, tuples, sets and dicts stop at their first bad item
(pydantic-core's ``fail_fast``) and which validates nested models' fields without building
them (pydantic would reuse each model's own, collect-everything validator). A bad answer
fails there with a handful of errors, however long its lists; a good one is then validated by
the model itself, so the instance is exactly what ``model_validate`` gives. The answer's size
is bounded before it is parsed (:mod:`gateway.rest.body`).
"""

from __future__ import annotations

from functools import lru_cache
from typing import Any, TypeVar

from pydantic import BaseModel, ValidationError
from pydantic_core import SchemaValidator

from ..errors import ErrorCode, GatewayError

M = TypeVar("M", bound=BaseModel)

_FAIL_FAST_TYPES = frozenset({"list", "tuple", "set", "frozenset", "dict"})
# Schemas that build an instance of a class; the check validates their fields only.
_CLASS_TYPES = frozenset({"model", "dataclass"})
_AROUND = frozenset({"function-after", "function-wrap"})
# Keys of a core schema that hold data (defaults, literal values, JSON-schema hints), never
# schemas: nothing under them is changed.
_DATA_KEYS = frozenset({"metadata", "serialization", "default", "expected", "members", "config"})
#: Errors read from a failed validation; more are counted, not turned into Python objects.
MAX_ERRORS_READ = 100
#: An answer of at most this many bytes is validated by the model directly: it cannot hold
#: enough values for their errors to cost much, and most answers are this small.
SMALL_ANSWER_BYTES = 2048


def _check_schema(node: Any) -> Any:
    """The schema of the check: collections stop at their first bad item, a model's (or
    dataclass's) fields are validated without building it, and a validator that runs on the
    built instance (``model_validator(mode="after")``) is left to the model's own validation."""
    if isinstance(node, list):
        return [_check_schema(v) for v in node]
    if isinstance(node, tuple):
        return tuple(_check_schema(v) for v in node)
    if not isinstance(node, dict):
        return node
    kind = node.get("type")
    inner = node.get("schema")
    if kind in _CLASS_TYPES or (
        kind in _AROUND and isinstance(inner, dict) and inner.get("type") in _CLASS_TYPES
    ):
        out = _check_schema(inner)
        if "ref" in node:
            out = {**out, "ref": node["ref"]}
        return out
    out = {k: (v if k in _DATA_KEYS else _check_schema(v)) for k, v in node.items()}
    if kind in _FAIL_FAST_TYPES:
        out["fail_fast"] = True
    return out


@lru_cache(maxsize=512)
def _checker(model: type[BaseModel]) -> SchemaValidator | None:
    """A validator of ``model``'s shape that stops at the first bad item of every collection,
    or None when its schema cannot be rewritten (then only the model's own validation runs)."""
    try:
        return SchemaValidator(_check_schema(model.__pydantic_core_schema__))
    except Exception:
        return None


def _first_error(exc: ValidationError) -> str:
    if exc.error_count() > MAX_ERRORS_READ:
        return f"{exc.error_count():,} fields"
    first = exc.errors(include_url=False, include_input=False, include_context=False)[0]
    loc = ".".join(str(p) for p in first["loc"]) or "(answer)"
    return f"{loc}: {first['msg']}"


def validate_answer(
    model: type[M], data: Any, title: str, what: str, *, size: int | None = None
) -> M:
    """The backend's answer as ``model``, or a ``BACKEND_ERROR`` naming the first thing that
    did not fit. ``size``: the bytes of the body ``data`` was decoded from, when known."""
    try:
        checker = None if size is not None and size <= SMALL_ANSWER_BYTES else _checker(model)
        if checker is not None:
            try:
                checker.validate_python(data)
            except ValidationError:
                raise
            except Exception:  # a validator of the plugin's that needs the real instance
                pass
        return model.model_validate(data)
    except ValidationError as exc:
        raise GatewayError(
            ErrorCode.BACKEND_ERROR,
            f"{title} answered {what} in an unexpected shape ({_first_error(exc)}); "
            "the API may be a different version than this plugin expects",
            retryable=False,
        ) from None
