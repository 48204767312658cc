"""Tools of the orchestrator plugin: inside a job — its frozen result, workspace files and overview, progress and
requirements.

What the gateway adds over the API: workspace paths are checked before any request (the API's
sandbox is a string-prefix test that serves a sibling folder ``job_<id>-old/``; no path the
gateway sends can reach it) and sent one percent-encoded segment at a time; long texts are cut
with a ``[truncated]`` marker that says how much is left and how to read on; an unknown job is
``NOT_FOUND`` where the API answers an empty 200; timestamps are UTC with ``Z``.
"""

from __future__ import annotations

import re
from typing import Annotated, Any, Literal
from urllib.parse import quote

from pydantic import AfterValidator, BaseModel, ConfigDict, Field

from gateway import Args, ErrorCode, GatewayError, Tier
from gateway.rest import (
    OffsetPage,
    RestContext,
    RestTool,
    Route,
    UtcTimestamp,
    gather,
    offset_page,
    truncation_marker,
)

from .backend import COCKPIT, JobId
from .lookup import NO_JOB, read_job
from .models import JobArgs, TodoList

# Claude Code keeps up to 25k tokens of a result; these tools may return up to ~80k characters.
LARGE_RESULT = 100_000


# --- workspace paths ---------------------------------------------------------------------------

_CONTROL = re.compile(r"[\x00-\x1f\x7f-\x9f]")
_ESCAPE = re.compile(r"%[0-9A-Fa-f]{2}")
_DRIVE = re.compile(r"^[A-Za-z]:")


def check_workspace_path(value: str) -> str:
    """A file path relative to the job's workspace, in plain segments: refused are control
    characters, backslashes, percent-escapes (``%2e``, ``%2f``, ``%252e``: the API decodes
    them), absolute paths and ``..``; empty and ``.`` segments are dropped."""
    if _CONTROL.search(value):
        raise ValueError("must not contain control characters")
    if "\\" in value:
        raise ValueError("must use / between folders, not backslashes")
    if _ESCAPE.search(value):
        raise ValueError("must be plain text, without percent-escapes such as %2e or %2f")
    if value.startswith("/") or _DRIVE.match(value):
        raise ValueError("must be relative to the workspace, e.g. archive/notes.md")
    parts = [p for p in value.split("/") if p not in ("", ".")]
    if ".." in parts:
        raise ValueError("must not contain '..': paths stay inside the job's workspace")
    if not parts:
        raise ValueError("must name a file, e.g. workspace.md")
    return "/".join(parts)


WorkspacePath = Annotated[
    str,
    Field(max_length=1024, description="Relative path, e.g. plan.md or archive/x.md."),
    AfterValidator(check_workspace_path),
]


def workspace_url(job_id: str, path: str) -> str:
    """Each segment percent-encoded on its own: the API decodes ``%2F`` into a separator."""
    segments = "/".join(quote(part, safe="") for part in path.split("/"))
    return f"/api/jobs/{quote(job_id, safe='')}/workspace/{segments}"


async def read_workspace_file(ctx: RestContext[Any], job_id: str, path: str) -> str:
    def missing(_: Any) -> GatewayError:
        return GatewayError(
            ErrorCode.NOT_FOUND,
            f"no file {path!r} in the workspace of job {job_id} (or no such job); "
            "get_workspace_overview and get_todos name its files",
        )

    # The path goes out one percent-encoded segment at a time: a route of its own per file.
    url = workspace_url(job_id, path)
    route = Route("GET", url, what="file {path!r} of job {job_id}", status={404: missing})
    return (await ctx.fetch(route, _FileAnswer, {"job_id": job_id, "path": path})).content


class _FileAnswer(BaseModel):
    content: str


# --- get_workspace_file ------------------------------------------------------------------------


class FileArgs(Args):
    job_id: JobId
    path: WorkspacePath
    offset: int = Field(0, ge=0, description="First character to return.")
    max_chars: int = Field(40_000, ge=1, le=80_000, description="Most characters to return.")


class WorkspaceFile(BaseModel):
    job_id: str
    path: str
    content: str = Field(description="ends with a [truncated] line when more follows")
    total_chars: int
    offset: int
    truncated: bool
    next_offset: int | None = Field(description="offset that reads on; null at the end")


async def get_workspace_file(args: FileArgs, ctx: RestContext[Any]) -> WorkspaceFile:
    text = await read_workspace_file(ctx, args.job_id, args.path)
    if args.offset > 0 and args.offset >= len(text):
        raise GatewayError(
            ErrorCode.VALIDATION_ERROR,
            f"offset: {args.offset} is past the end of {args.path!r} ({len(text)} characters)",
        )
    end = min(len(text), args.offset + args.max_chars)
    content = text[args.offset : end]
    more = end < len(text)
    if more:
        hint = f"call again with offset={end}"
        content += "\n" + truncation_marker(len(text) - end, len(text), hint=hint)
    return WorkspaceFile(
        job_id=args.job_id,
        path=args.path,
        content=content,
        total_chars=len(text),
        offset=args.offset,
        truncated=more,
        next_offset=end if more else None,
    )


# --- get_workspace_overview --------------------------------------------------------------------

# How the API cuts workspace.md and plan.md in the overview.
API_PREVIEW_CHARS = 2000
API_MARK = "\n\n... (truncated)"


class OverviewArgs(Args):
    job_id: JobId
    max_chars: int = Field(
        API_PREVIEW_CHARS,
        ge=0,
        le=40_000,
        description="Most characters shown of workspace.md and of plan.md.",
    )


class FileInfo(BaseModel):
    name: str
    size: int = Field(description="bytes")
    modified: UtcTimestamp | None = None


class Overview(BaseModel):
    job_id: str
    has_workspace: bool
    files: list[FileInfo] = Field(default_factory=list)
    workspace_md: str | None = None
    plan_md: str | None = None
    todos: TodoList | None = None
    archive_count: int = 0
    truncated: list[str] = Field(default_factory=list, description="files cut to max_chars")


WORKSPACE = Route("GET", "/api/jobs/{job_id}/workspace", what="the workspace of job {job_id}")


async def get_workspace_overview(args: OverviewArgs, ctx: RestContext[Any]) -> Overview:
    view = await ctx.fetch(WORKSPACE, Overview, args)
    if not view.has_workspace:
        await read_job(ctx, args.job_id)  # the API answers an unknown job the same way
        return view
    sizes = {f.name: f.size for f in view.files}
    texts = {"workspace.md": view.workspace_md, "plan.md": view.plan_md}
    cut_by_api = [n for n, t in texts.items() if t is not None and _api_cut(t)]
    full: dict[str, str | None] = {}
    if args.max_chars > API_PREVIEW_CHARS and cut_by_api:
        # Asked for more than the API's preview: read those files whole, side by side.
        found = await gather([_reader(ctx, args.job_id, n) for n in cut_by_api])
        full = dict(zip(cut_by_api, found, strict=True))
    for name, text in texts.items():
        if text is None:
            continue
        shown, cut = _bounded(name, text, full.get(name), sizes.get(name), args.max_chars)
        if cut:
            view.truncated.append(name)
        if name == "workspace.md":
            view.workspace_md = shown
        else:
            view.plan_md = shown
    return view


def _api_cut(text: str) -> bool:
    return text.endswith(API_MARK) and len(text) == API_PREVIEW_CHARS + len(API_MARK)


def _reader(ctx: RestContext[Any], job_id: str, name: str) -> Any:
    async def read() -> str | None:
        try:
            return await read_workspace_file(ctx, job_id, name)
        except GatewayError:
            return None  # the preview still serves; the marker then counts bytes

    return read


def _bounded(
    name: str, text: str, full: str | None, size: int | None, limit: int
) -> tuple[str, bool]:
    """The text cut to ``limit`` characters with a marker saying what is left out, and
    whether it was cut."""
    how = f"get_workspace_file(path='{name}', offset={{offset}}) or a larger max_chars reads on"
    if full is not None or not _api_cut(text):
        whole = full if full is not None else text
        if len(whole) <= limit:
            return whole, False
        marker = truncation_marker(len(whole) - limit, len(whole), hint=how.format(offset=limit))
        return whole[:limit] + "\n" + marker, True
    # Only the API's preview is known, and the file's size in bytes.
    shown = text[: min(limit, API_PREVIEW_CHARS)]
    omitted = None if size is None else size - len(shown.encode())
    hint = how.format(offset=len(shown))
    return shown + "\n" + truncation_marker(omitted, size, unit="bytes", hint=hint), True


# --- frozen result, progress, requirements -----------------------------------------------------


class Frozen(BaseModel):
    """``output/job_frozen.json`` as the agent wrote it (other fields pass through)."""

    model_config = ConfigDict(extra="allow")

    job_id: str | None = None
    status: str | None = None
    summary: str = ""
    deliverables: list[Any] = Field(default_factory=list)
    confidence: float | None = None
    notes: str | None = None
    timestamp: str | None = Field(None, description="the agent's local time, as written")


class RequirementCounts(BaseModel):
    model_config = ConfigDict(extra="allow")

    total: int = 0
    pending: int = 0
    validating: int = 0
    integrated: int = 0
    rejected: int = 0
    failed: int = 0


class Progress(BaseModel):
    job_id: str
    status: str
    creator_status: str | None = None
    validator_status: str | None = None
    requirements: RequirementCounts
    progress_percent: float
    elapsed_seconds: float | None = None
    eta_seconds: float | None = None
    created_at: UtcTimestamp | None = None
    updated_at: UtcTimestamp | None = None
    completed_at: UtcTimestamp | None = None


RequirementStatus = Literal["pending", "validating", "integrated", "rejected", "failed"]


class RequirementsArgs(Args):
    job_id: JobId
    status: RequirementStatus | None = Field(None, description="Only this validation status.")
    limit: int = Field(100, ge=1, le=100, description="Most requirements to return.")
    offset: int = Field(0, ge=0, description="Requirements to skip.")


class Requirement(BaseModel):
    id: str
    requirement_id: str | None = None
    name: str | None = None
    text: str
    type: str | None = None
    priority: str | None = None
    status: str | None = None
    source_document: str | None = None
    gobd_relevant: bool | None = None
    gdpr_relevant: bool | None = None
    quality_score: float | None = None
    fulfillment_status: str | None = None
    neo4j_id: str | None = None
    created_at: UtcTimestamp | None = None
    updated_at: UtcTimestamp | None = None


class Requirements(OffsetPage):
    job_id: str
    requirements: list[Requirement]


class _RequirementPage(BaseModel):
    requirements: list[Requirement]
    total: int


REQUIREMENTS = Route(
    "GET",
    "/api/jobs/{job_id}/requirements",
    query=("limit", "offset", "status"),
    what="the requirements of job {job_id}",
)


async def get_job_requirements(args: RequirementsArgs, ctx: RestContext[Any]) -> Requirements:
    page = await ctx.fetch(REQUIREMENTS, _RequirementPage, args)
    if page.total == 0:
        await read_job(ctx, args.job_id)  # the API answers an unknown job the same way
    return Requirements(
        job_id=args.job_id,
        requirements=page.requirements,
        **offset_page(
            total=page.total, offset=args.offset, limit=args.limit, returned=len(page.requirements)
        ),
    )


# --- the specs ---------------------------------------------------------------------------------

FROZEN = Route(
    "GET",
    "/api/jobs/{job_id}/frozen",
    what="the frozen result of job {job_id}",
    status={
        404: "job {job_id} has no frozen result: it is not pending_review, was approved, or "
        "does not exist (get_job shows which)"
    },
)
PROGRESS = Route(
    "GET", "/api/jobs/{job_id}/progress", what="the progress of job {job_id}", status={404: NO_JOB}
)

TOOLS = (
    RestTool(
        name="get_frozen_job",
        description="The result an agent froze for review: summary, deliverables, confidence, "
        "notes.",
        input_model=JobArgs,
        output_model=Frozen,
        tier=Tier.READ,
        backend=COCKPIT,
        route=FROZEN,
    ),
    RestTool(
        name="get_workspace_file",
        description="Read a text file of a job's live workspace (not git: get_job_file).",
        input_model=FileArgs,
        output_model=WorkspaceFile,
        tier=Tier.READ,
        backend=COCKPIT,
        run=get_workspace_file,
        max_result_chars=LARGE_RESULT,
    ),
    RestTool(
        name="get_workspace_overview",
        description="A job's workspace at a glance: main files, workspace.md and plan.md, "
        "todos, archive count.",
        input_model=OverviewArgs,
        output_model=Overview,
        tier=Tier.READ,
        backend=COCKPIT,
        run=get_workspace_overview,
        max_result_chars=LARGE_RESULT,
    ),
    RestTool(
        name="get_job_progress",
        description="A job's requirement counts by status, percent done, elapsed time, ETA.",
        input_model=JobArgs,
        output_model=Progress,
        tier=Tier.READ,
        backend=COCKPIT,
        route=PROGRESS,
    ),
    RestTool(
        name="get_job_requirements",
        description="Requirements a job extracted.",
        input_model=RequirementsArgs,
        output_model=Requirements,
        tier=Tier.READ,
        backend=COCKPIT,
        run=get_job_requirements,
        max_result_chars=LARGE_RESULT,
    ),
)
