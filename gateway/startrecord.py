"""What the last stdio start offered, so that the next one answers the client before it
imports a single plugin.

Claude Code gives a stdio server a few seconds to connect and then lists its tools; importing
the plugins (their modules, their models) is most of what the gateway adds to a start. After
a start has opened its plugins, it writes what it offers (the published tools, prompts and
instructions) to ``$XDG_CACHE_HOME/mcp-gateway/starts/`` (else ``~/.cache/…``). The next start
that finds a record made from exactly the same inputs answers ``initialize``, ``tools/list``
and ``prompts/list`` from it and loads the plugins right after the first listing has been
sent (or at once when a call comes first); calls wait for that.

A record is used only when everything the listing is derived from is unchanged: the Python
and the interpreter's path, every installed distribution (name, version, its
``.dist-info`` folder's time: a reinstall counts, and its entry points file's size and time), the core's and each plugin's files (path,
size, modification time in ns), the configuration (every setting, ``[plugins.*]`` tables
included), the working directory, and the values of every environment variable the plugins'
and their backends' settings read. Values enter only a digest, never the file. What no key
can see (a plugin that reads a file or variable of its own while registering) is caught once
the plugins are loaded: the listing is compared with the record, and if it differs the record
is replaced, later listings are right, and a client on a session protocol is told
(``notifications/tools/list_changed``; the stateless protocol has no such notification).
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import logging
import os
import sys
import tempfile
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

log = logging.getLogger("gateway.startrecord")

#: Bumped when what a record holds, or how it is keyed, changes.
FORMAT = 1
#: Records kept (one per interpreter, configuration file and working directory: a user who
#: starts the gateway in many projects keeps those of the most recent ones).
KEEP = 32
#: The core's package folder: its files key both caches.
CORE = Path(__file__).resolve().parent


def cache_folder(config: Any, part: str) -> Path | None:
    """``$XDG_CACHE_HOME/mcp-gateway/<part>``, else ``$HOME/.cache/…``, for a gateway whose
    ``schema_cache`` is on; ``None`` when it is off or the environment names neither."""
    if not config.schema_cache:
        return None
    env: Mapping[str, str] = config.env
    xdg = env.get("XDG_CACHE_HOME", "")
    if Path(xdg).is_absolute():  # the XDG spec: a relative value is invalid, ignore it
        return Path(xdg) / "mcp-gateway" / part
    home = env.get("HOME", "")
    return Path(home) / ".cache" / "mcp-gateway" / part if Path(home).is_absolute() else None


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


def distributions() -> list[tuple[str, int, tuple[int, int] | None]]:
    """Every ``*.dist-info`` on ``sys.path`` with its folder's modification time and its
    ``entry_points.txt``'s size and time (rewritten in place, it names other modules)."""
    out = []
    for entry in sys.path:
        try:
            with os.scandir(entry or ".") as it:
                for d in it:
                    if d.name.endswith(".dist-info"):
                        points = _size_and_time(os.path.join(d.path, "entry_points.txt"))
                        out.append((d.name, d.stat().st_mtime_ns, points))
        except OSError:
            continue
    return sorted(out, key=lambda d: d[:2])


def _size_and_time(file: str) -> tuple[int, int] | None:
    try:
        st = os.stat(file)
    except OSError:
        return None
    return st.st_size, st.st_mtime_ns


def _config_key(config: Any) -> str:
    """Every setting of a :class:`~gateway.config.GatewayConfig` but the environment (whose
    variables count one by one) and where each came from. Secrets print masked."""
    fields = sorted(set(type(config).model_fields) - {"env", "origins"})
    return json.dumps({k: getattr(config, k) for k in fields}, default=repr, sort_keys=True)


@dataclass
class Inputs:
    """What a listing was derived from beyond the configuration: the plugins' package folders
    and the environment variables their settings read."""

    roots: list[str] = field(default_factory=list)
    env_names: list[str] = field(default_factory=list)

    def digest(self, config: Any) -> str:
        env: Mapping[str, str] = config.env
        key = json.dumps(
            [
                FORMAT,
                sys.version,
                sys.executable,
                sys.path,
                os.getcwd(),
                files(CORE),
                distributions(),
                [(r, files(Path(r))) for r in self.roots],
                _config_key(config),
                [(n, env.get(n)) for n in self.env_names],
            ],
            default=repr,
        )
        return hashlib.sha256(key.encode()).hexdigest()


@dataclass
class StartRecord:
    """A listing as a start published it (JSON as sent), with what it was derived from."""

    tools: list[dict[str, Any]]
    prompts: list[dict[str, Any]]
    instructions: str
    #: every tool and prompt name a plugin registered, offered or not
    served_tools: list[str]
    served_prompts: list[str]
    inputs: Inputs = field(default_factory=Inputs)

    def same_listing(self, other: StartRecord) -> bool:
        return (self.tools, self.prompts, self.instructions) == (
            other.tools,
            other.prompts,
            other.instructions,
        )

    def tool(self, name: str) -> dict[str, Any] | None:
        return next((t for t in self.tools if t.get("name") == name), None)


def _where(folder: Path, config: Any) -> Path:
    """One record per interpreter, configuration file and working directory."""
    where = json.dumps([sys.executable, getattr(config, "source", ""), os.getcwd()])
    return folder / f"start-{hashlib.sha256(where.encode()).hexdigest()[:32]}.json"


def lookup(config: Any) -> StartRecord | None:
    """The record of the last start with exactly these inputs, or ``None``."""
    folder = cache_folder(config, "starts")
    if folder is None:
        return None
    try:
        data = json.loads(_where(folder, config).read_text(encoding="utf-8"))
        inputs = Inputs(
            roots=[str(r) for r in data["inputs"]["roots"]],
            env_names=[str(n) for n in data["inputs"]["env_names"]],
        )
        if data.get("format") != FORMAT or data.get("digest") != inputs.digest(config):
            return None
        record = StartRecord(
            tools=list(data["tools"]),
            prompts=list(data["prompts"]),
            instructions=str(data["instructions"]),
            served_tools=[str(n) for n in data["served_tools"]],
            served_prompts=[str(n) for n in data["served_prompts"]],
            inputs=inputs,
        )
    except (OSError, ValueError, KeyError, TypeError):
        return None
    if not all(isinstance(t, dict) and isinstance(t.get("name"), str) for t in record.tools):
        return None
    if not all(isinstance(p, dict) for p in record.prompts):
        return None
    return record


def save(config: Any, record: StartRecord) -> None:
    """Write ``record`` for the next start (whole or not at all); a folder that cannot be
    written only costs the next start its head start."""
    folder = cache_folder(config, "starts")
    if folder is None:
        return
    data = {
        "format": FORMAT,
        "digest": record.inputs.digest(config),
        "inputs": {"roots": record.inputs.roots, "env_names": record.inputs.env_names},
        "tools": record.tools,
        "prompts": record.prompts,
        "instructions": record.instructions,
        "served_tools": record.served_tools,
        "served_prompts": record.served_prompts,
    }
    try:
        write_whole(_where(folder, config), json.dumps(data, ensure_ascii=False))
        _prune(folder)
    except (OSError, ValueError) as exc:
        log.debug("start record not written: %s", type(exc).__name__)


def _prune(folder: Path) -> None:
    """Keep the :data:`KEEP` most recently written records."""
    records = []
    for path in folder.glob("start-*.json"):
        with contextlib.suppress(OSError):
            records.append((path.stat().st_mtime_ns, path))
    records.sort(reverse=True)
    for _, old in records[KEEP:]:
        with contextlib.suppress(OSError):
            old.unlink()


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
