"""Tools of the orchestrator plugin: the agents' history, kept in the orchestrator's MongoDB.

``get_audit_trail``, ``get_chat_history``, ``get_graph_changes`` and ``get_llm_request`` here;
``search_audit`` pages through the trail in :mod:`.search`. Without MongoDB every one of them
answers ``BACKEND_UNAVAILABLE`` (see :mod:`.mongo`), never an empty success. Entries are raw
documents of any size: they are typed where the API's code fixes their fields, timestamps are
UTC, and the texts of a result are cut to fit Claude Code (:mod:`.bounded`).
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Annotated, Any, Literal

from pydantic import AfterValidator, BaseModel, ConfigDict, Field

from gateway import Args, Tier
from gateway.rest import RestTool, Route

from .backend import COCKPIT, JobId
from .bounded import bound, bound_items, size_of
from .mongo import MONGO_STATUS, MongoTime, check_envelope, document
from .params import RESULT_CHARS, MaxChars, Page, PageSize

PAGE_HINT = "ask for fewer per page (page_size)"
DOC_HINT = "raise max_chars"

# --- the audit trail and the chat history ---------------------------------------------------


class ChatArgs(Args):
    job_id: JobId
    page: Page = 1
    page_size: PageSize = 20


class AuditArgs(ChatArgs):
    filter: Literal["all", "messages", "tools", "errors"] = Field(
        "all", description="messages: LLM steps; tools: tool calls."
    )


class AuditEntry(BaseModel):
    """One agent step (an ``agent_audit`` document); step data (``tool``, ``result``,
    ``content``, ``error``, ``metadata``, …) as the agent recorded it."""

    model_config = ConfigDict(extra="allow")
    id: str
    step_number: int | None = None
    step_type: str | None = Field(None, description="llm, tool, error, …")
    timestamp: MongoTime | None = None
    agent_type: str | None = None
    iteration: int | None = None
    node_name: str | None = None
    phase: str | None = None
    phase_number: int | None = None
    latency_ms: float | None = None


class ChatEntry(BaseModel):
    """One conversation turn (a ``chat_history`` document)."""

    model_config = ConfigDict(extra="allow")
    id: str
    sequence_number: int | None = None
    turn_number: int | None = None
    timestamp: MongoTime | None = None
    phase: str | None = None
    input_messages: list[dict[str, Any]] = []
    response: dict[str, Any] | None = None
    reasoning: str | None = None


class _Page(BaseModel):
    job_id: str
    page: int
    page_size: int
    total: int
    has_more: bool
    next_page: int | None
    truncated_texts: int = Field(description=f"texts cut to fit; {PAGE_HINT} to see more")
    omitted_entries: int = Field(
        0,
        description="entries at the end of this page left out to fit; ask for a smaller page_size",
    )


class AuditPage(_Page):
    entries: list[AuditEntry]


class ChatPage(_Page):
    entries: list[ChatEntry]


AUDIT = Route(
    "GET",
    "/api/jobs/{job_id}/audit",
    query=("page", "page_size", "filter"),
    rename={"page_size": "pageSize"},
    what="the audit trail of job {job_id}",
)
CHAT = Route(
    "GET",
    "/api/jobs/{job_id}/chat",
    query=("page", "page_size"),
    rename={"page_size": "pageSize"},
    what="the chat history of job {job_id}",
)


def paged_entries(route: Route) -> Callable[[Any, ChatArgs], dict[str, Any]]:
    """The paging fields and the bounded entries of an audit or chat answer of ``route``."""

    def shape(data: Any, args: ChatArgs) -> dict[str, Any]:
        page = check_envelope(data, route.describe(dict(args)))
        shaped = bound_items([document(e) for e in page.entries], hint=PAGE_HINT)
        return {
            "job_id": args.job_id,
            "page": page.page,
            "page_size": page.page_size or args.page_size,
            "total": page.total,
            "has_more": page.has_more,
            "next_page": page.page + 1 if page.has_more else None,
            "truncated_texts": shaped.truncated,
            "omitted_entries": shaped.omitted,
            "entries": shaped.items,
        }

    return shape


# --- graph changes ----------------------------------------------------------------------------


class DocArgs(Args):
    job_id: JobId
    max_chars: MaxChars = 20_000


class TimeRange(BaseModel):
    start: MongoTime | None = None
    end: MongoTime | None = None


class GraphSummary(BaseModel):
    model_config = ConfigDict(extra="allow")
    total_tool_calls: int = 0
    graph_tool_calls: int = 0
    nodes_created: int = 0
    nodes_deleted: int = 0
    nodes_modified: int = 0
    relationships_created: int = 0
    relationships_deleted: int = 0


class GraphDelta(BaseModel):
    """One graph-changing tool call: its Cypher and what it changed."""

    model_config = ConfigDict(extra="allow")
    timestamp: MongoTime | None = None
    tool_call_index: int | None = None
    step_number: int | None = None
    tool_call_id: str | None = None
    cypher_query: str | None = None
    changes: dict[str, Any] = {}


class GraphSnapshot(BaseModel):
    model_config = ConfigDict(extra="allow")
    timestamp: MongoTime | None = None
    tool_call_index: int | None = None
    nodes: Any = None
    relationships: Any = None


class GraphChanges(BaseModel):
    job_id: str
    time_range: TimeRange | None = None
    summary: GraphSummary
    deltas: list[GraphDelta]
    snapshots: list[GraphSnapshot]
    truncated_texts: int = Field(description=f"texts cut to fit; {DOC_HINT} to see more")
    omitted_deltas: int = Field(0, description=f"last deltas left out to fit; {DOC_HINT}")
    omitted_snapshots: int = Field(0, description=f"earliest snapshots left out; {DOC_HINT}")


_CAMEL = re.compile(r"(?<=[a-z0-9])([A-Z])")
# Graph content: node and property names are the agent's data, not the API's field names.
_OPAQUE = frozenset({"nodes", "relationships", "matchedVariables", "matched_variables"})


def snake_keys(value: Any) -> Any:
    """The API's camelCase keys (``toolCallIndex``) as snake_case, graph content untouched."""
    if isinstance(value, dict):
        out = {}
        for key, item in value.items():
            out[_CAMEL.sub(r"_\1", key).lower()] = item if key in _OPAQUE else snake_keys(item)
        return out
    if isinstance(value, list):
        return [snake_keys(v) for v in value]
    return value


def _list(value: Any) -> list[Any]:
    return value if isinstance(value, list) else []


GRAPH_CHANGES = Route(
    "GET",
    "/api/graph/changes/{job_id}",
    what="the graph changes of job {job_id}",
    status=MONGO_STATUS,
)


def graph_changes(data: Any, args: DocArgs) -> Any:
    if not isinstance(data, dict):
        return data  # validation names the shape: a BACKEND_ERROR
    doc = snake_keys(data)
    shaped = bound(doc, budget=args.max_chars, hint=DOC_HINT)
    out = {
        "job_id": doc.get("job_id") or args.job_id,
        "time_range": doc.get("time_range"),
        "summary": doc.get("summary") or {},
        "deltas": _list(shaped.value.get("deltas")),
        "snapshots": _list(shaped.value.get("snapshots")),
        "truncated_texts": shaped.truncated,
    }
    if size_of(out) > args.max_chars * 1.1:
        # Graph states are many small values that no cut of texts shrinks: keep the first
        # deltas and the latest snapshots that fit, each in half of the budget at most.
        half = args.max_chars // 2
        latest = bound_items(
            _list(doc.get("snapshots"))[::-1], hint=DOC_HINT, budget=half, cap=half
        )
        room = args.max_chars - size_of(latest.items) - 500
        first = bound_items(_list(doc.get("deltas")), hint=DOC_HINT, budget=room, cap=room)
        out.update(
            deltas=first.items,
            snapshots=latest.items[::-1],
            truncated_texts=first.truncated + latest.truncated,
            omitted_deltas=first.omitted,
            omitted_snapshots=latest.omitted,
        )
    return out


# --- one LLM request ----------------------------------------------------------------------


def _object_id(value: str) -> str:
    if not re.fullmatch(r"[0-9a-fA-F]{24}", value):
        raise ValueError("must be a 24-hex MongoDB id, as in get_audit_trail entries")
    return value.lower()


class LlmRequestArgs(Args):
    doc_id: Annotated[
        str, Field(max_length=24, description="24-hex document id."), AfterValidator(_object_id)
    ]
    max_chars: MaxChars = 20_000


class TokenUsage(BaseModel):
    model_config = ConfigDict(extra="allow")
    prompt_tokens: int | None = None
    completion_tokens: int | None = None
    reasoning_tokens: int | None = None


class LlmRequest(BaseModel):
    """One LLM call of an agent: the messages and tools it sent, the model's response."""

    model_config = ConfigDict(extra="allow")
    id: str
    job_id: str | None = None
    model: str | None = None
    timestamp: MongoTime | None = None
    iteration: int | None = None
    latency_ms: float | None = None
    token_usage: TokenUsage | None = None
    request: dict[str, Any] | None = None
    response: dict[str, Any] | None = None
    truncated_texts: int = Field(description=f"texts cut to fit; {DOC_HINT} to see more")
    omitted_messages: int = Field(0, description=f"earliest messages left out; {DOC_HINT}")


LLM_REQUEST = Route(
    "GET",
    "/api/requests/{doc_id}",
    what="LLM request {doc_id}",
    status={
        **MONGO_STATUS,
        404: "no LLM request {doc_id}; the ids come from get_audit_trail entries",
    },
)


def llm_request(data: Any, args: LlmRequestArgs) -> Any:
    if not isinstance(data, dict):
        return data  # validation names the shape: a BACKEND_ERROR
    doc = document(data, drop=())
    metrics = doc.get("metrics")
    if isinstance(metrics, dict) and "token_usage" in metrics:
        doc["token_usage"] = metrics["token_usage"]
        rest = {k: v for k, v in metrics.items() if k != "token_usage"}
        if rest:
            doc["metrics"] = rest
        else:
            doc.pop("metrics")
    shaped = bound(doc, budget=args.max_chars, hint=DOC_HINT)
    out = {**shaped.value, "truncated_texts": shaped.truncated}
    request = doc.get("request")
    if size_of(out) > args.max_chars * 1.1 and isinstance(request, dict):
        # A long conversation is many messages no cut of texts shrinks enough: keep the latest.
        messages = _list(request.get("messages"))
        rest = {**shaped.value, "request": {**shaped.value["request"], "messages": []}}
        room = args.max_chars - size_of(rest)
        latest = bound_items(messages[::-1], hint=DOC_HINT, budget=room, cap=room)
        rest["request"]["messages"] = latest.items[::-1]
        out = {**rest, "truncated_texts": latest.truncated, "omitted_messages": latest.omitted}
    return out


# --- the specs ------------------------------------------------------------------------------

TOOLS = (
    RestTool(
        name="get_audit_trail",
        description="A job's agent steps (LLM calls, tool calls, errors) in order, a page at a "
        "time.",
        input_model=AuditArgs,
        output_model=AuditPage,
        tier=Tier.READ,
        backend=COCKPIT,
        route=AUDIT,
        shape=paged_entries(AUDIT),
        max_result_chars=RESULT_CHARS,
    ),
    RestTool(
        name="get_chat_history",
        description="A job's conversation turns (input messages, response), a page at a time.",
        input_model=ChatArgs,
        output_model=ChatPage,
        tier=Tier.READ,
        backend=COCKPIT,
        route=CHAT,
        shape=paged_entries(CHAT),
        max_result_chars=RESULT_CHARS,
    ),
    RestTool(
        name="get_graph_changes",
        description="The Neo4j changes a job's agent made: Cypher per tool call, counts, "
        "snapshots.",
        input_model=DocArgs,
        output_model=GraphChanges,
        tier=Tier.READ,
        backend=COCKPIT,
        route=GRAPH_CHANGES,
        shape=graph_changes,
        max_result_chars=RESULT_CHARS,
    ),
    RestTool(
        name="get_llm_request",
        description="One LLM call of an agent in full: messages, tools, response, token usage.",
        input_model=LlmRequestArgs,
        output_model=LlmRequest,
        tier=Tier.READ,
        backend=COCKPIT,
        route=LLM_REQUEST,
        shape=llm_request,
        max_result_chars=RESULT_CHARS,
    ),
)
