"""Inside a job: its workspace (overview, any file by path, todos), requirements and progress.

The files live in :attr:`State.files`, keyed by their path under the workspace root
(``job_<id>/plan.md``); ``todos.yaml`` is rendered there from :attr:`State.todos`. The sandbox reproduces the API's: the path is joined to the job folder,
normalized, and accepted when the result *starts with* the job folder's path as a string. So
``../job_<id>-old/notes.md`` (a sibling folder sharing the prefix) is served, while
``../../etc/passwd`` and ``/etc/passwd`` (which replaces the base, as ``Path`` joins do) are not.
"""

from __future__ import annotations

import posixpath
import re
from typing import Any

from pydantic import Field

from .api import ApiError, Call, Query, Router
from .jobs import job_or_404
from .model import iso_offset, iso_z, parse_uuid
from .state import State

router = Router()

ROOT = "/workspace"  # where WORKSPACE_PATH points, for the prefix test
OVERVIEW_FILES = ("workspace.md", "plan.md", "todos.yaml")
OVERVIEW_CHARS = 2000
ARCHIVE_NAME = re.compile(r"^todos_.*\.md$")


def has_workspace(state: State, job_id: str) -> bool:
    return f"job_{job_id}" in state.dirs


def sandboxed(state: State, job_id: str, path: str) -> str | None:
    """The file's content if the API's sandbox lets ``path`` through and the file exists."""
    if not has_workspace(state, job_id):
        return None
    base = f"{ROOT}/job_{job_id}"
    target = posixpath.normpath(posixpath.join(base, path))
    if not target.startswith(base):
        return None
    file = state.files.get(target[len(ROOT) + 1 :])
    return None if file is None else file.content


def current_todos(state: State, job_id: str) -> dict[str, Any] | None:
    if not has_workspace(state, job_id) or job_id not in state.todos:
        return None
    return {"todos": state.todos[job_id], "source": "todos.yaml", "is_current": True}


def archives(state: State, job_id: str) -> list[dict[str, Any]]:
    if not has_workspace(state, job_id):
        return []
    prefix = f"job_{job_id}/archive/"
    found = []
    for path in state.files:
        name = path[len(prefix) :] if path.startswith(prefix) else ""
        if "/" in name or not ARCHIVE_NAME.match(name):
            continue
        parts = name[: -len(".md")].split("_")
        timestamp = phase = None
        if len(parts) >= 3 and len(parts[-2]) == 8 and len(parts[-1]) == 6:
            d, t = parts[-2], parts[-1]
            timestamp = f"{d[:4]}-{d[4:6]}-{d[6:]}T{t[:2]}:{t[2:4]}:{t[4:]}"
            phase = "_".join(parts[1:-2]) or None
        found.append(
            {
                "filename": name,
                "phase_name": phase or name[: -len(".md")].replace("todos_", ""),
                "timestamp": timestamp,
                "path": f"archive/{name}",
            }
        )
    return sorted(found, key=lambda a: a["timestamp"] or "", reverse=True)


def _clip(text: str | None) -> str | None:
    if not text:
        return None
    if len(text) > OVERVIEW_CHARS:
        return text[:OVERVIEW_CHARS] + "\n\n... (truncated)"
    return text


@router.get("/api/jobs/{job_id}/workspace")
def overview(call: Call) -> Any:
    state, job_id = call.state, call.path["job_id"]
    result: dict[str, Any] = {
        "job_id": job_id,
        "has_workspace": has_workspace(state, job_id),
        "files": [],
        "workspace_md": None,
        "plan_md": None,
        "todos": None,
        "archive_count": 0,
    }
    if not result["has_workspace"]:
        return result
    for name in OVERVIEW_FILES:
        file = state.files.get(f"job_{job_id}/{name}")
        if file is not None:
            size = len(file.content.encode())
            result["files"].append({"name": name, "size": size, "modified": file.modified})
    result["workspace_md"] = _clip(sandboxed(state, job_id, "workspace.md"))
    result["plan_md"] = _clip(sandboxed(state, job_id, "plan.md"))
    result["todos"] = current_todos(state, job_id)
    result["archive_count"] = len(archives(state, job_id))
    return result


@router.get("/api/jobs/{job_id}/workspace/{path:path}")
def workspace_file(call: Call) -> Any:
    job_id, path = call.path["job_id"], call.path["path"]
    content = sandboxed(call.state, job_id, path)
    if content is None:
        raise ApiError(404, f"File '{path}' not found in workspace for job '{job_id}'")
    return {"path": path, "content": content}


@router.get("/api/jobs/{job_id}/todos")
def all_todos(call: Call) -> Any:
    state, job_id = call.state, call.path["job_id"]
    return {
        "job_id": job_id,
        "current": current_todos(state, job_id),
        "archives": archives(state, job_id),
        "has_workspace": has_workspace(state, job_id),
    }


@router.get("/api/jobs/{job_id}/todos/current")
def todos_now(call: Call) -> Any:
    job_id = call.path["job_id"]
    todos = current_todos(call.state, job_id)
    if todos is None:
        raise ApiError(404, f"No current todos found for job '{job_id}'")
    return todos


@router.get("/api/jobs/{job_id}/todos/archives")
def todo_archives(call: Call) -> Any:
    return archives(call.state, call.path["job_id"])


# -- requirements and progress ------------------------------------------------------------


class Requirements(Query):
    status: str | None = None
    limit: int = Field(100, ge=1, le=1000)
    offset: int = Field(0, ge=0)


def requirement_row(req: Any) -> dict[str, Any]:
    return {
        "id": req.id,
        "requirement_id": req.requirement_id,
        "name": req.name,
        "text": req.text,
        "type": req.type,
        "priority": req.priority,
        "status": req.status,
        "source_document": req.source_document,
        "gobd_relevant": req.gobd_relevant,
        "gdpr_relevant": req.gdpr_relevant,
        "quality_score": req.quality_score,
        "fulfillment_status": req.fulfillment_status,
        "neo4j_id": req.neo4j_id,
        "created_at": iso_z(req.created_at),
        "updated_at": iso_z(req.updated_at),
    }


@router.get("/api/jobs/{job_id}/requirements", query=Requirements)
def job_requirements(call: Call) -> Any:
    q: Requirements = call.query
    key = parse_uuid(call.path["job_id"])
    if key is None:  # the API's own UUID check answers before paging is applied
        return {"requirements": [], "total": 0}
    rows = sorted(
        (r for r in call.state.requirements.values() if r.job_id == key),
        key=lambda r: r.created_at,
    )
    if q.status:
        rows = [r for r in rows if r.status == q.status]
    page = rows[q.offset : q.offset + q.limit]
    return {
        "requirements": [requirement_row(r) for r in page],
        "total": len(rows),
        "limit": q.limit,
        "offset": q.offset,
    }


REQUIREMENT_STATES = ("pending", "validating", "integrated", "rejected", "failed")


@router.get("/api/jobs/{job_id}/progress")
def job_progress(call: Call) -> Any:
    state = call.state
    job = job_or_404(state, call.path["job_id"])
    reqs = [r for r in state.requirements.values() if r.job_id == job.id]
    counts = {"total": len(reqs)} | {
        s: sum(r.status == s for r in reqs) for s in REQUIREMENT_STATES
    }
    processed = counts["integrated"] + counts["rejected"]
    total = counts["total"]
    elapsed = (state.now() - job.created_at).total_seconds()
    eta = (total - processed) * elapsed / processed if 0 < processed < total else None
    return {
        "job_id": job.id,
        "status": job.status,
        "creator_status": job.creator_status,
        "validator_status": job.validator_status,
        "requirements": counts,
        "progress_percent": round(processed / total * 100, 1) if total else 0,
        "elapsed_seconds": elapsed,
        "eta_seconds": eta,
        "created_at": iso_offset(job.created_at),
        "updated_at": iso_offset(job.updated_at),
        "completed_at": iso_offset(job.completed_at),
    }
