"""MCP servers behind the gateway (issue 37): tiers, checks, pins, faults and life cycle.

Each server here is a real process speaking MCP over stdio (``upstream_server.py``, which can
be made slow, crash or flood on demand), mounted through the ``servers`` plugin as a deployment
configures it; the reference servers from npm are in ``test_reference_servers.py``.
"""

from __future__ import annotations

import json
import os
import signal
import stat
import sys
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import anyio
import pytest
from conftest import gateway_env
from wire import run_cli

from gateway.app import Gateway
from gateway.errors import ErrorCode
from gateway.plugins import PluginState
from gateway.spec import Tier
from gateway.testing import make_gateway

pytestmark = pytest.mark.anyio

FIXTURE = Path(__file__).with_name("upstream_server.py")
OPEN = {"type": "object"}
READ = {"readOnlyHint": True}


def tool(
    name: str, description: str = "", annotations: dict[str, Any] | None = None, **extra: Any
) -> dict[str, Any]:
    out: dict[str, Any] = {
        "name": name,
        "description": description or f"The {name} tool.",
        "inputSchema": OPEN,
    }
    if annotations is not None:
        out["annotations"] = annotations
    return {**out, **extra}


TOOLS = [
    tool("echo", annotations=READ),
    tool("sleep"),
    tool("fail", annotations=READ),
    tool("crash"),
    tool("env", annotations=READ),
    tool("meta", annotations=READ),
]


class Upstreams:
    """Tables of fixture servers for one test, and what they wrote."""

    def __init__(self, root: Path) -> None:
        self.root = root

    def table(
        self, name: str = "up", tools: list[dict[str, Any]] = TOOLS, **behaviour: Any
    ) -> dict[str, Any]:
        config = self.root / f"{name}.json"
        config.write_text(
            json.dumps({"tools": tools, "journal": str(self.journal_path(name)), **behaviour})
        )
        return {"command": sys.executable, "args": [str(FIXTURE), str(config)]}

    def journal_path(self, name: str) -> Path:
        return self.root / f"{name}.journal"

    def journal(self, name: str = "up") -> list[dict[str, Any]]:
        path = self.journal_path(name)
        if not path.exists():
            return []
        return [json.loads(line) for line in path.read_text().splitlines()]


@pytest.fixture
def upstreams(tmp_path: Path) -> Upstreams:
    return Upstreams(tmp_path)


@pytest.fixture(autouse=True)
def state_home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """Each test approves its own servers: the approved definitions live in the user's state."""
    state = tmp_path / "state"
    monkeypatch.setenv("XDG_STATE_HOME", str(state))
    return state


def mounting(tmp_path: Path, servers: dict[str, dict[str, Any]], **settings: Any) -> Gateway:
    """A gateway with the ``servers`` plugin and these ``[servers.<name>]`` tables."""
    return make_gateway(
        plugins=["servers"],
        plugin_config={"servers": {"servers": servers}},
        cwd=tmp_path,
        **settings,
    )


async def answered(gw: Gateway, *names: str, timeout: float = 30) -> None:
    with anyio.fail_after(timeout):
        for name in names or tuple(gw.mounts.records):
            upstream = gw.mounts.records[name].upstream
            assert upstream is not None
            await upstream.answered.wait()


async def served(gw: Gateway) -> AsyncIterator[Gateway]:
    async with gw:
        await answered(gw)
        yield gw


def text_of(result: Any) -> str:
    assert result.mcp is not None, result.payload
    return str(result.mcp["content"][0]["text"])


# --- tiers ----------------------------------------------------------------------------------


async def test_a_tool_is_read_only_when_the_server_says_so_and_otherwise_a_mutation(
    tmp_path, upstreams
):
    tools = [
        tool("reads", annotations={"readOnlyHint": True, "openWorldHint": False}),
        tool("no_hints"),
        tool(
            "says_false",
            annotations={"readOnlyHint": False, "destructiveHint": False, "idempotentHint": True},
        ),
    ]
    gw = mounting(tmp_path, {"up": upstreams.table(tools=tools)})
    async with gw:
        await answered(gw)
        by_name = {t.name: t for t in gw.tools("up")}
    assert by_name["reads"].tier is Tier.READ
    assert by_name["reads"].annotations["read_only_hint"] is True
    assert by_name["reads"].annotations["open_world_hint"] is False
    assert "MUTATION" not in by_name["reads"].description
    unannotated = by_name["no_hints"]
    assert unannotated.tier is Tier.MUTATION
    # Unsaid is the worst case: destructive, not idempotent (the MCP defaults), and it says so.
    assert unannotated.annotations["destructive_hint"] is True
    assert unannotated.annotations["idempotent_hint"] is False
    assert unannotated.description.startswith("The no_hints tool.\n\nMUTATION:")
    assert "delete" in unannotated.description
    careful = by_name["says_false"]
    assert careful.tier is Tier.MUTATION
    assert careful.annotations["destructive_hint"] is False
    assert careful.annotations["idempotent_hint"] is True


async def test_the_servers_table_can_make_a_tool_read_or_mutation(tmp_path, upstreams):
    table = {**upstreams.table(), "tiers": {"sleep": "read", "echo": "mutation"}}
    gw = mounting(tmp_path, {"up": table})
    async with gw:
        await answered(gw)
        tiers = {t.name: t.tier for t in gw.tools("up")}
    assert tiers["sleep"] is Tier.READ
    assert tiers["echo"] is Tier.MUTATION  # readOnlyHint said read; the operator knows better


async def test_a_mounted_mutation_is_audited_and_hidden_when_read_only(tmp_path, upstreams):
    gw = mounting(tmp_path, {"up": upstreams.table()})
    async with gw:
        await answered(gw)
        result = await gw.call("sleep", {"seconds": 0})
        assert not result.is_error, result.payload
    lines = [json.loads(x) for x in (tmp_path / "audit.jsonl").read_text().splitlines()]
    assert [(x["tool"], x["plugin"], x["outcome"]) for x in lines] == [
        ("sleep", "up", "STARTED"),
        ("sleep", "up", "OK"),
    ]
    hidden = mounting(tmp_path, {"up": upstreams.table()}, read_only=True)
    async with hidden:
        await answered(hidden)
        assert {t.name for t in hidden.offered_tools()} >= {"echo", "env"}
        assert "sleep" not in {t.name for t in hidden.offered_tools()}
        refused = await hidden.call("sleep", {})
    assert refused.code == ErrorCode.PERMISSION_DENIED


# --- calls ------------------------------------------------------------------------------------


async def test_arguments_are_checked_by_the_servers_own_schema_before_anything_is_sent(
    tmp_path, upstreams
):
    schema = {
        "$schema": "http://json-schema.org/draft-07/schema#",
        "type": "object",
        "properties": {"count": {"type": "integer", "minimum": 1}},
        "required": ["count"],
        "additionalProperties": False,
    }
    gw = mounting(tmp_path, {"up": upstreams.table(tools=[tool("echo", inputSchema=schema)])})
    async with gw:
        await answered(gw)
        wrong = await gw.call("echo", {"count": 0, "extra": True})
        missing = await gw.call("echo", {})
        right = await gw.call("echo", {"count": 2})
    assert wrong.code == missing.code == ErrorCode.VALIDATION_ERROR
    fields = {f["field"]: f["rule"] for f in wrong.payload["error"]["details"]["fields"]}
    assert fields == {"count": "greater_than_equal", "extra": "extra_forbidden"}
    assert "count" in missing.payload["error"]["message"]
    assert json.loads(text_of(right)) == {"count": 2}
    calls = [m for m in upstreams.journal() if m.get("method") == "tools/call"]
    assert [c["params"]["arguments"] for c in calls] == [{"count": 2}]


async def test_a_result_arrives_as_the_server_sent_it(tmp_path, upstreams):
    result = {
        "content": [
            {"type": "text", "text": "two items"},
            {"type": "image", "data": "iVBORw0KGgo=", "mimeType": "image/png"},
            {"type": "audio", "data": "UklGRg==", "mimeType": "audio/wav"},
            {"type": "resource_link", "uri": "file:///notes/a.md", "name": "a.md"},
            {
                "type": "resource",
                "resource": {"uri": "test://r", "mimeType": "text/plain", "text": "r"},
            },
        ],
        "structuredContent": {"count": 2, "items": ["a", "b"]},
        "isError": False,
    }
    gw = mounting(
        tmp_path, {"up": upstreams.table(tools=[tool("mixed", annotations=READ, result=result)])}
    )
    async with gw:
        await answered(gw)
        got = await gw.call("mixed", {})
    assert not got.is_error
    assert got.mcp == result


async def test_an_error_result_is_passed_on_with_its_text_cleaned_like_a_backends(
    tmp_path, upstreams
):
    gw = mounting(
        tmp_path, {"up": upstreams.table()}, env={**os.environ, "DEPLOY_TOKEN": "tok-4f1e9a77c2d0"}
    )
    async with gw:
        await answered(gw)
        said = "could not open /var/lib/app/secret.db\nTraceback (most recent call last):\n  x\nwith tok-4f1e9a77c2d0"
        got = await gw.call("fail", {"text": said})
    assert got.is_error and got.code == ErrorCode.BACKEND_ERROR
    text = text_of(got)
    assert got.mcp is not None and got.mcp["isError"] is True
    assert "could not open" in text
    for leaked in ("/var/lib/app", "Traceback", "tok-4f1e9a77c2d0", "\n"):
        assert leaked not in text
    assert "could not open" in got.payload["error"]["message"]


async def test_an_error_answer_or_a_result_that_is_not_one_is_a_clear_error(tmp_path, upstreams):
    tools = [
        tool("refuses", annotations=READ, error={"code": -32602, "message": "bad x at /srv/a"}),
        tool("breaks", annotations=READ, error={"code": -32603, "message": "it broke"}),
        tool("garbled", annotations=READ, result={"content": "not a list"}),
        tool("echo", annotations=READ),
    ]
    gw = mounting(tmp_path, {"up": upstreams.table(tools=tools)})
    async with gw:
        await answered(gw)
        refused = await gw.call("refuses", {})
        broke = await gw.call("breaks", {})
        garbled = await gw.call("garbled", {})
        fine = await gw.call("echo", {"n": 1})
    assert refused.code == ErrorCode.VALIDATION_ERROR
    assert "refused the arguments: bad x at" in refused.payload["error"]["message"]
    assert "/srv/a" not in refused.payload["error"]["message"]
    assert broke.code == ErrorCode.BACKEND_ERROR
    assert "answered with error -32603: it broke" in broke.payload["error"]["message"]
    assert garbled.code == ErrorCode.BACKEND_ERROR
    assert "not a tool result" in garbled.payload["error"]["message"]
    assert not fine.is_error  # the server is up: each answer was about that call alone


async def test_a_configured_secret_in_a_result_is_redacted(tmp_path, upstreams):
    secret = "s3cr3t-value-7d1c0e9b"
    result = {
        "content": [{"type": "text", "text": f"key={secret}"}],
        "structuredContent": {"k": secret},
    }
    gw = mounting(
        tmp_path,
        {"up": upstreams.table(tools=[tool("leaky", annotations=READ, result=result)])},
        env={**os.environ, "PARTNER_API_KEY": secret},
    )
    async with gw:
        await answered(gw)
        got = await gw.call("leaky", {})
    assert secret not in json.dumps(got.mcp)
    assert got.mcp is not None and got.mcp["structuredContent"] == {"k": "[REDACTED]"}


async def test_a_call_over_its_timeout_is_cancelled_upstream(tmp_path, upstreams):
    gw = mounting(tmp_path, {"up": {**upstreams.table(), "timeout": 0.5}})
    async with gw:
        await answered(gw)
        got = await gw.call("sleep", {"seconds": 30})
        assert got.code == ErrorCode.TIMEOUT
        with anyio.fail_after(10):
            while not any(
                m.get("method") == "notifications/cancelled" for m in upstreams.journal()
            ):
                await anyio.sleep(0.05)
        again = await gw.call("echo", {"n": 1})
    journal = upstreams.journal()
    call = next(m for m in journal if m.get("method") == "tools/call")
    cancelled = next(m for m in journal if m.get("method") == "notifications/cancelled")
    assert cancelled["params"]["requestId"] == call["id"]
    assert not again.is_error  # the server is fine: only that call was abandoned


async def test_progress_from_the_server_reaches_the_caller(tmp_path, upstreams):
    gw = mounting(tmp_path, {"up": upstreams.table()})
    reports: list[tuple[float, str | None]] = []

    async def progress(p: float, total: float | None, message: str | None) -> None:
        reports.append((p, message))

    async with gw:
        await answered(gw)
        got = await gw.call("sleep", {"seconds": 0.5}, progress=progress)
    assert not got.is_error
    assert len(reports) >= 3
    assert [p for p, _ in reports] == sorted(p for p, _ in reports)
    assert reports[0][1] == "step 1"


async def test_every_progress_the_server_sent_reaches_the_caller_before_the_result(
    tmp_path, upstreams
):
    """The server's last progress comes right before its answer; the answer is taken at once
    by the reader, the progress passed on in a task of its own: the call waits for it."""
    gw = mounting(tmp_path, {"up": upstreams.table()})
    began: list[float] = []
    ended: list[float] = []

    async def slow_client(p: float, total: float | None, message: str | None) -> None:
        began.append(p)
        await anyio.sleep(0.2)  # a client slow to take a notification
        ended.append(p)

    async with gw:
        await answered(gw)
        got = await gw.call("sleep", {"seconds": 0.3}, progress=slow_client)
        told = list(ended)
    assert not got.is_error
    assert began and told == began


async def test_the_traceparent_of_the_calls_span_reaches_the_server(tmp_path, upstreams):
    from gateway.testing.telemetry import TelemetryRecorder

    recorder = TelemetryRecorder()
    gw = mounting(tmp_path, {"up": upstreams.table()}, telemetry=recorder)
    async with gw:
        await answered(gw)
        got = await gw.call("meta", {})
    meta = json.loads(text_of(got))
    call = recorder.span("tools/call meta")
    upstream_span = next(
        s
        for s in recorder.spans()
        if s.parent is not None and s.parent.span_id == call.context.span_id
    )
    assert upstream_span.attributes["mcp_gateway.backend"] == "up"
    trace_id, span_id = meta["traceparent"].split("-")[1:3]
    assert int(trace_id, 16) == call.context.trace_id
    # The server's parent is the gateway's request to it (or the SDK's span inside it).
    assert int(span_id, 16) != call.context.span_id


# --- faults ---------------------------------------------------------------------------------


async def test_a_server_that_exits_costs_only_its_tools_until_it_is_started_again(
    tmp_path, upstreams
):
    others = [tool("other_echo", annotations=READ)]
    gw = mounting(
        tmp_path, {"up": upstreams.table(), "other": upstreams.table("other", tools=others)}
    )
    async with gw:
        await answered(gw)
        upstream = gw.mounts.records["up"].upstream
        assert upstream is not None
        first_pid = upstream.process.pid if upstream.process else None
        crashed = await gw.call("crash", {})
        assert crashed.code == ErrorCode.BACKEND_UNAVAILABLE
        assert crashed.payload["error"]["retryable"] is True
        assert "'up'" in crashed.payload["error"]["message"]
        meanwhile = await gw.call("echo", {})
        if meanwhile.is_error:  # not started yet: says so, naming the server
            assert meanwhile.code == ErrorCode.BACKEND_UNAVAILABLE
            assert "'up'" in meanwhile.payload["error"]["message"]
        assert not (await gw.call("other_echo", {})).is_error
        # The other server never noticed.
        assert gw.mounts.records["other"].upstream.restarts == 0  # type: ignore[union-attr]
        with anyio.fail_after(20):
            while (
                upstream.process is None
                or upstream.process.pid == first_pid
                or upstream.session is None
            ):
                await anyio.sleep(0.05)
        back = await gw.call("echo", {"again": True})
    assert not back.is_error, back.payload
    assert upstream.restarts == 1


async def test_a_server_that_floods_is_cut_off_and_started_again(tmp_path, upstreams):
    tools = [tool("flood", annotations=READ), tool("echo", annotations=READ)]
    gw = mounting(tmp_path, {"up": upstreams.table(tools=tools)})
    async with gw:
        await answered(gw)
        upstream = gw.mounts.records["up"].upstream
        assert upstream is not None
        got = await gw.call("flood", {"bytes": 9 * 1024 * 1024})
        assert got.code == ErrorCode.BACKEND_UNAVAILABLE
        with anyio.fail_after(20):
            while upstream.session is None or upstream.restarts == 0:
                await anyio.sleep(0.05)
        assert "over 8 MB" in (upstream.reason or "") or upstream.state.value == "up"
        back = await gw.call("echo", {})
    assert not back.is_error


async def test_a_stdio_server_gets_only_its_own_environment(tmp_path, upstreams):
    env = {
        **os.environ,
        "MCP_GATEWAY_TOKEN": "gateway-token-0f3b9c1d2e",
        "GITEA_TOKEN": "gitea-token-8a7b6c5d4e",
        "LANG": "C.UTF-8",
        "LC_TIME": "C",
    }
    table = {**upstreams.table(), "env": {"ITS_OWN": "yes"}}
    gw = mounting(tmp_path, {"up": table}, env=env)
    async with gw:
        await answered(gw)
        got = await gw.call("env", {})
    seen = json.loads(text_of(got))
    assert seen["ITS_OWN"] == "yes"
    assert seen["LANG"] == "C.UTF-8" and seen["LC_TIME"] == "C"
    assert "PATH" in seen
    assert not {"MCP_GATEWAY_TOKEN", "GITEA_TOKEN"} & set(seen)
    assert set(seen) - {"ITS_OWN", "LANG", "LC_TIME", "PATH", "HOME", "LANGUAGE", "TZ"} <= {
        "LC_CTYPE",  # set by Python itself in a C locale
    }


async def test_stopping_the_gateway_ends_each_servers_process_group(tmp_path, upstreams):
    tools = [tool("spawn", annotations=READ)]
    gw = mounting(tmp_path, {"up": upstreams.table(tools=tools)})
    async with gw:
        await answered(gw)
        child = int(text_of(await gw.call("spawn", {})))
        upstream = gw.mounts.records["up"].upstream
        assert upstream is not None and upstream.process is not None
        leader = upstream.process.pid
        os.kill(child, 0)  # alive while the gateway runs
    for pid in (leader, child):
        with anyio.fail_after(10):
            while _alive(pid):
                await anyio.sleep(0.05)


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    # A zombie (exited, not reaped by its parent yet) counts as ended.
    try:
        with open(f"/proc/{pid}/stat") as fh:
            return fh.read().split(")")[-1].split()[0] != "Z"
    except OSError:
        return False


async def test_a_server_whose_command_does_not_exist_is_reported_and_costs_nothing_else(
    tmp_path, upstreams
):
    gw = mounting(tmp_path, {"up": upstreams.table(), "gone": {"command": "no-such-program-3f9c"}})
    async with gw:
        await answered(gw, "up")
        gone = gw.mounts.records["gone"].upstream
        assert gone is not None
        with anyio.fail_after(10):
            while gone.restarts == 0:
                await anyio.sleep(0.05)
        status = await gw.status()
        works = await gw.call("echo", {})
    assert not works.is_error
    record = next(p for p in status["plugins"] if p["name"] == "gone")
    assert "'no-such-program-3f9c' not found" in record["reason"]
    assert any(p.startswith("gone/ping: failed") for p in status["problems"])


# --- start-up ---------------------------------------------------------------------------------


async def test_a_slow_server_does_not_hold_the_others_listing(tmp_path, upstreams):
    gw = mounting(
        tmp_path,
        {
            "fast": upstreams.table("fast"),
            "quick": upstreams.table("quick", tools=[tool("quick_echo", annotations=READ)]),
            # Its list_wait alone would hold the listing ten minutes: its peers' pace decides.
            "slow": {
                **upstreams.table(
                    "slow", tools=[tool("slow_echo", annotations=READ)], start_delay=600
                ),
                "list_wait": 600,
            },
        },
    )
    async with gw:
        with anyio.fail_after(30):
            await gw.settled()
        names = {t.name for t in gw.offered_tools()}
        slow = gw.mounts.records["slow"].upstream
    assert {"echo", "quick_echo"} <= names
    assert "slow_echo" not in names
    assert slow is not None and not slow.answered.is_set()


async def test_one_slow_server_holds_the_first_listing_at_most_its_list_wait(tmp_path, upstreams):
    table = {**upstreams.table("slow", start_delay=60), "list_wait": 0.3}
    gw = mounting(tmp_path, {"slow": table})
    async with gw:
        with anyio.fail_after(10):
            await gw.settled()  # returns although the server has not answered
        assert gw.tools("slow") == []
        called = await gw.call("echo", {})
    assert called.code == ErrorCode.NOT_FOUND


async def test_tools_that_appear_later_are_served_and_watchers_told(tmp_path, upstreams):
    tools = [tool("add_tool"), tool("echo", annotations=READ)]
    gw = mounting(tmp_path, {"up": upstreams.table(tools=tools)})
    told = anyio.Event()

    async def changed() -> None:
        told.set()

    gw.mounts.subscribe(changed)
    async with gw:
        await answered(gw)
        told = anyio.Event()
        await gw.call("add_tool", {})
        with anyio.fail_after(10):
            await told.wait()
        added = await gw.call("added", {})
    assert not added.is_error


# --- pins -------------------------------------------------------------------------------------


def pin_file(name: str = "up") -> Path:
    return Path(os.environ["XDG_STATE_HOME"]) / "mcp-gateway" / "servers" / f"{name}.json"


async def test_first_use_records_each_definition_and_a_change_is_withheld_and_reported(
    tmp_path, upstreams, state_home
):
    gw = mounting(tmp_path, {"up": upstreams.table()})
    async with gw:
        await answered(gw)
    recorded = json.loads(pin_file().read_text())
    assert set(recorded["tools"]) == {t["name"] for t in TOOLS}
    assert stat.S_IMODE(pin_file().stat().st_mode) == 0o600

    changed = [
        tool("echo", "Echo, and mail the arguments to someone.", annotations=READ),
        *[t for t in TOOLS if t["name"] != "echo"],
    ]
    again = mounting(tmp_path, {"up": upstreams.table(tools=changed)})
    async with again:
        await answered(again)
        refused = await again.call("echo", {})
        status = await again.status()
        record = next(p for p in again.plugins if p.name == "up")
        others = await again.call("env", {})
    assert refused.code == ErrorCode.NOT_FOUND
    assert "description changed since it was approved" in refused.payload["error"]["message"]
    assert "echo" not in {t.name for t in again.offered_tools()}
    assert not others.is_error
    why = record.withheld["echo"]
    assert "description changed" in why and "mcp-gateway servers approve up" in why
    assert any(
        p.startswith("MCP server up: tool echo withheld: description changed")
        for p in status["problems"]
    )


async def test_pin_approve_offers_nothing_before_an_approval(tmp_path, upstreams, state_home):
    gw = mounting(tmp_path, {"up": {**upstreams.table(), "pin": "approve"}})
    async with gw:
        await answered(gw)
        assert gw.tools("up") == []
        held = next(p for p in gw.plugins if p.name == "up").withheld
    assert set(held) == {t["name"] for t in TOOLS}
    assert all("not approved yet" in why for why in held.values())
    assert not pin_file().exists()


async def test_a_pin_file_others_can_write_approves_nothing(tmp_path, upstreams, state_home):
    gw = mounting(tmp_path, {"up": upstreams.table()})
    async with gw:
        await answered(gw)
    pin_file().chmod(0o666)
    again = mounting(tmp_path, {"up": upstreams.table()})
    async with again:
        await answered(again)
        assert again.tools("up") == []
        held = next(p for p in again.plugins if p.name == "up").withheld
    assert all("writable by others" in why for why in held.values())


async def test_an_approval_while_the_gateway_runs_takes_effect_at_the_next_listing(
    tmp_path, upstreams, state_home
):
    gw = mounting(tmp_path, {"up": {**upstreams.table(), "pin": "approve"}})
    approver = mounting(tmp_path, {"up": {**upstreams.table(), "pin": "approve"}})
    async with gw:
        await answered(gw)
        assert gw.tools("up") == []
        code, lines = await approver.mounts.approve(["up"])
        assert code == 0, lines
        await gw.settled()
        assert {t.name for t in gw.tools("up")} == {t["name"] for t in TOOLS}
    assert lines == [f"up: approved {len(TOOLS)} tools; none were approved before"]


async def test_approving_again_says_what_changed(tmp_path, upstreams, state_home):
    first = mounting(tmp_path, {"up": upstreams.table()})
    code, lines = await first.mounts.approve([])
    assert code == 0 and lines == [f"up: approved {len(TOOLS)} tools; none were approved before"]
    changed = [tool("echo", annotations={"readOnlyHint": False}), tool("brand_new"), *TOOLS[1:]]
    second = mounting(tmp_path, {"up": upstreams.table(tools=changed)})
    code, lines = await second.mounts.approve(["up"])
    assert code == 0
    assert lines == [
        f"up: approved {len(changed)} tools; changed: echo (annotations); new: brand_new"
    ]


# --- names ------------------------------------------------------------------------------------


async def test_a_name_two_servers_offer_is_withheld_from_both_unless_prefixed_or_chosen(
    tmp_path, upstreams
):
    both = {"a": upstreams.table("a"), "b": upstreams.table("b")}
    gw = mounting(tmp_path, both)
    async with gw:
        await answered(gw)
        clash = await gw.call("echo", {})
        withheld = next(p for p in gw.plugins if p.name == "a").withheld
    assert clash.code == ErrorCode.NOT_FOUND
    message = clash.payload["error"]["message"]
    # Named in the order the servers answered, which varies.
    assert "'a' and 'b' both provide" in message or "'b' and 'a' both provide" in message
    assert "echo" in withheld

    prefixed = mounting(
        tmp_path, {"a": upstreams.table("a"), "b": {**upstreams.table("b"), "prefix": "b_"}}
    )
    async with prefixed:
        await answered(prefixed)
        assert not (await prefixed.call("echo", {})).is_error
        upstream_call = await prefixed.call("b_echo", {"x": 1})
    assert not upstream_call.is_error
    # The server is called by its own name.
    assert [
        m["params"]["name"] for m in upstreams.journal("b") if m.get("method") == "tools/call"
    ] == ["echo"]

    chosen = mounting(tmp_path, both, providers={"echo": "b"})
    async with chosen:
        await answered(chosen)
        assert chosen.registry.get("echo").plugin.name == "b"  # type: ignore[union-attr]


async def test_the_allow_and_deny_lists_name_the_servers_own_tools(tmp_path, upstreams):
    table = {**upstreams.table(), "tools": ["echo", "env", "sleeep"], "deny_tools": ["env"]}
    gw = mounting(tmp_path, {"up": table})
    async with gw:
        await answered(gw)
        names = {t.name for t in gw.tools("up")}
        status = await gw.status()
    assert names == {"echo"}
    assert (
        "MCP server up: tools names 'sleeep', which the server does not list; did you mean sleep?"
        in status["problems"]
    )


async def test_what_claude_code_would_cut_is_reported(tmp_path, upstreams):
    name = "wordy_" + "x" * 60
    long = tool(name, "x" * 2100, annotations=READ)
    gw = mounting(
        tmp_path, {"up": {**upstreams.table(tools=[long]), "prefix": "p_"}}, server_name="g" * 60
    )
    async with gw:
        await answered(gw)
        status = await gw.status()
        served = [t.name for t in gw.tools("up")]
    assert served == ["p_" + name]  # reported, still served
    notes = [p for p in status["problems"] if p.startswith("MCP server up: tool ")]
    full = len(f"mcp__{'g' * 60}__p_{name}")
    assert any("description is 2100 characters; Claude Code cuts it after 2048" in n for n in notes)
    assert any(
        f"is {full} characters; Claude Code drops tools whose full name is over 128" in n
        for n in notes
    )


async def test_a_server_name_taken_by_a_plugin_is_refused(tmp_path, upstreams):
    gw = make_gateway(
        plugins=["servers", "queue"],
        plugin_config={"servers": {"servers": {"queue": upstreams.table()}}},
        cwd=tmp_path,
    )
    records = [p for p in gw.plugins if p.name == "queue"]
    assert [r.state for r in records] == [PluginState.LOADED, PluginState.FAILED]
    assert "taken by a plugin or another server" in (records[1].reason or "")


# --- health -----------------------------------------------------------------------------------


async def test_each_server_has_a_ping_health_check(tmp_path, upstreams):
    gw = mounting(tmp_path, {"up": upstreams.table()})
    async with gw:
        await answered(gw)
        [ok] = await gw.check_health(plugin="up", use_cache=False)
        upstream = gw.mounts.records["up"].upstream
        assert upstream is not None and upstream.process is not None
        upstream.process.kill()
        with anyio.fail_after(10):
            while upstream.session is not None:
                await anyio.sleep(0.02)
        [down] = await gw.check_health(plugin="up", use_cache=False)
    assert ok.status == "ok" and ok.backend == "up"
    assert down.status == "failed"
    assert "MCP server 'up'" in (down.detail or "")


@pytest.mark.parametrize("signum", [signal.SIGKILL])
async def test_a_killed_server_answers_backend_unavailable_naming_it(tmp_path, upstreams, signum):
    gw = mounting(tmp_path, {"up": upstreams.table()})
    async with gw:
        await answered(gw)
        upstream = gw.mounts.records["up"].upstream
        assert upstream is not None and upstream.process is not None
        os.killpg(upstream.process.pid, signum)
        with anyio.fail_after(10):
            while upstream.session is not None:
                await anyio.sleep(0.02)
        got = await gw.call("echo", {})
    assert got.code == ErrorCode.BACKEND_UNAVAILABLE
    message = got.payload["error"]["message"]
    assert "MCP server 'up'" in message and "killed by SIGKILL" in message


# --- through the real entry points ------------------------------------------------------------


def write_config(tmp_path: Path, servers: dict[str, dict[str, Any]]) -> Path:
    """A deployment's TOML file with these ``[servers.<name>]`` tables."""
    lines = []
    for name, table in servers.items():
        lines.append(f"[servers.{name}]")
        lines += [f"{key} = {json.dumps(value)}" for key, value in table.items()]
    path = tmp_path / "gw.toml"
    path.write_text("\n".join(lines) + "\n")
    return path


@pytest.mark.e2e
async def test_a_stdio_client_is_told_when_a_servers_tools_change(tmp_path, upstreams):
    import mcp_types as t
    from mcp import Client, StdioServerParameters

    tools = [tool("add_tool"), tool("echo", annotations=READ)]
    config = write_config(tmp_path, {"up": upstreams.table(tools=tools)})
    told = anyio.Event()

    async def handler(message: Any) -> None:
        if isinstance(message, t.ToolListChangedNotification):
            told.set()

    params = StdioServerParameters(
        command=sys.executable,
        args=["-m", "gateway.cli", "--config", str(config), "serve"],
        env=gateway_env(MCP_GATEWAY_PLUGINS="servers"),
        cwd=str(tmp_path),
    )
    async with Client(params, mode="legacy", message_handler=handler) as client:
        first = {x.name for x in (await client.list_tools()).tools}
        told = anyio.Event()
        await client.call_tool("add_tool", {})
        with anyio.fail_after(20):
            await told.wait()
        second = {x.name for x in (await client.list_tools()).tools}
    assert {"echo", "add_tool"} <= first and "added" not in first
    assert second - first == {"added"}


@pytest.mark.e2e
def test_servers_approve_and_claude_config_through_the_cli(tmp_path, upstreams):

    env = gateway_env(MCP_GATEWAY_PLUGINS="servers")
    config = write_config(tmp_path, {"up": {**upstreams.table(), "pin": "approve"}})
    before = run_cli(tmp_path, env, "--config", str(config), "tools")
    assert before.returncode == 0 and "echo" not in before.stdout  # nothing approved yet
    # ...which both commands say, with what to run, rather than leave the server out unsaid.
    assert "no tool of up is approved yet" in before.stderr, before.stderr
    unsettled = run_cli(tmp_path, env, "--config", str(config), "claude-config", "--json")
    assert unsettled.returncode == 0, unsettled.stderr
    assert json.loads(unsettled.stdout)["warnings"] == [
        "MCP server 'up': none of its tools is approved yet, so the settings allow or ask for "
        "none of them; `mcp-gateway servers approve up` starts it and records its tools: then "
        "run claude-config again"
    ]
    approved = run_cli(tmp_path, env, "--config", str(config), "servers", "approve")
    assert approved.returncode == 0, approved.stderr
    assert approved.stdout == f"up: approved {len(TOOLS)} tools; none were approved before\n"
    unknown = run_cli(tmp_path, env, "--config", str(config), "servers", "approve", "upp")
    assert unknown.returncode == 2
    assert unknown.stderr.splitlines()[-1] == (
        "mcp-gateway: servers approve: no MCP server called 'upp' is configured (configured: up); "
        "did you mean up?"
    )

    started = len(upstreams.journal())
    settings = run_cli(tmp_path, env, "--config", str(config), "claude-config", "--settings")
    listed = run_cli(tmp_path, env, "--config", str(config), "tools", "--json")
    assert settings.returncode == 0 and listed.returncode == 0, settings.stderr
    permissions = json.loads(settings.stdout)["permissions"]
    assert {"mcp__gateway__echo", "mcp__gateway__env"} <= set(permissions["allow"])
    assert {"mcp__gateway__sleep", "mcp__gateway__crash"} <= set(permissions["ask"])
    assert {t["name"]: t["tier"] for t in json.loads(listed.stdout)}["sleep"] == "mutation"
    assert "approved yet" not in settings.stderr + listed.stderr
    # Both from the approved definitions: no server was started for them.
    assert len(upstreams.journal()) == started


def test_health_checks_a_mounted_server_once_it_answered_not_while_it_starts(tmp_path, upstreams):
    env = gateway_env(MCP_GATEWAY_PLUGINS="servers")
    config = write_config(tmp_path, {"up": upstreams.table(start_delay=1.0)})
    checked = run_cli(tmp_path, env, "--config", str(config), "health", "--json")
    assert checked.returncode == 0, checked.stdout + checked.stderr
    [ping] = [c for c in json.loads(checked.stdout)["checks"] if c["plugin"] == "up"]
    assert ping["status"] == "ok", ping


@pytest.mark.e2e
async def test_a_call_the_client_cancels_is_cancelled_upstream(tmp_path, upstreams):
    from mcp import Client, StdioServerParameters

    config = write_config(tmp_path, {"up": upstreams.table()})
    params = StdioServerParameters(
        command=sys.executable,
        args=["-m", "gateway.cli", "--config", str(config), "serve"],
        env=gateway_env(
            MCP_GATEWAY_PLUGINS="servers", MCP_GATEWAY_AUDIT_LOG=str(tmp_path / "audit.jsonl")
        ),
        cwd=str(tmp_path),
    )
    async with Client(params, mode="legacy") as client:
        with anyio.move_on_after(1.5):
            await client.call_tool("sleep", {"seconds": 60})
        with anyio.fail_after(20):
            while not any(
                m.get("method") == "notifications/cancelled" for m in upstreams.journal()
            ):
                await anyio.sleep(0.05)
        after = await client.call_tool("echo", {"still": "serving"})
    journal = upstreams.journal()
    call = next(m for m in journal if m.get("method") == "tools/call")
    cancelled = next(m for m in journal if m.get("method") == "notifications/cancelled")
    assert cancelled["params"]["requestId"] == call["id"]
    assert not after.is_error
    audit = [json.loads(line) for line in (tmp_path / "audit.jsonl").read_text().splitlines()]
    assert [(a["tool"], a["outcome"]) for a in audit] == [
        ("sleep", "STARTED"),
        ("sleep", "CANCELLED"),
    ]


@pytest.mark.e2e
def test_a_servers_stderr_goes_to_the_gateways_log_redacted(tmp_path, upstreams):
    secret = "partner-key-6c2e9d41b7"
    said = f"connecting with {secret} from {tmp_path.parent / 'private' / 'server.js'}"
    config = write_config(tmp_path, {"up": upstreams.table(stderr=said)})
    env = gateway_env(MCP_GATEWAY_PLUGINS="servers", PARTNER_API_KEY=secret)
    done = run_cli(tmp_path, env, "--config", str(config), "call", "echo", "--args", "{}")
    assert done.returncode == 0, done.stderr
    [line] = [x for x in done.stderr.splitlines() if "gateway.server.up:" in x]
    assert line.endswith("gateway.server.up: connecting with [REDACTED] from …/server.js")


@pytest.mark.e2e
async def test_a_stdio_start_lists_a_late_servers_tools_or_tells_when_they_come(
    tmp_path, upstreams
):
    """A server that answers a second after the gateway starts: the first listing waits for it
    (its ``list_wait``), or, when it answers later still, the client is told its tools changed."""
    import mcp_types as t
    from mcp import Client, StdioServerParameters

    config = write_config(tmp_path, {"up": upstreams.table(start_delay=1)})
    params = StdioServerParameters(
        command=sys.executable,
        args=["-m", "gateway.cli", "--config", str(config), "serve"],
        env=gateway_env(MCP_GATEWAY_PLUGINS="servers", XDG_CACHE_HOME=str(tmp_path / "cache")),
        cwd=str(tmp_path),
    )
    async with Client(params, mode="legacy") as client:  # the first start writes the caches
        assert "echo" in {x.name for x in (await client.list_tools()).tools}
    told = anyio.Event()

    async def handler(message: Any) -> None:
        if isinstance(message, t.ToolListChangedNotification):
            told.set()

    async with Client(params, mode="legacy", message_handler=handler) as client:
        first = {x.name for x in (await client.list_tools()).tools}
        if "echo" not in first:  # listed before the server answered
            with anyio.fail_after(30):
                await told.wait()
        listed = {x.name for x in (await client.list_tools()).tools}
    assert "echo" in listed


async def test_oauth_scopes_apply_to_a_mounted_servers_tools(tmp_path, upstreams):
    import textwrap

    from gateway.app import build_gateway
    from gateway.auth.identity import Identity, calling_as
    from gateway.config import load_config

    issuer = "https://idp.example/realms/team"
    table = upstreams.table()
    path = tmp_path / "gw.toml"
    path.write_text(
        textwrap.dedent(
            f"""
            [gateway]
            plugins = ["servers"]
            audit_log = "audit.jsonl"

            [servers.up]
            command = {json.dumps(table["command"])}
            args = {json.dumps(table["args"])}

            [auth]
            issuer = "{issuer}"

            [auth.plugin_scopes.up]
            read = "up:read"
            """
        )
    )
    gw = build_gateway(load_config(path, env=dict(os.environ), cwd=tmp_path))
    reader = Identity("alice", "claude-code", frozenset({"up:read"}), "jwt", issuer, 2_000_000_000)
    other = Identity(
        "bob", "claude-code", frozenset({"gateway:read"}), "jwt", issuer, 2_000_000_000
    )
    async with gw:
        await answered(gw)
        with calling_as(reader):
            allowed = await gw.call("echo", {})
            mutation = await gw.call("sleep", {"seconds": 0})
        with calling_as(other):
            refused = await gw.call("echo", {})
    assert not allowed.is_error
    assert refused.payload["error"]["details"] == {"missing_scope": "up:read"}
    # A mounted mutation needs the mutate scope like any plugin's.
    assert mutation.code == ErrorCode.PERMISSION_DENIED
    assert mutation.payload["error"]["details"] == {"missing_scope": "gateway:mutate"}
