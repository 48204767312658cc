#!/usr/bin/env python3
"""Set up and run the project with nothing but Python 3.11+ and pip.

    python3 dev.py run [ARGS...]   # set up .venv, then `mcp-gateway ARGS` (default: serve)
    python3 dev.py test [ARGS...]  # set up .venv with test extras, then pytest ARGS
    python3 dev.py setup           # only set up

Setup creates .venv and installs the core and every plugin under plugins/ in editable mode:
that is a deployment, and `run` serves exactly those. The example plugins under examples/ are
for the test suite only: `test` installs them into .venv/examples-site, which only the test run
puts on PYTHONPATH, so they are never offered to a client. Each install is skipped when
nothing it depends on changed since last time.
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
EXAMPLES_SITE = VENV / "examples-site"
EXAMPLES_STAMP = VENV / ".dev-examples-stamp"
PIP = [str(PY), "-m", "pip", "install", "--disable-pip-version-check", "-q"]


def packages() -> list[Path]:
    return [ROOT, *sorted(p.parent for p in (ROOT / "plugins").glob("*/pyproject.toml"))]


def examples() -> list[Path]:
    return sorted(p.parent for p in (ROOT / "examples").glob("*/pyproject.toml"))


def fingerprint(paths: list[Path], *, sources: bool = False) -> str:
    h = hashlib.sha256(sys.version.encode())
    for pkg in paths:
        files = sorted(pkg.rglob("*.py")) if sources else []
        for f in [pkg / "pyproject.toml", *files]:
            h.update(str(f.relative_to(ROOT)).encode() + f.read_bytes())
    return h.hexdigest()


def _install(stamp: Path, want: str, args: list[str], what: str) -> None:
    if stamp.exists() and stamp.read_text() == want:
        return
    print(f"dev: installing {what}", file=sys.stderr)
    # stdout stays clean: `dev.py run` may be the stdio server a client launches.
    subprocess.run([*PIP, *args], check=True, stdout=sys.stderr)
    stamp.write_text(want)


def setup(*, with_examples: bool = False) -> None:
    if not PY.exists():
        print("dev: creating .venv", file=sys.stderr)
        venv.EnvBuilder(with_pip=True).create(VENV)
        subprocess.run([*PIP, "--upgrade", "pip"], check=True, stdout=sys.stderr)
    args = []
    for pkg in packages():
        args += ["-e", str(pkg) + ("[test]" if pkg == ROOT else "")]
    _install(STAMP, fingerprint(packages()), args, "the core, plugins and test tools into .venv")
    if with_examples:
        # A copy (not editable) in a folder of its own: re-installed whenever a source changes.
        want = fingerprint(examples(), sources=True)
        if not (EXAMPLES_STAMP.exists() and EXAMPLES_STAMP.read_text() == want):
            import shutil

            shutil.rmtree(EXAMPLES_SITE, ignore_errors=True)
        args = ["--no-deps", "--target", str(EXAMPLES_SITE), *map(str, examples())]
        _install(EXAMPLES_STAMP, want, args, "the example plugins for the tests")


def main(argv: list[str]) -> int:
    cmd, rest = (argv[0], argv[1:]) if argv else ("run", [])
    if cmd not in {"run", "test", "setup"}:
        print(__doc__, file=sys.stderr)
        return 2
    setup(with_examples=cmd == "test")
    if cmd == "setup":
        return 0
    if cmd == "test":
        env = dict(os.environ)
        env["PYTHONPATH"] = os.pathsep.join(
            p for p in (str(EXAMPLES_SITE), env.get("PYTHONPATH", "")) if p
        )
        return subprocess.call([str(PY), "-m", "pytest", *rest], cwd=ROOT, env=env)
    exe = BIN / ("mcp-gateway.exe" if os.name == "nt" else "mcp-gateway")
    return subprocess.call([str(exe), *(rest or ["serve"])])


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
