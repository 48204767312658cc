"""Four tools over a bookmarks API, declared in the core's REST dialect (``gateway.rest``).

The API (``BOOKMARKS_API_URL``) is four routes::

    GET    /bookmarks?tag=&limit=&offset=   {"items": [Bookmark, ...], "total": n}
    GET    /bookmarks/{id}                  Bookmark, or 404
    POST   /bookmarks {url, title, tags}    the new Bookmark (201)
    DELETE /bookmarks/{id}                  {"deleted": id}, or 404
    GET    /health                          200 when up

Each tool is a typed function bound to the API by ``api``: its parameters are the arguments
(the published ``inputSchema``, unknown ones refused), its return type the answer's model, its
docstring what the model reads. Each sends one route (``ctx.fetch(ROUTE, Model)`` sends the
call's arguments and returns the answer as the model); ``bookmarks_list`` adds the paging
fields. The core gives all four the settings (``BOOKMARKS_API_URL``, ``BOOKMARKS_API_TOKEN``,
…), one keep-alive client, the error map, a health check and a circuit breaker; no function
deals with an HTTP error.
"""

from __future__ import annotations

from typing import Annotated, Any

from pydantic import BaseModel, Field

from gateway import Mutation, Plugin
from gateway.rest import OffsetPage, RestBackend, RestContext, RestTools, Route, offset_page

BOOKMARKS = RestBackend.define(
    "bookmarks",
    env_prefix="BOOKMARKS_API",
    settings_table="bookmarks",
    title="the bookmarks API",
    health_path="/health",
)
api = RestTools(BOOKMARKS)
plugin = Plugin(tools=api)  # what the entry point names

BookmarkId = Annotated[int, Field(strict=True, ge=1, le=2**31 - 1, description="Bookmark id.")]
Tag = Annotated[str, Field(min_length=1, max_length=40, pattern=r"^[a-z0-9-]+$")]
NO_BOOKMARK = "no bookmark {bookmark_id}; bookmarks_list shows the ids"


class Bookmark(BaseModel):
    id: int
    url: str
    title: str
    tags: list[str] = []


class BookmarkPage(OffsetPage):
    bookmarks: list[Bookmark]


class Deleted(BaseModel):
    deleted: int


class _Answer(BaseModel):
    items: list[Bookmark]
    total: int


LIST = Route("GET", "/bookmarks", query=("tag", "limit", "offset"), what="the bookmarks")
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


@api.read
async def bookmarks_list(
    tag: Tag | None = Field(None, description="Only bookmarks with this tag."),
    limit: Annotated[int, Field(ge=1, le=100, description="Most bookmarks to return.")] = 20,
    offset: Annotated[int, Field(ge=0, le=1_000_000, description="Bookmarks to skip.")] = 0,
    *,
    ctx: RestContext[Any],
) -> BookmarkPage:
    """Bookmarks, newest first, a page at a time; filter by tag."""
    answer = await ctx.fetch(LIST, _Answer)  # sends the arguments; another shape: BACKEND_ERROR
    paging = offset_page(total=answer.total, offset=offset, limit=limit, returned=len(answer.items))
    return BookmarkPage(bookmarks=answer.items, **paging)


@api.read
async def bookmarks_get(bookmark_id: BookmarkId, *, ctx: RestContext[Any]) -> Bookmark:
    """One bookmark: URL, title, tags."""
    return await ctx.fetch(GET, Bookmark)


@api.mutation(
    Mutation(
        consequence="adds a bookmark",
        requires="nothing",
        reversible=True,
        destructive=False,
        idempotent=False,
    )
)
async def bookmarks_add(
    url: Annotated[
        str, Field(max_length=2000, pattern=r"^https?://\S+$", description="http(s) URL.")
    ],
    title: Annotated[str, Field(min_length=1, max_length=200, description="What it is.")],
    tags: list[Tag] = Field(default_factory=list, max_length=10, description="Lower-case tags."),
    *,
    ctx: RestContext[Any],
) -> Bookmark:
    """Keep a URL as a bookmark."""
    return await ctx.fetch(ADD, Bookmark)


@api.mutation(
    Mutation(
        consequence="deletes the bookmark",
        requires="the bookmark exists",
        reversible=False,
        destructive=True,
        idempotent=True,
    )
)
async def bookmarks_delete(bookmark_id: BookmarkId, *, ctx: RestContext[Any]) -> Deleted:
    """Delete a bookmark."""
    return await ctx.fetch(DELETE, Deleted)
