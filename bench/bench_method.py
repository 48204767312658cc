"""Method helpers shared by the jobs benchmarks: order, verdicts, the code measured "before".

- Paired measurements alternate: :func:`abba` gives A B B A A B B A ..., :func:`rotations` the
  rotated orders of three or more methods, so that drift on a shared machine hits all alike.
- Verdicts are computed on unrounded ratios and printed by :func:`ratio_text` with as many
  digits as it takes for the printed number to agree with the verdict (1.153 against 1.15 is
  never printed as "1.15").
- :func:`load_before` imports a package as it was at a git revision, so that "before" and
  "after" run in the same process, in the same run.
"""

from __future__ import annotations

import importlib
import os
import platform
import sqlite3
import subprocess
import sys
from collections.abc import Iterator, Sequence
from pathlib import Path
from types import ModuleType
from typing import TypeVar

ROOT = Path(__file__).resolve().parent.parent
WORK = ROOT / "bench" / ".work"
T = TypeVar("T")

#: The last commit whose jobs store ran sqlite3 in worker threads (before aiosqlite).
SQLITE3_STORE_REV = "0c8cf8e39acc80f3498ca3cb4b383e7f4a606bd3"


def abba(n: int) -> Iterator[tuple[str, str]]:
    """n pairs in the order AB, BA, AB, BA, ..."""
    for i in range(n):
        yield ("A", "B") if i % 2 == 0 else ("B", "A")


def rotations(items: Sequence[T], n: int) -> Iterator[list[T]]:
    """n orders of ``items``, each rotated by one from the previous."""
    k = len(items)
    for i in range(n):
        yield [*items[i % k :], *items[: i % k]]


def ratio_text(value: float, threshold: float | None = None, *, digits: int = 2) -> str:
    """``value`` with enough decimals that it reads on the same side of ``threshold``."""
    text = f"{value:.{digits}f}"
    if threshold is not None:

        def side(x: float) -> int:
            return (x > threshold) - (x < threshold)

        while side(float(text)) != side(value) and digits < 12:
            digits += 1
            text = f"{value:.{digits}f}"
    return text


def verdict(ok: bool, *, miss: str = "MISS") -> str:
    return "**PASS**" if ok else f"**{miss}**"


def load_before(rev: str, package_dir: str, as_name: str) -> ModuleType:
    """Import ``package_dir`` (e.g. ``plugins/queue/gateway_queue``) as it was at ``rev``,
    under the package name ``as_name``. Its relative imports stay inside that old copy."""
    target = WORK / "before" / rev[:12]
    pkg = target / as_name
    if not pkg.is_dir():
        pkg.mkdir(parents=True)
        names = subprocess.run(
            ["git", "ls-tree", "--name-only", rev, package_dir + "/"],
            cwd=ROOT,
            check=True,
            capture_output=True,
            text=True,
        ).stdout.split()
        for name in names:
            if not name.endswith(".py"):
                continue
            source = subprocess.run(
                ["git", "show", f"{rev}:{name}"], cwd=ROOT, check=True, capture_output=True
            ).stdout
            (pkg / Path(name).name).write_bytes(source)
    if str(target) not in sys.path:
        sys.path.insert(0, str(target))
    return importlib.import_module(as_name)


def git_head() -> str:
    out = subprocess.run(
        ["git", "rev-parse", "--short", "HEAD"], cwd=ROOT, capture_output=True, text=True
    )
    dirty = subprocess.run(  # results files are what a run writes: not "uncommitted changes"
        ["git", "status", "--porcelain", "--untracked-files=no", "--", ".", ":!bench/results"],
        cwd=ROOT,
        capture_output=True,
        text=True,
    ).stdout.strip()
    return out.stdout.strip() + (" (with uncommitted changes)" if dirty else "")


def machine() -> str:
    from importlib.metadata import version

    cpu = platform.processor() or platform.machine()
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    load = " ".join(f"{x:.2f}" for x in os.getloadavg())
    return (
        f"nproc: {os.cpu_count()} ({cpu}); Python {platform.python_version()}; SQLite "
        f"{sqlite3.sqlite_version}; aiosqlite {version('aiosqlite')}; mcp {version('mcp')}; "
        f"gateway commit {git_head()}; load average at the start: {load}"
    )


def drop_file_cache(path: Path) -> None:
    """Best effort: ask the kernel to forget the file's cached pages (cold-cache runs)."""
    try:
        fd = os.open(path, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)  # dirty pages cannot be dropped: write them first
        os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
    except (AttributeError, OSError):
        pass
    finally:
        os.close(fd)
