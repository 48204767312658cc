"""The rows of the fake orchestrator's tables and how the API renders values.

Rows are dataclasses holding Python values (aware datetimes, dicts); the routes render them the
way the real API does: timestamps with ``Z``, JSONB columns as JSON-encoded strings in
PostgreSQL's key order, ``todos.yaml`` in PyYAML's style.
"""

from __future__ import annotations

import hashlib
import json
import re
import time
import uuid
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any

# "Now" in the recorded scenario: the instant the recordings' progress and heartbeats were taken.
SCENARIO_TIME = datetime(2026, 11, 22, 9, 59, 38, 200000, tzinfo=UTC)

JOB_STATUSES = ("created", "processing", "completed", "failed", "cancelled", "pending_review")
AGENT_STATUSES = ("booting", "ready", "working", "completed", "failed", "offline")
DATASOURCE_TYPES = ("mongodb", "neo4j", "postgresql")


class Clock:
    """The fake's time: ``start`` plus the real time elapsed since (unless ``frozen``), plus
    whatever :meth:`advance` added. New rows get later timestamps than the seeded ones."""

    def __init__(self, start: datetime = SCENARIO_TIME, *, frozen: bool = False) -> None:
        self._start = start
        self._began = time.monotonic()
        self._frozen = frozen
        self._offset = timedelta()

    def now(self) -> datetime:
        running = 0.0 if self._frozen else time.monotonic() - self._began
        return self._start + self._offset + timedelta(seconds=running)

    def advance(self, seconds: float) -> None:
        self._offset += timedelta(seconds=seconds)


def iso_z(value: datetime | None) -> str | None:
    """A timestamp as the API renders DB rows: UTC, ``Z``, microseconds unless zero."""
    if value is None:
        return None
    return value.astimezone(UTC).replace(tzinfo=None).isoformat() + "Z"


def iso_offset(value: datetime | None) -> str | None:
    """``+00:00`` form, as ``/progress`` and ``approved_at`` render it."""
    return None if value is None else value.astimezone(UTC).isoformat()


def _jsonb_order(value: Any) -> Any:
    # PostgreSQL's jsonb stores object keys sorted by length, then bytewise: that is the order
    # its text output (and so the API's JSON-in-a-string columns) shows.
    if isinstance(value, dict):
        keys = sorted(value, key=lambda k: (len(k.encode()), k.encode()))
        return {k: _jsonb_order(value[k]) for k in keys}
    if isinstance(value, list):
        return [_jsonb_order(v) for v in value]
    return value


def jsonb_text(value: Any) -> str | None:
    """A JSONB column as the API returns it: a JSON-encoded string (None stays None)."""
    return None if value is None else json.dumps(_jsonb_order(value), ensure_ascii=False)


def content_hash(content: str) -> str:
    return hashlib.sha256(content.encode()).hexdigest()


def new_id() -> str:
    return str(uuid.uuid4())


def parse_uuid(value: str) -> str | None:
    """The canonical form of a UUID string as the orchestrator's lookups accept it, or None."""
    try:
        return str(uuid.UUID(value))
    except ValueError:
        return None


@dataclass
class Job:
    id: str
    description: str
    created_at: datetime
    updated_at: datetime
    status: str = "created"
    creator_status: str = "pending"
    validator_status: str = "pending"
    config_name: str = "defaults"
    config_override: dict[str, Any] | None = None
    context: dict[str, Any] | None = None
    assigned_agent_id: str | None = None
    completed_at: datetime | None = None
    document_path: str | None = None
    document_content: bytes | None = None
    error_message: str | None = None
    error_details: dict[str, Any] | None = None
    total_tokens_used: int = 0
    total_requests: int = 0


@dataclass
class Agent:
    id: str
    config_name: str
    hostname: str | None
    registered_at: datetime
    last_heartbeat: datetime
    pod_ip: str | None = "127.0.0.1"
    pod_port: int = 8001
    pid: int | None = None
    status: str = "ready"
    current_job_id: str | None = None
    metadata: dict[str, Any] = field(default_factory=dict)
    # The agent pod, not a table column: does it answer /job/start|resume|cancel, and does it
    # accept (None) or reject (with this text, answered 500) what it is sent?
    reachable: bool = True
    rejects_with: str | None = None


@dataclass
class Datasource:
    id: str
    name: str
    type: str
    connection_url: str
    created_at: datetime
    updated_at: datetime
    description: str | None = None
    credentials: dict[str, Any] = field(default_factory=dict)
    read_only: bool = True
    job_id: str | None = None
    # What POST /test answers: (status, message); None derives it from the type.
    test_result: tuple[str, str] | None = None


@dataclass
class Requirement:
    id: str
    job_id: str
    requirement_id: str | None
    name: str | None
    text: str
    created_at: datetime
    updated_at: datetime
    type: str | None = "functional"
    priority: str | None = "medium"
    status: str = "pending"
    source_document: str | None = None
    gobd_relevant: bool | None = False
    gdpr_relevant: bool | None = False
    quality_score: float | None = None
    fulfillment_status: str | None = None
    neo4j_id: str | None = None
    source_location: dict[str, Any] | None = None
    citations: list[Any] | None = field(default_factory=list)
    reasoning: str | None = None
    research_notes: str | None = None
    quality_class: str | None = None
    iso_29148_evaluation: dict[str, Any] | None = None
    fulfillment_justification: str | None = None
    found_model_elements: list[Any] | None = None
    attribute_quality_assessment: dict[str, Any] | None = None
    graph_query: str | None = None
    recommendations: str | None = None
    validation_result: dict[str, Any] | None = None
    rejection_reason: str | None = None
    retry_count: int | None = 0
    last_error: str | None = None
    validated_at: datetime | None = None
    tags: list[str] | None = None


@dataclass
class Source:
    id: int
    type: str
    identifier: str
    name: str
    content: str
    created_at: datetime
    version: str | None = None
    metadata: dict[str, Any] | None = field(default_factory=dict)
    content_hash: str | None = None


@dataclass
class Citation:
    id: int
    job_id: str
    source_id: int
    claim: str
    created_at: datetime
    verbatim_quote: str | None = None
    quote_context: str = ""
    quote_language: str | None = "en"
    relevance_reasoning: str | None = None
    confidence: str | None = "medium"
    extraction_method: str | None = "direct_quote"
    locator: dict[str, Any] = field(default_factory=dict)
    verification_status: str | None = "pending"
    verification_notes: str | None = None
    similarity_score: float | None = None
    matched_location: dict[str, Any] | None = None
    created_by: str | None = None


@dataclass
class Annotation:
    id: int
    job_id: str
    source_id: int
    annotation_type: str
    content: str
    created_at: datetime
    page_reference: str | None = None
    created_by: str | None = None


@dataclass
class File:
    content: str
    modified: float  # epoch seconds, as os.stat reports it


@dataclass
class AgentCall:
    """One call the orchestrator made to an agent pod, and how it went."""

    agent_id: str
    action: str  # "start" | "resume" | "cancel"
    job_id: str
    payload: dict[str, Any]
    outcome: str  # "accepted" | "unreachable" | "rejected"


# -- todos.yaml as the agent writes it (PyYAML's block style with flow lists) ----------------

_PLAIN = re.compile(r"^[A-Za-z_][\w .,/()-]*$")


def _scalar(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int | float):
        return repr(value)
    text = str(value)
    if (
        _PLAIN.match(text)
        and not text.endswith((" ", ":"))
        and text.lower() not in ("null", "true", "false", "yes", "no")
    ):
        return text
    return "'" + text.replace("'", "''") + "'"


def render_todos(todos: list[dict[str, Any]]) -> str:
    lines = ["todos:"]
    for todo in todos:
        first = True
        for key, value in todo.items():
            if isinstance(value, list):
                rendered = "[" + ", ".join(_scalar(v) for v in value) + "]"
            else:
                rendered = _scalar(value)
            lines.append(f"  {'- ' if first else '  '}{key}: {rendered}")
            first = False
    return "\n".join(lines) + "\n"
