"""The SQLite jobs store on ``aiosqlite``, shared by the queue and scrape plugins.

The schema is the one the previous pipeline created, so its existing ``jobs.db`` files open
without migration. Nothing here switches the journal mode or alters existing rows. Readers never
write (:func:`connect_reader` says exactly what a read may touch). Connections are
:class:`~gateway_queue.connection.Connection` objects: a statement whose caller is cancelled is
interrupted, and its transaction rolled back whole.

Every public function takes a path as ``str`` or :class:`~pathlib.Path`. Errors are raised as
:class:`StoreError` whose ``reason`` never contains a path or SQL text. The store needs the
asyncio event loop (aiosqlite does), which is what the gateway runs on.
"""

from __future__ import annotations

import os
import time
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import anyio

from .connection import (
    READ_BUSY_TIMEOUT_S,
    Connection,
    Opening,
    SnapshotChanged,
    StoreError,
    open_connection,
    reader_target,
    require_file,
)
from .table import (
    ALLOWED_STATUSES,
    DEFAULT_DB_PATH,
    DEFAULT_PAGE_ROWS,
    JOB_FIELDS,
    PAGE_INDEX_STEPS_PER_ROW,
    IndexProgress,
)

__all__ = [
    "ALLOWED_STATUSES",
    "DEFAULT_DB_PATH",
    "DEFAULT_PAGE_ROWS",
    "JOB_FIELDS",
    "MAX_PAGE_CHARS",
    "PAGE_INDEX_NAME",
    "PAGE_INDEX_STEPS_PER_ROW",
    "Connection",
    "IndexProgress",
    "InitReport",
    "InsertCounts",
    "Keyset",
    "MissingJobsError",
    "NewJob",
    "SnapshotChanged",
    "StatusUpdate",
    "StoreError",
    "connect_existing_writer",
    "connect_reader",
    "connect_writer",
    "create_page_index",
    "ensure_indexes",
    "has_page_index",
    "init_store",
    "insert_jobs",
    "read_new_jobs",
    "read_new_jobs_page",
    "update_statuses",
    "utc_now",
]

StorePath = str | os.PathLike[str]


# The legacy schema, verbatim in meaning: existing databases were created with exactly this.
_CREATE_JOBS = """
CREATE TABLE IF NOT EXISTS jobs (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    job_id TEXT,
    title TEXT,
    company TEXT,
    description TEXT,
    url TEXT NOT NULL UNIQUE,
    location TEXT,
    source TEXT,
    status TEXT NOT NULL DEFAULT 'new',
    captured_at TEXT,
    payload_json TEXT NOT NULL,
    created_at TEXT NOT NULL,
    updated_at TEXT,
    resume_pdf_path TEXT,
    resume_written_at TEXT,
    run_id TEXT,
    attempt_count INTEGER DEFAULT 0,
    last_error TEXT
)
"""
STATUS_INDEX_NAME = "idx_jobs_status"
_CREATE_STATUS_INDEX = f"CREATE INDEX IF NOT EXISTS {STATUS_INDEX_NAME} ON jobs(status)"

# Speed index for the page query (filter on status, order by captured_at DESC, id DESC): with it
# every page is an index range scan with no sort, however deep the page. Adding an index never
# alters rows; CREATE INDEX IF NOT EXISTS makes it idempotent.
PAGE_INDEX_NAME = "idx_jobs_status_captured_at_id"
_CREATE_PAGE_INDEX = (
    f"CREATE INDEX IF NOT EXISTS {PAGE_INDEX_NAME} ON jobs(status, captured_at DESC, id DESC)"
)
_PROGRESS_EVERY_STEPS = 10_000

# Columns the store reads or writes; an existing table lacking one of them is not a jobs table
# we can work with, and we say so instead of failing later with a column error.
_REQUIRED_COLUMNS: tuple[str, ...] = (
    *JOB_FIELDS,
    "payload_json",
    "created_at",
    "updated_at",
    "attempt_count",
)


@dataclass(frozen=True)
class NewJob:
    """One normalized record to insert."""

    url: str
    title: str | None
    company: str | None
    description: str | None
    location: str | None
    source: str | None
    job_id: str | None
    captured_at: str | None  # ISO-8601 UTC text
    payload_json: str  # JSON text of the full raw record


@dataclass(frozen=True)
class InsertCounts:
    inserted: int
    duplicates: int


@dataclass(frozen=True)
class StatusUpdate:
    """One triage decision: set job ``id`` to ``status``."""

    id: int
    status: str


def utc_now() -> str:
    """Current UTC time as ISO-8601 text, e.g. ``2025-01-31T09:15:02Z``."""
    return datetime.now(UTC).isoformat(timespec="seconds").replace("+00:00", "Z")


class MissingJobsError(StoreError):
    """Some ids of a status update do not exist; nothing was changed."""

    def __init__(self, missing_ids: Sequence[int]) -> None:
        self.missing_ids: tuple[int, ...] = tuple(sorted(missing_ids))
        ids = ", ".join(str(i) for i in self.missing_ids)
        super().__init__(f"no job with id {ids}")


async def _check_jobs_table(conn: Connection, required: Sequence[str] = _REQUIRED_COLUMNS) -> None:
    cols = {row[1] for row in await conn.fetchall("PRAGMA table_info(jobs)")}
    if not cols:
        raise StoreError("the database has no jobs table")
    missing = [c for c in required if c not in cols]
    if missing:
        raise StoreError(
            "the jobs table does not have the expected columns (missing: "
            + ", ".join(missing)
            + ")"
        )


async def _check_writable_table(conn: Connection) -> None:
    """What a writer needs besides the columns: ``id`` must be the table's INTEGER PRIMARY
    KEY, as the pipeline creates it. Otherwise a reader refuses the file (a job without an id
    cannot be paged), so a writer must not go on filling it."""
    await _check_jobs_table(conn)
    columns = await conn.fetchall("PRAGMA table_info(jobs)")
    keys = [(row[1], str(row[2]).upper()) for row in columns if row[5]]
    if keys != [("id", "INTEGER")]:
        raise StoreError(
            "the jobs table's id column is not its INTEGER PRIMARY KEY (as the pipeline "
            "creates it), so its rows cannot all be read back; nothing was written"
        )


async def _checked(conn: Connection, check: Callable[[Connection], Awaitable[None]]) -> Connection:
    try:
        await check(conn)
    except BaseException:
        await conn.close()
        raise
    return conn


def connect_reader(path: StorePath) -> Opening:
    """Open read-only; ``FileNotFoundError`` if the file is missing, :class:`StoreError` if it
    cannot be opened or read as a jobs database.

    A read writes nothing, in any journal mode:

    - rollback journal (the legacy default): ``mode=ro``; SQLite takes a shared lock (an
      advisory ``fcntl`` lock, not a write) and releases it on close;
    - WAL with an empty or no ``-wal``: ``mode=ro&immutable=1``; only the main file is opened,
      without locks and without creating ``-wal``/``-shm``; its size and modification time are
      compared before and after, and a change (a checkpoint meanwhile) fails the read with the
      retryable :class:`SnapshotChanged`;
    - WAL with a ``-wal`` holding data and its ``-shm``: ``mode=ro&readonly_shm=1``; both are
      opened read-only, the read marks live in private memory, nothing is created or rewritten;
    - WAL with data but no ``-shm`` (a writer crashed): refused with a reason, because SQLite
      could only read it by creating ``-shm``.
    """

    return _reader(path, check=True)


def _reader(path: StorePath, *, check: bool) -> Opening:
    async def factory() -> Connection:
        p = Path(path)
        require_file(p)
        target, snapshot = reader_target(p)
        conn = await open_connection(
            target, uri=True, busy_timeout=READ_BUSY_TIMEOUT_S, snapshot=snapshot
        )
        if not check:
            return conn
        # A reader needs only the columns it returns.
        return await _checked(conn, lambda c: _check_jobs_table(c, JOB_FIELDS))

    return Opening(factory)


def connect_writer(path: StorePath, *, busy_timeout_s: float = 5.0) -> Opening:
    """Create parent folders, open read-write, create the exact legacy schema, ``idx_jobs_status``
    and the page index if missing (idempotent; never alters rows). Raises StoreError.

    On a large existing database without the page index, creating it takes seconds to minutes
    once (readers keep reading meanwhile)."""

    async def factory() -> Connection:
        p = Path(path)
        try:
            p.parent.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise StoreError("the folder for the database cannot be created") from exc
        conn = await open_connection(str(p), uri=False, busy_timeout=busy_timeout_s)
        return await _checked(conn, _bootstrap)

    return Opening(factory)


def connect_existing_writer(path: StorePath, *, busy_timeout_s: float = 2.0) -> Opening:
    """Open an existing jobs database read-write without creating anything.

    Raises FileNotFoundError if the file is missing, StoreError if it is not a usable jobs
    database. ``busy_timeout_s`` bounds how long a write waits for another writer's lock.
    """

    async def factory() -> Connection:
        p = Path(path)
        require_file(p)
        # mode=rw: never create the file, even if it disappears between the check and the open.
        conn = await open_connection(
            p.resolve().as_uri() + "?mode=rw", uri=True, busy_timeout=busy_timeout_s
        )
        return await _checked(conn, _check_writable_table)

    return Opening(factory)


async def _index_names(conn: Connection) -> set[str]:
    rows = await conn.fetchall("SELECT name FROM sqlite_master WHERE type IN ('table', 'index')")
    return {r[0] for r in rows}


async def _bootstrap(conn: Connection, *, report: list[str] | None = None) -> None:
    before = await _index_names(conn)
    await conn.execute(_CREATE_JOBS)
    await _check_writable_table(conn)
    await conn.execute(_CREATE_STATUS_INDEX)
    if PAGE_INDEX_NAME not in before:
        await _create_page_index(conn)
    if report is not None:
        after = await _index_names(conn)
        for name, what in (
            ("jobs", "table jobs"),
            (STATUS_INDEX_NAME, f"index {STATUS_INDEX_NAME}"),
            (PAGE_INDEX_NAME, f"index {PAGE_INDEX_NAME}"),
        ):
            if name in after and name not in before:
                report.append(what)


async def _create_page_index(conn: Connection, progress: IndexProgress | None = None) -> None:
    """Create the page index in one transaction that readers can read through until COMMIT."""
    if progress is not None:
        rows = await conn.fetchall("SELECT max(rowid) FROM jobs")
        progress.rows = int(rows[0][0] or 0)
        progress.started = time.monotonic()

        def tick() -> int:
            progress.steps += _PROGRESS_EVERY_STEPS
            return 0

        await conn.set_progress_handler(tick, _PROGRESS_EVERY_STEPS)
    # In rollback-journal mode, spilling dirty pages to the file mid-transaction needs an
    # exclusive lock, which would lock readers out for the rest of the build. With spilling
    # off the index is built in memory and readers are held up only during the COMMIT.
    await conn.execute("PRAGMA cache_spill = OFF")
    try:
        async with conn.transaction():
            await conn.execute(_CREATE_PAGE_INDEX)
    finally:
        if not conn.closed:
            with anyio.CancelScope(shield=True):
                await conn.execute("PRAGMA cache_spill = ON")
                if progress is not None:
                    await conn.set_progress_handler(None, 0)


async def has_page_index(conn: Connection) -> bool:
    rows = await conn.fetchall(
        "SELECT 1 FROM sqlite_master WHERE type = 'index' AND name = ?", (PAGE_INDEX_NAME,)
    )
    return bool(rows)


async def create_page_index(
    path: StorePath, *, progress: IndexProgress | None = None, busy_timeout_s: float = 60.0
) -> bool:
    """Create the page index (and ``idx_jobs_status``) on an existing database if missing.

    Returns whether the page index was created now. Never creates the database or the table,
    never alters rows; cancellation interrupts it and leaves the database as it was."""
    async with connect_existing_writer(path, busy_timeout_s=busy_timeout_s) as conn:
        await conn.execute(_CREATE_STATUS_INDEX)
        if await has_page_index(conn):
            return False
        await _create_page_index(conn, progress)
        return True


async def ensure_indexes(path: StorePath) -> None:
    """Create idx_jobs_status and the page index on an existing database if missing.

    For databases written by the previous pipeline: run once so that paging stays an index scan.
    Never creates the database or the table and never alters rows.
    """
    await create_page_index(path)


@dataclass(frozen=True)
class InitReport:
    """What :func:`init_store` did: ``created`` names the file and objects it had to create."""

    created_file: bool
    created: tuple[str, ...]


async def init_store(path: StorePath) -> InitReport:
    """Create the jobs store (folders, file, the exact legacy table, ``idx_jobs_status`` and the
    page index) where missing. Idempotent; an existing table is checked, never altered."""
    p = Path(path)
    existed = p.exists()
    report: list[str] = []

    async def bootstrap(conn: Connection) -> None:
        await _bootstrap(conn, report=report)

    try:
        p.parent.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise StoreError("the folder for the database cannot be created") from exc
    conn = await open_connection(str(p), uri=False, busy_timeout=30.0)
    await _checked(conn, bootstrap)
    await conn.close()
    return InitReport(created_file=not existed, created=tuple(report))


# --- writing -----------------------------------------------------------------------------------

_INSERT = """
INSERT INTO jobs (job_id, title, company, description, url, location, source, status,
                  captured_at, payload_json, created_at, attempt_count)
VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, 0)
ON CONFLICT(url) DO NOTHING
"""


async def insert_jobs(
    conn: Connection,
    jobs: Sequence[NewJob],
    *,
    status: str = "new",
    now: str | None = None,
) -> InsertCounts:
    """One transaction for the whole sequence: INSERT ... ON CONFLICT(url) DO NOTHING (an existing row
    is never modified), parameterized SQL, created_at = now (UTC ISO-8601), attempt_count 0.
    All or nothing: on any error or cancellation the transaction is rolled back.
    Duplicates within the same sequence count as duplicates."""
    if status not in ALLOWED_STATUSES:
        raise ValueError(f"status must be one of {', '.join(ALLOWED_STATUSES)}")
    if not jobs:
        return InsertCounts(inserted=0, duplicates=0)
    created_at = now or utc_now()
    rows = [
        (
            j.job_id,
            j.title,
            j.company,
            j.description,
            j.url,
            j.location,
            j.source,
            status,
            j.captured_at,
            j.payload_json,
            created_at,
        )
        for j in jobs
    ]
    async with conn.transaction():
        # executemany sums the rows each execution changed: 1 per insert, 0 per conflict.
        inserted = await conn.executemany(_INSERT, rows)
    return InsertCounts(inserted=inserted, duplicates=len(rows) - inserted)


async def update_statuses(
    conn: Connection, updates: Sequence[StatusUpdate], *, now: str | None = None
) -> str:
    """Set each job's status and updated_at in one transaction; all or nothing.

    Raises MissingJobsError (nothing changed) if any id does not exist, StoreError on a database
    problem (retryable when locked) or when the file fails the read below. Setting the same
    status again succeeds. Returns the updated_at value written.

    Before it writes, the transaction reads the first page a read returns
    (:data:`DEFAULT_PAGE_ROWS` new jobs) with :func:`read_new_jobs_page` itself: a file whose next
    read fails (a corrupt page, a job without an id) gets no write either. The update's own
    statements only touch the pages of its jobs, so a damaged page elsewhere would not stop it.
    """
    for u in updates:
        if u.status not in ALLOWED_STATUSES:
            raise ValueError(f"status must be one of {', '.join(ALLOWED_STATUSES)}")
    updated_at = now or utc_now()
    ids = [u.id for u in updates]
    async with conn.transaction():
        await read_new_jobs_page(conn, DEFAULT_PAGE_ROWS)
        placeholders = ", ".join("?" for _ in ids)
        found = {
            r[0]
            for r in await conn.fetchall(f"SELECT id FROM jobs WHERE id IN ({placeholders})", ids)
        }
        missing = [i for i in ids if i not in found]
        if missing:
            raise MissingJobsError(missing)
        await conn.executemany(
            "UPDATE jobs SET status = ?, updated_at = ? WHERE id = ?",
            [(u.status, updated_at, u.id) for u in updates],
        )
    return updated_at


# --- reading new jobs page by page -------------------------------------------------------------
#
# Order: captured_at DESC, id DESC. SQLite sorts NULL lowest, so in this order NULL captured_at
# rows come last, after every non-NULL value; ids are unique, so the order is total. A page
# continues after the keyset (captured_at, id) of the previous page's last row:
#   - key captured_at not NULL: rows with (captured_at, id) < key (row-value comparison; a NULL
#     captured_at makes it NULL, so those rows are excluded here), then every NULL row;
#   - key captured_at NULL: NULL rows with id < key id.
# Every query is a range of the page index in its own order (the NULL part too: captured_at IS
# NULL is an equality on the index's second column), so no sort is needed.

_COLUMNS = ", ".join(JOB_FIELDS)
PAGE_QUERY_FIRST = (
    f"SELECT {_COLUMNS} FROM jobs WHERE status = 'new' ORDER BY captured_at DESC, id DESC LIMIT ?"
)
PAGE_QUERY_AFTER_VALUE = (
    f"SELECT {_COLUMNS} FROM jobs WHERE status = 'new' AND (captured_at, id) < (?, ?) "
    "ORDER BY captured_at DESC, id DESC LIMIT ?"
)
PAGE_QUERY_NULLS = (
    f"SELECT {_COLUMNS} FROM jobs WHERE status = 'new' AND captured_at IS NULL AND id < ? "
    "ORDER BY captured_at DESC, id DESC LIMIT ?"
)
_NO_ID_BOUND = 2**63 - 1  # every id is below it: "all NULL rows"

CapturedAt = str | bytes | None


@dataclass(frozen=True)
class Keyset:
    """Position after a row in (captured_at DESC, id DESC) order."""

    captured_at: CapturedAt
    id: int


def _check_ids(rows: list[tuple[Any, ...]]) -> None:
    for row in rows:
        if type(row[0]) is not int:
            what = "no id (NULL)" if row[0] is None else "an id that is not an integer"
            raise StoreError(
                f"a new job in the jobs table has {what}; its id column must be the table's "
                "INTEGER PRIMARY KEY, as the pipeline creates it: fix or remove such rows"
            )


#: A page stops at about this many characters of job text, however many jobs ``limit`` allows
#: (1,000 jobs of 200 KB made one 382 MB line): ``has_more`` then says to ask for the rest.
MAX_PAGE_CHARS = 4_000_000


def _row_chars(row: tuple[Any, ...]) -> int:
    return sum(len(v) if isinstance(v, str | bytes) else 8 for v in row)


@dataclass(eq=False)  # compared by identity: no __eq__ to compile at start
class _Page:
    """Rows taken for one page: at most ``limit``, and no more characters than ``left``
    (except the first row, so that every page moves on)."""

    limit: int
    left: int
    rows: list[tuple[Any, ...]] = field(default_factory=list)
    more: bool = False

    def take(self, row: tuple[Any, ...]) -> bool:
        size = _row_chars(row)
        if len(self.rows) == self.limit or (self.rows and size > self.left):
            self.more = True
            return False
        self.rows.append(row)
        self.left -= size
        return True


async def read_new_jobs_page(
    conn: Connection, limit: int, after: Keyset | None = None, *, max_chars: int = MAX_PAGE_CHARS
) -> tuple[list[tuple[Any, ...]], bool]:
    """Up to ``limit`` rows (columns :data:`JOB_FIELDS`) with status 'new' after ``after``, and
    no more than ``max_chars`` characters of them (at least one row).

    Returns ``(rows, has_more)``. Reads only, row by row: memory stays bounded by the page.
    Raises StoreError.
    """
    want = limit + 1  # one extra row tells us whether another page exists
    page = _Page(limit, max_chars)
    if after is None:
        await conn.fetch_while(PAGE_QUERY_FIRST, (want,), page.take)
    elif after.captured_at is None:
        await conn.fetch_while(PAGE_QUERY_NULLS, (after.id, want), page.take)
    else:
        await conn.fetch_while(
            PAGE_QUERY_AFTER_VALUE, (after.captured_at, after.id, want), page.take
        )
        if not page.more:
            await conn.fetch_while(
                PAGE_QUERY_NULLS, (_NO_ID_BOUND, want - len(page.rows)), page.take
            )
    _check_ids(page.rows)
    return page.rows, page.more


async def read_new_jobs(
    path: StorePath, limit: int, after: Keyset | None = None, *, max_chars: int = MAX_PAGE_CHARS
) -> tuple[list[tuple[Any, ...]], bool]:
    """Open ``path`` read-only, read one page (:func:`read_new_jobs_page`), close it.

    A lock-free read that met a concurrent checkpoint is read again once. The page query itself
    checks the table (a missing table or column fails it with that reason): one round trip
    to the connection's thread less than :func:`connect_reader`."""
    for attempt in range(2):
        try:
            async with _reader(path, check=False) as conn:
                return await read_new_jobs_page(conn, limit, after, max_chars=max_chars)
        except SnapshotChanged:
            if attempt:
                raise
    raise AssertionError("unreachable")  # pragma: no cover
