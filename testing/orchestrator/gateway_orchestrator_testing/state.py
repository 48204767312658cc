"""The fake orchestrator's in-memory state: its PostgreSQL rows, the job workspaces, the
MongoDB collections, the agent pods, and a clock.

Helpers (``add_job``, ``add_agent``, ``freeze_job``, ...) let a test shape the state; every
method takes the state's lock, so a test may call them while the server answers requests.
"""

from __future__ import annotations

import json
import threading
import uuid
from datetime import datetime
from typing import Any

from .model import (
    DATASOURCE_TYPES,
    JOB_STATUSES,
    Agent,
    AgentCall,
    Annotation,
    Citation,
    Clock,
    Datasource,
    File,
    Job,
    Requirement,
    Source,
    content_hash,
    new_id,
    render_todos,
)


class State:
    """Everything the fake orchestrator knows. ``mongo`` switches the MongoDB-backed endpoints
    between the degraded answers (False, as recorded) and the seeded collections (True)."""

    def __init__(self, clock: Clock | None = None, *, mongo: bool = False) -> None:
        self.lock = threading.RLock()
        self.clock = clock or Clock()
        self.mongo = mongo
        self.jobs: dict[str, Job] = {}
        self.agents: dict[str, Agent] = {}
        self.datasources: dict[str, Datasource] = {}
        self.requirements: dict[str, Requirement] = {}
        self.sources: dict[int, Source] = {}
        self.job_sources: list[tuple[str, int]] = []
        self.citations: dict[int, Citation] = {}
        self.annotations: dict[int, Annotation] = {}
        self.tags: dict[tuple[str, int], set[str]] = {}
        self.files: dict[str, File] = {}  # "job_<id>/plan.md" -> File, relative to WORKSPACE_PATH
        self.dirs: set[str] = set()  # job workspace folders that exist even without files
        self.todos: dict[str, list[dict[str, Any]]] = {}  # job id -> the todos.yaml list
        self.experts: list[dict[str, Any]] = []  # GET /api/experts/{id} bodies, "defaults" first
        self.audit: list[dict[str, Any]] = []  # MongoDB agent_audit
        self.chat: list[dict[str, Any]] = []  # MongoDB chat_history
        self.llm_requests: dict[str, dict[str, Any]] = {}  # MongoDB llm_requests by _id
        self.graph_changes: dict[str, dict[str, Any]] = {}  # job id -> /api/graph/changes body
        self.agent_calls: list[AgentCall] = []
        self._serial: dict[str, int] = {}

    def now(self) -> datetime:
        return self.clock.now()

    def next_serial(self, table: str, used: dict[int, Any]) -> int:
        value = max([self._serial.get(table, 0), *used]) + 1
        self._serial[table] = value
        return value

    # -- jobs and agents -----------------------------------------------------------------

    def add_job(
        self,
        description: str = "A job added by a test",
        *,
        id: str | None = None,
        status: str = "created",
        created_at: datetime | None = None,
        updated_at: datetime | None = None,
        **fields: Any,
    ) -> Job:
        """A job row (``fields``: any :class:`Job` attribute). Status-specific facts, such as a
        frozen file for ``pending_review``, are up to the test (see :meth:`freeze_job`)."""
        with self.lock:
            created = created_at or self.now()
            job = Job(
                id=id or new_id(),
                description=description,
                created_at=created,
                updated_at=updated_at or created,
                status=status,
                **fields,
            )
            self.jobs[job.id] = job
            return job

    def set_job_status(self, job_id: str, status: str, **fields: Any) -> Job:
        """Put a job into ``status`` (and set any other attribute), as the agent side would."""
        if status not in JOB_STATUSES:
            raise ValueError(f"unknown job status {status!r}")
        with self.lock:
            job = self.jobs[job_id]
            job.status = status
            for name, value in fields.items():
                setattr(job, name, value)
            job.updated_at = self.now()
            if status == "completed" and job.completed_at is None:
                job.completed_at = job.updated_at
            return job

    def freeze_job(
        self,
        job_id: str,
        *,
        summary: str = "Work done; frozen for review.",
        deliverables: tuple[str, ...] = ("workspace.md",),
        confidence: float = 0.8,
        notes: str | None = None,
    ) -> dict[str, Any]:
        """Put a job into ``pending_review`` with an ``output/job_frozen.json``, as an agent
        that finished its phases leaves it."""
        with self.lock:
            job = self.set_job_status(
                job_id, "pending_review", creator_status="completed", validator_status="completed"
            )
            frozen: dict[str, Any] = {
                "status": "pending_review",
                "timestamp": job.updated_at.replace(tzinfo=None).isoformat(),
                "summary": summary,
                "deliverables": list(deliverables),
                "confidence": confidence,
                "job_id": job_id,
            }
            if notes is not None:
                frozen["notes"] = notes
            self.write_file(job_id, "output/job_frozen.json", json.dumps(frozen, indent=2))
            return frozen

    def add_agent(
        self,
        config_name: str = "defaults",
        *,
        id: str | None = None,
        status: str = "ready",
        hostname: str | None = None,
        last_heartbeat: datetime | None = None,
        reachable: bool = True,
        **fields: Any,
    ) -> Agent:
        """An agent row; ``reachable=False`` makes its pod refuse connections (the API's 502s)."""
        with self.lock:
            now = self.now()
            agent_id = id or new_id()
            agent = Agent(
                id=agent_id,
                config_name=config_name,
                hostname=hostname or f"agent-{config_name}-{agent_id[:8]}",
                registered_at=fields.pop("registered_at", now),
                last_heartbeat=last_heartbeat or now,
                status=status,
                reachable=reachable,
                **fields,
            )
            self.agents[agent.id] = agent
            return agent

    def add_datasource(
        self,
        name: str,
        type: str,
        connection_url: str,
        *,
        id: str | None = None,
        job_id: str | None = None,
        **fields: Any,
    ) -> Datasource:
        if type not in DATASOURCE_TYPES:
            raise ValueError(f"unknown datasource type {type!r}")
        with self.lock:
            now = fields.pop("created_at", self.now())
            ds = Datasource(
                id=id or new_id(),
                name=name,
                type=type,
                connection_url=connection_url,
                created_at=now,
                updated_at=fields.pop("updated_at", now),
                job_id=job_id,
                **fields,
            )
            self.datasources[ds.id] = ds
            return ds

    def add_requirement(self, job_id: str, text: str, **fields: Any) -> Requirement:
        with self.lock:
            now = fields.pop("created_at", self.now())
            req = Requirement(
                id=fields.pop("id", None) or new_id(),
                job_id=job_id,
                requirement_id=fields.pop("requirement_id", None),
                name=fields.pop("name", None),
                text=text,
                created_at=now,
                updated_at=fields.pop("updated_at", now),
                **fields,
            )
            self.requirements[req.id] = req
            return req

    # -- source library ------------------------------------------------------------------

    def add_source(
        self,
        name: str,
        content: str,
        *,
        type: str = "document",
        identifier: str | None = None,
        jobs: tuple[str, ...] = (),
        **fields: Any,
    ) -> Source:
        """A source, linked to ``jobs`` (the job_sources table)."""
        with self.lock:
            source_id = fields.pop("id", None) or self.next_serial("sources", self.sources)
            source = Source(
                id=source_id,
                type=type,
                identifier=identifier or f"documents/source_{source_id}.pdf",
                name=name,
                content=content,
                created_at=fields.pop("created_at", self.now()),
                content_hash=fields.pop("content_hash", None) or content_hash(content),
                **fields,
            )
            self.sources[source.id] = source
            for job_id in jobs:
                self.link_source(job_id, source.id)
            return source

    def link_source(self, job_id: str, source_id: int) -> None:
        with self.lock:
            if (job_id, source_id) not in self.job_sources:
                self.job_sources.append((job_id, source_id))

    def add_citation(self, job_id: str, source_id: int, claim: str, **fields: Any) -> Citation:
        with self.lock:
            citation = Citation(
                id=fields.pop("id", None) or self.next_serial("citations", self.citations),
                job_id=job_id,
                source_id=source_id,
                claim=claim,
                created_at=fields.pop("created_at", self.now()),
                **fields,
            )
            if not citation.quote_context and citation.verbatim_quote:
                citation.quote_context = f"...{citation.verbatim_quote}..."
            self.citations[citation.id] = citation
            return citation

    def add_annotation(
        self, job_id: str, source_id: int, annotation_type: str, content: str, **fields: Any
    ) -> Annotation:
        with self.lock:
            note = Annotation(
                id=fields.pop("id", None) or self.next_serial("annotations", self.annotations),
                job_id=job_id,
                source_id=source_id,
                annotation_type=annotation_type,
                content=content,
                created_at=fields.pop("created_at", self.now()),
                **fields,
            )
            self.annotations[note.id] = note
            return note

    def tag_source(self, job_id: str, source_id: int, *tags: str) -> None:
        with self.lock:
            self.tags.setdefault((job_id, source_id), set()).update(tags)

    def job_ids_of(self, source_id: int) -> list[str]:
        return [j for j, s in self.job_sources if s == source_id]

    # -- workspaces ----------------------------------------------------------------------

    def write_file(self, job_id: str, path: str, content: str) -> None:
        """A file in the job's workspace (``path`` relative to ``job_<id>/``)."""
        self.write_workspace_file(f"job_{job_id}/{path.lstrip('/')}", content)

    def write_workspace_file(self, path: str, content: str) -> None:
        """A file anywhere under the workspace root, e.g. a sibling folder ``job_<id>-old/``."""
        if path.count("/") == 1 and path.endswith("/todos.yaml"):
            raise ValueError("todos.yaml is rendered from the job's todos: use set_todos()")
        with self.lock:
            self.files[path] = File(content, self.now().timestamp())
            self.dirs.add(path.split("/", 1)[0])

    def delete_file(self, job_id: str, path: str) -> None:
        with self.lock:
            self.files.pop(f"job_{job_id}/{path.lstrip('/')}", None)

    def make_workspace(self, job_id: str) -> None:
        with self.lock:
            self.dirs.add(f"job_{job_id}")

    def set_todos(self, job_id: str, todos: list[dict[str, Any]] | None) -> None:
        """The job's current ``todos.yaml`` (None removes it)."""
        with self.lock:
            self.make_workspace(job_id)
            path = f"job_{job_id}/todos.yaml"
            if todos is None:
                self.todos.pop(job_id, None)
                self.files.pop(path, None)
            else:
                self.todos[job_id] = [dict(t) for t in todos]
                self.files[path] = File(render_todos(self.todos[job_id]), self.now().timestamp())

    # -- MongoDB -------------------------------------------------------------------------

    def add_audit_entry(self, job_id: str, step_type: str, **doc: Any) -> dict[str, Any]:
        """An ``agent_audit`` document (``step_type``: llm, tool, error, ...); ``step_number``
        and ``timestamp`` default to the next step and now."""
        with self.lock:
            steps = [e["step_number"] for e in self.audit if e["job_id"] == job_id]
            entry = {
                "_id": doc.pop("_id", None) or uuid.uuid4().hex[:24],
                "job_id": job_id,
                "agent_type": doc.pop("agent_type", "defaults"),
                "iteration": doc.pop("iteration", 1),
                "step_number": doc.pop("step_number", max(steps, default=0) + 1),
                "step_type": step_type,
                "node_name": doc.pop("node_name", "agent" if step_type == "llm" else "tools"),
                "timestamp": doc.pop("timestamp", self.now().replace(tzinfo=None).isoformat()),
                **doc,
            }
            self.audit.append(entry)
            return entry

    def add_chat_entry(self, job_id: str, **doc: Any) -> dict[str, Any]:
        with self.lock:
            seq = [e["sequence_number"] for e in self.chat if e["job_id"] == job_id]
            entry = {
                "_id": doc.pop("_id", None) or uuid.uuid4().hex[:24],
                "job_id": job_id,
                "sequence_number": doc.pop("sequence_number", max(seq, default=0) + 1),
                "timestamp": doc.pop("timestamp", self.now().replace(tzinfo=None).isoformat()),
                "input_messages": doc.pop("input_messages", []),
                "response": doc.pop("response", {"content": ""}),
                **doc,
            }
            self.chat.append(entry)
            return entry

    def add_llm_request(self, job_id: str, **doc: Any) -> dict[str, Any]:
        with self.lock:
            entry = {
                "_id": doc.pop("_id", None) or uuid.uuid4().hex[:24],
                "job_id": job_id,
                **doc,
            }
            self.llm_requests[entry["_id"]] = entry
            return entry
