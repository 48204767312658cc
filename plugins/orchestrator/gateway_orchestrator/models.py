"""Models shared by the orchestrator's tools: the output models of a job and its todos, and
``JobArgs``, the input of every job-only tool.

The API sends JSONB columns as JSON-encoded strings and timestamps in two spellings; the models
decode the first (``JsonString``) and normalize the second to UTC with ``Z`` (``UtcTimestamp``),
so every tool shows a job the same way. Unknown fields the API may add later are ignored.
"""

from __future__ import annotations

from collections import Counter
from typing import Any, Literal, get_args

from pydantic import BaseModel, ConfigDict, Field

from gateway import Args
from gateway.rest import JsonString, UtcTimestamp

from .backend import JobId

#: The statuses the orchestrator's database uses (its own MCP server offered others).
JobStatus = Literal["created", "processing", "completed", "failed", "cancelled", "pending_review"]
JOB_STATUSES: tuple[str, ...] = get_args(JobStatus)


class JobArgs(Args):
    job_id: JobId


class JobSummary(BaseModel):
    """A job as ``GET /api/jobs`` lists it."""

    id: str
    description: str
    status: str
    creator_status: str | None = None
    validator_status: str | None = None
    config_name: str | None = None
    assigned_agent_id: str | None = None
    created_at: UtcTimestamp | None = None
    audit_count: int | None = Field(None, description="null when the API has no audit store")


class Job(JobSummary):
    """A job as ``GET /api/jobs/{id}`` shows it, JSON columns decoded."""

    updated_at: UtcTimestamp | None = None
    config_override: JsonString = None
    context: JsonString = None


class Todo(BaseModel):
    """One entry of an agent's ``todos.yaml`` (agent-written: other fields pass through)."""

    model_config = ConfigDict(extra="allow")

    id: str | int | None = None
    content: str = ""
    status: str | None = None
    priority: str | None = None
    notes: list[Any] = Field(default_factory=list)
    created_at: UtcTimestamp | None = None


class TodoList(BaseModel):
    """The current ``todos.yaml`` of a job, with a count per status."""

    todos: list[Todo]
    counts: dict[str, int] = Field(default_factory=dict)

    def model_post_init(self, context: Any, /) -> None:
        if not self.counts:
            self.counts = dict(Counter(t.status or "unknown" for t in self.todos))
