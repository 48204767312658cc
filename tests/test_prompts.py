"""Prompts: registered like tools, checked, listed by policy, rendered safely; instructions."""

from __future__ import annotations

from typing import Any

import pytest
from mcp import MCPError
from pydantic import BaseModel, ConfigDict, Field

from gateway import Mutation, PromptContext, PromptSpec, Tier, ToolSpec, hookimpl
from gateway.instructions import MAX_INSTRUCTIONS_CHARS
from gateway.testing import gateway_client, make_gateway

pytestmark = pytest.mark.anyio


class Empty(BaseModel):
    model_config = ConfigDict(extra="forbid")


class BatchArgs(BaseModel):
    model_config = ConfigDict(extra="forbid")
    batch_size: int = Field(20, ge=1, le=100, description="Jobs per batch.")
    topic: str = Field(description="What to look for.")


async def _read(args: Empty, ctx: Any) -> dict[str, Any]:
    return {}


def _tool(name: str, tier: str = "read") -> ToolSpec:
    mutation = (
        Mutation("changes it", "nothing", reversible=True, destructive=False, idempotent=True)
        if tier == "mutation"
        else None
    )
    return ToolSpec(
        name=name,
        description="A tool.",
        input_model=Empty,
        handler=_read,
        tier=tier,
        mutation=mutation,
    )


def triage(args: BatchArgs, ctx: PromptContext) -> str:
    steps = [f"1. read_batch(limit={args.batch_size}) and look for {args.topic}."]
    if ctx.has("write_status"):
        steps.append("2. write_status for each decision.")
    else:
        steps.append("2. Report the decisions; this deployment cannot write them.")
    return "\n".join(steps)


class Triage:
    """Triage job postings; its ids are job-board ids."""

    @hookimpl
    def register_tools(self, register: Any) -> None:
        register(_tool("read_batch"))
        register(_tool("write_status", "mutation"))

    @hookimpl
    def register_prompts(self, register: Any) -> None:
        register(
            PromptSpec(
                name="triage",
                title="Triage",
                description="Read a batch and decide.",
                arguments=BatchArgs,
                render=triage,
                requires=("read_batch",),
            )
        )


def _gw(tmp_path: Any, **kw: Any) -> Any:
    objects = kw.pop("objects", {"triage": Triage()})
    return make_gateway(objects=objects, entry_points=False, env={}, cwd=tmp_path, **kw)


async def test_prompts_are_listed_and_rendered_through_the_official_client(tmp_path):
    gw = _gw(tmp_path)
    async with gw, gateway_client(gw) as client:
        listed = (await client.list_prompts()).prompts
        got = await client.get_prompt("triage", {"batch_size": "5", "topic": "python"})
    assert [(p.name, p.title) for p in listed] == [("triage", "Triage")]
    args = {a.name: a.required for a in listed[0].arguments}
    assert args == {"batch_size": False, "topic": True}
    text = got.messages[0].content.text
    assert got.messages[0].role == "user"
    assert "read_batch(limit=5)" in text and "write_status" in text


async def test_read_only_deployments_get_prompts_that_name_no_hidden_tool(tmp_path):
    gw = _gw(tmp_path, read_only=True)
    text = await gw.get_prompt("triage", {"topic": "go"})
    assert "write_status" not in text and "cannot write" in text


async def test_a_prompt_whose_required_tools_are_hidden_is_not_offered(tmp_path):
    gw = _gw(tmp_path, deny_tools=["read_batch"])
    async with gw, gateway_client(gw) as client:
        assert (await client.list_prompts()).prompts == []
        with pytest.raises(MCPError) as err:
            await client.get_prompt("triage", {"topic": "x"})
    assert "unknown prompt" in str(err.value)


async def test_bad_prompt_arguments_are_a_clear_protocol_error(tmp_path):
    gw = _gw(tmp_path)
    async with gw, gateway_client(gw) as client:
        with pytest.raises(MCPError) as missing:
            await client.get_prompt("triage", {})
        with pytest.raises(MCPError) as big:
            await client.get_prompt("triage", {"topic": "x", "batch_size": "1000"})
        with pytest.raises(MCPError) as extra:
            await client.get_prompt("triage", {"topic": "x", "colour": "red"})
    assert "VALIDATION_ERROR" in str(missing.value) and "topic" in str(missing.value)
    assert "batch_size" in str(big.value)
    assert "colour" in str(extra.value)


async def test_a_render_that_raises_gives_a_generic_error_and_leaks_nothing(tmp_path, caplog):
    def broken(args: Empty, ctx: PromptContext) -> str:
        raise RuntimeError("boom at /srv/secret/place with token s3cr3t-value-1234")

    class Broken:
        @hookimpl
        def register_tools(self, register: Any) -> None:
            register(_tool("anything"))

        @hookimpl
        def register_prompts(self, register: Any) -> None:
            register(PromptSpec(name="broken", description="B.", arguments=Empty, render=broken))

    gw = _gw(tmp_path, objects={"broken": Broken()})
    async with gw, gateway_client(gw) as client:
        with pytest.raises(MCPError) as err:
            await client.get_prompt("broken", {})
        # the process and the other requests are fine
        assert [t.name for t in (await client.list_tools()).tools]
    assert "could not be rendered" in str(err.value)
    assert "/srv/secret" not in str(err.value) and "s3cr3t" not in str(err.value)


async def test_secrets_are_redacted_from_rendered_text(tmp_path):
    def leaky(args: Empty, ctx: PromptContext) -> str:
        return "use Bearer abc123def456ghi789 to call"

    class Leaky:
        @hookimpl
        def register_prompts(self, register: Any) -> None:
            register(PromptSpec(name="leaky", description="L.", arguments=Empty, render=leaky))

    gw = _gw(tmp_path, objects={"leaky": Leaky()})
    text = await gw.get_prompt("leaky", {})
    assert "abc123def456ghi789" not in text


@pytest.mark.parametrize(
    ("spec", "why"),
    [
        (PromptSpec(name="bad name", description="x", arguments=Empty, render=triage), "name"),
        (PromptSpec(name="p", description=" ", arguments=Empty, render=triage), "description"),
        (PromptSpec(name="p", description="x", arguments=BaseModel, render=triage), "forbid"),
        ("not a spec", "PromptSpec"),
    ],
)
def test_bad_prompt_declarations_skip_the_plugin_with_the_reason(tmp_path, spec, why):
    class Bad:
        @hookimpl
        def register_prompts(self, register: Any) -> None:
            register(spec)

    gw = _gw(tmp_path, objects={"bad": Bad(), "triage": Triage()})
    assert gw.plugin("bad").state.value == "failed"
    assert (
        "invalid prompt declaration" in gw.plugin("bad").reason and why in gw.plugin("bad").reason
    )
    assert gw.plugin("triage").state.value == "loaded"


def test_a_prompt_name_taken_by_another_plugin_skips_the_second(tmp_path):
    class Again(Triage):
        @hookimpl
        def register_tools(self, register: Any) -> None:
            register(_tool("other_tool"))

    gw = _gw(tmp_path, objects={"a": Triage(), "b": Again()})
    assert gw.plugin("a").state.value == "loaded"
    assert gw.plugin("b").state.value == "failed" and "triage" in gw.plugin("b").reason
    assert gw.registry.get("other_tool") is None  # the plugin's tools went with it


async def test_instructions_name_each_plugin_its_workflows_and_stay_under_the_limit(tmp_path):
    gw = _gw(tmp_path, server_name="jobs gw")
    async with gw, gateway_client(gw) as client:
        served = client.instructions
    text = gw.instructions()
    assert served == text
    assert "- triage: Triage job postings; its ids are job-board ids." in text
    assert "/mcp__jobs_gw__<name>" in text and "triage(batch_size, topic)" in text
    assert len(text) <= MAX_INSTRUCTIONS_CHARS

    class Wordy:
        """Does a great many things. """ + "word " * 600

        @hookimpl
        def register_tools(self, register: Any) -> None:
            register(_tool("wordy_tool"))

    many = {f"p{i}": Wordy() for i in range(12)}
    assert len(_gw(tmp_path, objects=many).instructions()) <= MAX_INSTRUCTIONS_CHARS


def test_the_tier_of_tools_is_untouched_by_prompts(tmp_path):
    gw = _gw(tmp_path)
    assert gw.registry.get("write_status").tier is Tier.MUTATION
    assert [r["prompts"] for r in (p.as_dict() for p in gw.plugins) if r["name"] == "triage"] == [
        ["triage"]
    ]


def test_claude_config_lists_the_workflows_as_slash_commands(tmp_path):
    from gateway.claude import claude_config

    cc = claude_config(_gw(tmp_path), "jobs gw")
    assert cc.as_dict()["prompts"] == [
        {"command": "/mcp__jobs_gw__triage", "description": "Read a batch and decide."}
    ]
    assert "#   /mcp__jobs_gw__triage: Read a batch and decide." in cc.text()
