"""Isolated plugins (issue 39): a plugin in a worker process of its own is offered exactly as
in process, is handed only its own settings, and whatever it does costs only itself.

Every worker here is a real ``python -m gateway.worker`` process, the plugin a real installed
distribution (``plugin_site``); the gateways are built in this process with the test kit (the
worker's faults would end this process, were they not isolated) or started as ``mcp-gateway
serve`` with the official client.
"""

from __future__ import annotations

import json
import logging
import os
import re
import sys
from pathlib import Path
from typing import Any

import anyio
import pytest
from conftest import gateway_env
from fixture_plugins import _HEADER as _FIXTURE_HEADER
from fixture_plugins import FAULTS, GOOD, HAZARDS, ISOLATED, OVERSIZED, PATCHER, SVC, TAMPERER
from mcp import Client, MCPError, StdioServerParameters
from test_stopping import HOOKS, RAISES, _raising_plugin
from wire import run_cli

from gateway.app import Gateway
from gateway.isolation import GIVE_UP_SECONDS, WorkerRecord
from gateway.plugins import FIRST_PARTY, PluginState
from gateway.testing import gateway_client, make_gateway, tool_error

pytestmark = pytest.mark.anyio

SECRET = "iso-tok-5d1e8c0f7a"
GATEWAY_TOKEN = "gw-token-0b9c8d7e6f5a4b3c"


@pytest.fixture
def iso(plugin_site: Any) -> None:
    plugin_site("gwfx-iso", {"iso": "gwfx_iso"}, {"gwfx_iso": ISOLATED})


def _env(**extra: str) -> dict[str, str]:
    return {
        **os.environ,
        "ISO_GREETING": "hi",
        "ISO_TOKEN": SECRET,
        "SVC_URL": "http://127.0.0.1:9",
        "MCP_GATEWAY_TOKEN": GATEWAY_TOKEN,
        "GITEA_TOKEN": "gitea-tok-1234567890",
        **extra,
    }


def _gateway(tmp_path: Path, plugins: list[str], isolate: Any, **settings: Any) -> Gateway:
    settings.setdefault("env", _env())
    return make_gateway(
        plugins=plugins,
        isolate=isolate,
        cwd=tmp_path,
        plugin_config={"iso": {"limit": 4}},
        **settings,
    )


def _worker(gw: Gateway, name: str) -> WorkerRecord:
    record = gw.plugin(name)
    assert isinstance(record, WorkerRecord), record
    return record


def _pid(gw: Gateway, name: str) -> int | None:
    upstream = _worker(gw, name).upstream
    assert upstream is not None
    return upstream.process.pid if upstream.process is not None else None


async def _up_again(gw: Gateway, name: str, old_pid: int | None, timeout: float = 30) -> None:
    """Until the plugin's worker is up again, in another process than ``old_pid``."""
    upstream = _worker(gw, name).upstream
    assert upstream is not None
    with anyio.fail_after(timeout):
        while upstream.session is None or _pid(gw, name) == old_pid:
            await anyio.sleep(0.05)


# --- offered exactly as in process ------------------------------------------------------------


async def _published(gw: Gateway) -> dict[str, Any]:
    async with gateway_client(gw) as client:
        tools = (await client.list_tools()).tools
        prompts = (await client.list_prompts()).prompts
        plan = await client.get_prompt("iso_plan", {"topic": "jobs", "words": "all of them"})
        # Claude Code passes one word per argument: the free-text one points at the whole text.
        as_claude = await gw.prompt(
            "iso_plan", {"topic": "jobs", "words": "all"}, client="claude-code"
        )
        calls = {
            "echo": await client.call_tool("iso_echo", {"text": "there", "times": 2}),
            "fail": await client.call_tool("iso_fail", {}),
            "too long": await client.call_tool("iso_echo", {"text": "x" * 51}),
            "unknown field": await client.call_tool("iso_echo", {"text": "a", "nope": 1}),
            "model says no": await client.call_tool("iso_checked", {"word": "bad"}),
            "unconfigured": await client.call_tool("iso_remote", {}),
        }
        # Inside: leaving the client stops the gateway (its lifespan ends).
        health = await gw.check_health(plugin="iso")
    return {
        "tools": [t.model_dump(mode="json", by_alias=True, exclude_none=True) for t in tools],
        "prompts": [p.model_dump(mode="json", by_alias=True, exclude_none=True) for p in prompts],
        "plan": plan.messages[0].content.model_dump(mode="json"),
        "plan as claude code": as_claude,
        "calls": {
            k: v.model_dump(mode="json", by_alias=True, exclude_none=True) for k, v in calls.items()
        },
        "instructions": gw.instructions(),
        "tiers": {t.name: t.tier.value for t in gw.tools("iso")},
        "checks": sorted(c.name for c in gw.health_checks("iso")),
        "health": sorted((r.name, r.status, r.detail) for r in health),
        "record": {
            k: v
            for k, v in gw.plugin("iso").as_dict().items()  # type: ignore[union-attr]
            if k not in ("runs", "worker", "source")
        },
    }


async def test_an_isolated_plugin_is_offered_byte_for_byte_as_in_process(iso, tmp_path):
    in_process = _gateway(tmp_path / "a", ["iso"], "none")
    isolated = _gateway(tmp_path / "b", ["iso"], ["iso"])
    assert in_process.plugin("iso").runs == "process"  # type: ignore[union-attr]
    assert isinstance(isolated.plugin("iso"), WorkerRecord)
    async with in_process:
        here = await _published(in_process)
    async with isolated:
        there = await _published(isolated)
    assert there == here
    # What was compared holds what matters: a mutation's paragraph, the meta, the tiers.
    write = next(t for t in there["tools"] if t["name"] == "iso_write")
    assert "MUTATION: writes the text" in write["description"]
    assert write["annotations"]["readOnlyHint"] is False
    echo = next(t for t in there["tools"] if t["name"] == "iso_echo")
    assert echo["_meta"] == {"anthropic/maxResultSizeChars": 100_000}
    assert "iso_remote" not in {t["name"] for t in there["tools"]}  # its backend is unset
    assert there["calls"]["echo"]["structuredContent"] == {"said": "hi there hi there", "limit": 4}
    assert json.loads(there["calls"]["model says no"]["content"][0]["text"])["error"]["code"] == (
        "VALIDATION_ERROR"
    )
    assert there["tiers"]["iso_write"] == "mutation" and there["tiers"]["iso_echo"] == "read"
    assert there["checks"] == ["iso_check", "iso_remote_check"]
    assert "<command-args>" in json.dumps(there["plan as claude code"])
    assert "/srv" not in json.dumps(there["calls"]["fail"])


async def test_the_core_runs_in_the_gateway_for_an_isolated_plugins_calls(iso, tmp_path, caplog):
    caplog.set_level(logging.INFO)
    gw = _gateway(tmp_path, ["iso"], ["iso"], read_only=False)
    reports: list[tuple[float, str | None]] = []

    async def progress(done: float, total: float | None, message: str | None) -> None:
        reports.append((done, message))

    async with gw:
        stepped = await gw.call("iso_steps", {"steps": 3}, progress=progress)
        written = await gw.call("iso_write", {"text": "x"})
        crashed = await gw.call("iso_crash", {})
        hidden = await gw.call("iso_echo", {"text": "y" * 51})
    assert stepped.payload == {"steps": 3}
    assert [m for _, m in reports] == ["step 1", "step 2", "step 3"]
    # The worker's open_resources ran before its first call; the audit is the gateway's.
    assert written.payload == {"written": "x", "opened": True}
    audit = [json.loads(line) for line in (tmp_path / "audit.jsonl").read_text().splitlines()]
    assert [(a["tool"], a["outcome"]) for a in audit] == [
        ("iso_write", "STARTED"),
        ("iso_write", "OK"),
    ]
    # An accident in the worker: the client gets the gateway's correlation id, the log has the
    # detail under it (as the worker logged it), and no path.
    cid = crashed.payload["error"]["correlation_id"]
    assert crashed.code == "INTERNAL_ERROR" and cid == crashed.correlation_id
    lines = [r.getMessage() for r in caplog.records if cid in r.getMessage()]
    assert len(lines) == 1, [r.getMessage() for r in caplog.records]
    [line] = lines
    assert "[iso]" in line and "RuntimeError" in line and "/srv/private" not in line
    assert hidden.code == "VALIDATION_ERROR"  # refused here: the worker never saw it


async def test_a_worker_is_handed_only_its_own_settings_and_environment(iso, plugin_site, tmp_path):
    plugin_site("gwfx-svc", {"svc": "gwfx_svc"}, {"gwfx_svc": SVC})
    env = _env(MCP_GATEWAY_ISO_FLAVOUR="mint", MCP_GATEWAY_AUDIT_TABLE="audit.calls")
    gw = _gateway(tmp_path, ["iso", "svc"], ["iso"], env=env)
    assert gw.plugin("svc").runs == "process"  # type: ignore[union-attr]
    async with gw:
        seen = (await gw.call("iso_env", {})).payload
    # Its own variables and table reach its settings (not its environment), one in the
    # gateway's namespace too...
    assert seen["greeting"] == "hi" and seen["token_length"] == len(SECRET)
    assert seen["flavour"] == "mint"
    # ...not a variable a plugin in process declares too, nor anything else of the gateway's:
    # a core setting's variable stays the gateway's even when the plugin declares it.
    assert seen["shared_url"] is None
    assert seen["audit_table"] is None
    allowed = {"PATH", "HOME", "LANG", "LANGUAGE", "TZ", "TMPDIR", "TEMP", "TMP"}
    unexpected = [
        k
        for k in seen["environ"]
        if k not in allowed and not k.startswith(("LC_", "XDG_", "PYTHON"))
    ]
    assert unexpected == []
    assert seen["pid"] != os.getpid()


def test_claude_config_copies_an_isolated_plugins_settings_as_for_one_in_process(
    iso, plugin_site, tmp_path
):
    # Claude Code starts the gateway with the entry's env: a third-party plugin (in a worker
    # by default) must find its variables there as one in process does.
    from gateway.claude import claude_config

    plugin_site("gwfx-svc", {"svc": "gwfx_svc"}, {"gwfx_svc": SVC})
    marker = str(tmp_path / "closed")
    env = _env(MCP_GATEWAY_ISO_FLAVOUR="mint", ISO_MARKER=marker)
    entries = {}
    for isolate in ("none", ["iso"]):
        gw = _gateway(tmp_path / str(isolate), ["iso", "svc"], isolate, env=env)
        anyio.run(gw.load_isolated)
        entries[str(isolate)] = claude_config(gw, "gw").mcp_json()["mcpServers"]["gw"]["env"]
    here, there = entries["none"], entries["['iso']"]
    assert here["ISO_GREETING"] == "hi" and here["ISO_TOKEN"] == "${ISO_TOKEN}"
    assert here["ISO_MARKER"] == marker and here["SVC_URL"] == "http://127.0.0.1:9"
    assert there == here


#: A plugin whose import takes as many seconds as a file beside its module says (none: at once).
SLOW_TO_LOAD = (
    _FIXTURE_HEADER
    + """
import time
from pathlib import Path
_DELAY = Path(__file__).with_suffix(".delay")
if _DELAY.exists():
    time.sleep(float(_DELAY.read_text()))

@hookimpl
def register_tools(register):
    register(echo_spec(__name__ + "_one"))
    register(echo_spec(__name__ + "_two"))

async def fine():
    return None

@hookimpl
def register_health_checks(register):
    register(HealthCheck(name="fine", check=fine))
"""
)


def test_a_listing_is_in_the_sources_order_whichever_worker_answers_first(plugin_site, tmp_path):
    # Workers answer in any order: the tools' order in a listing (what the model is told, and
    # what a client's prompt cache keys on) must not change from one start to the next.
    site = plugin_site("gwfx-first", {"first": "gwfx_first"}, {"gwfx_first": SLOW_TO_LOAD})
    plugin_site("gwfx-second", {"second": "gwfx_second"}, {"gwfx_second": SLOW_TO_LOAD})

    def listed(delays: dict[str, float]) -> tuple[list[str], list[str]]:
        for name in ("first", "second"):
            marker = site / f"gwfx_{name}.delay"
            marker.unlink(missing_ok=True)
            if name in delays:
                marker.write_text(str(delays[name]))
        gw = _gateway(tmp_path, ["first", "second"], ["first", "second"])
        order = [p.name for p in gw.plugins if p.name in ("first", "second")]

        async def tools() -> list[str]:
            async with gw:
                listing = [t.plugin.name for t in gw.registry.all() if t.plugin.name in order]
                report = [r.plugin for r in await gw.check_health() if r.plugin in order]
                return listing + report

        return order, anyio.run(tools)

    order, _ = listed({})
    # The source listed first is the one slow to load: its worker answers last. Its tools are
    # listed first still, and its health check reported first.
    order, sources = listed({order[0]: 1.5})
    assert sources == [order[0], order[0], order[1], order[1], order[0], order[1]]


def test_a_worker_is_handed_its_settings_before_the_event_loop_runs(iso, plugin_site, tmp_path):
    # Most of a start after the plugins load is the SDK's import: the worker loads meanwhile,
    # so the first listing waits for no LOAD round trip (issue 39's start-up target).
    plugin_site("gwfx-svc", {"svc": "gwfx_svc"}, {"gwfx_svc": SVC})
    gw = _gateway(tmp_path, ["iso", "svc"], ["iso"])
    first = _worker(gw, "iso").first_load
    assert first is not None
    # No event loop has touched the worker: this one only waits for the thread to end.
    assert anyio.run(first.finished) == b""
    answer = first.answer()
    # It asked for its table and variables, was handed them (not svc's), and loaded.
    assert answer is not None and "loaded" in answer, answer
    assert _worker(gw, "iso").handed["env"] == {"ISO_GREETING": "hi", "ISO_TOKEN": SECRET}

    async def serve() -> dict[str, Any]:
        async with gw:
            return (await gw.call("iso_env", {})).payload

    seen = anyio.run(serve)
    # The connection took that load (the worker would refuse a second one): its settings hold.
    assert seen["greeting"] == "hi" and seen["token_length"] == len(SECRET)
    assert seen["shared_url"] is None


async def test_what_an_isolated_plugin_writes_is_cleaned_of_its_secrets(iso, tmp_path, caplog):
    gw = _gateway(tmp_path, ["iso"], ["iso"])
    async with gw:
        seen = await gw.call("iso_env", {})
    # Its token is a secret here too: the gateway redacts it from what the plugin returns.
    assert seen.payload["token"] == "[REDACTED]"
    assert SECRET not in caplog.text


# --- faults cost only the plugin ----------------------------------------------------------------

KINDS = {**RAISES, "os_exit": "os._exit(9)"}


def _faulty(hook: str, kind: str) -> str:
    if kind != "os_exit":
        return _raising_plugin(hook, RAISES[kind])
    source = _raising_plugin(hook, "SystemExit()").replace("raise SystemExit()", "os._exit(9)")
    return "import os\n" + source


@pytest.mark.parametrize("kind", list(KINDS))
@pytest.mark.parametrize("hook", HOOKS)
async def test_whatever_an_isolated_plugins_load_step_does_fails_only_that_plugin(
    plugin_site, tmp_path, hook, kind
):
    module = f"gwfx_ib_{hook}_{kind}"
    plugin_site(
        "gwfx-ib",
        {"raiser": module, "good": "gwfx_ib_good"},
        {module: _faulty(hook, kind), "gwfx_ib_good": GOOD},
    )
    gw = make_gateway(plugins=["raiser", "good"], isolate=["raiser"], cwd=tmp_path)
    async with gw:
        raiser = _worker(gw, "raiser")
        assert raiser.state is PluginState.FAILED, raiser
        if kind == "os_exit":
            assert "its worker stopped while it loaded: exited with code 9" in raiser.reason
        else:
            assert hook.replace("import", "failed to import") in (raiser.reason or "")
        assert raiser.upstream is not None and raiser.upstream.restarts == 0  # not again
        assert (await gw.call("good_echo", {"text": "hi"})).payload == {"echo": "hi"}
        assert "raiser" not in {t.plugin for t in gw.offered_tools()}


async def test_whatever_an_isolated_handler_raises_is_an_internal_error(plugin_site, tmp_path):
    plugin_site("gwfx-faults", {"faults": "gwfx_faults"}, {"gwfx_faults": FAULTS})
    gw = make_gateway(plugins=["faults"], isolate="all", cwd=tmp_path)
    async with gw:
        pid = _pid(gw, "faults")
        for tool in ("faults_exit", "faults_interrupt", "faults_stray_cancel"):
            result = await gw.call(tool)
            assert result.code == "INTERNAL_ERROR", (tool, result.payload)
        assert _pid(gw, "faults") == pid  # the worker itself went on


@pytest.fixture
def oversized(plugin_site: Any) -> None:
    plugin_site("gwfx-big", {"big": "gwfx_big"}, {"gwfx_big": OVERSIZED})


async def test_an_answer_longer_than_the_gateway_takes_costs_only_that_call(
    oversized, tmp_path, caplog
):
    # The gateway stops a worker that writes a line over 8 MB, and with it every call running
    # there: the worker answers such a call with its error instead, and goes on.
    gw = make_gateway(plugins=["big"], isolate=["big"], cwd=tmp_path)
    async with gw:
        pid = _pid(gw, "big")
        waiting = anyio.Event()
        answers: dict[str, Any] = {}

        async def progress(done: float, total: float | None, message: str | None) -> None:
            waiting.set()

        async def alongside() -> None:
            answers["wait"] = await gw.call("big_wait", {}, progress=progress)

        async with anyio.create_task_group() as tg:
            tg.start_soon(alongside)
            with anyio.fail_after(30):
                await waiting.wait()  # big_wait runs in the worker
            answers["full"] = await gw.call("big_full", {})
            answers["json"] = await gw.call("big_json", {"mb": 9})
            answers["content"] = await gw.call("big_content", {"mb": 9, "char": "é"})
            answers["read"] = await gw.read_resource("big://accented")
            answers["release"] = await gw.call("big_release", {})
        assert _pid(gw, "big") == pid
        restarts = _worker(gw, "big").upstream.restarts  # type: ignore[union-attr]
    for key in ("full", "json", "content", "read"):
        assert answers[key].code == "INTERNAL_ERROR", (key, answers[key].payload)
    said = answers["json"].payload["error"]["message"]
    # The JSON goes once over the worker's line: its size is the result's, as in process.
    assert said == "tool 'big_json' returned 9 MB of content, over the 8 MB a result may have"
    assert answers["wait"].payload == answers["release"].payload == {"pid": pid}
    assert restarts == 0
    assert not any("over 8 MB; the gateway stopped it" in r.getMessage() for r in caplog.records)
    # A result at the bound passes the worker's runner, but not as a line with its envelope:
    # the log says why, under the call's correlation id.
    cid = answers["full"].correlation_id
    assert any(
        cid in r.getMessage() and "over the 8388608 the gateway takes" in r.getMessage()
        for r in caplog.records
    ), [r.getMessage() for r in caplog.records]


async def _oversized_answers(gw: Gateway) -> dict[str, Any]:
    """Each answer's error (without its correlation id), or ``"ok"``."""
    out: dict[str, Any] = {}
    async with gateway_client(gw) as client:
        for name, args in (
            ("big_json", {"mb": 9}),
            ("big_content", {"mb": 9}),
            ("big_content", {"mb": 9, "char": "é"}),
        ):
            result = await client.call_tool(name, args)
            error = tool_error(result) if result.is_error else "ok"
            if isinstance(error, dict):
                error.pop("correlation_id", None)
            out[f"{name} {args}"] = error
        for uri in ("big://ascii", "big://accented"):
            try:
                await client.read_resource(uri)
                out[uri] = "ok"
            except MCPError as exc:
                out[uri] = str(exc)
        try:
            await client.get_prompt("big_prompt", {})
            out["prompt"] = "ok"
        except MCPError as exc:
            out["prompt"] = str(exc)
    return out


async def test_an_answer_too_long_for_a_worker_is_the_error_a_plugin_gives_over_its_bound(
    oversized, tmp_path
):
    # A worker's answer is the result as the client would get it. Results and reads are
    # bounded in UTF-8 bytes wherever the plugin runs, whatever it returned (JSON, content of
    # two-byte characters): what is refused in process is refused in the worker alike, with the
    # same error. Only what is at the bound in process is too long for the worker's one line
    # with its envelope (the prompt here): the error a plugin gives over its bound.
    here = await _oversized_answers(_gateway(tmp_path / "a", ["big"], "none"))
    there = await _oversized_answers(_gateway(tmp_path / "b", ["big"], ["big"]))
    over_in_process = {k: v for k, v in here.items() if v != "ok"}
    assert sorted(over_in_process) == [
        "big://accented",
        "big://ascii",
        "big_content {'mb': 9, 'char': 'é'}",
        "big_content {'mb': 9}",
        "big_json {'mb': 9}",
    ]
    assert {k: there[k] for k in over_in_process} == over_in_process

    def sizeless(said: Any) -> Any:
        return json.loads(
            re.sub(r"(tool|resource) \S+ (returned|is) \d+ MB", r"\1 … \2 N MB", json.dumps(said))
        )

    content_over = sizeless(here["big_content {'mb': 9}"])
    assert content_over["code"] == "INTERNAL_ERROR" and content_over["retryable"] is False
    assert sizeless(here["big_json {'mb': 9}"]) == content_over
    assert sizeless(here["big_content {'mb': 9, 'char': 'é'}"]) == content_over
    assert here["big_json {'mb': 9}"]["message"] == (
        "tool 'big_json' returned 9 MB of content, over the 8 MB a result may have"
    )
    assert sizeless(here["big://accented"]) == sizeless(here["big://ascii"])
    assert here["prompt"] == "ok"
    assert there["prompt"] == (
        "INTERNAL_ERROR: prompt 'big_prompt' could not be rendered; the gateway log has the details"
    )


@pytest.fixture
def hazards(plugin_site: Any) -> None:
    plugin_site("gwfx-hz", {"hz": "gwfx_hz"}, {"gwfx_hz": HAZARDS})
    plugin_site("gwfx-good", {"good": "gwfx_good"}, {"gwfx_good": GOOD})


@pytest.mark.parametrize("how", ["exit", "term"])
async def test_a_worker_that_ends_is_started_again_its_tools_unavailable_meanwhile(
    hazards, tmp_path, how, caplog
):
    caplog.set_level(logging.INFO, logger="gateway.upstream")

    def announced() -> list[str]:
        return [
            r.getMessage()
            for r in caplog.records
            if r.levelno >= logging.INFO and r.getMessage().startswith("plugin 'hz' is up")
        ]

    gw = make_gateway(plugins=["hz", "good"], isolate=["hz"], cwd=tmp_path)
    async with gw:
        # Loaded as a plugin in process is: not announced. Started again: said.
        assert announced() == []
        before = (await gw.call("hz_pid", {})).payload["pid"]
        if how == "exit":
            ended = await gw.call("hz_exit", {})
        else:  # a thread of the plugin's signals its own process
            ended = await gw.call("hz_signal", {"what": how})
        error = ended.payload["error"]
        assert ended.code == "BACKEND_UNAVAILABLE" and error["retryable"] is True, error
        assert "plugin 'hz'" in error["message"]
        meanwhile = await gw.call("hz_pid", {})
        if meanwhile.is_error:  # it is being started again
            assert meanwhile.code == "BACKEND_UNAVAILABLE"
            assert "plugin 'hz'" in meanwhile.payload["error"]["message"]
        assert (await gw.call("good_echo", {"text": "x"})).payload == {"echo": "x"}
        await _up_again(gw, "hz", before)
        after = (await gw.call("hz_pid", {})).payload["pid"]
        assert after != before
        assert _worker(gw, "hz").upstream.restarts == 1  # type: ignore[union-attr]
        with anyio.fail_after(10):
            while not announced():
                await anyio.sleep(0.05)
        assert len(announced()) == 1


@pytest.mark.parametrize("how", ["int", "interrupt_main"])
async def test_an_interrupt_a_plugin_raises_in_its_worker_costs_at_most_that_worker(
    hazards, tmp_path, how
):
    gw = make_gateway(plugins=["hz", "good"], isolate=["hz"], cwd=tmp_path)
    async with gw:
        before = (await gw.call("hz_pid", {})).payload["pid"]
        # The KeyboardInterrupt lands in the worker's handler (its call fails) or in its event
        # loop (the worker goes on, or ends and is started again): never here.
        ended = await gw.call("hz_signal", {"what": how})
        assert ended.code in ("INTERNAL_ERROR", "BACKEND_UNAVAILABLE", "OK"), ended.payload
        assert (await gw.call("good_echo", {"text": "x"})).payload == {"echo": "x"}
        upstream = _worker(gw, "hz").upstream
        assert upstream is not None
        with anyio.fail_after(30):
            while (again := await gw.call("hz_pid", {})).is_error:
                await anyio.sleep(0.1)
        assert upstream.restarts == 0 or again.payload["pid"] != before


@pytest.mark.parametrize("tool", ["hz_block", "hz_stubborn"])
async def test_a_call_its_worker_does_not_give_up_ends_the_worker(hazards, tmp_path, tool, caplog):
    gw = make_gateway(plugins=["hz", "good"], isolate=["hz"], cwd=tmp_path)
    async with gw:
        before = (await gw.call("hz_pid", {})).payload["pid"]
        order: list[str] = []

        async def stuck() -> None:
            result = await gw.call(tool, {})
            order.append(result.code)

        async with anyio.create_task_group() as tg:
            tg.start_soon(stuck)
            await anyio.sleep(0.2)
            # Another plugin's call while the worker is stuck: answered before the stuck one.
            assert (await gw.call("good_echo", {"text": "x"})).payload == {"echo": "x"}
            order.append("other")
        assert order == ["other", "TIMEOUT"]
        await _up_again(gw, "hz", before, timeout=GIVE_UP_SECONDS * 2 + 30)
        assert (await gw.call("hz_pid", {})).payload["pid"] != before
    said = "does not answer" if tool == "hz_block" else "did not stop it"
    assert any(said in r.getMessage() and tool in r.getMessage() for r in caplog.records)


async def test_a_worker_past_its_memory_limit_is_started_again_between_calls(hazards, tmp_path):
    gw = make_gateway(plugins=["hz"], isolate=["hz"], cwd=tmp_path, max_worker_memory_mb=120)
    async with gw:
        pids = []
        for _ in range(12):  # 30 MB kept per call: past 120 MB within a few calls
            result = await gw.call("hz_leak", {"mb": 30})
            assert not result.is_error, result.payload  # a call never fails for it
            pids.append(result.payload["pid"])
            assert result.payload["held_mb"] <= 150  # started again before it held more
        assert len(set(pids)) >= 2
        upstream = _worker(gw, "hz").upstream
        assert upstream is not None and upstream.restarts == 0  # recycled, not crashed


async def test_a_memory_limit_below_what_a_worker_takes_once_loaded_is_said_not_obeyed(
    hazards, tmp_path, caplog
):
    # Starting such a worker again after each call would cost every call a restart and bring
    # it under the limit for none: the operator is told once instead.
    gw = make_gateway(plugins=["hz"], isolate=["hz"], cwd=tmp_path, max_worker_memory_mb=1)
    async with gw:
        pids = {(await gw.call("hz_pid", {})).payload["pid"] for _ in range(3)}
        upstream = _worker(gw, "hz").upstream
        assert upstream is not None and upstream.recycling is None
    assert len(pids) == 1
    told = [
        r.getMessage() for r in caplog.records if "past max_worker_memory_mb = 1" in r.getMessage()
    ]
    assert len(told) == 1 and "once loaded" in told[0], told


async def test_a_plugin_patching_the_core_at_import_patches_only_its_worker(plugin_site, tmp_path):
    plugin_site("gwfx-patcher", {"patcher": "gwfx_patcher"}, {"gwfx_patcher": PATCHER})
    gw = make_gateway(plugins=["patcher"], isolate="all", cwd=tmp_path)
    async with gw:
        changed = await gw.call("patch_change", {})
    assert changed.code == "CONFLICT"
    assert "/srv/private" not in changed.payload["error"]["message"]  # still sanitized here
    audit = (tmp_path / "audit.jsonl").read_text().splitlines()
    assert [json.loads(line)["outcome"] for line in audit] == ["STARTED", "CONFLICT"]
    assert "gwfx_patcher" not in sys.modules


async def test_a_worker_whose_plugin_tampers_with_its_listing_is_trusted_no_further(
    plugin_site, tmp_path
):
    plugin_site("gwfx-tamper", {"tamper": "gwfx_tamper"}, {"gwfx_tamper": TAMPERER})
    gw = make_gateway(plugins=["tamper"], isolate="all", cwd=tmp_path)
    async with gw:
        refused = await gw.call("tamper_schema", {})
        mutation = gw.registry.get("tamper_mutation")
    # A schema that is none: its calls are refused, nothing is sent.
    assert refused.code == "BACKEND_ERROR"
    assert "not a valid JSON Schema" in refused.payload["error"]["message"]
    # A mutation is never offered as safer than it says it is: the paragraph is put back.
    assert mutation is not None and mutation.tier.value == "mutation"
    assert "MUTATION: can change or delete data" in mutation.description


async def test_stopping_the_gateway_closes_an_isolated_plugins_resources(iso, tmp_path):
    marker = tmp_path / "closed"
    gw = _gateway(tmp_path, ["iso"], ["iso"], env=_env(ISO_MARKER=str(marker)))
    async with gw:
        pid = _pid(gw, "iso")
        assert not (await gw.call("iso_echo", {"text": "x"})).is_error
    assert marker.read_text() == f"closed in {pid}"


async def test_an_isolated_plugins_definitions_are_not_pinned(iso, tmp_path, monkeypatch):
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path / "state"))
    gw = _gateway(tmp_path, ["iso"], ["iso"], env=_env(XDG_STATE_HOME=str(tmp_path / "state")))
    async with gw:
        assert gw.plugin("iso").tools  # type: ignore[union-attr]
    assert not (tmp_path / "state" / "mcp-gateway" / "servers").exists()


async def test_a_workers_plugin_keeps_its_schemas_in_the_schema_cache(iso, tmp_path):
    cache = tmp_path / "cache"
    gw = _gateway(tmp_path, ["iso"], ["iso"], env=_env(XDG_CACHE_HOME=str(cache)))
    async with gw:
        pass
    cached = cache / "mcp-gateway" / "schemas" / "schemas.json"
    assert cached.exists() and b"What to echo." in cached.read_bytes()


def test_the_project_distributions_are_first_party():
    root = Path(__file__).resolve().parents[1]
    import tomllib

    names = {
        tomllib.loads(p.read_text())["project"]["name"]
        for p in [root / "pyproject.toml", *root.glob("*/*/pyproject.toml")]
    }
    assert names == set(FIRST_PARTY)


# --- through the command line and a real client ---------------------------------------------------


def test_plugins_says_where_each_plugin_runs_and_a_workers_settings_mistake_stops(
    iso, plugin_site, tmp_path
):
    plugin_site("gwfx-good", {"good": "gwfx_good"}, {"gwfx_good": GOOD})
    env = gateway_env(PYTHONPATH=os.environ["PYTHONPATH"], MCP_GATEWAY_PLUGINS="iso,good,queue")
    shown = run_cli(tmp_path, env, "plugins", "--json")
    assert shown.returncode == 0, shown.stderr
    runs = {p["name"]: p["runs"] for p in json.loads(shown.stdout)}
    # The default: plugins of this project's distributions in process, the others in workers.
    assert runs["iso"] == runs["good"] == "worker" and runs["queue"] == "process"
    assert {p["name"]: p["tool_count"] for p in json.loads(shown.stdout)}["iso"] == 8
    table = run_cli(tmp_path, env, "plugins").stdout.splitlines()
    assert table[0].split()[:4] == ["PLUGIN", "VERSION", "STATE", "RUNS"]
    (tmp_path / "gw.toml").write_text("[plugins.iso]\nlimit = 'many'\n")
    for command in ("plugins", "serve"):
        refused = run_cli(tmp_path, env, "--config", "gw.toml", command)
        assert refused.returncode == 2, (command, refused.stderr)
        lines = [x for x in refused.stderr.splitlines() if x.startswith("mcp-gateway:")]
        assert lines == [
            "mcp-gateway: gw.toml:2: [plugins.iso] limit: must be a whole number, not 'many'"
        ], refused.stderr


@pytest.mark.parametrize(
    ("value", "said"),
    [
        ("thirdparty", "unknown plugin 'thirdparty'"),
        ("qeue", "unknown plugin 'qeue'"),
        ("servers", "the plugin 'servers' hands the gateway the MCP servers"),
    ],
)
def test_a_mistake_in_isolate_stops_with_one_line(tmp_path, value, said):
    env = gateway_env(MCP_GATEWAY_ISOLATE=value)
    refused = run_cli(tmp_path, env, "plugins")
    assert refused.returncode == 2
    [line] = refused.stderr.splitlines()
    assert line.startswith(f"mcp-gateway: MCP_GATEWAY_ISOLATE: {said}"), line
    if value == "thirdparty":
        assert line.endswith("did you mean third-party?")
    if value == "qeue":
        assert line.endswith("did you mean queue?")


def test_a_worker_memory_limit_that_does_not_fit_stops_with_one_line(tmp_path):
    env = gateway_env(MCP_GATEWAY_MAX_WORKER_MEMORY_MB="-5")
    refused = run_cli(tmp_path, env, "plugins")
    assert refused.returncode == 2
    assert refused.stderr.splitlines() == [
        "mcp-gateway: MCP_GATEWAY_MAX_WORKER_MEMORY_MB: must be a whole number from 0 to "
        "1048576, not '-5'"
    ]


@pytest.mark.e2e
async def test_nothing_an_isolated_plugin_does_ends_the_stdio_gateway(hazards, iso, tmp_path):
    env = gateway_env(PYTHONPATH=os.environ["PYTHONPATH"], MCP_GATEWAY_PLUGINS="hz,iso,good,queue")
    params = StdioServerParameters(
        command=sys.executable, args=["-m", "gateway.cli", "serve"], cwd=str(tmp_path), env=env
    )
    with anyio.fail_after(120):
        async with Client(params, mode="legacy") as client:
            # The first listing waits for the workers: their tools are there at once.
            names = {t.name for t in (await client.list_tools()).tools}
            assert {"hz_pid", "iso_echo", "good_echo", "bulk_read_new_jobs"} <= names
            for call, args in (
                ("hz_exit", {}),
                ("hz_signal", {"what": "term"}),
                ("hz_block", {}),
                ("hz_leak", {"mb": 50}),
            ):
                await client.call_tool(call, args)
                answer = await client.call_tool("good_echo", {"text": call})
                assert answer.structured_content == {"echo": call}
            listed = await client.call_tool("gateway_status", {"check_health": False})
            status = {p["name"]: p for p in listed.structured_content["plugins"]}
            assert status["hz"]["runs"] == "worker" and status["hz"]["state"] == "loaded"
            assert status["queue"]["runs"] == "process"
            error = tool_error(await client.call_tool("iso_crash", {}))
            assert error["code"] == "INTERNAL_ERROR"
