"""search_job_sources: the job's source library searched, each hit's evidence explained.

What the API leaves to the client, done here:

- it answers ``mode: "keyword"`` whatever mode was asked for (its search is PostgreSQL
  full-text only): the result says which mode ran and, when that is not the one asked for, a
  note says so;
- it labels hits HIGH/MEDIUM/LOW without saying why: each hit gets a reason from what the
  answer shows (the kind of match, its rank, the words highlighted);
- its snippets mark matches as HTML (``<b>word</b>``): they become ``**word**``; a snippet
  longer than ``snippet_chars`` (default and most 1,000: a paragraph; the API's own snippets
  are rarely longer) keeps the window of that size that holds the most matches, centred on them, with
  ``…`` where text was cut and a ``[truncated]`` marker saying how much.
"""

from __future__ import annotations

import re
from typing import Any, Literal

from pydantic import AliasChoices, Field, field_validator

from gateway import Args
from gateway.rest import RestContext, RestTools, Route, truncation_marker

from .backend import COCKPIT, JobId, SourceType, Wire, require_job

Mode = Literal["hybrid", "keyword", "semantic"]
# top_k hits of this size stay well within Claude Code's 25,000-token limit for a result.
SNIPPET_MAX = 1000
ELLIPSIS = "…"

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
    snippet_chars: int = Field(
        1000, ge=50, le=SNIPPET_MAX, description="Max chars per snippet, centred on the matches."
    )

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
    """``<b>x</b>`` as ``**x**``; when longer than ``limit`` characters, the window of at most
    ``limit`` (``…`` included) that holds the most matches, centred on them and cut at spaces
    where one is near, with a marker saying how many characters were left out. A cut never
    leaves a ``**`` open."""
    parts: list[str] = []
    spans: list[tuple[int, int]] = []  # where each match is in the plain text
    size = last = 0
    for m in _HIGHLIGHT.finditer(snippet):
        before, bold = snippet[last : m.start()], f"**{m.group(1)}**"
        spans.append((size + len(before), size + len(before) + len(bold)))
        parts += [before, bold]
        size += len(before) + len(bold)
        last = m.end()
    parts.append(snippet[last:])
    text = "".join(parts)
    if len(text) <= limit:
        return text
    room = limit - 2 * (len(ELLIPSIS) + 1)  # "… " before and " …" after
    start, end = _window(text, spans, room)
    middle = text[start:end].strip()
    shown = (
        (f"{ELLIPSIS} " if start > 0 else "") + middle + (f" {ELLIPSIS}" if end < len(text) else "")
    )
    return f"{shown} {truncation_marker(len(text) - len(middle), len(text))}"


def _window(text: str, spans: list[tuple[int, int]], room: int) -> tuple[int, int]:
    """``[start, end)`` of at most ``room`` characters around the densest run of matches."""
    first, last, best = 0, -1, 0
    j = 0
    for i, (s, _) in enumerate(spans):
        j = max(j, i)
        while j + 1 < len(spans) and spans[j + 1][1] - s <= room:
            j += 1
        if spans[j][1] - s <= room and j - i + 1 > best:
            first, last, best = i, j, j - i + 1
    if best:
        lo, hi = spans[first][0], spans[last][1]
        start = max(0, min(lo - (room - (hi - lo)) // 2, len(text) - room))
    else:  # no match fits (or none at all): the beginning
        lo = hi = start = 0
    end = min(len(text), start + room)
    # At a space when one is near, never cutting into the matches the window is for.
    space = text.find(" ", start, lo) if start > 0 else -1
    if space != -1 and space - start < room // 4:
        start = space + 1
    space = text.rfind(" ", hi, end) if end < len(text) else -1
    if space != -1 and end - space < room // 4:
        end = space
    for s, e in spans:  # a match the window cuts is left out whole
        if s < start < e:
            start = e
        if s < end < e:
            end = s
    return start, max(start, end)


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


# The arguments are a model of their own: their validators clean the query and the tags.
api = RestTools(COCKPIT)
api.read(
    name="search_job_sources",
    title="Search a job's sources",
    description="Search the content of a job's sources. Per hit: source, evidence label "
    "HIGH/MEDIUM/LOW and why, snippet with matches in **bold**. States the mode that ran "
    "(the orchestrator may fall back to keyword).",
    input_model=SearchArgs,
    output_model=SearchResult,
    run=search_job_sources,
    max_result_chars=100_000,
)
