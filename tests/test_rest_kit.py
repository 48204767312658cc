"""The REST kit against real HTTP servers on 127.0.0.1: every failure mapped once, limits on
what a backend can do, shared backend identity, declarative tools."""

from __future__ import annotations

import json
import subprocess
import sys
import threading
import time
from typing import Any, ClassVar

import anyio
import pytest
from pydantic import BaseModel, ConfigDict, Field

from gateway import ErrorCode, GatewayError, Mutation, Tier, ToolSpec, hookimpl
from gateway.rest import (
    JsonString,
    RestBackend,
    RestContext,
    RestSettings,
    RestTool,
    Route,
    UtcTimestamp,
    offset_page,
)
from gateway.testing import make_gateway
from gateway.testing.backends import FakeBackend, FaultMode, Reply

pytestmark = pytest.mark.anyio


class DemoSettings(RestSettings):
    env_prefix: ClassVar[str] = "DEMO_API"


DEMO = RestBackend(
    name="demo",
    settings=DemoSettings,
    settings_table="demo",
    title="the demo API",
    health_path="/health",
)


class ItemArgs(BaseModel):
    model_config = ConfigDict(extra="forbid")
    item_id: str = Field(max_length=100)
    verbose: bool | None = None
    kind: str | None = None


class Item(BaseModel):
    id: str
    meta: JsonString = None
    at: UtcTimestamp | None = None


class CreateArgs(BaseModel):
    model_config = ConfigDict(extra="forbid")
    name: str
    note: str | None = None


class Api(FakeBackend):
    """A small API: items by id, echoes what it received, and a few statuses on demand."""

    def respond(self, request: Any) -> Reply:
        path = request.path
        if path == "/health":
            return Reply.json({"status": "ok"})
        if path.startswith("/items/"):
            raw = path.removeprefix("/items/")
            return Reply.json(
                {
                    "id": raw,
                    "meta": json.dumps({"query": request.query}),
                    "at": "2026-11-22T10:58:22.221362+01:00",
                }
            )
        if path == "/create":
            return Reply.json({"id": "new", "meta": json.dumps(request.json)})
        if path.startswith("/status/"):
            status = int(path.rsplit("/", 1)[1])
            detail: Any = "job is in state completed"
            if status == 422:
                detail = [{"loc": ["query", "limit"], "msg": "Input should be less than 501"}]
            return Reply.json({"detail": detail}, status)
        return Reply.json({"detail": "Not Found"}, 404)


def _plugin(*specs: Any) -> object:
    class Plugin:
        @hookimpl
        def register_tools(self, register: Any) -> None:
            for spec in specs:
                register(spec)

    return Plugin()


GET_ITEM = RestTool(
    name="demo_get",
    description="Get an item.",
    input_model=ItemArgs,
    output_model=Item,
    tier=Tier.READ,
    backend=DEMO,
    route=Route(
        "GET",
        "/items/{item_id}",
        query=("verbose", "kind"),
        rename={"kind": "type"},
        what="item {item_id}",
        status={404: "no item {item_id}; list the items first"},
    ),
)
CREATE = RestTool(
    name="demo_create",
    description="Create an item.",
    input_model=CreateArgs,
    output_model=Item,
    tier=Tier.MUTATION,
    mutation=Mutation(
        "creates an item", "nothing", reversible=True, destructive=False, idempotent=False
    ),
    backend=DEMO,
    route=Route("POST", "/create", body=("name", "note")),
)


class StatusArgs(BaseModel):
    model_config = ConfigDict(extra="forbid")
    status: int


async def _status_handler(args: StatusArgs, ctx: RestContext[Any]) -> Any:
    answer = await ctx.client.answer(
        "GET",
        "/status/{status}",
        path_params={"status": args.status},
        what="job 42",
        status={409: (ErrorCode.CONFLICT, "job 42 cannot do that now: {reason}")},
    )
    return answer.data


STATUS = RestTool(
    name="demo_status",
    description="Ask for a status.",
    input_model=StatusArgs,
    tier=Tier.READ,
    backend=DEMO,
    run=_status_handler,
)


def _gw(tmp_path: Any, url: str | None, *plugins: tuple[str, object], **settings: Any) -> Any:
    table: dict[str, Any] = {"request_timeout": settings.pop("request_timeout", 1.0)}
    if url:
        table["url"] = url
    table.update(settings.pop("demo", {}))
    objects = dict(plugins) or {"demo": _plugin(GET_ITEM, CREATE, STATUS)}
    return make_gateway(
        objects=objects,
        entry_points=False,
        plugin_config={"demo": table},
        env=settings.pop("env", {}),
        cwd=tmp_path,
        **settings,
    )


def _error(result: Any) -> dict[str, Any]:
    assert result.is_error, result.payload
    return result.payload["error"]  # type: ignore[no-any-return]


# --- settings ----------------------------------------------------------------------------------


async def test_settings_come_from_the_backends_own_variables(tmp_path):
    with Api() as api:
        gw = _gw(
            tmp_path, None, env={"DEMO_API_URL": api.url + "/", "DEMO_API_TOKEN": "tok-123456"}
        )
        async with gw:
            ok = await gw.call("demo_get", {"item_id": "a"})
        assert not ok.is_error, ok.payload
        assert api.requests[-1].headers["authorization"] == "Bearer tok-123456"
        assert gw.backends.settings(DEMO).url == api.url  # trailing slash dropped


def test_credentials_in_the_url_and_a_token_are_refused_together(tmp_path):
    gw = _gw(
        tmp_path,
        "http://user:hunter22@127.0.0.1:9",
        demo={"token": "tok-123456"},
    )
    record = gw.plugin("demo")
    assert record.state.value == "failed"
    assert "only one of them would be sent" in record.reason
    assert "hunter22" not in record.reason and "tok-123456" not in record.reason


def test_a_bad_url_fails_the_plugin_with_the_setting_named(tmp_path):
    gw = _gw(tmp_path, "ftp://example")
    assert gw.plugin("demo").state.value == "failed"
    assert "[plugins.demo] url: must be an http:// or https:// URL" in gw.plugin("demo").reason
    # From its variable, the variable is named.
    gw = _gw(tmp_path, None, env={"DEMO_API_URL": "ftp://example"})
    assert gw.plugin("demo").settings_mistake.startswith("DEMO_API_URL: must be an http://")


async def test_the_password_in_a_url_is_a_secret_for_the_sanitizer(tmp_path):
    gw = _gw(tmp_path, "http://user:s3cret-pw-77@127.0.0.1:9")
    assert gw.sanitizer("failed with s3cret-pw-77 inside") == "failed with [REDACTED] inside"


async def test_unconfigured_backend_tools_say_which_variable_to_set(tmp_path):
    gw = _gw(tmp_path, None)
    async with gw:
        err = _error(await gw.call("demo_get", {"item_id": "a"}))
        health = await gw.health.run(use_cache=False)
    assert err["code"] == "BACKEND_UNAVAILABLE" and "set DEMO_API_URL" in err["message"]
    assert [(h.name, h.status) for h in health if h.backend == "demo"] == [
        ("demo_api", "unconfigured")
    ]


# --- transport failures ------------------------------------------------------------------------


async def test_refused_hanging_failing_and_garbled_backends_each_map_to_one_code(tmp_path):
    with Api() as api:
        gw = _gw(tmp_path, api.url, breaker_failures=100, request_timeout=0.5)
        async with gw:
            expected = {
                FaultMode.REFUSE: ("BACKEND_UNAVAILABLE", True),
                FaultMode.HANG: ("TIMEOUT", True),
                FaultMode.ERROR: ("BACKEND_ERROR", True),
                FaultMode.GARBAGE: ("BACKEND_ERROR", True),
                FaultMode.NULL: ("BACKEND_ERROR", True),
            }
            for mode, (code, retryable) in expected.items():
                api.mode = mode
                started = time.monotonic()
                err = _error(await gw.call("demo_get", {"item_id": "a"}))
                assert (err["code"], err["retryable"]) == (code, retryable), (mode, err)
                assert time.monotonic() - started < 2.5, mode
            api.mode = FaultMode.NORMAL
            assert not (await gw.call("demo_get", {"item_id": "a"})).is_error


async def test_messages_carry_the_backends_own_reason(tmp_path):
    with Api() as api:
        gw = _gw(tmp_path, api.url)
        async with gw:
            codes = {}
            for status in (400, 401, 404, 409, 422, 429, 418, 502):
                err = _error(await gw.call("demo_status", {"status": status}))
                codes[status] = (err["code"], err["retryable"], err["message"])
    assert codes[400][:2] == ("CONFLICT", False) and "completed" in codes[400][2]
    assert codes[401][:2] == ("PERMISSION_DENIED", False) and "DEMO_API_TOKEN" in codes[401][2]
    assert codes[404][:2] == ("NOT_FOUND", False)
    assert codes[409] == ("CONFLICT", False, "job 42 cannot do that now: job is in state completed")
    assert codes[422][:2] == ("VALIDATION_ERROR", False)
    assert "limit: Input should be less than 501" in codes[422][2]
    assert codes[429][:2] == ("BACKEND_ERROR", True)
    assert codes[418][:2] == ("BACKEND_ERROR", False)
    assert codes[502][:2] == ("BACKEND_ERROR", True) and "HTTP 502" in codes[502][2]


async def test_a_backends_reason_keeps_its_words_and_loses_its_values(tmp_path):
    # A FastAPI 401, {"detail": "bad token"}, is quoted after "set a valid DEMO_API_TOKEN": a
    # plain word there is prose, not a value. A value after a credential word goes.
    with Api() as api:
        gw = _gw(tmp_path, api.url)
        async with gw:
            api.override("/status/401", Reply.json({"detail": "bad token"}, 401))
            bad = _error(await gw.call("demo_status", {"status": 401}))
            api.override(
                "/status/403", Reply.json({"detail": "x-api-key 7f3a9c2e1b is revoked"}, 403)
            )
            revoked = _error(await gw.call("demo_status", {"status": 403}))
    assert bad["message"].endswith("set a valid DEMO_API_TOKEN: bad token"), bad
    assert revoked["message"].endswith("x-api-key [REDACTED] is revoked"), revoked


class ReserveArgs(BaseModel):
    model_config = ConfigDict(extra="forbid")
    sku: str
    quantity: int
    reason_code: str | None = None


class Stock(FakeBackend):
    def respond(self, request: Any) -> Reply:
        return Reply.json({"detail": f"only 2 left of {request.json['sku']}"}, 409)


RESERVE = RestTool(
    name="demo_reserve",
    description="Reserve stock.",
    input_model=ReserveArgs,
    tier=Tier.MUTATION,
    mutation=Mutation(
        "reserves stock", "the item exists", reversible=True, destructive=False, idempotent=False
    ),
    backend=DEMO,
    route=Route(
        "POST",
        "/reserve",
        body=("sku", "quantity", "reason_code"),
        rename={"quantity": "qty"},
        status={409: "cannot reserve {quantity} of {sku}: {reason}"},
    ),
)


async def _reserve_by_hand(args: ReserveArgs, ctx: RestContext[Any]) -> Any:
    answer = await ctx.client.answer(
        "POST",
        "/reserve",
        json_body={"sku": args.sku, "qty": args.quantity},
        status={409: (ErrorCode.CONFLICT, "{qty} of {sku} cannot be had: {reason}")},
    )
    return answer.data


async def test_a_status_template_is_filled_from_the_body_fields_too(tmp_path):
    by_hand = RestTool(
        name="demo_reserve_by_hand",
        description="Reserve stock.",
        input_model=ReserveArgs,
        tier=Tier.READ,
        backend=DEMO,
        run=_reserve_by_hand,
    )
    with Stock() as api:
        gw = _gw(tmp_path, api.url, ("demo", _plugin(RESERVE, by_hand)))
        async with gw:
            args = {"sku": "AB-1", "quantity": 5}
            declared = _error(await gw.call("demo_reserve", args))
            manual = _error(await gw.call("demo_reserve_by_hand", args))
    assert declared["message"] == "cannot reserve 5 of AB-1: only 2 left of AB-1"
    assert manual["message"] == "5 of AB-1 cannot be had: only 2 left of AB-1"


@pytest.mark.parametrize(
    ("rule", "named"),
    [
        ("cannot reserve {quantiy} of {sku}", "{quantiy}"),
        ((ErrorCode.CONFLICT, "cannot reserve {amount}: {reason}"), "{amount}"),
    ],
)
def test_a_status_template_placeholder_nothing_fills_is_refused_at_registration(
    tmp_path, rule, named
):
    class Bad:
        @hookimpl
        def register_tools(self, register: Any) -> None:
            register(
                RestTool(
                    name="demo_reserve",
                    description="Reserve stock.",
                    input_model=ReserveArgs,
                    tier=Tier.READ,
                    backend=DEMO,
                    route=Route("POST", "/reserve", body=("sku", "quantity"), status={409: rule}),
                )
            )

    gw = _gw(tmp_path, "http://127.0.0.1:9", ("bad", Bad()))
    record = gw.plugin("bad")
    assert record.state.value == "failed"
    assert named in record.reason and "409" in record.reason, record.reason
    assert "quantity" in record.reason  # what could fill it
    assert "demo_reserve" not in {t.name for t in gw.visible_tools()}


async def test_answers_of_the_backend_never_open_the_breaker_but_refusals_do(tmp_path):
    with Api() as api:
        gw = _gw(tmp_path, api.url, breaker_failures=2)
        async with gw:
            for _ in range(4):
                assert (
                    _error(await gw.call("demo_status", {"status": 503}))["code"] == "BACKEND_ERROR"
                )
            assert gw.health.breaker_states()["demo"]["state"] == "closed"
            api.mode = FaultMode.REFUSE
            for _ in range(2):
                await gw.call("demo_get", {"item_id": "a"})
            paused = _error(await gw.call("demo_get", {"item_id": "a"}))
    assert paused["code"] == "BACKEND_UNAVAILABLE" and "paused" in paused["message"]


async def test_a_tool_timeout_that_cuts_off_a_backend_request_counts_for_the_breaker(tmp_path):
    with Api() as api:
        api.mode = FaultMode.HANG
        gw = _gw(tmp_path, api.url, request_timeout=30, default_timeout=0.3, breaker_failures=2)
        async with gw:
            for _ in range(2):
                assert _error(await gw.call("demo_get", {"item_id": "a"}))["code"] == "TIMEOUT"
            assert gw.health.breaker_states()["demo"]["state"] == "open"


# --- limits on what a backend can do -------------------------------------------------------------


async def test_oversized_answers_and_gzip_bombs_cost_no_more_than_the_cap(tmp_path):
    with Api() as api:
        api.override("/items/big", Reply.large(100 * 1024 * 1024))
        api.override("/items/bomb", Reply.gzip_bomb(1 << 30))
        api.override("/items/zipped", Reply.gzip(json.dumps({"id": "zipped"}).encode()))
        gw = _gw(tmp_path, api.url, request_timeout=5, demo={"max_response_bytes": 1024 * 1024})
        async with gw:
            started = time.monotonic()
            big = _error(await gw.call("demo_get", {"item_id": "big"}))
            bomb = _error(await gw.call("demo_get", {"item_id": "bomb"}))
            elapsed = time.monotonic() - started
            zipped = await gw.call("demo_get", {"item_id": "zipped"})
    for err in (big, bomb):
        assert err["code"] == "BACKEND_ERROR" and not err["retryable"]
        assert "larger than 1,048,576 bytes" in err["message"]
        assert "DEMO_API_MAX_RESPONSE_BYTES" in err["message"]
    assert elapsed < 5  # neither 100 MB nor 1 GB was read
    assert zipped.payload["id"] == "zipped"


async def test_only_gets_are_retried_and_only_when_nothing_was_answered(tmp_path):
    with Api() as api:
        gw = _gw(tmp_path, api.url)
        async with gw:
            api.mode = FaultMode.REFUSE
            timer = threading.Timer(0.2, api.set_mode, args=(FaultMode.NORMAL,))
            timer.start()
            got = await gw.call("demo_get", {"item_id": "a"})  # refused, retried, answered
            timer.join()
            assert not got.is_error, got.payload
            api.mode = FaultMode.REFUSE
            threading.Timer(0.2, api.set_mode, args=(FaultMode.NORMAL,)).start()
            posted = _error(await gw.call("demo_create", {"name": "x"}))
            await anyio.sleep(0.3)
            api.mode = FaultMode.ERROR
            before = len(api.requests)
            await gw.call("demo_get", {"item_id": "a"})  # a 500 is an answer: sent once
    assert posted["code"] == "BACKEND_UNAVAILABLE"
    assert not [r for r in api.requests if r.method == "POST"]
    assert len(api.requests) == before + 1


# --- declarative tools ---------------------------------------------------------------------------


async def test_a_route_maps_path_query_and_body_and_shapes_the_answer(tmp_path):
    with Api() as api:
        gw = _gw(tmp_path, api.url)
        async with gw:
            got = await gw.call("demo_get", {"item_id": "a/../b c", "kind": "pdf", "verbose": True})
            created = await gw.call("demo_create", {"name": "n"})
            api.override("/items/missing", Reply.json({"detail": "Not Found"}, 404))
            missing = _error(await gw.call("demo_get", {"item_id": "missing"}))
    sent = next(r for r in api.requests if r.path.startswith("/items/"))
    assert sent.path == "/items/a%2F..%2Fb%20c"  # one segment, whatever it holds
    assert sent.query == {"type": "pdf", "verbose": "true"}
    assert got.payload["meta"] == {
        "query": {"type": "pdf", "verbose": "true"}
    }  # JSON string decoded
    assert got.payload["at"] == "2026-11-22T09:58:22.221362Z"
    assert created.payload["meta"] == {"name": "n"}  # None fields are not sent
    post = next(r for r in api.requests if r.method == "POST")
    assert post.json == {"name": "n"}
    assert missing["code"] == "NOT_FOUND"
    assert missing["message"] == "no item missing; list the items first"


async def test_an_answer_of_an_unexpected_shape_is_a_backend_error_not_a_crash(tmp_path):
    with Api() as api:
        api.override("/items/odd", Reply.json({"no_id": True}))
        gw = _gw(tmp_path, api.url)
        async with gw:
            err = _error(await gw.call("demo_get", {"item_id": "odd"}))
    assert err["code"] == "BACKEND_ERROR" and "unexpected shape (id" in err["message"]


def test_offset_page_says_whether_and_where_to_continue():
    assert offset_page(total=120, offset=50, limit=50, returned=50) == {
        "total": 120,
        "offset": 50,
        "limit": 50,
        "has_more": True,
        "next_offset": 100,
    }
    assert offset_page(total=120, offset=100, limit=50, returned=20)["has_more"] is False


# --- shared backend identity ---------------------------------------------------------------------


class OtherArgs(BaseModel):
    model_config = ConfigDict(extra="forbid")


async def test_two_plugins_on_one_backend_share_client_breaker_and_health_check(tmp_path):
    second = RestTool(
        name="demo_ping",
        description="Ping.",
        input_model=OtherArgs,
        tier=Tier.READ,
        backend=DEMO,
        route=Route("GET", "/health"),
    )
    with Api() as api:
        both = _gw(
            tmp_path,
            api.url,
            ("first", _plugin(GET_ITEM)),
            ("second", _plugin(second)),
            breaker_failures=2,
        )
        async with both:
            assert not (await both.call("demo_get", {"item_id": "a"})).is_error
            assert not (await both.call("demo_ping", {})).is_error
            assert len({id(both.backends.client(DEMO))}) == 1
            health = await both.health.run(use_cache=False)
            status = await both.status()
            api.mode = FaultMode.REFUSE
            for _ in range(2):
                await both.call("demo_get", {"item_id": "a"})
            paused = _error(await both.call("demo_ping", {}))  # the other plugin's tool
        demo_checks = [h for h in health if h.backend == "demo"]
        assert len(demo_checks) == 1 and demo_checks[0].shared_with == ("second",)
        per_plugin = {p["name"]: [c["check"] for c in p["health"]] for p in status["plugins"]}
        assert per_plugin["first"] == per_plugin["second"] == ["demo_api"]
        assert paused["code"] == "BACKEND_UNAVAILABLE" and "paused" in paused["message"]

        api.mode = FaultMode.NORMAL
        alone = _gw(tmp_path, api.url, ("second", _plugin(second)))
        async with alone:
            assert not (await alone.call("demo_ping", {})).is_error
            assert [h.name for h in await alone.health.run(use_cache=False)] == ["demo_api"]


async def test_a_backend_defined_in_one_statement_is_the_same_backend_as_a_declared_one(tmp_path):
    again = RestBackend.define(
        "demo", env_prefix="DEMO_API", settings_table="demo", title="x", health_path="/health"
    )
    assert again.same_identity(DEMO) and again.settings.env_prefix == "DEMO_API"
    ping = RestTool(
        name="ping",
        description="P.",
        input_model=OtherArgs,
        tier=Tier.READ,
        backend=again,
        route=Route("GET", "/health"),
    )
    with Api() as api:
        gw = _gw(
            tmp_path,
            None,
            ("first", _plugin(GET_ITEM)),
            ("second", _plugin(ping)),
            env={"DEMO_API_URL": api.url},
        )
        async with gw:
            assert not (await gw.call("ping", {})).is_error
            assert not (await gw.call("demo_get", {"item_id": "a"})).is_error
    assert gw.plugin("second").state.value == "loaded"


def test_a_backend_name_declared_differently_fails_the_second_plugin(tmp_path):
    other = RestBackend(
        name="demo", settings=DemoSettings, settings_table="elsewhere", title="another API"
    )
    clash = RestTool(
        name="clash",
        description="Clash.",
        input_model=OtherArgs,
        tier=Tier.READ,
        backend=other,
        route=Route("GET", "/x"),
    )
    gw = _gw(
        tmp_path, "http://127.0.0.1:9", ("first", _plugin(GET_ITEM)), ("second", _plugin(clash))
    )
    assert gw.plugin("first").state.value == "loaded"
    assert gw.plugin("second").state.value == "failed"
    assert "declared differently" in gw.plugin("second").reason


# --- plugins that use httpx themselves --------------------------------------------------------


async def test_an_httpx_status_error_reaching_the_core_is_mapped_by_status(tmp_path):
    import httpx

    with Api() as api:

        async def raw(args: OtherArgs, ctx: Any) -> Any:
            async with httpx.AsyncClient() as client:
                resp = await client.get(api.url + "/nothing-here")
                resp.raise_for_status()
            return {}

        spec = ToolSpec(
            name="raw_get", description="Get.", input_model=OtherArgs, handler=raw, tier="read"
        )
        gw = make_gateway(objects={"raw": _plugin(spec)}, entry_points=False, cwd=tmp_path, env={})
        async with gw:
            err = _error(await gw.call("raw_get", {}))
    assert err["code"] == "NOT_FOUND" and err["retryable"] is False


# --- start-up --------------------------------------------------------------------------------


def test_httpx_is_imported_by_the_first_call_not_at_start_up(tmp_path):
    code = f"""
import sys, anyio
sys.path.insert(0, {str(tmp_path)!r})
from gateway.testing import make_gateway
from gateway.server import build_server
import test_rest_kit_plugin as p
gw = make_gateway(objects={{"demo": p.plugin()}}, entry_points=False, env={{}},
                  plugin_config={{"demo": {{"url": "http://127.0.0.1:9"}}}})
async def main():
    async with gw:
        gw.visible_tools()
        assert "httpx" not in sys.modules, "imported at start-up"
        await gw.call("demo_get", {{"item_id": "a"}})
        assert "httpx" in sys.modules
anyio.run(main)
print("ok")
"""
    (tmp_path / "test_rest_kit_plugin.py").write_text(
        "from gateway.rest import RestBackend, RestSettings, RestTool, Route\n"
        "from gateway import Tier, hookimpl\n"
        "from pydantic import BaseModel, ConfigDict\n"
        "class S(RestSettings):\n    env_prefix = 'DEMO_API'\n"
        "B = RestBackend(name='demo', settings=S, settings_table='demo', title='demo')\n"
        "class A(BaseModel):\n    model_config = ConfigDict(extra='forbid')\n    item_id: str\n"
        "T = RestTool(name='demo_get', description='x', input_model=A, tier=Tier.READ,"
        " backend=B, route=Route('GET', '/items/{item_id}'))\n"
        "class P:\n    @hookimpl\n    def register_tools(self, register):\n        register(T)\n"
        "def plugin():\n    return P()\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], cwd=tmp_path, capture_output=True, text=True, timeout=60
    )
    assert out.stdout.strip() == "ok", out.stderr[-2000:]


def test_rest_tools_must_declare_the_tier_rules_like_any_tool(tmp_path):
    bad = RestTool(
        name="demo_delete",
        description="Delete.",
        input_model=ItemArgs,
        tier=Tier.MUTATION,
        backend=DEMO,
        route=Route("DELETE", "/items/{item_id}"),
    )
    gw = _gw(tmp_path, "http://127.0.0.1:9", ("bad", _plugin(bad)))
    assert gw.plugin("bad").state.value == "failed"
    assert "Mutation" in gw.plugin("bad").reason


def test_a_delete_route_without_a_tier_is_refused_never_published_read_only(tmp_path):
    # Declared without a tier, a REST tool has none to fall back on (there is no default):
    # the plugin is skipped with the reason, and its DELETE is not offered at all.
    class NoTier:
        @hookimpl
        def register_tools(self, register: Any) -> None:
            register(
                RestTool(
                    name="demo_delete",
                    description="Delete.",
                    input_model=ItemArgs,
                    backend=DEMO,
                    route=Route("DELETE", "/items/{item_id}"),
                )
            )

    gw = _gw(tmp_path, "http://127.0.0.1:9", ("bad", NoTier()))
    assert gw.plugin("bad").state.value == "failed"
    assert "tier" in gw.plugin("bad").reason
    assert "demo_delete" not in {t.name for t in gw.visible_tools()}


def test_a_rest_tool_whose_tier_is_none_is_a_registration_error_like_any_tool(tmp_path):
    unset = RestTool(
        name="demo_delete",
        description="Delete.",
        input_model=ItemArgs,
        tier=None,
        backend=DEMO,
        route=Route("DELETE", "/items/{item_id}"),
    )
    gw = _gw(tmp_path, "http://127.0.0.1:9", ("bad", _plugin(unset)))
    assert gw.plugin("bad").state.value == "failed"
    assert "no tier" in gw.plugin("bad").reason
    assert "demo_delete" not in {t.name for t in gw.visible_tools()}


def test_a_rest_tool_is_one_call_or_one_function_never_both_nor_neither():
    async def run(args: ItemArgs, ctx: RestContext[Any]) -> Any:
        return {}

    for extra in ({}, {"route": Route("GET", "/items/{item_id}"), "run": run}):
        with pytest.raises(TypeError, match=r"demo_get.*route= or run="):
            RestTool(
                name="demo_get",
                description="Get.",
                input_model=ItemArgs,
                tier=Tier.READ,
                backend=DEMO,
                **extra,
            )


def test_gateway_error_backend_down_defaults_to_false():
    assert GatewayError(ErrorCode.BACKEND_UNAVAILABLE, "no git").backend_down is False
