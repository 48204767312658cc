"""Tool schemas kept across starts, keyed on the models they are generated from.

Generating the JSON schema of every tool's models (and, before that, pydantic's core schema of
each) is most of what loading the installed plugins costs beyond importing them. The first
start generates the schemas as always and writes them to ``$XDG_CACHE_HOME/mcp-gateway/schemas``
(else ``~/.cache/…``); later starts read them back, and the models, created with
``defer_build`` while their plugin is imported, build their validators on a tool's first call.

An entry is found by a fingerprint of the live model class, taken after the plugin was
imported and registered its tools, never by file names, sizes or times: its fields (name,
alias, title, description, examples, default, constraints, ``json_schema_extra``), their types
(the members of every enum and literal, nested models taken the same way), its configuration,
its validators' declared input types, its name and docstring, and the versions of Python,
pydantic and pydantic-core. What a plugin read to build its models (a data file, a variable,
its settings) is in the models it built, so a model built from other input has another
fingerprint. A model whose schema can depend on something a fingerprint cannot see (a
callable: a ``__get_pydantic_json_schema__``, a ``json_schema_extra`` function, a type of its
own with schema hooks, an unresolved annotation) is never cached: its schema is generated at
every start.

The entry file is read only when it is a regular file owned by this user, writable by no one
else, under :data:`MAX_BYTES`, and its content matches the digest it starts with; anything else
is ignored with one log line and replaced. Writing goes through a temporary file and a rename,
so a concurrent start reads the old entry or the new one, never half of one; a cache folder
that cannot be written only costs the reuse.
"""

from __future__ import annotations

import contextlib
import dataclasses
import datetime
import decimal
import enum
import hashlib
import json
import logging
import os
import re
import stat
import sys
import tempfile
import types
import typing
import uuid
import weakref
from collections.abc import Iterator, Mapping
from pathlib import Path, PurePath
from typing import Any

import pydantic
import pydantic_core
from pydantic import BaseModel
from pydantic.fields import FieldInfo

log = logging.getLogger("gateway.schemacache")

#: Bumped when what the file holds, or how a fingerprint is taken, changes.
FORMAT = 2
#: The file's name in the cache folder, and the largest one read.
FILE = "schemas.json"
MAX_BYTES = 8 << 20
#: Schemas kept: those of this start first, then earlier ones (other deployments).
KEEP = 2048
_HEADER = b"mcp-gateway-schemas"


def cache_folder(config: Any) -> Path | None:
    """``$XDG_CACHE_HOME/mcp-gateway/schemas``, else ``$HOME/.cache/…``, for a gateway whose
    ``schema_cache`` is on; ``None`` when it is off or the environment names neither."""
    if not config.schema_cache:
        return None
    env: Mapping[str, str] = config.env
    xdg = env.get("XDG_CACHE_HOME", "")
    if Path(xdg).is_absolute():  # the XDG spec: a relative value is invalid, ignore it
        return Path(xdg) / "mcp-gateway" / "schemas"
    home = env.get("HOME", "")
    return Path(home) / ".cache" / "mcp-gateway" / "schemas" if Path(home).is_absolute() else None


@contextlib.contextmanager
def deferred_models() -> Iterator[None]:
    """Models created inside (a plugin's import) build their validator and serializer on first
    use rather than at class creation. Validation is the same; only its building moves."""
    config = BaseModel.model_config
    before = config.get("defer_build")
    config["defer_build"] = True
    try:
        yield
    finally:
        if before is None:
            config.pop("defer_build", None)
        else:
            config["defer_build"] = before


# -- fingerprints ------------------------------------------------------------------------------


class Unfit(Exception):
    """Something in a model that a fingerprint cannot stand for."""


#: Classes from these packages are known by name: what pydantic makes of them is fixed by the
#: versions in the key (a class of the plugin's own, unless a model or an enum, is unfit).
_KNOWN_PACKAGES = frozenset(
    {
        "builtins",
        "typing",
        "typing_extensions",
        "collections",
        "datetime",
        "decimal",
        "uuid",
        "pathlib",
        "ipaddress",
        "re",
        "types",
        "annotated_types",
        "pydantic",
        "pydantic_core",
    }
)
#: Plain values pydantic may put in a schema (defaults, examples), known by their text.
_TEXT_VALUES = (
    datetime.date,
    datetime.time,
    datetime.timedelta,
    decimal.Decimal,
    uuid.UUID,
    PurePath,
)
#: Validators whose function never shapes a schema (only their ``json_schema_input_type``).
_VALIDATORS = frozenset({"AfterValidator", "BeforeValidator", "PlainValidator", "WrapValidator"})
#: Class-level schema hooks: a model that overrides one is unfit.
_HOOKS = ("__get_pydantic_core_schema__", "__get_pydantic_json_schema__", "model_json_schema")
#: FieldInfo slots that never shape a schema, or stand for others already taken.
_SKIPPED_SLOTS = frozenset({"_attributes_set", "_original_assignment", "_original_annotation"})
_UNION_TYPES = (typing.Union, types.UnionType)


_KNOWN: weakref.WeakKeyDictionary[type, bool] = weakref.WeakKeyDictionary()


def _known(cls: type) -> bool:
    """Whether ``cls`` is a class of one of :data:`_KNOWN_PACKAGES`: its module is one of
    theirs, and it is what that module holds under its name (not a class that says so)."""
    found = _KNOWN.get(cls)
    if found is None:
        found = cls.__module__.partition(".")[0] in _KNOWN_PACKAGES
        if found:
            held: Any = sys.modules.get(cls.__module__)
            for name in cls.__qualname__.split("."):
                held = getattr(held, name, None)
            found = held is cls
        _KNOWN[cls] = found
    return found


def _general_metadata() -> type | None:
    """The class pydantic keeps ``Field(pattern=...)`` and the like in (made in a function,
    so not known by its name); ``None`` if this pydantic has no such thing (then fields that
    use it are unfit)."""
    try:
        from pydantic._internal._fields import pydantic_general_metadata

        return type(pydantic_general_metadata())
    except (ImportError, TypeError):  # pragma: no cover - another pydantic
        return None


_GENERAL_METADATA = _general_metadata()


#: What a FieldInfo holds for what a field did not set: left out of fingerprints (the same for
#: every field of one pydantic version), which makes them several times smaller.
_UNSET = [
    (slot, getattr(FieldInfo(), slot, None))
    for slot in FieldInfo.__slots__
    if slot not in _SKIPPED_SLOTS
]
#: Defaults that are a new empty container in every FieldInfo: an empty one is unset too.
_EMPTY = (list, set)
_PREFIX = json.dumps([FORMAT, sys.version, pydantic.VERSION, pydantic_core.__version__])
#: Fingerprints of models and enums taken in this process (``None``: unfit). A class does not
#: change once created; a model built anew (per registration) is another class.
_FINGERPRINTS: weakref.WeakKeyDictionary[type, str | None] = weakref.WeakKeyDictionary()


def _digest(tree: Any) -> str:
    # No check for cycles (a third of the encoding's time): a tree holds a nested model by
    # its digest and a recursive one as ["cycle", n], so it never refers to itself.
    text = json.dumps([_PREFIX, tree], separators=(",", ":"), check_circular=False)
    return hashlib.sha256(text.encode()).hexdigest()


class _Walk:
    """Takes fingerprints: a JSON-able tree of everything a model's schema is generated from,
    each nested model and enum in it by its own fingerprint."""

    def __init__(self) -> None:
        self.models: list[type[BaseModel]] = []  # the models being walked, outermost first
        #: per model being walked: the outermost one its walk referred back to (a cycle)
        self.back: list[int] = []

    def model(self, cls: type[BaseModel]) -> Any:
        known = _FINGERPRINTS.get(cls, "")
        if known is None:
            raise Unfit(f"{cls.__qualname__} is unfit")
        if known:
            return ["model", known]
        if cls in self.models:  # a recursive model: how many models up it refers back
            at = self.models.index(cls)
            self.back[-1] = min(self.back[-1], at)
            return ["cycle", len(self.models) - at]
        depth = len(self.models)
        self.models.append(cls)
        self.back.append(depth)
        try:
            tree = self._model(cls)
        except Unfit:
            _FINGERPRINTS[cls] = None
            raise
        finally:
            self.models.pop()
            back = self.back.pop()
        if back < depth:  # it refers to an outer model: its tree holds only in this walk
            self.back[-1] = min(self.back[-1], back)
            return tree
        digest = _FINGERPRINTS[cls] = _digest(tree)
        return ["model", digest]

    def _model(self, cls: type[BaseModel]) -> Any:
        if not cls.__pydantic_fields_complete__:
            raise Unfit(f"{cls.__qualname__} has an annotation that is not resolved yet")
        for hook in _HOOKS:
            if getattr(getattr(cls, hook), "__func__", None) is not getattr(
                getattr(BaseModel, hook), "__func__", None
            ):
                raise Unfit(f"{cls.__qualname__} defines {hook}")
        config = [[k, self.value(v)] for k, v in cls.model_config.items() if k != "defer_build"]
        fields = [[name, self.field(f)] for name, f in cls.__pydantic_fields__.items()]
        decorators = [
            [kind.name, name, self.value(decorator.info)]
            for kind in dataclasses.fields(cls.__pydantic_decorators__)
            for name, decorator in getattr(cls.__pydantic_decorators__, kind.name).items()
        ]
        generic = cls.__pydantic_generic_metadata__
        origin = generic["origin"]
        return [
            "model",
            cls.__module__,
            cls.__qualname__,
            cls.__name__,
            cls.__doc__,
            bool(cls.__pydantic_root_model__),
            config,
            fields,
            self.value(getattr(cls, "__pydantic_extra_info__", None)),
            decorators,
            None if origin is None else [origin.__module__, origin.__qualname__],
            [self.annotation(a) for a in generic["args"]],
            [self.annotation(p) for p in generic["parameters"]],
        ]

    def field(self, info: FieldInfo) -> Any:
        out = []
        for slot, unset in _UNSET:
            value = getattr(info, slot, None)
            if value is unset or (type(value) is type(unset) in _EMPTY and not value):
                continue
            if slot == "annotation":
                out.append([slot, self.annotation(value)])
            elif slot in ("default_factory", "exclude_if"):
                # Neither is called to generate a schema: only that there is one counts.
                out.append([slot, True])
            else:
                out.append([slot, self.value(value)])
        return out

    def enum(self, cls: type[enum.Enum]) -> Any:
        known = _FINGERPRINTS.get(cls, "")
        if known is None:
            raise Unfit(f"enum {cls.__qualname__} is unfit")
        if not known:
            if any(hasattr(cls, hook) for hook in _HOOKS[:2]):
                _FINGERPRINTS[cls] = None
                raise Unfit(f"enum {cls.__qualname__} has a schema hook")
            tree = [
                "enum",
                cls.__module__,
                cls.__qualname__,
                cls.__doc__,
                [[b.__module__, b.__qualname__] for b in cls.__mro__],
                [[m.name, self.value(m.value)] for m in cls],
            ]
            known = _FINGERPRINTS[cls] = _digest(tree)
        return ["enum", known]

    def annotation(self, t: Any) -> Any:
        if t is None or t is type(None):
            return ["None"]
        if isinstance(t, type):
            if issubclass(t, BaseModel):
                return self.model(t)
            if issubclass(t, enum.Enum):
                return self.enum(t)
            if _known(t):
                return ["class", t.__module__, t.__qualname__]
            raise Unfit(f"type {t.__qualname__} is the plugin's own")
        if isinstance(t, typing.NewType):
            return ["NewType", t.__name__, self.annotation(t.__supertype__)]
        origin = typing.get_origin(t)
        if origin is typing.Annotated:
            metadata = [self.value(m) for m in t.__metadata__]
            return ["Annotated", self.annotation(t.__origin__), metadata]
        if origin is typing.Literal:
            return ["Literal", [self.value(a) for a in typing.get_args(t)]]
        if origin in _UNION_TYPES:
            return ["Union", [self.annotation(a) for a in typing.get_args(t)]]
        if isinstance(origin, type) and _known(origin):
            arguments = [self.argument(a) for a in typing.get_args(t)]
            return ["generic", self.annotation(origin), arguments]
        raise Unfit(f"annotation {type(t).__qualname__} is not one a fingerprint takes")

    def argument(self, a: Any) -> Any:
        """An argument of a generic: a type, ``...`` (``tuple[int, ...]``) or a list of types
        (``Callable[[int], str]``)."""
        if a is Ellipsis:
            return ["..."]
        if isinstance(a, list):
            return ["list", [self.annotation(x) for x in a]]
        return self.annotation(a)

    def value(self, v: Any) -> Any:
        if v is None or isinstance(v, bool | str):
            return v
        if isinstance(v, enum.Enum):  # before int and str: an IntEnum member is both
            return ["member", self.enum(type(v)), v.name]
        if isinstance(v, int):
            return ["int", v]
        if isinstance(v, float):
            return ["float", repr(v)]
        if isinstance(v, list | tuple):
            return [type(v).__name__, [self.value(x) for x in v]]
        if isinstance(v, set | frozenset):
            items = [self.value(x) for x in v]
            return ["set", sorted(items, key=lambda x: json.dumps(x, sort_keys=True))]
        if isinstance(v, dict):
            return ["dict", [[self.value(k), self.value(x)] for k, x in v.items()]]
        if isinstance(v, FieldInfo):
            return ["FieldInfo", self.field(v)]
        if isinstance(v, type) or typing.get_origin(v) is not None:
            return ["type", self.annotation(v)]
        if v is Ellipsis or v is pydantic_core.PydanticUndefined:
            return [repr(v)]
        if isinstance(v, re.Pattern):
            return ["pattern", v.pattern, v.flags]
        if isinstance(v, bytes):
            return ["bytes", v.hex()]
        if isinstance(v, _TEXT_VALUES) and _known(type(v)):
            return ["text", type(v).__qualname__, str(v)]
        return self.metadata(v)

    def metadata(self, v: Any) -> Any:
        """A constraint or marker of pydantic's or annotated-types' own (a dataclass, or the
        general metadata pydantic keeps ``pattern`` and the like in)."""
        cls = type(v)
        if cls is _GENERAL_METADATA:
            return ["meta", "general", self.value(dict(vars(v)))]
        if not _known(cls) or isinstance(v, types.FunctionType | types.MethodType):
            raise Unfit(f"{cls.__qualname__} value is not one a fingerprint takes")
        if dataclasses.is_dataclass(v):
            skip = {"func"} if cls.__name__ in _VALIDATORS else set()
            items = [
                [f.name, self.value(getattr(v, f.name))]
                for f in dataclasses.fields(v)
                if f.name not in skip
            ]
            return ["meta", cls.__module__, cls.__qualname__, items]
        raise Unfit(f"{cls.__qualname__} value is not one a fingerprint takes")


def fingerprint(model: type[BaseModel]) -> str | None:
    """The fingerprint of ``model`` (a hex digest), or ``None`` when it is unfit to cache."""
    if model in _FINGERPRINTS:
        return _FINGERPRINTS[model]
    try:
        _Walk().model(model)
    except (Unfit, TypeError, ValueError, RecursionError) as exc:
        log.debug("schema of %s not cached: %s", model.__qualname__, exc)
        _FINGERPRINTS[model] = None
    return _FINGERPRINTS[model]


# -- the file ----------------------------------------------------------------------------------


def _refusal(st: os.stat_result) -> str | None:
    """Why a file with this status is not read, or ``None``."""
    if not stat.S_ISREG(st.st_mode):
        return "not a regular file"
    if st.st_uid != os.geteuid():
        return "owned by another user"
    if st.st_mode & (stat.S_IWGRP | stat.S_IWOTH):
        return "writable by group or others"
    if st.st_size > MAX_BYTES:
        return f"larger than {MAX_BYTES >> 20} MiB"
    return None


def read_guarded(path: Path) -> bytes | None:
    """The content of ``path`` if it is safe to read (see the module), else ``None``; a
    refused file is logged once. Opening never follows a link, never blocks (a FIFO) and
    reads no more than :data:`MAX_BYTES`."""
    try:
        why = _refusal(os.lstat(path))  # before opening: a device is never opened
    except FileNotFoundError:
        return None
    except OSError as exc:
        why = f"cannot be examined ({type(exc).__name__})"
    if why is None:
        flags = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0)
        try:
            fd = os.open(path, flags)
        except OSError as exc:
            why = f"cannot be opened ({type(exc).__name__})"
        else:
            try:
                why = _refusal(os.fstat(fd))  # what was opened, if it was swapped meanwhile
                if why is None:
                    chunks: list[bytes] = []
                    size = 0
                    while size <= MAX_BYTES:  # a file growing meanwhile: no further
                        chunk = os.read(fd, MAX_BYTES + 1 - size)
                        if not chunk:
                            return b"".join(chunks)
                        chunks.append(chunk)
                        size += len(chunk)
                    why = f"larger than {MAX_BYTES >> 20} MiB"
            except OSError as exc:
                why = f"cannot be read ({type(exc).__name__})"
            finally:
                os.close(fd)
    log.warning("schema cache file ignored (%s); the schemas are generated instead", why)
    return None


def _parse(content: bytes) -> dict[str, Any] | None:
    """The schemas a file holds, or ``None`` if it is not one this version wrote whole."""
    head, sep, body = content.partition(b"\n")
    parts = head.split(b" ")
    if not sep or len(parts) != 3 or parts[0] != _HEADER or parts[1] != str(FORMAT).encode():
        return None
    if parts[2] != hashlib.sha256(body).hexdigest().encode():
        return None
    try:
        data = json.loads(body)
    except (ValueError, RecursionError):
        return None
    return data if isinstance(data, dict) else None


def write_whole(path: Path, content: bytes) -> None:
    """Write ``content`` through a temporary file and a rename: a concurrent reader sees the
    old content or the new, never part of one (``OSError`` when it cannot be written)."""
    path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=".tmp-", suffix=".json")  # mode 0600
    try:
        with os.fdopen(fd, "wb") as out:
            out.write(content)
        try:
            os.replace(tmp, path)
        except IsADirectoryError:  # an empty folder in its place goes (rmdir takes no other)
            os.rmdir(path)
            os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise


class SchemaCache:
    """The schemas of one cache folder: read on first use, written back once if a schema had
    to be generated (or the file was unfit)."""

    def __init__(self, folder: Path) -> None:
        self.path = folder / FILE
        self._read: dict[str, Any] | None = None
        self._used: dict[str, Any] = {}
        self._dirty = False

    def _schemas(self) -> dict[str, Any]:
        if self._read is None:
            content = read_guarded(self.path)
            parsed = _parse(content) if content is not None else None
            if content is not None and parsed is None:
                log.warning(
                    "schema cache file ignored (not whole, or edited); the schemas are "
                    "generated instead"
                )
            self._dirty |= content is not None and parsed is None
            self._read = parsed or {}
        return self._read

    def get(self, model: type[BaseModel]) -> tuple[str | None, dict[str, Any] | None]:
        """``model``'s fingerprint and its schema (``model_json_schema()``) as generated
        before, or ``None`` for either."""
        key = fingerprint(model)
        if key is None:
            return None, None
        found = self._schemas().get(key)
        if not isinstance(found, dict):
            return key, None
        self._used[key] = found
        return key, found

    def put(self, key: str, schema: dict[str, Any]) -> None:
        self._used[key] = schema
        self._dirty = True

    def save(self) -> None:
        """Write the file if it changed; failing to (a read-only home) costs only the reuse."""
        if not self._dirty:
            return
        self._dirty = False
        kept = dict(self._used)
        for key, schema in (self._read or {}).items():
            if len(kept) >= KEEP:
                break
            kept.setdefault(key, schema)
        body = json.dumps(kept, separators=(",", ":")).encode()
        if len(body) > MAX_BYTES - 100:  # under the cap with its header, or it is never read
            body = json.dumps(self._used, separators=(",", ":")).encode()
            if len(body) > MAX_BYTES - 100:
                log.debug("schema cache not written: larger than the cap")
                return
        head = b" ".join([_HEADER, str(FORMAT).encode(), hashlib.sha256(body).hexdigest().encode()])
        try:
            write_whole(self.path, head + b"\n" + body)
        except OSError as exc:
            log.debug("schema cache not written: %s", type(exc).__name__)
