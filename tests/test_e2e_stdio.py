"""What Claude Code sees: a real `mcp-gateway serve` subprocess and the official MCP client."""

from __future__ import annotations

import json
import os
import sys

import anyio
import pytest
from conftest import gateway_env
from fixture_plugins import WORKER
from mcp import Client, StdioServerParameters

from gateway.testing import tool_error

pytestmark = [pytest.mark.e2e, pytest.mark.anyio]


def _params(tmp_path, **env) -> StdioServerParameters:
    return StdioServerParameters(
        command=sys.executable,
        args=["-m", "gateway.cli", "serve"],
        cwd=str(tmp_path),
        env=gateway_env(**env),
    )


async def test_tools_list_carries_annotations_and_the_mutation_paragraph(tmp_path):
    state = tmp_path / "state"
    with anyio.fail_after(60):
        params = _params(tmp_path, MCP_GATEWAY_PLUGINS="notes", XDG_STATE_HOME=str(state))
        async with Client(params, mode="legacy") as client:
            tools = {t.name: t for t in (await client.list_tools()).tools}
            search, add, delete = tools["notes_search"], tools["notes_add"], tools["notes_delete"]

            assert search.annotations.read_only_hint is True
            assert search.annotations.destructive_hint is False
            assert "MUTATION" not in search.description
            assert search.input_schema["additionalProperties"] is False
            assert search.output_schema["properties"]["count"]["type"] == "integer"

            assert add.annotations.read_only_hint is False
            assert add.annotations.destructive_hint is False
            assert add.annotations.idempotent_hint is False
            assert "MUTATION: appends a new note" in add.description
            assert "reversible" in add.description and "NOT reversible" not in add.description

            assert delete.annotations.destructive_hint is True
            assert "NOT reversible" in delete.description
            assert "Requires: a note with this id exists" in delete.description
            assert add.annotations.title == "Add a note"

            ok = await client.call_tool("notes_add", {"text": "from the client"})
            assert not ok.is_error
            assert ok.structured_content == {"id": 1, "text": "from the client", "tags": []}
            assert json.loads(ok.content[0].text) == ok.structured_content

            bad = await client.call_tool("notes_search", {"limit": 1000})
            assert bad.is_error
            err = tool_error(bad)
            assert err["code"] == "VALIDATION_ERROR" and err["retryable"] is False
            assert err["message"].startswith("Invalid arguments: limit:")

            unknown = await client.call_tool("notes_search", {"query": "x", "color": "red"})
            assert tool_error(unknown)["code"] == "VALIDATION_ERROR"
            assert "color" in tool_error(unknown)["message"]

            # An error result of a tool with an outputSchema is still accepted by the strict SDK client.
            assert search.output_schema is not None and bad.structured_content is None

            nope = await client.call_tool("no_such_tool", {})
            assert tool_error(nope)["code"] == "NOT_FOUND"
    # No audit_log set: the user's state directory, not the project the gateway runs in.
    assert not (tmp_path / "data/gateway").exists()
    audit = [
        json.loads(line) for line in (state / "mcp-gateway/audit.jsonl").read_text().splitlines()
    ]
    assert [(a["tool"], a["outcome"]) for a in audit] == [
        ("notes_add", "STARTED"),
        ("notes_add", "OK"),
    ]
    assert audit[0]["arguments"] == {"text": "str"}  # names and shapes, never values


async def test_progress_notifications_reach_the_client_and_stdout_stays_clean(
    tmp_path, plugin_site
):
    plugin_site("gwfx-worker", {"worker": "gwfx_worker"}, {"gwfx_worker": WORKER})
    seen: list[tuple[float, float | None, str | None]] = []

    async def on_progress(p: float, total: float | None, message: str | None) -> None:
        seen.append((p, total, message))

    params = _params(tmp_path, MCP_GATEWAY_PLUGINS="worker", PYTHONPATH=os.environ["PYTHONPATH"])
    with anyio.fail_after(60):
        async with Client(params, mode="legacy") as client:
            res = await client.call_tool("count_up", {"n": 4}, progress_callback=on_progress)
            assert res.structured_content == {"counted": 4}
            timed = await client.call_tool("sleepy", {"seconds": 30})
            assert tool_error(timed)["code"] == "TIMEOUT"
            assert "2 s" in tool_error(timed)["message"]
    assert [s[0] for s in seen] == [1, 2, 3, 4]
    assert seen[-1] == (4, 4, "step 4 of 4")


async def test_read_only_deployments_hide_and_refuse_mutation_tools(tmp_path):
    with anyio.fail_after(60):
        async with Client(
            _params(
                tmp_path,
                MCP_GATEWAY_PLUGINS="notes",
                MCP_GATEWAY_READ_ONLY="1",
                XDG_STATE_HOME=str(tmp_path / "state"),
            ),
            mode="legacy",
        ) as client:
            names = {t.name for t in (await client.list_tools()).tools}
            assert (
                "notes_search" in names and "notes_add" not in names and "notes_delete" not in names
            )
            refused = await client.call_tool("notes_add", {"text": "sneaky"})
            assert tool_error(refused)["code"] == "PERMISSION_DENIED"
            assert "read-only" in tool_error(refused)["message"]
    assert not (tmp_path / "data" / "notes.json").exists()
    assert not (tmp_path / "state/mcp-gateway/audit.jsonl").exists()
