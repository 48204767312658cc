"""SQLite connections for the jobs store: aiosqlite, interrupted on cancellation, never a
write from a reader.

A :class:`Connection` runs its statements on a thread of its own (aiosqlite) and is awaited from
the event loop. When the task awaiting a statement is cancelled (the client cancelled the call,
or its time limit passed), the statement is interrupted (``sqlite3_interrupt``) and the
connection closed before the cancellation goes on: no query outlives its call, and an open
transaction is rolled back whole. Waits for another writer's lock are polled in short slices for
the same reason: SQLite's own busy handler cannot be interrupted.

Errors are :class:`StoreError`, whose ``reason`` never contains a path or SQL text.
"""

from __future__ import annotations

import logging
import os
import re
import threading
from collections.abc import AsyncIterator, Awaitable, Callable, Coroutine, Generator, Sequence
from concurrent.futures import ThreadPoolExecutor
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

import anyio

from gateway.telemetry import current

if TYPE_CHECKING:
    # Imported by the first connection (open_connection), not with the plugin: a gateway
    # start loads this module to register the queue's tools and opens no database then.
    import sqlite3

    import aiosqlite

log = logging.getLogger("gateway_queue.store")

T = TypeVar("T")

#: Seconds SQLite's own busy handler waits per attempt. A lock wait inside SQLite cannot be
#: interrupted, so longer waits are made of these slices, with a cancellation point between.
BUSY_SLICE_S = 0.1
_BUSY_PAUSE_S = 0.02
#: Seconds a reader waits for a writer's commit before giving up (retryable).
READ_BUSY_TIMEOUT_S = 5.0
#: Upper bound on waiting for an interrupted statement to stop and its connection to close.
CLOSE_WAIT_S = 10.0


class StoreError(Exception):
    """DB problem; `.reason` is a short human reason with NO path and NO SQL text;
    `.retryable` is True for 'database is locked/busy'."""

    def __init__(self, reason: str, *, retryable: bool = False, busy: bool = False) -> None:
        super().__init__(reason)
        self.reason = reason
        self.retryable = retryable or busy
        self.busy = busy


class SnapshotChanged(StoreError):
    """The file changed while it was read without locks (see :func:`connect_reader`)."""

    def __init__(self) -> None:
        super().__init__("the database changed while it was read; try again", retryable=True)


# SQLite primary result codes -> reasons that are safe to show (no path, no SQL).
_REASONS: dict[int, str] = {
    3: "permission denied by the database",
    8: "the database file is read-only",
    9: "the operation was interrupted",
    10: "disk I/O error while accessing the database file",
    11: "the database file is corrupt",
    13: "the disk is full",
    14: "the database file cannot be opened",
    19: "a row violates a constraint of the jobs table",
    23: "access to the database was denied",
    26: "the file is not a SQLite database",
}
_EXTENDED_REASONS: dict[int, str] = {
    # SQLITE_READONLY_ROLLBACK: a hot journal that only a writer may roll back.
    776: "a write to the database was interrupted earlier and must be rolled back by a writer "
    "first (open it once read-write, e.g. python -m gateway_queue init --db PATH)",
}
_BUSY_CODES = (5, 6)  # SQLITE_BUSY, SQLITE_LOCKED
_MISSING_COLUMN = re.compile(r"no such column: (\w{1,64})$")


def _sqlite_error() -> type[sqlite3.Error]:
    """``sqlite3.Error``, what a statement raises: sqlite3 is imported with aiosqlite by the
    first connection (a statement's error comes after it), so only a gateway that opens the
    jobs database loads them."""
    import sqlite3

    return sqlite3.Error


def _store_error(exc: sqlite3.Error) -> StoreError:
    """Translate a sqlite3 error into a StoreError whose reason is safe to show."""
    code = getattr(exc, "sqlite_errorcode", None)
    primary = code & 0xFF if isinstance(code, int) else None
    text = str(exc).lower()
    if primary in _BUSY_CODES or "locked" in text or "busy" in text:
        return StoreError(
            "the database is locked by another writer; try again in a few seconds", busy=True
        )
    if isinstance(code, int) and code in _EXTENDED_REASONS:
        return StoreError(_EXTENDED_REASONS[code])
    if primary in _REASONS:
        return StoreError(_REASONS[primary])
    if "no such table" in text:
        return StoreError("the database has no jobs table")
    if "no such column" in text or "has no column" in text:
        column = _MISSING_COLUMN.search(str(exc))
        detail = f" (missing: {column.group(1)})" if column else ""
        return StoreError(f"the jobs table does not have the expected columns{detail}")
    if "not a database" in text:
        return StoreError(_REASONS[26])
    if "malformed" in text or "corrupt" in text:
        return StoreError(_REASONS[11])
    if "unable to open" in text:
        return StoreError(_REASONS[14])
    if "interrupted" in text:
        return StoreError(_REASONS[9])
    name = getattr(exc, "sqlite_errorname", None) or type(exc).__name__
    return StoreError(f"database error ({name})")


@dataclass(eq=False)  # compared by identity: no __eq__ to compile at start
class _Snapshot:
    """What the main file looked like before a lock-free (``immutable``) read."""

    path: Path
    stat: tuple[int, int, int]

    @classmethod
    def take(cls, path: Path) -> _Snapshot:
        return cls(path, _file_stat(path))

    def changed(self) -> bool:
        try:
            return _file_stat(self.path) != self.stat or _size(_sidecar(self.path, "-wal")) > 0
        except OSError:
            return True


def _file_stat(path: Path) -> tuple[int, int, int]:
    st = os.stat(path)
    return st.st_ino, st.st_size, st.st_mtime_ns


def _size(path: Path) -> int:
    try:
        return os.stat(path).st_size
    except FileNotFoundError:
        return 0


def _sidecar(path: Path, suffix: str) -> Path:
    return path.with_name(path.name + suffix)


class Connection:
    """One open jobs database: a SQLite connection on a thread of its own (aiosqlite).

    Use it as an async context manager, or call :meth:`close`. If a task awaiting one of its
    statements is cancelled, the statement is interrupted and the connection closed before the
    cancellation propagates; a transaction open at that moment is rolled back by SQLite.
    """

    def __init__(
        self, db: aiosqlite.Connection, *, busy_timeout: float, snapshot: _Snapshot | None = None
    ) -> None:
        self._db = db
        self.busy_timeout = busy_timeout
        self._snapshot = snapshot
        self._closed = False

    @property
    def closed(self) -> bool:
        return self._closed

    @property
    def in_transaction(self) -> bool:
        return not self._closed and self._db.in_transaction

    async def __aenter__(self) -> Connection:
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.close()

    async def close(self) -> None:
        """Close the connection (rolling back an open transaction) and stop its thread.

        Shielded from cancellation: closing always completes, within a bound."""
        if self._closed:
            return
        self._closed = True
        with anyio.move_on_after(CLOSE_WAIT_S, shield=True) as scope:
            try:
                await self._db.close()
            except (_sqlite_error(), ValueError) as exc:  # already broken: nothing left to keep
                log.debug("closing a jobs database connection failed: %s", exc)
        if scope.cancelled_caught:
            log.warning(
                "an interrupted jobs database statement did not stop within %g s; "
                "its connection closes when it does",
                CLOSE_WAIT_S,
            )

    async def _abort(self) -> None:
        # sqlite3_interrupt is safe from any thread; a statement inside an explicit
        # transaction that is interrupted rolls the whole transaction back.
        if not self._closed:
            await self._db.interrupt()
        await self.close()

    async def _op(self, run: Callable[[], Awaitable[T]]) -> T:
        if self._closed:
            raise StoreError("the database connection is closed")
        try:
            return await run()
        except _sqlite_error() as exc:
            raise _store_error(exc) from exc
        except Exception:
            raise
        except BaseException:  # cancelled (or the process is stopping): stop the statement now
            await self._abort()
            raise

    async def _retrying(self, run: Callable[[], Awaitable[T]]) -> T:
        """``_op`` that waits out another writer's lock for up to ``busy_timeout`` seconds."""
        deadline = anyio.current_time() + self.busy_timeout
        while True:
            try:
                return await self._op(run)
            except StoreError as exc:
                if not exc.busy or anyio.current_time() >= deadline:
                    raise
            try:
                await anyio.sleep(_BUSY_PAUSE_S)
            except BaseException:
                # Cancelled between two tries of the lock: closed as when cancelled inside one,
                # so a cancelled call's connection is closed whenever the cancellation lands.
                await self._abort()
                raise

    async def fetchall(self, sql: str, params: Sequence[Any] = ()) -> list[tuple[Any, ...]]:
        """Run one query and return its rows (waiting out a writer's commit if need be)."""
        db = self._db
        with current().db_statement(sql) as trace:
            rows = await self._retrying(lambda: db.execute_fetchall(sql, params))
            trace.rows(len(rows))  # type: ignore[arg-type]  # a list of tuples, as below
        if self._snapshot is not None and self._snapshot.changed():
            raise SnapshotChanged()
        return rows  # type: ignore[return-value]  # a list of tuples: no row factory is set

    async def fetch_while(
        self,
        sql: str,
        params: Sequence[Any],
        take: Callable[[tuple[Any, ...]], bool],
        *,
        chunk: int = 32,
    ) -> None:
        """Run one query and hand its rows to ``take`` until it returns ``False`` or the rows
        run out; only ``chunk`` rows are in memory at a time, however large the result."""
        db = self._db
        with current().db_statement(sql) as trace:
            cursor = await self._retrying(lambda: db.execute(sql, params))
            seen = 0
            try:
                wanted = True
                while wanted and (rows := await self._op(lambda: cursor.fetchmany(chunk))):
                    seen += len(rows)  # type: ignore[arg-type]  # a list, as in fetchall
                    # Plain tuples: no row factory is set (as in fetchall above).
                    wanted = all(take(row) for row in rows)  # type: ignore[arg-type]
            finally:
                if not self._closed:
                    with anyio.CancelScope(shield=True):
                        await self._op(cursor.close)
            trace.rows(seen)
        if self._snapshot is not None and self._snapshot.changed():
            raise SnapshotChanged()

    async def execute(self, sql: str, params: Sequence[Any] = ()) -> int:
        """Run one statement; returns the number of rows it changed."""
        db = self._db

        async def run() -> int:
            cursor = await db.execute(sql, params)
            return cursor.rowcount

        with current().db_statement(sql):
            return await self._op(run)

    async def executemany(self, sql: str, rows: Sequence[Sequence[Any]]) -> int:
        """Run one statement per row (one round trip); returns the rows changed in total."""
        db = self._db

        async def run() -> int:
            cursor = await db.executemany(sql, rows)
            return cursor.rowcount

        with current().db_statement(sql):
            return await self._op(run)

    async def set_progress_handler(self, handler: Callable[[], int | None] | None, n: int) -> None:
        db = self._db
        await self._op(lambda: db.set_progress_handler(handler, n))  # type: ignore[arg-type]

    @asynccontextmanager
    async def transaction(self) -> AsyncIterator[None]:
        """``BEGIN IMMEDIATE … COMMIT``, or a savepoint inside a caller's open transaction.

        All or nothing: an exception (cancellation included) rolls the block back."""
        db = self._db
        if self.in_transaction:
            await self.execute("SAVEPOINT gateway_queue")
            try:
                yield
            except BaseException:
                if not self._closed:
                    with anyio.CancelScope(shield=True):
                        await self.execute("ROLLBACK TO gateway_queue")
                        await self.execute("RELEASE gateway_queue")
                raise
            await self.execute("RELEASE gateway_queue")
            return
        with current().db_statement("BEGIN"):
            await self._retrying(lambda: db.execute("BEGIN IMMEDIATE"))
        try:
            yield
            # A COMMIT that meets a reader's lock may be retried: the transaction stays open.
            with current().db_statement("COMMIT"):
                await self._retrying(lambda: db.execute("COMMIT"))
        except BaseException:
            if self.in_transaction:
                with anyio.CancelScope(shield=True):
                    try:
                        await self.execute("ROLLBACK")
                    except StoreError as exc:  # the original error matters more
                        log.warning("rolling back a jobs database transaction failed: %s", exc)
            raise


class Opening:
    """What the ``connect_*`` functions return: await it for a :class:`Connection`, or use it
    as ``async with connect_reader(path) as conn:`` to have it closed on every path."""

    def __init__(self, factory: Callable[[], Coroutine[Any, Any, Connection]]) -> None:
        self._factory = factory
        self._conn: Connection | None = None

    def __await__(self) -> Generator[Any, None, Connection]:
        return self._factory().__await__()

    async def __aenter__(self) -> Connection:
        self._conn = await self._factory()
        return self._conn

    async def __aexit__(self, *exc_info: object) -> None:
        if self._conn is not None:
            await self._conn.close()


async def open_connection(
    target: str, *, uri: bool, busy_timeout: float, snapshot: _Snapshot | None = None
) -> Connection:
    # isolation_level=None: we issue BEGIN/COMMIT ourselves, so a transaction is exactly what we
    # say it is. The SQLite busy timeout is one short slice; Connection retries in slices.
    import aiosqlite

    db = aiosqlite.connect(target, uri=uri, timeout=BUSY_SLICE_S, isolation_level=None)
    _run_on_a_reused_thread(db)
    try:
        await db
    except _sqlite_error() as exc:
        raise _store_error(exc) from exc
    return Connection(db, busy_timeout=busy_timeout, snapshot=snapshot)


# --- threads -------------------------------------------------------------------------------------
#
# aiosqlite starts a new thread for every connection, and the store opens a connection per call.
# A new thread gets a cold malloc arena: reading a 1000-job page (3-4 MB of rows) in it costs
# about 1,300 page faults and made each page 25-50 % slower than sqlite3 on a reused worker
# thread (measured in bench/queue_bench.py). So aiosqlite's own worker loop, unchanged, runs on
# a thread of a small pool instead, one connection at a time per thread; when aiosqlite is not
# the version this was written against, it keeps its own threads.

_POOL_LOCK = threading.Lock()
_pool: ThreadPoolExecutor | None = None
_running = 0  # worker loops serving a connection right now


def _worker_loop() -> Callable[[Any], None] | None:
    import aiosqlite  # imported already: a connection is being opened

    loop = getattr(getattr(aiosqlite, "core", None), "_connection_worker_thread", None)
    return loop if callable(loop) else None


def _serve(tx: Any) -> None:
    global _running
    loop = _worker_loop()
    assert loop is not None
    with _POOL_LOCK:
        _running += 1
    try:
        loop(tx)  # returns when the connection is closed
    finally:
        with _POOL_LOCK:
            _running -= 1


class _PooledThread:
    """Stands in for the ``Thread`` aiosqlite would start: ``start()`` runs aiosqlite's worker
    loop for this connection on a pooled thread."""

    def __init__(self, tx: Any) -> None:
        self._tx = tx

    def start(self) -> None:
        global _pool
        with _POOL_LOCK:
            if _pool is None:
                _pool = ThreadPoolExecutor(max_workers=64, thread_name_prefix="jobs-store")
            pool = _pool
        pool.submit(_serve, self._tx)


def _run_on_a_reused_thread(db: aiosqlite.Connection) -> None:
    thread = getattr(db, "_thread", None)
    tx = getattr(db, "_tx", None)
    if isinstance(thread, threading.Thread) and tx is not None and _worker_loop() is not None:
        db._thread = _PooledThread(tx)  # type: ignore[assignment]


def running_connections() -> int:
    """Connections whose thread is serving them now (0 when every connection is closed)."""
    with _POOL_LOCK:
        return _running


def require_file(path: Path) -> None:
    if not path.exists():
        raise FileNotFoundError(path)
    if not path.is_file():
        raise StoreError("the path is a folder or a special file, not a database file")


def _is_wal(path: Path) -> bool:
    """Whether the file's header says WAL mode (file format versions 2 at offsets 18-19)."""
    try:
        with open(path, "rb") as fh:
            header = fh.read(20)
    except OSError:
        return False
    return header.startswith(b"SQLite format 3\x00") and (header[18] == 2 or header[19] == 2)


def reader_target(path: Path) -> tuple[str, _Snapshot | None]:
    """The URI a reader opens, chosen to write nothing (see :func:`connect_reader`)."""
    uri = path.resolve().as_uri()
    if not _is_wal(path):
        return uri + "?mode=ro", None
    if _size(_sidecar(path, "-wal")) == 0:
        # Nothing committed waits in a log: the main file is the whole database. Read it
        # without opening -wal/-shm at all, and check afterwards that no checkpoint changed it.
        return uri + "?mode=ro&immutable=1", _Snapshot.take(path)
    if _sidecar(path, "-shm").is_file():
        # Open the shared-memory index read-only: SQLite then keeps its read marks in private
        # memory instead of writing them into -shm.
        return uri + "?mode=ro&readonly_shm=1", None
    raise StoreError(
        "the database's write-ahead log (-wal) holds data but its shared-memory file (-shm) is "
        "missing, so a writer stopped without closing it; reading it would create files, which "
        "a read never does: open it once read-write to recover it (python -m gateway_queue "
        "init --db PATH)"
    )
