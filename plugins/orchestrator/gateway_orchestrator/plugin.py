"""The orchestrator plugin: operate the agent orchestrator ("Debug Cockpit API") from Claude.

Jobs and their actions (:mod:`.jobs`), inside a job (:mod:`.workspace`), the agents' history
(:mod:`.audit`, :mod:`.search`), the state of the system (:mod:`.monitoring`) and the database
browser (:mod:`.tables`): each module declares its tools in the core's REST dialect.
"""

from __future__ import annotations

from gateway import Plugin

from . import audit, jobs, monitoring, prompts, search, tables, workspace

plugin = Plugin(  # what the entry point names
    tools=(
        *jobs.TOOLS,
        *workspace.TOOLS,
        *audit.TOOLS,
        *search.TOOLS,
        *monitoring.TOOLS,
        *tables.TOOLS,
    ),
    prompts=prompts.PROMPTS,
)
