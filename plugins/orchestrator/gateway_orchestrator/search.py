"""``search_audit``: a text search over a job's audit trail, which the API cannot do itself.

The tool pages through ``GET /api/jobs/{job_id}/audit`` (100 entries a page, every step type),
tests every text of every entry (content, tool names and arguments, results, errors) for the
query, case-insensitively, and stops at the first of: ``limit`` matches, the end of the trail,
``MAX_PAGES`` pages, ``SEARCH_SECONDS`` seconds. Progress is reported after every page. The
result says which it was and, unless the whole trail was searched, the ``offset`` to continue
from: positions count entries from the start of the trail, so a continued search neither
repeats nor skips one.
"""

from __future__ import annotations

import math
from collections.abc import Iterator
from dataclasses import replace
from typing import Any, Literal

import anyio
from pydantic import BaseModel, Field

from gateway import Args, GatewayError, Tier
from gateway.rest import RestContext, RestTool

from .audit import AUDIT, AuditEntry
from .backend import COCKPIT, JobId
from .bounded import bound_items
from .mongo import check_envelope, document

SEARCH_PAGE = 100
MAX_PAGES = 50
SEARCH_SECONDS = 20.0
SNIPPET = 80  # characters of context on each side of a match
HINT = "ask for fewer matches (limit)"
#: One page of the trail, all step types: what the search reads, a page at a time.
AUDIT_PAGE = replace(AUDIT, what="page {page} of the audit trail of job {job_id}")


class SearchArgs(Args):
    job_id: JobId
    query: str = Field(min_length=1, max_length=200, description="Text; case-insensitive.")
    limit: int = Field(20, ge=1, le=100, description="Max matches.")
    offset: int = Field(
        0, ge=0, le=10_000_000, description="Entries to skip; a result's next_offset."
    )


class AuditMatch(BaseModel):
    position: int = Field(description="the entry's offset in the trail")
    field: str = Field(description="where the query matched, e.g. tool.arguments.query")
    snippet: str
    entry: AuditEntry


class SearchResult(BaseModel):
    job_id: str
    query: str
    matches: list[AuditMatch]
    total: int = Field(description="entries in the trail")
    searched: int = Field(description="entries searched by this call")
    complete: bool = Field(description="searched to the end of the trail")
    stopped: Literal["limit", "pages", "time", "error", "size"] | None = Field(
        description="why the search ended early (size: the result was full)"
    )
    next_offset: int | None = Field(description="offset to continue from")
    error: str | None = None
    truncated_texts: int = Field(description=f"texts cut to fit; {HINT} to see more")


def _texts(value: Any, path: str) -> Iterator[tuple[str, str]]:
    if isinstance(value, str):
        yield path, value
    elif isinstance(value, dict):
        for key, item in value.items():
            yield from _texts(item, f"{path}.{key}" if path else str(key))
    elif isinstance(value, list):
        for i, item in enumerate(value):
            yield from _texts(item, f"{path}[{i}]")


# The step's envelope (who, when, which phase): searching it would match every entry.
_ENVELOPE = frozenset(AuditEntry.model_fields)


def find(entry: dict[str, Any], needle: str) -> tuple[str, str] | None:
    """The first text of ``entry``'s step data (content, tool name and arguments, result,
    error, …) holding ``needle`` (lower case): its path and a snippet around the match."""
    data = {k: v for k, v in entry.items() if k not in _ENVELOPE}
    for path, text in _texts(data, ""):
        at = text.lower().find(needle)
        if at != -1:
            start, end = max(0, at - SNIPPET), min(len(text), at + len(needle) + SNIPPET)
            snippet = ("…" if start else "") + text[start:end] + ("…" if end < len(text) else "")
            return path, " ".join(snippet.split())
    return None


async def search_audit(args: SearchArgs, ctx: RestContext[Any]) -> SearchResult:
    what = f"the audit trail of job {args.job_id}"
    needle = args.query.lower()
    page, skip = divmod(args.offset, SEARCH_PAGE)
    page += 1
    position = args.offset
    matches: list[dict[str, Any]] = []
    total = 0
    pages = 0
    stopped: str | None = None
    error: str | None = None
    deadline = anyio.current_time() + SEARCH_SECONDS
    while True:
        if pages >= MAX_PAGES:
            stopped = "pages"
            break
        data: Any = None
        with anyio.move_on_after(deadline - anyio.current_time()):
            try:
                data = await ctx.send(
                    AUDIT_PAGE,
                    {
                        "job_id": args.job_id,
                        "page": page,
                        "page_size": SEARCH_PAGE,
                        "filter": "all",
                    },
                )
            except GatewayError as err:
                if pages == 0:  # nothing found yet: the failure is the answer
                    raise
                stopped, error = "error", ctx.sanitize(err.message)
        if stopped:
            break
        if data is None:
            stopped = "time"
            break
        answer = check_envelope(data, what)
        total = answer.total
        entries = answer.entries
        for raw in entries[skip:]:
            position += 1
            entry = document(raw)
            hit = find(entry, needle)
            if hit is not None:
                field, snippet = hit
                matches.append(
                    {"position": position - 1, "field": field, "snippet": snippet, "entry": entry}
                )
                if len(matches) >= args.limit:
                    stopped = "limit"
                    break
        pages += 1
        first_page = args.offset // SEARCH_PAGE + 1
        planned = min(MAX_PAGES, max(pages, math.ceil(total / SEARCH_PAGE) - first_page + 1))
        await ctx.progress(
            pages, planned, f"searched page {page} ({position} of {total}): {len(matches)} matches"
        )
        if stopped or not answer.has_more or not entries:
            break
        page, skip = page + 1, 0
    shaped = bound_items(matches, hint=HINT)
    if shaped.omitted:  # too many large matches for one result: continue at the first left out
        stopped, position = "size", matches[len(shaped.items)]["position"]
    complete = stopped is None or (stopped == "limit" and position >= total)
    return ctx.validate(
        SearchResult,
        {
            "job_id": args.job_id,
            "query": args.query,
            "matches": shaped.items,
            "total": total,
            "searched": position - args.offset,
            "complete": complete,
            "stopped": None if complete else stopped,
            "next_offset": None if complete else position,
            "error": error,
            "truncated_texts": shaped.truncated,
        },
        what,
    )


TOOLS = (
    RestTool(
        name="search_audit",
        description=f"Find audit entries of a job whose texts contain the query; searches up to "
        f"{MAX_PAGES * SEARCH_PAGE:,} entries or {SEARCH_SECONDS:g} s per call.",
        input_model=SearchArgs,
        output_model=SearchResult,
        tier=Tier.READ,
        backend=COCKPIT,
        run=search_audit,
        timeout=SEARCH_SECONDS + 10,
        max_result_chars=100_000,
    ),
)
