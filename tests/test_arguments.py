"""Arguments are checked as strictly as the published schema says, and errors say each thing
once."""

from __future__ import annotations

import enum
import json
from datetime import datetime
from typing import Any
from uuid import UUID

import pytest
from pydantic import BaseModel, ConfigDict

from gateway import GatewayError, ToolSpec, hookimpl
from gateway.testing import make_gateway

pytestmark = pytest.mark.anyio

FIRST_PARTY = ["queue", "scrape", "gitea", "orchestrator", "citations"]


class Color(enum.Enum):
    RED = "red"
    BLUE = "blue"


def _wrong_values(prop: dict[str, Any]) -> list[object]:
    """Values the published property schema forbids but pydantic's lax mode would take."""
    kinds = prop.get("type")
    kinds = set(kinds) if isinstance(kinds, list) else {kinds}
    wrong: list[object] = []
    if "integer" in kinds:
        wrong += [True, "5"]
    if "number" in kinds:
        wrong += [False, "1.5"]
    if "boolean" in kinds:
        wrong += [1, "true"]
    if "string" in kinds and "null" not in kinds and "anyOf" not in prop:
        wrong += [None]
    return wrong


async def test_every_first_party_tool_refuses_what_its_published_schema_forbids(tmp_path):
    gw = make_gateway(plugins=FIRST_PARTY, cwd=tmp_path)
    checked = 0
    async with gw:
        for tool in gw.registry.all():
            for name, prop in tool.input_schema.get("properties", {}).items():
                for value in _wrong_values(prop):
                    result = await gw.call(tool.name, {name: value})
                    assert result.code == "VALIDATION_ERROR", (tool.name, name, value)
                    fields = {f["field"] for f in result.payload["error"]["details"]["fields"]}
                    assert name in fields, (tool.name, name, value, result.payload)
                    checked += 1
    assert checked > 100  # the check reached the tools (47 of them)


class _Ctx(BaseModel):
    model_config = ConfigDict(extra="forbid")
    context: dict[str, Any] = {}


class _DeepPlugin:
    @hookimpl
    def register_tools(self, register: Any) -> None:
        async def store(args: _Ctx, ctx: object) -> dict[str, Any]:
            return {"bytes": len(json.dumps(args.context))}  # what a REST body encoder does

        register(
            ToolSpec(name="store", description="d", input_model=_Ctx, handler=store, tier="read")
        )


async def test_arguments_nested_100000_deep_are_a_validation_error_not_an_internal_one(tmp_path):
    deep: Any = 0
    for _ in range(100_000):
        deep = [deep]
    gw = make_gateway(objects={"p": _DeepPlugin()}, entry_points=False, cwd=tmp_path)
    async with gw:
        result = await gw.call("store", {"context": {"x": deep}})
        assert result.code == "VALIDATION_ERROR", result.payload
        assert result.payload["error"]["details"]["fields"] == [
            {"field": "context", "rule": "too_deep"}
        ]
        assert "nested deeper than 64 levels" in result.payload["error"]["message"]
        shallow = await gw.call("store", {"context": {"a": {"b": [1, [2]]}}})
        assert not shallow.is_error


async def test_a_validation_error_says_each_fields_message_once(tmp_path):
    gw = make_gateway(plugins=["queue"], cwd=tmp_path)
    async with gw:
        result = await gw.call("bulk_read_new_jobs", {"limit": 0, "cursor": 5, "bogus": 1})
    text = result.text()
    error = result.payload["error"]
    for fragment in (
        "invalid batch size: must be at least 1",
        "Input should be a valid string",
        "unknown field; it is not a parameter of this tool",
    ):
        assert text.count(fragment) == 1, (fragment, text)
        assert fragment in error["message"]
    assert error["details"]["fields"] == [
        {"field": "limit", "rule": "value_error"},
        {"field": "cursor", "rule": "string_type"},
        {"field": "bogus", "rule": "extra_forbidden"},
    ]


class _ManyPlugin:
    @hookimpl
    def register_tools(self, register: Any) -> None:
        from pydantic import create_model

        many = create_model(  # type: ignore[call-overload]
            "Many",
            __config__=ConfigDict(extra="forbid"),
            **{f"setting_number_{i}": (int, 0) for i in range(30)},
        )

        async def take(args: BaseModel, ctx: object) -> dict[str, Any]:
            return {}

        register(
            ToolSpec(name="take", description="d", input_model=many, handler=take, tier="read")
        )


async def test_fields_the_message_has_no_room_for_keep_their_message_in_details(tmp_path):
    gw = make_gateway(objects={"p": _ManyPlugin()}, entry_points=False, cwd=tmp_path)
    async with gw:
        result = await gw.call("take", {f"setting_number_{i}": "x" for i in range(30)})
    error = result.payload["error"]
    fields = error["details"]["fields"]
    assert len(fields) == 20
    in_message = [f for f in fields if "message" not in f]
    assert in_message and len(in_message) < 20
    assert "more in details" in error["message"] and len(error["message"]) <= 600
    for f in fields:  # each message said once, in the message or in details
        assert ("message" in f) != (f"{f['field']}: " in error["message"])


class _FailPlugin:
    @hookimpl
    def register_tools(self, register: Any) -> None:
        class In(BaseModel):
            model_config = ConfigDict(extra="forbid")

        async def boom(args: In, ctx: object) -> dict[str, Any]:
            raise RuntimeError("bug")

        register(ToolSpec(name="boom", description="d", input_model=In, handler=boom, tier="read"))


async def test_internal_and_breaker_errors_say_each_thing_once(tmp_path):
    gw = make_gateway(objects={"p": _FailPlugin()}, entry_points=False, cwd=tmp_path)
    async with gw:
        result = await gw.call("boom")
    cid = result.payload["error"]["correlation_id"]
    assert result.text().count(cid) == 1

    from gateway.health import HealthMonitor

    health = HealthMonitor(gw.sanitizer, breaker_failures=1)
    health.breaker("api").record_failure()
    with pytest.raises(GatewayError) as caught:
        health.gate("api")
    assert caught.value.details is None
    assert "retry after" in caught.value.message and "'api'" in caught.value.message


class _Kinds(BaseModel):
    model_config = ConfigDict(extra="forbid")
    ref: UUID
    when: datetime | None = None
    color: Color = Color.RED
    count: int = 0
    ratio: float = 1.0
    flag: bool = False


class _KindsPlugin:
    @hookimpl
    def register_tools(self, register: Any) -> None:
        async def take(args: _Kinds, ctx: object) -> dict[str, Any]:
            return args.model_dump(mode="json")

        register(
            ToolSpec(name="kinds", description="d", input_model=_Kinds, handler=take, tier="read")
        )


async def test_strings_the_schema_allows_still_become_uuids_dates_and_enums(tmp_path):
    gw = make_gateway(objects={"p": _KindsPlugin()}, entry_points=False, cwd=tmp_path)
    ref = "123e4567-e89b-42d3-a456-426614174000"
    async with gw:
        ok = await gw.call(
            "kinds",
            {"ref": ref, "when": "2026-01-02T03:04:05Z", "color": "blue", "count": 5.0, "ratio": 2},
        )
        assert not ok.is_error, ok.payload
        assert ok.payload["color"] == "blue" and ok.payload["count"] == 5
        refused = await gw.call(
            "kinds", {"ref": ref, "count": True, "ratio": "1.5", "flag": 1, "when": None}
        )
    assert [(f["field"], f["rule"]) for f in refused.payload["error"]["details"]["fields"]] == [
        ("count", "int_type"),
        ("ratio", "float_type"),
        ("flag", "bool_type"),
        ("when", "null_not_allowed"),
    ]
