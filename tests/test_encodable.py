"""A lone surrogate in anything a plugin or a backend returns never stops a transport."""

from __future__ import annotations

import json
import os

import pytest
from conftest import gateway_env
from wire import HttpServer, StdioServer

from gateway.errors import encodable, encodable_data
from gateway.testing import make_gateway

LONE = "\ud800"
PLUGIN = """
from __future__ import annotations
from pydantic import BaseModel, ConfigDict
from gateway import ErrorCode, GatewayError, HealthCheck, ToolSpec, hookimpl

class In(BaseModel):
    model_config = ConfigDict(extra="forbid")

class Out(BaseModel):
    version: str
    tags: list[str]

async def as_dict(args, ctx):
    return {"version": "1.25.4\\ud800", "keys": {"k\\udfff": ["ok", "x\\ud83d\\ude00"]}}

async def as_model(args, ctx):
    return Out(version="1.25.4\\ud800", tags=["\\udc80"])

async def as_error(args, ctx):
    raise GatewayError(ErrorCode.CONFLICT, "state \\ud800 wrong", details={"k\\ud801": "v\\ud802"})

async def version():
    return "gitea 1.25.4\\ud800"

@hookimpl
def register_tools(register):
    for name, handler, out in (
        ("sur_dict", as_dict, None), ("sur_model", as_model, Out), ("sur_error", as_error, None)
    ):
        register(ToolSpec(name=name, description="d", input_model=In, output_model=out,
                          handler=handler, tier="read"))

@hookimpl
def register_health_checks(register):
    register(HealthCheck(name="version", check=version))
"""


@pytest.fixture
def surrogates(plugin_site):
    plugin_site("gwfx-sur", {"sur": "gwfx_sur"}, {"gwfx_sur": PLUGIN})


def test_encodable_replaces_lone_surrogates_and_joins_pairs():
    assert encodable("plain ascii") == "plain ascii"
    assert encodable("déjà vu €") == "déjà vu €"
    assert encodable("a\ud800b") == "a\ufffdb"
    assert encodable("\ud83d\ude00") == "\U0001f600"
    assert encodable_data({"k\udfff": ["\ud800", 1, None]}) == {"k\ufffd": ["\ufffd", 1, None]}


def _all_encodable(text: str) -> None:
    text.encode("utf-8")  # raises on a lone surrogate


@pytest.mark.anyio
async def test_results_errors_and_health_details_leave_the_pipeline_encodable(surrogates, tmp_path):
    gw = make_gateway(plugins=["sur"], cwd=tmp_path)
    async with gw:
        for tool in ("sur_dict", "sur_model", "sur_error", "gateway_status"):
            result = await gw.call(tool)
            _all_encodable(result.text())
            _all_encodable(json.dumps(result.payload, ensure_ascii=False))
            assert "\ufffd" in result.text(), tool
        model = await gw.call("sur_model")
        assert model.payload == {"version": "1.25.4\ufffd", "tags": ["\ufffd"]}
        joined = await gw.call("sur_dict")
        assert joined.payload["keys"] == {"k\ufffd": ["ok", "x\U0001f600"]}


@pytest.mark.e2e
def test_a_surrogate_in_a_result_or_health_detail_does_not_end_the_stdio_server(
    surrogates, tmp_path
):
    env = gateway_env(PYTHONPATH=os.environ["PYTHONPATH"], MCP_GATEWAY_PLUGINS="sur")
    with StdioServer(tmp_path, env) as server:
        status = server.call("gateway_status", {"check_health": True})
        [check] = next(p for p in status["structuredContent"]["plugins"] if p["name"] == "sur")[
            "health"
        ]
        assert check["detail"] == "gitea 1.25.4\ufffd"
        for tool in ("sur_dict", "sur_model", "sur_error"):
            result = server.call(tool)
            assert "\ufffd" in result["content"][0]["text"], tool
        assert "tools" in server.request("tools/list")["result"]  # still serving


@pytest.mark.e2e
def test_a_surrogate_in_a_result_is_a_200_over_http(surrogates, tmp_path):
    env = gateway_env(PYTHONPATH=os.environ["PYTHONPATH"], MCP_GATEWAY_PLUGINS="sur")
    with HttpServer(tmp_path, env) as server:
        for tool in ("gateway_status", "sur_dict", "sur_model", "sur_error"):
            result = server.call(tool)
            assert "\ufffd" in result["content"][0]["text"], tool


def test_a_tool_whose_description_holds_a_lone_surrogate_is_refused_at_registration(
    plugin_site, tmp_path
):
    bad = PLUGIN.replace('description="d"', 'description="broken \\ud800 text"')
    plugin_site("gwfx-surdesc", {"surdesc": "gwfx_surdesc"}, {"gwfx_surdesc": bad})
    gw = make_gateway(plugins=["surdesc"], cwd=tmp_path)
    record = gw.plugin("surdesc")
    assert record is not None and record.state.value == "failed"
    assert "lone surrogate" in (record.reason or "")
    assert [t.name for t in gw.visible_tools()] == ["gateway_status"]
