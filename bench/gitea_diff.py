"""Benchmark: get_job_diff of a 200-file / 20,000-line change against the Gitea test server.

    .venv/bin/python bench/gitea_diff.py [--runs 5]

Builds a real git repository (10 directories x 20 files x 300 lines; the head commit
replaces 50 lines in every file: 10,000 additions + 10,000 deletions), serves it with the
Gitea-compatible test server of plugins/gitea/tests (real HTTP on 127.0.0.1, git behind it)
and measures, in the same run:

- baseline: `git diff base head` on the same repository (a local subprocess);
- get_job_diff through the gateway pipeline (max_chars=0, the exact git engine), at several
  max_concurrency settings, with the HTTP requests and TCP connections it made;
- replay: the very same requests sent by a bare httpx client (same concurrency, keep-alive),
  i.e. the transport + server share of the plugin's time;
- the same with 5 ms added to every answer of the server (a Gitea one network hop away),
  where overlapping requests is what bounded concurrency is for;
- a one-file change in the same repository, to show the requests follow the change.

Figures go to bench/results/gitea.md.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import platform
import statistics
import subprocess
import tempfile
import time
import uuid
from datetime import date
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

from gateway_gitea_testing import Builder, FakeGitea, git_out  # noqa: E402

from gateway.testing import make_gateway  # noqa: E402

DIRS, FILES_PER_DIR, LINES, CHANGED = 10, 20, 300, 50
LATENCY = 0.005
TOKEN = "bench-token-0123456789"
RESULTS = ROOT / "bench" / "results" / "gitea.md"


def build(root: Path) -> Builder:
    b = Builder(root / "repo")
    for d in range(DIRS):
        for f in range(FILES_PER_DIR):
            body = "".join(f"dir {d} file {f} line {i}: some agent output\n" for i in range(LINES))
            b.write(f"section_{d:02d}/part_{f:02d}.md", body)
    b.write("README.md", "# bench job\n")
    b.commit("base", "base", "2024-01-01T00:00:00+00:00")
    for d in range(DIRS):
        for f in range(FILES_PER_DIR):
            lines = (b.path / f"section_{d:02d}/part_{f:02d}.md").read_text().splitlines(True)
            for k in range(CHANGED):
                i = (k * LINES) // CHANGED + (f % 3)
                lines[i] = f"dir {d} file {f} line {i}: REWRITTEN in phase 2\n"
            b.write(f"section_{d:02d}/part_{f:02d}.md", "".join(lines))
    b.commit("head", "phase 2", "2024-01-02T00:00:00+00:00")
    b.write("README.md", "# bench job\n\nOne more line.\n")
    b.commit("small", "small change", "2024-01-03T00:00:00+00:00")
    return b


def median_ms(samples: list[float]) -> float:
    return statistics.median(samples) * 1000


def time_git_diff(repo: Path, base: str, head: str, runs: int) -> tuple[float, str]:
    samples, text = [], ""
    for _ in range(runs):
        t = time.perf_counter()
        text = git_out(repo, "diff", base, head).decode("utf-8", "replace")
        samples.append(time.perf_counter() - t)
    return median_ms(samples), text


async def time_plugin(
    gitea: FakeGitea, job: str, base: str, head: str, concurrency: int, runs: int, cwd: Path
) -> dict:
    config = {"gitea": {"url": gitea.url, "token": TOKEN, "max_concurrency": concurrency}}
    gw = make_gateway(plugins=["gitea"], plugin_config=config, env={}, cwd=cwd, default_timeout=300)
    samples, payload, requests, connections, log = [], {}, {}, [], []
    async with gw:
        for _ in range(runs):
            gitea.reset_counts()
            t = time.perf_counter()
            result = await gw.call(
                "get_job_diff", {"job_id": job, "base": base, "head": head, "max_chars": 0}
            )
            samples.append(time.perf_counter() - t)
            assert not result.is_error, result.payload
            payload = result.payload
            requests, log = dict(gitea.requests), list(gitea.log)
            connections.append(gitea.connections)
    return {
        "ms": median_ms(samples),
        "payload": payload,
        "requests": requests,
        "connections": f"{connections[0]} / {max(connections[1:], default=0)}",
        "log": log,
    }


async def time_replay(gitea: FakeGitea, log: list[str], concurrency: int, runs: int) -> float:
    import httpx

    samples = []
    limits = httpx.Limits(max_connections=concurrency, max_keepalive_connections=concurrency)
    async with httpx.AsyncClient(
        base_url=gitea.url, headers={"Authorization": f"token {TOKEN}"}, limits=limits
    ) as client:
        sem = asyncio.Semaphore(concurrency)

        async def one(target: str) -> None:
            async with sem:
                (await client.get(target)).raise_for_status()

        for _ in range(runs):
            t = time.perf_counter()
            await asyncio.gather(*(one(t_) for t_ in log))
            samples.append(time.perf_counter() - t)
    return median_ms(samples)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--runs", type=int, default=5)
    runs = parser.parse_args().runs
    with tempfile.TemporaryDirectory(prefix="gitea-bench-") as tmp:
        root = Path(tmp)
        b = build(root)
        base, head, small = b.commits["base"], b.commits["head"], b.commits["small"]
        job = str(uuid.uuid4())
        with FakeGitea(repos={f"graphrag/job-{job}": b.path}, token=TOKEN) as gitea:
            git_ms, reference = time_git_diff(b.path, base, head, runs)
            numstat = git_out(b.path, "diff", "--shortstat", base, head).decode().strip()
            rows, slow_rows, replay_ms, slow_replay_ms = [], [], 0.0, 0.0
            for latency, table in ((0.0, rows), (LATENCY, slow_rows)):
                gitea.delay = latency
                for concurrency in (1, 4, 8, 16):
                    r = asyncio.run(time_plugin(gitea, job, base, head, concurrency, runs, root))
                    assert r["payload"]["diff"] == reference, (
                        "the plugin's diff differs from git diff"
                    )
                    assert r["payload"]["engine"] == "git"
                    if concurrency == 8:
                        replay = asyncio.run(time_replay(gitea, r["log"], 8, runs))
                        if latency:
                            slow_replay_ms = replay
                        else:
                            replay_ms, default = replay, r
                    table.append((concurrency, r))
            gitea.delay = 0.0
            small_git_ms, small_ref = time_git_diff(b.path, head, small, runs)
            s = asyncio.run(time_plugin(gitea, job, head, small, 8, runs, root))
            assert s["payload"]["diff"] == small_ref

    summary = default["payload"]["summary"]
    assert summary["files_changed"] == DIRS * FILES_PER_DIR
    assert summary["additions"] + summary["deletions"] == DIRS * FILES_PER_DIR * CHANGED * 2
    req = default["requests"]
    git_version = subprocess.run(
        ["git", "--version"], capture_output=True, text=True
    ).stdout.strip()
    command = ".venv/bin/python bench/gitea_diff.py" + (f" --runs {runs}" if runs != 5 else "")
    out = [
        "# gitea plugin: get_job_diff benchmark",
        "",
        f"- date: {date.today().isoformat()}",
        f"- machine: {os.cpu_count()} CPUs (`nproc` = {len(os.sched_getaffinity(0))}), "
        f"{platform.system()} {platform.machine()}, Python {platform.python_version()}, {git_version}",
        f"- rerun: `{command}` (median of {runs} runs each; everything in the same run)",
        f"- change: {DIRS * FILES_PER_DIR} files in {DIRS} directories, {numstat}; "
        f"diff text {len(reference):,} characters",
        "- server: the Gitea-compatible test server of `testing/gitea/gateway_gitea_testing/fake.py` "
        "(real HTTP on 127.0.0.1, a real git repository behind it, ThreadingHTTPServer)",
        "",
        "## 200 files / 20,000 changed lines",
        "",
        "| what | median ms | vs `git diff` | HTTP requests | new TCP connections (first call / later calls) |",
        "|---|---:|---:|---:|---:|",
        f"| `git diff base head` (local subprocess, baseline) | {git_ms:.1f} | 1.0x | - | - |",
    ]
    for concurrency, r in rows:
        out.append(
            f"| get_job_diff, max_concurrency={concurrency} | {r['ms']:.1f} | "
            f"{r['ms'] / git_ms:.1f}x | {r['requests'].get('total', 0)} | {r['connections']} |"
        )
    out += [
        f"| the same {req.get('total', 0)} requests replayed by a bare httpx client "
        f"(concurrency 8, keep-alive) | {replay_ms:.1f} | {replay_ms / git_ms:.1f}x | "
        f"{req.get('total', 0)} | - |",
        "",
        f"Requests of one call (max_concurrency=8): {req.get('commits', 0)} ref resolutions "
        f"(`/commits`), {req.get('repo', 0)} repository lookups (only HEAD needs one), "
        f"{req.get('git/trees', 0)} tree listings (root + {DIRS} changed directories, both ends), "
        f"{req.get('raw', 0)} blob fetches (`/raw`, both ends of {DIRS * FILES_PER_DIR} files).",
        f"The plugin's own work (tree walk, object store, local `git diff` twice) is about "
        f"{default['ms'] - replay_ms:.0f} ms of the {default['ms']:.0f} ms; the rest is HTTP "
        "and the server.",
        "",
        f"## the same change, {LATENCY * 1000:.0f} ms added to every server answer",
        "",
        "| what | median ms | vs `git diff` | HTTP requests |",
        "|---|---:|---:|---:|",
    ]
    for concurrency, r in slow_rows:
        out.append(
            f"| get_job_diff, max_concurrency={concurrency} | {r['ms']:.1f} | "
            f"{r['ms'] / git_ms:.1f}x | {r['requests'].get('total', 0)} |"
        )
    out += [
        f"| replay by a bare httpx client (concurrency 8) | {slow_replay_ms:.1f} | "
        f"{slow_replay_ms / git_ms:.1f}x | {req.get('total', 0)} |",
        "",
        "## one-file change in the same repository",
        "",
        "| what | median ms | vs `git diff` | HTTP requests |",
        "|---|---:|---:|---:|",
        f"| `git diff` | {small_git_ms:.1f} | 1.0x | - |",
        f"| get_job_diff | {s['ms']:.1f} | {s['ms'] / small_git_ms:.1f}x | "
        f"{s['requests'].get('total', 0)} |",
        "",
        "Unchanged directories are compared by SHA and never listed, so the request count "
        "follows the change, not the repository.",
        "",
        "## reading",
        "",
        "- On 127.0.0.1 the test server answers in well under a millisecond and shares the CPUs "
        "with the client (a Python server under the GIL), so parallel requests mostly add "
        "contention there; with a few milliseconds per answer, as with a Gitea one network hop "
        f"away, max_concurrency=8 (the default) is "
        f"{slow_rows[0][1]['ms'] / slow_rows[2][1]['ms']:.1f}x faster than 1.",
        "- Most of the time is HTTP: the plugin is within "
        f"{default['ms'] / replay_ms:.2f}x of replaying its own requests with a bare client.",
        "- The machine is shared with other work: repeated runs differ by up to about a third.",
        "",
    ]
    RESULTS.parent.mkdir(parents=True, exist_ok=True)
    RESULTS.write_text("\n".join(out))
    print("\n".join(out))


if __name__ == "__main__":
    main()
