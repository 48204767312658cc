"""Monitoring and database inspection: job/agent statistics, stuck jobs, agents, experts,
datasources, and the table browser over the six allowed tables.

Rows come from the state and are rendered like the API's: timestamps with ``Z``, JSONB columns
as JSON-encoded strings, ``bytea`` as ``"<binary: N bytes>"``. The table browser orders rows as
the API does (newest first by ``created_at``/``registered_at``, else by ``id`` descending) and
pages with ``page``/``pageSize``, ``page=-1`` meaning the last page.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from datetime import timedelta
from typing import Any

from pydantic import Field

from .api import ApiError, Call, Query, Router, not_found, sql_uuid
from .jobs import find_agent
from .model import AGENT_STATUSES, Agent, Datasource, iso_z, jsonb_text, parse_uuid
from .state import State

router = Router()


@router.get("/api/stats/jobs")
def job_stats(call: Call) -> Any:
    jobs = list(call.state.jobs.values())
    counts = {
        s: sum(j.status == s for j in jobs)
        for s in ("created", "processing", "completed", "failed", "cancelled")
    }
    return {"total_jobs": len(jobs), **counts}  # no pending_review bucket, as in the API


@router.get("/api/stats/agents")
def agent_stats(call: Call) -> Any:
    agents = list(call.state.agents.values())
    return {"total": len(agents)} | {s: sum(a.status == s for a in agents) for s in AGENT_STATUSES}


class Stuck(Query):
    threshold_minutes: int = Field(60, ge=1, le=1440)


@router.get("/api/stats/stuck", query=Stuck)
def stuck_jobs(call: Call) -> Any:
    state = call.state
    cutoff = state.now() - timedelta(minutes=call.query.threshold_minutes)
    stuck = sorted(
        (j for j in state.jobs.values() if j.status == "processing" and j.updated_at < cutoff),
        key=lambda j: j.updated_at,
    )
    out = []
    for job in stuck:
        reqs = [r for r in state.requirements.values() if r.job_id == job.id]
        pending = sum(r.status == "pending" for r in reqs)
        integrated = sum(r.status == "integrated" for r in reqs)
        if job.creator_status == "processing" and integrated == 0:
            reason, component = "Creator not producing requirements", "creator"
        elif job.creator_status == "completed" and pending > 0:
            reason, component = (
                f"Validator not processing {pending} pending requirements",
                "validator",
            )
        else:
            reason, component = "No recent activity", "unknown"
        out.append(
            {
                "id": job.id,
                "description": job.description,
                "status": job.status,
                "creator_status": job.creator_status,
                "validator_status": job.validator_status,
                "config_name": job.config_name,
                "assigned_agent_id": job.assigned_agent_id,
                "created_at": iso_z(job.created_at),
                "updated_at": iso_z(job.updated_at),
                "pending_requirements": pending,
                "integrated_requirements": integrated,
                "stuck_reason": reason,
                "stuck_component": component,
            }
        )
    return out


def agent_row(agent: Agent) -> dict[str, Any]:
    return {
        "id": agent.id,
        "config_name": agent.config_name,
        "hostname": agent.hostname,
        "pod_ip": agent.pod_ip,
        "pod_port": agent.pod_port,
        "pid": agent.pid,
        "status": agent.status,
        "current_job_id": agent.current_job_id,
        "registered_at": iso_z(agent.registered_at),
        "last_heartbeat": iso_z(agent.last_heartbeat),
        "metadata": jsonb_text(agent.metadata),
    }


class ListAgents(Query):
    status: str | None = None
    limit: int = Field(100, ge=1, le=500)


@router.get("/api/agents", query=ListAgents)
def list_agents(call: Call) -> Any:
    agents = sorted(call.state.agents.values(), key=lambda a: a.last_heartbeat, reverse=True)
    if call.query.status:
        agents = [a for a in agents if a.status == call.query.status]
    return [agent_row(a) for a in agents[: call.query.limit]]


@router.get("/api/agents/{agent_id}")
def get_agent(call: Call) -> Any:
    agent = find_agent(call.state, call.path["agent_id"])
    if agent is None:
        raise not_found(f"Agent '{call.path['agent_id']}'")
    return agent_row(agent)


EXPERT_SUMMARY = ("id", "display_name", "description", "icon", "color", "tags")


@router.get("/api/experts")
def list_experts(call: Call) -> Any:
    return [{k: e[k] for k in EXPERT_SUMMARY} for e in call.state.experts]


@router.get("/api/experts/{expert_id}")
def get_expert(call: Call) -> Any:
    expert_id = call.path["expert_id"]
    for expert in call.state.experts:
        if expert["id"] == expert_id:
            return expert
    raise ApiError(404, f"Expert not found: {expert_id}")


def datasource_row(ds: Datasource) -> dict[str, Any]:
    return {
        "id": ds.id,
        "name": ds.name,
        "description": ds.description,
        "type": ds.type,
        "connection_url": ds.connection_url,  # in clear text, password included, as the API does
        "credentials": jsonb_text(ds.credentials),
        "read_only": ds.read_only,
        "job_id": ds.job_id,
        "created_at": iso_z(ds.created_at),
        "updated_at": iso_z(ds.updated_at),
    }


class ListDatasources(Query):
    job_id: str | None = None
    type: str | None = None
    limit: int = Field(100, ge=1, le=500)


@router.get("/api/datasources", query=ListDatasources)
def list_datasources(call: Call) -> Any:
    q: ListDatasources = call.query
    rows = sorted(call.state.datasources.values(), key=lambda d: d.created_at, reverse=True)
    if q.job_id == "global":
        rows = [d for d in rows if d.job_id is None]
    elif q.job_id:  # compared as $1::uuid: a malformed id is asyncpg's 500
        key = sql_uuid(q.job_id)
        rows = [d for d in rows if d.job_id == key]
    if q.type:
        rows = [d for d in rows if d.type == q.type]
    return [datasource_row(d) for d in rows[: q.limit]]


@router.get("/api/datasources/{datasource_id}")
def get_datasource(call: Call) -> Any:
    ds_id = call.path["datasource_id"]
    key = parse_uuid(ds_id)
    ds = call.state.datasources.get(key) if key else None
    if ds is None:
        raise not_found(f"Datasource '{ds_id}'")
    return datasource_row(ds)


# -- the table browser -----------------------------------------------------------------------

# (column, type, nullable) as information_schema reports them through the API's type map.
S, N, B, D, J, X = "string", "number", "boolean", "date", "json", "binary"
COLUMNS: dict[str, list[tuple[str, str, bool]]] = {
    "agents": [
        ("id", S, False),
        ("config_name", S, False),
        ("hostname", S, True),
        ("pod_ip", S, True),
        ("pod_port", N, True),
        ("pid", N, True),
        ("status", S, False),
        ("current_job_id", S, True),
        ("registered_at", D, True),
        ("last_heartbeat", D, True),
        ("metadata", J, True),
    ],
    "citations": [
        ("id", N, False),
        ("job_id", S, False),
        ("claim", S, False),
        ("verbatim_quote", S, True),
        ("quote_context", S, False),
        ("quote_language", S, True),
        ("relevance_reasoning", S, True),
        ("confidence", S, True),
        ("extraction_method", S, True),
        ("source_id", N, False),
        ("locator", J, False),
        ("verification_status", S, True),
        ("verification_notes", S, True),
        ("similarity_score", N, True),
        ("matched_location", J, True),
        ("created_at", D, False),
        ("created_by", S, True),
    ],
    "datasources": [
        ("id", S, False),
        ("name", S, False),
        ("description", S, True),
        ("type", S, False),
        ("connection_url", S, False),
        ("credentials", J, True),
        ("read_only", B, False),
        ("job_id", S, True),
        ("created_at", D, True),
        ("updated_at", D, True),
    ],
    "jobs": [
        ("id", S, False),
        ("description", S, False),
        ("document_path", S, True),
        ("document_content", X, True),
        ("context", J, True),
        ("status", S, False),
        ("creator_status", S, True),
        ("validator_status", S, True),
        ("created_at", D, True),
        ("updated_at", D, True),
        ("completed_at", D, True),
        ("error_message", S, True),
        ("error_details", J, True),
        ("total_tokens_used", N, True),
        ("total_requests", N, True),
        ("config_name", S, True),
        ("config_override", J, True),
        ("assigned_agent_id", S, True),
    ],
    "requirements": [
        ("id", S, False),
        ("job_id", S, False),
        ("requirement_id", S, True),
        ("name", S, True),
        ("text", S, False),
        ("type", S, True),
        ("priority", S, True),
        ("source_document", S, True),
        ("source_location", J, True),
        ("gobd_relevant", B, True),
        ("gdpr_relevant", B, True),
        ("citations", J, True),
        ("reasoning", S, True),
        ("research_notes", S, True),
        ("quality_score", N, True),
        ("quality_class", S, True),
        ("iso_29148_evaluation", J, True),
        ("fulfillment_status", S, True),
        ("fulfillment_justification", S, True),
        ("found_model_elements", J, True),
        ("attribute_quality_assessment", J, True),
        ("neo4j_id", S, True),
        ("graph_query", S, True),
        ("recommendations", S, True),
        ("validation_result", J, True),
        ("rejection_reason", S, True),
        ("status", S, False),
        ("retry_count", N, True),
        ("last_error", S, True),
        ("created_at", D, True),
        ("updated_at", D, True),
        ("validated_at", D, True),
        ("tags", J, True),
    ],
    "sources": [
        ("id", N, False),
        ("type", S, False),
        ("identifier", S, False),
        ("name", S, False),
        ("version", S, True),
        ("content", S, False),
        ("content_hash", S, True),
        ("metadata", J, True),
        ("created_at", D, False),
    ],
}
ORDER_BY = {
    "jobs": "created_at",
    "requirements": "created_at",
    "citations": "created_at",
    "agents": "registered_at",
}


def _table_rows(state: State, table: str) -> list[Any]:
    rows: dict[str, Callable[[], list[Any]]] = {
        "agents": lambda: list(state.agents.values()),
        "citations": lambda: list(state.citations.values()),
        "datasources": lambda: list(state.datasources.values()),
        "jobs": lambda: list(state.jobs.values()),
        "requirements": lambda: list(state.requirements.values()),
        "sources": lambda: list(state.sources.values()),
    }
    items = rows[table]()
    order = ORDER_BY.get(table, "id")
    return sorted(items, key=lambda row: getattr(row, order), reverse=True)


def _cell(kind: str, value: Any) -> Any:
    if value is None:
        return None
    if kind == J:
        return jsonb_text(value)
    if kind == D:
        return iso_z(value)
    if kind == X:
        return f"<binary: {len(value)} bytes>"
    return value


def render_row(table: str, row: Any) -> dict[str, Any]:
    # Read the fields in place: dataclasses.asdict deep-copies every value first, which made
    # rendering a 500-row page most of what a table test cost. The page is serialized under
    # the state's lock, so nothing changes a value meanwhile.
    return {name: _cell(kind, getattr(row, name, None)) for name, kind, _ in COLUMNS[table]}


def schema(table: str) -> list[dict[str, Any]]:
    return [{"name": n, "type": t, "nullable": null} for n, t, null in COLUMNS[table]]


def _allowed(name: str) -> str:
    if name not in COLUMNS:
        raise ApiError(404, f"Table '{name}' not found")
    return name


@router.get("/api/tables")
def list_tables(call: Call) -> Any:
    return [{"name": t, "rowCount": len(_table_rows(call.state, t))} for t in sorted(COLUMNS)]


class TablePage(Query):
    page: int = Field(1, ge=-1)
    page_size: int = Field(50, ge=1, le=500, alias="pageSize")


@router.get("/api/tables/{table_name}", query=TablePage)
def table_data(call: Call) -> Any:
    table = _allowed(call.path["table_name"])
    rows = _table_rows(call.state, table)
    page, size = call.query.page, call.query.page_size
    if page == -1:
        page = max(1, math.ceil(len(rows) / size))
    offset = (page - 1) * size
    if offset < 0:  # page=0 passes the API's validation and PostgreSQL refuses it
        raise ApiError(500, "OFFSET must not be negative")
    return {
        "columns": schema(table),
        "rows": [render_row(table, r) for r in rows[offset : offset + size]],
        "total": len(rows),
        "page": page,
        "pageSize": size,
    }


@router.get("/api/tables/{table_name}/schema")
def table_schema(call: Call) -> Any:
    return schema(_allowed(call.path["table_name"]))
