"""Tool schemas kept across starts, so a start does not build pydantic models to publish them.

Generating the JSON schemas of every tool's models is most of what loading the installed
plugins costs, and Claude Code waits only about two seconds for a server. The first start
builds the schemas as always and writes them to ``$XDG_CACHE_HOME/mcp-gateway/schemas/`` (else
``~/.cache/…``); later starts read them back and the models, created with ``defer_build``
while the plugin is imported, build their validators on a tool's first call instead.

An entry is used only if everything a schema is derived from is unchanged, else the schemas
are rebuilt and the entry replaced: the Python and pydantic versions, the core's files, every
installed distribution (name, version, its ``.dist-info`` folder's time: a reinstall
counts, and its entry points file's size and time), the plugin's own package files (path, size, modification time in ns: what Python's
``.pyc`` check uses, finer) and its settings. An entry that cannot be read, does not parse,
holds another key or does not fit the tools is ignored. Writing goes through a temporary file
and a rename, so a concurrent start reads the old entry or the new one, never half of one; a
cache folder that cannot be written only costs the reuse.
"""

from __future__ import annotations

import contextlib
import hashlib
import importlib.util
import json
import logging
import os
import sys
import tempfile
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

import pydantic
from pydantic import BaseModel

from .entrypoints import distributions
from .spec import ToolSpec

log = logging.getLogger("gateway.schemacache")

#: Bumped when what an entry holds, or how a schema is derived from a model, changes.
FORMAT = 1
#: Entries kept per plugin (several deployments of one user may differ in settings).
KEEP = 8
#: The core's package folder: its files key the cache.
CORE = Path(__file__).resolve().parent


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


def files(root: Path) -> list[tuple[str, int, int]]:
    """Every ``.py`` file under package folder ``root`` with its size and modification time
    (ns); for a module of its own (a file), the modules beside it, which it may import."""
    out = []
    if not root.is_dir():
        with contextlib.suppress(OSError), os.scandir(root.parent) as it:
            for entry in it:
                if entry.name.endswith(".py") and entry.is_file():
                    st = entry.stat()
                    out.append((entry.name, st.st_size, st.st_mtime_ns))
        return sorted(out)
    for dirpath, dirnames, filenames in os.walk(root):
        dirnames[:] = sorted(d for d in dirnames if d != "__pycache__")
        for name in sorted(filenames):
            if name.endswith(".py"):
                path = Path(dirpath, name)
                with contextlib.suppress(OSError):
                    st = path.stat()
                    out.append((str(path.relative_to(root)), st.st_size, st.st_mtime_ns))
    return out


def write_whole(path: Path, text: str) -> None:
    """Write ``text`` through a temporary file and a rename: a concurrent reader sees the old
    content or the new, never part of one (``OSError`` when it cannot be written)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=".tmp-", suffix=".json")
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as out:
            out.write(text)
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise


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


def package_root(module: str) -> Path | None:
    """The folder (or file) of ``module``'s top-level package, found without importing it."""
    try:
        spec = importlib.util.find_spec(module.split(".")[0])
    except (ImportError, ValueError):
        return None
    if spec is None:
        return None
    if spec.submodule_search_locations:
        return Path(next(iter(spec.submodule_search_locations)))
    return Path(spec.origin) if spec.origin else None  # a module of its own: that file


def _model_id(model: type[BaseModel] | None) -> str | None:
    return None if model is None else f"{model.__module__}:{model.__qualname__}"


class SchemaCache:
    """The cache folder of one gateway; :meth:`plugin` gives one plugin's entry."""

    def __init__(self, folder: Path) -> None:
        self.folder = folder
        self._common: str | None = None

    def _common_key(self) -> str:
        if self._common is None:
            self._common = json.dumps(
                [
                    FORMAT,
                    sys.version,
                    pydantic.VERSION,
                    files(CORE),
                    distributions(),
                ]
            )
        return self._common

    def plugin(self, name: str, module: str, settings: BaseModel | None) -> PluginSchemas:
        """The entry of plugin ``name`` whose entry point names ``module``."""
        root = package_root(module)
        if root is None:
            return PluginSchemas(None, "")
        try:
            dumped = None if settings is None else settings.model_dump_json()
        except ValueError:  # settings that do not serialize: nothing keyed on them is kept
            return PluginSchemas(None, "")
        key = json.dumps([self._common_key(), name, module, str(root), files(root), dumped])
        digest = hashlib.sha256(key.encode()).hexdigest()
        safe = "".join(ch if ch.isalnum() or ch in "-_" else "_" for ch in name)[:40]
        return PluginSchemas(self.folder / f"{safe}-{digest[:32]}.json", digest)


class PluginSchemas:
    """One plugin's schemas by tool: read once, written back if a tool had to be built."""

    def __init__(self, path: Path | None, key: str) -> None:
        self.path = path
        self.key = key
        self._tools: dict[str, Any] = self._read() if path is not None else {}
        self._changed = False

    def _read(self) -> dict[str, Any]:
        assert self.path is not None
        try:
            data = json.loads(self.path.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            return {}
        if not (isinstance(data, dict) and data.get("key") == self.key):
            return {}
        tools = data.get("tools")
        return tools if isinstance(tools, dict) else {}

    def get(self, spec: ToolSpec) -> tuple[dict[str, Any], dict[str, Any] | None] | None:
        """(model schema, output schema) of ``spec`` as built before, or ``None``."""
        entry = self._tools.get(spec.name)
        if not (
            isinstance(entry, dict)
            and entry.get("input_model") == _model_id(spec.input_model)
            and entry.get("output_model") == _model_id(spec.output_model)
            and isinstance(entry.get("input"), dict)
        ):
            return None
        output = entry.get("output")
        if (output is None) != (spec.output_model is None) or not isinstance(output, dict | None):
            return None
        return entry["input"], output

    def put(
        self, spec: ToolSpec, model_schema: dict[str, Any], output: dict[str, Any] | None
    ) -> None:
        if self.path is None:
            return
        self._tools[spec.name] = {
            "input_model": _model_id(spec.input_model),
            "output_model": _model_id(spec.output_model),
            "input": model_schema,
            "output": output,
        }
        self._changed = True

    def save(self) -> None:
        """Write the entry if it changed; failing to write (a read-only home) costs nothing
        but the reuse."""
        if self.path is None or not self._changed:
            return
        self._changed = False
        text = json.dumps({"key": self.key, "tools": self._tools}, separators=(",", ":"))
        try:
            write_whole(self.path, text)
            self._prune()
        except OSError as exc:
            log.debug("schema cache not written: %s", type(exc).__name__)

    def _prune(self) -> None:
        """Keep the :data:`KEEP` newest entries of this plugin."""
        assert self.path is not None
        prefix = self.path.name[: -len(".json") - 32]
        entries = [
            p
            for p in self.path.parent.glob(f"{prefix}*.json")
            if len(p.name) == len(self.path.name)
        ]
        if len(entries) <= KEEP:
            return
        entries.sort(key=lambda p: p.stat().st_mtime_ns if p.exists() else 0, reverse=True)
        for old in entries[KEEP:]:
            with contextlib.suppress(OSError):
                old.unlink()
