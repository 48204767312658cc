"""The whole test suite, now against a baseline revision, both measured in one run (issue 22).

Each revision is checked out clean (``git worktree add --detach`` under ``bench/.work/suite``),
so uncommitted changes and stale build folders never count (a checkout left by an earlier run
is reused while it is still a clean checkout of the same commit). Each checkout runs its own
README test command, ``python3 dev.py test -q -p no:cacheprovider``, which sets up its own
``.venv``: a first, untimed ``--collect-only`` pass does the installing, so the timed runs
measure the tests only. Runs alternate (base, head, head, base, ...) so that drift on a shared
machine hits both alike. Printed per run: wall time, CPU time of everything the command started
(user + sys of the waited-for children), the pytest summary line and any failed test (each
checkout's last output is kept beside it as ``<name>-last.log``); then the ratio of the medians.

    .venv/bin/python bench/suite_bench.py --base bf3ff1d            # one run of each
    .venv/bin/python bench/suite_bench.py --base bf3ff1d --pairs 2  # B H H B
"""

from __future__ import annotations

import argparse
import os
import re
import resource
import shutil
import signal
import statistics
import subprocess
import sys
import time
from pathlib import Path

from bench_method import WORK, abba, machine, ratio_text, verdict

ROOT = Path(__file__).resolve().parent.parent
TEST = ["python3", "dev.py", "test", "-q", "-p", "no:cacheprovider"]
SUMMARY = re.compile(r"\d+ (passed|failed|error)")


def checkout(rev: str, name: str) -> Path:
    """A clean checkout of ``rev`` with its test environment installed."""
    commit = subprocess.run(
        ["git", "rev-parse", "--verify", f"{rev}^{{commit}}"],
        cwd=ROOT,
        check=True,
        capture_output=True,
        text=True,
    ).stdout.strip()
    folder = WORK / "suite" / name
    if _clean_at(folder, commit):
        print(f"{name}: {commit[:12]} in {folder.relative_to(ROOT)} (kept)", flush=True)
        return folder
    if folder.exists():
        subprocess.run(["git", "worktree", "remove", "--force", str(folder)], cwd=ROOT)
        shutil.rmtree(folder, ignore_errors=True)
    folder.parent.mkdir(parents=True, exist_ok=True)
    subprocess.run(
        ["git", "worktree", "add", "--detach", "-q", str(folder), commit], cwd=ROOT, check=True
    )
    print(f"{name}: {commit[:12]} in {folder.relative_to(ROOT)}; installing", flush=True)
    done = subprocess.run(
        [*TEST, "--collect-only"], cwd=folder, capture_output=True, text=True, env=_env()
    )
    if done.returncode != 0:
        raise SystemExit(f"{name}: setting up failed:\n{done.stdout[-2000:]}{done.stderr[-2000:]}")
    return folder


def _clean_at(folder: Path, commit: str) -> bool:
    """``folder`` is a checkout of ``commit`` without changes, its test tools installed."""
    if not (folder / ".venv").is_dir():
        return False
    head = subprocess.run(["git", "rev-parse", "HEAD"], cwd=folder, capture_output=True, text=True)
    changed = subprocess.run(
        ["git", "status", "--porcelain", "--untracked-files=no"],
        cwd=folder,
        capture_output=True,
        text=True,
    )
    return head.stdout.strip() == commit and changed.returncode == 0 and not changed.stdout


def _env() -> dict[str, str]:
    # Nothing of this process's environment that would change what a checkout runs; and
    # bytecode may be written, as on a newcomer's machine: an older test command that does not
    # drop PYTHONDONTWRITEBYTECODE itself would otherwise compile every module in every process.
    return {
        k: v
        for k, v in os.environ.items()
        if k not in ("PYTHONPATH", "PYTHONDONTWRITEBYTECODE")
        and not k.startswith(("MCP_GATEWAY_", "VIRTUAL_ENV", "PYTEST_"))
    }


def _default_signals() -> None:
    for sig in (signal.SIGINT, signal.SIGQUIT):
        signal.signal(sig, signal.SIG_DFL)


def run_suite(folder: Path) -> tuple[float, float, str, int]:
    """(wall s, CPU s of the command and everything it waited for, summary, exit code)."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    done = subprocess.run(
        TEST,
        cwd=folder,
        capture_output=True,
        text=True,
        env=_env(),
        # A bench started in the background (`cmd &`) has SIGINT ignored, and children keep an
        # ignored signal across exec: a Ctrl-C test then waits out its timeout in a checkout
        # whose server relies on Python's default handler. Both start as from a terminal.
        preexec_fn=_default_signals,
    )
    wall = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    (folder.parent / f"{folder.name}-last.log").write_text(done.stdout + done.stderr)
    for line in done.stdout.splitlines():
        if line.startswith(("FAILED", "ERROR")):
            print(f"  {folder.name}: {line}", flush=True)
    lines = [line.strip("= ") for line in done.stdout.splitlines() if SUMMARY.search(line)]
    return wall, cpu, lines[-1] if lines else "(no pytest summary)", done.returncode


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--base", required=True, help="baseline revision (e.g. a round's start)")
    parser.add_argument("--head", default="HEAD", help="revision measured (default: HEAD)")
    parser.add_argument("--pairs", type=int, default=1, help="alternated pairs of runs")
    parser.add_argument("--target", type=float, default=0.5, help="head / base wall, at most")
    args = parser.parse_args(argv)
    print(machine(), flush=True)
    folders = {"A": checkout(args.base, "base"), "B": checkout(args.head, "head")}
    names = {"A": "base", "B": "head"}
    walls: dict[str, list[float]] = {"A": [], "B": []}
    failed = False
    for pair in abba(args.pairs):
        for which in pair:
            load = os.getloadavg()[0]
            wall, cpu, summary, code = run_suite(folders[which])
            walls[which].append(wall)
            failed |= code != 0
            print(
                f"{names[which]}: {wall:7.1f} s wall, {cpu:7.1f} s CPU, load before {load:.2f}"
                f", exit {code}: {summary}",
                flush=True,
            )
    ratio = statistics.median(walls["B"]) / statistics.median(walls["A"])
    print(
        f"head / base, median wall: {ratio_text(ratio, args.target, digits=3)} x "
        f"(target <= {args.target}) {verdict(ratio <= args.target and not failed)}"
    )
    return 0 if ratio <= args.target and not failed else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
