"""The plugins installed as entry points, read from the installation's metadata once while it
stays the same.

A scan reads every installed distribution's entry points and parses the metadata of each
plugin's distribution (~10 ms of CPU). The CLI's checks and the gateway a command builds
share one scan, and so do the many gateways one process may build (the test kit builds one
per test). Nothing is imported here: a plugin's module is imported by ``load``.

A scan is reused while the import path, the working directory (for relative entries) and
the installed distributions are the ones it saw: every ``*.dist-info`` folder with its
modification time and its ``entry_points.txt``'s size and time (~1 ms to take). Installing or
removing a distribution changes that, however soon after a scan; so does rewriting its entry
points in place.
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


_Key = tuple[tuple[str, ...], str, list[tuple[str, int, tuple[int, int] | None]]]
_SCANS: dict[str, tuple[_Key, tuple[InstalledPlugin, ...]]] = {}


def installed_plugins(group: str = ENTRY_POINT_GROUP) -> tuple[InstalledPlugin, ...]:
    """The group's entry points, sorted by name, then distribution."""
    path = tuple(sys.path)
    cwd = os.getcwd() if any(not os.path.isabs(entry) for entry in path) else ""
    key = (path, cwd, distributions())
    seen = _SCANS.get(group)
    if seen is not None and seen[0] == key:
        return seen[1]
    found = tuple(sorted(_scan(group), key=lambda p: (p.name, p.distribution)))
    _SCANS[group] = (key, found)
    return found


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
