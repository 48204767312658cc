"""Citations: a job's list, one citation in full, and the job's statistics."""

from __future__ import annotations

from typing import Any, Literal, get_args

from pydantic import Field

from gateway.rest import (
    JsonString,
    OffsetPage,
    RestContext,
    RestTools,
    Route,
    UtcTimestamp,
    offset_page,
)

from .backend import (
    COCKPIT,
    SOURCE_TYPES,
    CitationId,
    JobId,
    Limit,
    Offset,
    SourceId,
    Wire,
    require_job,
)

VerificationStatus = Literal["pending", "verified", "failed", "unverified"]

# The enums of the citation tables: counts list every value, zeros included.
VERIFICATION_STATUSES: tuple[str, ...] = get_args(VerificationStatus)
CONFIDENCES = ("high", "medium", "low")
EXTRACTION_METHODS = ("direct_quote", "paraphrase", "inference", "aggregation", "negative")

api = RestTools(COCKPIT)


# --- list_job_citations ----------------------------------------------------------------------


class CitationRow(Wire):
    id: int
    claim: str = Field(description="The first 200 characters.")
    source_id: int
    source_name: str | None = None
    source_type: str | None = None
    verification_status: str | None = None
    confidence: str | None = None
    extraction_method: str | None = None
    similarity_score: float | None = None
    created_at: UtcTimestamp | None = None


class CitationsAnswer(Wire):
    citations: list[CitationRow]
    total: int


class CitationsPage(Wire, OffsetPage):
    job_id: str
    citations: list[CitationRow]


LIST_CITATIONS = Route(
    "GET",
    "/api/jobs/{job_id}/citations",
    query=("limit", "offset", "source_id", "verification_status"),
    rename={"verification_status": "status"},
    what="the citations of job {job_id}",
)


@api.read(title="List a job's citations", max_result_chars=100_000)
async def list_job_citations(
    job_id: JobId,
    source_id: SourceId | None = Field(None, description="Only this source's."),
    verification_status: VerificationStatus | None = Field(
        None, description="Only citations in this state."
    ),
    limit: Limit = 50,
    offset: Offset = 0,
    *,
    ctx: RestContext[Any],
) -> CitationsPage:
    """A job's citations: claim, source, verification status, confidence, extraction method,
    similarity. Paged."""
    answer = await ctx.fetch(LIST_CITATIONS, CitationsAnswer)
    if answer.total == 0:
        await require_job(ctx, job_id)
    page = offset_page(
        total=answer.total, offset=offset, limit=limit, returned=len(answer.citations)
    )
    return CitationsPage(job_id=job_id, citations=answer.citations, **page)


# --- get_citation_detail ---------------------------------------------------------------------


class Citation(Wire):
    id: int
    job_id: str | None = None
    claim: str
    verbatim_quote: str | None = None
    quote_context: str | None = None
    quote_language: str | None = None
    relevance_reasoning: str | None = None
    confidence: str | None = None
    extraction_method: str | None = None
    source_id: int
    source_name: str | None = None
    source_type: str | None = None
    source_identifier: str | None = None
    locator: JsonString = None
    verification_status: str | None = None
    verification_notes: str | None = None
    similarity_score: float | None = None
    matched_location: JsonString = None
    created_at: UtcTimestamp | None = None
    created_by: str | None = None


CITATION = Route(
    "GET",
    "/api/citations/{citation_id}",
    what="citation {citation_id}",
    status={404: "no citation {citation_id}; list_job_citations shows the ids"},
)


@api.read(title="Read a citation")
async def get_citation_detail(citation_id: CitationId, *, ctx: RestContext[Any]) -> Citation:
    """One citation in full: verbatim quote and context, source and locator (page, section),
    verification notes, matched location, reasoning."""
    return await ctx.fetch(CITATION, Citation)


# --- get_citation_stats ----------------------------------------------------------------------


class Stats(Wire):
    job_id: str
    total_sources: int
    sources_by_type: dict[str, int]
    total_citations: int
    citations_by_verification_status: dict[str, int]
    citations_by_confidence: dict[str, int]
    citations_by_extraction_method: dict[str, int]


def _with_zeros(known: tuple[str, ...], counts: dict[str, int]) -> dict[str, int]:
    """Every known value first (0 when absent), then whatever else the API counted."""
    return {**dict.fromkeys(known, 0), **counts}


STATS = Route(
    "GET", "/api/jobs/{job_id}/citations/stats", what="the citation stats of job {job_id}"
)


@api.read(title="Citation statistics of a job")
async def get_citation_stats(job_id: JobId, *, ctx: RestContext[Any]) -> Stats:
    """A job's sources by type and citations by verification status, confidence and extraction
    method, zeros included."""
    stats = await ctx.fetch(STATS, Stats)
    if stats.total_sources == 0 and stats.total_citations == 0:
        await require_job(ctx, job_id)
    return stats.model_copy(
        update={
            "sources_by_type": _with_zeros(SOURCE_TYPES, stats.sources_by_type),
            "citations_by_verification_status": _with_zeros(
                VERIFICATION_STATUSES, stats.citations_by_verification_status
            ),
            "citations_by_confidence": _with_zeros(CONFIDENCES, stats.citations_by_confidence),
            "citations_by_extraction_method": _with_zeros(
                EXTRACTION_METHODS, stats.citations_by_extraction_method
            ),
        }
    )
