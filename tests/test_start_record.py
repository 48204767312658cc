"""Start records (gateway/startrecord.py): a stdio start answers ``initialize``, ``tools/list``
and ``prompts/list`` from the last start's record before it imports a plugin, exactly as a
start that imports them would, and never from a record whose inputs changed.

The test plugin's import waits at a gate (a file the test creates) and says when it started
waiting. A start that uses a record has written its listing before the plugin's import even
began; one that does not can answer nothing until the gate opens.
"""

from __future__ import annotations

import json
import os
import select
import shutil
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from conftest import gateway_env, write_dist
from wire import INIT, Primed, StdioServer

PLUGIN = """
from __future__ import annotations
import os, time
from pathlib import Path
from typing import Any
from pydantic import BaseModel, ConfigDict, Field, SecretStr
from gateway import PromptSpec, Tier, ToolSpec, env_field, hookimpl

Path(os.environ["RECORDED_WAITING"]).touch()
_deadline = time.monotonic() + 30
while not Path(os.environ["RECORDED_GATE"]).exists() and time.monotonic() < _deadline:
    time.sleep(0.01)


class Settings(BaseModel):
    model_config = ConfigDict(extra="forbid")
    greeting: str = env_field("RECORDED_GREETING", default="hello")
    token: SecretStr = env_field("RECORDED_TOKEN", default="")


class Args(BaseModel):
    model_config = ConfigDict(extra="forbid")
    name: str = Field(description="Who to greet.")


async def greet(args: Args, ctx: Any) -> dict[str, Any]:
    return {"text": f"{ctx.settings.greeting}, {args.name}"}


@hookimpl
def plugin_settings() -> type[BaseModel]:
    return Settings


@hookimpl
def register_tools(register: Any, plugin: Any) -> None:
    register(ToolSpec(name="greet", description=f"Say {plugin.settings.greeting}.",
                      input_model=Args, handler=greet, tier=Tier.READ))
    # Read outside the settings: no record's key can see it (the check after loading does).
    extra = os.environ.get("RECORDED_EXTRA_TOOL")
    if extra:
        register(ToolSpec(name=extra, description="Also greet.", input_model=Args,
                          handler=greet, tier=Tier.READ))


class WelcomeArgs(BaseModel):
    model_config = ConfigDict(extra="forbid")
    name: str = Field(description="The newcomer.")


def welcome(args: WelcomeArgs, ctx: Any) -> str:
    return f"Greet {args.name} with the greet tool."


@hookimpl
def register_prompts(register: Any, plugin: Any) -> None:
    register(PromptSpec(name="welcome", description="Welcome someone.", arguments=WelcomeArgs,
                        render=welcome, requires=("greet",)))
"""


@dataclass
class Start:
    """One start's answers, as sent, and whether they came before the plugin's import."""

    initialize: bytes
    tools: bytes
    prompts: bytes
    early: bool

    def tool_names(self) -> list[str]:
        return [t["name"] for t in json.loads(self.tools)["result"]["tools"]]


class Deployment:
    """The gated test plugin, installed as a real distribution on the gateways' ``PYTHONPATH``,
    a cache folder, and fresh stdio starts of the gateway."""

    def __init__(self, tmp: Path) -> None:
        self.tmp = tmp
        self.site = tmp / "site"
        self.install()
        self.module = self.site / "recorded_plugin.py"
        self.cache = tmp / "cache"
        self.gate = tmp / "gate"
        self.waiting = tmp / "waiting"
        #: the last start's messages without an id (notifications) read with its answers
        self.notices: list[dict[str, Any]] = []

    def install(self) -> None:
        write_dist(self.site, "recorded-plugin", {"recorded": "recorded_plugin"}, PLUGINS)

    def env(self, **extra: str) -> dict[str, str]:
        return gateway_env(
            PYTHONPATH=os.pathsep.join([str(self.site), os.environ.get("PYTHONPATH", "")]),
            MCP_GATEWAY_PLUGINS="recorded",
            MCP_GATEWAY_LOAD_TIMEOUT="60",
            XDG_CACHE_HOME=str(self.cache),
            RECORDED_GATE=str(self.gate),
            RECORDED_WAITING=str(self.waiting),
            # Python's own .pyc check sees whole seconds and the size (see test_schema_cache).
            PYTHONDONTWRITEBYTECODE="1",
            **extra,
        )

    def records(self) -> list[Path]:
        return sorted((self.cache / "mcp-gateway" / "starts").glob("start-*.json"))

    def start(
        self,
        then: Callable[[StdioServer], Any] | None = None,
        protocol: str = "2025-06-18",
        **extra: str,
    ) -> tuple[Start, Any]:
        """Start with the gate shut, send initialize (or, in the stateless protocol Claude Code
        speaks, server/discover), tools/list and prompts/list; open the gate once it is clear
        whether the listing came before the import began."""
        self.gate.unlink(missing_ok=True)
        self.waiting.unlink(missing_ok=True)
        self.notices = []
        with StdioServer(self.tmp, self.env(**extra), initialize=False) as server:
            for message in handshake(protocol):
                server.send(message)
            lines: dict[int, bytes] = {}
            deadline = time.monotonic() + 60
            while 2 not in lines:
                assert time.monotonic() < deadline, server.stderr()
                # A start from a record writes its listing before the import begins: once
                # the import waits, whatever listing was sent is already readable.
                waiting = self.waiting.exists()
                _collect(server, lines, self.notices, timeout=0 if waiting else 0.05)
                if waiting:
                    break
            early = 2 in lines
            self.gate.touch()
            while len(lines) < 3:
                _collect(server, lines, self.notices, timeout=20, block=True)
            result = then(server) if then is not None else None
        return Start(lines[1], lines[2], lines[3], early), result

    def edit(self, old: str, new: str) -> None:
        text = self.module.read_text()
        assert old in text
        self.module.write_text(text.replace(old, new))


PLUGINS = {"recorded_plugin": PLUGIN}
STATELESS = "2026-07-28"


def handshake(protocol: str) -> list[dict[str, Any]]:
    """Requests 1-3: the handshake, ``tools/list``, ``prompts/list``."""
    if protocol != STATELESS:
        return [
            {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": INIT},
            {"jsonrpc": "2.0", "method": "notifications/initialized"},
            {"jsonrpc": "2.0", "id": 2, "method": "tools/list"},
            {"jsonrpc": "2.0", "id": 3, "method": "prompts/list"},
        ]
    meta = {
        "_meta": {
            "io.modelcontextprotocol/protocolVersion": STATELESS,
            "io.modelcontextprotocol/clientInfo": INIT["clientInfo"],
            "io.modelcontextprotocol/clientCapabilities": {},
        }
    }
    methods = ["server/discover", "tools/list", "prompts/list"]
    return [
        {"jsonrpc": "2.0", "id": i, "method": m, "params": meta}
        for i, m in enumerate(methods, start=1)
    ]


def _collect(
    server: StdioServer,
    lines: dict[int, bytes],
    notices: list[dict[str, Any]],
    timeout: float,
    block: bool = False,
) -> None:
    """Read the answers that are there (or, with ``block``, the next one) by their id, and
    keep any notification read on the way in ``notices``."""
    assert server.proc.stdout is not None
    fd = server.proc.stdout.fileno()
    while block or select.select([fd], [], [], timeout)[0] or b"\n" in server._buffer:
        line = server.read_line(timeout=20)
        message = json.loads(line)
        ident = message.get("id")
        if isinstance(ident, int):
            lines[ident] = line
        else:
            notices.append(message)
        if block:
            return


FirstStart = Primed[Deployment, Start]  # the shared first start and what it gave


@pytest.fixture(scope="module")
def primed(tmp_path_factory: pytest.TempPathFactory) -> FirstStart:
    """Most tests are about a start after a first one: that first start is made once, and each
    test gets the deployment back exactly as it left it (same paths, same files and times)."""
    deployment = Deployment(tmp_path_factory.mktemp("recorded"))
    first, _ = deployment.start()
    return Primed.of(
        deployment, first, len(deployment.records()), tmp_path_factory.mktemp("recorded-copies")
    )


@pytest.fixture
def deployment(primed: FirstStart) -> Deployment:
    """The primed deployment: its record is the one its first start wrote."""
    return primed.restored()


@pytest.fixture
def unprimed(tmp_path: Path) -> Deployment:
    """A deployment never started: no record yet."""
    return Deployment(tmp_path)


def greet(server: StdioServer) -> Any:
    return server.call("greet", {"name": "Ada"})


def test_a_second_start_answers_from_the_record_before_importing_and_byte_for_byte(
    primed: FirstStart, deployment: Deployment
):
    first = primed.first
    assert not first.early and first.tool_names() == ["gateway_status", "greet"]
    assert primed.written == 1
    second, answer = deployment.start(then=greet)
    assert second.early
    assert second == Start(first.initialize, first.tools, first.prompts, early=True)
    # The call waited for the plugins, then ran as always.
    assert answer["structuredContent"] == {"text": "hello, Ada"}
    off, _ = deployment.start(MCP_GATEWAY_SCHEMA_CACHE="false")
    assert not off.early and off.tools == first.tools


def test_the_stateless_protocol_gets_the_same_listing_from_the_record(deployment: Deployment):
    """Claude Code speaks the stateless protocol (``server/discover``, no ``initialize``), whose
    results the SDK checks against their models."""
    uncached, _ = deployment.start(protocol=STATELESS, MCP_GATEWAY_SCHEMA_CACHE="false")
    assert not uncached.early and b'"greet"' in uncached.tools
    recorded, _ = deployment.start(protocol=STATELESS)
    assert recorded == Start(uncached.initialize, uncached.tools, uncached.prompts, early=True)


def test_an_edited_plugin_is_never_listed_from_the_record(deployment: Deployment):
    deployment.edit('f"Say {plugin', 'f"Now say {plugin')
    edited, _ = deployment.start()
    assert not edited.early
    assert b"Now say hello." in edited.tools
    again, _ = deployment.start()
    assert again.early and again.tools == edited.tools


def test_a_reinstalled_plugin_is_never_listed_from_the_record(deployment: Deployment):
    stat = deployment.module.stat()
    info = next(deployment.site.glob("recorded_plugin-*.dist-info"))
    shutil.rmtree(info)
    # The same files, even their times; only the installation is new.
    deployment.install()
    os.utime(deployment.module, ns=(stat.st_atime_ns, stat.st_mtime_ns))
    assert not deployment.start()[0].early
    assert deployment.start()[0].early


def test_settings_variables_count_secret_ones_unwritten_and_others_do_not(
    unprimed: Deployment,
):
    deployment = unprimed
    secret = {"RECORDED_TOKEN": "s3cr3t-token-value"}
    deployment.start(**secret)
    (record,) = deployment.records()
    names = json.loads(record.read_text())["inputs"]["env_names"]
    assert {"RECORDED_GREETING", "RECORDED_TOKEN"} <= set(names)
    assert "s3cr3t" not in record.read_text()  # values enter only the digest
    hi, _ = deployment.start(RECORDED_GREETING="hi", **secret)
    assert not hi.early and b"Say hi." in hi.tools
    unrelated, _ = deployment.start(RECORDED_GREETING="hi", SOMETHING_ELSE="1", **secret)
    assert unrelated.early and unrelated.tools == hi.tools
    assert not deployment.start(RECORDED_GREETING="hi", RECORDED_TOKEN="another")[0].early
    config = deployment.tmp / "gw.toml"
    config.write_text("[gateway]\nread_only = true\n")
    changed = deployment.start(RECORDED_GREETING="hi", MCP_GATEWAY_CONFIG=str(config))
    assert not changed[0].early


def test_a_listing_the_key_could_not_foresee_is_corrected_and_the_client_told(
    deployment: Deployment,
):
    def relist(server: StdioServer) -> list[str]:
        # After loading, the gateway sees the tool the record lacks and says so: on a busy
        # machine the plugins may load before the prompts/list request is read, and the notice
        # then comes before that answer (read with the listings).
        seen = deployment.notices
        while not any(m.get("method") == "notifications/tools/list_changed" for m in seen):
            seen.append(server.read_message())
        answer = server.request("tools/list")
        return [t["name"] for t in answer["result"]["tools"]]

    stale, names = deployment.start(then=relist, RECORDED_EXTRA_TOOL="greet_again")
    assert stale.early and stale.tool_names() == ["gateway_status", "greet"]
    assert names == ["gateway_status", "greet", "greet_again"]
    # The record was replaced: the next start lists the tool from it.
    fresh, _ = deployment.start(RECORDED_EXTRA_TOOL="greet_again")
    assert fresh.early and fresh.tool_names() == names


def test_a_corrupt_record_is_not_used_and_is_replaced(primed: FirstStart, deployment: Deployment):
    first = primed.first
    (record,) = deployment.records()
    for content in ["{not json", '{"format": 1, "digest": "x"}']:
        record.write_text(content)
        again, _ = deployment.start()
        assert not again.early and again.tools == first.tools
        assert json.loads(record.read_text())["tools"]  # replaced, whole
    assert deployment.start()[0].early


def test_a_call_before_any_listing_loads_the_plugins_at_once(deployment: Deployment):
    deployment.gate.touch()
    with StdioServer(deployment.tmp, deployment.env()) as server:
        assert server.call("greet", {"name": "Bo"})["structuredContent"] == {"text": "hello, Bo"}
        names = [t["name"] for t in server.request("tools/list")["result"]["tools"]]
        assert names == ["gateway_status", "greet"]


def test_records_of_many_working_directories_are_pruned_to_the_newest(tmp_path: Path):
    from gateway import startrecord
    from gateway.config import load_config

    folder = tmp_path / "cache" / "mcp-gateway" / "starts"
    folder.mkdir(parents=True)
    for i in range(startrecord.KEEP + 5):
        old = folder / f"start-{i:032d}.json"
        old.write_text("{}")
        os.utime(old, ns=(i * 10**9, i * 10**9))
    config = load_config(None, env={"XDG_CACHE_HOME": str(tmp_path / "cache")}, cwd=tmp_path)
    startrecord.save(config, startrecord.StartRecord([], [], "", [], []))
    kept = sorted(p.name for p in folder.glob("start-*.json"))
    assert len(kept) == startrecord.KEEP
    assert startrecord.lookup(config) is not None  # the one just written is kept
    assert f"start-{0:032d}.json" not in kept and f"start-{36:032d}.json" in kept
