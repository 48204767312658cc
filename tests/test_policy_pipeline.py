"""Policy, validation, shaping, cancellation and audit, in-process."""

from __future__ import annotations

import json

import anyio
import pytest
from fixture_plugins import WORKER

from gateway.testing import gateway_client, make_gateway, tool_error

pytestmark = pytest.mark.anyio


async def test_deny_list_hides_named_tools_and_refuses_calls(tmp_path):
    gw = make_gateway(plugins=["notes"], deny_tools=["notes_delete", "notes_search"], cwd=tmp_path)
    async with gw, gateway_client(gw) as client:
        names = {t.name for t in (await client.list_tools()).tools}
        assert names == {"gateway_status", "notes_add"}
        for tool in ("notes_delete", "notes_search"):
            r = await client.call_tool(tool, {"id": 1} if tool == "notes_delete" else {})
            assert tool_error(r)["code"] == "PERMISSION_DENIED"
            assert "deny_tools" in tool_error(r)["message"]


async def test_read_only_from_the_config_file(tmp_path):
    (tmp_path / "gw.toml").write_text('[gateway]\nread_only = true\nplugins = ["notes"]\n')
    from gateway.app import build_gateway
    from gateway.config import load_config

    gw = build_gateway(load_config(tmp_path / "gw.toml", env={}, cwd=tmp_path))
    assert {t.name for t in gw.visible_tools()} == {"gateway_status", "notes_search"}


async def test_validation_happens_before_the_handler_and_names_each_item(tmp_path):
    gw = make_gateway(plugins=["notes"], cwd=tmp_path)
    async with gw:
        r = await gw.call("notes_add", {"text": "ok", "tags": ["a", 3, None]})
        fields = [f["field"] for f in r.payload["error"]["details"]["fields"]]
        assert fields == ["tags.1", "tags.2"]
        assert (await gw.call("notes_add", None)).code == "VALIDATION_ERROR"  # text is required
        huge = await gw.call("notes_add", {"text": "s3cret" * 10_000})
        assert huge.code == "VALIDATION_ERROR"
        assert "s3cret" not in huge.text()  # the input is never echoed
    assert not (tmp_path / "data" / "notes.json").exists()


async def test_cancellation_reaches_the_handler(tmp_path, plugin_site):
    plugin_site("gwfx-worker", {"worker": "gwfx_worker"}, {"gwfx_worker": WORKER})
    import gwfx_worker  # type: ignore[import-not-found]

    gw = make_gateway(plugins=["worker"], cwd=tmp_path)
    async with gw:
        with anyio.move_on_after(0.2):
            await gw.call("sleepy", {"seconds": 10})
    assert gwfx_worker.STATE == {"finished": 0, "cancelled": 1}


async def test_handler_results_that_break_the_output_model_are_internal_errors(tmp_path):
    from pydantic import BaseModel, ConfigDict

    from gateway import ToolSpec, hookimpl

    class In(BaseModel):
        model_config = ConfigDict(extra="forbid")

    class Out(BaseModel):
        count: int

    class Plugin:
        @hookimpl
        def register_tools(self, register):  # type: ignore[no-untyped-def]
            async def wrong(args, ctx):  # type: ignore[no-untyped-def]
                return {"count": "not a number"}

            async def not_json(args, ctx):  # type: ignore[no-untyped-def]
                return {"when": object()}

            register(
                ToolSpec(
                    name="wrong",
                    description="d",
                    input_model=In,
                    output_model=Out,
                    handler=wrong,
                    tier="read",
                )
            )
            register(
                ToolSpec(
                    name="not_json", description="d", input_model=In, handler=not_json, tier="read"
                )
            )

    gw = make_gateway(objects={"p": Plugin()}, entry_points=False, cwd=tmp_path)
    async with gw:
        for name in ("wrong", "not_json"):
            r = await gw.call(name)
            assert r.code == "INTERNAL_ERROR" and r.payload["error"]["correlation_id"]


async def test_audit_log_records_failed_mutations_too(tmp_path):
    gw = make_gateway(plugins=["notes"], cwd=tmp_path)
    async with gw:
        await gw.call("notes_delete", {"id": 7})
    lines = [json.loads(x) for x in (tmp_path / "audit.jsonl").read_text().splitlines()]
    assert [x["outcome"] for x in lines] == ["STARTED", "NOT_FOUND"]
    assert lines[0]["correlation_id"] == lines[1]["correlation_id"]
    assert lines[1]["duration_ms"] >= 0


async def test_the_conformance_kit_reports_a_plugin_that_does_not_load(plugin_site, tmp_path):
    from fixture_plugins import BROKEN

    from gateway.testing import assert_plugin_conforms

    plugin_site("gwfx-broken", {"no_tier": "gwfx_no_tier"}, {"gwfx_no_tier": BROKEN["no_tier"]})
    with pytest.raises(AssertionError, match="did not load: invalid tool declaration"):
        await assert_plugin_conforms("no_tier", cwd=tmp_path)


async def test_error_details_are_sanitized_like_messages(tmp_path):
    from pydantic import BaseModel, ConfigDict

    from gateway import ErrorCode, GatewayError, ToolSpec, hookimpl

    class In(BaseModel):
        model_config = ConfigDict(extra="forbid")

    class Plugin:
        @hookimpl
        def register_tools(self, register):  # type: ignore[no-untyped-def]
            async def leak(args, ctx):  # type: ignore[no-untyped-def]
                raise GatewayError(
                    ErrorCode.CONFLICT,
                    "wrong state",
                    details={
                        "sql": ["SELECT secret FROM vault"],
                        "at": "/srv/app/private/x.py",
                        "n": 3,
                    },
                )

            register(
                ToolSpec(name="leak", description="d", input_model=In, handler=leak, tier="read")
            )

    gw = make_gateway(objects={"p": Plugin()}, entry_points=False, cwd=tmp_path)
    async with gw:
        r = await gw.call("leak")
    details = r.payload["error"]["details"]
    assert details == {"sql": ["[SQL removed]"], "at": "…/x.py", "n": 3}


async def test_plugins_sanitize_text_in_successful_results_with_the_gateways_secrets(tmp_path):
    from pydantic import BaseModel, ConfigDict

    from gateway import ToolSpec, hookimpl

    class In(BaseModel):
        model_config = ConfigDict(extra="forbid")

    class Plugin:
        @hookimpl
        def register_tools(self, register):  # type: ignore[no-untyped-def]
            async def batch(args, ctx):  # type: ignore[no-untyped-def]
                raw = "item 2 failed: token tok-abcdef-123456 at /srv/app/data/x.db"
                return {"items": [{"ok": True}, {"ok": False, "error": ctx.sanitize(raw)}]}

            register(
                ToolSpec(name="batch", description="d", input_model=In, handler=batch, tier="read")
            )

    gw = make_gateway(
        objects={"p": Plugin()},
        entry_points=False,
        env={"X_API_TOKEN": "tok-abcdef-123456"},
        cwd=tmp_path,
    )
    async with gw:
        r = await gw.call("batch")
    assert r.payload["items"][1]["error"] == "item 2 failed: token [REDACTED] at …/x.db"


def test_published_schemas_drop_generated_titles_but_keep_fields_named_title():
    from pydantic import BaseModel, ConfigDict, Field

    from gateway.registry import compact_schema

    class Item(BaseModel):
        title: str = Field(description="The item's title.")

    class In(BaseModel):
        model_config = ConfigDict(extra="forbid")
        items: list[Item]

    schema = compact_schema(In.model_json_schema())
    assert "title" not in schema and "$defs" not in schema
    item = schema["properties"]["items"]["items"]
    assert "title" not in item and item["properties"]["title"] == {
        "description": "The item's title.",
        "type": "string",
    }


def test_compaction_keeps_recursive_definitions_and_the_same_verdicts():
    from jsonschema import Draft202012Validator
    from pydantic import BaseModel

    from gateway.registry import compact_schema

    class Node(BaseModel):
        name: str
        note: str | None = None
        children: list[Node] = []

    class Tree(BaseModel):
        root: Node
        size: int | None

    original = Tree.model_json_schema()
    compact = compact_schema(original)
    assert set(compact["$defs"]) == {"Node"}  # recursive: kept as a reference
    assert compact["properties"]["size"]["type"] == ["integer", "null"]
    docs = [
        {"root": {"name": "a", "children": [{"name": "b", "note": None}]}, "size": 2},
        {"root": {"name": "a", "children": [{"name": 3}]}, "size": 2},
        {"root": {"name": "a"}, "size": "2"},
        {"root": {"name": "a", "note": 5}, "size": None},
        {"size": None},
    ]
    a, b = Draft202012Validator(compact), Draft202012Validator(original)
    assert (
        [a.is_valid(d) for d in docs]
        == [b.is_valid(d) for d in docs]
        == [True, False, False, False, False]
    )


async def test_a_mutation_is_refused_when_its_audit_line_cannot_be_written(tmp_path, caplog):
    gw = make_gateway(
        plugins=["notes"], audit_log=str(tmp_path / "not-a-dir" / "audit.jsonl"), cwd=tmp_path
    )
    # After the start, which refuses a log that cannot be written (test_config_errors).
    (tmp_path / "not-a-dir").write_text("a file where the audit folder should be")
    async with gw:
        refused = await gw.call("notes_add", {"text": "must not be stored"})
        read = await gw.call("notes_search", {})
    assert refused.code == "INTERNAL_ERROR"
    assert "audit log cannot be written" in refused.payload["error"]["message"]
    assert "nothing was done" in refused.payload["error"]["message"]
    assert not (tmp_path / "data" / "notes.json").exists()  # the handler never ran
    assert not read.is_error  # read tools are not audited and keep working
    cid = refused.payload["error"]["correlation_id"]
    assert any(
        "audit log audit.jsonl cannot be written" in r.getMessage() and cid in r.getMessage()
        for r in caplog.records
    )


@pytest.mark.parametrize(
    ("setting", "confirmed"),
    [
        (None, set()),  # default: the client's ask rules decide; headless approvers work
        ("destructive", {"notes_delete"}),
        ("mutations", {"notes_delete", "notes_add"}),
        ("none", set()),
    ],
)
async def test_per_call_confirmation_is_published_for_the_chosen_tiers(
    tmp_path, setting, confirmed
):
    settings = {} if setting is None else {"confirm_each_call": setting}
    gw = make_gateway(plugins=["notes"], cwd=tmp_path, **settings)
    async with gw, gateway_client(gw) as client:
        tools = {t.name: t for t in (await client.list_tools()).tools}
    flagged = {
        name
        for name, tool in tools.items()
        if (tool.meta or {}).get("anthropic/requiresUserInteraction") is True
    }
    assert flagged == confirmed
    assert "anthropic/requiresUserInteraction" not in (tools["notes_search"].meta or {})


def test_confirm_each_call_comes_from_the_file_or_the_environment_and_is_checked(tmp_path):
    from gateway.config import ConfigError, load_config

    (tmp_path / "gw.toml").write_text('[gateway]\nconfirm_each_call = "mutations"\n')
    assert load_config(tmp_path / "gw.toml", env={}, cwd=tmp_path).confirm_each_call == "mutations"
    env = {"MCP_GATEWAY_CONFIRM_EACH_CALL": "NONE"}
    assert load_config(tmp_path / "gw.toml", env=env, cwd=tmp_path).confirm_each_call == "none"
    with pytest.raises(ConfigError, match="destructive, mutations, none"):
        load_config(env={"MCP_GATEWAY_CONFIRM_EACH_CALL": "always"}, cwd=tmp_path)


async def test_confirmation_keeps_the_tools_own_meta(tmp_path):
    from pydantic import BaseModel, ConfigDict

    from gateway import Mutation, ToolSpec, hookimpl

    class In(BaseModel):
        model_config = ConfigDict(extra="forbid")

    class Plugin:
        @hookimpl
        def register_tools(self, register):  # type: ignore[no-untyped-def]
            async def wipe(args, ctx):  # type: ignore[no-untyped-def]
                return {}

            register(
                ToolSpec(
                    name="wipe",
                    description="Wipe.",
                    input_model=In,
                    handler=wipe,
                    tier="mutation",
                    max_result_chars=100_000,
                    mutation=Mutation("deletes it all", "nothing", False, True, True),
                )
            )

    gw = make_gateway(
        objects={"p": Plugin()}, entry_points=False, cwd=tmp_path, confirm_each_call="destructive"
    )
    async with gw, gateway_client(gw) as client:
        [wipe] = [t for t in (await client.list_tools()).tools if t.name == "wipe"]
    assert wipe.meta == {
        "anthropic/maxResultSizeChars": 100_000,
        "anthropic/requiresUserInteraction": True,
    }


def test_optional_arguments_are_published_without_null_and_refuse_it_as_published(
    gateway_factory,
):
    from pydantic import BaseModel, ConfigDict, Field

    from gateway import Tier, ToolSpec, hookimpl

    class In(BaseModel):
        model_config = ConfigDict(extra="forbid")
        ref: str | None = Field(None, max_length=10, description="A ref.")
        limit: int | None = None
        tags: list[str] | None = None
        keep: str | None = "x"  # a default other than null: untouched

    async def handler(args: In, ctx: object) -> dict[str, object]:
        return {"ref": args.ref}

    class P:
        @hookimpl
        def register_tools(self, register: object) -> None:
            register(
                ToolSpec(
                    name="t", description="T.", input_model=In, handler=handler, tier=Tier.READ
                )
            )  # type: ignore[operator]

    gw = gateway_factory(objects={"p": P()}, entry_points=False)
    props = gw.registry.get("t").input_schema["properties"]
    assert props["ref"] == {"description": "A ref.", "maxLength": 10, "type": "string"}
    assert props["limit"] == {"type": "integer"}
    assert props["tags"] == {"items": {"type": "string"}, "type": "array"}
    assert props["keep"] == {"default": "x", "type": ["string", "null"]}
    import anyio

    assert anyio.run(gw.call, "t", {}).payload == {"ref": None}  # left out: the default
    refused = anyio.run(gw.call, "t", {"ref": None, "limit": None, "tags": None, "keep": None})
    fields = refused.payload["error"]["details"]["fields"]
    assert [(f["field"], f["rule"]) for f in fields] == [
        ("ref", "null_not_allowed"),
        ("limit", "null_not_allowed"),
        ("tags", "null_not_allowed"),
    ]  # keep publishes null, so null is fine there
