"""Tools of the orchestrator plugin: the state of the system. Job and agent statistics, stuck
jobs, the agents, the expert configurations and the datasources (without their secrets)."""

from __future__ import annotations

import re
from typing import Annotated, Any, Literal

from pydantic import AfterValidator, BaseModel, Field

from gateway import Args, ErrorCode, GatewayError, Tier
from gateway.rest import (
    Failure,
    JsonString,
    RestContext,
    RestTool,
    Route,
    UtcTimestamp,
    decode_json_string,
)

from .backend import COCKPIT
from .bounded import bound
from .masking import credential_keys, mask_connection_url, mask_value
from .params import RESULT_CHARS, MaxChars, NoArgs

AgentStatus = Literal["booting", "ready", "working", "completed", "failed", "offline"]
DatasourceType = Literal["postgresql", "neo4j", "mongodb"]
_COUNTED = ("created", "processing", "completed", "failed", "cancelled")

# --- statistics ---------------------------------------------------------------------------


class JobStats(BaseModel):
    total_jobs: int
    created: int
    processing: int
    pending_review: int
    completed: int
    failed: int
    cancelled: int


def job_stats(data: Any, args: Any) -> Any:
    """The API counts five statuses; ``pending_review`` jobs are only in ``total_jobs``."""
    if not isinstance(data, dict):
        return data
    if "pending_review" not in data:
        counted = sum(v for k in _COUNTED if isinstance(v := data.get(k), int))
        total = data.get("total_jobs")
        if isinstance(total, int):
            data = {**data, "pending_review": max(0, total - counted)}
    return data


class AgentStats(BaseModel):
    total: int
    booting: int
    ready: int
    working: int
    completed: int
    failed: int
    offline: int


# --- stuck jobs -----------------------------------------------------------------------------


class StuckArgs(Args):
    threshold_minutes: int = Field(30, ge=1, le=1440, description="Minutes without an update.")


class StuckJob(BaseModel):
    id: str
    description: str
    status: str
    creator_status: str | None = None
    validator_status: str | None = None
    config_name: str | None = None
    assigned_agent_id: str | None = None
    created_at: UtcTimestamp | None = None
    updated_at: UtcTimestamp | None = None
    pending_requirements: int = 0
    integrated_requirements: int = 0
    stuck_reason: str | None = None
    stuck_component: str | None = Field(None, description="creator, validator or unknown")


class StuckJobs(BaseModel):
    threshold_minutes: int
    count: int
    jobs: list[StuckJob]


def stuck_jobs(data: Any, args: StuckArgs) -> Any:
    if not isinstance(data, list):
        return data
    return {"threshold_minutes": args.threshold_minutes, "count": len(data), "jobs": data}


# --- agents ---------------------------------------------------------------------------------

AGENT_PAGE = 100  # what the API sends by default, and what the tool asks for


class AgentsArgs(Args):
    status: AgentStatus | None = Field(None, description="Only agents in this state.")


class Agent(BaseModel):
    id: str
    config_name: str
    hostname: str | None = None
    pod_ip: str | None = None
    pod_port: int | None = None
    pid: int | None = None
    status: str
    current_job_id: str | None = None
    registered_at: UtcTimestamp | None = None
    last_heartbeat: UtcTimestamp | None = None
    metadata: JsonString = None


class Agents(BaseModel):
    count: int
    has_more: bool = Field(description=f"more than {AGENT_PAGE} agents; filter by status")
    agents: list[Agent]


AGENTS = Route("GET", "/api/agents", query=("limit", "status"), what="the agent list")


async def list_agents(args: AgentsArgs, ctx: RestContext[Any]) -> Agents:
    data = await ctx.send(AGENTS, {"limit": AGENT_PAGE, "status": args.status})
    count = len(data) if isinstance(data, list) else 0
    return ctx.validate(
        Agents,
        {"count": count, "has_more": count >= AGENT_PAGE, "agents": data},
        "the agent list",
    )


# --- experts --------------------------------------------------------------------------------


class ExpertSummary(BaseModel):
    id: str
    display_name: str | None = None
    description: str | None = None
    tags: list[str] = []


class Experts(BaseModel):
    experts: list[ExpertSummary]


def _expert_id(value: str) -> str:
    if not re.fullmatch(r"[A-Za-z0-9_-]{1,64}", value):
        raise ValueError("an expert id is letters, digits, _ and -; list_experts shows them")
    return value


class ExpertArgs(Args):
    expert_id: Annotated[
        str, Field(max_length=64, description="From list_experts."), AfterValidator(_expert_id)
    ]
    max_chars: MaxChars = 20_000


class Expert(ExpertSummary):
    config: dict[str, Any] = Field(description="defaults merged with the expert's own")
    instructions: str | None = None
    truncated_texts: int = Field(description="texts cut to fit; raise max_chars to see more")


class _NoExpert(Exception):
    pass


def _no_expert(failure: Failure) -> BaseException:
    return _NoExpert()


EXPERTS = Route("GET", "/api/experts", what="the expert list")
EXPERT = Route(
    "GET", "/api/experts/{expert_id}", what="expert {expert_id}", status={404: _no_expert}
)


def experts(data: Any, args: NoArgs) -> Any:
    return {"experts": data}


async def get_expert(args: ExpertArgs, ctx: RestContext[Any]) -> Expert:
    try:
        data = await ctx.send(EXPERT, args)
    except _NoExpert:
        known = ctx.validate(
            Experts, experts(await ctx.send(EXPERTS, {}), NoArgs()), "the expert list"
        )
        ids = ", ".join(e.id for e in known.experts) or "none"
        raise GatewayError(
            ErrorCode.NOT_FOUND, f"no expert {args.expert_id!r}; the experts are: {ids}"
        ) from None
    what = EXPERT.describe(dict(args))
    if not isinstance(data, dict):
        return ctx.validate(Expert, data, what)  # the BACKEND_ERROR that names the shape
    shaped = bound(data, budget=args.max_chars, hint="raise max_chars")
    return ctx.validate(Expert, {**shaped.value, "truncated_texts": shaped.truncated}, what)


# --- datasources ----------------------------------------------------------------------------


class DatasourcesArgs(Args):
    type: DatasourceType | None = Field(None, description="Only this kind.")


class Datasource(BaseModel):
    id: str
    name: str
    description: str | None = None
    type: str
    connection_url: str | None = Field(None, description="without user and password")
    credentials: list[str] = Field([], description="names of the stored credentials")
    read_only: bool | None = None
    job_id: str | None = Field(None, description="null: global; else this job's copy")
    created_at: UtcTimestamp | None = None
    updated_at: UtcTimestamp | None = None


class Datasources(BaseModel):
    count: int
    datasources: list[Datasource]


def mask_datasource(row: Any) -> Any:
    """A datasource row without its secrets (the API sends them in clear text)."""
    if not isinstance(row, dict):
        return row
    out = mask_value({k: v for k, v in row.items() if k not in ("connection_url", "credentials")})
    if isinstance(row.get("connection_url"), str):
        out["connection_url"] = mask_connection_url(row["connection_url"])
    out["credentials"] = credential_keys(decode_json_string(row.get("credentials")))
    return out


def datasources(data: Any, args: DatasourcesArgs) -> Any:
    if not isinstance(data, list):
        return data
    return {"count": len(data), "datasources": [mask_datasource(d) for d in data]}


# --- the specs ------------------------------------------------------------------------------


TOOLS = (
    RestTool(
        name="get_job_stats",
        description="Job counts by status.",
        input_model=NoArgs,
        output_model=JobStats,
        tier=Tier.READ,
        backend=COCKPIT,
        route=Route("GET", "/api/stats/jobs", what="job stats"),
        shape=job_stats,
    ),
    RestTool(
        name="get_agent_stats",
        description="Agent counts by status.",
        input_model=NoArgs,
        output_model=AgentStats,
        tier=Tier.READ,
        backend=COCKPIT,
        route=Route("GET", "/api/stats/agents", what="agent stats"),
    ),
    RestTool(
        name="get_stuck_jobs",
        description="Processing jobs not updated within the threshold, with the likely cause.",
        input_model=StuckArgs,
        output_model=StuckJobs,
        tier=Tier.READ,
        backend=COCKPIT,
        route=Route("GET", "/api/stats/stuck", query=("threshold_minutes",), what="stuck jobs"),
        shape=stuck_jobs,
    ),
    RestTool(
        name="list_agents",
        description="Registered agents, latest heartbeat first, with their current job.",
        input_model=AgentsArgs,
        output_model=Agents,
        tier=Tier.READ,
        backend=COCKPIT,
        run=list_agents,
    ),
    RestTool(
        name="list_experts",
        description="Expert configurations a job can use (create_job's config_name).",
        input_model=NoArgs,
        output_model=Experts,
        tier=Tier.READ,
        backend=COCKPIT,
        route=EXPERTS,
        shape=experts,
    ),
    RestTool(
        name="get_expert",
        description="An expert configuration: merged config and instructions.",
        input_model=ExpertArgs,
        output_model=Expert,
        tier=Tier.READ,
        backend=COCKPIT,
        run=get_expert,
        max_result_chars=RESULT_CHARS,
    ),
    RestTool(
        name="list_datasources",
        description="Datasources, global and job-scoped; passwords are never shown.",
        input_model=DatasourcesArgs,
        output_model=Datasources,
        tier=Tier.READ,
        backend=COCKPIT,
        route=Route("GET", "/api/datasources", query=("type",), what="list datasources"),
        shape=datasources,
    ),
)
