"""The jobs store's SQL statements as children of the tool call that ran them, by kind and
table, never by text (gateway telemetry on, recorded in memory)."""

from __future__ import annotations

import pytest
from gwq_testutil import DB_REL, add_rows, init_db

pytest.importorskip("opentelemetry.sdk", reason="needs mcp-plugin-gateway[otel]")

from gateway.testing.telemetry import TelemetryRecorder

pytestmark = pytest.mark.anyio

NOTE = "planted-note-7c1d9e"


@pytest.fixture
def db(tmp_path):
    path = init_db(tmp_path / DB_REL)
    add_rows(path, [{"status": "new", "title": f"job {i}"} for i in range(3)])
    return path


async def test_a_read_is_its_select_statements_below_the_call(gateway_factory, db):
    rec = TelemetryRecorder()
    gw = gateway_factory(plugins=["queue"], telemetry=rec)
    async with gw:
        result = await gw.call("bulk_read_new_jobs", {"limit": 2})
    assert result.payload["count"] == 2, result.payload
    call = rec.span("tools/call bulk_read_new_jobs")
    statements = rec.children(call)
    assert statements and {s.name for s in statements} <= {"SELECT jobs", "PRAGMA", "SELECT"}
    select = next(s for s in statements if s.name == "SELECT jobs")
    assert select.attributes["db.system.name"] == "sqlite"
    assert select.attributes["db.operation.name"] == "SELECT"
    assert select.attributes["db.response.returned_rows"] >= 1


async def test_an_update_is_one_transaction_below_the_call_without_its_values(gateway_factory, db):
    rec = TelemetryRecorder()
    gw = gateway_factory(plugins=["queue"], telemetry=rec)
    async with gw:
        result = await gw.call(
            "bulk_update_job_status",
            {"updates": [{"id": 1, "status": "shortlist", "notes": NOTE}]},
        )
    assert result.payload["updated_count"] == 1, result.payload
    call = rec.span("tools/call bulk_update_job_status")
    assert call.attributes["mcp_gateway.tool.tier"] == "mutation"
    kinds = [s.attributes["db.operation.name"] for s in rec.children(call)]
    # Connection set-up (PRAGMA), then the change as one transaction.
    begin = kinds.index("BEGIN")
    assert set(kinds[:begin]) == {"PRAGMA"} and kinds[-1] == "COMMIT", kinds
    assert "UPDATE" in kinds[begin:], kinds
    recorded = rec.everything()
    assert NOTE not in recorded and "shortlist" not in recorded and "WHERE" not in recorded


async def test_statements_outside_a_call_are_not_recorded(gateway_factory, db):
    rec = TelemetryRecorder()
    gw = gateway_factory(plugins=["queue"], telemetry=rec)
    async with gw:
        [check] = await gw.health.run(use_cache=False)  # the jobs_db check reads the store
    assert check.ok, check
    assert rec.spans() == []
