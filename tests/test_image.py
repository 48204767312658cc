"""The container image: deploy/build_image.py builds the wheelhouse and the Containerfile on a
copy of this tree, then the image runs with a token and a mounted TOML file and serves the
official MCP client over Streamable HTTP.

Needs podman with runc (Debian's), and for the base image debootstrap and root: no registry of
images is reachable, so the base is a Debian bookworm with Python 3.11
(``debootstrap --variant=minbase --include=python3,python3-venv bookworm``, about a minute),
imported into podman's store and kept there for a week, as npm_cache.py keeps npm packages.
The image is built with ``--network=none``: it installs from its wheelhouse only.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import shlex
import shutil
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import httpx
import httpx2
import pytest
from mcp import Client
from mcp.client.streamable_http import streamable_http_client
from npm_cache import USER_CACHE, cache_dir
from wire import free_port

pytestmark = pytest.mark.e2e

REPO = Path(__file__).resolve().parent.parent
TOKEN = "image-test-token-7c41d2e9"
#: Facts of this kind of machine: Debian's podman with runc, the cgroups managed by podman
#: itself (no systemd), and no default ulimits: runc may not raise RLIMIT_NOFILE here, which
#: the default configuration asks of every container (``error setting rlimit type 7``).
ENGINE = ["podman", "--runtime", "runc", "--cgroup-manager=cgroupfs"]
CONTAINERS_CONF = "[containers]\ndefault_ulimits = []\n"
BASE_TAG = "localhost/mcp-gateway-test-base:bookworm"
DEBOOTSTRAP = ["--variant=minbase", "--include=python3,python3-venv", "bookworm"]
REFRESH_SECONDS = 7 * 24 * 3600
PLUGINS = "queue"
PLUGIN_FOLDERS = sorted(p.parent.name for p in REPO.glob("plugins/*/pyproject.toml"))
#: The mounted configuration: without its allowed_hosts the gateway would not start on 0.0.0.0.
CONFIG = """\
[gateway]
server_name = "image-test"
allowed_hosts = ["127.0.0.1:*"]
"""


def _env() -> dict[str, str]:
    folder = cache_dir("podman")
    folder.mkdir(parents=True, exist_ok=True)
    conf = folder / "containers.conf"
    if not conf.exists() or conf.read_text() != CONTAINERS_CONF:
        conf.write_text(CONTAINERS_CONF)
    env = {k: v for k, v in os.environ.items() if not k.startswith("MCP_GATEWAY_")}
    env["CONTAINERS_CONF"] = str(conf)
    # The wheelhouse's downloads come from the user's pip cache, not the run's throw-away one.
    env["PIP_CACHE_DIR"] = str(USER_CACHE / "pip")
    return env


def podman(
    *args: str, check: bool = True, timeout: float = 120
) -> subprocess.CompletedProcess[str]:
    done = subprocess.run(
        [*ENGINE, *args], env=_env(), capture_output=True, text=True, timeout=timeout
    )
    if check:
        assert done.returncode == 0, f"podman {shlex.join(args)}: {done.stderr[-3000:]}"
    return done


@pytest.fixture(scope="module")
def engine() -> None:
    missing = [tool for tool in ("podman", "runc") if shutil.which(tool) is None]
    if missing:
        pytest.skip(f"{' and '.join(missing)} needed for the image test (not on PATH)")


def _fresh(stamp: Path) -> bool:
    return (
        stamp.exists()
        and stamp.read_text() == shlex.join(DEBOOTSTRAP)
        and time.time() - stamp.stat().st_mtime < REFRESH_SECONDS
        and podman("image", "exists", BASE_TAG, check=False).returncode == 0
    )


def _build_base(folder: Path, stamp: Path) -> None:
    """Debian bookworm with Python 3.11, as an image: debootstrap, then ``podman import``."""
    have = podman("image", "exists", BASE_TAG, check=False).returncode == 0
    if shutil.which("debootstrap") is None or os.geteuid() != 0:
        if have:
            return  # the copy from an earlier run serves
        pytest.skip("no base image cached, and building one needs debootstrap, run as root")
    old = podman("image", "inspect", "--format", "{{.Id}}", BASE_TAG, check=False).stdout.strip()
    root = Path(tempfile.mkdtemp(prefix="rootfs-", dir=folder))
    try:
        done = subprocess.run(
            ["debootstrap", *DEBOOTSTRAP, str(root)], capture_output=True, text=True, timeout=900
        )
        if done.returncode != 0:
            if have:  # offline: the copy from an earlier run is still the one under test
                sys.stderr.write(f"debootstrap failed; using the cached base\n{done.stdout[-500:]}")
                return
            raise AssertionError(f"debootstrap failed:\n{done.stdout[-3000:]}")
        # The package cache and lists debootstrap leaves: 90 MB no image needs.
        for leftover in ("var/cache/apt/archives", "var/lib/apt/lists"):
            for item in (root / leftover).glob("*"):
                if item.is_file():
                    item.unlink()
        tar = subprocess.Popen(["tar", "-C", str(root), "-c", "."], stdout=subprocess.PIPE)
        imported = subprocess.run(
            [*ENGINE, "import", "-", BASE_TAG],
            stdin=tar.stdout,
            env=_env(),
            capture_output=True,
            text=True,
            timeout=600,
        )
        assert tar.stdout is not None
        tar.stdout.close()
        assert tar.wait() == 0 and imported.returncode == 0, imported.stderr[-3000:]
    finally:
        shutil.rmtree(root, ignore_errors=True)
    stamp.write_text(shlex.join(DEBOOTSTRAP))
    if old:
        podman("rmi", old, check=False)  # the replaced base, unless a container still uses it


@pytest.fixture(scope="module")
def base(engine: None) -> Iterator[str]:
    """The base image, built when missing or a week old: one build at a time, and none while
    another run still uses it (the lock is held shared until this module ends)."""
    folder = cache_dir("podman-base")
    folder.mkdir(parents=True, exist_ok=True)
    stamp = folder / ".built"
    with open(folder / ".lock", "w") as fh:
        fcntl.flock(fh, fcntl.LOCK_SH)
        if not _fresh(stamp):
            fcntl.flock(fh, fcntl.LOCK_EX)
            if not _fresh(stamp):
                _build_base(folder, stamp)
            fcntl.flock(fh, fcntl.LOCK_SH)
        yield BASE_TAG


def _tree(dest: Path) -> Path:
    """What a checkout holds for the image: the build script runs on this copy, so its
    build/wheelhouse is the test's own."""
    ignored = shutil.ignore_patterns(
        "build", "dist", "*.egg-info", "__pycache__", ".mypy_cache", ".pytest_cache", "tests"
    )
    for name in ("pyproject.toml", "README.md", "Containerfile", ".dockerignore"):
        shutil.copy2(REPO / name, dest / name)
    for folder in ("gateway", "plugins", "deploy"):
        shutil.copytree(REPO / folder, dest / folder, ignore=ignored)
    return dest


@pytest.fixture(scope="module")
def image(base: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    tree = _tree(tmp_path_factory.mktemp("image-tree"))
    tag = f"localhost/mcp-gateway-test:{uuid.uuid4().hex[:12]}"
    command = [sys.executable, str(tree / "deploy" / "build_image.py"), "--plugins", PLUGINS]
    command += ["--base", base, "--tag", tag, "--engine", shlex.join(ENGINE)]
    # No network inside the build: the wheelhouse is all it installs from. No layer cache:
    # each run's wheels differ, and the cached layers would only pile up.
    command += ["--", "--network=none", "--layers=false"]
    done = subprocess.run(command, env=_env(), capture_output=True, text=True, timeout=1200)
    try:
        assert done.returncode == 0, (done.stdout + done.stderr)[-4000:]
        assert f"built {tag} (" in done.stdout
        yield tag
    finally:
        podman("rmi", "--force", tag, check=False)


@contextlib.contextmanager
def container(image: str, config: Path, **env: str) -> Iterator[tuple[str, str]]:
    """The image run in the background with ``config`` mounted and ``env`` set, its port
    8765 published on a free loopback port: (name, url) once /healthz answers."""
    name = f"mcp-gateway-test-{uuid.uuid4().hex[:12]}"
    port = free_port()
    options = [f"--env={k}" for k in env]  # values from podman's environment, not its argv
    run = subprocess.run(
        [
            *ENGINE,
            "run",
            "--detach",
            "--name",
            name,
            "--health-interval=disable",
            f"--publish=127.0.0.1:{port}:8765",
            f"--volume={config}:/etc/mcp-gateway/gateway.toml:ro",
            *options,
            image,
        ],
        env=_env() | env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert run.returncode == 0, run.stderr[-3000:]
    url = f"http://127.0.0.1:{port}"
    try:
        with httpx.Client(timeout=2) as client:
            deadline = time.monotonic() + 60
            while time.monotonic() < deadline:
                with contextlib.suppress(httpx.TransportError):
                    if client.get(url + "/healthz").status_code == 200:
                        break
                state = podman("inspect", "--format", "{{.State.Running}}", name).stdout
                assert state.strip() == "true", podman("logs", name).stderr[-3000:]
                time.sleep(0.2)
            else:
                raise AssertionError(podman("logs", name).stderr[-3000:])
        yield name, url
    finally:
        podman("rm", "--force", "--time=0", name, check=False)


@pytest.fixture(scope="module")
def config(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("image-config") / "gateway.toml"
    path.write_text(CONFIG)
    path.chmod(0o644)  # read by the container's user
    return path


@pytest.fixture(scope="module")
def served(image: str, config: Path) -> Iterator[tuple[str, str]]:
    deny = {"MCP_GATEWAY_DENY_TOOLS": "bulk_update_job_status"}
    with container(image, config, MCP_GATEWAY_TOKEN=TOKEN, **deny) as running:
        yield running


@pytest.mark.anyio
async def test_the_image_serves_mcp_with_its_token_its_mounted_config_and_environment(served):
    _, url = served
    with httpx.Client(timeout=10) as http:
        assert http.get(url + "/healthz").json() == {"status": "ok"}
        assert http.get(url + "/readyz").status_code == 401  # the token guards all but liveness
        ready = http.get(url + "/readyz", headers={"Authorization": f"Bearer {TOKEN}"})
        assert ready.status_code == 200 and ready.json()["ready"] is True
        loaded = {p["name"]: p["state"] for p in ready.json()["plugins"]}
        assert loaded == {"gateway": "loaded", "queue": "loaded"}  # only the chosen plugin

    client = httpx2.AsyncClient(headers={"Authorization": f"Bearer {TOKEN}"}, timeout=30)
    async with Client(streamable_http_client(url + "/mcp", http_client=client), mode="legacy") as c:
        assert c.server_info.name == "image-test"  # from the mounted file
        listed = sorted(t.name for t in (await c.list_tools()).tools)
        # bulk_update_job_status is denied by the environment
        assert listed == ["bulk_read_new_jobs", "gateway_status"]
        status = await c.call_tool("gateway_status", {})
    assert not status.is_error, status.content
    plugins = {p["name"]: p["state"] for p in status.structured_content["plugins"]}
    assert plugins == {"gateway": "loaded", "queue": "loaded"}


def test_the_gateway_in_the_container_runs_as_a_non_root_user(served):
    name, _ = served
    pid = podman("inspect", "--format", "{{.State.Pid}}", name).stdout.strip()
    # As the host's kernel sees the process (podman runs it here without a user namespace).
    status = Path(f"/proc/{pid}/status").read_text()
    uids = next(line.split()[1:] for line in status.splitlines() if line.startswith("Uid:"))
    assert uids == ["10001"] * 4
    cmdline = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
    assert b"serve" in cmdline and b"0.0.0.0" in cmdline


def test_the_image_health_check_passes_against_the_running_gateway(served):
    name, _ = served
    checked = podman("healthcheck", "run", name, check=False)
    assert checked.returncode == 0, checked.stdout + checked.stderr


def test_without_a_token_the_image_refuses_to_start_with_one_line(image, config):
    done = subprocess.run(
        # No health check: without systemd, podman says so on stderr when it sets one up.
        [
            *ENGINE,
            "run",
            "--rm",
            "--no-healthcheck",
            f"--volume={config}:/etc/mcp-gateway/gateway.toml:ro",
            image,
        ],
        env=_env(),
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 2, done.stderr
    lines = done.stderr.splitlines()
    assert len(lines) == 1 and "MCP_GATEWAY_TOKEN" in lines[0], done.stderr
    assert lines[0].startswith("mcp-gateway: refusing to serve on non-loopback address 0.0.0.0")


def test_the_container_stops_cleanly_on_sigterm(image, config):
    with container(image, config, MCP_GATEWAY_TOKEN=TOKEN) as (name, _):
        # PID 1 is the gateway itself (no shell in between): the stop signal reaches it.
        stopped = podman("stop", "--time=30", name, check=False, timeout=60)
        assert stopped.returncode == 0, stopped.stderr
        state = podman("inspect", "--format", "{{json .State}}", name).stdout
        assert json.loads(state)["ExitCode"] == 0  # not 137: it was not killed


@pytest.mark.parametrize(
    ("args", "line"),
    [
        (
            ["--plugins", "queue,qeue"],
            f"build_image: --plugins: unknown plugin 'qeue' (known: {', '.join(PLUGIN_FOLDERS)});"
            " did you mean queue?",
        ),
        (
            ["--plugins", "queue", "--python-version", "eleven"],
            "build_image: --python-version: 'eleven' is not a version such as 3.11.2",
        ),
        (
            # An engine that cannot run the base: it is asked before anything is built.
            ["--plugins", "queue", "--engine", "false"],
            "build_image: --python-version: could not ask the base image for its Python (no "
            "version printed); give the base's version, e.g. --python-version 3.11.2",
        ),
    ],
)
def test_the_build_script_stops_on_a_usage_mistake_with_one_line_before_building(args, line):
    before = sorted((REPO / "build").rglob("*")) if (REPO / "build").exists() else []
    done = subprocess.run(
        [sys.executable, str(REPO / "deploy" / "build_image.py"), *args],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert (done.returncode, done.stderr, done.stdout) == (2, line + "\n", "")
    after = sorted((REPO / "build").rglob("*")) if (REPO / "build").exists() else []
    assert after == before  # no wheelhouse started


def test_the_build_context_holds_only_the_wheelhouse_and_the_container_files(base, tmp_path):
    """.dockerignore: a checkout's .venv, .git or a stray .env never reaches a build."""
    for path in (
        "build/wheelhouse/x.whl",
        "build/lib/gateway/old.py",
        "deploy/container/healthcheck.py",
        "deploy/build_image.py",
        ".venv/bin/python",
        ".env",
        "gateway/app.py",
    ):
        (tmp_path / path).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / path).write_text("x")
    shutil.copy2(REPO / ".dockerignore", tmp_path / ".dockerignore")
    lister = tmp_path.parent / f"{tmp_path.name}.Containerfile"
    lister.write_text(f"FROM {base}\nCOPY . /context\nRUN cd /context && find . -type f | sort\n")
    tag = f"localhost/mcp-gateway-test-context:{uuid.uuid4().hex[:12]}"
    try:
        built = podman(
            *("build", "--layers=false", "--network=none", "-f", str(lister), "-t", tag),
            str(tmp_path),
            timeout=300,
        )
    finally:
        podman("rmi", "--force", tag, check=False)
    listed = sorted(line for line in built.stdout.splitlines() if line.startswith("./"))
    assert listed == ["./build/wheelhouse/x.whl", "./deploy/container/healthcheck.py"]
