"""npm packages the tests use, installed into a cache folder outside the repository.

Reused between runs, checkouts and the workers of a parallel run, refreshed once a week: an
install holds the folder's lock alone, and every user holds it shared for as long as it runs
the package, so no refresh rewrites a copy in use. When npm cannot reach the registry, the copy
from an earlier run is still the one under test.
"""

from __future__ import annotations

import contextlib
import os
import re
import shutil
import subprocess
import sys
import time
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import IO

REFRESH_SECONDS = 7 * 24 * 3600  # look for a newer release once a week


#: The user's cache as the run found it: the suite then gives its gateways a throw-away
#: ``XDG_CACHE_HOME`` (the test command, and conftest per worker), which would mean a fresh
#: install (~400 MB, several CPU seconds) on every run. The test command passes the user's on
#: as ``TEST_NPM_CACHE``.
USER_CACHE = Path(
    os.environ.get("TEST_NPM_CACHE")
    or os.environ.get("XDG_CACHE_HOME")
    or str(Path.home() / ".cache")
)


def cache_dir(name: str) -> Path:
    return USER_CACHE / "mcp-plugin-gateway-tests" / name


@contextlib.contextmanager
def npm_package(folder: Path, spec: str | Sequence[str], probe: Path) -> Iterator[str | None]:
    """``spec`` (one package, or several installed together) installed into ``folder`` unless
    ``probe`` exists from an install younger than a week, and left as it is until the block
    ends. Yields why it cannot be used (node or npm missing; the registry cannot be reached and
    no earlier copy exists: the caller skips), ``None`` when it can; any other failed install
    with no earlier copy fails the test."""
    npm = shutil.which("npm")
    if shutil.which("node") is None or npm is None:
        yield "node and npm are needed (not found on PATH)"
        return
    folder.mkdir(parents=True, exist_ok=True)
    with open(folder / ".lock", "w") as fh:
        _lock(fh, exclusive=False)
        why = None
        if not _fresh(folder, probe):
            _lock(fh, exclusive=True)  # waits until every other user is done with the copy
            if not _fresh(folder, probe):  # nobody installed it meanwhile
                why = _install(npm, folder, spec, probe)
            _lock(fh, exclusive=False)
        yield why


def _lock(fh: IO[str], *, exclusive: bool) -> None:
    if sys.platform != "win32":
        import fcntl

        fcntl.flock(fh, fcntl.LOCK_EX if exclusive else fcntl.LOCK_SH)


def _fresh(folder: Path, probe: Path) -> bool:
    stamp = folder / ".installed"
    return (
        probe.exists() and stamp.exists() and time.time() - stamp.stat().st_mtime < REFRESH_SECONDS
    )


#: npm's error codes for a registry it could not reach (no network, no DNS, nobody listening).
_OFFLINE = re.compile(
    r"\b(?:ENOTFOUND|EAI_AGAIN|ECONNREFUSED|ECONNRESET|ETIMEDOUT|ENETUNREACH|EHOSTUNREACH)\b"
)


def _install(npm: str, folder: Path, spec: str | Sequence[str], probe: Path) -> str | None:
    """Why the install left no usable copy, ``None`` when there is one."""
    (folder / "package.json").write_text('{"private": true}\n')
    specs = [spec] if isinstance(spec, str) else list(spec)
    spec = " ".join(specs)
    try:
        proc = subprocess.run(
            [npm, "install", "--no-audit", "--no-fund", "--loglevel=error", *specs],
            cwd=folder,
            capture_output=True,
            text=True,
            timeout=600,
        )
    except subprocess.TimeoutExpired:  # a registry that never answers is one we cannot reach
        returncode, stderr = None, "ETIMEDOUT: no answer within 600 s"
    else:
        returncode, stderr = proc.returncode, proc.stderr
    if returncode == 0 and probe.exists():
        (folder / ".installed").write_text(spec + "\n")
        return None
    if probe.exists():
        # Offline: the copy from an earlier run is still the one under test.
        sys.stderr.write(f"npm install {spec} failed; using the cached copy\n")
        return None
    offline = _OFFLINE.search(stderr)
    if offline:
        return (
            f"the npm registry cannot be reached to install {spec} ({offline.group()}), "
            "and no earlier copy is cached"
        )
    raise AssertionError(f"npm install {spec} failed:\n{stderr[-2000:]}")
