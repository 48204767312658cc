"""The example REST plugin, tested the way a third-party author would: against a fake of the
bookmarks API that is a real HTTP server on 127.0.0.1 (``gateway.testing.backends``)."""

from __future__ import annotations

from typing import Any

import pytest

from gateway.testing import (
    assert_backend_tools_degrade,
    assert_plugin_conforms,
    gateway_client,
    tool_error,
)
from gateway.testing.backends import FakeBackend, Reply


class BookmarksApi(FakeBackend):
    """The four routes of the bookmarks API, kept in memory."""

    def __init__(self) -> None:
        super().__init__()
        self.marks: dict[int, dict[str, Any]] = {}

    def respond(self, request: Any) -> Reply:
        path, method = request.path, request.method
        if path == "/health":
            return Reply.json({"status": "ok"})
        if path == "/bookmarks" and method == "POST":
            new = {"id": len(self.marks) + 1, "tags": [], **request.json}
            self.marks[new["id"]] = new
            return Reply.json(new, 201)
        if path == "/bookmarks":
            q = request.query
            rows = [m for m in self.marks.values() if q.get("tag") in (None, *m["tags"])][::-1]
            start, stop = int(q["offset"]), int(q["offset"]) + int(q["limit"])
            return Reply.json({"items": rows[start:stop], "total": len(rows)})
        mark = path.removeprefix("/bookmarks/")
        if not mark.isdigit() or int(mark) not in self.marks:
            return Reply.json({"detail": "Not Found"}, 404)
        if method == "DELETE":
            del self.marks[int(mark)]
            return Reply.json({"deleted": int(mark)})
        return Reply.json(self.marks[int(mark)])


@pytest.fixture
def api():
    with BookmarksApi() as server:
        yield server


@pytest.mark.anyio
async def test_the_plugin_conforms(api, tmp_path):
    await assert_plugin_conforms("bookmarks", env={"BOOKMARKS_API_URL": api.url}, cwd=tmp_path)


@pytest.mark.anyio
async def test_every_tool_fails_cleanly_whatever_the_api_does(tmp_path):
    # No guess from the schema fits a URL: the arguments for that tool are given.
    add = {"url": "https://example.org", "title": "x"}
    results = await assert_backend_tools_degrade(
        "bookmarks", examples={"bookmarks_add": add}, cwd=tmp_path
    )
    assert {tool for tool, _, _ in results} == {
        "bookmarks_list",
        "bookmarks_get",
        "bookmarks_add",
        "bookmarks_delete",
    }


@pytest.mark.anyio
async def test_add_page_through_and_delete(api, gateway_factory):
    gw = gateway_factory(plugins=["bookmarks"], env={"BOOKMARKS_API_URL": api.url})
    async with gw, gateway_client(gw) as client:
        for n in range(3):
            added = await client.call_tool(
                "bookmarks_add", {"url": f"https://example.org/{n}", "title": f"n{n}"}
            )
            assert added.structured_content["id"] == n + 1
        first = (await client.call_tool("bookmarks_list", {"limit": 2})).structured_content
        rest = await client.call_tool("bookmarks_list", {"limit": 2, "offset": 2})
        deleted = await client.call_tool("bookmarks_delete", {"bookmark_id": 3})
        gone = await client.call_tool("bookmarks_get", {"bookmark_id": 3})
    assert [b["title"] for b in first["bookmarks"]] == ["n2", "n1"]
    assert (first["total"], first["has_more"], first["next_offset"]) == (3, True, 2)
    assert [b["title"] for b in rest.structured_content["bookmarks"]] == ["n0"]
    assert rest.structured_content["has_more"] is False
    assert deleted.structured_content == {"deleted": 3}
    error = tool_error(gone)
    assert error["code"] == "NOT_FOUND"
    assert error["message"] == "no bookmark 3; bookmarks_list shows the ids"
    posted = next(r for r in api.requests if r.method == "POST")
    assert posted.json == {"url": "https://example.org/0", "title": "n0", "tags": []}


@pytest.mark.anyio
async def test_the_delete_route_is_published_as_a_destructive_mutation(api, gateway_factory):
    gw = gateway_factory(plugins=["bookmarks"], env={"BOOKMARKS_API_URL": api.url})
    async with gw, gateway_client(gw) as client:
        tools = {t.name: t for t in (await client.list_tools()).tools}
    delete = tools["bookmarks_delete"]
    assert delete.annotations.read_only_hint is False
    assert delete.annotations.destructive_hint is True
    assert "MUTATION: deletes the bookmark" in (delete.description or "")
    assert tools["bookmarks_get"].annotations.read_only_hint is True


@pytest.mark.anyio
async def test_bad_arguments_never_reach_the_api(api, gateway_factory):
    gw = gateway_factory(plugins=["bookmarks"], env={"BOOKMARKS_API_URL": api.url})
    async with gw:
        for args in ({"url": "file:///etc/passwd", "title": "x"}, {"url": "https://a", "x": 1}):
            result = await gw.call("bookmarks_add", args)
            assert result.code == "VALIDATION_ERROR", result.payload
    assert not [r for r in api.requests if r.path.startswith("/bookmarks")]
