"""The citations plugin: a job's sources, citations, annotations and tags, and a search of its
source library, read from the agent orchestrator ("Debug Cockpit API").

Eight read tools for verifying an agent's work; everything HTTP is the core's REST kit over the
``cockpit`` backend, which the orchestrator plugin shares when both are installed.
"""

from __future__ import annotations

from typing import Any

from gateway import hookimpl

from . import citations, prompts, search, sources

MODULES = (sources, citations, search)


@hookimpl
def register_tools(register: Any) -> None:
    for module in MODULES:
        for spec in module.tools():
            register(spec)


@hookimpl
def register_prompts(register: Any) -> None:
    for spec in prompts.prompts():
        register(spec)
