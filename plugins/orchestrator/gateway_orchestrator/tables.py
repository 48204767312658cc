"""Tools of the orchestrator plugin: tables (being written)."""

from __future__ import annotations

from gateway import ToolSpec


def tools() -> list[ToolSpec]:
    return []
