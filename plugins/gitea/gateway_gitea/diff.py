"""A range diff Gitea cannot give: ``git diff base head`` rebuilt from its REST API.

Gitea has no endpoint for the unified diff of two arbitrary commits. This module

1. walks the two commits' trees through ``/git/trees/{sha}`` the way git's own tree diff does:
   a subtree whose SHA is equal on both sides is never listed, so the number of requests
   follows the size of the change, not of the repository;
2. fetches, through ``/raw/{path}?ref=<full sha>``, only the blobs git will read: both sides of
   every changed file (the added and deleted ones are also the rename candidates), each
   checked against the SHA the tree lists;
3. writes those blobs and the listed trees into a throw-away object store (plain loose objects)
   and runs the local ``git diff`` on the two root trees. Unchanged subtrees and blobs stay
   *missing* objects: git compares them by SHA and never opens them. The text is therefore
   the text of ``git diff base head`` (same xdiff, rename detection, binary detection, index
   lines), and the summary comes from the same run's ``--raw --numstat``.

Without a git binary a difflib rendering with git's headers is used instead (``engine:
"difflib"``): its hunks may be cut differently and only exact renames are found.
"""

from __future__ import annotations

import codecs
import hashlib
import logging
import os
import shutil
import subprocess
import tempfile
import zlib
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING

from gateway import ErrorCode, GatewayError
from gateway.rest import gather, truncation_marker

from .models import DiffFile, SkippedFile, Status

if TYPE_CHECKING:
    from .client import GiteaClient, TreeEntry

_log = logging.getLogger("gateway_gitea.diff")
GIT_TIMEOUT = 300.0
ZERO = "0000000"
_STATUS: dict[str, Status] = {
    "A": "added",
    "D": "deleted",
    "M": "modified",
    "T": "type_changed",
    "R": "renamed",
    "C": "copied",
}


# --- truncation ------------------------------------------------------------------------------


class TextLimit:
    """Keeps the first ``max_chars`` characters of a text fed in pieces, cut at a line
    boundary, and counts what it drops. ``max_chars == 0`` keeps everything."""

    def __init__(self, max_chars: int) -> None:
        self.max_chars = max_chars
        self._parts: list[str] = []
        self._kept = 0
        self.over = False
        self.omitted_chars = 0
        self._omitted_newlines = 0
        self._last = ""

    def feed(self, text: str) -> None:
        if not text:
            return
        if self.over:
            self._drop(text)
            return
        self._parts.append(text)
        self._kept += len(text)
        if self.max_chars and self._kept > self.max_chars:
            whole = "".join(self._parts)
            cut = whole.rfind("\n", 0, self.max_chars) + 1
            self._parts = [whole[:cut]]
            self._kept = cut
            self.over = True
            self._drop(whole[cut:])

    def _drop(self, text: str) -> None:
        self.omitted_chars += len(text)
        self._omitted_newlines += text.count("\n")
        self._last = text[-1]

    @property
    def omitted_lines(self) -> int:
        if not self.over:
            return 0
        return self._omitted_newlines + (0 if self._last == "\n" else 1)

    @property
    def total_chars(self) -> int:
        return self._kept + self.omitted_chars

    def text(self, hint: str) -> str:
        kept = "".join(self._parts)
        if not self.over:
            return kept
        lines = f"characters ({self.omitted_lines:,} lines)"
        return f"{kept}{truncation_marker(self.omitted_chars, self.total_chars, unit=lines, hint=hint)}\n"


# --- walking the two trees -------------------------------------------------------------------


@dataclass(frozen=True)
class BlobRef:
    commit: str
    path: str
    size: int


@dataclass(frozen=True)
class Change:
    """A non-tree path that differs between base (``a``) and head (``b``)."""

    path: str
    a: TreeEntry | None
    b: TreeEntry | None


@dataclass
class Walk:
    trees: dict[str, list[TreeEntry]] = field(default_factory=dict)
    changes: list[Change] = field(default_factory=list)
    blobs: dict[str, BlobRef] = field(default_factory=dict)
    skipped: list[SkippedFile] = field(default_factory=list)


def _in_scope(path: str, is_tree: bool, scope: str | None) -> bool:
    if scope is None or path == scope or path.startswith(scope + "/"):
        return True
    return is_tree and scope.startswith(path + "/")


def _kind(entry: TreeEntry | None) -> int:
    """The object kind in a mode: regular file, symlink, submodule or tree (not the x bit)."""
    return -1 if entry is None else int(entry.mode, 8) >> 12


async def walk_trees(
    client: GiteaClient,
    job_id: str,
    base: tuple[str, str],
    head: tuple[str, str],
    scope: str | None,
    max_blob_bytes: int,
) -> Walk:
    """Compare the trees of ``base`` and ``head`` (``(commit, tree)`` each) below ``scope``."""

    walk = Walk()

    async def listing(sha: str | None) -> list[TreeEntry]:
        if sha is None:
            return []
        entries = await client.tree(job_id, sha)
        walk.trees[sha] = entries
        return entries

    def want(entry: TreeEntry, commit: str, path: str) -> None:
        walk.blobs.setdefault(entry.sha, BlobRef(commit, path, entry.size))

    async def compare(prefix: str, a_sha: str | None, b_sha: str | None) -> None:
        a_list, b_list = await gather([lambda: listing(a_sha), lambda: listing(b_sha)])
        a_map = {e.name: e for e in a_list}
        b_map = {e.name: e for e in b_list}
        below: list[tuple[str, str | None, str | None]] = []
        for name in sorted(a_map.keys() | b_map.keys()):
            a, b = a_map.get(name), b_map.get(name)
            if a and b and a.sha == b.sha and a.mode == b.mode:
                continue
            path = prefix + name
            a_tree = a if a and a.type == "tree" else None
            b_tree = b if b and b.type == "tree" else None
            if (a_tree or b_tree) and _in_scope(path, True, scope):
                below.append(
                    (path + "/", a_tree.sha if a_tree else None, b_tree.sha if b_tree else None)
                )
            a_file = a if a and a.type != "tree" else None
            b_file = b if b and b.type != "tree" else None
            if not (a_file or b_file) or not _in_scope(path, False, scope):
                continue
            # git opens every blob of a changed pair, a pure mode change (644 -> 755) included
            # (it checks for binary content); submodules are never read.
            needed = [
                (e, c)
                for e, c in ((a_file, base[0]), (b_file, head[0]))
                if e is not None and e.type == "blob"
            ]
            too_big = [e for e, _ in needed if e.size > max_blob_bytes]
            if too_big:
                walk.skipped.append(
                    SkippedFile(
                        path=path,
                        size=max(e.size for e in too_big),
                        reason="larger than max_diff_file_bytes; read it with get_job_file",
                    )
                )
                continue
            for e, commit in needed:
                want(e, commit, path)
            walk.changes.append(Change(path, a_file, b_file))
        if below:
            await gather([partial(compare, *s) for s in below])

    if base[1] != head[1]:
        await compare("", base[1], head[1])
    return walk


def enforce_budget(walk: Walk, budget: int) -> None:
    """Keep the blobs to fetch within ``budget`` bytes: leave out the largest changes first
    (listed in ``skipped``), so one huge diff cannot exhaust the gateway's memory."""
    total = sum(ref.size for ref in walk.blobs.values())
    if total <= budget:
        return

    def blobs_of(c: Change) -> list[TreeEntry]:
        return [e for e in (c.a, c.b) if e is not None and e.type == "blob"]

    users: dict[str, int] = {}
    for c in walk.changes:
        for e in {e.sha: e for e in blobs_of(c)}.values():
            users[e.sha] = users.get(e.sha, 0) + 1
    dropped: set[int] = set()
    ranked = sorted(enumerate(walk.changes), key=lambda ic: -sum(e.size for e in blobs_of(ic[1])))
    for i, c in ranked:
        if total <= budget:
            break
        dropped.add(i)
        walk.skipped.append(
            SkippedFile(
                path=c.path,
                size=max((e.size for e in blobs_of(c)), default=0),
                reason="the whole diff is larger than max_diff_total_bytes; ask for this file "
                "with file_path",
            )
        )
        for sha in {e.sha for e in blobs_of(c)}:
            users[sha] -= 1
            if users[sha] == 0 and sha in walk.blobs:
                total -= walk.blobs.pop(sha).size
    walk.changes = [c for i, c in enumerate(walk.changes) if i not in dropped]


async def fetch_blobs(
    client: GiteaClient,
    job_id: str,
    blobs: dict[str, BlobRef],
    max_blob_bytes: int,
    progress: Callable[[int, int], Awaitable[None]],
) -> dict[str, bytes]:

    out: dict[str, bytes] = {}
    total = len(blobs)

    async def one(sha: str, ref: BlobRef) -> None:
        raw = await client.raw(job_id, ref.path, ref.commit, limit=max_blob_bytes, use_range=False)
        if not raw.complete:
            raise GatewayError(
                ErrorCode.BACKEND_ERROR,
                f"{ref.path!r} is larger than its tree entry says; retry, or narrow the diff "
                "with file_path",
            )
        if _object_sha("blob", raw.data, _algo(sha)) != sha:
            raise GatewayError(
                ErrorCode.BACKEND_ERROR,
                f"Gitea served content for {ref.path!r} that does not match its SHA; the "
                "repository may have changed during the call, or a proxy altered it — retry",
            )
        out[sha] = raw.data
        if len(out) % 25 == 0 or len(out) == total:
            await progress(len(out), total)

    if blobs:
        await gather([partial(one, s, r) for s, r in blobs.items()])
    return out


# --- the exact engine: a local object store and git --------------------------------------------


def git_binary() -> str | None:
    return shutil.which("git")


def _git_env(home: Path) -> dict[str, str]:
    env = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith("GIT_") and k not in ("HOME", "XDG_CONFIG_HOME")
    }
    # Only git's defaults: no user or system config, attributes or external diff drivers.
    env.update(
        HOME=str(home),
        XDG_CONFIG_HOME=str(home),
        GIT_CONFIG_NOSYSTEM="1",
        GIT_CONFIG_GLOBAL=os.devnull,
        GIT_ATTR_NOSYSTEM="1",
        LC_ALL="C",
    )
    return env


def _algo(sha: str) -> str:
    return "sha256" if len(sha) == 64 else "sha1"


def _object_sha(kind: str, body: bytes, algo: str) -> str:
    return hashlib.new(algo, f"{kind} {len(body)}\0".encode() + body).hexdigest()


_PACK_TYPES = {"commit": 1, "tree": 2, "blob": 3}


def _pack_entry_header(kind: int, size: int) -> bytes:
    """Type and size of a packed object: 3 type bits, then the size 4 + 7*n bits at a time."""
    out = bytearray()
    byte = (kind << 4) | (size & 0x0F)
    size >>= 4
    while size:
        out.append(byte | 0x80)
        byte = size & 0x7F
        size >>= 7
    out.append(byte)
    return bytes(out)


class ObjectStore:
    """A bare repository holding only the objects one diff needs, written as one pack.

    One pack file and one ``git index-pack`` instead of hundreds of loose-object files: on
    the machines measured, creating a file costs about a millisecond, the pack a few.
    """

    def __init__(self, root: Path, algo: str) -> None:
        self.root = root
        self.algo = algo
        (root / "objects" / "pack").mkdir(parents=True)
        (root / "refs").mkdir()
        (root / "HEAD").write_text("ref: refs/heads/main\n")
        config = "[core]\n\trepositoryformatversion = 0\n\tbare = true\n"
        if algo == "sha256":
            config = (
                "[core]\n\trepositoryformatversion = 1\n\tbare = true\n"
                "[extensions]\n\tobjectformat = sha256\n"
            )
        (root / "config").write_text(config)
        self._entries: list[bytes] = []
        self._known: set[str] = set()

    def add(self, kind: str, body: bytes) -> str:
        sha = _object_sha(kind, body, self.algo)
        if sha not in self._known:
            self._known.add(sha)
            self._entries.append(
                _pack_entry_header(_PACK_TYPES[kind], len(body)) + zlib.compress(body, 1)
            )
        return sha

    def finish(self, git: str) -> None:
        """Write the pack and let git index it."""
        data = b"PACK" + (2).to_bytes(4, "big") + len(self._entries).to_bytes(4, "big")
        data += b"".join(self._entries)
        checksum = hashlib.new(self.algo, data).digest()
        pack = self.root / "objects" / "pack" / f"pack-{checksum.hex()}.pack"
        pack.write_bytes(data + checksum)
        _run_git(git, self.root, ["index-pack", str(pack)], None)


def _name_bytes(name: str) -> bytes:
    return name.encode("utf-8", "surrogatepass")


def tree_body(entries: list[TreeEntry], rename: dict[str, str]) -> bytes:
    """A tree object's content: entries in git's order (a tree sorts as ``name/``)."""

    def key(e: TreeEntry) -> bytes:
        return _name_bytes(e.name) + (b"/" if e.type == "tree" else b"")

    out = []
    for e in sorted(entries, key=key):
        sha = rename.get(e.sha, e.sha) if e.type == "tree" else e.sha
        out.append(e.mode.encode() + b" " + _name_bytes(e.name) + b"\0" + bytes.fromhex(sha))
    return b"".join(out)


def build_store(
    store: ObjectStore, walk: Walk, blobs: dict[str, bytes], roots: tuple[str, str]
) -> tuple[str, str]:
    """Add the fetched blobs and the listed trees; return the two root trees' local SHAs."""
    for data in blobs.values():  # each checked against its SHA when it was fetched
        store.add("blob", data)
    rename: dict[str, str] = {}

    def write_tree(sha: str) -> None:
        # Children first, so a parent refers to what was really written. When Gitea's listing
        # is faithful (the normal case) every written SHA equals the listed one.
        if sha in rename:
            return
        entries = walk.trees[sha]
        for e in entries:
            if e.type == "tree" and e.sha in walk.trees:
                write_tree(e.sha)
        rename[sha] = store.add("tree", tree_body(entries, rename))

    for sha in walk.trees:
        write_tree(sha)
    return rename.get(roots[0], roots[0]), rename.get(roots[1], roots[1])


def _pathspecs(scope: str | None, skipped: list[SkippedFile]) -> list[str]:
    specs = [f":(literal){scope}"] if scope else []
    specs += [f":(exclude,literal){s.path}" for s in skipped]
    return specs


def _run_git(git: str, store: Path, args: list[str], limit: TextLimit | None) -> bytes:
    """Run git in the store; stream stdout into ``limit`` (then return b"") or return it."""
    cmd = [git, f"--git-dir={store}", "-c", f"core.attributesFile={os.devnull}", *args]
    env = _git_env(store)
    if limit is None:
        done = subprocess.run(cmd, env=env, capture_output=True, timeout=GIT_TIMEOUT, check=False)
        if done.returncode != 0:
            raise _GitFailed(done.stderr.decode("utf-8", "replace")[-500:])
        return done.stdout
    # stderr goes to a file: a full stderr pipe would stall git while stdout is being read.
    with tempfile.TemporaryFile() as errors:
        proc = subprocess.Popen(cmd, env=env, stdout=subprocess.PIPE, stderr=errors)
        decoder = codecs.getincrementaldecoder("utf-8")("replace")
        assert proc.stdout is not None
        try:
            while chunk := proc.stdout.read(1 << 16):
                limit.feed(decoder.decode(chunk))
            limit.feed(decoder.decode(b"", final=True))
            code = proc.wait(timeout=GIT_TIMEOUT)
        finally:
            if proc.poll() is None:
                proc.kill()
                proc.wait()
            proc.stdout.close()
        if code != 0:
            errors.seek(0)
            raise _GitFailed(errors.read()[-500:].decode("utf-8", "replace"))
    return b""


class _GitFailed(Exception):
    pass


def parse_raw_numstat(out: bytes) -> list[DiffFile]:
    """``git diff --raw --numstat -z``: the raw records, then as many numstat records."""
    tokens = out.split(b"\0")
    raw: list[tuple[str, str, str | None]] = []
    i = 0
    while i < len(tokens) and tokens[i].startswith(b":"):
        status = tokens[i].split(b" ")[-1].decode()[:1]
        first = tokens[i + 1].decode("utf-8", "replace")
        if status in ("R", "C"):
            raw.append((status, tokens[i + 2].decode("utf-8", "replace"), first))
            i += 3
        else:
            raw.append((status, first, None))
            i += 2
    files: list[DiffFile] = []
    for status, path, old in raw:
        counts = tokens[i].split(b"\t")
        i += 3 if old is not None else 1  # a rename's numstat is "a\td\t\0old\0new"
        binary = counts[0] == b"-"
        files.append(
            DiffFile(
                path=path,
                old_path=old,
                status=_STATUS.get(status, "modified"),
                additions=0 if binary else int(counts[0]),
                deletions=0 if binary else int(counts[1]),
                binary=binary,
            )
        )
    return files


def git_diff(
    git: str,
    walk: Walk,
    blobs: dict[str, bytes],
    roots: tuple[str, str],
    scope: str | None,
    limit: TextLimit,
) -> list[DiffFile] | None:
    """The exact engine; ``None`` when the local git failed (the caller falls back)."""
    if roots[0] == roots[1]:
        return []  # the same tree: git prints nothing, and there is nothing to write
    with tempfile.TemporaryDirectory(prefix="gitea-diff-") as tmp:
        store = ObjectStore(Path(tmp) / "store.git", _algo(roots[0]))
        a, b = build_store(store, walk, blobs, roots)
        tail = ["--", *_pathspecs(scope, walk.skipped)]
        opts = ["--no-color", "--no-ext-diff", "--no-textconv", "-M"]
        try:
            store.finish(git)
            summary = _run_git(
                git, store.root, ["diff", *opts, "--raw", "--numstat", "-z", a, b, *tail], None
            )
            _run_git(git, store.root, ["diff", *opts, a, b, *tail], limit)
        except (_GitFailed, OSError, subprocess.SubprocessError) as exc:
            _log.warning("local git diff failed, falling back to difflib: %s", exc)
            return None
        return parse_raw_numstat(summary)


# --- the fallback engine: difflib with git's headers --------------------------------------------


def quote_path(path: str) -> str:
    """git's C-style quoting of a path in diff headers (core.quotePath=true)."""
    raw = path.encode("utf-8", "surrogatepass")
    if not any(c < 0x20 or c >= 0x7F or c in (0x22, 0x5C) for c in raw):
        return path
    named = {
        7: "\\a",
        8: "\\b",
        9: "\\t",
        10: "\\n",
        11: "\\v",
        12: "\\f",
        13: "\\r",
        0x22: '\\"',
        0x5C: "\\\\",
    }
    out = []
    for c in raw:
        if c in named:
            out.append(named[c])
        elif c < 0x20 or c >= 0x7F:
            out.append(f"\\{c:03o}")
        else:
            out.append(chr(c))
    return '"' + "".join(out) + '"'


def _is_binary(data: bytes) -> bool:
    return b"\0" in data[:8000]  # git's buffer_is_binary


def _range(start: int, length: int) -> str:
    if length == 1:
        return str(start + 1)
    return f"{start if length == 0 else start + 1},{length}"


def _lines(data: bytes) -> list[bytes]:
    """Lines as git sees them: split on LF only, each keeping its LF."""
    parts = data.split(b"\n")
    lines = [p + b"\n" for p in parts[:-1]]
    return [*lines, parts[-1]] if parts[-1] else lines


def _funcname(lines: list[bytes], start: int) -> str:
    """git's default hunk-header context: the nearest line above the hunk that starts with a
    letter, ``_`` or ``$`` (xdiff's def_ff), at most 80 bytes, trailing space removed."""
    for i in range(start - 1, -1, -1):
        line = lines[i]
        if line[:1].isalpha() or line[:1] in (b"_", b"$"):
            return " " + line[:80].rstrip().decode("utf-8", "replace")
    return ""


def _hunks(a: bytes, b: bytes) -> tuple[list[str], int, int]:
    import difflib

    a_lines, b_lines = _lines(a), _lines(b)
    out: list[str] = []
    adds = dels = 0

    def line(prefix: str, raw: bytes) -> None:
        text = raw.decode("utf-8", "replace")
        out.append(
            prefix + text
            if text.endswith("\n")
            else f"{prefix}{text}\n\\ No newline at end of file\n"
        )

    matcher = difflib.SequenceMatcher(None, a_lines, b_lines, autojunk=False)
    for group in matcher.get_grouped_opcodes(3):
        i1, i2, j1, j2 = group[0][1], group[-1][2], group[0][3], group[-1][4]
        func = _funcname(a_lines, i1)
        out.append(f"@@ -{_range(i1, i2 - i1)} +{_range(j1, j2 - j1)} @@{func}\n")
        for tag, x1, x2, y1, y2 in group:
            if tag == "equal":
                for t in a_lines[x1:x2]:
                    line(" ", t)
                continue
            for t in a_lines[x1:x2]:
                line("-", t)
                dels += 1
            for t in b_lines[y1:y2]:
                line("+", t)
                adds += 1
    return out, adds, dels


def _label(name: str) -> str:
    """A ---/+++ label; git ends one that contains a space with a TAB (for GNU patch)."""
    return name + "\t" if " " in name else name


def _content(entry: TreeEntry, blobs: dict[str, bytes]) -> bytes:
    if entry.type == "commit":
        return f"Subproject commit {entry.sha}\n".encode()
    return blobs[entry.sha]


def _one_side(
    path_a: str, path_b: str, a: TreeEntry | None, b: TreeEntry | None, blobs: dict[str, bytes]
) -> tuple[str, DiffFile]:
    """One file's section in git's layout (diff.c builtin_diff/fill_metainfo)."""
    head = [f"diff --git {quote_path('a/' + path_a)} {quote_path('b/' + path_b)}\n"]
    renamed = a is not None and b is not None and path_a != path_b
    status: Status
    if a is None and b is not None:
        head.append(f"new file mode {b.mode:0>6}\n")
        status = "added"
    elif b is None and a is not None:
        head.append(f"deleted file mode {a.mode:0>6}\n")
        status = "deleted"
    else:
        assert a is not None and b is not None
        status = "renamed" if renamed else "modified"
        if a.mode != b.mode:
            head += [f"old mode {a.mode:0>6}\n", f"new mode {b.mode:0>6}\n"]
    if renamed:
        head += [
            "similarity index 100%\n",
            f"rename from {quote_path(path_a)}\n",
            f"rename to {quote_path(path_b)}\n",
        ]
    path = path_b if b else path_a
    old_path = path_a if renamed else None
    if a and b and a.sha == b.sha:
        return "".join(head), DiffFile(
            path=path, old_path=old_path, status=status, additions=0, deletions=0
        )
    same_mode = f" {b.mode:0>6}" if a and b and a.mode == b.mode else ""
    head.append(f"index {a.sha[:7] if a else ZERO}..{b.sha[:7] if b else ZERO}{same_mode}\n")
    old = _content(a, blobs) if a else b""
    new = _content(b, blobs) if b else b""
    src = quote_path("a/" + path_a) if a else "/dev/null"
    dst = quote_path("b/" + path_b) if b else "/dev/null"
    binary = _is_binary(old) or _is_binary(new)
    adds = dels = 0
    if binary:
        head.append(f"Binary files {src} and {dst} differ\n")
    elif old or new:
        hunks, adds, dels = _hunks(old, new)
        head += [f"--- {_label(src)}\n", f"+++ {_label(dst)}\n", *hunks]
    return "".join(head), DiffFile(
        path=path,
        old_path=old_path,
        status=status,
        additions=adds,
        deletions=dels,
        binary=binary,
    )


def difflib_diff(walk: Walk, blobs: dict[str, bytes], limit: TextLimit) -> list[DiffFile]:
    """git-style text without git: exact renames only, difflib's hunks."""
    added = {c.b.sha: c for c in walk.changes if c.a is None and c.b is not None}
    renames: dict[str, Change] = {}  # head path -> the deletion it came from
    for c in walk.changes:
        if c.b is None and c.a is not None and c.a.sha in added:
            dst = added.pop(c.a.sha)
            renames[dst.path] = c
    gone = {c.path for c in renames.values()}
    items: list[tuple[str, str, TreeEntry | None, TreeEntry | None]] = []
    for c in walk.changes:
        if c.path in gone:
            continue
        if c.path in renames:
            src = renames[c.path]
            items.append((src.path, c.path, src.a, c.b))
        elif c.a and c.b and _kind(c.a) != _kind(c.b):  # git shows a type change as two diffs
            items += [(c.path, c.path, c.a, None), (c.path, c.path, None, c.b)]
        else:
            items.append((c.path, c.path, c.a, c.b))
    items.sort(key=lambda it: _name_bytes(it[1]))
    files = []
    for path_a, path_b, a, b in items:
        text, info = _one_side(path_a, path_b, a, b, blobs)
        limit.feed(text)
        files.append(info)
    return files
