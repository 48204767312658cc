"""The orchestrator plugin: operate the agent orchestrator ("Debug Cockpit API") from Claude.

Part 1 (jobs, actions, workspace) and part 2 (audit history, monitoring, database inspection)
are separate modules, each listing its tools; everything HTTP is the core's REST kit.
"""

from __future__ import annotations

from typing import Any

from gateway import hookimpl

from . import audit, jobs, monitoring, prompts, tables, workspace

MODULES = (jobs, workspace, audit, monitoring, tables)


@hookimpl
def register_tools(register: Any) -> None:
    for module in MODULES:
        for spec in module.tools():
            register(spec)


@hookimpl
def register_prompts(register: Any) -> None:
    for spec in prompts.prompts():
        register(spec)
