"""Servers no one here wrote, behind the gateway (issue 37): the MCP reference servers from npm
(``server-everything`` over stdio and Streamable HTTP, ``server-filesystem``,
``server-memory``, all on the system's Node) and a FastMCP server from the package index, in a
virtual environment of its own.

Without node and npm the npm servers' tests skip with the reason; an install that fails with no
copy cached from an earlier run fails them (as the TypeScript client's test does).
"""

from __future__ import annotations

import base64
import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anyio
import httpx
import pytest
from conftest import gateway_env
from npm_cache import cache_dir, npm_package
from venv_cache import venv_package
from wire import free_port, run_cli

from gateway.app import Gateway
from gateway.errors import ErrorCode
from gateway.spec import Tier
from gateway.testing import make_gateway

pytestmark = [pytest.mark.anyio, pytest.mark.e2e]

VERSION = "2026.8.31"
PACKAGES = [
    f"@modelcontextprotocol/server-{n}@{VERSION}" for n in ("everything", "filesystem", "memory")
]
FASTMCP = "fastmcp==4.2.3"
SECRETS = {
    "MCP_GATEWAY_TOKEN": "gateway-token-5e1f0c3a9b7d",
    "GITEA_TOKEN": "gitea-token-2b8d4f6a1c3e",
}


@pytest.fixture(scope="module")
def bin_dir() -> Iterator[Path]:
    folder = cache_dir(f"mcp-servers-{VERSION}")
    bins = folder / "node_modules" / ".bin"
    with npm_package(folder, PACKAGES, bins / "mcp-server-memory") as why:
        if why is not None:
            pytest.skip(f"{why}: needed to run the MCP reference servers")
        yield bins


@pytest.fixture(scope="module")
def fastmcp_python() -> Iterator[Path]:
    with venv_package(cache_dir(f"fastmcp-{FASTMCP.split('==')[1]}"), FASTMCP) as (python, why):
        if python is None:
            pytest.fail(f"{why}: needed to run a FastMCP server")
        yield python


@pytest.fixture(autouse=True)
def state_home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path / "state"))
    return tmp_path / "state"


def reference(bins: Path, tmp_path: Path) -> dict[str, dict[str, Any]]:
    notes = tmp_path / "notes"
    notes.mkdir(exist_ok=True)
    (notes / "hello.md").write_text("hello from the filesystem server\n")
    return {
        "everything": {"command": str(bins / "mcp-server-everything"), "args": ["stdio"]},
        "filesystem": {"command": str(bins / "mcp-server-filesystem"), "args": [str(notes)]},
        "memory": {
            "command": str(bins / "mcp-server-memory"),
            "env": {"MEMORY_FILE_PATH": str(tmp_path / "memory.jsonl")},
        },
    }


def mounting(tmp_path: Path, servers: dict[str, dict[str, Any]], **settings: Any) -> Gateway:
    return make_gateway(
        plugins=["servers"],
        plugin_config={"servers": {"servers": servers}},
        cwd=tmp_path,
        env={**os.environ, **SECRETS},
        **settings,
    )


async def answered(gw: Gateway, timeout: float = 60) -> None:
    with anyio.fail_after(timeout):
        for record in gw.mounts.records.values():
            assert record.upstream is not None
            await record.upstream.answered.wait()


def content(result: Any) -> list[dict[str, Any]]:
    assert result.mcp is not None, result.payload
    return list(result.mcp["content"])


async def test_the_three_reference_servers_serve_under_the_gateways_tiers(bin_dir, tmp_path):
    gw = mounting(tmp_path, reference(bin_dir, tmp_path))
    async with gw:
        await answered(gw)
        tiers = {t.name: (t.plugin.name, t.tier) for t in gw.tools() if t.plugin.name != "gateway"}
        image = await gw.call("get-tiny-image", {})
        read = await gw.call("read_text_file", {"path": str(tmp_path / "notes" / "hello.md")})
        outside = await gw.call("read_text_file", {"path": "/etc/hostname"})
        created = await gw.call(
            "create_entities",
            {
                "entities": [
                    {"name": "gateway", "entityType": "program", "observations": ["mounted"]}
                ]
            },
        )
        graph = await gw.call("read_graph", {})
        invalid = await gw.call("create_entities", {"entities": "not a list"})
    assert tiers["get-env"] == ("everything", Tier.READ)
    assert tiers["toggle-simulated-logging"] == ("everything", Tier.MUTATION)
    assert tiers["read_text_file"] == ("filesystem", Tier.READ)
    assert tiers["write_file"] == ("filesystem", Tier.MUTATION)
    assert tiers["create_entities"] == ("memory", Tier.MUTATION)
    assert tiers["read_graph"] == ("memory", Tier.READ)

    blocks = content(image)
    png = next(b for b in blocks if b["type"] == "image")
    assert png["mimeType"] == "image/png"
    assert base64.b64decode(png["data"]).startswith(b"\x89PNG")

    assert content(read)[0]["text"] == "hello from the filesystem server\n"
    # The server refuses what lies outside its root: an error result, cleaned like backend text.
    assert outside.is_error and outside.code == ErrorCode.BACKEND_ERROR
    assert "/etc/hostname" not in json.dumps(outside.mcp)

    assert not created.is_error
    assert "gateway" in json.dumps(graph.mcp)
    # The server's own schema refused it before the server saw it.
    assert invalid.code == ErrorCode.VALIDATION_ERROR


async def test_get_env_shows_none_of_the_gateways_secrets(bin_dir, tmp_path):
    servers = reference(bin_dir, tmp_path)
    gw = mounting(tmp_path, {"everything": servers["everything"]})
    async with gw:
        await answered(gw)
        result = await gw.call("get-env", {})
    env = json.loads(content(result)[0]["text"])
    assert "PATH" in env
    for name, value in SECRETS.items():
        assert name not in env
        assert value not in json.dumps(result.mcp)


async def test_toggle_simulated_logging_is_a_mutation_audited_and_asked_for(bin_dir, tmp_path):
    servers = reference(bin_dir, tmp_path)
    gw = mounting(tmp_path, {"everything": servers["everything"]})
    async with gw:
        await answered(gw)
        toggled = await gw.call("toggle-simulated-logging", {})
        offered = {t.name: t for t in gw.offered_tools()}
    assert not toggled.is_error
    assert offered["toggle-simulated-logging"].tier is Tier.MUTATION
    assert "MUTATION:" in offered["toggle-simulated-logging"].description
    audit = [json.loads(line) for line in (tmp_path / "audit.jsonl").read_text().splitlines()]
    assert [(a["tool"], a["plugin"], a["outcome"]) for a in audit] == [
        ("toggle-simulated-logging", "everything", "STARTED"),
        ("toggle-simulated-logging", "everything", "OK"),
    ]
    config = tmp_path / "gw.toml"
    config.write_text(
        f'[servers.everything]\ncommand = {json.dumps(servers["everything"]["command"])}\nargs = ["stdio"]\n'
    )
    env = gateway_env(MCP_GATEWAY_PLUGINS="servers")
    settings = run_cli(tmp_path, env, "--config", str(config), "claude-config", "--settings")
    assert settings.returncode == 0, settings.stderr
    permissions = json.loads(settings.stdout)["permissions"]
    assert "mcp__gateway__toggle-simulated-logging" in permissions["ask"]
    assert "mcp__gateway__get-env" in permissions["allow"]


async def test_killing_a_server_mid_session_costs_only_its_tools_until_it_is_back(
    bin_dir, tmp_path
):
    servers = reference(bin_dir, tmp_path)
    gw = mounting(tmp_path, {"everything": servers["everything"], "memory": servers["memory"]})
    async with gw:
        await answered(gw)
        upstream = gw.mounts.records["everything"].upstream
        assert upstream is not None and upstream.process is not None
        os.killpg(upstream.process.pid, signal.SIGKILL)
        with anyio.fail_after(10):
            while upstream.session is not None:
                await anyio.sleep(0.02)
        down = await gw.call("echo", {"message": "hi"})
        others = await gw.call("read_graph", {})
        with anyio.fail_after(30):
            while upstream.session is None:
                await anyio.sleep(0.05)
        back = await gw.call("echo", {"message": "hi"})
    assert down.code == ErrorCode.BACKEND_UNAVAILABLE
    assert down.payload["error"]["retryable"] is True
    assert "MCP server 'everything'" in down.payload["error"]["message"]
    assert not others.is_error
    assert content(back)[0]["text"] == "Echo: hi"


async def test_trigger_long_running_operation_reports_progress_through_the_gateway(
    bin_dir, tmp_path
):
    from mcp import Client, StdioServerParameters

    servers = reference(bin_dir, tmp_path)
    config = tmp_path / "gw.toml"
    config.write_text(
        f'[servers.everything]\ncommand = {json.dumps(servers["everything"]["command"])}\nargs = ["stdio"]\n'
    )
    params = StdioServerParameters(
        command=sys.executable,
        args=["-m", "gateway.cli", "--config", str(config), "serve"],
        env=gateway_env(MCP_GATEWAY_PLUGINS="servers"),
        cwd=str(tmp_path),
    )
    seen: list[tuple[float, float | None]] = []

    async def progress(done: float, total: float | None, message: str | None) -> None:
        seen.append((done, total))

    async with Client(params, mode="legacy") as client:
        result = await client.call_tool(
            "trigger-long-running-operation",
            {"duration": 0.6, "steps": 3},
            progress_callback=progress,
        )
    assert not result.is_error
    assert seen == [(1, 3), (2, 3), (3, 3)]


async def test_server_everythings_resources_templates_prompts_and_completions_pass_through(
    bin_dir, tmp_path
):
    """Issue 38: what the server offers besides tools reaches a client of the gateway."""
    import mcp_types as t

    from gateway.testing import gateway_client

    gw = mounting(tmp_path, {"everything": reference(bin_dir, tmp_path)["everything"]})
    async with gw:
        await answered(gw)
        async with gateway_client(gw) as client:
            resources = (await client.list_resources()).resources
            templates = (await client.list_resource_templates()).resource_templates
            prompts = {p.name for p in (await client.list_prompts()).prompts}
            static = await client.read_resource(resources[0].uri)
            dynamic = await client.read_resource("demo://resource/dynamic/text/7")
            simple = await client.get_prompt("simple-prompt", {})
            city = await client.get_prompt("args-prompt", {"city": "Lyon"})
            department = await client.complete(
                t.PromptReference(type="ref/prompt", name="completable-prompt"),
                {"name": "department", "value": "E"},
            )
    assert [r.uri for r in resources][:1] == ["demo://resource/static/document/architecture.md"]
    assert {x.uri_template for x in templates} >= {"demo://resource/dynamic/text/{resourceId}"}
    assert {"simple-prompt", "args-prompt", "completable-prompt"} <= prompts
    assert static.contents[0].text.startswith("# Everything Server")
    assert dynamic.contents[0].uri == "demo://resource/dynamic/text/7"
    assert simple.messages and "Lyon" in json.dumps(city.model_dump(mode="json"))
    assert department.completion.values and all(
        v.startswith("E") for v in department.completion.values
    )


@pytest.mark.filterwarnings(
    "ignore:resources/(un)?subscribe is removed:mcp.shared.exceptions.MCPDeprecationWarning"
)
@pytest.mark.parametrize("transport", ["stdio", "http"])
async def test_server_everythings_resource_updates_reach_a_subscribed_stdio_client(
    bin_dir, tmp_path, transport
):
    """Issue 38: the gateway subscribes the server for its client and passes its updates on,
    whether it runs the server or connects to it."""
    import mcp_types as t
    from mcp import Client, StdioServerParameters

    proc = None
    if transport == "stdio":
        everything = reference(bin_dir, tmp_path)["everything"]
        table = (
            f"command = {json.dumps(everything['command'])}\n"
            f"args = {json.dumps(everything['args'])}\n"
        )
    else:
        port = free_port()
        proc = start_http_everything(bin_dir, port, tmp_path)
        table = f'type = "http"\nurl = "http://127.0.0.1:{port}/mcp"\n'
    config = tmp_path / "gw.toml"
    config.write_text(f'[gateway]\nplugins = ["servers"]\n[servers.everything]\n{table}')
    env = gateway_env(MCP_GATEWAY_CONFIG=str(config), XDG_STATE_HOME=str(tmp_path / "state"))
    server = StdioServerParameters(
        command=sys.executable, args=["-m", "gateway.cli", "serve"], cwd=str(tmp_path), env=env
    )
    told: list[str] = []

    async def note(message: Any) -> None:
        if isinstance(message, t.ResourceUpdatedNotification):
            told.append(str(message.params.uri))

    uri = "demo://resource/static/document/architecture.md"
    try:
        with anyio.fail_after(90):
            async with Client(server, mode="legacy", message_handler=note) as client:
                await client.list_tools()  # it answered: its resources are known
                await client.subscribe_resource(uri)
                # The server sends an update of each URI subscribed to at once, then every 5 s.
                started = await client.call_tool("toggle-subscriber-updates", {})
                assert not started.is_error, started
                while not told:
                    await anyio.sleep(0.05)
                await client.unsubscribe_resource(uri)
                await client.call_tool("toggle-subscriber-updates", {})
    finally:
        if proc is not None:
            stop(proc)
    assert set(told) == {uri}


def start_http_everything(bin_dir: Path, port: int, cwd: Path) -> subprocess.Popen[bytes]:
    proc = subprocess.Popen(
        [str(bin_dir / "mcp-server-everything"), "streamableHttp"],
        env={**os.environ, "PORT": str(port)},
        cwd=cwd,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
    )
    with httpx.Client() as client:
        for _ in range(400):
            try:
                client.get(f"http://127.0.0.1:{port}/", timeout=1)
                return proc
            except httpx.TransportError:
                time.sleep(0.05)
    raise AssertionError("server-everything did not listen")


def stop(proc: subprocess.Popen[bytes]) -> None:
    os.killpg(proc.pid, signal.SIGKILL)
    proc.wait(timeout=10)


async def test_server_everything_over_streamable_http_and_connected_again(bin_dir, tmp_path):
    port = free_port()
    proc = start_http_everything(bin_dir, port, tmp_path)
    try:
        gw = mounting(tmp_path, {"remote": {"type": "http", "url": f"http://127.0.0.1:{port}/mcp"}})
        async with gw:
            await answered(gw)
            echo = await gw.call("echo", {"message": "over http"})
            image = await gw.call("get-tiny-image", {})
            [health] = await gw.check_health(plugin="remote", use_cache=False)
            stop(proc)
            gone = await gw.call("echo", {"message": "anyone?"})
            proc = start_http_everything(bin_dir, port, tmp_path)
            upstream = gw.mounts.records["remote"].upstream
            assert upstream is not None
            with anyio.fail_after(60):
                while upstream.session is None or upstream.restarts == 0:
                    await anyio.sleep(0.1)
            back = await gw.call("echo", {"message": "again"})
    finally:
        stop(proc)
    assert content(echo)[0]["text"] == "Echo: over http"
    assert any(b["type"] == "image" for b in content(image))
    assert health.status == "ok"
    assert gone.code == ErrorCode.BACKEND_UNAVAILABLE
    assert "MCP server 'remote'" in gone.payload["error"]["message"]
    assert content(back)[0]["text"] == "Echo: again"


FASTMCP_SERVER = '''
from fastmcp import FastMCP

mcp = FastMCP("fastmcp-fixture")


@mcp.tool(annotations={"readOnlyHint": True})
def add(a: int, b: int) -> int:
    """Add two integers."""
    return a + b


@mcp.tool
def remember(note: str) -> dict:
    """Remember a note."""
    return {"remembered": note}


if __name__ == "__main__":
    mcp.run(show_banner=False)
'''


async def test_a_fastmcp_server_from_the_package_index(fastmcp_python, tmp_path):
    script = tmp_path / "fastmcp_server.py"
    script.write_text(FASTMCP_SERVER)
    gw = mounting(tmp_path, {"py": {"command": str(fastmcp_python), "args": [str(script)]}})
    async with gw:
        await answered(gw)
        tiers = {t.name: t.tier for t in gw.tools("py")}
        added = await gw.call("add", {"a": 2, "b": 3})
        refused = await gw.call("add", {"a": "two", "b": 3})
        remembered = await gw.call("remember", {"note": "hi"})
    assert tiers == {"add": Tier.READ, "remember": Tier.MUTATION}
    assert added.mcp is not None and added.mcp["structuredContent"] == {"result": 5}
    assert refused.code == ErrorCode.VALIDATION_ERROR
    assert remembered.mcp is not None and remembered.mcp["structuredContent"] == {
        "remembered": "hi"
    }
