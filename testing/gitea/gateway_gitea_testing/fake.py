"""A Gitea-compatible HTTP server for tests and benchmarks, backed by real git repositories.

It answers the endpoints the gitea plugin uses, shaped as in the recorded swagger subset of
Gitea 1.25/1.26, with the documented quirks (``reference/gitea/README.md``):

- ``GET /commits``: 404 with the body ``null`` for an unknown ``sha``; 409 for an empty
  repository; 500 for an invalid ``not``; ``limit`` clipped to 50; ``X-Total-Count`` and the
  ``X-Total``/``X-PerPage``/``X-HasMore`` family; messages keep their trailing newline;
  dates in Go's RFC 3339 (``Z`` for UTC);
- ``GET /raw/{path}``: an unknown branch, tag or short SHA silently serves the default branch;
  an unknown full SHA is 404; a directory is 404 ``getBlobForEntry``; a single ``Range``
  gives 206 / 416;
- ``GET /git/trees/{sha}``: an unknown sha is 400; ``per_page`` up to 1000, ``truncated``;
- ``GET /tags``: newest first, ``commit.created`` = tagger date (annotated) or the commit's
  committer date (lightweight); 200 ``[]`` for an empty repository;
- auth: a bad token or password is 401 on every path, ``/version`` included; no header is
  anonymous (403 when ``require_signin``).

Everything is read from the repositories with git (``git log``, ``cat-file --batch``,
``ls-tree``, ``for-each-ref``). Faults for tests: ``fault = "500" | "null" | "tamper"``
(``/raw`` bodies altered), ``delay`` seconds before every answer, and ``emptied_after``: once
that many requests were answered, every git route (all but ``/repos/{o}/{r}`` itself) answers
409 ``Git Repository is empty.``, as for a repository re-created empty between two requests,
and as older Gitea versions answer ``/tags`` of an empty repository. Requests are counted in
:attr:`FakeGitea.requests` (and listed in ``log``), new TCP connections in ``connections``,
the most requests in flight at once in ``max_in_flight``.
"""

from __future__ import annotations

import base64
import functools
import json
import os
import re
import socket
import subprocess
import sys
import threading
import time
from collections import Counter
from dataclasses import dataclass, field
from datetime import datetime
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, unquote, urlsplit

MAX_RESPONSE_ITEMS = 50
DEFAULT_PAGING_NUM = 30
TREES_PER_PAGE = 1000
VERSION = "1.25.4"
FULL_SHA = re.compile(r"^(?:[0-9a-f]{40}|[0-9a-f]{64})$")
GIT_ENV = {**os.environ, "GIT_CONFIG_GLOBAL": os.devnull, "GIT_CONFIG_NOSYSTEM": "1", "LC_ALL": "C"}


def git(repo: Path, *args: str, input: bytes | None = None, check: bool = True) -> bytes:
    done = subprocess.run(
        ["git", "-C", str(repo), *args], input=input, capture_output=True, check=False, env=GIT_ENV
    )
    if check and done.returncode != 0:
        raise RuntimeError(f"git {' '.join(args)}: {done.stderr.decode(errors='replace')}")
    return done.stdout


def _when(value: str) -> datetime:
    return datetime.fromisoformat(value.replace("Z", "+00:00"))


def go_time(iso: str) -> str:
    """git's strict ISO 8601 as Go's RFC 3339 formats it: a zero offset is ``Z``."""
    return iso[:-6] + "Z" if iso.endswith(("+00:00", "-00:00")) else iso


class Repo:
    """One git repository, read the way Gitea reads it (a persistent ``cat-file --batch``)."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._lock = threading.Lock()
        self._batch: subprocess.Popen[bytes] | None = None
        self._trees: dict[tuple[str, bool], list[dict[str, Any]]] = {}

    def close(self) -> None:
        if self._batch is not None:
            self._batch.kill()
            self._batch.wait()
            self._batch = None

    def cat(self, spec: str) -> tuple[str, str, bytes] | None:
        """``(sha, type, content)`` of the object any revision names, or None."""
        if not spec or "\n" in spec or spec.startswith("-"):
            return None
        with self._lock:
            if self._batch is None:
                self._batch = subprocess.Popen(
                    ["git", "-C", str(self.path), "cat-file", "--batch"],
                    stdin=subprocess.PIPE,
                    stdout=subprocess.PIPE,
                    env=GIT_ENV,
                )
            assert self._batch.stdin and self._batch.stdout
            self._batch.stdin.write(spec.encode() + b"\n")
            self._batch.stdin.flush()
            header = self._batch.stdout.readline().rstrip(b"\n").split(b" ")
            if len(header) != 3:  # "<spec> missing" or "<spec> ambiguous"
                return None
            data = self._batch.stdout.read(int(header[2]))
            self._batch.stdout.read(1)
            return header[0].decode(), header[1].decode(), data

    def rev(self, spec: str, kind: str = "commit") -> str | None:
        """The SHA of the ``kind`` object ``spec`` names (peeling tags), like ``^{kind}``."""
        found = self.cat(f"{spec}^{{{kind}}}")
        return found[0] if found else None

    @property
    def empty(self) -> bool:
        return self.cat("HEAD") is None

    @functools.cached_property
    def default_branch(self) -> str:
        return git(self.path, "symbolic-ref", "--short", "HEAD").decode().strip()

    @functools.cached_property
    def object_format(self) -> str:
        return git(self.path, "rev-parse", "--show-object-format").decode().strip()

    def ref_exists(self, full: str) -> bool:
        return self.cat(full) is not None

    def ls_tree(self, tree: str, recursive: bool) -> list[dict[str, Any]]:
        key = (tree, recursive)
        if key not in self._trees:  # trees are immutable: safe to cache by SHA
            args = ["ls-tree", "-l", "-z"] + (["-r", "-t"] if recursive else []) + [tree]
            entries = []
            for rec in git(self.path, *args).split(b"\0"):
                if not rec:
                    continue
                meta, name = rec.split(b"\t", 1)
                mode, kind, sha, size = meta.decode().split()
                entries.append(
                    {
                        "path": name.decode("utf-8", "replace"),
                        "mode": mode,
                        "type": kind,
                        "size": int(size) if size != "-" else 0,
                        "sha": sha,
                    }
                )
            self._trees[key] = entries
        return self._trees[key]


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    block_on_close = False

    def handle_error(self, request: Any, client_address: Any) -> None:
        # A client that gave up (a test of a tool timeout) closed the connection before the
        # answer was written: not an error of the fake's, and no traceback for the run's output.
        if isinstance(sys.exc_info()[1], ConnectionError):
            return
        super().handle_error(request, client_address)


@dataclass
class FakeGitea:
    """``with FakeGitea(...) as gitea: gitea.url``; repositories keyed by ``owner/name``."""

    repos: dict[str, Path] = field(default_factory=dict)
    token: str | None = None
    users: dict[str, str] = field(default_factory=dict)
    require_signin: bool = False
    fault: str | None = None
    delay: float = 0.0
    emptied_after: int | None = None
    requests: Counter[str] = field(default_factory=Counter)
    log: list[str] = field(default_factory=list)
    connections: int = 0
    max_items: int = MAX_RESPONSE_ITEMS  # [api] MAX_RESPONSE_ITEMS of this "instance"
    in_flight: int = 0
    max_in_flight: int = 0
    _server: ThreadingHTTPServer | None = None
    _repos: dict[str, Repo] = field(default_factory=dict)
    _lock: threading.Lock = field(default_factory=threading.Lock)

    @property
    def url(self) -> str:
        assert self._server is not None
        host, port = self._server.socket.getsockname()[:2]
        return f"http://{host}:{port}"

    def start(self) -> FakeGitea:
        self._repos = {k.lower(): Repo(v) for k, v in self.repos.items()}
        server = _Server(("127.0.0.1", 0), _handler(self))
        self._server = server
        # A short poll: stop() waits for the serve loop to notice, 0.5 s by default.
        threading.Thread(
            target=server.serve_forever, kwargs={"poll_interval": 0.01}, daemon=True
        ).start()
        return self

    def stop(self) -> None:
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
            self._server = None
        for repo in self._repos.values():
            repo.close()

    def __enter__(self) -> FakeGitea:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def add_repo(self, full_name: str, path: Path) -> None:
        self._repos[full_name.lower()] = Repo(path)

    def count(self, route: str, target: str) -> None:
        with self._lock:
            self.requests[route] += 1
            self.requests["total"] += 1
            self.log.append(target)

    def reset_counts(self) -> None:
        with self._lock:
            self.requests.clear()
            self.log.clear()
            self.connections = 0
            self.max_in_flight = 0

    def repo(self, owner: str, name: str) -> Repo | None:
        return self._repos.get(f"{owner}/{name}".lower())

    def authorized(self, header: str | None) -> bool | None:
        """True: a user; None: anonymous; False: refused."""
        if not header:
            return None
        scheme, _, value = header.partition(" ")
        value = value.strip()
        if scheme.lower() in ("token", "bearer"):
            return self.token is not None and value == self.token
        if scheme.lower() == "basic":
            try:
                user, _, secret = base64.b64decode(value).decode().partition(":")
            except ValueError:
                return False
            if secret in ("", "x-oauth-basic"):
                return self.token is not None and user == self.token
            return secret == self.token or self.users.get(user) == secret
        return False


class _Reply(Exception):
    def __init__(self, status: int, body: Any, headers: dict[str, str] | None = None) -> None:
        self.status, self.body, self.headers = status, body, headers or {}


def _api_error(status: int, message: str, errors: Any = None, with_errors: bool = False) -> _Reply:
    body: dict[str, Any] = {"message": message, "url": "http://gitea.test/api/swagger"}
    if with_errors:
        body["errors"] = errors
    return _Reply(status, body)


def _int(query: dict[str, list[str]], name: str, default: int) -> int:
    try:
        return int(query.get(name, [str(default)])[0])
    except ValueError:
        return default


def _bool(query: dict[str, list[str]], name: str, default: bool) -> bool:
    value = query.get(name, [""])[0].lower()
    return default if value == "" else value in ("1", "true", "t")


def _paging(query: dict[str, list[str]], cap: int) -> tuple[int, int]:
    page = max(1, _int(query, "page", 1))
    limit = _int(query, "limit", DEFAULT_PAGING_NUM)
    if limit <= 0:
        limit = DEFAULT_PAGING_NUM
    return page, min(limit, cap)


def _handler(gitea: FakeGitea) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, format: str, *args: Any) -> None:
            return None

        def setup(self) -> None:
            super().setup()
            # Go's net/http (Gitea) disables Nagle; without this, headers and body go out as
            # two segments and every keep-alive response waits for a delayed ACK (~40 ms).
            self.connection.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            with gitea._lock:
                gitea.connections += 1

        def do_GET(self) -> None:
            with gitea._lock:
                gitea.in_flight += 1
                gitea.max_in_flight = max(gitea.max_in_flight, gitea.in_flight)
            try:
                self._route()
            except _Reply as reply:
                self._send(reply.status, reply.body, reply.headers)
            finally:
                with gitea._lock:
                    gitea.in_flight -= 1

        def _send(self, status: int, body: Any, headers: dict[str, str]) -> None:
            if isinstance(body, bytes):
                data = body
            else:
                data = json.dumps(body).encode()
                headers.setdefault("Content-Type", "application/json;charset=utf-8")
            self.send_response(status)
            for k, v in headers.items():
                self.send_header(k, v)
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def _route(self) -> None:
            split = urlsplit(self.path)
            query = parse_qs(split.query, keep_blank_values=True)
            raw_path = split.path
            gitea.count(_route_name(raw_path), self.path)
            if gitea.delay:
                time.sleep(gitea.delay)
            ok = gitea.authorized(self.headers.get("Authorization"))
            if ok is False:
                raise _api_error(401, "invalid username, password or token")
            if ok is None and gitea.require_signin:
                raise _api_error(403, "Only signed in user is allowed to call APIs.")
            if gitea.fault == "500":
                raise _api_error(500, "")
            if gitea.fault == "null":
                raise _Reply(200, None)
            if not raw_path.startswith("/api/v1/"):
                raise _api_error(404, "not found")
            parts = raw_path[len("/api/v1/") :].split("/")
            if parts == ["version"]:
                raise _Reply(200, {"version": VERSION})
            if len(parts) >= 3 and parts[0] == "repos":
                owner, name = unquote(parts[1]), unquote(parts[2])
                repo = gitea.repo(owner, name)
                if repo is None:
                    known = {k.split("/")[0] for k in gitea._repos}
                    if owner.lower() not in known:
                        raise _api_error(404, "GetUserByName")
                    raise _api_error(404, "not found", None, with_errors=True)
                self._repo_route(repo, owner, name, parts[3:], query)
            raise _api_error(404, "not found")

        def _repo_route(
            self, repo: Repo, owner: str, name: str, rest: list[str], query: dict[str, list[str]]
        ) -> None:
            if not rest:
                raise _Reply(200, _repository(repo, owner, name))
            if gitea.emptied_after is not None and gitea.requests["total"] > gitea.emptied_after:
                raise _api_error(409, "Git Repository is empty.")
            if rest == ["commits"]:
                self._commits(repo, query)
            if rest[:2] == ["git", "trees"] and len(rest) == 3:
                self._tree(repo, unquote(rest[2]), query)
            if rest[0] == "raw" and len(rest) > 1:
                self._raw(repo, "/".join(unquote(p) for p in rest[1:] if p), query)
            if rest == ["tags"]:
                self._tags(repo, query)
            raise _api_error(404, "not found")

        def _commits(self, repo: Repo, query: dict[str, list[str]]) -> None:
            if repo.empty:
                raise _api_error(409, "Git Repository is empty.")
            sha = query.get("sha", [""])[0]
            if sha:
                head = repo.rev(sha)
                if head is None:
                    raise _Reply(404, None)  # NotFoundOrServerError writes no JSON object
            else:
                head = repo.rev(repo.default_branch)
                if head is None:
                    raise _api_error(500, "")
            not_ = query.get("not", [""])[0]
            exclude: list[str] = []
            if not_:
                resolved = repo.rev(not_)
                if resolved is None:
                    raise _api_error(500, "")  # git log fails on an invalid --not
                exclude = ["--not", resolved]
            page, limit = _paging(query, gitea.max_items)
            total = int(git(repo.path, "rev-list", "--count", head, *exclude).decode())
            fmt = "%H%x1f%T%x1f%P%x1f%an%x1f%ae%x1f%aI%x1f%cn%x1f%ce%x1f%cI%x1f%B"
            out = git(
                repo.path,
                "log",
                "-z",
                f"--format={fmt}",
                f"--skip={(page - 1) * limit}",
                f"--max-count={limit}",
                head,
                *exclude,
            )
            items = [
                _commit_json(repo, rec.decode("utf-8", "replace"), query)
                for rec in out.split(b"\0")
                if rec
            ]
            pages = (total + limit - 1) // limit
            headers = {
                "X-Total-Count": str(total),
                "X-Total": str(total),
                "X-Page": str(page),
                "X-PerPage": str(limit),
                "X-PageCount": str(pages),
                "X-HasMore": "true" if page < pages else "false",
                "Link": _links(self.path, page, pages),
            }
            raise _Reply(200, items, headers)

        def _tree(self, repo: Repo, sha: str, query: dict[str, list[str]]) -> None:
            tree = repo.rev(sha, "tree")
            if tree is None:
                raise _api_error(400, f"sha not found [{sha}]")
            entries = repo.ls_tree(tree, _bool(query, "recursive", False))
            per_page = _int(query, "per_page", TREES_PER_PAGE)
            if per_page <= 0 or per_page > TREES_PER_PAGE:
                per_page = TREES_PER_PAGE
            page = max(1, _int(query, "page", 1))
            start = per_page * (page - 1)
            base = "http://gitea.test/api/v1/repos/x/y"
            body: dict[str, Any] = {
                "sha": tree,
                "url": f"{base}/git/trees/{tree}",
                "truncated": len(entries) > per_page,
                "page": page,
                "total_count": len(entries),
                "tree": [
                    {
                        **e,
                        "url": f"{base}/git/{'trees' if e['type'] == 'tree' else 'blobs'}/{e['sha']}",
                    }
                    for e in entries[start : start + per_page]
                ],
            }
            raise _Reply(200, body, {"X-Total-Count": str(len(entries))})

        def _raw(self, repo: Repo, path: str, query: dict[str, list[str]]) -> None:
            if repo.empty:
                raise _api_error(404, "not found", None, with_errors=True)
            ref = query.get("ref", [""])[0]
            default = repo.default_branch
            if not ref:
                first, _, rest = path.partition("/")
                if rest and repo.ref_exists(f"refs/heads/{first}"):
                    ref, path = first, rest
                else:
                    ref = default
            if FULL_SHA.fullmatch(ref):
                commit = repo.rev(ref)
                if commit is None:
                    raise _api_error(404, "unable to find a git ref")
            elif repo.ref_exists(f"refs/heads/{ref}") or repo.ref_exists(f"refs/tags/{ref}"):
                commit = repo.rev(ref)
            else:  # HEAD, short SHAs and unknown names: the default branch, silently
                commit = repo.rev(default)
            assert commit is not None
            entry = _lookup(repo, commit, path)
            if entry is None:
                raise _api_error(404, "not found", None, with_errors=True)
            if entry["type"] != "blob":
                raise _api_error(
                    404, "getBlobForEntry", [f"{path} is not a blob"], with_errors=True
                )
            found = repo.cat(entry["sha"])
            assert found is not None
            data = found[2]
            if gitea.fault == "tamper":  # a proxy or cache serving something else
                data += b"tampered\n"
            headers = {
                "Content-Type": "application/octet-stream"
                if b"\0" in data[:1024]
                else "text/plain; charset=utf-8",
                "X-Gitea-Object-Type": "symlink" if entry["mode"] == "120000" else "file",
                "ETag": f'"{entry["sha"]}"',
                "Accept-Ranges": "bytes",
            }
            match = re.fullmatch(r"bytes=(\d+)-(\d*)", self.headers.get("Range", "").strip())
            if match:
                start = int(match.group(1))
                end = int(match.group(2)) if match.group(2) else len(data) - 1
                if start >= len(data):
                    raise _Reply(416, b"", {"Content-Range": f"bytes */{len(data)}"})
                end = min(end, len(data) - 1)
                headers["Content-Range"] = f"bytes {start}-{end}/{len(data)}"
                raise _Reply(206, data[start : end + 1], headers)
            raise _Reply(200, data, headers)

        def _tags(self, repo: Repo, query: dict[str, list[str]]) -> None:
            page, limit = _paging(query, gitea.max_items)
            tags = _all_tags(repo)
            chunk = tags[(page - 1) * limit : page * limit]
            pages = (len(tags) + limit - 1) // limit
            headers = {"X-Total-Count": str(len(tags)), "Link": _links(self.path, page, pages)}
            raise _Reply(200, chunk, headers)

    return Handler


def _route_name(path: str) -> str:
    parts = path.split("/")  # "", "api", "v1", "repos", owner, name, rest...
    if parts[3:4] != ["repos"]:
        return parts[3] if len(parts) > 3 else "other"
    rest = parts[6:]
    if not rest:
        return "repo"
    return "git/trees" if rest[:2] == ["git", "trees"] else rest[0]


def _links(path: str, page: int, pages: int) -> str:
    base = re.sub(r"([?&])page=\d+&?", r"\1", path).rstrip("?&")
    sep = "&" if "?" in base else "?"
    links = []
    if page < pages:
        links += [
            f'<{base}{sep}page={page + 1}>; rel="next"',
            f'<{base}{sep}page={pages}>; rel="last"',
        ]
    if page > 1:
        links += [f'<{base}{sep}page=1>; rel="first"', f'<{base}{sep}page={page - 1}>; rel="prev"']
    return ",".join(links)


def _repository(repo: Repo, owner: str, name: str) -> dict[str, Any]:
    return {
        "id": abs(hash(name)) % 100000,
        "owner": {"id": 1, "login": owner, "username": owner},
        "name": name,
        "full_name": f"{owner}/{name}",
        "empty": repo.empty,
        "private": True,
        "fork": False,
        "archived": False,
        "default_branch": repo.default_branch,
        "object_format_name": repo.object_format,
        "html_url": f"http://gitea.test/{owner}/{name}",
        "clone_url": f"http://gitea.test/{owner}/{name}.git",
    }


def _commit_json(repo: Repo, record: str, query: dict[str, list[str]]) -> dict[str, Any]:
    sha, tree, parents, an, ae, ad, cn, ce, cd, message = record.split("\x1f", 9)
    if not message.endswith("\n"):
        message += "\n"
    base = "http://gitea.test/api/v1/repos/x/y/git"
    item: dict[str, Any] = {
        "url": f"{base}/commits/{sha}",
        "sha": sha,
        "created": go_time(cd),
        "html_url": f"http://gitea.test/x/y/commit/{sha}",
        "commit": {
            "url": f"{base}/commits/{sha}",
            "author": {"name": an, "email": ae, "date": go_time(ad)},
            "committer": {"name": cn, "email": ce, "date": go_time(cd)},
            "message": message,
            "tree": {"url": f"{base}/trees/{tree}", "sha": tree, "created": go_time(cd)},
            "verification": None,
        },
        "author": None,
        "committer": None,
        "parents": [{"url": f"{base}/commits/{p}", "sha": p} for p in parents.split()],
    }
    first_parent = parents.split()[0] if parents.split() else None
    if _bool(query, "files", True) or _bool(query, "stat", True):
        args = ["diff-tree", "--no-commit-id", "-r", "--no-renames", "--numstat", "-z"]
        args += [first_parent, sha] if first_parent else ["--root", sha]
        recs = [r for r in git(repo.path, *args).split(b"\0") if r]
        numstat = [r.decode("utf-8", "replace").split("\t") for r in recs]
        if _bool(query, "files", True):
            names = ["diff-tree", "--no-commit-id", "-r", "--no-renames", "--name-status", "-z"]
            names += [first_parent, sha] if first_parent else ["--root", sha]
            fields = [
                r.decode("utf-8", "replace") for r in git(repo.path, *names).split(b"\0") if r
            ]
            word = {"A": "added", "D": "removed", "M": "modified"}
            item["files"] = [
                {"filename": fields[i + 1], "status": word.get(fields[i], "modified")}
                for i in range(0, len(fields), 2)
            ]
        if _bool(query, "stat", True):
            adds = sum(int(n[0]) for n in numstat if n[0].isdigit())
            dels = sum(int(n[1]) for n in numstat if n[1].isdigit())
            item["stats"] = {"total": adds + dels, "additions": adds, "deletions": dels}
    return item


def _lookup(repo: Repo, commit: str, path: str) -> dict[str, Any] | None:
    tree = repo.rev(commit, "tree")
    parts = [p for p in path.split("/") if p]
    if not parts or tree is None:
        return None
    entry: dict[str, Any] | None = None
    for i, part in enumerate(parts):
        entries = repo.ls_tree(tree, False)
        entry = next((e for e in entries if e["path"] == part), None)
        if entry is None:
            return None
        if i < len(parts) - 1:
            if entry["type"] != "tree":
                return None
            tree = entry["sha"]
    return entry


def _all_tags(repo: Repo) -> list[dict[str, Any]]:
    fmt = "%(refname:strip=2)%00%(objecttype)%00%(objectname)%00%(*objectname)%00%(taggerdate:iso-strict)%00%(contents)%00%00"
    out = git(repo.path, "for-each-ref", f"--format={fmt}", "refs/tags")
    tags: list[dict[str, Any]] = []
    for rec in out.decode("utf-8", "replace").split("\0\0\n"):
        if not rec.strip("\n"):
            continue
        name, kind, obj, peeled, tagger_date, message = rec.lstrip("\n").split("\0")[:6]
        if kind == "tag":
            commit, created = peeled, tagger_date
        else:
            commit = obj
            created = git(repo.path, "log", "-1", "--format=%cI", commit).decode().strip()
            message = git(repo.path, "log", "-1", "--format=%B", commit).decode()
        base = "http://gitea.test"
        tags.append(
            {
                "name": name,
                "id": obj,
                "message": message,
                "commit": {
                    "url": f"{base}/api/v1/repos/x/y/git/commits/{commit}",
                    "sha": commit,
                    "created": go_time(created),
                },
                "zipball_url": f"{base}/x/y/archive/{name}.zip",
                "tarball_url": f"{base}/x/y/archive/{name}.tar.gz",
            }
        )
    # for-each-ref --sort=-*creatordate, then an unstable sort: newest first by the date.
    tags.sort(key=lambda t: _when(t["commit"]["created"]), reverse=True)
    return tags
