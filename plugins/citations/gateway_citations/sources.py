"""Sources: the job's library (or everyone's), one source's content, its annotations and tags."""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import Field, RootModel

from gateway.rest import (
    JsonString,
    OffsetPage,
    RestContext,
    RestTools,
    Route,
    UtcTimestamp,
    offset_page,
    truncation_marker,
)

from .backend import COCKPIT, JobId, Limit, Offset, SourceId, SourceType, Wire, require_job

api = RestTools(COCKPIT)

#: get_source_detail returns at most this many characters of content: even at one token per
#: character the result stays under Claude Code's 25,000-token limit for a tool result.
CONTENT_CAP = 20_000


# --- list_job_sources ------------------------------------------------------------------------


class SourceRow(Wire):
    id: int
    type: str
    identifier: str
    name: str
    version: str | None = None
    content_hash: str | None = None
    content_preview: str = Field("", description="The first 200 characters.")
    metadata: JsonString = None
    created_at: UtcTimestamp | None = None
    job_ids: list[str] | None = Field(None, description="Listed across jobs only.")


class SourcesAnswer(Wire):
    sources: list[SourceRow]
    total: int


class SourcesPage(Wire, OffsetPage):
    job_id: str | None
    sources: list[SourceRow]


LIST_SOURCES = Route(
    "GET",
    "/api/sources",
    query=("limit", "offset", "job_id", "source_type"),
    rename={"source_type": "type"},
    what="sources",
)


@api.read(title="List a job's sources", max_result_chars=100_000)
async def list_job_sources(
    job_id: JobId | None = Field(None, description="Job UUID; omit for all jobs."),
    source_type: SourceType | None = None,
    limit: Limit = 50,
    offset: Offset = 0,
    *,
    ctx: RestContext[Any],
) -> SourcesPage:
    """A job's sources with content previews; without job_id, all jobs' sources, each with its
    job_ids. Paged."""
    answer = await ctx.fetch(LIST_SOURCES, SourcesAnswer)
    if job_id and answer.total == 0:
        await require_job(ctx, job_id)
    page = offset_page(total=answer.total, offset=offset, limit=limit, returned=len(answer.sources))
    return SourcesPage(job_id=job_id, sources=answer.sources, **page)


# --- get_source_detail -----------------------------------------------------------------------


class SourceAnswer(Wire):
    id: int
    type: str
    identifier: str
    name: str
    version: str | None = None
    content: str
    content_hash: str | None = None
    metadata: JsonString = None
    created_at: UtcTimestamp | None = None
    full_content_length: int
    job_ids: list[str] = Field(default_factory=list)


class SourceDetail(SourceAnswer):
    content_truncated: bool
    returned_chars: int = Field(description="Characters of content shown, before any marker.")


SOURCE = Route(
    "GET",
    "/api/sources/{source_id}",
    query=("content_limit",),
    what="source {source_id}",
    status={404: "no source {source_id}; list_job_sources shows the ids"},
)


def _cut_hint(content_limit: int) -> str:
    if 0 < content_limit < CONTENT_CAP:
        return f"content_limit=0 shows up to {CONTENT_CAP:,}"
    return f"this tool shows at most {CONTENT_CAP:,}; search_job_sources finds passages in the rest"


@api.read(title="Read a source", max_result_chars=100_000)
async def get_source_detail(
    source_id: SourceId,
    content_limit: int = Field(
        2000, ge=0, le=CONTENT_CAP, description=f"Max content chars; 0 = all up to {CONTENT_CAP}."
    ),
    *,
    ctx: RestContext[Any],
) -> SourceDetail:
    """One source as the agent had it when citing: content (cut with a [truncated] marker),
    metadata, hash, the jobs using it."""
    answer = await ctx.fetch(SOURCE, SourceAnswer)
    # content_limit=0 asks the API for everything (as the orchestrator's own tool does); the
    # cap is applied here, and so is the limit, should an API version not apply it.
    shown = answer.content[: content_limit or CONTENT_CAP]
    full = max(answer.full_content_length, len(answer.content))
    content = shown
    if len(shown) < full:
        hint = _cut_hint(content_limit)
        content += "\n" + truncation_marker(full - len(shown), full, hint=hint)
    return SourceDetail(
        **answer.model_dump(exclude={"content"}),
        content=content,
        content_truncated=len(shown) < full,
        returned_chars=len(shown),
    )


# --- get_source_annotations ------------------------------------------------------------------


AnnotationType = Annotated[
    Literal["note", "highlight", "summary", "question", "critique"],
    Field(description="Only this kind."),
]


class Annotation(Wire):
    id: int
    annotation_type: str
    content: str
    page_reference: str | None = None
    created_at: UtcTimestamp | None = None
    created_by: str | None = None


class Annotations(Wire):
    job_id: str
    source_id: int
    annotations: list[Annotation]
    count: int


class AnnotationList(RootModel[list[Annotation]]):
    pass


ANNOTATIONS = Route(
    "GET",
    "/api/jobs/{job_id}/sources/{source_id}/annotations",
    query=("annotation_type",),
    rename={"annotation_type": "type"},
    what="the annotations of source {source_id} in job {job_id}",
)


@api.read(title="Read a source's annotations", max_result_chars=100_000)
async def get_source_annotations(
    job_id: JobId,
    source_id: SourceId,
    annotation_type: AnnotationType | None = None,
    *,
    ctx: RestContext[Any],
) -> Annotations:
    """The agent's notes, highlights, summaries, questions and critiques on a source in a
    job."""
    notes = (await ctx.fetch(ANNOTATIONS, AnnotationList)).root
    if not notes:
        await require_job(ctx, job_id)
    return Annotations(job_id=job_id, source_id=source_id, annotations=notes, count=len(notes))


# --- get_source_tags -------------------------------------------------------------------------


class Tags(Wire):
    job_id: str
    source_id: int
    tags: list[str]


class TagList(RootModel[list[str]]):
    pass


TAGS = Route(
    "GET",
    "/api/jobs/{job_id}/sources/{source_id}/tags",
    what="the tags of source {source_id} in job {job_id}",
)


@api.read(title="Read a source's tags")
async def get_source_tags(job_id: JobId, source_id: SourceId, *, ctx: RestContext[Any]) -> Tags:
    """The tags a job gave a source."""
    tags = (await ctx.fetch(TAGS, TagList)).root
    if not tags:
        await require_job(ctx, job_id)
    return Tags(job_id=job_id, source_id=source_id, tags=tags)
