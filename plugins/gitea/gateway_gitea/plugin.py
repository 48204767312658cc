"""The gitea plugin: a job's git history in Gitea — commits, range diffs, files, tags.

Agent jobs deliver their work into ``{owner}/job-{job_id}``, with phase tags
(``phase_2_end``) and ``job-frozen`` when the job was frozen for review. Five read tools let
the model review what a job produced. Connection, settings, health check and breaker come from
the core's REST kit (``GITEA``); httpx is imported by the first call, not at start-up.
"""

from __future__ import annotations

from gateway import Plugin

from .models import Settings
from .tools import TOOLS

plugin = Plugin(settings=Settings, tools=TOOLS)  # what the entry point names
