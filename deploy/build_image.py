#!/usr/bin/env python3
"""Build the gateway's container image: first a wheelhouse, then the Containerfile.

    python3 deploy/build_image.py [--plugins queue,gitea] [--extras postgres,redis]
        [--base IMAGE] [--tag NAME] [--engine "podman ..."] [--python-version X.Y.Z] [--wheelhouse-only] [-- BUILD-OPTIONS]

The wheelhouse (``build/wheelhouse``) holds wheels of the core, the chosen plugins (with the
plugins of this repository they depend on) and every third-party dependency: pip builds and
downloads them here, where the package index is reachable. The Containerfile then installs
from it with ``--no-index``, so nothing inside the build reaches the network (a fresh base
need not trust this machine's certificate authorities). The dependencies are chosen for the
base's Python, which the script asks of the base image (``--python-version`` says it instead),
and for this machine's platform: build on the base's architecture, with a C library no newer
than the base's.

``--plugins`` names folders under ``plugins/`` (default: all of them); the image installs
exactly those. ``--extras`` names optional parts of the core to install with it: ``postgres``
(the audit table), ``redis`` (limits shared by replicas), ``otel`` (telemetry). ``--engine`` is the container command with its global options (default
``$CONTAINER_ENGINE``, else ``podman``, else ``docker``); options after ``--`` go to its
``build`` (e.g. ``--network=none``). Prints the image's name and size.
"""

from __future__ import annotations

import argparse
import difflib
import os
import platform
import re
import shlex
import shutil
import subprocess
import sys
import tempfile
import tomllib
from collections.abc import Sequence
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
WHEELHOUSE = ROOT / "build" / "wheelhouse"
CORE = "mcp-plugin-gateway"
#: What a wheel must not carry, and what a stale copy of could slip into one: setuptools
#: builds in the source folder, and a build/ left there ships modules deleted since.
IGNORED = shutil.ignore_patterns(
    "build", "dist", "*.egg-info", "__pycache__", ".mypy_cache", ".pytest_cache", "tests"
)


class UsageError(Exception):
    pass


def _name(requirement: str) -> str:
    match = re.match(r"[A-Za-z0-9._-]+", requirement.strip())
    return re.sub(r"[-_.]+", "-", match.group() if match else requirement).lower()


def _project(path: Path) -> dict[str, object]:
    with (path / "pyproject.toml").open("rb") as fh:
        data: dict[str, object] = tomllib.load(fh)["project"]
    return data


def available() -> dict[str, Path]:
    """Plugin name (its folder under plugins/) → folder."""
    return {p.parent.name: p.parent for p in sorted((ROOT / "plugins").glob("*/pyproject.toml"))}


def chosen(names: list[str]) -> list[str]:
    known = available()
    for name in names:
        if name not in known:
            close = difflib.get_close_matches(name, known, n=1)
            hint = f"; did you mean {close[0]}?" if close else ""
            raise UsageError(
                f"--plugins: unknown plugin {name!r} (known: {', '.join(known)}){hint}"
            )
    return list(dict.fromkeys(names))


def closure(plugins: list[str]) -> list[Path]:
    """The core and the folders of ``plugins`` plus the plugins of this repository they
    depend on: pip must find those here, never a distribution of the same name on an index."""
    folders = {_name(str(_project(p)["name"])): p for p in available().values()}
    wanted = [ROOT]
    todo = [available()[p] for p in plugins]
    while todo:
        folder = todo.pop()
        if folder in wanted:
            continue
        wanted.append(folder)
        for requirement in _project(folder).get("dependencies", []) or []:  # type: ignore[union-attr]
            local = folders.get(_name(str(requirement)))
            if local is not None:
                todo.append(local)
    return wanted


def _copy(folder: Path, dest: Path) -> Path:
    """A clean copy of a project (no build/, tests or caches) to build its wheel from."""
    if folder == ROOT:
        target = dest / "core"
        target.mkdir(parents=True)
        for name in ("pyproject.toml", "README.md"):
            shutil.copy2(ROOT / name, target / name)
        shutil.copytree(ROOT / "gateway", target / "gateway", ignore=IGNORED)
        return target
    target = dest / folder.relative_to(ROOT)
    shutil.copytree(folder, target, ignore=IGNORED)
    return target


#: The core's extras an image may install (pyproject.toml's optional dependencies).
EXTRAS = ("otel", "postgres", "redis")


def build_wheelhouse(plugins: list[str], python_version: str, extras: Sequence[str] = ()) -> Path:
    """Our wheels, built here, and every dependency's for Python ``python_version`` (the
    base's: a dependency may need a later patch release than the base has)."""
    if WHEELHOUSE.exists():
        shutil.rmtree(WHEELHOUSE)  # only what this image installs, never a stale version
    WHEELHOUSE.mkdir(parents=True)
    pip = [sys.executable, "-m", "pip", "--disable-pip-version-check", "-q"]
    with tempfile.TemporaryDirectory(prefix="mcp-gateway-wheels-") as work:
        sources = [str(_copy(f, Path(work))) for f in closure(plugins)]
        print(f"build_image: wheels of {len(sources)} projects, dependencies for {python_version}")
        _run([*pip, "wheel", "--no-deps", "--wheel-dir", str(WHEELHOUSE), *sources], "pip wheel")
    ours = sorted(str(w) for w in WHEELHOUSE.glob("*.whl"))
    if extras:  # the core's wheel with its extras: their dependencies are downloaded too
        ours = [
            f"{w}[{','.join(extras)}]" if Path(w).name.startswith("mcp_plugin_gateway-") else w
            for w in ours
        ]
    # Our wheels by file: pip takes these and never a distribution of the same name from an
    # index. Binary wheels only: pip can choose them for another Python than its own.
    download = [*pip, "download", "--dest", str(WHEELHOUSE), "--only-binary=:all:"]
    abi = "cp" + "".join(python_version.split(".")[:2])  # CPython's, for wheels with a C part
    target = ["--python-version", python_version, "--implementation", "cp", "--abi", abi]
    _run([*download, *target, *ours], "pip download")
    # The Containerfile compares it with the base's Python before installing anything.
    (WHEELHOUSE / "PYTHON").write_text(".".join(python_version.split(".")[:2]) + "\n")
    return WHEELHOUSE


def _run(cmd: list[str], what: str) -> None:
    done = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    if done.returncode != 0:
        sys.stderr.write(done.stdout)
        raise SystemExit(f"build_image: {what} failed (exit {done.returncode})")


def base_python(engine: list[str], base: str | None) -> str:
    """The Python version of the base image, asked of the image itself."""
    cmd = [*engine, "run", "--rm", "--network=none", "--entrypoint", "python3"]
    script = "import platform; print(platform.python_version())"
    done = subprocess.run(
        [*cmd, base or default_base(), "-c", script], capture_output=True, text=True
    )
    version = done.stdout.strip()
    if done.returncode != 0 or not re.fullmatch(r"3\.\d+\.\d+", version):
        why = (done.stderr.strip().splitlines() or ["no version printed"])[-1]
        raise UsageError(
            f"--python-version: could not ask the base image for its Python ({why}); "
            "give the base's version, e.g. --python-version 3.11.2"
        )
    return version


def default_base() -> str:
    text = (ROOT / "Containerfile").read_text()
    match = re.search(r"^ARG BASE=(\S+)", text, re.M)
    assert match, "Containerfile: no ARG BASE=..."
    return match.group(1)


def build_image(
    engine: list[str],
    plugins: list[str],
    tag: str,
    base: str | None,
    extra: list[str],
    extras: Sequence[str] = (),
) -> int:
    cmd = [*engine, "build", "-f", str(ROOT / "Containerfile"), "-t", tag]
    if Path(engine[0]).name == "podman":
        # OCI images have no HEALTHCHECK: podman keeps it only in Docker's format.
        cmd += ["--format", "docker"]
    cmd += ["--build-arg", f"PLUGINS={' '.join(plugins)}"]
    if extras:
        cmd += ["--build-arg", f"EXTRAS={','.join(extras)}"]
    if base:
        cmd += ["--build-arg", f"BASE={base}"]
    print("build_image: " + shlex.join(cmd + extra + [str(ROOT)]))
    done = subprocess.run([*cmd, *extra, str(ROOT)])
    if done.returncode != 0:
        return done.returncode
    size = subprocess.run(
        [*engine, "image", "inspect", "--format", "{{.Size}}", tag],
        capture_output=True,
        text=True,
    )
    shown = f"{int(size.stdout) / 1e6:.0f} MB" if size.stdout.strip().isdigit() else "size unknown"
    print(f"build_image: built {tag} ({shown})")
    return 0


def default_engine() -> str:
    return "podman" if shutil.which("podman") or not shutil.which("docker") else "docker"


def main(argv: list[str]) -> int:
    own, extra = (
        (argv[: argv.index("--")], argv[argv.index("--") + 1 :]) if "--" in argv else (argv, [])
    )
    parser = argparse.ArgumentParser(
        prog="build_image.py", description=__doc__.split("\n\n")[0] if __doc__ else None
    )
    parser.add_argument(
        "--plugins",
        default=",".join(available()),
        help="comma-separated folders under plugins/ (default: all)",
    )
    parser.add_argument(
        "--extras",
        default="",
        help=f"comma-separated extras of the core to install ({', '.join(EXTRAS)}; default none)",
    )
    parser.add_argument("--base", help="the base image (default: the Containerfile's BASE)")
    parser.add_argument("--tag", default="mcp-gateway:latest", help="the image's name")
    parser.add_argument(
        "--engine",
        default=os.environ.get("CONTAINER_ENGINE") or default_engine(),
        help="the container command and its global options (default: $CONTAINER_ENGINE, else "
        "podman, else docker)",
    )
    parser.add_argument(
        "--python-version",
        help="the base's Python, for which the dependencies are chosen (default: asked of the "
        "base image; with --wheelhouse-only, this Python's)",
    )
    parser.add_argument(
        "--wheelhouse-only", action="store_true", help="build the wheelhouse, not the image"
    )
    args = parser.parse_args(own)
    engine = shlex.split(args.engine)
    try:
        plugins = chosen([p.strip() for p in re.split(r"[,\s]+", args.plugins) if p.strip()])
        extras = [e.strip() for e in re.split(r"[,\s]+", args.extras) if e.strip()]
        for name in extras:
            if name not in EXTRAS:
                hint = difflib.get_close_matches(name, EXTRAS, n=1)
                raise UsageError(
                    f"--extras: unknown extra {name!r} (known: {', '.join(EXTRAS)})"
                    + (f"; did you mean {hint[0]}?" if hint else "")
                )
        version = args.python_version
        if version is None:
            version = (
                platform.python_version()
                if args.wheelhouse_only
                else base_python(engine, args.base)
            )
        elif not re.fullmatch(r"3\.\d+(\.\d+)?", version):
            raise UsageError(f"--python-version: {version!r} is not a version such as 3.11.2")
    except UsageError as exc:
        print(f"build_image: {exc}", file=sys.stderr)
        return 2
    build_wheelhouse(plugins, version, extras)
    if args.wheelhouse_only:
        print(f"build_image: wheelhouse in {WHEELHOUSE.relative_to(ROOT)}")
        return 0
    return build_image(engine, plugins, args.tag, args.base, extra, extras)


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
