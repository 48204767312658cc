"""REST tools declared as typed functions through ``RestTools``: the backend named once, the
function's arguments sent by ``ctx.fetch``, against a real HTTP server on 127.0.0.1."""

from __future__ import annotations

from typing import Annotated, Any

import pytest
from pydantic import BaseModel, Field

from gateway import Args, Mutation, Plugin
from gateway.plugins import PluginState
from gateway.registry import RegistrationError
from gateway.rest import RestBackend, RestContext, RestTool, RestTools, Route
from gateway.testing import make_gateway
from gateway.testing.backends import FakeBackend, Reply

SHELF = RestBackend.define(
    "shelf", env_prefix="SHELF_API", settings_table="shelf", title="the shelf API"
)
ItemId = Annotated[int, Field(strict=True, ge=1, description="Item id.")]
NO_ITEM = "no item {item_id}; shelf_list shows the ids"


class Item(BaseModel):
    id: int
    name: str


class Items(BaseModel):
    items: list[Item]


LIST = Route("GET", "/items", query=("name", "limit"), what="the items")
GET = Route("GET", "/items/{item_id}", what="item {item_id}", status={404: NO_ITEM})
ADD = Route("POST", "/items", body=("name",), what="the new item")
DROP = Mutation(
    consequence="removes the item", requires="it exists", reversible=False, destructive=True,
    idempotent=True,
)  # fmt: skip


class DropArgs(Args):
    item_id: ItemId


def _shelf() -> tuple[RestTools, Plugin]:
    api = RestTools(SHELF)
    plugin = Plugin(tools=api)

    @api.read
    async def shelf_list(
        name: str | None = Field(None, description="Only items of this name."),
        limit: Annotated[int, Field(ge=1, le=10)] = 5,
        *,
        ctx: RestContext[Any],
    ) -> Items:
        """The items on the shelf."""
        return await ctx.fetch(LIST, Items)

    @api.read(title="Read an item")
    async def shelf_get(item_id: ItemId, *, ctx: RestContext[Any]) -> Item:
        """One item."""
        return await ctx.fetch(GET, Item)

    @api.mutation(Mutation("adds an item", "nothing", True, False, False))
    async def shelf_add(
        name: Annotated[str, Field(min_length=1)], *, ctx: RestContext[Any]
    ) -> Item:
        """Put an item on the shelf."""
        return await ctx.fetch(ADD, Item)

    api.mutation(
        DROP,
        name="shelf_drop",
        description="Take an item off the shelf.",
        input_model=DropArgs,
        route=Route("DELETE", "/items/{item_id}", what="item {item_id}", status={404: NO_ITEM}),
    )
    return api, plugin


class ShelfApi(FakeBackend):
    def __init__(self) -> None:
        super().__init__()
        self.items = {1: {"id": 1, "name": "cup"}}

    def respond(self, request: Any) -> Reply:
        if request.path == "/items" and request.method == "POST":
            new = {"id": len(self.items) + 1, **request.json}
            self.items[new["id"]] = new
            return Reply.json(new, 201)
        if request.path == "/items":
            return Reply.json({"items": list(self.items.values())})
        found = self.items.get(int(request.path.rsplit("/", 1)[1]))
        if found is None:
            return Reply.json({"detail": "Not Found"}, 404)
        if request.method == "DELETE":
            del self.items[found["id"]]
        return Reply.json(found)


@pytest.mark.anyio
async def test_typed_rest_functions_send_their_arguments_and_get_the_kits_guarantees(tmp_path):
    api, plugin = _shelf()
    assert all(isinstance(t, RestTool) and t.backend is SHELF for t in api)
    with ShelfApi() as server:
        gw = make_gateway(
            objects={"shelf": plugin},
            entry_points=False,
            cwd=tmp_path,
            env={"SHELF_API_URL": server.url},
        )
        async with gw:
            listed = await gw.call("shelf_list", {"name": "cup"})
            added = await gw.call("shelf_add", {"name": "pot"})
            got = await gw.call("shelf_get", {"item_id": 2})
            dropped = await gw.call("shelf_drop", {"item_id": 2})
            missing = await gw.call("shelf_get", {"item_id": 2})
            invalid = await gw.call("shelf_get", {"item_id": "2"})
        sent = [(r.method, r.path, r.query, r.json) for r in server.requests]
    assert listed.payload == {"items": [{"id": 1, "name": "cup"}]}
    assert added.payload == got.payload == {"id": 2, "name": "pot"}
    assert dropped.payload == {"id": 2, "name": "pot"}
    assert missing.code == "NOT_FOUND"
    assert missing.payload["error"]["message"] == "no item 2; shelf_list shows the ids"
    assert invalid.code == "VALIDATION_ERROR"
    assert sent == [
        ("GET", "/items", {"name": "cup", "limit": "5"}, None),
        ("POST", "/items", {}, {"name": "pot"}),
        ("GET", "/items/2", {}, None),
        ("DELETE", "/items/2", {}, None),
        ("GET", "/items/2", {}, None),
    ]
    tools = {t.name: t for t in gw.tools("shelf")}
    assert list(tools) == ["shelf_list", "shelf_get", "shelf_add", "shelf_drop"]
    assert tools["shelf_get"].annotations["title"] == "Read an item"
    assert tools["shelf_get"].annotations["open_world_hint"] is True
    assert tools["shelf_get"].annotations["read_only_hint"] is True
    assert tools["shelf_drop"].annotations["destructive_hint"] is True
    assert tools["shelf_add"].description.startswith("Put an item on the shelf.\n\nMUTATION: ")


@pytest.mark.anyio
async def test_an_unconfigured_backend_answers_for_typed_tools_too(tmp_path):
    _, plugin = _shelf()
    gw = make_gateway(objects={"shelf": plugin}, entry_points=False, cwd=tmp_path, env={})
    async with gw:
        result = await gw.call("shelf_get", {"item_id": 1})
    assert result.code == "BACKEND_UNAVAILABLE"
    assert "SHELF_API_URL" in result.payload["error"]["message"]


def test_a_rest_mutation_without_its_mutation_is_refused_naming_the_function(tmp_path):
    api = RestTools(SHELF)

    @api.mutation  # type: ignore[call-overload]
    async def shelf_wipe(*, ctx: RestContext[Any]) -> Items:
        """Empty the shelf."""
        return Items(items=[])

    gw = make_gateway(objects={"shelf": Plugin(tools=api)}, entry_points=False, cwd=tmp_path)
    record = gw.plugin("shelf")
    assert record is not None and record.state is PluginState.FAILED
    assert str(record.reason).startswith(
        f"invalid tool declaration: tool 'shelf_wipe' (function {__name__}."
        "test_a_rest_mutation_without_its_mutation_is_refused_naming_the_function.<locals>."
        "shelf_wipe): a mutation tool needs mutation=Mutation("
    )


def test_a_decorated_function_is_the_tool_route_run_and_shape_declare_a_model_s(tmp_path):
    api = RestTools(SHELF)
    with pytest.raises(RegistrationError, match=r"route=, run= and shape= declare a tool of an"):
        api.read(route=GET)  # type: ignore[call-overload]
    with pytest.raises(RegistrationError, match="needs name= and description="):
        api.read(input_model=DropArgs, route=GET)  # type: ignore[call-overload]
    assert len(api) == 0
