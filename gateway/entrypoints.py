"""The plugins installed as entry points, read from the installation's metadata once per process.

A scan reads every installed distribution's entry points and parses the metadata of each
plugin's distribution (~10 ms of CPU). The CLI's checks, the gateway a command builds and its
isolated plugins' settings share one scan: plugins load at start-up, so a distribution
installed later counts at the next start. Nothing is imported here: a plugin's module is
imported by ``load``. The test kit, whose process builds a gateway per test while tests
install distributions, reads again when the installation changed (:func:`forget_installed`).
"""

from __future__ import annotations

import importlib.metadata as md
import os
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

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


_SCANS: dict[str, tuple[InstalledPlugin, ...]] = {}


def installed_plugins(group: str = ENTRY_POINT_GROUP) -> tuple[InstalledPlugin, ...]:
    """The group's entry points, sorted by name, then distribution."""
    found = _SCANS.get(group)
    if found is None:
        found = _SCANS[group] = tuple(sorted(_scan(group), key=lambda p: (p.name, p.distribution)))
    return found


def forget_installed() -> None:
    """Read the installation again at the next :func:`installed_plugins`."""
    _SCANS.clear()


class _HeaderOnly(md.Distribution):
    """A distribution whose metadata file ends with its header: ``.metadata`` then parses the
    fields as ``dist.metadata`` does, without the long description after them (often the whole
    README, and half the scan's time for the three fields the gateway reads)."""

    def __init__(self, dist: md.Distribution) -> None:
        self._dist = dist

    def read_text(self, filename: str) -> str | None:
        text = self._dist.read_text(filename)
        return text.partition("\n\n")[0] + "\n" if text else text

    def locate_file(self, path: str | os.PathLike[str]) -> Any:
        return self._dist.locate_file(path)


def _scan(group: str) -> list[InstalledPlugin]:
    found = []
    for ep in md.entry_points(group=group):
        dist = getattr(ep, "dist", None)
        # An email.message.Message underneath (its .get is not in the PackageMetadata protocol)
        meta: Any = _HeaderOnly(dist).metadata if dist is not None else None
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
