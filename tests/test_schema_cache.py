"""The schema cache (gateway/schemacache.py): every start lists what the plugins' models are
now, whatever they were built from, on both stdio protocols and over HTTP; a cache file that
is not what the gateway wrote is ignored, and never hangs, crashes or changes a start.

Each start is a fresh interpreter (a plugin module once imported stays imported), of a plugin
installed as a real distribution on ``PYTHONPATH``, with no ``.pyc`` written: Python's own
check of one sees whole seconds and the size, so a module edited at the same size with its
time put back would otherwise be imported as it was.
"""

from __future__ import annotations

import enum
import hashlib
import json
import os
import stat
import subprocess
import sys
from pathlib import Path
from typing import Any

import anyio
import httpx2
import pytest
from conftest import gateway_env, write_dist
from mcp import Client, StdioServerParameters
from mcp.client.streamable_http import streamable_http_client
from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    GetCoreSchemaHandler,
    create_model,
    field_validator,
)
from pydantic_core import core_schema
from wire import HttpServer

from gateway import schemacache
from gateway.testing import tool_error

PLUGIN = """
from __future__ import annotations

import enum
import json
import os
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from gateway import Tier, ToolSpec, hookimpl

# Read while the plugin is imported: the members from a data file beside the module, a bound
# from a variable. No file name, size or time of the plugin's own says when either changes.
CHOICES = json.loads((Path(__file__).parent / "choices.json").read_text())
Colour = enum.Enum("Colour", {c: c for c in CHOICES}, type=str)


class PaintArgs(BaseModel):
    model_config = ConfigDict(extra="forbid")
    colour: Colour = Field(description="A colour.")


class SizeArgs(BaseModel):
    model_config = ConfigDict(extra="forbid")
    width: int = Field(le=int(os.environ.get("FRESH_MAX_WIDTH", "10")), description="A width.")


class CountArgs(BaseModel):
    model_config = ConfigDict(extra="forbid")
    n: int = Field(description="A count.")


class EchoArgs(BaseModel):
    model_config = ConfigDict(extra="forbid")
    text: str = Field(description="Any text.")


async def echo(args: BaseModel, ctx: Any) -> dict[str, Any]:
    return args.model_dump(mode="json")


@hookimpl
def register_tools(register: Any, plugin: Any) -> None:
    for name, model in (
        ("paint", PaintArgs), ("size", SizeArgs), ("count", CountArgs), ("echo", EchoArgs)
    ):
        register(ToolSpec(name=name, description=f"Echo the {name} arguments.",
                          input_model=model, handler=echo, tier=Tier.READ))
"""

#: What a start prints: the published input schemas of the plugin's tools, and why any failed.
START = """
import json
from gateway.app import build_gateway
from gateway.config import load_config
gw = build_gateway(load_config())
print(json.dumps({
    "tools": {t.name: t.input_schema for t in gw.offered_tools() if t.plugin != "gateway"},
    "failed": [p.reason for p in gw.plugins if p.state.value == "failed"],
}))
"""


class Deployment:
    """The test plugin (module ``fresh_plugin`` and ``choices.json`` beside it), installed as a
    real distribution, a user cache folder, and fresh starts of the gateway."""

    def __init__(self, tmp: Path, source: str = PLUGIN, choices: list[str] | None = None) -> None:
        self.tmp = tmp
        self.cache = tmp / "cache"
        self.site = tmp / "site"
        write_dist(self.site, "fresh-plugin", {"fresh": "fresh_plugin"}, {"fresh_plugin": source})
        self.module = self.site / "fresh_plugin.py"
        self.choices(choices or ["alpha", "beta"])
        self.file = self.cache / "mcp-gateway" / "schemas" / schemacache.FILE

    def choices(self, names: list[str]) -> None:
        (self.site / "choices.json").write_text(json.dumps(names))

    def env(self, **extra: str) -> dict[str, str]:
        env = gateway_env(
            PYTHONPATH=os.pathsep.join([str(self.site), os.environ.get("PYTHONPATH", "")]),
            MCP_GATEWAY_PLUGINS="fresh",
            # Loaded in the gateway's process, whose start prints what it lists: a worker's
            # loader is the same and keeps its schemas in the same file (test_isolated.py).
            MCP_GATEWAY_ISOLATE="none",
            XDG_CACHE_HOME=str(self.cache),
            PYTHONDONTWRITEBYTECODE="1",
        )
        env.update(extra)
        return env

    def start(self, **extra: str) -> tuple[dict[str, Any], str]:
        """A start in a fresh interpreter: what it published, and its stderr."""
        proc = subprocess.run(
            [sys.executable, "-c", START],
            env=self.env(**extra),
            cwd=self.tmp,
            capture_output=True,
            text=True,
            timeout=60,  # a start that hangs on a cache file fails here
        )
        assert proc.returncode == 0, proc.stderr[-2000:]
        result: dict[str, Any] = json.loads(proc.stdout)
        assert result["failed"] == []
        return result["tools"], proc.stderr

    def edit_in_place(self, old: str, new: str) -> None:
        """Edit the module at the same size and put its modification time back."""
        assert len(old) == len(new)
        before = self.module.stat()
        text = self.module.read_text()
        assert text.count(old) == 1
        self.module.write_text(text.replace(old, new))
        os.utime(self.module, ns=(before.st_atime_ns, before.st_mtime_ns))
        after = self.module.stat()
        assert (after.st_size, after.st_mtime_ns) == (before.st_size, before.st_mtime_ns)


# -- every start lists what the plugin publishes now ------------------------------------------


async def _session(deployment: Deployment, transport: str, **env: str) -> dict[str, Any]:
    """One start of ``mcp-gateway serve`` through the official client: the listed input
    schemas, and the answers to calls each tool's model accepts or refuses."""
    calls = {
        "paint alpha": ("paint", {"colour": "alpha"}),
        "paint beta": ("paint", {"colour": "beta"}),
        "paint gamma": ("paint", {"colour": "gamma"}),
        "size 15": ("size", {"width": 15}),
        "count 5": ("count", {"n": 5}),
        "count '5'": ("count", {"n": "5"}),
    }
    out: dict[str, Any] = {}

    async def run(client: Client) -> None:
        out["protocol"] = client.protocol_version
        listed = (await client.list_tools()).tools
        out["tools"] = {t.name: t.input_schema for t in listed if t.name != "gateway_status"}
        for label, (tool, arguments) in calls.items():
            result = await client.call_tool(tool, arguments)
            out[label] = (
                tool_error(result)["code"] if result.is_error else result.structured_content
            )

    with anyio.fail_after(90):
        if transport.startswith("http"):
            with HttpServer(deployment.tmp, deployment.env(**env)) as server:
                async with httpx2.AsyncClient(timeout=20) as http:
                    url = f"{server.url}/mcp"
                    connection = streamable_http_client(url, http_client=http)
                    async with Client(connection, mode=MODES[transport]) as client:
                        await run(client)
        else:
            params = StdioServerParameters(
                command=sys.executable,
                args=["-m", "gateway.cli", "serve"],
                cwd=str(deployment.tmp),
                env=deployment.env(**env),
            )
            async with Client(params, mode=MODES[transport]) as client:
                await run(client)
    return out


#: How each client connects: ``legacy`` sends ``initialize`` (the newest 2025 protocol), ``auto``
#: opens with ``server/discover`` and so speaks 2026-07-28, as Claude Code does.
MODES: dict[str, Any] = {
    "stdio 2025": "legacy",
    "stdio 2026-07-28": "auto",
    "http 2025": "legacy",
    "http 2026-07-28": "auto",
}


@pytest.mark.anyio
@pytest.mark.parametrize("transport", list(MODES))
async def test_a_start_lists_what_the_models_are_now_not_what_the_cache_kept(
    tmp_path: Path, transport: str
):
    deployment = Deployment(tmp_path)
    first = await _session(deployment, transport)
    assert first["protocol"] == ("2025-11-25" if MODES[transport] == "legacy" else "2026-07-28")
    assert first["tools"]["paint"]["properties"]["colour"]["enum"] == ["alpha", "beta"]
    assert first["tools"]["size"]["properties"]["width"]["maximum"] == 10
    assert first["tools"]["count"]["properties"]["n"]["type"] == "integer"
    assert first["paint beta"] == {"colour": "beta"} and first["paint gamma"] == "VALIDATION_ERROR"
    assert first["size 15"] == "VALIDATION_ERROR" and first["count 5"] == {"n": 5}
    assert deployment.file.is_file()  # the next start has a cache that could mislead it

    deployment.choices(["alpha", "gamma"])  # the data file beside the plugin
    deployment.edit_in_place("n: int = Field", "n: str = Field")  # same size, same time
    now = await _session(deployment, transport, FRESH_MAX_WIDTH="20")  # the variable

    assert now["tools"]["paint"]["properties"]["colour"]["enum"] == ["alpha", "gamma"]
    assert now["paint gamma"] == {"colour": "gamma"} and now["paint beta"] == "VALIDATION_ERROR"
    assert now["tools"]["size"]["properties"]["width"]["maximum"] == 20
    assert now["size 15"] == {"width": 15}
    assert now["tools"]["count"]["properties"]["n"]["type"] == "string"
    assert now["count '5'"] == {"n": "5"} and now["count 5"] == "VALIDATION_ERROR"
    assert now["tools"]["echo"] == first["tools"]["echo"]
    # Nothing but the schemas is kept between starts (no record of what a start listed).
    assert [p.name for p in (deployment.cache / "mcp-gateway").iterdir()] == ["schemas"]


# -- what a start reads from the cache folder cannot hurt it ----------------------------------


@pytest.fixture(scope="module")
def primed(tmp_path_factory: pytest.TempPathFactory) -> tuple[Deployment, dict[str, Any], bytes]:
    """A deployment after its first start: what it published and the cache file it wrote."""
    deployment = Deployment(tmp_path_factory.mktemp("primed"))
    published, _ = deployment.start()
    return deployment, published, deployment.file.read_bytes()


def _forged(content: bytes) -> bytes:
    """The file with a published enum changed and its digest made to match: what an entry
    edited by someone who knows the format holds."""
    head, _, body = content.partition(b"\n")
    assert body.count(b'"beta"') == 1
    body = body.replace(b'"beta"', b'"evil"')
    parts = head.split(b" ")
    return b" ".join([*parts[:2], hashlib.sha256(body).hexdigest().encode()]) + b"\n" + body


def _owned_by_another(path: Path, content: bytes) -> None:
    if os.geteuid() != 0:
        pytest.skip("only root can give a file to another user")
    path.write_bytes(_forged(content))
    path.chmod(0o600)
    os.chown(path, 4242, 4242)


def _writable(mode: int) -> Any:
    def make(path: Path, content: bytes) -> None:
        path.write_bytes(_forged(content))
        path.chmod(mode)

    return make


def _linked(path: Path, content: bytes) -> None:
    target = path.parent / "elsewhere.json"
    target.write_bytes(_forged(content))
    target.chmod(0o600)
    path.symlink_to(target)


def _sparse(path: Path, size: int) -> None:
    """A file of ``size`` bytes that takes no room on the disk."""
    path.touch(mode=0o600)
    os.truncate(path, size)


HOSTILE: dict[str, Any] = {
    "fifo": lambda path, _: os.mkfifo(path),
    "symlink to /dev/zero": lambda path, _: path.symlink_to("/dev/zero"),
    "symlink to a forged file": _linked,
    "directory": lambda path, _: path.mkdir(),
    "owned by another user": _owned_by_another,
    "group-writable": _writable(0o620),
    "writable by others": _writable(0o602),
    "huge": lambda path, _: _sparse(path, schemacache.MAX_BYTES + 1),
    "edited in place": lambda path, content: path.write_bytes(content.replace(b"beta", b"evil")),
    "truncated": lambda path, content: path.write_bytes(content[: len(content) // 2]),
    "of another format": lambda path, content: path.write_bytes(content.replace(b" 2 ", b" 1 ", 1)),
    "empty": lambda path, _: path.write_bytes(b""),
}


@pytest.mark.parametrize("kind", list(HOSTILE))
def test_a_hostile_cache_file_is_ignored_with_one_line_and_replaced(
    primed: tuple[Deployment, dict[str, Any], bytes], kind: str
):
    deployment, published, content = primed
    path = deployment.file
    for leftover in path.parent.iterdir():
        if leftover.is_dir() and not leftover.is_symlink():
            leftover.rmdir()
        else:
            leftover.unlink()
    HOSTILE[kind](path, content)

    again, stderr = deployment.start()

    assert again == published  # never the forged or edited schema
    assert again["paint"]["properties"]["colour"]["enum"] == ["alpha", "beta"]
    ignored = [line for line in stderr.splitlines() if "schema cache file ignored" in line]
    assert len(ignored) == 1, stderr
    assert str(deployment.tmp) not in stderr  # no path of this machine in the log
    st = path.lstat()
    assert stat.S_ISREG(st.st_mode) and st.st_uid == os.geteuid()
    assert stat.S_IMODE(st.st_mode) & 0o077 == 0
    assert path.read_bytes() == content  # replaced whole by what the start generated
    assert deployment.start() == (published, "")  # and read quietly by the next start


def test_a_cache_folder_that_cannot_be_written_costs_only_the_reuse(tmp_path: Path):
    deployment = Deployment(tmp_path)
    deployment.cache.write_text("a file where the cache folder would go")
    first, _ = deployment.start()
    assert deployment.start()[0] == first
    assert deployment.cache.read_text() == "a file where the cache folder would go"


def test_concurrent_first_starts_agree_and_leave_one_whole_file(tmp_path: Path):
    deployment = Deployment(tmp_path)
    procs = [
        subprocess.Popen(
            [sys.executable, "-c", START],
            env=deployment.env(),
            cwd=tmp_path,
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
    assert [p.name for p in deployment.file.parent.iterdir()] == [schemacache.FILE]
    assert deployment.start() == (results[0], "")


def test_the_file_never_grows_past_what_a_start_reads(tmp_path: Path, monkeypatch):
    """Earlier deployments' schemas are kept while they fit: a file over the cap would be
    refused by every start."""
    monkeypatch.setattr(schemacache, "MAX_BYTES", 4000)
    schema = {"description": "x" * 100}
    earlier = schemacache.SchemaCache(tmp_path)
    assert earlier.get(Inner) == (schemacache.fingerprint(Inner), None)
    for i in range(20):
        earlier.put(f"earlier-{i}", schema)
    earlier.save()
    assert len(json.loads((tmp_path / schemacache.FILE).read_bytes().partition(b"\n")[2])) == 20

    now = schemacache.SchemaCache(tmp_path)
    assert now.get(Inner)[1] is None  # reads the file
    for i in range(15):
        now.put(f"now-{i}", schema)
    now.save()  # with the earlier ones, over the cap: this start's alone
    content = (tmp_path / schemacache.FILE).read_bytes()
    assert len(content) <= 4000
    assert set(json.loads(content.partition(b"\n")[2])) == {f"now-{i}" for i in range(15)}


# -- what is never cached ---------------------------------------------------------------------

HOOKED = """
from __future__ import annotations
import os
from typing import Any
from pydantic import BaseModel, ConfigDict, Field
from gateway import Tier, ToolSpec, hookimpl


def extra(schema: dict[str, Any]) -> None:  # run while the schema is generated
    schema["examples"] = [os.environ.get("FRESH_EXAMPLE", "none")]


class Hooked(BaseModel):
    model_config = ConfigDict(extra="forbid", json_schema_extra=extra)
    x: int = Field(description="A number.")


class Word(str):
    @classmethod
    def __get_pydantic_core_schema__(cls, source: Any, handler: Any) -> Any:
        from pydantic_core import core_schema
        return core_schema.no_info_after_validator_function(cls, handler(str))

    @classmethod
    def __get_pydantic_json_schema__(cls, schema: Any, handler: Any) -> Any:
        return {**handler(schema), "pattern": os.environ.get("FRESH_PATTERN", "^.*$")}


class Typed(BaseModel):
    model_config = ConfigDict(extra="forbid")
    word: Word = Field(description="A word.")


async def echo(args: BaseModel, ctx: Any) -> dict[str, Any]:
    return args.model_dump(mode="json")


@hookimpl
def register_tools(register: Any, plugin: Any) -> None:
    for name, model in (("hooked", Hooked), ("typed", Typed)):
        register(ToolSpec(name=name, description="Echo.", input_model=model, handler=echo,
                          tier=Tier.READ))
"""


def test_a_model_whose_schema_runs_code_is_generated_at_every_start(tmp_path: Path):
    deployment = Deployment(tmp_path, source=HOOKED)
    first, _ = deployment.start()
    assert (
        first["hooked"]["examples"] == ["none"]
        and first["typed"]["properties"]["word"]["pattern"] == "^.*$"
    )
    later, _ = deployment.start(FRESH_EXAMPLE="some", FRESH_PATTERN="^[a-z]+$")
    assert later["hooked"]["examples"] == ["some"]
    assert later["typed"]["properties"]["word"]["pattern"] == "^[a-z]+$"
    # Nothing of them was written (the file holds only what a fingerprint stands for).
    assert not deployment.file.exists()


class Colour(enum.Enum):
    RED = "red"


class Word(str):
    """A type of a plugin's own: pydantic asks it for its schema."""

    @classmethod
    def __get_pydantic_core_schema__(cls, source: Any, handler: GetCoreSchemaHandler) -> Any:
        return core_schema.no_info_after_validator_function(cls, handler(str))


class Inner(BaseModel):
    y: int = 1


def _model(**changes: Any) -> type[BaseModel]:
    """A fresh model class; ``changes`` alters one thing its schema is generated from."""
    fields: dict[str, Any] = {
        "x": (int, Field(1, ge=0, description="A number.")),
        "colour": (changes.pop("colour", Colour), Field(description="A colour.")),
        "inner": (changes.pop("inner", Inner), Field(description="Nested.")),
    }
    if "x" in changes:
        fields["x"] = changes.pop("x")
    config = ConfigDict(extra="forbid", **changes.pop("config", {}))
    return create_model("Args", __config__=config, __doc__=changes.pop("doc", None), **fields)


def _other_inner() -> type[BaseModel]:
    class Inner(BaseModel):
        y: int = 2

    return Inner


@pytest.mark.parametrize(
    "change",
    [
        {"x": (int, Field(1, ge=0, description="Another number."))},
        {"x": (int, Field(1, ge=1, description="A number."))},
        {"x": (int, Field(2, ge=0, description="A number."))},
        {"x": (str, Field("1", description="A number."))},
        {"x": (int, Field(1, ge=0, description="A number.", examples=[3]))},
        {"colour": enum.Enum("Colour", {"RED": "red", "BLUE": "blue"})},
        {"colour": enum.Enum("Colour", {"RED": "rouge"})},
        {"inner": _other_inner()},
        {"config": {"title": "Arguments"}},
        {"doc": "Now with a docstring."},
    ],
    ids=[
        "description",
        "constraint",
        "default",
        "type",
        "examples",
        "enum member added",
        "enum value",
        "nested model",
        "model config",
        "docstring",
    ],
)
def test_each_input_of_a_schema_changes_the_fingerprint(change: dict[str, Any]):
    base = schemacache.fingerprint(_model())
    assert base is not None and schemacache.fingerprint(_model()) == base  # a copy: the same
    assert schemacache.fingerprint(_model(**change)) not in (None, base)


def test_a_validator_that_declares_its_input_type_changes_the_fingerprint():
    class Plain(BaseModel):
        x: int

    class Declared(BaseModel):
        x: int

        @field_validator("x", mode="before", json_schema_input_type=str)
        @classmethod
        def parse(cls, value: Any) -> Any:
            return value

    Declared.__name__, Declared.__qualname__ = Plain.__name__, Plain.__qualname__
    assert schemacache.fingerprint(Declared) not in (None, schemacache.fingerprint(Plain))


@pytest.mark.parametrize(
    "model",
    [
        create_model("Extra", __config__=ConfigDict(json_schema_extra=lambda s: None), x=(int, 1)),
        create_model("Factory", x=(int, Field(json_schema_extra=lambda s: None))),
        create_model("Own", x=(Word, "w")),
    ],
    ids=["config hook", "field hook", "own type"],
)
def test_a_model_a_fingerprint_cannot_stand_for_has_none(model: type[BaseModel]):
    assert schemacache.fingerprint(model) is None


def test_a_recursive_model_has_a_fingerprint():
    class Node(BaseModel):
        children: list[Node] = []

    Node.model_rebuild()
    assert schemacache.fingerprint(Node) is not None


# -- calls ------------------------------------------------------------------------------------

CALL = """
import json, sys, anyio
from gateway.app import build_gateway
from gateway.config import load_config
gw = build_gateway(load_config())
async def main():
    out = []
    async with gw:
        for args in json.loads(sys.argv[1]):
            r = await gw.call("count", args)
            if r.is_error:
                r.payload["error"].pop("correlation_id", None)  # differs per call
            out.append([r.is_error, r.payload])
    return out
print(json.dumps(anyio.run(main)))
"""


def test_the_first_call_of_a_deferred_model_is_as_strict(tmp_path: Path):
    """Arguments are checked the same whether the model was built to generate its schema (no
    cache) or builds on this first call (schema from the cache)."""
    deployment = Deployment(tmp_path)
    deployment.start()  # writes the cache
    cases = [{"n": 1}, {"n": "5"}, {"n": True}, {"n": 1, "extra": 2}, {}, {"n": 1.5}]

    def calls(**extra: str) -> list[Any]:
        proc = subprocess.run(
            [sys.executable, "-c", CALL, json.dumps(cases)],
            env=deployment.env(**extra),
            cwd=tmp_path,
            capture_output=True,
            text=True,
            timeout=120,
        )
        assert proc.returncode == 0, proc.stderr[-2000:]
        return list(json.loads(proc.stdout))

    cached = calls()  # the model builds on these first calls
    uncached = calls(MCP_GATEWAY_SCHEMA_CACHE="false")
    assert cached == uncached
    assert [is_error for is_error, _ in cached] == [False, True, True, True, True, True]
    assert cached[0][1] == {"n": 1}


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

    def mutate(node: Any) -> None:  # every dict and list, however deep: none is shared
        if isinstance(node, dict):
            for value in list(node.values()):
                mutate(value)
            node.clear()
            node["mutated"] = True
        elif isinstance(node, list):
            for value in node:
                mutate(value)
            node.append("mutated")

    first = notes_schemas()
    pristine = json.dumps(first, sort_keys=True)
    assert '"properties": {"' in pristine  # something nested to change
    for schema in first:
        mutate(schema)
    assert json.dumps(notes_schemas(), sort_keys=True) == pristine


@pytest.mark.parametrize(
    "default",
    ["text", "", 5, -1, 2**70, True, False, None, 1.5, float("inf"), [], {"a": 1}, Colour.RED],
)
def test_schemas_are_generated_as_pydantic_generates_them(default: Any):
    """The gateway's generator skips pydantic's encoding of defaults that are their own JSON;
    every schema is still the one pydantic makes."""
    from gateway.registry import _Schemas

    model = create_model("Defaults", x=(Any, Field(default, description="A default.")))
    assert model.model_json_schema(schema_generator=_Schemas) == model.model_json_schema()
