"""Tools of the orchestrator plugin: the state of the system. Job and agent statistics, stuck
jobs, the agents, the expert configurations and the datasources (without their secrets)."""

from __future__ import annotations

import re
from typing import Annotated, Any, Literal

from pydantic import AfterValidator, BaseModel, Field

from gateway import ErrorCode, GatewayError, ToolContext, ToolSpec
from gateway.rest import Failure, JsonString, Route, UtcTimestamp, decode_json_string, rest_tool

from .backend import COCKPIT
from .bounded import bound
from .masking import credential_keys, mask_connection_url, mask_value
from .params import RESULT_CHARS, Args, MaxChars, NoArgs, answer_as, read_tool

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


async def list_agents(args: AgentsArgs, ctx: ToolContext[Any]) -> Agents:
    data = await ctx.rest(COCKPIT).request(
        "GET",
        "/api/agents",
        params={"limit": AGENT_PAGE, "status": args.status},
        what="the agent list",
    )
    count = len(data) if isinstance(data, list) else 0
    return answer_as(
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


async def list_experts(args: NoArgs, ctx: ToolContext[Any]) -> Experts:
    data = await ctx.rest(COCKPIT).request("GET", "/api/experts", what="the expert list")
    return answer_as(Experts, {"experts": data}, "the expert list")


async def get_expert(args: ExpertArgs, ctx: ToolContext[Any]) -> Expert:
    api = ctx.rest(COCKPIT)
    try:
        data = await api.request(
            "GET",
            "/api/experts/{expert_id}",
            path_params={"expert_id": args.expert_id},
            status={404: _no_expert},
            what=f"expert {args.expert_id}",
        )
    except _NoExpert:
        known = await list_experts(NoArgs(), ctx)
        ids = ", ".join(e.id for e in known.experts) or "none"
        raise GatewayError(
            ErrorCode.NOT_FOUND, f"no expert {args.expert_id!r}; the experts are: {ids}"
        ) from None
    what = f"expert {args.expert_id}"
    if not isinstance(data, dict):
        return answer_as(Expert, data, what)  # the BACKEND_ERROR that names the shape
    shaped = bound(data, budget=args.max_chars, hint="raise max_chars")
    return answer_as(Expert, {**shaped.value, "truncated_texts": shaped.truncated}, what)


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


def tools() -> list[ToolSpec]:
    def get(
        name: str,
        path: str,
        description: str,
        args: type[BaseModel],
        output: type[BaseModel],
        shape: Any = None,
        query: tuple[str, ...] = (),
    ) -> ToolSpec:
        return rest_tool(
            COCKPIT,
            Route("GET", path, query=query, what=name.removeprefix("get_").replace("_", " ")),
            name=name,
            description=description,
            input_model=args,
            output_model=output,
            shape=shape,
        )

    return [
        get(
            "get_job_stats", "/api/stats/jobs", "Job counts by status.", NoArgs, JobStats, job_stats
        ),
        get("get_agent_stats", "/api/stats/agents", "Agent counts by status.", NoArgs, AgentStats),
        get(
            "get_stuck_jobs",
            "/api/stats/stuck",
            "Processing jobs not updated within the threshold, with the likely cause.",
            StuckArgs,
            StuckJobs,
            stuck_jobs,
            query=("threshold_minutes",),
        ),
        read_tool(
            "list_agents",
            "Registered agents, latest heartbeat first, with their current job.",
            list_agents,
            AgentsArgs,
            Agents,
        ),
        read_tool(
            "list_experts",
            "Expert configurations a job can use (create_job's config_name).",
            list_experts,
            NoArgs,
            Experts,
        ),
        read_tool(
            "get_expert",
            "An expert configuration: merged config and instructions.",
            get_expert,
            ExpertArgs,
            Expert,
            max_result_chars=RESULT_CHARS,
        ),
        get(
            "list_datasources",
            "/api/datasources",
            "Datasources, global and job-scoped; passwords are never shown.",
            DatasourcesArgs,
            Datasources,
            datasources,
            query=("type",),
        ),
    ]
