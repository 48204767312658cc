"""The MongoDB-backed endpoints: audit trail, chat history, graph changes, LLM requests.

Without MongoDB (``State.mongo`` False, as recorded) the audit and chat endpoints answer 200 with
empty entries and ``error: "MongoDB not available"``, the time range is ``null``, and graph changes
and LLM requests are 503. With MongoDB they serve the seeded documents in the shapes the API's
code returns: raw documents with ``_id`` as a string, pages of ``page``/``pageSize`` with
``page=-1`` for the last page and ``hasMore``.
"""

from __future__ import annotations

import math
import re
from typing import Any, Literal

from pydantic import Field

from .api import ApiError, Call, Query, Router

router = Router()

NO_MONGO = "MongoDB not available"
STEP_TYPES = {"all": None, "messages": "llm", "tools": "tool", "errors": "error"}
OBJECT_ID = re.compile(r"^[0-9a-f]{24}$")


class AuditPage(Query):
    page: int = Field(1, ge=-1)
    page_size: int = Field(50, ge=1, le=200, alias="pageSize")
    filter: Literal["all", "messages", "tools", "errors"] = "all"


class ChatPage(Query):
    page: int = Field(1, ge=-1)
    page_size: int = Field(50, ge=1, le=200, alias="pageSize")


def _degraded(page: int, size: int) -> dict[str, Any]:
    return {
        "entries": [],
        "total": 0,
        "page": page,
        "pageSize": size,
        "hasMore": False,
        "error": NO_MONGO,
    }


def _paged(docs: list[dict[str, Any]], page: int, size: int) -> dict[str, Any]:
    total = len(docs)
    if page == -1:
        page = max(1, math.ceil(total / size))
    skip = (page - 1) * size
    if skip < 0:  # page=0 passes validation; MongoDB refuses the negative skip
        raise ApiError(500, "skip must be >= 0")
    return {
        "entries": [dict(d) for d in docs[skip : skip + size]],
        "total": total,
        "page": page,
        "pageSize": size,
        "hasMore": skip + size < total,
    }


@router.get("/api/graph/changes/{job_id}")
def graph_changes(call: Call) -> Any:
    if not call.state.mongo:
        raise ApiError(503, NO_MONGO)
    job_id = call.path["job_id"]
    found = call.state.graph_changes.get(job_id)
    if found is not None:
        return found
    zero = (
        "nodesCreated",
        "nodesDeleted",
        "nodesModified",
        "relationshipsCreated",
        "relationshipsDeleted",
    )
    return {
        "jobId": job_id,
        "timeRange": None,
        "summary": {"totalToolCalls": 0, "graphToolCalls": 0} | dict.fromkeys(zero, 0),
        "snapshots": [],
        "deltas": [],
    }


@router.get("/api/jobs/{job_id}/audit", query=AuditPage)
def audit_trail(call: Call) -> Any:
    q: AuditPage = call.query
    if not call.state.mongo:
        return _degraded(q.page, q.page_size)
    step = STEP_TYPES[q.filter]
    docs = [
        e
        for e in call.state.audit
        if e["job_id"] == call.path["job_id"] and (step is None or e["step_type"] == step)
    ]
    docs.sort(key=lambda e: e["step_number"])
    return _paged(docs, q.page, q.page_size)


@router.get("/api/requests/{doc_id}")
def llm_request(call: Call) -> Any:
    if not call.state.mongo:
        raise ApiError(503, NO_MONGO)
    doc_id = call.path["doc_id"]
    doc = call.state.llm_requests.get(doc_id) if OBJECT_ID.match(doc_id) else None
    if doc is None:
        raise ApiError(404, f"Request '{doc_id}' not found")
    return doc


@router.get("/api/jobs/{job_id}/audit/timerange")
def audit_timerange(call: Call) -> Any:
    if not call.state.mongo:
        return None
    docs = sorted(
        (e for e in call.state.audit if e["job_id"] == call.path["job_id"]),
        key=lambda e: e["step_number"],
    )
    if not docs:
        return None
    return {"start": docs[0]["timestamp"] + "Z", "end": docs[-1]["timestamp"] + "Z"}


@router.get("/api/jobs/{job_id}/chat", query=ChatPage)
def chat_history(call: Call) -> Any:
    q: ChatPage = call.query
    if not call.state.mongo:
        return _degraded(q.page, q.page_size)
    docs = sorted(
        (e for e in call.state.chat if e["job_id"] == call.path["job_id"]),
        key=lambda e: e["timestamp"],
    )
    return _paged(docs, q.page, q.page_size)
