#!/usr/bin/env python3
"""Build the gateway's container image: first a wheelhouse, then the Containerfile.

    python3 deploy/build_image.py [--plugins queue,gitea] [--base IMAGE] [--tag NAME]
                                  [--engine "podman ..."] [--wheelhouse-only] [-- BUILD-OPTIONS]

The wheelhouse (``build/wheelhouse``) holds wheels of the core, the chosen plugins (with the
plugins of this repository they depend on) and every third-party dependency: pip builds and
downloads them here, where the package index is reachable. The Containerfile then installs
from it with ``--no-index``, so nothing inside the build reaches the network (a fresh base
need not trust this machine's certificate authorities). The wheels are for the Python that
runs this script: the base must have the same minor version (``python:3.11-slim`` for 3.11),
which the build checks first.

``--plugins`` names folders under ``plugins/`` (default: all of them); the image installs
exactly those. ``--engine`` is the container command with its global options (default
``podman``, else ``docker``); options after ``--`` go to its ``build`` (``--network=host``).
Prints the image's name and size.
"""

from __future__ import annotations

import argparse
import difflib
import os
import re
import shlex
import shutil
import subprocess
import sys
import tempfile
import tomllib
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


def build_wheelhouse(plugins: list[str], python: str = sys.executable) -> Path:
    if WHEELHOUSE.exists():
        shutil.rmtree(WHEELHOUSE)  # only what this image installs, never a stale version
    WHEELHOUSE.mkdir(parents=True)
    with tempfile.TemporaryDirectory(prefix="mcp-gateway-wheels-") as work:
        sources = [str(_copy(f, Path(work))) for f in closure(plugins)]
        print(f"build_image: pip wheel of {len(sources)} projects and their dependencies")
        done = subprocess.run(
            [
                python,
                "-m",
                "pip",
                "wheel",
                "--disable-pip-version-check",
                "-q",
                "--wheel-dir",
                str(WHEELHOUSE),
                *sources,
            ],
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
        )
    if done.returncode != 0:
        sys.stderr.write(done.stdout)
        raise SystemExit(f"build_image: pip wheel failed (exit {done.returncode})")
    version = subprocess.run(
        [python, "-c", "import sys; print('%d.%d' % sys.version_info[:2])"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.strip()
    # The Containerfile compares it with the base's Python before installing anything.
    (WHEELHOUSE / "PYTHON").write_text(version + "\n")
    return WHEELHOUSE


def build_image(
    engine: list[str], plugins: list[str], tag: str, base: str | None, extra: list[str]
) -> int:
    cmd = [*engine, "build", "-f", str(ROOT / "Containerfile"), "-t", tag]
    if Path(engine[0]).name == "podman":
        # OCI images have no HEALTHCHECK: podman keeps it only in Docker's format.
        cmd += ["--format", "docker"]
    cmd += ["--build-arg", f"PLUGINS={' '.join(plugins)}"]
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
    parser.add_argument("--base", help="the base image (default: the Containerfile's BASE)")
    parser.add_argument("--tag", default="mcp-gateway:latest", help="the image's name")
    parser.add_argument(
        "--engine",
        default=os.environ.get("CONTAINER_ENGINE") or default_engine(),
        help="the container command and its global options (default: $CONTAINER_ENGINE, else "
        "podman, else docker)",
    )
    parser.add_argument(
        "--wheelhouse-only", action="store_true", help="build the wheelhouse, not the image"
    )
    args = parser.parse_args(own)
    try:
        plugins = chosen([p.strip() for p in re.split(r"[,\s]+", args.plugins) if p.strip()])
    except UsageError as exc:
        print(f"build_image: {exc}", file=sys.stderr)
        return 2
    build_wheelhouse(plugins)
    if args.wheelhouse_only:
        print(f"build_image: wheelhouse in {WHEELHOUSE.relative_to(ROOT)}")
        return 0
    return build_image(shlex.split(args.engine), plugins, args.tag, args.base, extra)


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
