"""Tools of the orchestrator plugin: audit (being written)."""

from __future__ import annotations

from gateway import ToolSpec


def tools() -> list[ToolSpec]:
    return []
