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
def npm_package(
    folder: Path, spec: str | Sequence[str], probe: Path, *, skip_unreachable: bool = False
) -> Iterator[str | None]:
    """``spec`` (one package, or several installed together) installed into ``folder`` unless
    ``probe`` exists from an install younger than a week, and left as it is until the block ends. Yields why it cannot be used (node or npm
    missing), ``None`` when it can; a failed install with no earlier copy fails the test, or,
    with ``skip_unreachable``, is yielded as the reason (for packages a test only measures
    with, where no registry means nothing to measure, not a broken test)."""
    npm = shutil.which("npm")
    if shutil.which("node") is None or npm is None:
        yield "node and npm are needed (not found on PATH)"
        return
    folder.mkdir(parents=True, exist_ok=True)
    with open(folder / ".lock", "w") as fh:
        _lock(fh, exclusive=False)
        if not _fresh(folder, probe):
            _lock(fh, exclusive=True)  # waits until every other user is done with the copy
            failed = None
            if not _fresh(folder, probe):  # nobody installed it meanwhile
                failed = _install(npm, folder, spec, probe)
            _lock(fh, exclusive=False)
            if failed is not None:
                if not skip_unreachable:
                    raise AssertionError(failed)
                yield _one_line(failed)
                return
        yield None


def _lock(fh: IO[str], *, exclusive: bool) -> None:
    if sys.platform != "win32":
        import fcntl

        fcntl.flock(fh, fcntl.LOCK_EX if exclusive else fcntl.LOCK_SH)


def _fresh(folder: Path, probe: Path) -> bool:
    stamp = folder / ".installed"
    return (
        probe.exists() and stamp.exists() and time.time() - stamp.stat().st_mtime < REFRESH_SECONDS
    )


def _one_line(failure: str) -> str:
    """``npm install X failed (code ECONNREFUSED)``: a skip reason, not npm's whole report."""
    head, _, detail = failure.partition("\n")
    # npm 9+ prefixes "npm error", older ones "npm ERR!"
    lines = (re.sub(r"^npm (error|ERR!)", "", line).strip() for line in detail.splitlines())
    first = next((line for line in lines if line), "")
    return f"{head.rstrip(':')} ({first})" if first else head.rstrip(":")


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
    except subprocess.TimeoutExpired:
        returncode, stderr = None, "no answer within 600 s"
    else:
        returncode, stderr = proc.returncode, proc.stderr
    if returncode == 0 and probe.exists():
        (folder / ".installed").write_text(spec + "\n")
        return None
    if probe.exists():
        # Offline: the copy from an earlier run is still the one under test.
        sys.stderr.write(f"npm install {spec} failed; using the cached copy\n")
        return None
    return f"npm install {spec} failed:\n{stderr[-2000:]}"
