"""Properties: truncation, argument validation, and diffs of random histories against git."""

from __future__ import annotations

import tempfile
import uuid
from pathlib import Path

import anyio
import pytest
from gateway_gitea.diff import TextLimit, quote_path
from gateway_gitea.models import DiffArgs, FileArgs, ListFilesArgs
from gateway_gitea_testing import OWNER, TOKEN, Builder, Site, git_out
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from pydantic import ValidationError

from gateway.testing import make_gateway

# --- truncation ---------------------------------------------------------------------------------

texts = st.lists(st.text(alphabet=st.sampled_from("ab \n\u00e9\u4e2d"), max_size=40), max_size=12)


@given(chunks=texts, max_chars=st.integers(0, 120))
def test_truncation_keeps_a_line_aligned_prefix_and_counts_the_rest(chunks, max_chars):
    text = "".join(chunks)
    fed = TextLimit(max_chars)
    for chunk in chunks:
        fed.feed(chunk)
    whole = TextLimit(max_chars)
    whole.feed(text)
    out = fed.text("hint")
    assert out == whole.text("hint")
    assert fed.total_chars == len(text)
    if max_chars == 0 or len(text) <= max_chars:
        assert out == text and not fed.over
        return
    kept = out.split("[truncated]")[0]
    assert text.startswith(kept) and len(kept) <= max_chars
    assert kept == "" or kept.endswith("\n")
    assert "\n" not in text[len(kept) : max_chars]  # cut at the last line end that fits
    rest = text[len(kept) :]
    assert fed.omitted_chars == len(rest)
    assert fed.omitted_lines == rest.count("\n") + (0 if rest.endswith("\n") else 1)
    assert out.endswith("not shown; hint\n")


# --- argument validation ------------------------------------------------------------------------

JOB = "3f2b8c1e-4d5a-4b6c-8d7e-9f0a1b2c3d4e"
segment = st.text(
    alphabet=st.characters(codec="utf-8", exclude_characters="/"), min_size=1, max_size=8
)


@given(parts=st.lists(segment, min_size=1, max_size=4), lead=st.sampled_from(["", "/", "./"]))
def test_file_paths_are_accepted_only_when_relative_clean_and_printable(parts, lead):
    raw = lead + "/".join(parts)
    control = any(ord(c) < 0x20 or 0x7F <= ord(c) <= 0x9F for c in raw)
    dotdot = ".." in parts
    absolute = (
        lead == "/"
        or raw.startswith("\\")
        or (
            len(raw) > 2
            and raw[1] == ":"
            and raw[2] in "\\/"
            and raw[0].isascii()
            and raw[0].isalpha()
        )
    )
    meaningful = [p for p in parts if p != "."]
    try:
        args = FileArgs(job_id=JOB, file_path=raw)
    except ValidationError:
        assert control or dotdot or absolute or not meaningful
        return
    assert not (control or dotdot or absolute)
    assert args.file_path == "/".join(meaningful)


@given(ref=st.text(max_size=20))
def test_refs_never_carry_revision_syntax_or_options(ref):
    try:
        args = DiffArgs(job_id=JOB, base=ref)
    except ValidationError:
        return
    for bad in ("..", "~", "^", ":", "@{", " ", "\\", "*", "?", "["):
        assert bad not in args.base
    assert not args.base.startswith(("-", "/", ".")) and args.base


@given(job=st.text(max_size=40))
def test_job_ids_must_be_uuids(job):
    try:
        ListFilesArgs(job_id=job)
    except ValidationError:
        return
    assert str(uuid.UUID(job)) == job.lower()


BAD_ARGS = [
    ("get_job_file", {"job_id": "not-a-uuid", "file_path": "a.md"}, "job_id"),
    ("get_job_file", {"job_id": JOB, "file_path": "../etc/passwd"}, "file_path"),
    ("get_job_file", {"job_id": JOB, "file_path": "/etc/passwd"}, "file_path"),
    ("get_job_file", {"job_id": JOB, "file_path": "a\x00b"}, "file_path"),
    ("get_job_file", {"job_id": JOB, "file_path": "ok.md", "ref": "main~1"}, "ref"),
    ("get_job_diff", {"job_id": JOB, "base": "--output=x"}, "base"),
    ("get_job_diff", {"job_id": JOB, "base": "a..b"}, "base"),
    ("get_job_diff", {"job_id": JOB, "base": "main", "file_path": "x/../../y"}, "file_path"),
    ("get_job_diff", {"job_id": JOB, "base": "main", "max_chars": -1}, "max_chars"),
    ("list_job_files", {"job_id": JOB, "path": "C:\\Windows"}, "path"),
    ("list_job_files", {"job_id": JOB, "path": "a/\x1b[31m"}, "path"),
    ("list_job_commits", {"job_id": JOB, "limit": 101}, "limit"),
    ("list_job_commits", {"job_id": JOB, "page": 0}, "page"),
    ("list_job_commits", {"job_id": JOB, "since_ref": "HEAD@{1}"}, "since_ref"),
    ("list_job_tags", {"job_id": JOB.upper() + "0"}, "job_id"),
]


@pytest.mark.anyio
@pytest.mark.parametrize(("tool", "args", "field"), BAD_ARGS)
async def test_bad_arguments_are_refused_before_any_request(
    gitea_gateway, site: Site, tool, args, field
):
    gw = gitea_gateway()
    async with gw:
        site.gitea.reset_counts()
        result = await gw.call(tool, args)
    assert result.code == "VALIDATION_ERROR"
    assert field in result.payload["error"]["message"]
    assert site.gitea.requests["total"] == 0


def test_quote_path_matches_git_for_awkward_names(tmp_path):
    names = [
        "plain.txt",
        "sp ace.md",
        "tab\tname",
        'quo"te',
        "back\\slash",
        "\u00e9t\u00e9.md",
        "nl\nname",
        "\x7fdel",
    ]
    b = Builder(tmp_path / "q")
    for n in names:
        b.write(n, "x\n")
    b.commit("one", "names", "2024-01-01T00:00:00+00:00")
    listed = git_out(b.path, "ls-tree", "--name-only", "HEAD").decode().splitlines()
    assert sorted(listed) == sorted(quote_path(n) for n in names)


# --- random histories ---------------------------------------------------------------------------

FILES = [
    "a.txt",
    "b.md",
    "dir/c.txt",
    "dir/sub/d.py",
    "e f.txt",
    "\u00fcn\u00ef.txt",
    "x/y/z.txt",
    "dir/g",
]
LINES = ["alpha\n", "beta\n", "gamma\n", "def f():\n", "    return 1\n", "\n", "}\n", "delta\n"]

line_lists = st.lists(st.sampled_from(LINES), max_size=30)
contents = st.one_of(
    line_lists.map(lambda ls: "".join(ls).encode()),
    line_lists.map(lambda ls: "".join(ls).rstrip("\n").encode()),  # no final newline
    st.binary(max_size=64).map(lambda b: b"\0" + b),  # binary
)
edits = st.lists(
    st.tuples(st.integers(0, 40), st.sampled_from(["ins", "del", "rep"]), st.sampled_from(LINES)),
    max_size=6,
)
ops = st.lists(
    st.one_of(
        st.tuples(st.just("edit"), st.sampled_from(FILES), edits),
        st.tuples(st.just("write"), st.sampled_from(FILES), contents),
        st.tuples(st.just("delete"), st.sampled_from(FILES), st.none()),
        st.tuples(st.just("move"), st.sampled_from(FILES), st.sampled_from(FILES)),
        st.tuples(st.just("chmod"), st.sampled_from(FILES), st.none()),
    ),
    min_size=1,
    max_size=6,
)
start = st.dictionaries(st.sampled_from(FILES), contents, min_size=1, max_size=6)


def _edit(data: bytes, changes: list[tuple[int, str, str]]) -> bytes:
    lines = data.decode("utf-8", "replace").splitlines(keepends=True)
    for pos, kind, line in changes:
        i = pos % (len(lines) + 1)
        if kind == "ins":
            lines.insert(i, line)
        elif lines and i < len(lines):
            if kind == "del":
                del lines[i]
            else:
                lines[i] = line
    return "".join(lines).encode()


def _history(root: Path, files: dict[str, bytes], steps: list) -> Builder:
    b = Builder(root)
    state = dict(files)
    modes: dict[str, int] = {}
    for path, data in state.items():
        b.write(path, data)
    b.commit("base", "base", "2024-01-01T00:00:00+00:00")
    for op, path, arg in steps:
        if op == "edit" and path in state:
            state[path] = _edit(state[path], arg)
            b.write(path, state[path])
        elif op == "write":
            state[path] = arg
            b.write(path, arg)
        elif op == "delete" and path in state:
            del state[path]
            (b.path / path).unlink()
        elif op == "move" and path in state and arg != path:
            state[arg] = state.pop(path)
            (b.path / path).unlink()
            b.write(arg, state[arg])
        elif op == "chmod" and path in state:
            modes[path] = 0o755 if modes.get(path) != 0o755 else 0o644
            (b.path / path).chmod(modes[path])
    b.commit("head", "head", "2024-01-02T00:00:00+00:00")
    return b


@pytest.fixture(scope="module")
def scratch(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("histories")


@settings(max_examples=20, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(files=start, steps=ops)
def test_random_histories_diff_exactly_like_git(site: Site, scratch: Path, files, steps):
    root = Path(tempfile.mkdtemp(dir=scratch))
    b = _history(root / "repo", files, steps)
    job = str(uuid.uuid4())
    site.gitea.add_repo(f"{OWNER}/job-{job}", b.path)
    base, head = b.commits["base"], b.commits["head"]

    async def call(engine: str) -> dict:
        config = {"gitea": {"url": site.gitea.url, "token": TOKEN, "diff_engine": engine}}
        gw = make_gateway(plugins=["gitea"], plugin_config=config, env={}, cwd=root)
        async with gw:
            result = await gw.call(
                "get_job_diff", {"job_id": job, "base": base, "head": head, "max_chars": 0}
            )
        assert not result.is_error, result.payload
        return result.payload

    exact = anyio.run(call, "git")
    assert exact["engine"] == "git"
    assert exact["diff"] == git_out(b.path, "diff", base, head).decode("utf-8", "replace")
    numstat = git_out(b.path, "diff", "--numstat", base, head).decode().splitlines()
    assert len(exact["summary"]["files"]) == len(numstat)

    rough = anyio.run(call, "difflib")
    if not rough["diff"] or any(f["binary"] for f in rough["summary"]["files"]):
        return  # nothing to apply, or "Binary files differ" (that cannot be applied)
    work = root / "work"
    git_out(b.path, "worktree", "add", "-q", "--detach", str(work), base)
    git_out(work, "apply", input=rough["diff"].encode())
    git_out(work, "add", "-A")
    assert (
        git_out(work, "write-tree").strip()
        == git_out(b.path, "rev-parse", f"{head}^{{tree}}").strip()
    )
