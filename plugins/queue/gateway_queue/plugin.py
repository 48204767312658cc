"""The queue plugin: read new jobs page by page, write triage decisions back.

Steps 2 and 3 of the job-search pipeline. The scrape plugin fills the jobs table through
``gateway_queue.store``; a triage agent drains the ``new`` jobs with ``bulk_read_new_jobs`` and
records what it decided with ``bulk_update_job_status``.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator

from gateway import (
    ErrorCode,
    GatewayError,
    HealthCheck,
    Mutation,
    NotInitialized,
    PluginContext,
    Tier,
    ToolContext,
    ToolSpec,
    env_field,
    hookimpl,
)

from . import prompts, table
from .cursor import MAX_CURSOR_CHARS, CursorError, decode_cursor, encode_cursor
from .indexing import BackgroundIndex

if TYPE_CHECKING:
    # The store (its code and the SQLite driver, ~4 ms) is imported by the functions that
    # open the database: a gateway start only declares the tools, and lists them.
    from . import store

MAX_READ_LIMIT = 1000
MAX_UPDATES = 100
MAX_NOTES_CHARS = 2000
_INDEX = "page_index"  # plugin.resources key of the BackgroundIndex
Status = Literal["new", "shortlist", "reviewed", "reject", "resume_written", "applied"]


class Settings(BaseModel):
    model_config = ConfigDict(extra="forbid")
    db_path: str = env_field(
        "JOBS_DB_PATH",
        default=table.DEFAULT_DB_PATH,
        description="The jobs database, relative to the working directory (inside the data roots).",
    )
    busy_timeout: float = env_field(
        "JOBS_DB_BUSY_TIMEOUT",
        default=2.0,
        description="Seconds a status update keeps retrying while another writer holds the lock.",
    )
    auto_index: bool = env_field(
        "JOBS_DB_AUTO_INDEX",
        default=True,
        description="Create the page index of db_path in the background when it is missing "
        "(never in a read-only deployment).",
    )

    @field_validator("busy_timeout")
    @classmethod
    def _busy_timeout_range(cls, v: float) -> float:
        if not 0 < v <= 60:
            raise ValueError("must be more than 0 and at most 60 seconds")
        return v


_DB_PATH_FIELD = Field(
    None,
    max_length=1024,
    description=f"Jobs database to use instead of the configured one ({table.DEFAULT_DB_PATH} "
    "by default); must lie inside the gateway's data roots.",
)


# --- bulk_read_new_jobs ------------------------------------------------------------------------


class ReadArgs(BaseModel):
    model_config = ConfigDict(extra="forbid")
    limit: int = Field(
        table.DEFAULT_PAGE_ROWS,
        strict=True,
        description=f"Batch size: at most this many jobs (1-{MAX_READ_LIMIT}, "
        f"default {table.DEFAULT_PAGE_ROWS}).",
        json_schema_extra={"minimum": 1, "maximum": MAX_READ_LIMIT},
    )
    cursor: str | None = Field(
        None,
        strict=True,
        description="next_cursor from the previous page; omit it for the first page.",
        json_schema_extra={"maxLength": MAX_CURSOR_CHARS},
    )
    db_path: str | None = _DB_PATH_FIELD

    @field_validator("limit")
    @classmethod
    def _limit_range(cls, v: int) -> int:
        # Said in the words the pipeline's agents were written against.
        if v < 1:
            raise ValueError("invalid batch size: must be at least 1")
        if v > MAX_READ_LIMIT:
            raise ValueError(
                f"batch size too large: must be at most {MAX_READ_LIMIT}; "
                "page through the rest with next_cursor"
            )
        return v

    @field_validator("cursor")
    @classmethod
    def _cursor_valid(cls, v: str | None) -> str | None:
        if v is not None:
            try:
                decode_cursor(v)
            except CursorError:
                raise ValueError(
                    "malformed or invalid cursor; pass next_cursor exactly as returned, "
                    "or omit cursor to start from the first page"
                ) from None
        return v


class Job(BaseModel):
    id: int
    job_id: str | None
    title: str | None
    company: str | None
    description: str | None
    url: str | None
    location: str | None
    source: str | None
    status: str | None
    captured_at: str | None


class ReadResult(BaseModel):
    jobs: list[Job]
    count: int = Field(description="Number of jobs in this page.")
    has_more: bool = Field(description="Whether another page follows.")
    next_cursor: str | None = Field(
        description="Pass as cursor to get the next page; null when has_more is false."
    )


def _text(value: Any) -> str | None:
    # Columns are TEXT, but a legacy row may hold a BLOB; the contract is JSON strings or null.
    if value is None or isinstance(value, str):
        return value
    if isinstance(value, bytes):
        return value.decode("utf-8", errors="replace")
    return str(value)


def _job(row: tuple[Any, ...]) -> Job:
    # The values are made exactly what Job declares (int id, str or None), so construct without
    # re-validating 1000 descriptions of ~3 KB per page; the result is dumped from the model.
    values: dict[str, Any] = {k: _text(v) for k, v in zip(table.JOB_FIELDS, row, strict=True)}
    values["id"] = int(row[0])
    return Job.model_construct(**values)


def _resolve(ctx: ToolContext[Settings], db_path: str | None) -> Path:
    return ctx.plugin.resolve_data_path(db_path or ctx.settings.db_path, field_name="db_path")


def _db_error(ctx: ToolContext[Settings], path: Path, exc: BaseException) -> GatewayError:
    from . import store

    shown = ctx.plugin.display_path(path)
    if isinstance(exc, FileNotFoundError):
        return GatewayError(
            ErrorCode.DB_NOT_FOUND,
            f"jobs database not found at {shown}; run the scrape step first (or python -m "
            "gateway_queue init for an empty one), or pass db_path of an existing jobs database",
        )
    assert isinstance(exc, store.StoreError)
    advice = (
        "retry in a few seconds" if exc.retryable else "check the file, or pass another db_path"
    )
    builder = ctx.resources.get(_INDEX)
    if (
        exc.retryable
        and isinstance(builder, BackgroundIndex)
        and builder.building
        and builder.path == path
    ):
        advice = (
            "the gateway is creating the page index of this database in the background "
            f"({builder.progress_text()}; gateway_status shows it); retry in a minute"
        )
    return GatewayError(
        ErrorCode.DB_ERROR,
        f"jobs database {shown} cannot be used: {exc.reason}; {advice}",
        retryable=exc.retryable,
    )


async def bulk_read_new_jobs(args: ReadArgs, ctx: ToolContext[Settings]) -> ReadResult:
    from . import store

    path = _resolve(ctx, args.db_path)
    after = decode_cursor(args.cursor) if args.cursor is not None else None
    try:
        rows, has_more = await store.read_new_jobs(path, args.limit, after)
    except (FileNotFoundError, store.StoreError) as exc:
        raise _db_error(ctx, path, exc) from None
    jobs = [_job(r) for r in rows]
    next_cursor = None
    if has_more:
        last = rows[-1]
        next_cursor = encode_cursor(store.Keyset(captured_at=last[-1], id=last[0]))
    return ReadResult(jobs=jobs, count=len(jobs), has_more=has_more, next_cursor=next_cursor)


# --- bulk_update_job_status --------------------------------------------------------------------


class UpdateItem(BaseModel):
    model_config = ConfigDict(extra="forbid")
    id: int = Field(strict=True, ge=1, description="Job id (the id field from bulk_read_new_jobs).")
    status: Status = Field(description="The new status.")
    notes: str | None = Field(
        None,
        max_length=MAX_NOTES_CHARS,
        description="Why (optional). Written to the gateway log with the call; the jobs table "
        "has no column for it.",
    )


class UpdateArgs(BaseModel):
    model_config = ConfigDict(extra="forbid")
    updates: list[UpdateItem] = Field(
        min_length=1,
        max_length=MAX_UPDATES,
        description=f"1-{MAX_UPDATES} decisions, each job at most once; applied all or nothing.",
    )
    db_path: str | None = _DB_PATH_FIELD

    @field_validator("updates")
    @classmethod
    def _unique_ids(cls, items: list[UpdateItem]) -> list[UpdateItem]:
        seen: dict[int, int] = {}
        clashes: list[str] = []
        for index, item in enumerate(items):
            if item.id in seen:
                clashes.append(f"id {item.id} at items {seen[item.id]} and {index}")
            else:
                seen[item.id] = index
        if clashes:
            raise ValueError(
                "duplicate " + "; ".join(clashes) + "; send each job at most once per batch"
            )
        return items


class UpdateItemResult(BaseModel):
    id: int
    success: bool
    error: str | None = Field(default=None, description="Why this item was not applied.")


class UpdateResult(BaseModel):
    updated_count: int
    failed_count: int
    results: list[UpdateItemResult] = Field(description="One entry per update, in input order.")


async def _apply(path: Path, updates: list[store.StatusUpdate], busy_timeout: float) -> None:
    from . import store

    async with store.connect_existing_writer(path, busy_timeout_s=busy_timeout) as conn:
        await store.update_statuses(conn, updates)


async def bulk_update_job_status(args: UpdateArgs, ctx: ToolContext[Settings]) -> UpdateResult:
    from . import store

    path = _resolve(ctx, args.db_path)
    updates = [store.StatusUpdate(id=u.id, status=u.status) for u in args.updates]
    try:
        await _apply(path, updates, ctx.settings.busy_timeout)
    except store.MissingJobsError as exc:
        # All or nothing, and an error result: nothing changed, so the model must notice and the
        # audit log must not say OK. Each thing is said once: the ids in details, the rule here.
        raise GatewayError(
            ErrorCode.NOT_FOUND,
            "the jobs in details.missing_ids do not exist, so nothing in this batch was "
            "applied (all or nothing): resend it without them",
            details={"missing_ids": list(exc.missing_ids)},
        ) from None
    except (FileNotFoundError, store.StoreError) as exc:
        raise _db_error(ctx, path, exc) from None
    for u in args.updates:
        if u.notes:
            ctx.logger.info(
                "correlation_id=%s job %d set to %s: %s",
                ctx.correlation_id,
                u.id,
                u.status,
                u.notes,
            )
    return UpdateResult(
        updated_count=len(updates),
        failed_count=0,
        results=[UpdateItemResult(id=u.id, success=True) for u in args.updates],
    )


# --- hooks -------------------------------------------------------------------------------------


@hookimpl
def plugin_settings() -> type[BaseModel]:
    return Settings


@hookimpl
def register_tools(register: Any) -> None:
    register(
        ToolSpec(
            name="bulk_read_new_jobs",
            title="Read new jobs",
            description=(
                "Read jobs with status 'new' from the jobs database in batches, newest capture "
                "first (captured_at DESC, id DESC). Each job has id, job_id, title, company, "
                "description, url, location, source, status and captured_at (null when missing). "
                "When has_more is true, call again with cursor=next_cursor for the next page. "
                "Read-only: use bulk_update_job_status to record decisions. Descriptions are "
                "long (often ~3 KB): in clients that cap tool output (Claude Code, ~25k tokens by "
                "default) prefer limit 10-20."
            ),
            input_model=ReadArgs,
            output_model=ReadResult,
            handler=bulk_read_new_jobs,
            tier=Tier.READ,
            # The default 50 jobs with ~3 KB descriptions is well above 50k characters.
            max_result_chars=500_000,
        )
    )
    register(
        ToolSpec(
            name="bulk_update_job_status",
            title="Update job statuses",
            description=(
                "Record triage decisions: set the status of 1-100 jobs at once "
                "(new, shortlist, reviewed, reject, resume_written, applied), all or nothing. "
                "If any id does not exist nothing changes and the NOT_FOUND error names the "
                "missing ids. "
                "Setting the same status again succeeds (safe to retry)."
            ),
            input_model=UpdateArgs,
            output_model=UpdateResult,
            handler=bulk_update_job_status,
            tier=Tier.MUTATION,
            mutation=Mutation(
                consequence="sets status and updated_at of the given jobs in the jobs database",
                requires="the jobs database exists and every id in the batch is an existing job",
                reversible=True,
                destructive=False,
                idempotent=True,
            ),
        )
    )


@hookimpl
def register_health_checks(register: Any, plugin: PluginContext[Settings]) -> None:
    async def jobs_db() -> str:
        from . import store

        path = plugin.resolve_data_path(plugin.settings.db_path, field_name="db_path")
        shown = plugin.display_path(path)
        try:
            async with store.connect_reader(path) as conn:
                indexed = await store.has_page_index(conn)
        except FileNotFoundError:
            raise NotInitialized(
                f"{shown} does not exist yet: the first scrape_jobs run creates it, "
                "or run: python -m gateway_queue init"
            ) from None
        except store.StoreError as exc:
            raise RuntimeError(f"{shown}: {exc.reason}") from None
        if not os.access(path, os.W_OK):
            return f"{shown} readable but not writable: status updates will fail"
        if indexed:
            return f"{shown} ok"
        builder = plugin.resources.get(_INDEX)
        if isinstance(builder, BackgroundIndex) and builder.path == path:
            return f"{shown} ok; {builder.describe()}"
        why = (
            "the deployment is read-only, so the gateway does not create it"
            if plugin.read_only
            else "automatic creation is off (auto_index)"
        )
        return (
            f"{shown} ok; page index missing, so pages are slower ({why}); run: "
            f"python -m gateway_queue ensure-indexes --db {shown}"
        )

    register(HealthCheck(name="jobs_db", check=jobs_db))


@hookimpl
def open_resources(plugin: PluginContext[Settings]) -> None:
    # Creating an index writes to the user's file: only when the deployment may write.
    if plugin.read_only or not plugin.settings.auto_index:
        return
    try:
        path = plugin.resolve_data_path(plugin.settings.db_path, field_name="db_path")
    except GatewayError as exc:  # a bad setting shows in the health check; nothing to index
        plugin.logger.warning("page index: %s", exc.message)
        return
    builder = BackgroundIndex(path, plugin.display_path(path), plugin.logger)
    plugin.resources[_INDEX] = builder
    builder.start()


@hookimpl
async def close_resources(plugin: PluginContext[Settings]) -> None:
    builder = plugin.resources.pop(_INDEX, None)
    if isinstance(builder, BackgroundIndex):
        await builder.stop()


@hookimpl
def register_prompts(register: Any) -> None:
    for spec in prompts.prompts():
        register(spec)
