"""Gitea's REST API v1 as the tools use it, over the core's REST kit.

The kit's client (one keep-alive connection pool per backend, opened on the first call) sends
every request and maps every transport failure and status; this module knows Gitea: its paths,
its paging (clipped page sizes), its quirks (409 for an empty repository, ``/raw`` falling back
to the default branch for unknown refs). The contract is in ``reference/gitea/README.md`` of the
design documents.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from functools import partial
from typing import Any, Literal, TypeVar
from urllib.parse import quote

import httpx

from gateway import ErrorCode, GatewayError
from gateway.rest import Failure, gather
from gateway.rest.client import RestClient

from .models import Settings

GITEA_MAX_PAGE = 50  # [api] MAX_RESPONSE_ITEMS default; larger limits are clipped silently
TREE_MAX_PAGE = 1000  # [api] DEFAULT_GIT_TREES_PER_PAGE

T = TypeVar("T")


class EmptyRepository(GatewayError):
    """The job's repository exists but has no commits yet: Gitea answers 409 (its
    ``EmptyRepository``) wherever a git object is needed. A deliberate ``NOT_FOUND`` wherever it
    is raised; the listing tools answer an empty result instead."""

    def __init__(self, name: str | None = None) -> None:
        where = f"the job repository {name}" if name else "the job's repository"
        super().__init__(
            ErrorCode.NOT_FOUND, f"{where} is empty: the job has not committed anything yet"
        )


@dataclass(frozen=True)
class Commit:
    sha: str
    tree: str
    message: str
    author_name: str
    author_email: str
    author_date: str
    committer_date: str
    parents: tuple[str, ...]


TreeEntryType = Literal["blob", "tree", "commit"]
_ENTRY_TYPES: tuple[TreeEntryType, ...] = ("blob", "tree", "commit")


@dataclass(frozen=True)
class TreeEntry:
    """One entry of a git tree; ``mode`` as git writes it in tree objects (``40000``)."""

    name: str
    mode: str
    type: TreeEntryType
    sha: str
    size: int


@dataclass(frozen=True)
class Tag:
    name: str
    id: str
    commit: str
    created: str
    message: str


@dataclass(frozen=True)
class RawFile:
    data: bytes
    size: int  # the whole file, even when only a prefix was read
    complete: bool
    content_type: str
    object_type: Literal["file", "symlink"]


def _shape_error(what: str) -> GatewayError:
    return GatewayError(
        ErrorCode.BACKEND_ERROR,
        f"Gitea answered {what} in an unexpected shape; is GITEA_URL a Gitea server "
        "(version 1.20 or later)?",
    )


def _parse(what: str, fn: Callable[[], T]) -> T:
    try:
        return fn()
    except (KeyError, TypeError, ValueError, AttributeError, IndexError):
        raise _shape_error(what) from None


def parse_commit(item: Any) -> Commit:
    c = item["commit"]
    return Commit(
        sha=str(item["sha"]),
        tree=str(c["tree"]["sha"]),
        message=str(c.get("message") or ""),
        author_name=str(c["author"]["name"]),
        author_email=str(c["author"]["email"]),
        author_date=str(c["author"]["date"]),
        committer_date=str(c["committer"]["date"]),
        parents=tuple(str(p["sha"]) for p in item.get("parents") or []),
    )


def parse_tree_entry(item: Any) -> TreeEntry:
    kind = next((k for k in _ENTRY_TYPES if k == item["type"]), None)
    if kind is None:
        raise ValueError(item["type"])
    mode = format(int(str(item["mode"]), 8), "o")  # Gitea sends %06o: 040000 -> 40000
    sha = str(item["sha"])
    bytes.fromhex(sha)
    return TreeEntry(str(item["path"]), mode, kind, sha.lower(), int(item.get("size") or 0))


def parse_tag(item: Any) -> Tag:
    return Tag(
        name=str(item["name"]),
        id=str(item.get("id") or item["commit"]["sha"]),
        commit=str(item["commit"]["sha"]),
        created=str(item["commit"]["created"]),
        message=str(item.get("message") or ""),
    )


def _total(headers: httpx.Headers) -> int | None:
    for name in ("X-Total-Count", "X-Total"):
        value = headers.get(name)
        if value is not None and value.strip().isdigit():
            return int(value)
    return None


_CONTENT_RANGE = re.compile(r"bytes\s+(?:\d+-\d+|\*)/(\d+)")


def _empty(_: Failure) -> EmptyRepository:
    return EmptyRepository()


def _status(not_found: str | None = None) -> dict[int, Any]:
    """Gitea's answers that mean more than the kit's defaults."""
    rules: dict[int, Any] = {
        401: (
            ErrorCode.PERMISSION_DENIED,
            "Gitea refused the credentials (HTTP 401): set a valid GITEA_TOKEN "
            "(or GITEA_USER and GITEA_PASSWORD) for the gateway",
        ),
        403: (
            ErrorCode.PERMISSION_DENIED,
            "Gitea refused access to {what} (HTTP 403): the token needs the read:repository "
            "scope, or the server requires sign-in — set GITEA_TOKEN",
        ),
        409: _empty,
    }
    if not_found:
        rules[404] = (ErrorCode.NOT_FOUND, not_found)
    return rules


class GiteaClient:
    """Gitea's endpoints over the kit's shared client; one per REST client (see
    :func:`gateway_gitea.tools.client_of`), so what it learns about page sizes is kept."""

    def __init__(self, rest: RestClient, settings: Settings) -> None:
        self.rest = rest
        self.settings = settings
        self.page_cap = GITEA_MAX_PAGE

    # --- plumbing ----------------------------------------------------------------------------

    def full_name(self, job_id: str) -> str:
        return f"{self.settings.owner}/{self.settings.repo_name(job_id)}"

    def _repo(self, job_id: str) -> str:
        owner = quote(self.settings.owner, safe="")
        return f"/repos/{owner}/{quote(self.settings.repo_name(job_id), safe='')}"

    async def _get_json(
        self,
        path: str,
        params: Mapping[str, str | int] | None,
        what: str,
        not_found: str | None = None,
    ) -> tuple[Any, httpx.Headers]:
        answer = await self.rest.answer(
            "GET", path, params=params, what=what, status=_status(not_found)
        )
        return answer.data, answer.headers

    async def _list_page(
        self, path: str, params: dict[str, str | int], page: int, size: int, what: str
    ) -> tuple[list[Any], int | None]:
        data, headers = await self._get_json(path, {**params, "page": page, "limit": size}, what)
        if not isinstance(data, list):
            raise _shape_error(what)
        return data, _total(headers)

    async def _window(
        self, path: str, params: dict[str, str | int], offset: int, count: int, what: str
    ) -> tuple[list[Any], int]:
        """Items ``[offset, offset + count)`` of a paginated list, and the list's total.

        Gitea clips ``limit`` to its MAX_RESPONSE_ITEMS (50 unless configured otherwise), so the
        window is read as aligned pages of the largest size the server honours.
        """
        while True:
            size = min(count, self.page_cap)
            first = offset // size + 1
            last = (offset + count - 1) // size + 1
            pages = await gather(
                [
                    partial(self._list_page, path, params, number, size, what)
                    for number in range(first, last + 1)
                ]
            )
            items: list[Any] = []
            total: int | None = None
            clipped = False
            for number, (got, page_total) in zip(range(first, last + 1), pages, strict=True):
                total = page_total if page_total is not None else total
                page_end = (number - 1) * size + len(got)
                if len(got) < size and page_total is not None and page_end < page_total:
                    clipped = True
                    self.page_cap = max(1, len(got))
                items.extend(got)
            if clipped:
                continue
            start = offset - (first - 1) * size
            window = items[start : start + count]
            return window, total if total is not None else offset + len(window)

    async def _all(self, path: str, params: dict[str, str | int], what: str) -> list[Any]:
        first, total = await self._window(path, params, 0, self.page_cap, what)
        if total is None or total <= len(first):
            return first
        rest, _ = await self._window(path, params, len(first), total - len(first), what)
        return first + rest

    # --- endpoints ---------------------------------------------------------------------------

    async def repository(self, job_id: str) -> dict[str, Any]:
        name = self.full_name(job_id)
        data, _ = await self._get_json(
            self._repo(job_id),
            None,
            f"repository {name}",
            not_found=(
                f"no Gitea repository {name} for job {job_id}: check the job id, or the job has "
                "not delivered its work to Gitea yet"
            ),
        )
        if not isinstance(data, dict):
            raise _shape_error(f"repository {name}")
        return data

    async def resolve(self, job_id: str, ref: str) -> Commit:
        """The commit ``ref`` names (branch, tag, short or full SHA, ``HEAD``), resolved once."""
        name = self.full_name(job_id)
        rev = ref
        if ref == "HEAD":
            info = await self.repository(job_id)
            if info.get("empty"):
                raise EmptyRepository(name)
            rev = _parse(f"repository {name}", lambda: str(info["default_branch"]))
        what = f"ref {ref!r} of {name}"
        try:
            data, _ = await self._get_json(
                f"{self._repo(job_id)}/commits",
                {
                    "sha": rev,
                    "limit": 1,
                    "stat": "false",
                    "verification": "false",
                    "files": "false",
                },
                what,
            )
        except EmptyRepository:
            raise
        except GatewayError as err:
            if err.code is not ErrorCode.NOT_FOUND:
                raise
            if ref != "HEAD":
                await self.repository(job_id)  # a missing repository is the better message
            raise GatewayError(
                ErrorCode.NOT_FOUND,
                f"ref {ref!r} not found in {name}: no branch, tag or commit of that name; "
                "list_job_tags shows the tags, list_job_commits the commits, HEAD is the "
                "default branch",
            ) from None
        if not isinstance(data, list) or not data:
            raise GatewayError(ErrorCode.NOT_FOUND, f"ref {ref!r} names no commit in {name}")
        return _parse(what, lambda: parse_commit(data[0]))

    async def commits(
        self, job_id: str, sha: str, not_sha: str | None, offset: int, count: int
    ) -> tuple[list[Commit], int]:
        params: dict[str, str | int] = {
            "sha": sha,
            "stat": "false",
            "verification": "false",
            "files": "false",
        }
        if not_sha:
            params["not"] = not_sha
        what = f"the commits of {self.full_name(job_id)}"
        items, total = await self._window(
            f"{self._repo(job_id)}/commits", params, offset, count, what
        )
        return _parse(what, lambda: [parse_commit(i) for i in items]), total

    async def tree(self, job_id: str, sha: str) -> list[TreeEntry]:
        """All entries of one tree (not recursive), every page."""
        path = f"{self._repo(job_id)}/git/trees/{sha}"
        what = f"tree {sha[:12]} of {self.full_name(job_id)}"

        async def page(number: int) -> tuple[list[TreeEntry], int, bool]:
            data, _ = await self._get_json(path, {"page": number, "per_page": TREE_MAX_PAGE}, what)
            return _parse(
                what,
                lambda: (
                    [parse_tree_entry(e) for e in data.get("tree") or []],
                    int(data.get("total_count") or 0),
                    bool(data.get("truncated")),
                ),
            )

        entries, total, truncated = await page(1)
        if not truncated or len(entries) >= total or not entries:
            return entries
        per_page = len(entries)
        more = (total + per_page - 1) // per_page
        rest = await gather([partial(page, n) for n in range(2, more + 1)])
        for got, _, _ in rest:
            entries.extend(got)
        return entries

    async def raw(
        self, job_id: str, path: str, commit: str, *, limit: int, use_range: bool
    ) -> RawFile:
        """The bytes of ``path`` at the full SHA ``commit`` (never a ref: ``/raw`` silently
        falls back to the default branch for refs it does not know). Reads at most ``limit``
        bytes; ``use_range`` asks the server for only those."""
        name = self.full_name(job_id)
        what = f"file {path!r} at {commit[:12]} of {name}"
        url = f"{self._repo(job_id)}/raw/{quote(path, safe='/')}"
        headers = {"Accept": "*/*"}
        if use_range:
            headers["Range"] = f"bytes=0-{limit - 1}"
        async with self.rest.stream(
            "GET", url, params={"ref": commit}, headers=headers, what=what
        ) as resp:
            if resp.status_code == 416:  # an empty file has no byte 0
                match = _CONTENT_RANGE.search(resp.headers.get("Content-Range", ""))
                if match and int(match.group(1)) == 0:
                    return RawFile(b"", 0, True, resp.headers.get("Content-Type", ""), "file")
            if resp.status_code >= 300:
                body, _ = await self.rest.read_prefix(resp, 4096, what)
                if resp.status_code == 404 and b"getBlobForEntry" in body:
                    raise GatewayError(
                        ErrorCode.NOT_FOUND,
                        f"{path!r} is a directory (or submodule) at {commit[:12]} in {name}, "
                        "not a file; list it with list_job_files",
                    )
                missing = (
                    f"no file {path!r} at {commit[:12]} in {name}; list_job_files shows "
                    "what exists at that ref"
                )
                raise self.rest.failure(resp.status_code, body, what, _status(missing))
            data, complete = await self.rest.read_prefix(resp, limit, what)
            size = len(data)
            match = _CONTENT_RANGE.search(resp.headers.get("Content-Range", ""))
            if match:
                size = int(match.group(1))
            elif not complete and resp.headers.get("Content-Length", "").isdigit():
                size = int(resp.headers["Content-Length"])
            complete = complete and size <= len(data)
            symlink = resp.headers.get("X-Gitea-Object-Type") == "symlink"
            kind: Literal["file", "symlink"] = "symlink" if symlink else "file"
            return RawFile(data, size, complete, resp.headers.get("Content-Type", ""), kind)

    async def tags(self, job_id: str) -> list[Tag]:
        """Every tag, in Gitea's order (newest first); an empty repository has none."""
        what = f"the tags of {self.full_name(job_id)}"
        try:
            items = await self._all(f"{self._repo(job_id)}/tags", {}, what)
        except EmptyRepository:
            return []  # what older Gitea versions answer where newer ones give 200 []
        except GatewayError as err:
            if err.code is ErrorCode.NOT_FOUND:
                await self.repository(job_id)  # raises the repository's own message
            raise
        return _parse(what, lambda: [parse_tag(i) for i in items])
