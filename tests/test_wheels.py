"""Wheels are the product: every distribution builds a wheel that, installed non-editable into a
fresh venv with its declared dependencies only, serves what it should.

Third-party dependencies come from whatever package index pip is configured with; this
repository's own distributions come only from the wheels built here.
"""

from __future__ import annotations

import json
import os
import re
import shlex
import shutil
import subprocess
import sys
import venv
import zipfile
from pathlib import Path

import pytest
from npm_cache import USER_CACHE

REPO = Path(__file__).resolve().parent.parent
GITEA_TOOLS = {
    "list_job_commits",
    "get_job_diff",
    "get_job_file",
    "list_job_files",
    "list_job_tags",
}
QUEUE_TOOLS = {"bulk_read_new_jobs", "bulk_update_job_status"}
SOURCES_IGNORED = shutil.ignore_patterns(
    "build", "dist", "*.egg-info", "__pycache__", ".mypy_cache", ".pytest_cache", "tests"
)


def _projects() -> list[Path]:
    return [
        REPO,
        *(
            p.parent
            for d in ("plugins", "testing", "examples")
            for p in REPO.glob(f"{d}/*/pyproject.toml")
        ),
    ]


def _copy_sources(dest: Path) -> list[Path]:
    """A clean copy of each project: a stale build/ folder in the tree would end up in a wheel."""
    copies = []
    for project in _projects():
        target = dest / ("core" if project == REPO else project.relative_to(REPO).as_posix())
        if project == REPO:
            target.mkdir(parents=True)
            for name in ("pyproject.toml", "README.md"):
                shutil.copy2(REPO / name, target / name)
            shutil.copytree(REPO / "gateway", target / "gateway", ignore=SOURCES_IGNORED)
        else:
            shutil.copytree(project, target, ignore=SOURCES_IGNORED)
        copies.append(target)
    return copies


def _pip(*args: str) -> None:
    done = subprocess.run(
        [sys.executable, "-m", "pip", "--disable-pip-version-check", "-q", *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        timeout=900,
    )
    assert done.returncode == 0, done.stdout


# Each project's declared build backend, asked for a wheel as pip asks it (PEP 517's build_wheel
# hook), all in one interpreter: pip starts two for each project (metadata, then the wheel), and
# the backend's import is most of a small project's build. The wheels are byte for byte pip's.
BUILD = """
import importlib, os, sys, tomllib
out = sys.argv[1]
for source in sys.argv[2:]:
    with open(os.path.join(source, "pyproject.toml"), "rb") as fh:
        backend = tomllib.load(fh)["build-system"]["build-backend"]
    os.chdir(source)
    importlib.import_module(backend).build_wheel(out)
"""


@pytest.fixture(scope="session")
def wheels(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """Every distribution's wheel, built once per session: distribution name → wheel file."""
    work = tmp_path_factory.mktemp("wheels")
    out = work / "dist"
    out.mkdir()
    # The test venv's setuptools builds them (no isolated build environment to download).
    done = subprocess.run(
        [sys.executable, "-c", BUILD, str(out), *map(str, _copy_sources(work / "src"))],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        timeout=900,
    )
    assert done.returncode == 0, done.stdout[-4000:]
    built = {}
    for wheel in out.glob("*.whl"):
        with zipfile.ZipFile(wheel) as zf:
            meta = next(n for n in zf.namelist() if n.endswith(".dist-info/METADATA"))
            name = next(
                line.split(":", 1)[1].strip()
                for line in zf.read(meta).decode().splitlines()
                if line.startswith("Name:")
            )
        built[name] = wheel
    return built


@pytest.fixture(scope="session")
def deployment(wheels: dict[str, Path], tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A fresh venv (no pip of its own: this interpreter's pip installs into it)."""
    home = tmp_path_factory.mktemp("deployment")
    venv.EnvBuilder(with_pip=False).create(home / "venv")
    return home


def _python(home: Path) -> Path:
    return home / "venv" / ("Scripts/python.exe" if os.name == "nt" else "bin/python")


def _install(home: Path, *wheels: Path) -> None:
    # Not byte-compiled at install: that compiles every module of every dependency, most of
    # which no command imports; the deployment's commands compile what they import, once.
    _pip("--python", str(_python(home)), "install", "--no-compile", *map(str, wheels))


def _run(home: Path, *args: str) -> subprocess.CompletedProcess[str]:
    exe = _python(home).parent / "mcp-gateway"
    # Nothing of this repository or this test run: no PYTHONPATH, a folder outside the repo.
    env = {
        k: v
        for k, v in os.environ.items()
        if k not in ("PYTHONPATH", "PYTHONDONTWRITEBYTECODE")
        and not k.startswith(("MCP_GATEWAY_", "VIRTUAL_ENV"))
    }
    env["GITEA_URL"] = "http://127.0.0.1:9"  # configured, so its tools are offered (no I/O)
    return subprocess.run(
        [str(exe), *args], cwd=home, env=env, capture_output=True, text=True, timeout=120
    )


def _tools(home: Path) -> set[str]:
    out = _run(home, "tools", "--json")
    assert out.returncode == 0, out.stderr
    return {t["name"] for t in json.loads(out.stdout)}


def test_every_distribution_builds_a_wheel(wheels):
    names = {
        "mcp-plugin-gateway",
        *(
            str(__import__("tomllib").loads((p / "pyproject.toml").read_text())["project"]["name"])
            for p in _projects()[1:]
        ),
    }
    assert set(wheels) == names


def test_runtime_wheels_carry_no_test_support_and_the_test_support_wheels_do(wheels):
    def files(dist: str) -> list[str]:
        with zipfile.ZipFile(wheels[dist]) as zf:
            return [n for n in zf.namelist() if ".dist-info/" not in n]

    core = files("mcp-plugin-gateway")
    assert "gateway/py.typed" in core and "gateway/rest/client.py" in core
    assert "gateway/testing/__init__.py" in core  # the kit for third-party plugin authors
    for dist in ("mcp-plugin-gateway-orchestrator", "mcp-plugin-gateway-gitea"):
        shipped = files(dist)
        assert not [n for n in shipped if "testing" in n or n.endswith(".json")], shipped
        assert any(n.endswith("/plugin.py") for n in shipped)
    fake = files("mcp-plugin-gateway-orchestrator-testing")
    recordings = [n for n in fake if n.startswith("gateway_orchestrator_testing/recordings/")]
    assert len(recordings) == 207 and "gateway_orchestrator_testing/fake.py" in fake
    assert "gateway_orchestrator_testing/recordings_index.json" in fake
    assert "gateway_gitea_testing/fake.py" in files("mcp-plugin-gateway-gitea-testing")


def test_a_fresh_venv_from_the_wheels_serves_the_chosen_plugins(wheels, deployment):
    _install(deployment, wheels["mcp-plugin-gateway"], wheels["mcp-plugin-gateway-gitea"])
    assert _tools(deployment) == {"gateway_status", *GITEA_TOOLS}
    rest = subprocess.run(
        [
            str(_python(deployment)),
            "-I",
            "-c",
            "import gateway.rest, gateway; print(gateway.__file__)",
        ],
        cwd=deployment,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert rest.returncode == 0, rest.stderr
    assert "site-packages" in rest.stdout and str(REPO) not in rest.stdout  # the wheel's copy
    version = _run(deployment, "--version")
    core, gitea = (
        wheels[d].name.split("-")[1] for d in ("mcp-plugin-gateway", "mcp-plugin-gateway-gitea")
    )
    assert version.returncode == 0 and version.stdout.splitlines() == [
        f"mcp-plugin-gateway {core}",
        f"plugin gitea: mcp-plugin-gateway-gitea {gitea}",
    ]

    # A second plugin added to the same deployment: the union, each loaded.
    _install(deployment, wheels["mcp-plugin-gateway-queue"])
    assert _tools(deployment) == {"gateway_status", *GITEA_TOOLS, *QUEUE_TOOLS}
    plugins = json.loads(_run(deployment, "plugins", "--json").stdout)
    assert {p["name"]: p["state"] for p in plugins} == {
        "gateway": "loaded",
        "gitea": "loaded",
        "queue": "loaded",
    }


def _tutorial_commands() -> list[str]:
    """The shell commands of the tutorial's "Install and run" block, comments cut off."""
    doc = (REPO / "docs" / "plugins" / "tutorial.md").read_text()
    section = doc.split("## 6. Install and run", 1)[1]
    block = re.search(r"```bash\n(.*?)\n```", section, re.S)
    assert block is not None, "the tutorial's install block"
    return [line.split("  #", 1)[0].strip() for line in block.group(1).splitlines() if line.strip()]


def test_a_plugin_author_follows_the_tutorial_in_a_fresh_venv_outside_the_repository(
    wheels, tmp_path
):
    # What a third-party author has: the core's wheel (built from a checkout), their plugin
    # (the example, copied with its tests) and the tutorial. Nothing of this repository is on
    # the path; the core is not on the package index.
    author = tmp_path / "author"
    plugin = author / "my-notes"
    shutil.copytree(
        REPO / "examples" / "notes",
        plugin,
        ignore=shutil.ignore_patterns("build", "dist", "*.egg-info", "__pycache__", ".*_cache"),
    )
    env = {
        k: v
        for k, v in os.environ.items()
        if k not in ("PYTHONPATH", "PYTHONDONTWRITEBYTECODE")
        and not k.startswith(("MCP_GATEWAY_", "VIRTUAL_ENV", "PIP_"))
    }
    env["PIP_DISABLE_PIP_VERSION_CHECK"] = "1"
    env["PIP_CACHE_DIR"] = str(USER_CACHE / "pip")  # pip's own cache, as the author's pip has
    substitutions = {
        "path/to/mcp_plugin_gateway-<version>-py3-none-any.whl": str(wheels["mcp-plugin-gateway"]),
        "path/to/your-plugin": str(plugin),
    }
    outputs = []
    for command in _tutorial_commands():
        argv = shlex.split(command)
        argv = [substitutions.get(a, a) for a in argv]
        if argv[0] == "python3":
            argv[0] = sys.executable
        done = subprocess.run(
            argv, cwd=author, env=env, capture_output=True, text=True, timeout=900
        )
        assert done.returncode == 0, f"{command}\n{done.stdout[-3000:]}\n{done.stderr[-3000:]}"
        outputs.append((command, done.stdout))
    said = dict(outputs)
    assert re.search(r"^notes\b.*\bloaded\b", said[".venv/bin/mcp-gateway plugins"], re.M)
    assert {"notes_add", "notes_search", "notes_delete"} <= set(
        said[".venv/bin/mcp-gateway tools"].split()
    )
    assert json.loads(said[next(c for c in said if " call " in c)])["text"] == "hello"
    assert re.search(r"\b\d+ passed\b", said[".venv/bin/python -m pytest path/to/your-plugin"])
    # The core from the wheel (site-packages), the plugin from the author's own folder.
    where = subprocess.run(
        [
            str(author / ".venv" / "bin" / "python"),
            "-c",
            "import gateway, gateway_notes; print(gateway.__file__); print(gateway_notes.__file__)",
        ],
        cwd=author,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    ).stdout.split()
    assert "site-packages" in where[0] and str(REPO) not in where[0]
    assert where[1].startswith(str(plugin))
