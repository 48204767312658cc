"""search_job_sources: the job's source library searched, each hit's evidence explained.

What the API leaves to the client, done here:

- it answers ``mode: "keyword"`` whatever mode was asked for (its search is PostgreSQL
  full-text only): the result says which mode ran and, when that is not the one asked for, a
  note says so;
- it labels hits HIGH/MEDIUM/LOW without saying why: each hit gets a reason from what the
  answer shows (the kind of match, its rank, the words highlighted);
- its snippets mark matches as HTML (``<b>word</b>``): they become ``**word**``, and are cut
  at ``snippet_chars`` (the requirements' open question: per-hit text is bounded, default 500)
  with a ``[truncated]`` marker saying how much was left out.
"""

from __future__ import annotations

import re
from typing import Any, Literal

from pydantic import AliasChoices, Field, field_validator

from gateway import Tier
from gateway.rest import RestContext, RestTool, Route, truncation_marker

from .backend import COCKPIT, Args, JobId, SourceType, Wire, require_job

Mode = Literal["hybrid", "keyword", "semantic"]
SNIPPET_MAX = 1000

_HIGHLIGHT = re.compile(r"<b>(.*?)</b>", re.DOTALL)
_STRENGTH = {"HIGH": "strong", "MEDIUM": "moderate", "LOW": "weak"}
_BASIS = {"keyword": "keyword match", "semantic": "semantic similarity", "hybrid": "hybrid match"}


class SearchArgs(Args):
    job_id: JobId
    query: str = Field(min_length=1, max_length=500, description="Keywords or a question.")
    mode: Mode = Field("hybrid", description="Retrieval method.")
    source_type: SourceType | None = None
    tags: str | None = Field(None, max_length=500, description="Comma-separated; all must match.")
    top_k: int = Field(10, ge=1, le=50, description="Max hits.")
    snippet_chars: int = Field(500, ge=50, le=SNIPPET_MAX, description="Max chars per snippet.")

    @field_validator("query")
    @classmethod
    def _words(cls, value: str) -> str:
        value = value.strip()
        if not value:
            raise ValueError("must contain a word to search for")
        return value

    @field_validator("tags")
    @classmethod
    def _tag_list(cls, value: str | None) -> str | None:
        # "gobd, e-invoicing" and "gobd,,e-invoicing" mean what the API reads as "gobd,e-invoicing"
        tags = list(dict.fromkeys(t.strip() for t in (value or "").split(",") if t.strip()))
        return ",".join(tags) or None


class Hit(Wire):
    source_id: int
    source_name: str | None = None
    source_type: str | None = None
    identifier: str | None = None
    evidence_label: str | None = None
    evidence_reason: str | None = None
    rank: float | None = Field(None, validation_alias=AliasChoices("rank", "score"))
    snippet: str | None = Field(None, validation_alias=AliasChoices("snippet", "chunk_text"))
    page_reference: str | None = None


class SearchAnswer(Wire):
    mode: str | None = None
    results: list[Hit]


class Found(Wire):
    source_id: int
    source_name: str | None
    source_type: str | None
    identifier: str | None
    evidence_label: str | None
    evidence_reason: str
    rank: float | None
    snippet: str | None
    page_reference: str | None = None


class SearchResult(Wire):
    job_id: str
    query: str
    mode: str = Field(description="The mode the orchestrator ran.")
    mode_requested: str
    note: str | None = None
    summary: str
    results: list[Found]
    count: int


SEARCH = Route(
    "GET",
    "/api/jobs/{job_id}/sources/search",
    query=("query", "mode", "top_k", "source_type", "tags"),
    what="a search of job {job_id}'s sources",
)


def plain_snippet(snippet: str, limit: int) -> str:
    """``<b>x</b>`` as ``**x**``, cut to at most ``limit`` characters (at a space when one is
    near) with a marker saying how many were left out; a cut never leaves a ``**`` open."""
    text = _HIGHLIGHT.sub(lambda m: f"**{m.group(1)}**", snippet)
    if len(text) <= limit:
        return text
    cut = text[:limit]
    space = cut.rfind(" ")
    if space > limit // 2:
        cut = cut[:space]
    if cut.count("**") % 2:  # a highlight cut in two: it goes whole
        cut = cut[: cut.rfind("**")]
    cut = cut.rstrip()
    return f"{cut} {truncation_marker(len(text) - len(cut), len(text))}"


def matched_words(snippet: str | None) -> list[str]:
    """The distinct words the API highlighted, in order."""
    found = (m.group(1).strip().lower() for m in _HIGHLIGHT.finditer(snippet or ""))
    return list(dict.fromkeys(w for w in found if w))


def evidence_reason(hit: Hit, mode: str) -> str:
    if hit.evidence_reason:
        return hit.evidence_reason
    strength = _STRENGTH.get(hit.evidence_label or "", "unlabelled")
    reason = f"{strength} {_BASIS.get(mode, 'match')}"
    if hit.rank is not None:
        reason += f" (rank {hit.rank:.3g})"
    words = matched_words(hit.snippet)
    if words:
        reason += "; matched: " + ", ".join(words)
    return reason


def summarize(hits: list[Found], args: SearchArgs) -> str:
    if not hits:
        filters = " with these filters" if args.source_type or args.tags else ""
        return f"no source of this job matches {args.query!r}{filters}"
    labels = [h.evidence_label or "unlabelled" for h in hits]
    counts = ", ".join(f"{labels.count(k)} {k}" for k in dict.fromkeys(labels))
    best = hits[0]
    return f"{len(hits)} hit(s): {counts}; best: source {best.source_id} ({best.evidence_label})"


async def search_job_sources(args: SearchArgs, ctx: RestContext[Any]) -> SearchResult:
    answer = await ctx.fetch(SEARCH, SearchAnswer, args)
    if not answer.results:
        await require_job(ctx, args.job_id)
    ran = answer.mode or args.mode
    found = [
        Found(
            **hit.model_dump(exclude={"evidence_reason", "snippet"}),
            evidence_reason=evidence_reason(hit, ran),
            snippet=None if hit.snippet is None else plain_snippet(hit.snippet, args.snippet_chars),
        )
        for hit in answer.results
    ]
    note = None
    if ran != args.mode:
        note = f"{args.mode} search is not available: the orchestrator ran {ran} search"
    return SearchResult(
        job_id=args.job_id,
        query=args.query,
        mode=ran,
        mode_requested=args.mode,
        note=note,
        summary=summarize(found, args),
        results=found,
        count=len(found),
    )


TOOLS = (
    RestTool(
        name="search_job_sources",
        title="Search a job's sources",
        description="Search the content of a job's sources. Per hit: source, evidence label "
        "HIGH/MEDIUM/LOW and why, snippet with matches in **bold**. States the mode that ran "
        "(the orchestrator may fall back to keyword).",
        input_model=SearchArgs,
        output_model=SearchResult,
        tier=Tier.READ,
        backend=COCKPIT,
        run=search_job_sources,
        max_result_chars=100_000,
    ),
)
