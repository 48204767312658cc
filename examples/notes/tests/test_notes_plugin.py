"""The example plugin, tested the way a third-party author would, with gateway.testing."""

from __future__ import annotations

import json

import pytest

from gateway.testing import assert_plugin_conforms, gateway_client


@pytest.mark.anyio
async def test_notes_plugin_conforms(tmp_path):
    await assert_plugin_conforms("notes", cwd=tmp_path)


@pytest.mark.anyio
async def test_add_then_search_round_trip(gateway_factory, tmp_path):
    gw = gateway_factory(plugins=["notes"])
    async with gw, gateway_client(gw) as client:
        added = await client.call_tool("notes_add", {"text": "Buy milk", "tags": ["home"]})
        assert not added.is_error
        assert added.structured_content == {"id": 1, "text": "Buy milk", "tags": ["home"]}
        found = await client.call_tool("notes_search", {"query": "milk"})
        assert found.structured_content["count"] == 1
        assert json.loads(found.content[0].text) == found.structured_content
    stored = json.loads((tmp_path / "data" / "notes.json").read_text())
    assert [n["text"] for n in stored] == ["Buy milk"]


@pytest.mark.anyio
async def test_deleting_a_missing_note_is_not_found_and_changes_nothing(gateway_factory, tmp_path):
    gw = gateway_factory(plugins=["notes"])
    async with gw:
        await gw.call("notes_add", {"text": "keep me"})
        before = (tmp_path / "data" / "notes.json").read_bytes()
        result = await gw.call("notes_delete", {"id": 42})
    assert result.is_error and result.code == "NOT_FOUND"
    assert "42" in result.payload["error"]["message"]
    assert (tmp_path / "data" / "notes.json").read_bytes() == before


@pytest.mark.anyio
async def test_notes_file_outside_the_data_roots_is_refused(gateway_factory):
    gw = gateway_factory(
        plugins=["notes"], plugin_config={"notes": {"notes_file": "../elsewhere.json"}}
    )
    async with gw:
        result = await gw.call("notes_add", {"text": "x"})
    assert result.code == "VALIDATION_ERROR"
    assert "notes_file" in result.payload["error"]["message"]
