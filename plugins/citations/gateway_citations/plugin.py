"""The citations plugin: a job's sources, citations, annotations and tags, and a search of its
source library, read from the agent orchestrator ("Debug Cockpit API").

Eight read tools for verifying an agent's work, all declared in the core's REST dialect over the
``cockpit`` backend, which the orchestrator plugin shares when both are installed.
"""

from __future__ import annotations

from gateway import Plugin

from . import citations, prompts, search, sources

plugin = Plugin(  # what the entry point names
    tools=(*sources.api, *citations.api, *search.api), prompts=prompts.PROMPTS
)
