"""The gateway's plugins of bench/authoring (code lines against FastMCP's) load and serve, through
``gateway.testing``: both versions, the API before typed functions and after, publish the same
tools and answer the calls ``check_fastmcp.py`` makes of FastMCP's, the REST one against a real
HTTP server on 127.0.0.1."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

from gateway.testing import gateway_client, make_gateway, tool_error

AUTHORING = Path(__file__).resolve().parent.parent / "bench" / "authoring"
VERSIONS = ("before", "after")


def _module(relative: str) -> ModuleType:
    """A file of bench/authoring, imported once per process."""
    name = "authoring_" + relative.removesuffix(".py").replace("/", "_")
    if name not in sys.modules:
        spec = importlib.util.spec_from_file_location(name, AUTHORING / relative)
        assert spec is not None and spec.loader is not None
        module = importlib.util.module_from_spec(spec)
        sys.modules[name] = module
        spec.loader.exec_module(module)
    return sys.modules[name]


def _plugin(version: str, name: str) -> object:
    """What an entry point would name: the Plugin object, or the module with its hooks."""
    module = _module(f"{version}/{name}.py")
    return getattr(module, "plugin", module)


TASK = {"id": 1, "title": "write the bench", "done": False, "due": "2026-12-01"}


@pytest.mark.anyio
@pytest.mark.parametrize("version", VERSIONS)
async def test_the_tasks_plugin_serves_its_three_tools_over_the_api(version, tmp_path):
    with _module("tasks_api.py").serving() as api:
        gw = make_gateway(
            objects={"tasks": _plugin(version, "tasks")},
            entry_points=False,
            cwd=tmp_path,
            env={"TASKS_API_URL": api.url},
        )
        async with gw, gateway_client(gw) as client:
            added = await client.call_tool("tasks_add", dict(title=TASK["title"], due=TASK["due"]))
            listed = await client.call_tool("tasks_list", {"done": False})
            got = await client.call_tool("tasks_get", {"task_id": 1})
            missing = await client.call_tool("tasks_get", {"task_id": 9})
            bad = await client.call_tool("tasks_add", {"title": "x", "due": "tomorrow"})
        sent = list(api.requests)
    assert added.structured_content == got.structured_content == TASK
    assert listed.structured_content == {"tasks": [TASK], "total": 1}
    assert tool_error(missing)["code"] == "NOT_FOUND"
    assert tool_error(missing)["message"] == "no task 9"
    assert tool_error(bad)["code"] == "VALIDATION_ERROR"
    assert sent == [
        ("POST", "/tasks", {}, {"title": "write the bench", "due": "2026-12-01"}),
        ("GET", "/tasks", {"done": "false", "limit": "20"}, None),
        ("GET", "/tasks/1", {}, None),
        ("GET", "/tasks/9", {}, None),
    ]


@pytest.mark.anyio
@pytest.mark.parametrize("version", VERSIONS)
async def test_the_files_plugin_serves_its_two_tools_inside_the_data_root(version, tmp_path):
    gw = make_gateway(
        objects={"files": _plugin(version, "files")},
        entry_points=False,
        cwd=tmp_path,
        env={"FILES_MAX_BYTES": "100"},
    )
    async with gw:
        written = await gw.call("write_file", {"path": "notes/a.txt", "text": "hello world"})
        read = await gw.call("read_file", {"path": "notes/a.txt"})
        cut = await gw.call("read_file", {"path": "notes/a.txt", "max_chars": 5})
        outside = await gw.call("read_file", {"path": "../elsewhere.txt"})
        missing = await gw.call("read_file", {"path": "nothing.txt"})
        await gw.call("write_file", {"path": "big.txt", "text": "x" * 200})
        too_big = await gw.call("read_file", {"path": "big.txt"})
    assert written.payload == {"path": "notes/a.txt", "chars": 11}
    assert (tmp_path / "notes" / "a.txt").read_text() == "hello world"
    assert read.payload == {"path": "notes/a.txt", "text": "hello world", "truncated": False}
    assert cut.payload == {"path": "notes/a.txt", "text": "hello", "truncated": True}
    assert outside.code == "VALIDATION_ERROR" and "data roots" in outside.text()
    assert (missing.code, missing.payload["error"]["message"]) == (
        "NOT_FOUND",
        "no file nothing.txt",
    )
    assert too_big.code == "VALIDATION_ERROR"
    assert too_big.payload["error"]["message"] == "path: big.txt is over 100 bytes"


@pytest.mark.anyio
@pytest.mark.parametrize("name", ["tasks", "files"])
async def test_before_and_after_publish_the_same_tools(name, tmp_path):
    published: list[Any] = []
    for version in VERSIONS:
        gw = make_gateway(
            objects={name: _plugin(version, name)},
            entry_points=False,
            cwd=tmp_path / version,
            offer_unconfigured_tools=True,
        )
        async with gw, gateway_client(gw) as client:
            tools = (await client.list_tools()).tools
        published.append([t.model_dump(mode="json") for t in tools if t.name != "gateway_status"])
    before, after = published
    assert len(after) == {"tasks": 3, "files": 2}[name]
    assert after == before
