"""Python packages the tests run in a virtual environment of their own, cached outside the repo.

Like :mod:`npm_cache`: one folder per package and version in the tests' cache, reused between
runs, checkouts and workers, refreshed weekly, held shared while in use. For a server the
gateway mounts that must not share the gateway's environment (FastMCP brings its own
dependencies).
"""

from __future__ import annotations

import contextlib
import shutil
import subprocess
import sys
import venv
from collections.abc import Iterator
from pathlib import Path

from npm_cache import _fresh, _lock


@contextlib.contextmanager
def venv_package(folder: Path, spec: str) -> Iterator[tuple[Path | None, str | None]]:
    """``spec`` pip-installed into a venv in ``folder`` (unless a fresh one is there); yields
    the venv's python, or ``None`` and why it cannot be had (no index reachable and no copy)."""
    python = folder / "venv" / ("Scripts/python.exe" if sys.platform == "win32" else "bin/python")
    folder.mkdir(parents=True, exist_ok=True)
    with open(folder / ".lock", "w") as fh:
        _lock(fh, exclusive=False)
        if not _fresh(folder, python):
            _lock(fh, exclusive=True)
            failed = None
            if not _fresh(folder, python):
                failed = _install(folder, spec, python)
            _lock(fh, exclusive=False)
            if failed is not None:
                yield None, failed
                return
        yield python, None


def _install(folder: Path, spec: str, python: Path) -> str | None:
    had = python.exists()
    if not had:
        shutil.rmtree(folder / "venv", ignore_errors=True)
        venv.EnvBuilder(with_pip=True).create(folder / "venv")
    try:
        proc = subprocess.run(
            [str(python), "-m", "pip", "install", "-q", "--disable-pip-version-check", spec],
            capture_output=True,
            text=True,
            timeout=900,
        )
    except subprocess.TimeoutExpired:
        returncode, stderr = None, "no answer within 900 s"
    else:
        returncode, stderr = proc.returncode, proc.stderr
    if returncode == 0:
        (folder / ".installed").write_text(spec + "\n")
        return None
    if had:
        sys.stderr.write(f"pip install {spec} failed; using the cached copy\n")
        return None
    last = next((line for line in reversed(stderr.splitlines()) if line.strip()), "")
    return f"pip install {spec} failed ({last[:200]})"
