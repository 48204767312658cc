"""The audit sinks for many replicas: JSON lines on stderr and a PostgreSQL table (a real
server from Debian's package, tests/services.py), each record naming its replica, and a
mutation refused when a sink cannot take its STARTED record."""

from __future__ import annotations

import json
import socket
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anyio
import psycopg
import pytest
from conftest import gateway_env
from pydantic import BaseModel, ConfigDict
from services import Postgres, free_port, postgres_server
from wire import StdioServer

from gateway import Mutation, ToolContext, ToolSpec, hookimpl
from gateway.audit import PostgresAudit
from gateway.testing import make_gateway

pytestmark = pytest.mark.e2e


class _KeyIn(BaseModel):
    model_config = ConfigDict(extra="forbid")
    key: str
    hold: float = 0


class _Ledger:
    """A mutation that, while it runs, reads its own row of the audit table (what a crash at
    that moment would leave), and a read tool."""

    def __init__(self, dsn: str | None = None, table: str = "") -> None:
        self.dsn = dsn
        self.table = table
        self.runs: list[str] = []
        self.running = anyio.Event()

    @hookimpl
    def register_tools(self, register: Any) -> None:
        async def record(args: _KeyIn, ctx: ToolContext[Any]) -> dict[str, Any]:
            self.runs.append(args.key)
            self.running.set()
            await anyio.sleep(args.hold)
            seen = None
            if self.dsn:
                async with await psycopg.AsyncConnection.connect(self.dsn) as conn:
                    cur = await conn.execute(
                        f"SELECT outcome FROM {self.table} WHERE correlation_id = %s",
                        (ctx.correlation_id,),
                    )
                    seen = [r[0] for r in await cur.fetchall()]
            return {"key": args.key, "seen_while_running": seen}

        async def look(args: _KeyIn, ctx: ToolContext[Any]) -> dict[str, Any]:
            return {"key": args.key}

        register(
            ToolSpec(
                name="record",
                description="d",
                input_model=_KeyIn,
                handler=record,
                tier="mutation",
                mutation=Mutation(
                    consequence="records",
                    requires="nothing",
                    reversible=True,
                    destructive=False,
                    idempotent=False,
                ),
            )
        )
        register(
            ToolSpec(name="look", description="d", input_model=_KeyIn, handler=look, tier="read")
        )


@pytest.fixture(scope="module")
def pg() -> Iterator[Postgres]:
    with postgres_server() as server:
        yield server


def _rows(pg: Postgres, table: str) -> list[dict[str, Any]]:
    with psycopg.connect(pg.dsn) as conn:
        cur = conn.execute(f"SELECT * FROM {table} ORDER BY started_at")
        names = [d.name for d in cur.description or []]
        return [dict(zip(names, row, strict=True)) for row in cur.fetchall()]


def _lines(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text().splitlines()]


@pytest.mark.anyio
async def test_the_started_row_is_committed_before_the_mutation_runs_and_completed_after(
    tmp_path, pg
):
    ledger = _Ledger(pg.dsn, "committed_first")
    gw = make_gateway(
        objects={"ledger": ledger},
        entry_points=False,
        cwd=tmp_path,
        audit_sinks=["file", "postgres"],
        audit_database_url=pg.dsn,
        audit_table="committed_first",
        replica_name="replica-a",
    )
    async with gw:
        result = await gw.call("record", {"key": "k1"})
        read = await gw.call("look", {"key": "k2"})
    assert not result.is_error, result.payload
    assert not read.is_error
    # Another connection saw the row while the handler ran: committed before the call ran.
    assert result.payload["seen_while_running"] == ["STARTED"]
    (row,) = _rows(pg, "committed_first")  # one row per mutation; reads are not audited
    assert row["outcome"] == "OK" and row["replica"] == "replica-a"
    assert row["tool"] == "record" and row["plugin"] == "ledger"
    assert row["arguments"] == {"key": "str"}  # shapes, never values
    assert row["client"] == "stdio" and row["subject"]  # the OS account, in process
    assert row["ended_at"] >= row["started_at"] and row["duration_ms"] > 0
    file_lines = _lines(tmp_path / "audit.jsonl")
    assert [x["outcome"] for x in file_lines] == ["STARTED", "OK"]
    assert {x["replica"] for x in file_lines} == {"replica-a"}
    assert {x["correlation_id"] for x in file_lines} == {row["correlation_id"]}


@pytest.mark.anyio
async def test_an_unreachable_audit_database_refuses_mutations_and_reads_go_on(tmp_path):
    ledger = _Ledger()
    closed = f"postgresql://u:secret-pw-0192@127.0.0.1:{free_port()}/db"
    gw = make_gateway(
        objects={"ledger": ledger},
        entry_points=False,
        cwd=tmp_path,
        audit_sinks=["file", "postgres"],
        audit_database_url=closed,
    )
    async with gw:
        refused = await gw.call("record", {"key": "k1"})
        read = await gw.call("look", {"key": "k2"})
        health = {(r.plugin, r.name): r for r in await gw.check_health(use_cache=False)}
        status = await gw.status()
    error = refused.payload["error"]
    assert error["code"] == "BACKEND_UNAVAILABLE" and error["retryable"] is True
    assert "audit database cannot be reached" in error["message"]
    assert "nothing was done" in error["message"]
    assert ledger.runs == []  # the mutation did not run
    assert not read.is_error  # reads need no audit
    # The file took STARTED and is told how the call ended: no STARTED left open.
    assert [x["outcome"] for x in _lines(tmp_path / "audit.jsonl")] == [
        "STARTED",
        "BACKEND_UNAVAILABLE",
    ]
    check = health[("gateway", "audit_database")]
    assert not check.ok and not check.blocking  # said, but /readyz stays ready
    assert "audit database cannot be reached" in (check.detail or "")
    assert any("gateway/audit_database" in p for p in status["problems"])
    assert "secret-pw-0192" not in json.dumps(status) + json.dumps(refused.payload)


@pytest.mark.anyio
async def test_a_dropped_database_connection_is_replaced_without_a_refusal_or_a_second_row(
    tmp_path, pg
):
    gw = make_gateway(
        objects={"ledger": _Ledger()},
        entry_points=False,
        cwd=tmp_path,
        audit_sinks=["postgres"],
        audit_database_url=pg.dsn,
        audit_table="reconnects",
    )
    async with gw:
        assert not (await gw.call("record", {"key": "k1"})).is_error
        # What a database restart or an idle timeout does to the replica's connection.
        with psycopg.connect(pg.dsn, autocommit=True) as admin:
            ended = admin.execute(
                "SELECT pg_terminate_backend(pid) FROM pg_stat_activity "
                "WHERE application_name = 'mcp-gateway'"
            ).fetchall()
        assert ended == [(True,)]
        second = await gw.call("record", {"key": "k2"})
    assert not second.is_error, second.payload
    rows = _rows(pg, "reconnects")
    assert [r["outcome"] for r in rows] == ["OK", "OK"]
    assert len({r["correlation_id"] for r in rows}) == 2
    assert not (tmp_path / "audit.jsonl").exists()  # the file sink was not configured


@pytest.mark.anyio
async def test_a_cancelled_mutation_completes_its_row_as_cancelled(tmp_path, pg):
    ledger = _Ledger()
    gw = make_gateway(
        objects={"ledger": ledger},
        entry_points=False,
        cwd=tmp_path,
        audit_sinks=["postgres"],
        audit_database_url=pg.dsn,
        audit_table="cancelled",
    )
    async with gw:
        with anyio.CancelScope() as scope:
            async with anyio.create_task_group() as tg:
                tg.start_soon(gw.call, "record", {"key": "k", "hold": 10})
                await ledger.running.wait()
                scope.cancel()  # the client went away while the change ran
    (row,) = _rows(pg, "cancelled")
    assert row["outcome"] == "CANCELLED" and row["ended_at"] is not None


@pytest.mark.anyio
async def test_replicas_creating_the_table_at_once_all_write(pg):
    sinks = [PostgresAudit(pg.dsn, "created_at_once") for _ in range(3)]
    records = [
        {
            "time": "2026-11-28T10:00:00.000+00:00",
            "replica": f"r{i}",
            "tool": "record",
            "plugin": "ledger",
            "correlation_id": f"c{i}",
            "outcome": "STARTED",
            "arguments": {},
        }
        for i in range(3)
    ]
    results: list[bool] = []

    async def write(sink: PostgresAudit, record: dict[str, Any]) -> None:
        results.append(await sink.write(record))

    async with anyio.create_task_group() as tg:
        for sink, record in zip(sinks, records, strict=True):
            tg.start_soon(write, sink, record)
    for sink in sinks:
        await sink.aclose()
    assert results == [True, True, True]
    assert sorted(r["replica"] for r in _rows(pg, "created_at_once")) == ["r0", "r1", "r2"]


def test_stderr_records_are_json_lines_apart_from_the_output(tmp_path, cli_main):
    env = gateway_env(
        MCP_GATEWAY_PLUGINS="notes",
        MCP_GATEWAY_AUDIT_SINKS="stderr",
        MCP_GATEWAY_REPLICA_NAME="gw-7f9c-0",
    )
    done = cli_main(tmp_path, "call", "notes_add", "--args", '{"text": "hello"}', env=env)
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["text"] == "hello"  # stdout: the result alone
    records = [json.loads(x) for x in done.stderr.splitlines() if x.startswith('{"kind"')]
    assert [r["outcome"] for r in records] == ["STARTED", "OK"]
    for r in records:
        assert r["kind"] == "audit" and r["replica"] == "gw-7f9c-0" and r["tool"] == "notes_add"
        assert "hello" not in json.dumps(r)  # argument values are never recorded
    assert records[0]["arguments"] == {"text": "str"}
    assert not list(tmp_path.rglob("audit.jsonl"))  # the file sink was not chosen


def test_over_stdio_the_records_go_to_stderr_and_stdout_carries_only_the_protocol(tmp_path):
    env = gateway_env(
        MCP_GATEWAY_PLUGINS="notes",
        MCP_GATEWAY_AUDIT_SINKS="stderr",
        MCP_GATEWAY_REPLICA_NAME="r-1",
    )
    with StdioServer(tmp_path, env) as server:
        params = {"name": "notes_add", "arguments": {"text": "over stdio"}}
        server.send({"jsonrpc": "2.0", "id": 9, "method": "tools/call", "params": params})
        message = server.read_message()  # the very next line on stdout is the answer
        assert message["jsonrpc"] == "2.0" and message["id"] == 9, message
        assert message["result"]["structuredContent"]["text"] == "over stdio"
        assert server.proc.stdin is not None
        server.proc.stdin.close()
        assert server.wait() == 0
        err = server.stderr()
    records = [json.loads(x) for x in err.splitlines() if x.startswith('{"kind":"audit"')]
    assert [(r["outcome"], r["replica"]) for r in records] == [("STARTED", "r-1"), ("OK", "r-1")]


def test_every_record_names_the_host_when_no_replica_name_is_set(tmp_path, cli_main):
    env = gateway_env(MCP_GATEWAY_PLUGINS="notes", MCP_GATEWAY_AUDIT_LOG="audit.jsonl")
    done = cli_main(tmp_path, "call", "notes_add", "--args", '{"text": "x"}', env=env)
    assert done.returncode == 0, done.stderr
    lines = _lines(tmp_path / "audit.jsonl")
    assert [x["replica"] for x in lines] == [socket.gethostname()] * 2


@pytest.mark.parametrize(
    ("env", "expected"),
    [
        (
            {"MCP_GATEWAY_AUDIT_SINKS": "file,stdrr"},
            "MCP_GATEWAY_AUDIT_SINKS[1]: must be one of file, stderr, postgres, not 'stdrr'; "
            "did you mean stderr?",
        ),
        (
            {"MCP_GATEWAY_AUDIT_SINKS": "postgres"},
            "MCP_GATEWAY_AUDIT_SINKS: the postgres sink needs audit_database_url",
        ),
        (
            {"MCP_GATEWAY_AUDIT_DATABASE_URL": "postgresql://u:pw-8812@db/audit"},
            "MCP_GATEWAY_AUDIT_DATABASE_URL: set, but audit_sinks does not name postgres",
        ),
        (
            {
                "MCP_GATEWAY_AUDIT_SINKS": "postgres",
                "MCP_GATEWAY_AUDIT_DATABASE_URL": "mysql://u:pw-8812@db/audit",
            },
            "MCP_GATEWAY_AUDIT_DATABASE_URL: must be a postgresql:// URL",
        ),
        (
            {"MCP_GATEWAY_AUDIT_TABLE": "audit; DROP TABLE x"},
            "MCP_GATEWAY_AUDIT_TABLE: must be a table name of lower-case letters",
        ),
        (
            {"MCP_GATEWAY_REPLICA_NAME": "gw 1\n"},
            "MCP_GATEWAY_REPLICA_NAME: must be letters, digits",
        ),
    ],
)
def test_audit_settings_that_do_not_fit_stop_with_one_line(tmp_path, cli_main, env, expected):
    done = cli_main(tmp_path, "tools", env=gateway_env(**env))
    assert done.returncode == 2
    assert done.stderr.startswith(f"mcp-gateway: {expected}"), done.stderr
    assert done.stderr.count("\n") == 1
    assert "pw-8812" not in done.stderr


def test_the_database_url_is_never_written_in_the_file(tmp_path, cli_main):
    (tmp_path / "gw.toml").write_text(
        '[gateway]\naudit_sinks = ["postgres"]\naudit_database_url = "postgresql://u:pw-5@db/a"\n'
    )
    done = cli_main(tmp_path, "--config", "gw.toml", "tools", env=gateway_env())
    assert done.returncode == 2
    assert done.stderr == (
        "mcp-gateway: gw.toml:3: [gateway] audit_database_url holds a secret, which comes from "
        "the environment, never from the file: set MCP_GATEWAY_AUDIT_DATABASE_URL instead, or "
        'name a variable with { "$env" = "NAME" }\n'
    )


def test_the_postgres_sink_without_its_driver_stops_with_the_install_line(
    tmp_path, cli_main, monkeypatch
):
    monkeypatch.setitem(sys.modules, "psycopg", None)  # what an install without the extra has
    env = gateway_env(
        MCP_GATEWAY_AUDIT_SINKS="file,postgres",
        MCP_GATEWAY_AUDIT_DATABASE_URL="postgresql://u:pw@127.0.0.1:1/db",
    )
    done = cli_main(tmp_path, "tools", env=env)
    assert done.returncode == 2
    assert done.stderr == (
        "mcp-gateway: MCP_GATEWAY_AUDIT_SINKS: the postgres sink needs psycopg, which is not "
        "installed: pip install 'mcp-plugin-gateway[postgres]'\n"
    )
