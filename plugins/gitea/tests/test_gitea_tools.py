"""list_job_commits, get_job_file, list_job_files and list_job_tags checked against git itself."""

from __future__ import annotations

import re
from datetime import datetime
from urllib.parse import parse_qs, urlsplit

import pytest
from gateway_gitea_testing import OWNER, TOKEN, FakeGitea, Site, git_out

pytestmark = pytest.mark.anyio


def git_log(site_repo, *args: str) -> list[dict[str, str]]:
    out = git_out(
        site_repo, "log", "-z", "--format=%H%x1f%aI%x1f%an%x1f%ae%x1f%cI%x1f%P%x1f%B", *args
    )
    commits = []
    for rec in out.decode().split("\0"):
        if not rec:
            continue
        sha, ad, an, ae, cd, parents, body = rec.split("\x1f")
        commits.append(
            {
                "sha": sha,
                "timestamp": ad,
                "author": an,
                "author_email": ae,
                "committed_at": cd,
                "parents": parents.split(),
                "message": body.rstrip("\n"),
            }
        )
    return commits


def same_instant(a: str, b: str) -> bool:
    return datetime.fromisoformat(a) == datetime.fromisoformat(b)


def normalise(commits: list[dict]) -> list[dict]:
    return [
        {
            **c,
            "timestamp": datetime.fromisoformat(c["timestamp"]),
            "committed_at": datetime.fromisoformat(c["committed_at"]),
        }
        for c in commits
    ]


# --- list_job_commits ---------------------------------------------------------------------------


async def test_commits_of_main_match_git_log(gitea_gateway, site: Site):
    gw = gitea_gateway()
    async with gw:
        result = await gw.call("list_job_commits", {"job_id": site.job})
    assert not result.is_error, result.payload
    body = result.payload
    expected = git_log(site.repo.path, "main")
    assert normalise(body["commits"]) == normalise(expected)
    assert body["total"] == len(expected) and body["has_more"] is False
    assert body["ref_sha"] == site.repo.commits["c5"]
    # The offset git writes is kept: same wall-clock text, not only the same instant.
    assert body["commits"][0]["timestamp"] == expected[0]["timestamp"].replace("Z", "+00:00")


async def test_since_ref_lists_only_the_commits_after_it(gitea_gateway, site: Site):
    gw = gitea_gateway()
    async with gw:
        result = await gw.call(
            "list_job_commits", {"job_id": site.job, "since_ref": "phase_2_end", "ref": "HEAD"}
        )
    body = result.payload
    assert [c["sha"] for c in body["commits"]] == [
        c["sha"] for c in git_log(site.repo.path, "phase_2_end..main")
    ]
    assert body["since_sha"] == site.repo.commits["c3"]
    assert body["total"] == 2


async def test_branch_with_slash_and_short_sha_resolve_to_full_shas(gitea_gateway, site: Site):
    gw = gitea_gateway()
    async with gw:
        side = await gw.call(
            "list_job_commits", {"job_id": site.job, "ref": "feature/extra", "limit": 1}
        )
        short = await gw.call(
            "list_job_commits", {"job_id": site.job, "ref": site.repo.commits["c2"][:8]}
        )
    assert side.payload["ref_sha"] == site.repo.commits["side"]
    assert side.payload["has_more"] is True
    assert [c["sha"] for c in short.payload["commits"]] == [
        site.repo.commits["c2"],
        site.repo.commits["c1"],
    ]


@pytest.mark.parametrize(
    ("limit", "page"), [(7, 1), (7, 3), (50, 2), (60, 2), (100, 1), (100, 2), (45, 3)]
)
async def test_pages_match_git_log_beyond_gitea_page_cap(gitea_gateway, site: Site, limit, page):
    gw = gitea_gateway()
    async with gw:
        result = await gw.call(
            "list_job_commits", {"job_id": site.busy_job, "limit": limit, "page": page}
        )
    body = result.payload
    everything = [c["sha"] for c in git_log(site.busy.path, "main")]
    want = everything[(page - 1) * limit : page * limit]
    assert [c["sha"] for c in body["commits"]] == want
    assert body["total"] == len(everything) == 130
    assert body["has_more"] is (page * limit < 130)


async def test_a_server_with_a_smaller_page_cap_still_gives_exact_pages(
    gateway_factory, site: Site
):
    """[api] MAX_RESPONSE_ITEMS is configurable; a Gitea clipping at 20 must not lose commits."""
    with FakeGitea(
        repos={f"{OWNER}/job-{site.busy_job}": site.busy.path}, token=TOKEN, max_items=20
    ) as gitea:
        config = {"gitea": {"url": gitea.url, "token": TOKEN}}
        gw = gateway_factory(plugins=["gitea"], plugin_config=config, env={})
        async with gw:
            commits = await gw.call(
                "list_job_commits", {"job_id": site.busy_job, "limit": 50, "page": 2}
            )
            tags = await gw.call("list_job_tags", {"job_id": site.busy_job})
    everything = [c["sha"] for c in git_log(site.busy.path, "main")]
    assert [c["sha"] for c in commits.payload["commits"]] == everything[50:100]
    assert [t["name"] for t in tags.payload["tags"]] == [f"t{i:03d}" for i in range(60)]


async def test_a_page_past_the_end_is_empty(gitea_gateway, site: Site):
    gw = gitea_gateway()
    async with gw:
        result = await gw.call(
            "list_job_commits", {"job_id": site.busy_job, "limit": 100, "page": 3}
        )
    assert result.payload["commits"] == [] and result.payload["has_more"] is False


async def test_empty_repository_has_no_commits(gitea_gateway, site: Site):
    gw = gitea_gateway()
    async with gw:
        result = await gw.call("list_job_commits", {"job_id": site.empty_job})
        head = await gw.call("list_job_commits", {"job_id": site.empty_job, "ref": "HEAD"})
    for r in (result, head):
        assert not r.is_error
        assert r.payload["empty_repository"] is True and r.payload["commits"] == []


async def test_unknown_ref_and_unknown_repository_are_not_found_and_say_which(
    gitea_gateway, site: Site
):
    gw = gitea_gateway()
    async with gw:
        ref = await gw.call("list_job_commits", {"job_id": site.job, "ref": "phase_9_end"})
        since = await gw.call("list_job_commits", {"job_id": site.job, "since_ref": "nope"})
        repo = await gw.call("list_job_commits", {"job_id": "0badc0de-0000-4000-8000-000000000000"})
    assert ref.code == "NOT_FOUND" and "'phase_9_end'" in ref.payload["error"]["message"]
    assert since.code == "NOT_FOUND" and "'nope'" in since.payload["error"]["message"]
    assert repo.code == "NOT_FOUND"
    assert "graphrag/job-0badc0de-0000-4000-8000-000000000000" in repo.payload["error"]["message"]


# --- list_job_tags ------------------------------------------------------------------------------


def git_tags(repo) -> list[tuple[str, str, datetime]]:
    fmt = "%(refname:strip=2) %(objecttype) %(objectname) %(*objectname) %(taggerdate:iso-strict)"
    out = git_out(repo, "for-each-ref", f"--format={fmt}", "refs/tags").decode()
    tags = []
    for line in out.splitlines():
        name, kind, obj, peeled, *date = line.split(" ")
        if kind == "tag":
            tags.append((name, peeled, datetime.fromisoformat(date[0])))
        else:
            when = git_out(repo, "log", "-1", "--format=%cI", obj).decode().strip()
            tags.append((name, obj, datetime.fromisoformat(when)))
    return sorted(tags, key=lambda t: (t[2], t[0]))


async def test_tags_match_git_oldest_first(gitea_gateway, site: Site):
    gw = gitea_gateway()
    async with gw:
        result = await gw.call("list_job_tags", {"job_id": site.job})
    tags = result.payload["tags"]
    got = [(t["name"], t["sha"], datetime.fromisoformat(t["timestamp"])) for t in tags]
    assert got == git_tags(site.repo.path)
    assert [t["name"] for t in tags] == [
        "phase_1_start",
        "phase_2_start",
        "phase_1_end",
        "phase_2_end",
        "job-frozen",
        "phase_3_start",
    ]
    frozen = next(t for t in tags if t["name"] == "job-frozen")
    assert frozen["annotated"] is True and frozen["message"] == "frozen for review"
    assert result.payload["count"] == 6


async def test_tags_beyond_one_page_are_all_listed(gitea_gateway, site: Site):
    gw = gitea_gateway()
    site.gitea.reset_counts()
    async with gw:
        result = await gw.call("list_job_tags", {"job_id": site.busy_job})
    names = [t["name"] for t in result.payload["tags"]]
    assert names == [f"t{i:03d}" for i in range(60)]
    assert [n for n, _, _ in git_tags(site.busy.path)] == names
    assert site.gitea.requests["tags"] == 2  # 50 + 10


async def test_empty_repository_has_no_tags_and_missing_one_is_not_found(gitea_gateway, site: Site):
    gw = gitea_gateway()
    async with gw:
        empty = await gw.call("list_job_tags", {"job_id": site.empty_job})
        missing = await gw.call("list_job_tags", {"job_id": "0badc0de-0000-4000-8000-000000000000"})
    assert empty.payload["tags"] == [] and empty.payload["count"] == 0
    assert (
        missing.code == "NOT_FOUND" and "no Gitea repository" in missing.payload["error"]["message"]
    )


# --- get_job_file -------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("path", "ref"),
    [
        ("workspace.md", "HEAD"),
        ("workspace.md", "phase_1_end"),
        ("workspace.md", "job-frozen"),
        ("src/util/helpers.py", "phase_1_start"),
        ("données/résumé.md", "main"),
        ("docs/spaces in name.md", "phase_2_end"),
        ("nonl.txt", "HEAD"),
        ("windows.txt", "HEAD"),
        ("extra/idea.md", "feature/extra"),
    ],
)
async def test_file_content_matches_git_show(gitea_gateway, site: Site, path, ref):
    gw = gitea_gateway()
    async with gw:
        result = await gw.call("get_job_file", {"job_id": site.job, "file_path": path, "ref": ref})
    assert not result.is_error, result.payload
    body = result.payload
    rev = "main" if ref == "HEAD" else ref
    assert body["content"] == git_out(site.repo.path, "show", f"{rev}:{path}").decode()
    assert (
        body["commit"] == git_out(site.repo.path, "rev-parse", f"{rev}^{{commit}}").decode().strip()
    )
    assert body["size"] == len(git_out(site.repo.path, "show", f"{rev}:{path}"))
    assert body["binary"] is False and body["truncated"] is False


async def test_short_sha_reads_that_commit_not_the_default_branch(gitea_gateway, site: Site):
    """Gitea's /raw would silently serve the default branch for a short SHA."""
    gw = gitea_gateway()
    short = site.repo.commits["c1"][:7]
    async with gw:
        result = await gw.call(
            "get_job_file", {"job_id": site.job, "file_path": "plan.md", "ref": short}
        )
    assert result.payload["content"] == git_out(site.repo.path, "show", f"{short}:plan.md").decode()
    assert result.payload["content"] != git_out(site.repo.path, "show", "main:plan.md").decode()
    assert result.payload["commit"] == site.repo.commits["c1"]


async def test_every_request_uses_the_resolved_full_sha(gitea_gateway, site: Site):
    gw = gitea_gateway()
    site.gitea.reset_counts()
    async with gw:
        await gw.call(
            "get_job_file", {"job_id": site.job, "file_path": "plan.md", "ref": "phase_1_end"}
        )
        await gw.call("list_job_files", {"job_id": site.job, "path": "src", "ref": "phase_1_end"})
        await gw.call(
            "get_job_diff", {"job_id": site.job, "base": "phase_1_end", "head": "job-frozen"}
        )
    for target in site.gitea.log:
        parts = urlsplit(target)
        query = parse_qs(parts.query)
        if "/raw/" in parts.path:
            assert re.fullmatch(r"[0-9a-f]{40}", query["ref"][0]), target
        if "/git/trees/" in parts.path:
            assert re.search(r"/git/trees/[0-9a-f]{40}$", parts.path), target
    resolutions = [t for t in site.gitea.log if "/commits?" in t]
    assert len(resolutions) == 1 + 1 + 2  # one per ref per call


async def test_binary_file_is_reported_not_dumped(gitea_gateway, site: Site):
    gw = gitea_gateway()
    async with gw:
        result = await gw.call("get_job_file", {"job_id": site.job, "file_path": "assets/logo.png"})
    body = result.payload
    assert body["binary"] is True and body["content"] is None
    assert body["size"] == len(git_out(site.repo.path, "show", "main:assets/logo.png"))


async def test_large_file_is_truncated_at_the_cap_with_a_marker(gitea_gateway, site: Site):
    gw = gitea_gateway(site.config(max_file_bytes=1000))
    async with gw:
        result = await gw.call("get_job_file", {"job_id": site.job, "file_path": "output/big.log"})
    body = result.payload
    full = git_out(site.repo.path, "show", "main:output/big.log")
    assert body["truncated"] is True and body["size"] == len(full)
    assert body["returned_bytes"] == 1000
    shown, marker = body["content"].split("\n[truncated]")
    assert shown == full[:1000].decode()
    assert f"{len(full) - 1000:,} of {len(full):,} bytes not shown" in marker


async def test_multibyte_character_cut_by_the_cap_is_dropped_not_mangled(gitea_gateway, site: Site):
    gw = gitea_gateway(site.config(max_file_bytes=4))  # "café": the é is bytes 4-5
    async with gw:
        result = await gw.call(
            "get_job_file", {"job_id": site.job, "file_path": "données/résumé.md"}
        )
    assert result.payload["content"].startswith("caf\n[truncated]")


async def test_empty_file_symlink_and_directory(gitea_gateway, site: Site):
    gw = gitea_gateway()
    async with gw:
        empty = await gw.call("get_job_file", {"job_id": site.job, "file_path": "output/empty.txt"})
        link = await gw.call("get_job_file", {"job_id": site.job, "file_path": "latest"})
        folder = await gw.call("get_job_file", {"job_id": site.job, "file_path": "output"})
        missing = await gw.call("get_job_file", {"job_id": site.job, "file_path": "output/nope.md"})
        old = await gw.call(
            "get_job_file",
            {"job_id": site.job, "file_path": "output/big.log", "ref": "phase_1_start"},
        )
    assert (empty.payload["size"], empty.payload["content"]) == (0, "")
    assert (
        link.payload["object_type"] == "symlink" and link.payload["content"] == "output/report.md"
    )
    assert folder.code == "NOT_FOUND" and "directory" in folder.payload["error"]["message"]
    assert missing.code == "NOT_FOUND" and "'output/nope.md'" in missing.payload["error"]["message"]
    assert old.code == "NOT_FOUND"


async def test_file_of_an_empty_repository_is_not_found(gitea_gateway, site: Site):
    gw = gitea_gateway()
    async with gw:
        result = await gw.call("get_job_file", {"job_id": site.empty_job, "file_path": "a.md"})
    assert result.code == "NOT_FOUND" and "empty" in result.payload["error"]["message"]


# --- list_job_files -----------------------------------------------------------------------------


def git_ls(repo, rev: str, path: str) -> list[tuple[str, str, str, int]]:
    spec = f"{rev}:{path}" if path else rev
    out = git_out(repo, "ls-tree", "-l", "-z", spec)
    kinds = {"tree": "dir", "commit": "submodule"}
    entries = []
    for rec in out.split(b"\0"):
        if not rec:
            continue
        meta, name = rec.split(b"\t", 1)
        mode, kind, sha, size = meta.decode().split()
        typ = kinds.get(kind, "symlink" if mode == "120000" else "file")
        entries.append((name.decode(), typ, sha, int(size) if size != "-" else 0))
    return entries


@pytest.mark.parametrize(
    ("path", "ref", "git_path", "rev"),
    [
        ("/", "HEAD", "", "main"),
        ("", "job-frozen", "", "job-frozen"),
        ("output", "job-frozen", "output", "job-frozen"),
        ("output/", "HEAD", "output", "main"),
        ("src/util", "phase_1_end", "src/util", "phase_1_end"),
        ("./données", "main", "données", "main"),
    ],
)
async def test_listing_matches_git_ls_tree(gitea_gateway, site: Site, path, ref, git_path, rev):
    gw = gitea_gateway()
    async with gw:
        result = await gw.call("list_job_files", {"job_id": site.job, "path": path, "ref": ref})
    assert not result.is_error, result.payload
    entries = result.payload["entries"]
    assert [(e["name"], e["type"], e["sha"], e["size"]) for e in entries] == git_ls(
        site.repo.path, rev, git_path
    )
    prefix = f"{git_path}/" if git_path else ""
    assert all(e["path"] == prefix + e["name"] for e in entries)


async def test_listing_errors_name_the_directory(gitea_gateway, site: Site):
    gw = gitea_gateway()
    async with gw:
        missing = await gw.call("list_job_files", {"job_id": site.job, "path": "output/deeper"})
        a_file = await gw.call("list_job_files", {"job_id": site.job, "path": "plan.md"})
        early = await gw.call(
            "list_job_files", {"job_id": site.job, "path": "output", "ref": "phase_1_start"}
        )
        empty = await gw.call("list_job_files", {"job_id": site.empty_job})
    assert missing.code == "NOT_FOUND" and "'output/deeper'" in missing.payload["error"]["message"]
    assert a_file.code == "NOT_FOUND" and "get_job_file" in a_file.payload["error"]["message"]
    assert early.code == "NOT_FOUND"
    assert empty.payload["empty_repository"] is True and empty.payload["entries"] == []
