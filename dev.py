#!/usr/bin/env python3
"""Set up and run the project with nothing but Python 3.11+ and pip.

    python3 dev.py run [ARGS...]   # set up .venv, then `mcp-gateway ARGS` (default: serve)
    python3 dev.py test [ARGS...]  # set up .venv with test extras, then pytest ARGS
    python3 dev.py setup           # only set up

Setup creates .venv, installs the core and every plugin under plugins/ and examples/ in
editable mode, and skips the install when nothing it depends on changed since last time.
"""

from __future__ import annotations

import hashlib
import os
import subprocess
import sys
import venv
from pathlib import Path

ROOT = Path(__file__).resolve().parent
VENV = ROOT / ".venv"
BIN = VENV / ("Scripts" if os.name == "nt" else "bin")
PY = BIN / ("python.exe" if os.name == "nt" else "python")
STAMP = VENV / ".dev-setup-stamp"


def packages() -> list[Path]:
    found = [ROOT]
    for group in ("plugins", "examples"):
        found += sorted(p.parent for p in (ROOT / group).glob("*/pyproject.toml"))
    return found


def fingerprint() -> str:
    h = hashlib.sha256(sys.version.encode())
    for pkg in packages():
        h.update((pkg / "pyproject.toml").read_bytes())
    return h.hexdigest()


def setup() -> None:
    if not PY.exists():
        print("dev: creating .venv", file=sys.stderr)
        venv.EnvBuilder(with_pip=True).create(VENV)
    want = fingerprint()
    if STAMP.exists() and STAMP.read_text() == want:
        return
    print("dev: installing the core, plugins and test tools into .venv", file=sys.stderr)
    pip = [str(PY), "-m", "pip", "install", "--disable-pip-version-check", "-q"]
    # stdout stays clean: `dev.py run` may be the stdio server a client launches.
    subprocess.run([*pip, "--upgrade", "pip"], check=True, stdout=sys.stderr)
    args = []
    for pkg in packages():
        spec = str(pkg) + ("[test]" if pkg == ROOT else "")
        args += ["-e", spec]
    subprocess.run([*pip, *args], check=True, stdout=sys.stderr)
    STAMP.write_text(want)


def main(argv: list[str]) -> int:
    cmd, rest = (argv[0], argv[1:]) if argv else ("run", [])
    if cmd not in {"run", "test", "setup"}:
        print(__doc__, file=sys.stderr)
        return 2
    setup()
    if cmd == "setup":
        return 0
    if cmd == "test":
        return subprocess.call([str(PY), "-m", "pytest", *rest], cwd=ROOT)
    exe = BIN / ("mcp-gateway.exe" if os.name == "nt" else "mcp-gateway")
    return subprocess.call([str(exe), *(rest or ["serve"])])


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
