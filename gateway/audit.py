"""Append-only audit log of mutation calls (JSON Lines, one flushed line per event).

Two lines per call, sharing the correlation id: ``"outcome": "STARTED"`` before the handler
runs, and the outcome code after (``OK``, an error code, or ``CANCELLED`` when the call was
cancelled while it ran). A crash between them leaves the first, so an interrupted mutation is
never invisible. The log fails closed: a mutation whose ``STARTED`` line cannot be written
whole is refused before it runs. A line is written whole or reported as not written: a short
write (the disk filled mid-line) is not success, and a fragment left by one never swallows the
next line, which then starts on a line of its own. Argument *values* are never written: only
their names and shapes. Both lines name the caller (``subject``, ``client``; see
:meth:`gateway.auth.Identity.audit_fields`): the token's subject and client over OAuth, the
OS user and ``stdio`` over stdio, nulls for the holder of the shared HTTP token.

A deployment of several replicas records to sinks they share (``audit_sinks``): besides the
file, JSON lines on standard error (``stderr``, for a cluster's log pipeline) and a PostgreSQL
table (``postgres``, one row per call: inserted before it runs, its outcome filled in when it
ends). Every record names the replica that wrote it (``replica_name``, else the host name).
Each configured sink must take a call's ``STARTED`` record, or the call is refused.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import errno
import json
import logging
import os
import socket
import threading
import uuid
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

import anyio

from .configkit import ConfigError
from .errors import ErrorCode, GatewayError

if TYPE_CHECKING:
    from psycopg import AsyncConnection

    from .config import GatewayConfig

log = logging.getLogger("gateway.audit")


def redact_arguments(arguments: dict[str, Any] | None) -> dict[str, str]:
    """Names and shapes only: ``{"updates": "list[3]", "db_path": "str"}``."""
    out: dict[str, str] = {}
    for key, value in (arguments or {}).items():
        if isinstance(value, list | tuple):
            out[str(key)] = f"list[{len(value)}]"
        elif isinstance(value, dict):
            out[str(key)] = f"object[{len(value)}]"
        elif value is None:
            out[str(key)] = "null"
        else:
            out[str(key)] = type(value).__name__
    return out


def _now() -> str:
    return dt.datetime.now(dt.UTC).isoformat(timespec="milliseconds")


def _line(record: dict[str, Any]) -> bytes:
    # ASCII only: a subject's line separator (U+2028) cannot break the line for any reader.
    return (json.dumps(record, separators=(",", ":"), default=str) + "\n").encode()


class AuditSink(Protocol):
    """One place records go. ``write`` is ``False`` (and an error in the log) when the record
    could not be written whole; it never raises."""

    name: str

    async def write(self, record: dict[str, Any]) -> bool: ...


class AuditLog:
    """The file (``audit_log``): appended to by every gateway process that names it."""

    name = "file"

    def __init__(self, path: Path) -> None:
        self.path = path
        self._lock = threading.Lock()

    async def write(self, record: dict[str, Any]) -> bool:
        return self.append(record)

    def append(self, event: dict[str, Any]) -> bool:
        """Append one whole line; ``False`` (and an error in the log) when it could not be."""
        record = event if "time" in event else {"time": _now(), **event}
        line = _line(record)
        try:
            with self._lock:
                self.path.parent.mkdir(parents=True, exist_ok=True)
                # O_APPEND: every write goes to the end, also with two gateway processes.
                fd = os.open(self.path, os.O_RDWR | os.O_APPEND | os.O_CREAT, 0o600)
                try:
                    _lock_file(fd)
                    _append_line(fd, line)
                finally:
                    os.close(fd)
        except OSError as exc:
            log.error(
                "audit log %s cannot be written (%s): %s correlation_id=%s",
                self.path.name,
                exc.strerror or type(exc).__name__,
                event.get("outcome"),
                event.get("correlation_id"),
            )
            return False
        return True


def _lock_file(fd: int) -> None:
    """Hold the file while checking its end and appending (released when ``fd`` closes), so
    another gateway process cannot write between the two."""
    try:
        import fcntl
    except ImportError:  # pragma: no cover - Windows
        return
    fcntl.flock(fd, fcntl.LOCK_EX)


def _append_line(fd: int, line: bytes) -> None:
    size = os.fstat(fd).st_size
    if size and os.pread(fd, 1, size - 1) != b"\n":
        # An earlier write stopped mid-line: end that fragment, or this line would be glued on.
        line = b"\n" + line
    written = 0
    while written < len(line):
        n = os.write(fd, line[written:])
        if n <= 0:
            raise OSError(errno.ENOSPC, "no space left for the audit line")
        written += n


class StderrAudit:
    """JSON lines on standard error, for the log pipeline of a cluster (one object per line,
    ``"kind": "audit"`` first, so a collector can route them apart from the log's lines). They
    go through the log's writer: whole, between log lines, never blocking a call, and never on
    stdout (the stdio transport). A line the writer cannot take (its queue is full: nobody
    reads stderr) is a record not written."""

    name = "stderr"

    async def write(self, record: dict[str, Any]) -> bool:
        from .logs import write_stderr

        if write_stderr(_line({"kind": "audit", **record})):
            return True
        log.error(
            "audit record not written to stderr (not read): %s correlation_id=%s",
            record.get("outcome"),
            record.get("correlation_id"),
        )
        return False


#: Seconds a write to the audit database may take, connecting included.
DATABASE_SECONDS = 5.0
#: Two replicas creating the table at once would collide in PostgreSQL's catalog: the first
#: holds this transaction-scoped advisory lock while it creates, the other then finds it.
_SCHEMA_LOCK = 0x6D63_7067_6175  # "mcpgau"


class PostgresAudit:
    """A PostgreSQL table (``audit_table``, created when missing), one row per mutation call:
    inserted (``outcome`` ``STARTED``) and committed before the call runs, then updated with
    its outcome, duration and end time. A row left ``STARTED`` is a call whose replica died, or
    lost the database, while it ran. Each row's key is a random UUID the replica chose, so a
    write can be sent again on a new connection when the old one broke (a restarted database,
    a dropped idle connection) without ever making two rows of one call: ``ON CONFLICT DO
    NOTHING`` takes the second insert of a row that the first committed after all.

    One connection per replica (autocommit), used by one write at a time, opened on first
    use and again after any failure. psycopg (the ``postgres`` extra) is imported only here."""

    name = "postgres"

    def __init__(
        self,
        url: str,
        table: str,
        *,
        timeout: float = DATABASE_SECONDS,
        setting: str = "audit_sinks",
    ) -> None:
        try:
            import psycopg  # noqa: F401
        except ImportError:
            raise ConfigError(
                f"{setting}: the postgres sink needs psycopg, which is not installed: "
                "pip install 'mcp-plugin-gateway[postgres]'"
            ) from None
        self._url = url
        self.table = table
        self.timeout = timeout
        self._conn: AsyncConnection[Any] | None = None
        self._lock = anyio.Lock()
        self._rows: dict[str, uuid.UUID] = {}  # correlation id -> row id, of calls that run

    async def write(self, record: dict[str, Any]) -> bool:
        cid = str(record.get("correlation_id"))
        started = record.get("outcome") == "STARTED"
        row = uuid.uuid4() if started else self._rows.pop(cid, None)
        if row is None:
            return False  # its STARTED row was never written: there is nothing to complete
        try:
            # Shielded: a STARTED row is committed or known not to be, and a cancelled call's
            # CANCELLED still reaches its row; the timeout bounds it either way.
            with anyio.CancelScope(shield=True), anyio.fail_after(self.timeout):
                async with self._lock:
                    for attempt in (1, 2):
                        fresh = self._conn is None or self._conn.closed
                        try:
                            conn = await self._connection()
                            if started:
                                await self._insert(conn, row, record)
                            else:
                                await self._update(conn, row, record)
                            break
                        except Exception:
                            await self._drop()
                            if fresh or attempt == 2:
                                raise
        except Exception as exc:
            log.error(
                "audit database cannot be written (%s): %s correlation_id=%s",
                type(exc).__name__,
                record.get("outcome"),
                cid,
            )
            return False
        if started:
            self._rows[cid] = row
        return True

    async def check(self) -> str | None:
        """The health check: the database answers and holds the table."""
        try:
            with anyio.fail_after(self.timeout):
                async with self._lock:
                    conn = await self._connection()
                    await conn.execute("SELECT 1")
        except Exception as exc:
            await self._drop()
            raise GatewayError(
                ErrorCode.BACKEND_UNAVAILABLE,
                f"the audit database cannot be reached ({type(exc).__name__}): mutations "
                "are refused until it can",
            ) from None
        return f"table {self.table}"

    async def aclose(self) -> None:
        await self._drop()

    def _name(self) -> Any:
        from psycopg import sql

        return sql.Identifier(*self.table.split("."))

    async def _connection(self) -> AsyncConnection[Any]:
        if self._conn is not None and not self._conn.closed:
            return self._conn
        from psycopg import AsyncConnection, sql

        conn = await AsyncConnection.connect(
            self._url,
            autocommit=True,
            connect_timeout=max(1, int(self.timeout)),
            application_name="mcp-gateway",
        )
        try:
            index = sql.Identifier(self.table.rpartition(".")[2] + "_started_at")
            async with conn.transaction():
                await conn.execute("SELECT pg_advisory_xact_lock(%s)", (_SCHEMA_LOCK,))
                await conn.execute(
                    sql.SQL(
                        "CREATE TABLE IF NOT EXISTS {} ("
                        "id uuid PRIMARY KEY, "
                        "correlation_id text NOT NULL, "
                        "replica text NOT NULL, "
                        "tool text NOT NULL, "
                        "plugin text NOT NULL, "
                        "subject text, "
                        "client text, "
                        "arguments jsonb NOT NULL, "
                        "outcome text NOT NULL, "
                        "started_at timestamptz NOT NULL, "
                        "ended_at timestamptz, "
                        "duration_ms double precision)"
                    ).format(self._name())
                )
                await conn.execute(
                    sql.SQL("CREATE INDEX IF NOT EXISTS {} ON {} (started_at)").format(
                        index, self._name()
                    )
                )
        except BaseException:
            await conn.close()
            raise
        self._conn = conn
        return conn

    async def _insert(
        self, conn: AsyncConnection[Any], row: uuid.UUID, record: dict[str, Any]
    ) -> None:
        from psycopg import sql
        from psycopg.types.json import Jsonb

        await conn.execute(
            sql.SQL(
                "INSERT INTO {} (id, correlation_id, replica, tool, plugin, subject, client, "
                "arguments, outcome, started_at) "
                "VALUES (%s, %s, %s, %s, %s, %s, %s, %s, %s, %s) ON CONFLICT (id) DO NOTHING"
            ).format(self._name()),
            (
                row,
                record.get("correlation_id"),
                record.get("replica"),
                record.get("tool"),
                record.get("plugin"),
                record.get("subject"),
                record.get("client"),
                Jsonb(record.get("arguments") or {}),
                record.get("outcome"),
                _timestamp(record.get("time")),
            ),
        )

    async def _update(
        self, conn: AsyncConnection[Any], row: uuid.UUID, record: dict[str, Any]
    ) -> None:
        from psycopg import sql

        await conn.execute(
            sql.SQL(
                "UPDATE {} SET outcome = %s, ended_at = %s, duration_ms = %s WHERE id = %s"
            ).format(self._name()),
            (
                record.get("outcome"),
                _timestamp(record.get("time")),
                record.get("duration_ms"),
                row,
            ),
        )

    async def _drop(self) -> None:
        conn, self._conn = self._conn, None
        if conn is not None:
            # A broken connection may fail to close: it is gone either way.
            with contextlib.suppress(Exception), anyio.CancelScope(shield=True):
                with anyio.move_on_after(1):
                    await conn.close()


def _timestamp(value: Any) -> dt.datetime:
    try:
        return dt.datetime.fromisoformat(str(value))
    except ValueError:
        return dt.datetime.now(dt.UTC)


class AuditTrail:
    """Every configured sink, each record stamped once with the time and the replica."""

    def __init__(self, sinks: Sequence[AuditSink], replica: str) -> None:
        self.sinks = list(sinks)
        self.replica = replica

    @property
    def database(self) -> PostgresAudit | None:
        return next((s for s in self.sinks if isinstance(s, PostgresAudit)), None)

    async def write(
        self, event: dict[str, Any], sinks: Sequence[AuditSink] | None = None
    ) -> list[AuditSink]:
        """Write ``event`` to every sink (or to ``sinks``); the sinks that could not take it."""
        record = {"time": _now(), "replica": self.replica, **event}
        return [s for s in (self.sinks if sinks is None else sinks) if not await s.write(record)]

    async def aclose(self) -> None:
        if self.database is not None:
            await self.database.aclose()


def replica_name(configured: str | None) -> str:
    """The configured name, else the host name (a pod's name on Kubernetes)."""
    return configured or socket.gethostname() or "unknown"


def build_audit_trail(config: GatewayConfig) -> AuditTrail:
    """The sinks ``audit_sinks`` names (``ConfigError`` when the postgres sink's driver is
    missing). Nothing connects here: the database is reached on the first mutation (or by
    the start, see :meth:`gateway.app.Gateway.start`)."""
    from .config import setting_label

    sinks: list[AuditSink] = []
    for name in config.audit_sinks:
        if name == "file":
            sinks.append(AuditLog(config.audit_log))
        elif name == "stderr":
            sinks.append(StderrAudit())
        elif name == "postgres" and config.audit_database_url is not None:
            url = config.audit_database_url.get_secret_value()
            setting = setting_label(config, "audit_sinks")
            sinks.append(PostgresAudit(url, config.audit_table, setting=setting))
    return AuditTrail(sinks, replica_name(config.replica_name))
