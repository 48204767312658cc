"""The citation and source library: sources, citations, annotations, tags, statistics and the
keyword search.

Every endpoint that puts a job id into SQL (``$n::uuid``) answers a malformed one with **500**
and asyncpg's message, as recorded; an unknown job is simply an empty result. Enum columns are
compared as text, so an unknown filter value gives an empty list, not a 422.
"""

from __future__ import annotations

from typing import Any

from pydantic import Field

from .api import ApiError, Call, Query, Router, sql_uuid
from .fulltext import evidence_label, headline, lexemes, matches, query_words, rank
from .model import Citation, Source, iso_z, jsonb_text
from .state import State

router = Router()


def source_summary(state: State, source: Source, *, with_jobs: bool) -> dict[str, Any]:
    row: dict[str, Any] = {
        "id": source.id,
        "type": source.type,
        "identifier": source.identifier,
        "name": source.name,
        "version": source.version,
        "content_hash": source.content_hash,
        "content_preview": source.content[:200],
        "metadata": jsonb_text(source.metadata),
        "created_at": iso_z(source.created_at),
    }
    if with_jobs:
        row["job_ids"] = state.job_ids_of(source.id)
    return row


class ListSources(Query):
    job_id: str | None = None
    type: str | None = None
    limit: int = Field(50, ge=1, le=500)
    offset: int = Field(0, ge=0)


@router.get("/api/sources", query=ListSources)
def list_sources(call: Call) -> Any:
    state, q = call.state, call.query
    rows = sorted(state.sources.values(), key=lambda s: s.created_at, reverse=True)
    if q.job_id:
        job = sql_uuid(q.job_id)
        linked = {s for j, s in state.job_sources if j == job}
        rows = [s for s in rows if s.id in linked]
    if q.type:
        rows = [s for s in rows if s.type == q.type]
    page = rows[q.offset : q.offset + q.limit]
    return {
        "sources": [source_summary(state, s, with_jobs=not q.job_id) for s in page],
        "total": len(rows),
    }


class SourceDetail(Query):
    content_limit: int = Field(2000, ge=0, le=100000)


@router.get("/api/sources/{source_id}", path={"source_id": int}, query=SourceDetail)
def source_detail(call: Call) -> Any:
    state, source_id = call.state, call.path["source_id"]
    source = state.sources.get(source_id)
    if source is None:
        raise ApiError(404, f"Source {source_id} not found")
    limit = call.query.content_limit
    return {
        "id": source.id,
        "type": source.type,
        "identifier": source.identifier,
        "name": source.name,
        "version": source.version,
        "content": source.content[:limit] if limit > 0 else source.content,
        "content_hash": source.content_hash,
        "metadata": jsonb_text(source.metadata),
        "created_at": iso_z(source.created_at),
        "full_content_length": len(source.content),
        "content_truncated": limit > 0 and len(source.content) > limit,
        "job_ids": state.job_ids_of(source.id),
    }


class ListCitations(Query):
    source_id: int | None = None
    status: str | None = None
    limit: int = Field(50, ge=1, le=500)
    offset: int = Field(0, ge=0)


@router.get("/api/jobs/{job_id}/citations", query=ListCitations)
def list_citations(call: Call) -> Any:
    state, q = call.state, call.query
    job = sql_uuid(call.path["job_id"])
    rows = [
        c
        for c in state.citations.values()
        if c.job_id == job
        and c.source_id in state.sources
        and (q.source_id is None or c.source_id == q.source_id)
        and (not q.status or c.verification_status == q.status)
    ]
    rows.sort(key=lambda c: c.created_at, reverse=True)
    out = []
    for c in rows[q.offset : q.offset + q.limit]:
        source = state.sources[c.source_id]
        out.append(
            {
                "id": c.id,
                "claim": c.claim[:200],
                "source_id": c.source_id,
                "source_name": source.name,
                "source_type": source.type,
                "verification_status": c.verification_status,
                "confidence": c.confidence,
                "extraction_method": c.extraction_method,
                "similarity_score": c.similarity_score,
                "created_at": iso_z(c.created_at),
            }
        )
    return {"citations": out, "total": len(rows)}


def citation_detail(state: State, c: Citation) -> dict[str, Any]:
    source = state.sources[c.source_id]
    return {
        "id": c.id,
        "job_id": c.job_id,
        "claim": c.claim,
        "verbatim_quote": c.verbatim_quote,
        "quote_context": c.quote_context,
        "quote_language": c.quote_language,
        "relevance_reasoning": c.relevance_reasoning,
        "confidence": c.confidence,
        "extraction_method": c.extraction_method,
        "source_id": c.source_id,
        "source_name": source.name,
        "source_type": source.type,
        "source_identifier": source.identifier,
        "locator": jsonb_text(c.locator),
        "verification_status": c.verification_status,
        "verification_notes": c.verification_notes,
        "similarity_score": c.similarity_score,
        "matched_location": jsonb_text(c.matched_location),
        "created_at": iso_z(c.created_at),
        "created_by": c.created_by,
    }


@router.get("/api/citations/{citation_id}", path={"citation_id": int})
def get_citation(call: Call) -> Any:
    citation_id = call.path["citation_id"]
    citation = call.state.citations.get(citation_id)
    if citation is None or citation.source_id not in call.state.sources:
        raise ApiError(404, f"Citation {citation_id} not found")
    return citation_detail(call.state, citation)


class Annotations(Query):
    type: str | None = None


@router.get(
    "/api/jobs/{job_id}/sources/{source_id}/annotations",
    path={"source_id": int},
    query=Annotations,
)
def source_annotations(call: Call) -> Any:
    job = sql_uuid(call.path["job_id"], 2)
    notes = sorted(
        (
            a
            for a in call.state.annotations.values()
            if a.job_id == job
            and a.source_id == call.path["source_id"]
            and (not call.query.type or a.annotation_type == call.query.type)
        ),
        key=lambda a: a.created_at,
    )
    return [
        {
            "id": a.id,
            "annotation_type": a.annotation_type,
            "content": a.content,
            "page_reference": a.page_reference,
            "created_at": iso_z(a.created_at),
            "created_by": a.created_by,
        }
        for a in notes
    ]


@router.get("/api/jobs/{job_id}/sources/{source_id}/tags", path={"source_id": int})
def tags(call: Call) -> Any:
    job = sql_uuid(call.path["job_id"], 2)
    return sorted(call.state.tags.get((job, call.path["source_id"]), set()))


def _count(values: list[Any]) -> dict[str, int]:
    counts: dict[str, int] = {}
    for value in values:
        counts[value] = counts.get(value, 0) + 1
    return counts


@router.get("/api/jobs/{job_id}/citations/stats")
def citation_stats(call: Call) -> Any:
    state = call.state
    job_id = call.path["job_id"]
    job = sql_uuid(job_id)
    sources = [state.sources[s] for j, s in state.job_sources if j == job and s in state.sources]
    cites = [c for c in state.citations.values() if c.job_id == job]
    by_type = _count([s.type for s in sources])
    by_status = _count([c.verification_status for c in cites])
    return {
        "job_id": job_id,
        "total_sources": sum(by_type.values()),
        "sources_by_type": by_type,
        "total_citations": sum(by_status.values()),
        "citations_by_verification_status": by_status,
        "citations_by_confidence": _count([c.confidence for c in cites]),
        "citations_by_extraction_method": _count([c.extraction_method for c in cites]),
    }


class Search(Query):
    query: str
    mode: str = "keyword"
    source_type: str | None = None
    tags: str | None = None
    top_k: int = Field(10, ge=1, le=50)


@router.get("/api/jobs/{job_id}/sources/search", query=Search)
def search(call: Call) -> Any:
    state, q = call.state, call.query
    job_id = call.path["job_id"]
    job = sql_uuid(job_id)
    wanted_tags = [t.strip() for t in (q.tags or "").split(",") if t.strip()]
    words = query_words(q.query)
    hits = []
    for j, source_id in state.job_sources:
        source = state.sources.get(source_id)
        if j != job or source is None:
            continue
        if q.source_type and source.type != q.source_type:
            continue
        if not set(wanted_tags) <= state.tags.get((job, source_id), set()):
            continue
        vector = lexemes(source.content)
        if not matches(vector, words):
            continue
        hits.append((rank(vector, words), source))
    hits.sort(key=lambda h: h[0], reverse=True)
    results = [
        {
            "source_id": source.id,
            "source_name": source.name,
            "source_type": source.type,
            "identifier": source.identifier,
            "evidence_label": evidence_label(value),
            "rank": value,
            "snippet": headline(source.content, words),
        }
        for value, source in hits[: q.top_k]
    ]
    # The mode asked for is ignored: this is always PostgreSQL keyword search.
    return {
        "job_id": job_id,
        "query": q.query,
        "mode": "keyword",
        "results": results,
        "total": len(results),
    }
