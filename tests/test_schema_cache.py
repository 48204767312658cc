"""The schema cache (gateway/schemacache.py): a start publishes exactly what building the models
would, and never a stale or broken entry.

Each start is a fresh interpreter (a plugin module once imported stays imported), of a plugin
installed as a real distribution on ``PYTHONPATH``. A start reports its published schemas and
whether the tool's input model was built while loading: with a usable entry it is not (the
schema came from the cache and the model builds on the first call).
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from conftest import gateway_env, write_dist
from wire import Primed

START = """
import json, sys
from gateway.app import build_gateway
from gateway.config import load_config
gw = build_gateway(load_config())
tools = {t.name: t for t in gw.visible_tools() if t.plugin.name != "gateway"}
print(json.dumps({
    "tools": {n: [t.input_schema, t.output_schema] for n, t in sorted(tools.items())},
    "built": sorted(n for n, t in tools.items() if t.spec.input_model.__pydantic_complete__),
    "failed": [p.reason for p in gw.plugins if p.state.value == "failed"],
}))
"""

PLUGIN = """
from __future__ import annotations
from typing import Any, Literal
from pydantic import BaseModel, ConfigDict, Field, create_model
from gateway import Tier, ToolSpec, env_field, hookimpl


class Settings(BaseModel):
    model_config = ConfigDict(extra="forbid")
    colours: str = env_field("CACHED_COLOURS", default="red,yellow")


class Args(BaseModel):
    model_config = ConfigDict(extra="forbid")
    x: int = Field(description="A number.")


class Out(BaseModel):
    y: int


async def echo(args: Args, ctx: Any) -> Out:
    return Out(y=args.x + 1) if args.x >= 0 else {"y": "not a number"}


async def paint(args: Any, ctx: Any) -> dict[str, Any]:
    return {"colour": args.colour}


@hookimpl
def plugin_settings() -> type[BaseModel]:
    return Settings


@hookimpl
def register_tools(register: Any, plugin: Any) -> None:
    register(ToolSpec(name="echo", description="Add one.", input_model=Args,
                      output_model=Out, handler=echo, tier=Tier.READ))
    # A model built from the settings: its schema depends on them, not only on the files.
    colour = Literal[tuple(plugin.settings.colours.split(","))]  # type: ignore[misc]
    paint_args = create_model("PaintArgs", __config__=ConfigDict(extra="forbid"),
                              colour=(colour, Field(description="One of the colours.")))
    register(ToolSpec(name="paint", description="Paint.", input_model=paint_args,
                      handler=paint, tier=Tier.READ))
"""


class Deployment:
    """The test plugin, installed as a real distribution on the starts' ``PYTHONPATH``, a
    cache folder, and fresh starts of the gateway."""

    def __init__(self, tmp: Path) -> None:
        self.cache = tmp / "cache"
        self.site = tmp / "site"
        self.install()
        self.module = self.site / "cached_plugin.py"
        self.info = self.site / "cached_plugin-1.2.3.dist-info"

    def install(self, source: str = PLUGIN) -> None:
        write_dist(
            self.site, "cached-plugin", {"cached": "cached_plugin"}, {"cached_plugin": source}
        )

    def env(self, **extra: str) -> dict[str, str]:
        env = gateway_env(
            PYTHONPATH=os.pathsep.join([str(self.site), os.environ.get("PYTHONPATH", "")]),
            MCP_GATEWAY_PLUGINS="cached",
            XDG_CACHE_HOME=str(self.cache),
        )
        # Python's own .pyc check sees whole seconds and the size: a module edited within the
        # second it was compiled, at the same size, would be imported as it was.
        env["PYTHONDONTWRITEBYTECODE"] = "1"
        env.update(extra)
        return env

    def start(self, **extra: str) -> dict[str, Any]:
        proc = subprocess.run(
            [sys.executable, "-c", START],
            env=self.env(**extra),
            capture_output=True,
            text=True,
            timeout=120,
        )
        assert proc.returncode == 0, proc.stderr[-2000:]
        result: dict[str, Any] = json.loads(proc.stdout)
        assert result["failed"] == []
        return result

    def entries(self) -> list[Path]:
        folder = self.cache / "mcp-gateway" / "schemas"
        return sorted(folder.glob("cached-*.json")) if folder.is_dir() else []

    def edit(self, old: str, new: str) -> None:
        text = self.module.read_text()
        assert old in text
        self.module.write_text(text.replace(old, new))


FirstStart = Primed[Deployment, dict[str, Any]]  # the shared first start and what it gave


@pytest.fixture(scope="module")
def primed(tmp_path_factory: pytest.TempPathFactory) -> FirstStart:
    """Most tests are about a start after a first one: that first start is made once, and each
    test gets the deployment back exactly as it left it (same paths, same files and times)."""
    deployment = Deployment(tmp_path_factory.mktemp("cached"))
    first = deployment.start()
    return Primed.of(
        deployment, first, len(deployment.entries()), tmp_path_factory.mktemp("cached-copies")
    )


@pytest.fixture
def deployment(primed: FirstStart) -> Deployment:
    """The primed deployment: its entry is the one its first start wrote."""
    return primed.restored()


@pytest.fixture
def unprimed(tmp_path: Path) -> Deployment:
    """A deployment never started: no entry yet."""
    return Deployment(tmp_path)


def props(result: dict[str, Any], tool: str) -> dict[str, Any]:
    schema: dict[str, Any] = result["tools"][tool][0]["properties"]
    return schema


def test_a_second_start_reuses_the_schemas_and_publishes_the_same(
    primed: FirstStart, deployment: Deployment
):
    first = primed.first
    assert first["built"] == ["echo", "paint"]
    assert primed.written == 1
    second = deployment.start()
    assert second["tools"] == first["tools"]
    assert second["built"] == ["paint"]  # echo from the cache (paint is made at registration)
    uncached = deployment.start(MCP_GATEWAY_SCHEMA_CACHE="false")
    assert uncached["tools"] == first["tools"] and uncached["built"] == ["echo", "paint"]


def test_an_edited_model_is_never_served_from_the_cache(deployment: Deployment):
    # Same size, so only the file's modification time tells the change.
    deployment.edit(
        'x: int = Field(description="A number.")', 'z: int = Field(description="A number.")'
    )
    fresh = deployment.start()
    assert set(props(fresh, "echo")) == {"z"} and "echo" in fresh["built"]
    assert deployment.start()["tools"] == fresh["tools"]


def test_a_bumped_version_or_a_reinstall_builds_the_schemas_again(deployment: Deployment):
    stat = deployment.module.stat()
    bumped = deployment.site / "cached_plugin-1.2.4.dist-info"
    deployment.info.rename(bumped)
    (bumped / "METADATA").write_text("Metadata-Version: 2.1\nName: cached-plugin\nVersion: 1.2.4\n")
    assert deployment.start()["built"] == ["echo", "paint"]
    assert deployment.start()["built"] == ["paint"]
    # Reinstalled: the same version and files (even their times), a new .dist-info folder.
    shutil.rmtree(bumped)
    deployment.install()
    os.utime(deployment.module, ns=(stat.st_atime_ns, stat.st_mtime_ns))
    assert deployment.start()["built"] == ["echo", "paint"]


def test_settings_that_change_a_model_change_its_schema(primed: FirstStart, deployment: Deployment):
    red = primed.first
    assert props(red, "paint")["colour"]["enum"] == ["red", "yellow"]
    blue = deployment.start(CACHED_COLOURS="blue,green")
    assert props(blue, "paint")["colour"]["enum"] == ["blue", "green"]
    assert deployment.start()["tools"] == red["tools"]


@pytest.mark.parametrize(
    "content",
    [
        "{not json",
        "",
        json.dumps({"key": "another", "tools": {}}),
        "\udcff",  # not UTF-8 once written with surrogateescape
    ],
    ids=["truncated", "empty", "other-key", "not-utf8"],
)
def test_a_corrupt_entry_is_never_served_and_is_replaced(
    primed: FirstStart, deployment: Deployment, content: str
):
    first = primed.first
    (entry,) = deployment.entries()
    entry.write_bytes(content.encode("utf-8", "surrogateescape"))
    again = deployment.start()
    assert again["tools"] == first["tools"] and again["built"] == ["echo", "paint"]
    assert json.loads(entry.read_text())["tools"]  # rewritten whole
    assert deployment.start()["built"] == ["paint"]


def test_an_entry_that_does_not_fit_the_tools_is_not_used(
    primed: FirstStart, deployment: Deployment
):
    first = primed.first
    (entry,) = deployment.entries()
    data = json.loads(entry.read_text())
    data["tools"]["echo"]["input"] = "not a schema"
    data["tools"]["paint"]["input_model"] = "elsewhere:Other"
    entry.write_text(json.dumps(data))
    again = deployment.start()
    assert again["tools"] == first["tools"] and again["built"] == ["echo", "paint"]


def test_a_cache_that_cannot_be_written_costs_only_the_reuse(unprimed: Deployment):
    deployment = unprimed
    deployment.cache.write_text("a file where the cache folder would go")
    first = deployment.start()
    second = deployment.start()
    assert first["tools"] == second["tools"] and second["built"] == ["echo", "paint"]
    assert deployment.cache.read_text() == "a file where the cache folder would go"


def test_concurrent_first_starts_agree_and_leave_one_whole_entry(unprimed: Deployment):
    deployment = unprimed
    procs = [
        subprocess.Popen(
            [sys.executable, "-c", START],
            env=deployment.env(),
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for _ in range(4)
    ]
    outputs = [p.communicate(timeout=120) for p in procs]
    assert all(p.returncode == 0 for p in procs), [err[-500:] for _, err in outputs]
    results = [json.loads(out)["tools"] for out, _ in outputs]
    assert all(r == results[0] for r in results)
    (entry,) = deployment.entries()
    assert json.loads(entry.read_text())["tools"].keys() == {"echo", "paint"}
    assert not list(entry.parent.glob(".tmp-*"))
    assert deployment.start()["built"] == ["paint"]


CALL = """
import json, sys, anyio
from gateway.app import build_gateway
from gateway.config import load_config
gw = build_gateway(load_config())
async def main():
    out = []
    async with gw:
        for args in json.loads(sys.argv[1]):
            r = await gw.call("echo", args)
            if r.is_error:
                r.payload["error"].pop("correlation_id", None)  # differs per call
            out.append([r.is_error, r.payload])
    return out
print(json.dumps(anyio.run(main)))
"""


def test_the_first_call_of_a_deferred_model_is_as_strict(deployment: Deployment):
    """Arguments and results are checked the same whether the models were built to publish the
    schemas (no cache) or build on this first call (schemas from the cache)."""
    cases = [{"x": 1}, {"x": "5"}, {"x": True}, {"x": 1, "extra": 2}, {}, {"x": -1}]

    def calls(**extra: str) -> list[Any]:
        proc = subprocess.run(
            [sys.executable, "-c", CALL, json.dumps(cases)],
            env=deployment.env(**extra),
            capture_output=True,
            text=True,
            timeout=120,
        )
        assert proc.returncode == 0, proc.stderr[-2000:]
        return list(json.loads(proc.stdout))

    cached = calls()  # the models build on these first calls
    uncached = calls(MCP_GATEWAY_SCHEMA_CACHE="false")
    assert cached == uncached
    assert [is_error for is_error, _ in cached] == [False, True, True, True, True, True]
    assert cached[0][1] == {"y": 2}
    assert cached[5][1]["error"]["code"] == "INTERNAL_ERROR"  # the result broke its model


UNDUMPABLE = PLUGIN.replace(
    'colours: str = env_field("CACHED_COLOURS", default="red,yellow")',
    'colours: str = env_field("CACHED_COLOURS", default="red,yellow")\n'
    "    # A default pydantic never checks: the settings cannot be dumped to key an entry.\n"
    '    token: SecretStr = env_field("CACHED_TOKEN", default="")',
).replace("from pydantic import BaseModel,", "from pydantic import SecretStr, BaseModel,")


def test_settings_that_cannot_be_keyed_cost_only_the_reuse(unprimed: Deployment):
    deployment = unprimed
    deployment.install(UNDUMPABLE)
    first = deployment.start()
    assert first["built"] == ["echo", "paint"] and deployment.entries() == []
    assert deployment.start()["tools"] == first["tools"]


def test_gateways_built_in_one_process_never_share_a_schema_object(tmp_path: Path):
    """Schemas are generated once per model class and process (gateway/registry.py); each
    gateway still owns what it publishes."""
    from gateway.app import build_gateway
    from gateway.config import load_config

    def notes_schemas() -> list[dict[str, Any]]:
        gw = build_gateway(load_config(None, env={"MCP_GATEWAY_PLUGINS": "notes"}, cwd=tmp_path))
        tool = next(t for t in gw.offered_tools() if t.output_schema is not None)
        assert tool.output_schema is not None
        return [tool.input_schema, tool.output_schema]

    first = notes_schemas()
    pristine = json.dumps(first, sort_keys=True)
    for schema in first:
        schema["properties"].clear()
        schema["mutated"] = True
    assert json.dumps(notes_schemas(), sort_keys=True) == pristine
