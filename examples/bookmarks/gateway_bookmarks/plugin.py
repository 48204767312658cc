"""Four tools over a bookmarks API, declared in the core's REST dialect (``gateway.rest``).

The API (``BOOKMARKS_API_URL``) is four routes::

    GET    /bookmarks?tag=&limit=&offset=   {"items": [Bookmark, ...], "total": n}
    GET    /bookmarks/{id}                  Bookmark, or 404
    POST   /bookmarks {url, title, tags}    the new Bookmark (201)
    DELETE /bookmarks/{id}                  {"deleted": id}, or 404
    GET    /health                          200 when up

Three tools are one call each: a route, an input model, an output model. ``bookmarks_list``
is the same declaration with a function, because it adds the paging fields to the answer.
The core gives all four the settings (``BOOKMARKS_API_URL``, ``BOOKMARKS_API_TOKEN``, …), one
keep-alive client, the error map, a health check and a circuit breaker.
"""

from __future__ import annotations

from typing import Annotated, Any

from pydantic import BaseModel, ConfigDict, Field

from gateway import Mutation, PluginParts, Tier
from gateway.rest import OffsetPage, RestBackend, RestContext, RestTool, Route, offset_page

BOOKMARKS = RestBackend.define(
    "bookmarks",
    env_prefix="BOOKMARKS_API",
    settings_table="bookmarks",
    title="the bookmarks API",
    health_path="/health",
)

BookmarkId = Annotated[int, Field(strict=True, ge=1, le=2**31 - 1, description="Bookmark id.")]
Tag = Annotated[str, Field(min_length=1, max_length=40, pattern=r"^[a-z0-9-]+$")]


class Args(BaseModel):
    model_config = ConfigDict(extra="forbid")  # unknown arguments are refused


class Bookmark(BaseModel):
    id: int
    url: str
    title: str
    tags: list[str] = []


# --- one call each ---------------------------------------------------------------------------


class BookmarkArgs(Args):
    bookmark_id: BookmarkId


class AddArgs(Args):
    url: str = Field(max_length=2000, pattern=r"^https?://\S+$", description="http(s) URL.")
    title: str = Field(min_length=1, max_length=200, description="What it is.")
    tags: list[Tag] = Field(default_factory=list, max_length=10, description="Lower-case tags.")


class Deleted(BaseModel):
    deleted: int


NO_BOOKMARK = "no bookmark {bookmark_id}; bookmarks_list shows the ids"

GET = Route(
    "GET", "/bookmarks/{bookmark_id}", what="bookmark {bookmark_id}", status={404: NO_BOOKMARK}
)
ADD = Route("POST", "/bookmarks", body=("url", "title", "tags"), what="the new bookmark")
DELETE = Route(
    "DELETE",
    "/bookmarks/{bookmark_id}",
    what="deleting bookmark {bookmark_id}",
    status={404: NO_BOOKMARK},
)

# --- a route and a function: paging ----------------------------------------------------------


class ListArgs(Args):
    tag: Tag | None = Field(None, description="Only bookmarks with this tag.")
    limit: int = Field(20, ge=1, le=100, description="Most bookmarks to return.")
    offset: int = Field(0, ge=0, le=1_000_000, description="Bookmarks to skip.")


class BookmarkPage(OffsetPage):
    bookmarks: list[Bookmark]


class _Answer(BaseModel):
    items: list[Bookmark]
    total: int


LIST = Route("GET", "/bookmarks", query=("tag", "limit", "offset"), what="the bookmarks")


async def list_bookmarks(args: ListArgs, ctx: RestContext[Any]) -> BookmarkPage:
    answer = await ctx.fetch(LIST, _Answer, args)  # an answer of another shape: BACKEND_ERROR
    paging = offset_page(
        total=answer.total, offset=args.offset, limit=args.limit, returned=len(answer.items)
    )
    return BookmarkPage(bookmarks=answer.items, **paging)


TOOLS = (
    RestTool(
        name="bookmarks_list",
        description="Bookmarks, newest first, a page at a time; filter by tag.",
        input_model=ListArgs,
        output_model=BookmarkPage,
        tier=Tier.READ,
        backend=BOOKMARKS,
        run=list_bookmarks,
    ),
    RestTool(
        name="bookmarks_get",
        description="One bookmark: URL, title, tags.",
        input_model=BookmarkArgs,
        output_model=Bookmark,
        tier=Tier.READ,
        backend=BOOKMARKS,
        route=GET,
    ),
    RestTool(
        name="bookmarks_add",
        description="Keep a URL as a bookmark.",
        input_model=AddArgs,
        output_model=Bookmark,
        tier=Tier.MUTATION,
        mutation=Mutation(
            consequence="adds a bookmark",
            requires="nothing",
            reversible=True,
            destructive=False,
            idempotent=False,
        ),
        backend=BOOKMARKS,
        route=ADD,
    ),
    RestTool(
        name="bookmarks_delete",
        description="Delete a bookmark.",
        input_model=BookmarkArgs,
        output_model=Deleted,
        tier=Tier.MUTATION,
        mutation=Mutation(
            consequence="deletes the bookmark",
            requires="the bookmark exists",
            reversible=False,
            destructive=True,
            idempotent=True,
        ),
        backend=BOOKMARKS,
        route=DELETE,
    ),
)

# The hooks that hand the core these tools (the entry point names this module).
PARTS = PluginParts(tools=TOOLS)
register_tools = PARTS.register_tools
