"""The citations plugin: a job's sources, citations, annotations and tags, and a search of its
source library, read from the agent orchestrator ("Debug Cockpit API").

Eight read tools for verifying an agent's work, all declared in the core's REST dialect over the
``cockpit`` backend, which the orchestrator plugin shares when both are installed.
"""

from __future__ import annotations

from gateway import PluginParts

from . import citations, prompts, search, sources

PARTS = PluginParts(
    tools=(*sources.TOOLS, *citations.TOOLS, *search.TOOLS), prompts=prompts.PROMPTS
)
register_tools = PARTS.register_tools
register_prompts = PARTS.register_prompts
