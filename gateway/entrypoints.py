"""The plugins installed as entry points, read from the installation's metadata once while it
stays the same.

A scan reads every installed distribution's entry points and parses the metadata of each
plugin's distribution (~10 ms of CPU). The CLI's checks and the gateway a command builds
share one scan, and so do the many gateways one process may build (the test kit builds one
per test). Nothing is imported here: a plugin's module is imported by ``load``.

A scan is reused while the import path, the distributions on it and their
``entry_points.txt`` and ``METADATA`` files (time and size) are the ones it saw: checking that
costs a listing of each folder on the path and two ``stat`` calls per distribution that has
entry points (~1 ms). Installing or removing a distribution changes the listing, however soon
after a scan; rewriting one in place changes its files' time or size.
"""

from __future__ import annotations

import importlib.metadata as md
import os
import sys
from collections.abc import Callable
from dataclasses import dataclass

from .hookspecs import ENTRY_POINT_GROUP


@dataclass(frozen=True)
class InstalledPlugin:
    """One entry point of the plugin group and the distribution that declares it."""

    name: str
    distribution: str
    version: str
    summary: str  # the distribution's one-line Summary
    module: str  # the module the entry point names
    load: Callable[[], object]


_Stat = tuple[int, int] | None
_Folder = tuple[tuple[str, _Stat, _Stat], ...]  # (metadata folder, its two files)
_Key = tuple[tuple[str, ...], str, tuple[_Folder, ...]]
_SCANS: dict[str, tuple[_Key, tuple[InstalledPlugin, ...]]] = {}


def installed_plugins(group: str = ENTRY_POINT_GROUP) -> tuple[InstalledPlugin, ...]:
    """The group's entry points, sorted by name, then distribution."""
    key = _state()
    seen = _SCANS.get(group)
    if seen is not None and seen[0] == key:
        return seen[1]
    found = tuple(sorted(_scan(group), key=lambda p: (p.name, p.distribution)))
    _SCANS[group] = (key, found)
    return found


def _state() -> _Key:
    """What a scan depends on: the import path (a relative entry, such as ``""``, by the
    working directory) and, in each of its folders, every distribution's metadata folder with
    its entry points and metadata files."""
    path = tuple(sys.path)
    cwd = os.getcwd() if any(not os.path.isabs(entry) for entry in path) else ""
    folders: list[_Folder] = []
    for entry in path:
        try:
            names = os.listdir(entry or ".")
        except OSError:  # missing, or a file (a zip): by its own time and size
            folders.append((("", _stat(entry), None),))
            continue
        infos = []
        for name in sorted(n for n in names if n.endswith((".dist-info", ".egg-info"))):
            info = os.path.join(entry or ".", name)
            points = _stat(os.path.join(info, "entry_points.txt"))
            meta = _stat(os.path.join(info, "METADATA")) if points else None
            infos.append((name, points, meta))
        folders.append(tuple(infos))
    return path, cwd, tuple(folders)


def _stat(file: str) -> _Stat:
    try:
        st = os.stat(file)
    except OSError:
        return None
    return st.st_mtime_ns, st.st_size


def _scan(group: str) -> list[InstalledPlugin]:
    found = []
    for ep in md.entry_points(group=group):
        dist = getattr(ep, "dist", None)
        meta = dist.metadata if dist is not None else None  # parsed on every access: once
        found.append(
            InstalledPlugin(
                name=ep.name,
                distribution=meta["Name"] if meta is not None else "unknown",
                version=meta["Version"] if meta is not None else "unknown",
                summary=(meta.get("Summary") or "") if meta is not None else "",
                module=ep.module,
                load=ep.load,
            )
        )
    return found
