"""The SQLite jobs store: plain synchronous sqlite3, shared by the queue and scrape plugins.

Handlers call these functions through ``ctx.run_sync(...)``. The schema is the one the previous
pipeline created, so its existing ``jobs.db`` files open without migration. Nothing here switches
the journal mode (WAL would change existing users' files) or alters existing rows.

Errors are raised as :class:`StoreError` whose ``reason`` never contains a path or SQL text.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

ALLOWED_STATUSES: tuple[str, ...] = (
    "new",
    "shortlist",
    "reviewed",
    "reject",
    "resume_written",
    "applied",
)
JOB_FIELDS: tuple[str, ...] = (
    "id",
    "job_id",
    "title",
    "company",
    "description",
    "url",
    "location",
    "source",
    "status",
    "captured_at",
)
DEFAULT_DB_PATH = "data/capture/jobs.db"

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
_CREATE_STATUS_INDEX = "CREATE INDEX IF NOT EXISTS idx_jobs_status ON jobs(status)"

# Speed index for the page query (filter on status, order by captured_at DESC, id DESC): with it
# every page is an index range scan with no sort, however deep the page. Adding an index never
# alters rows; CREATE INDEX IF NOT EXISTS makes it idempotent.
PAGE_INDEX_NAME = "idx_jobs_status_captured_at_id"
_CREATE_PAGE_INDEX = (
    f"CREATE INDEX IF NOT EXISTS {PAGE_INDEX_NAME} ON jobs(status, captured_at DESC, id DESC)"
)

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


class StoreError(Exception):
    """DB problem; `.reason` is a short human reason with NO path and NO SQL text;
    `.retryable` is True for 'database is locked/busy'."""

    def __init__(self, reason: str, *, retryable: bool = False) -> None:
        super().__init__(reason)
        self.reason = reason
        self.retryable = retryable


class MissingJobsError(StoreError):
    """Some ids of a status update do not exist; nothing was changed."""

    def __init__(self, missing_ids: Sequence[int]) -> None:
        self.missing_ids: tuple[int, ...] = tuple(sorted(missing_ids))
        ids = ", ".join(str(i) for i in self.missing_ids)
        super().__init__(f"no job with id {ids}")


def utc_now() -> str:
    """Current UTC time as ISO-8601 text, e.g. ``2025-01-31T09:15:02Z``."""
    return datetime.now(UTC).isoformat(timespec="seconds").replace("+00:00", "Z")


# SQLite primary result codes -> reasons that are safe to show (no path, no SQL).
_REASONS: dict[int, str] = {
    3: "permission denied by the database",
    8: "the database file is read-only",
    10: "disk I/O error while accessing the database file",
    11: "the database file is corrupt",
    13: "the disk is full",
    14: "the database file cannot be opened",
    19: "a row violates a constraint of the jobs table",
    23: "access to the database was denied",
    26: "the file is not a SQLite database",
}
_BUSY_CODES = (5, 6)  # SQLITE_BUSY, SQLITE_LOCKED


def _store_error(exc: sqlite3.Error) -> StoreError:
    """Translate a sqlite3 error into a StoreError whose reason is safe to show."""
    code = getattr(exc, "sqlite_errorcode", None)
    primary = code & 0xFF if isinstance(code, int) else None
    text = str(exc).lower()
    if primary in _BUSY_CODES or "locked" in text or "busy" in text:
        return StoreError(
            "the database is locked by another writer; try again in a few seconds",
            retryable=True,
        )
    if primary in _REASONS:
        return StoreError(_REASONS[primary])
    if "no such table" in text:
        return StoreError("the database has no jobs table")
    if "no such column" in text or "has no column" in text:
        return StoreError("the jobs table does not have the expected columns")
    if "not a database" in text:
        return StoreError(_REASONS[26])
    if "malformed" in text or "corrupt" in text:
        return StoreError(_REASONS[11])
    if "unable to open" in text:
        return StoreError(_REASONS[14])
    name = getattr(exc, "sqlite_errorname", None) or type(exc).__name__
    return StoreError(f"database error ({name})")


@contextmanager
def translate_errors() -> Iterator[None]:
    """Re-raise any sqlite3 error inside the block as a StoreError."""
    try:
        yield
    except sqlite3.Error as exc:
        raise _store_error(exc) from exc


def _check_jobs_table(
    conn: sqlite3.Connection, required: Sequence[str] = _REQUIRED_COLUMNS
) -> None:
    cols = {row[1] for row in conn.execute("PRAGMA table_info(jobs)")}
    if not cols:
        raise StoreError("the database has no jobs table")
    missing = [c for c in required if c not in cols]
    if missing:
        raise StoreError(
            "the jobs table does not have the expected columns (missing: "
            + ", ".join(missing)
            + ")"
        )


def _require_file(path: Path) -> None:
    if not path.exists():
        raise FileNotFoundError(path)
    if not path.is_file():
        raise StoreError("the path is a folder or a special file, not a database file")


def _open(target: str, *, uri: bool, timeout: float) -> sqlite3.Connection:
    # isolation_level=None: we issue BEGIN/COMMIT ourselves, so a transaction is exactly what we
    # say it is. check_same_thread=False: ctx.run_sync may run consecutive calls on different
    # worker threads; each connection is still used by one caller at a time.
    with translate_errors():
        return sqlite3.connect(
            target, uri=uri, timeout=timeout, isolation_level=None, check_same_thread=False
        )


def connect_writer(path: Path, *, busy_timeout_s: float = 5.0) -> sqlite3.Connection:
    """Create parent folders, open read-write, create the exact legacy schema + idx_jobs_status
    if missing (idempotent; never alters existing rows), return the connection. Raises StoreError.

    Also creates the page index (:data:`PAGE_INDEX_NAME`) if missing; on a large existing database
    that takes a few seconds once.
    """
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise StoreError("the folder for the database cannot be created") from exc
    conn = _open(str(path), uri=False, timeout=busy_timeout_s)
    try:
        with translate_errors():
            conn.execute(_CREATE_JOBS)
            _check_jobs_table(conn)
            conn.execute(_CREATE_STATUS_INDEX)
            conn.execute(_CREATE_PAGE_INDEX)
    except BaseException:
        conn.close()
        raise
    return conn


def connect_existing_writer(path: Path, *, busy_timeout_s: float = 2.0) -> sqlite3.Connection:
    """Open an existing jobs database read-write without creating anything.

    Raises FileNotFoundError if the file is missing, StoreError if it is not a usable jobs
    database. ``busy_timeout_s`` bounds how long a write waits for another writer's lock.
    """
    _require_file(path)
    # mode=rw: never create the file, even if it disappears between the check and the open.
    conn = _open(path.resolve().as_uri() + "?mode=rw", uri=True, timeout=busy_timeout_s)
    try:
        with translate_errors():
            _check_jobs_table(conn)
    except BaseException:
        conn.close()
        raise
    return conn


def connect_reader(path: Path) -> sqlite3.Connection:
    """Open read-only with a `file:...?mode=ro` URI. Raises FileNotFoundError if the file is missing,
    StoreError if it cannot be opened/read as a jobs database."""
    _require_file(path)
    conn = _open(path.resolve().as_uri() + "?mode=ro", uri=True, timeout=5.0)
    try:
        with translate_errors():
            _check_jobs_table(conn, JOB_FIELDS)  # a reader needs only the columns it returns
    except BaseException:
        conn.close()
        raise
    return conn


def ensure_indexes(path: Path) -> None:
    """Create idx_jobs_status and the page index on an existing database if missing.

    For databases written by the previous pipeline: run once so that paging stays an index scan.
    Never creates the database or the table and never alters rows.
    """
    conn = connect_existing_writer(path, busy_timeout_s=30.0)
    try:
        with translate_errors():
            conn.execute(_CREATE_STATUS_INDEX)
            conn.execute(_CREATE_PAGE_INDEX)
    finally:
        conn.close()


def has_page_index(conn: sqlite3.Connection) -> bool:
    with translate_errors():
        row = conn.execute(
            "SELECT 1 FROM sqlite_master WHERE type = 'index' AND name = ?", (PAGE_INDEX_NAME,)
        ).fetchone()
    return row is not None


@contextmanager
def _transaction(conn: sqlite3.Connection) -> Iterator[None]:
    """BEGIN IMMEDIATE ... COMMIT, or a savepoint inside a caller's open transaction.

    Rolls back on any exception, so the block is all or nothing.
    """
    if conn.in_transaction:
        conn.execute("SAVEPOINT gateway_queue")
        try:
            yield
        except BaseException:
            conn.execute("ROLLBACK TO gateway_queue")
            conn.execute("RELEASE gateway_queue")
            raise
        conn.execute("RELEASE gateway_queue")
        return
    conn.execute("BEGIN IMMEDIATE")
    try:
        yield
    except BaseException:
        if conn.in_transaction:
            conn.execute("ROLLBACK")
        raise
    conn.execute("COMMIT")


_INSERT = """
INSERT INTO jobs (job_id, title, company, description, url, location, source, status,
                  captured_at, payload_json, created_at, attempt_count)
VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, 0)
ON CONFLICT(url) DO NOTHING
"""


def insert_jobs(
    conn: sqlite3.Connection,
    jobs: Sequence[NewJob],
    *,
    status: str = "new",
    now: str | None = None,
) -> InsertCounts:
    """One transaction for the whole sequence: INSERT ... ON CONFLICT(url) DO NOTHING (an existing row
    is never modified), parameterized SQL, created_at = now (UTC ISO-8601), attempt_count 0.
    All or nothing: on any error the transaction is rolled back and StoreError is raised.
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
    inserted = 0
    with translate_errors(), _transaction(conn):
        for row in rows:
            # rowcount is 1 for an inserted row and 0 for a conflict (DO NOTHING).
            inserted += conn.execute(_INSERT, row).rowcount
    return InsertCounts(inserted=inserted, duplicates=len(rows) - inserted)


# --- Reading new jobs page by page -------------------------------------------------------------
#
# Order: captured_at DESC, id DESC. SQLite sorts NULL lowest, so in this order NULL captured_at
# rows come last, after every non-NULL value; ids are unique, so the order is total. A page
# continues after the keyset (captured_at, id) of the previous page's last row:
#   - key captured_at not NULL: rows with (captured_at, id) < key (row-value comparison; a NULL
#     captured_at makes it NULL, so those rows are excluded here), then every NULL row;
#   - key captured_at NULL: NULL rows with id < key id.
# Every query is a range of the page index in its own order, so no sort is needed.

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


def _fetch(conn: sqlite3.Connection, sql: str, params: tuple[Any, ...]) -> list[tuple[Any, ...]]:
    return conn.execute(sql, params).fetchall()


def read_new_jobs_page(
    conn: sqlite3.Connection, limit: int, after: Keyset | None = None
) -> tuple[list[tuple[Any, ...]], bool]:
    """Up to ``limit`` rows (columns :data:`JOB_FIELDS`) with status 'new' after ``after``.

    Returns ``(rows, has_more)``. Reads only; raises StoreError.
    """
    want = limit + 1  # one extra row tells us whether another page exists
    with translate_errors():
        if after is None:
            rows = _fetch(conn, PAGE_QUERY_FIRST, (want,))
        elif after.captured_at is None:
            rows = _fetch(conn, PAGE_QUERY_NULLS, (after.id, want))
        else:
            rows = _fetch(conn, PAGE_QUERY_AFTER_VALUE, (after.captured_at, after.id, want))
            if len(rows) < want:
                rows += _fetch(conn, PAGE_QUERY_NULLS, (_NO_ID_BOUND, want - len(rows)))
    return rows[:limit], len(rows) > limit


def update_statuses(
    conn: sqlite3.Connection, updates: Sequence[StatusUpdate], *, now: str | None = None
) -> str:
    """Set each job's status and updated_at in one transaction; all or nothing.

    Raises MissingJobsError (nothing changed) if any id does not exist, StoreError on a database
    problem (retryable when locked). Setting the same status again succeeds. Returns the
    updated_at value written.
    """
    for u in updates:
        if u.status not in ALLOWED_STATUSES:
            raise ValueError(f"status must be one of {', '.join(ALLOWED_STATUSES)}")
    updated_at = now or utc_now()
    ids = [u.id for u in updates]
    with translate_errors(), _transaction(conn):
        placeholders = ", ".join("?" for _ in ids)
        found = {
            r[0] for r in conn.execute(f"SELECT id FROM jobs WHERE id IN ({placeholders})", ids)
        }
        missing = [i for i in ids if i not in found]
        if missing:
            raise MissingJobsError(missing)
        conn.executemany(
            "UPDATE jobs SET status = ?, updated_at = ? WHERE id = ?",
            [(u.status, updated_at, u.id) for u in updates],
        )
    return updated_at
