#!/usr/bin/env python3
"""Set up and run the project with nothing but Python 3.11+ and pip.

    python3 dev.py run [ARGS...]   # set up .venv, then `mcp-gateway ARGS` (default: serve)
    python3 dev.py test [ARGS...]  # set up .venv with the test tools too, then pytest ARGS
                                   # on one worker per core plus one (-n 0: in one process)
    python3 dev.py lint            # ruff check, ruff format --check, mypy --strict per distribution
    python3 dev.py setup           # only set up what `run` needs

`run` installs the core and every plugin under plugins/ in editable mode and nothing else: that
is a deployment, and it serves exactly those. `test` adds the test extras, the test-support
distributions under testing/ (fakes and recordings, never part of a deployment) and the example
plugins under examples/, installed into .venv/examples-site, which only the test run puts on
PYTHONPATH, so they are never offered to a client. `lint` adds the pinned ruff and mypy of the
core's `lint` extra. Each step is skipped when nothing it depends on changed since last time,
and prints one `dev:` line when it runs; pip's own output is shown only when it fails.
"""

from __future__ import annotations

import hashlib
import os
import re
import shutil
import subprocess
import sys
import tempfile
import tomllib
import venv
from pathlib import Path

ROOT = Path(__file__).resolve().parent
VENV = ROOT / ".venv"
BIN = VENV / ("Scripts" if os.name == "nt" else "bin")
PY = BIN / ("python.exe" if os.name == "nt" else "python")
EXAMPLES_SITE = VENV / "examples-site"
PIP = [str(PY), "-m", "pip", "install", "--disable-pip-version-check", "-q"]
# Editable installs are built with the venv's own setuptools (no isolated build environment
# per package, which costs seconds each). "compat" mode puts each project folder on sys.path
# through a .pth file: static tools such as mypy follow that, not setuptools' import hooks.
BUILD_TOOLS = ["pip>=23.1", "setuptools>=70.1"]
EDITABLE = ["--no-build-isolation", "--config-settings", "editable_mode=compat"]


def runtime() -> list[Path]:
    """The core and the plugins: what a deployment installs."""
    return [ROOT, *sorted(p.parent for p in (ROOT / "plugins").glob("*/pyproject.toml"))]


def support() -> list[Path]:
    """The test-support distributions: fakes and recordings the plugins' tests use."""
    return sorted(p.parent for p in (ROOT / "testing").glob("*/pyproject.toml"))


def examples() -> list[Path]:
    return sorted(p.parent for p in (ROOT / "examples").glob("*/pyproject.toml"))


def project(path: Path) -> dict[str, object]:
    with (path / "pyproject.toml").open("rb") as fh:
        data: dict[str, object] = tomllib.load(fh)["project"]
    return data


def _dist_name(requirement: str) -> str:
    match = re.match(r"[A-Za-z0-9._-]+", requirement.strip())
    return re.sub(r"[-_.]+", "-", match.group() if match else requirement).lower()


def extra_requirements(paths: list[Path], extra: str) -> list[str]:
    """What the ``extra`` of these projects needs, less this repo's own distributions (those
    are installed from their folders, never from an index); an extra naming one of them with
    extras of its own (``mcp-plugin-gateway[otel]``) brings those extras' requirements."""
    local = {_dist_name(str(project(p)["name"])): p for p in [*runtime(), *support(), *examples()]}
    wanted: list[str] = []
    for path in paths:
        extras = project(path).get("optional-dependencies", {})
        assert isinstance(extras, dict)
        for requirement in extras.get(extra, []):
            name = _dist_name(requirement)
            if name in local:
                nested = re.search(r"\[([^\]]*)\]", requirement)
                for sub in nested.group(1).split(",") if nested else []:
                    more = extra_requirements([local[name]], sub.strip())
                    wanted.extend(r for r in more if r not in wanted)
            elif requirement not in wanted:
                wanted.append(requirement)
    return wanted


def fingerprint(paths: list[Path], *extra: str, sources: bool = False) -> str:
    h = hashlib.sha256(sys.version.encode())
    for item in extra:
        h.update(item.encode())
    for pkg in paths:
        files = sorted(f for f in pkg.rglob("*.py") if "build" not in f.relative_to(pkg).parts)
        files = files if sources else []
        for f in [pkg / "pyproject.toml", *files]:
            h.update(str(f.relative_to(ROOT)).encode() + f.read_bytes())
    return h.hexdigest()


def _pip(args: list[str], what: str) -> None:
    print(f"dev: {what}", file=sys.stderr)
    # Captured: setuptools' and pip's chatter is noise unless something went wrong. Nothing
    # may reach stdout anyway: `dev.py run` may be the stdio server a client launches.
    done = subprocess.run([*PIP, *args], stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    if done.returncode != 0:
        sys.stderr.write(done.stdout.decode(errors="replace"))
        raise SystemExit(f"dev: {what} failed (pip exit {done.returncode})")


def _step(name: str, want: str, args: list[str], what: str) -> None:
    stamp = VENV / f".dev-{name}-stamp"
    if stamp.exists() and stamp.read_text() == want:
        return
    _pip(args, what)
    stamp.write_text(want)


def setup_run() -> None:
    if not PY.exists():
        print("dev: creating .venv", file=sys.stderr)
        venv.EnvBuilder(with_pip=True).create(VENV)
    _step(
        "tools",
        fingerprint([], *BUILD_TOOLS),
        ["--upgrade", *BUILD_TOOLS],
        "updating pip and setuptools",
    )
    _step("run", fingerprint(runtime()), run_args(), "installing the core and the plugins")


def run_args() -> list[str]:
    """What `run` installs: the deployment, without any extra."""
    return [*EDITABLE, *(a for pkg in runtime() for a in ("-e", str(pkg)))]


def test_args() -> list[str]:
    """What `test` adds: the test-support distributions and the `test` extras' requirements."""
    return [
        *EDITABLE,
        *(a for pkg in support() for a in ("-e", str(pkg))),
        *extra_requirements([*runtime(), *support()], "test"),
    ]


def setup_test() -> None:
    setup_run()
    args = test_args()
    want = fingerprint([*runtime(), *support()], *args)
    _step("test", want, args, "installing the test tools and test-support distributions")
    # A copy (not editable) in a folder of its own: re-installed whenever a source changes.
    want = fingerprint(examples(), sources=True)
    stamp = VENV / ".dev-examples-stamp"
    if not (stamp.exists() and stamp.read_text() == want):
        # pip builds in the source folder: a stale build/ would ship deleted modules again.
        for path in [EXAMPLES_SITE, *(e / "build" for e in examples())]:
            shutil.rmtree(path, ignore_errors=True)
    args = ["--no-deps", "--target", str(EXAMPLES_SITE), *map(str, examples())]
    _step("examples", want, args, "installing the example plugins for the tests")


def setup_lint() -> None:
    setup_test()
    tools = extra_requirements([ROOT], "lint")
    _step("lint", fingerprint([ROOT], *tools), tools, "installing ruff and mypy")


def _packages(path: Path) -> list[str]:
    """The import packages a project ships (its ``packages.find`` includes, less globs)."""
    with (path / "pyproject.toml").open("rb") as fh:
        find = tomllib.load(fh)["tool"]["setuptools"]["packages"]["find"]
    return [p for p in find["include"] if "*" not in p]


def lint() -> int:
    failed = []
    for cmd in (["ruff", "check", "."], ["ruff", "format", "--check", "."]):
        print(f"dev: {' '.join(cmd)}", file=sys.stderr)
        if subprocess.call([str(BIN / cmd[0]), *cmd[1:]], cwd=ROOT) != 0:
            failed.append(" ".join(cmd))
    mypy = [
        str(BIN / "mypy"),
        "--strict",
        "--config-file",
        str(ROOT / "pyproject.toml"),
        "--cache-dir",
        str(ROOT / ".mypy_cache"),
    ]
    # Each distribution on its own, from its own folder: a plugin sees the core (and any
    # plugin it depends on) as an installed, typed package, as a third-party plugin would.
    for path in [*runtime(), *support(), *examples()]:
        name = path.relative_to(ROOT).as_posix() if path != ROOT else "core"
        targets = [a for p in _packages(path) for a in ("-p", p)]
        print(f"dev: mypy --strict {name}", file=sys.stderr)
        done = subprocess.run([*mypy, *targets], cwd=path, capture_output=True, text=True)
        if done.returncode == 0:
            continue
        sys.stderr.write(done.stdout + done.stderr)
        failed.append(f"mypy {name}")
    if failed:
        print(f"dev: lint failed: {', '.join(failed)}", file=sys.stderr)
        return 1
    print("dev: lint passed", file=sys.stderr)
    return 0


def parallel(args: list[str]) -> list[str]:
    """pytest-xdist options: one worker per core plus one, each test module on one worker;
    none when the arguments choose for themselves (``-n 0`` runs in this one process).

    A module on one worker starts its module-scoped fixtures (gateways, Claude Code sessions,
    fake backends) once; spread test by test, each worker that got one of its tests started
    them again. On 2 cores, alternated in one sitting: by module 148-163 s, test by test
    176-189 s. A quarter of a worker's time goes to waiting on the clocks tests are about
    (timeouts, breakers, stop signals): the extra worker uses the cores meanwhile (by module,
    4 workers ran in 148-157 s, 3 in 148-160 s)."""
    chosen = any(
        a.startswith(("-n", "--numprocesses", "--dist")) or a.endswith("no:xdist") for a in args
    )
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    return [] if chosen else ["--numprocesses", str((cores or 1) + 1), "--dist", "loadscope"]


def _call(args: list[str], **kwargs: object) -> int:
    """Run a command to its end. Ctrl-C reaches it too (same process group); it decides how
    to stop (pytest prints its summary), and its exit code is ours."""
    proc = subprocess.Popen(args, **kwargs)  # type: ignore[call-overload]
    while True:
        try:
            return int(proc.wait())
        except KeyboardInterrupt:
            continue


def main(argv: list[str]) -> int:
    cmd, rest = (argv[0], argv[1:]) if argv else ("run", [])
    if cmd not in {"run", "test", "lint", "setup"}:
        print(__doc__, file=sys.stderr)
        return 2
    if cmd == "test":
        setup_test()
        env = dict(os.environ)
        # The suite starts a few hundred interpreters (gateways, CLIs, plugin processes): let
        # them keep compiled modules, as Python does by default, instead of compiling the
        # gateway and its plugins again in each one (__pycache__ is ignored by git).
        env.pop("PYTHONDONTWRITEBYTECODE", None)
        env["PYTHONPATH"] = os.pathsep.join(
            p for p in (str(EXAMPLES_SITE), env.get("PYTHONPATH", "")) if p
        )
        # Gateways without an audit_log write to the user's state directory, and keep schemas
        # in the user's cache: the tests' own (subprocesses too) use throw-away ones.
        with (
            tempfile.TemporaryDirectory(prefix="mcp-gateway-test-state-") as state,
            tempfile.TemporaryDirectory(prefix="mcp-gateway-test-cache-") as cache,
        ):
            env["XDG_STATE_HOME"] = state
            # ... but the npm packages some tests install stay in the user's cache between runs.
            env.setdefault(
                "TEST_NPM_CACHE", os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
            )
            env["XDG_CACHE_HOME"] = cache
            return _call([str(PY), "-m", "pytest", *parallel(rest), *rest], cwd=ROOT, env=env)
    if cmd == "lint":
        setup_lint()
        return lint()
    setup_run()
    if cmd == "setup":
        return 0
    exe = BIN / ("mcp-gateway.exe" if os.name == "nt" else "mcp-gateway")
    argv_out = [str(exe), *(rest or ["serve"])]
    if os.name == "nt":
        return _call(argv_out)
    # The server takes this process's place: Ctrl-C and a client's signals reach it directly,
    # and no Python frame of ours is left to print a traceback.
    os.execv(argv_out[0], argv_out)


if __name__ == "__main__":
    try:
        raise SystemExit(main(sys.argv[1:]))
    except KeyboardInterrupt:
        # Ctrl-C during set-up or tests: the child had it too; a traceback would say nothing.
        print("dev: interrupted", file=sys.stderr)
        raise SystemExit(130) from None
