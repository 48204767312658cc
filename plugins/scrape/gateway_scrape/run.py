"""One ``scrape_jobs`` run: terms in order, each isolated, each committed on its own.

Per term: preflight (DNS, retried) → fetch (source, off the event loop) → normalize and
filter → capture file → insert (one transaction). A failed preflight or fetch marks the term
failed and the run goes on; a database failure stops the run with ``DB_ERROR`` (terms already
committed stay, the failing term wrote nothing, and a rerun skips what is there).

The preflight's outcome holds for the whole run: a host that failed every attempt fails the
following terms at once with the same reason, and a host that resolved is not checked again.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import anyio
from gateway_queue.store import InsertCounts, NewJob, StoreError, connect_writer, insert_jobs

from gateway import ErrorCode, GatewayError, ToolContext

from .capture import capture_document, capture_name, describe_os_error, write_json_atomic
from .models import ScrapeArgs, ScrapeResult, Settings, TermResult, Totals, totals_of
from .normalize import clean, iso_utc, jsonable_record, utc_now_iso
from .preflight import PreflightResult, Resolver, preflight, resolve_host
from .reasons import short_reason
from .sources import JobSource, SourceError

#: Terms still running this long before the tool's time limit (at most a quarter of it) are
#: stopped and reported failed, so the caller gets the others' results instead of a TIMEOUT.
DEADLINE_MARGIN_S = 15.0


def time_budget(time_limit: float) -> float:
    """Seconds the terms may use out of the tool's ``time_limit``."""
    return time_limit - min(DEADLINE_MARGIN_S, time_limit / 4)


Sanitize = Callable[[str], str]


@dataclass
class Fetched:
    """What a term's fetch produced, normalized and filtered (built in a worker thread)."""

    records: list[dict[str, Any]]
    jobs: list[NewJob]
    skipped_no_url: int
    skipped_no_description: int
    warnings: list[str] = field(default_factory=list)


def fetch_and_clean(source: JobSource, args: ScrapeArgs, term: str, *, now: str) -> Fetched:
    """Blocking: fetch one term, make every record JSON-safe, normalize and filter it.

    Source failures raise :class:`SourceError`; a source that returns something other than a
    list of records is a source failure too.
    """
    fetch_more = getattr(source, "fetch_with_warnings", None)
    call = (args.location, args.sites, args.results_wanted, args.hours_old)
    if callable(fetch_more):
        raw, warnings = fetch_more(term, *call)
    else:
        raw, warnings = source.fetch(term, *call), []
    if not isinstance(raw, Sequence) or not all(isinstance(r, Mapping) for r in raw):
        raise SourceError("the source returned something other than a list of records")
    records = [jsonable_record(r) for r in raw]
    cleaned = clean(records, require_description=args.require_description, now=now)
    return Fetched(
        records,
        cleaned.jobs,
        cleaned.skipped_no_url,
        cleaned.skipped_no_description,
        [str(w) for w in warnings],
    )


#: How long a run's writes (creating the schema, a term's insert) wait for another writer's
#: lock before they fail, retryable.
WRITE_BUSY_TIMEOUT_S = 5.0


async def bootstrap_db(path: Path) -> None:
    """Create the folders, the file and the schema if missing (idempotent)."""
    async with connect_writer(path, busy_timeout_s=WRITE_BUSY_TIMEOUT_S):
        pass


async def insert_term(path: Path, jobs: Sequence[NewJob], status: str) -> InsertCounts:
    """One transaction for the whole term: all of its new rows or none of them (a cancelled
    call interrupts it and rolls it back)."""
    async with connect_writer(path, busy_timeout_s=WRITE_BUSY_TIMEOUT_S) as conn:
        return await insert_jobs(conn, jobs, status=status)


def db_error(what: str, exc: StoreError) -> GatewayError:
    reason = getattr(exc, "reason", None) or "the jobs database could not be used"
    retryable = bool(getattr(exc, "retryable", False))
    hint = "retry in a few seconds" if retryable else "check db_path and the file's permissions"
    return GatewayError(ErrorCode.DB_ERROR, f"{what}: {reason}; {hint}", retryable=retryable)


def new_run_id(started: datetime) -> str:
    return f"{started:%Y%m%dT%H%M%SZ}-{uuid.uuid4().hex[:8]}"


class Run:
    """State of one call. ``source`` comes from the plugin's resources, ``sanitize`` is the gateway's."""

    def __init__(
        self,
        args: ScrapeArgs,
        ctx: ToolContext[Settings],
        source: JobSource,
        sanitize: Sanitize,
        *,
        time_limit: float,
        resolve: Resolver = resolve_host,
    ) -> None:
        self.args = args
        self.ctx = ctx
        self.source = source
        self.sanitize = sanitize
        self.time_limit = time_limit
        self.resolve = resolve
        self.preflights: dict[str, PreflightResult] = {}  # host -> outcome, for this run
        plugin = ctx.plugin
        # Path checks are validation: they fail before any network or database work.
        self.db_path = plugin.resolve_data_path(args.db_path, field_name="db_path")
        self.capture_dir = plugin.resolve_data_path(args.capture_dir, field_name="capture_dir")

    async def execute(self) -> ScrapeResult:
        args, ctx = self.args, self.ctx
        started = datetime.now(UTC)
        clock = time.perf_counter()
        run_id = new_run_id(started)
        deadline = anyio.current_time() + time_budget(self.time_limit)
        if not args.dry_run:
            try:
                await bootstrap_db(self.db_path)
            except StoreError as exc:
                raise db_error("the jobs database could not be opened or created", exc) from None

        results: list[TermResult] = []
        total = len(args.terms)
        for index, term in enumerate(args.terms, start=1):
            remaining = deadline - anyio.current_time()
            if remaining <= 0:
                result = TermResult(
                    term=term,
                    success=False,
                    error="not started: the run's time limit was reached; "
                    "call again with the remaining terms",
                )
            else:
                result = await self.run_term(index, term, run_id, remaining, committed=results)
            results.append(result)
            await ctx.progress(
                index, total, f"term {index}/{total} {term!r}: {_summary(result, args.dry_run)}"
            )

        finished = datetime.now(UTC)
        totals = totals_of(results)
        return ScrapeResult(
            summary=summary_of(results, totals, args.dry_run),
            run_id=run_id,
            started_at=iso_utc(started),
            finished_at=iso_utc(finished),
            duration_ms=round((time.perf_counter() - clock) * 1000),
            dry_run=args.dry_run,
            results=results,
            totals=totals,
        )

    async def run_term(
        self, index: int, term: str, run_id: str, budget: float, *, committed: list[TermResult]
    ) -> TermResult:
        args, ctx = self.args, self.ctx
        result = TermResult(term=term, success=False)
        fetched: Fetched | None = None
        with anyio.move_on_after(budget) as scope:
            if args.preflight_host:
                check = await self.preflight(args.preflight_host)
                if not check.ok:
                    result.error = check.reason
                    ctx.logger.warning("scrape term %d %s", index, check.reason)
                    return result
            now = utc_now_iso()
            try:
                fetched = await ctx.run_sync(fetch_and_clean, self.source, args, term, now=now)
            except SourceError as exc:
                result.error = "scrape failed: " + short_reason(str(exc), self.sanitize)
            except Exception as exc:  # any board or library failure stays with its term
                detail = short_reason(f"{type(exc).__name__}: {exc}", self.sanitize)
                result.error = f"scrape failed: {detail}"
            if result.error:
                ctx.logger.warning("scrape term %d %s", index, result.error)
                return result
        if scope.cancelled_caught or fetched is None:
            result.error = (
                "did not finish within the run's time limit; nothing of this term was written; "
                "call again with fewer terms or a smaller results_wanted"
            )
            return result

        result.success = True
        result.fetched_count = len(fetched.records)
        result.cleaned_count = len(fetched.jobs)
        result.skipped_no_url = fetched.skipped_no_url
        result.skipped_no_description = fetched.skipped_no_description
        result.warnings = [short_reason(w, self.sanitize) for w in fetched.warnings]

        # Capture and database are independent: either may fail without touching the other.
        if args.save_capture_json:
            await self.write_capture(result, fetched, index, term, run_id)
        if not args.dry_run and fetched.jobs:
            # One transaction: if the call is cancelled or times out meanwhile, the insert is
            # interrupted and rolled back, so the term is written whole or not at all.
            try:
                counts = await insert_term(self.db_path, fetched.jobs, args.status)
            except StoreError as exc:
                done = sum(1 for r in committed if r.inserted_count)
                raise db_error(
                    f"inserting term {index} ({term[:60]!r}) failed and wrote nothing; "
                    f"the rows of {done} earlier term(s) are committed and a rerun counts "
                    "them as duplicates",
                    exc,
                ) from None
            result.inserted_count = counts.inserted
            result.duplicate_count = counts.duplicates
        return result

    async def preflight(self, host: str) -> PreflightResult:
        """The host's DNS check, once per run: its outcome holds for every later term."""
        known = self.preflights.get(host)
        if known is None:
            args = self.args
            known = await preflight(
                host,
                attempts=args.retry_count,
                sleep_seconds=args.retry_sleep_seconds,
                backoff=args.retry_backoff,
                resolve=self.resolve,
            )
            self.preflights[host] = known
        return known

    async def write_capture(
        self, result: TermResult, fetched: Fetched, index: int, term: str, run_id: str
    ) -> None:
        args = self.args
        path = self.capture_dir / capture_name(run_id, index, term)
        document = capture_document(
            run_id=run_id,
            term=term,
            location=args.location,
            sites=args.sites,
            fetched_at=utc_now_iso(),
            records=fetched.records,
        )
        try:
            await self.ctx.run_sync(write_json_atomic, path, document)
        except OSError as exc:
            result.capture_error = describe_os_error(exc)
            self.ctx.logger.warning("scrape term %d %s", index, result.capture_error)
        else:
            result.capture_path = self.ctx.plugin.display_path(path)


def summary_of(results: list[TermResult], totals: Totals, dry_run: bool) -> str:
    """One sentence for the top of the result; a run where every term failed says so first."""
    count = len(results)
    if count and totals.failed_terms == count:
        reasons = list(dict.fromkeys(r.error or "unknown reason" for r in results))
        why = reasons[0] if len(reasons) == 1 else f"{reasons[0]} (and other reasons, see results)"
        which = "The only term" if count == 1 else f"All {count} terms"
        return f"{which} failed; nothing was scraped or written. {why}"
    done = "would be offered (dry run)" if dry_run else "inserted"
    count_done = totals.cleaned_count if dry_run else totals.inserted_count
    failed = f", {totals.failed_terms} failed (see results)" if totals.failed_terms else ""
    return (
        f"{totals.successful_terms} of {count} terms scraped{failed}: {count_done} new jobs "
        f"{done}, {totals.duplicate_count} duplicates."
    )


def _summary(result: TermResult, dry_run: bool) -> str:
    if not result.success:
        return "failed"
    if dry_run:
        return f"{result.cleaned_count} of {result.fetched_count} would be offered (dry run)"
    return f"{result.inserted_count} inserted, {result.duplicate_count} duplicates"
