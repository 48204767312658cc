"""The queue tools through a real `mcp-gateway serve` subprocess over stdio, with the official
MCP client: the triage loop as an agent runs it (read a page, decide, write, read on)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time

import anyio
import pytest
from gateway_queue import store
from gwq_testutil import DB_REL, add_rows, as_jobs, init_db, new_jobs_in_order
from mcp import Client, StdioServerParameters

from gateway.testing import tool_error


def server(tmp_path, **env: str) -> StdioServerParameters:
    environment = {k: v for k, v in os.environ.items() if not k.startswith("MCP_GATEWAY_")}
    environment.pop("JOBS_DB_PATH", None)
    environment.update({"MCP_GATEWAY_PLUGINS": "queue", **env})
    return StdioServerParameters(
        command=sys.executable,
        args=["-m", "gateway.cli", "serve"],
        cwd=str(tmp_path),
        env=environment,
    )


@pytest.mark.e2e
@pytest.mark.anyio
async def test_triage_loop_over_stdio_drains_every_new_job_once(tmp_path):
    db = tmp_path / DB_REL
    init_db(db)
    times = ["2025-01-03", None, "2025-01-01", "2025-01-03", "2025-01-02", None]
    add_rows(
        db, [{"status": "new", "captured_at": t, "title": f"t{i}"} for i, t in enumerate(times * 4)]
    )
    add_rows(db, [{"status": "applied", "captured_at": "2025-01-09"}])
    expected = as_jobs(new_jobs_in_order(db))

    seen: list[dict] = []
    with anyio.fail_after(60):
        async with Client(server(tmp_path), mode="legacy") as client:
            names = {t.name for t in (await client.list_tools()).tools}
            assert {"bulk_read_new_jobs", "bulk_update_job_status"} <= names
            cursor = None
            while True:
                args = {"limit": 7} | ({"cursor": cursor} if cursor else {})
                page = await client.call_tool("bulk_read_new_jobs", args)
                assert not page.is_error, page.structured_content
                assert json.loads(page.content[0].text) == page.structured_content
                seen += page.structured_content["jobs"]
                if not page.structured_content["has_more"]:
                    break
                cursor = page.structured_content["next_cursor"]
            assert seen == expected

            decisions = [
                {"id": j["id"], "status": "shortlist" if i % 2 else "reject"}
                for i, j in enumerate(seen[:10])
            ]
            written = await client.call_tool("bulk_update_job_status", {"updates": decisions})
            assert written.structured_content["updated_count"] == 10

            rest = await client.call_tool("bulk_read_new_jobs", {"limit": 1000})
            assert rest.structured_content["count"] == len(expected) - 10

            bad = await client.call_tool("bulk_read_new_jobs", {"cursor": "tampered"})
            assert bad.is_error
            assert tool_error(bad)["code"] == "VALIDATION_ERROR"
            missing = await client.call_tool(
                "bulk_update_job_status", {"updates": [{"id": 99999, "status": "reject"}]}
            )
            assert missing.is_error
            assert tool_error(missing)["code"] == "NOT_FOUND"
            assert tool_error(missing)["details"]["missing_ids"] == [99999]


@pytest.mark.e2e
@pytest.mark.anyio
async def test_stdio_missing_database_is_db_not_found(tmp_path):
    with anyio.fail_after(60):
        async with Client(server(tmp_path, JOBS_DB_PATH="data/none.db"), mode="legacy") as client:
            result = await client.call_tool("bulk_read_new_jobs", {})
    assert result.is_error
    error = tool_error(result)
    assert error["code"] == "DB_NOT_FOUND"
    assert "data/none.db" in error["message"] and str(tmp_path) not in error["message"]
    assert not (tmp_path / "data").exists()


@pytest.mark.e2e
@pytest.mark.anyio
async def test_a_served_gateway_answers_at_once_then_indexes_a_legacy_database(tmp_path):
    from test_queue_background_index import indexes, legacy_queue

    db = legacy_queue(tmp_path / DB_REL, 300_000)
    with anyio.fail_after(120):
        started = time.monotonic()
        # Health results are cached briefly, so that gateway_status shows the build's progress.
        params = server(tmp_path, MCP_GATEWAY_HEALTH_CACHE_SECONDS="0.2")
        async with Client(params, mode="legacy") as client:
            names = {t.name for t in (await client.list_tools()).tools}
            ready = time.monotonic() - started
            assert "bulk_read_new_jobs" in names
            # Not built yet: it starts a few seconds after start-up, never during it.
            assert store.PAGE_INDEX_NAME not in indexes(db)
            detail, seen = "", []
            while not detail.endswith("jobs.db ok"):
                await anyio.sleep(0.25)
                status = await client.call_tool("gateway_status", {})
                (check,) = [
                    c
                    for p in status.structured_content["plugins"]
                    for c in p["health"]
                    if c["check"] == "jobs_db"
                ]
                detail = check["detail"]
                seen.append(detail)
            page = await client.call_tool("bulk_read_new_jobs", {"limit": 3})
            assert page.structured_content["count"] == 3
    assert store.PAGE_INDEX_NAME in indexes(db)
    assert ready < 10, ready
    assert any("the gateway creates it in the background" in d for d in seen), seen


def test_health_on_a_fresh_checkout_reports_the_missing_database_and_exits_0(tmp_path):
    env = {k: v for k, v in os.environ.items() if not k.startswith(("MCP_GATEWAY_", "JOBS_DB"))}
    env["MCP_GATEWAY_PLUGINS"] = "queue"
    proc = subprocess.run(
        [sys.executable, "-m", "gateway.cli", "health", "--json"],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    report = json.loads(proc.stdout)
    (check,) = [c for c in report["checks"] if c["check"] == "jobs_db"]
    assert check["status"] == "uninitialized"
    assert "python -m gateway_queue init" in check["detail"]
    assert report["ok"] is True
    assert list(tmp_path.iterdir()) == []  # nothing was created
