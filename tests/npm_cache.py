"""npm packages the tests use, installed into a cache folder outside the repository.

Reused between runs and checkouts, refreshed once a week, one installer at a time; when npm
cannot reach the registry, the copy from an earlier run is still the one under test.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

REFRESH_SECONDS = 7 * 24 * 3600  # look for a newer release once a week


def cache_dir(name: str) -> Path:
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "mcp-plugin-gateway-tests" / name


@contextlib.contextmanager
def locked(folder: Path) -> Iterator[None]:
    """Several checkouts may run the suite at once and share the cache: one installer at a time."""
    folder.mkdir(parents=True, exist_ok=True)
    with open(folder / ".lock", "w") as fh:
        if sys.platform != "win32":
            import fcntl

            fcntl.flock(fh, fcntl.LOCK_EX)
        yield


def npm_install(folder: Path, spec: str, probe: Path) -> str | None:
    """Install ``spec`` into ``folder`` unless ``probe`` exists from an install younger than a
    week. Returns why it cannot be used (node or npm missing), ``None`` when it can; a failed
    install with no earlier copy fails the test."""
    npm = shutil.which("npm")
    if shutil.which("node") is None or npm is None:
        return "node and npm are needed (not found on PATH)"
    stamp = folder / ".installed"
    with locked(folder):
        fresh = stamp.exists() and time.time() - stamp.stat().st_mtime < REFRESH_SECONDS
        if probe.exists() and fresh:
            return None
        (folder / "package.json").write_text('{"private": true}\n')
        proc = subprocess.run(
            [npm, "install", "--no-audit", "--no-fund", "--loglevel=error", spec],
            cwd=folder,
            capture_output=True,
            text=True,
            timeout=600,
        )
        if proc.returncode == 0 and probe.exists():
            stamp.write_text(spec + "\n")
            return None
        if probe.exists():
            # Offline: the copy from an earlier run is still the one under test.
            sys.stderr.write(f"npm install {spec} failed; using the cached copy\n")
            return None
        raise AssertionError(f"npm install {spec} failed:\n{proc.stderr[-2000:]}")
