"""get_job_diff: the text of `git diff base head`, rebuilt from Gitea's REST API."""

from __future__ import annotations

import re
import subprocess
import uuid

import pytest
from gateway_gitea_testing import OWNER, Builder, Site, git_out, lines

pytestmark = pytest.mark.anyio

STATUS = {"A": "added", "D": "deleted", "M": "modified", "R": "renamed", "T": "type_changed"}


def git_diff(repo, base: str, head: str, *paths: str) -> str:
    return git_out(repo, "diff", base, head, *(["--", *paths] if paths else [])).decode(
        "utf-8", "replace"
    )


def git_summary(repo, base: str, head: str, *paths: str) -> list[dict]:
    tail = ["--", *paths] if paths else []
    names = git_out(repo, "diff", "--name-status", "-z", base, head, *tail).split(b"\0")
    stats = git_out(repo, "diff", "--numstat", "-z", base, head, *tail).split(b"\0")
    files, i, j = [], 0, 0
    while i < len(names) - 1:
        status = names[i].decode()[0]
        if status == "R":
            old, new = names[i + 1].decode(), names[i + 2].decode()
            i += 3
        else:
            old, new = None, names[i + 1].decode()
            i += 2
        counts = stats[j].decode().split("\t")
        j += 3 if status == "R" else 1
        binary = counts[0] == "-"
        files.append(
            {
                "path": new,
                "old_path": old,
                "status": STATUS[status],
                "additions": 0 if binary else int(counts[0]),
                "deletions": 0 if binary else int(counts[1]),
                "binary": binary,
            }
        )
    return files


PAIRS = [
    ("phase_1_start", "HEAD"),
    ("job-frozen", "HEAD"),
    ("phase_1_end", "phase_2_end"),
    ("HEAD", "phase_1_start"),
    ("phase_2_start", "feature/extra"),
    ("phase_1_end", "phase_2_start"),  # the same commit
    ("main", "main"),
]


@pytest.mark.parametrize(("base", "head"), PAIRS)
async def test_diff_text_and_summary_equal_git_diff(gitea_gateway, site: Site, base, head):
    gw = gitea_gateway()
    async with gw:
        result = await gw.call(
            "get_job_diff", {"job_id": site.job, "base": base, "head": head, "max_chars": 0}
        )
    assert not result.is_error, result.payload
    body = result.payload
    rev_head = "main" if head == "HEAD" else head
    assert body["engine"] == "git"
    assert body["diff"] == git_diff(site.repo.path, base, rev_head)
    assert body["summary"]["files"] == git_summary(site.repo.path, base, rev_head)
    assert body["summary"]["files_changed"] == len(body["summary"]["files"])
    assert body["summary"]["additions"] == sum(f["additions"] for f in body["summary"]["files"])
    assert body["truncated"] is False and body["total_chars"] == len(body["diff"])
    assert (
        body["base"]["sha"]
        == git_out(site.repo.path, "rev-parse", f"{base}^{{commit}}").decode().strip()
    )


async def test_default_head_is_the_default_branch_and_job_frozen_works(gitea_gateway, site: Site):
    gw = gitea_gateway()
    async with gw:
        result = await gw.call("get_job_diff", {"job_id": site.job, "base": "job-frozen"})
    body = result.payload
    assert body["head"] == {"ref": "HEAD", "sha": site.repo.commits["c5"]}
    assert body["diff"] == git_diff(site.repo.path, "job-frozen", "main")
    statuses = {f["path"]: f["status"] for f in body["summary"]["files"]}
    assert statuses["docs/spaces in name.md"] == "deleted"
    assert statuses["output/empty.txt"] == "added"


async def test_renames_binary_mode_change_and_symlink_are_shown_like_git(gitea_gateway, site: Site):
    gw = gitea_gateway()
    async with gw:
        result = await gw.call(
            "get_job_diff",
            {"job_id": site.job, "base": "phase_1_end", "head": "phase_2_end", "max_chars": 0},
        )
    body = result.payload
    files = {f["path"]: f for f in body["summary"]["files"]}
    assert files["docs/notes.md"]["old_path"] == "notes.md"
    assert files["src/helpers.py"] == {
        "path": "src/helpers.py",
        "old_path": "src/util/helpers.py",
        "status": "renamed",
        "additions": 1,
        "deletions": 1,
        "binary": False,
    }
    assert files["assets/logo.png"]["binary"] is True
    assert "Binary files a/assets/logo.png and b/assets/logo.png differ\n" in body["diff"]
    assert "old mode 100644\nnew mode 100755\n" in body["diff"]
    assert files["latest"]["status"] == "added"


@pytest.mark.parametrize(
    "path",
    [
        "src/app.py",
        "output",
        "src/helpers.py",
        "données/résumé.md",
        "docs/spaces in name.md",
        "absent.md",
    ],
)
async def test_file_path_limits_the_diff_like_a_git_pathspec(gitea_gateway, site: Site, path):
    gw = gitea_gateway()
    async with gw:
        result = await gw.call(
            "get_job_diff",
            {
                "job_id": site.job,
                "base": "phase_1_start",
                "head": "HEAD",
                "file_path": path,
                "max_chars": 0,
            },
        )
    body = result.payload
    assert body["diff"] == git_diff(site.repo.path, "phase_1_start", "main", f":(literal){path}")
    assert body["summary"]["files"] == git_summary(
        site.repo.path, "phase_1_start", "main", f":(literal){path}"
    )
    assert body["file_path"] == path


async def test_file_path_fetches_only_that_part_of_the_trees(gitea_gateway, site: Site):
    gw = gitea_gateway()
    site.gitea.reset_counts()
    async with gw:
        await gw.call(
            "get_job_diff",
            {
                "job_id": site.job,
                "base": "phase_1_start",
                "head": "HEAD",
                "file_path": "src/app.py",
            },
        )
    raws = [t for t in site.gitea.log if "/raw/" in t]
    assert raws and all("/raw/src/app.py?" in t for t in raws)
    assert site.gitea.requests["git/trees"] == 4  # root and src, at both ends


async def test_unchanged_subtrees_and_files_are_never_requested(gitea_gateway, site: Site):
    gw = gitea_gateway()
    site.gitea.reset_counts()
    async with gw:
        result = await gw.call("get_job_diff", {"job_id": site.job, "base": "job-frozen"})
    assert not result.is_error
    unchanged_dirs = ["src", "assets", "scripts", "données", "src/util"]
    shas = {
        git_out(site.repo.path, "rev-parse", f"{rev}:{d}").decode().strip()
        for d in unchanged_dirs[:4]
        for rev in ("job-frozen", "main")
    }
    trees = [t for t in site.gitea.log if "/git/trees/" in t]
    assert not any(sha in t for sha in shas for t in trees)
    changed = {f["path"] for f in result.payload["summary"]["files"]}
    fetched = {re.sub(r"^.*/raw/|\?.*$", "", t) for t in site.gitea.log if "/raw/" in t}
    from urllib.parse import unquote

    assert {unquote(p) for p in fetched} <= changed


async def test_truncation_cuts_at_a_line_and_says_how_much_is_left(gitea_gateway, site: Site):
    gw = gitea_gateway()
    async with gw:
        result = await gw.call(
            "get_job_diff",
            {"job_id": site.job, "base": "phase_1_start", "head": "HEAD", "max_chars": 2000},
        )
    body = result.payload
    full = git_diff(site.repo.path, "phase_1_start", "main")
    kept, marker = body["diff"].split("[truncated]")
    assert len(kept) <= 2000 and kept.endswith("\n") and full.startswith(kept)
    assert full[len(kept) - 1] == "\n" and "\n" not in full[len(kept) : 2000]
    assert body["truncated"] is True
    assert body["omitted_chars"] == len(full) - len(kept)
    assert body["omitted_lines"] == full[len(kept) :].count("\n")
    assert body["total_chars"] == len(full)
    assert (
        f"{body['omitted_chars']:,} of {body['total_chars']:,} characters "
        f"({body['omitted_lines']:,} lines) not shown"
    ) in marker
    # the summary still covers every file
    assert body["summary"]["files"] == git_summary(site.repo.path, "phase_1_start", "main")


async def test_default_max_chars_truncates_the_large_file_diff(gitea_gateway, site: Site):
    gw = gitea_gateway()
    async with gw:
        result = await gw.call(
            "get_job_diff", {"job_id": site.job, "base": "phase_1_end", "head": "phase_2_end"}
        )
    assert result.payload["truncated"] is True
    assert len(result.payload["diff"].split("[truncated]")[0]) <= 50_000


async def test_files_above_the_diff_cap_are_skipped_and_listed(gitea_gateway, site: Site):
    gw = gitea_gateway(site.config(max_diff_file_bytes=20_000))
    site.gitea.reset_counts()
    async with gw:
        result = await gw.call(
            "get_job_diff", {"job_id": site.job, "base": "job-frozen", "max_chars": 0}
        )
    body = result.payload
    assert body["diff"] == git_diff(
        site.repo.path, "job-frozen", "main", ":(exclude)output/big.log"
    )
    size = max(
        len(git_out(site.repo.path, "show", f"{rev}:output/big.log"))
        for rev in ("job-frozen", "main")
    )
    assert body["summary"]["skipped_files"] == [
        {
            "path": "output/big.log",
            "size": size,
            "reason": "larger than max_diff_file_bytes; read it with get_job_file",
        }
    ]
    assert body["summary"]["files_changed"] == len(body["summary"]["files"]) + 1
    assert not any("big.log" in t for t in site.gitea.log)


async def test_diff_errors_say_which_ref_or_repository(gitea_gateway, site: Site):
    gw = gitea_gateway()
    async with gw:
        base = await gw.call("get_job_diff", {"job_id": site.job, "base": "phase_7_end"})
        head = await gw.call("get_job_diff", {"job_id": site.job, "base": "main", "head": "nope"})
        empty = await gw.call("get_job_diff", {"job_id": site.empty_job, "base": "main"})
    assert base.code == "NOT_FOUND" and "'phase_7_end'" in base.payload["error"]["message"]
    assert head.code == "NOT_FOUND" and "'nope'" in head.payload["error"]["message"]
    assert empty.code == "NOT_FOUND" and "empty" in empty.payload["error"]["message"]


def _apply(repo, base: str, patch: str, tmp_path, exclude: tuple[str, ...] = ()) -> str:
    """Apply ``patch`` to a checkout of ``base``; return the resulting tree's SHA."""
    work = tmp_path / f"wt-{uuid.uuid4().hex[:8]}"
    git_out(repo, "worktree", "add", "-q", "--detach", str(work), base)
    try:
        args = ["apply", *(f"--exclude={e}" for e in exclude)]
        git_out(work, *args, input=patch.encode())
        git_out(work, "add", "-A")
        return git_out(work, "write-tree").decode().strip()
    finally:
        git_out(repo, "worktree", "remove", "--force", str(work))


@pytest.mark.parametrize(
    ("base", "head"), [("job-frozen", "main"), ("phase_1_start", "phase_2_end")]
)
async def test_difflib_engine_gives_a_patch_that_rebuilds_head(
    gitea_gateway, site: Site, tmp_path, base, head
):
    gw = gitea_gateway(site.config(diff_engine="difflib"))
    async with gw:
        result = await gw.call(
            "get_job_diff", {"job_id": site.job, "base": base, "head": head, "max_chars": 0}
        )
    body = result.payload
    assert body["engine"] == "difflib"
    binary = [f["path"] for f in body["summary"]["files"] if f["binary"]]
    tree = _apply(site.repo.path, base, body["diff"], tmp_path, exclude=tuple(binary))
    want = git_out(site.repo.path, "rev-parse", f"{head}^{{tree}}").decode().strip()
    if not binary:
        assert tree == want
    else:  # the binary file stays at base; everything else is head
        listing = lambda rev: {  # noqa: E731
            line
            for line in git_out(site.repo.path, "ls-tree", "-r", rev).decode().splitlines()
            if not any(line.endswith("\t" + b) for b in binary)
        }
        assert listing(tree) == listing(want)
    # Without inexact renames, the fallback's text is git's.
    if base == "job-frozen":
        assert body["diff"] == git_diff(site.repo.path, base, head)


async def test_sha256_repository_diffs_exactly(gitea_gateway, site: Site, tmp_path):
    probe = subprocess.run(
        ["git", "init", "-q", "--object-format=sha256", str(tmp_path / "probe")],
        capture_output=True,
    )
    if probe.returncode != 0:
        pytest.skip("this git cannot create sha256 repositories")
    b = Builder(tmp_path / "s256", object_format="sha256")
    b.write("a.md", lines("alpha", 10))
    b.write("dir/b.md", lines("beta", 10))
    b.commit("one", "one", "2024-01-01T00:00:00+00:00")
    b.write("a.md", lines("alpha", 12))
    b.git("mv", "dir/b.md", "dir/c.md")
    b.commit("two", "two", "2024-01-02T00:00:00+00:00")
    job = str(uuid.uuid4())
    site.gitea.add_repo(f"{OWNER}/job-{job}", b.path)
    gw = gitea_gateway()
    async with gw:
        result = await gw.call("get_job_diff", {"job_id": job, "base": b.commits["one"][:10]})
    assert len(result.payload["head"]["sha"]) == 64
    assert result.payload["diff"] == git_diff(b.path, b.commits["one"], "main")


async def test_a_diff_over_the_total_budget_leaves_out_the_largest_files(gitea_gateway, site: Site):
    gw = gitea_gateway(site.config(max_diff_total_bytes=60_000))
    async with gw:
        result = await gw.call(
            "get_job_diff",
            {"job_id": site.job, "base": "phase_1_start", "head": "HEAD", "max_chars": 0},
        )
    body = result.payload
    skipped = [s["path"] for s in body["summary"]["skipped_files"]]
    assert skipped == ["output/big.log"]  # the largest; everything else still fits
    assert body["diff"] == git_diff(
        site.repo.path, "phase_1_start", "main", ":(exclude)output/big.log"
    )
    assert "max_diff_total_bytes" in body["summary"]["skipped_files"][0]["reason"]


async def test_without_a_git_binary_difflib_is_used_or_git_is_demanded(
    gitea_gateway, site: Site, monkeypatch, tmp_path
):
    (tmp_path / "bin").mkdir()
    monkeypatch.setenv("PATH", str(tmp_path / "bin"))
    args = {"job_id": site.job, "base": "job-frozen", "max_chars": 0}
    async with gitea_gateway() as gw:
        auto = await gw.call("get_job_diff", args)
    async with gitea_gateway(site.config(diff_engine="git")) as gw:
        demanded = await gw.call("get_job_diff", args)
    assert auto.payload["engine"] == "difflib"
    assert auto.payload["diff"] == git_diff(site.repo.path, "job-frozen", "main")
    assert demanded.code == "BACKEND_UNAVAILABLE"
    assert "no git binary" in demanded.payload["error"]["message"]


async def test_a_failing_local_git_falls_back_to_difflib_and_says_so(
    gitea_gateway, site: Site, monkeypatch, tmp_path, caplog
):
    fake = tmp_path / "bin" / "git"
    fake.parent.mkdir()
    fake.write_text("#!/bin/sh\necho 'fatal: broken' >&2\nexit 3\n")
    fake.chmod(0o755)
    monkeypatch.setenv("PATH", str(fake.parent))
    async with gitea_gateway() as gw:
        result = await gw.call("get_job_diff", {"job_id": site.job, "base": "job-frozen"})
    assert result.payload["engine"] == "difflib"
    assert "falling back to difflib" in caplog.text and "broken" in caplog.text
