"""What one backend answer can still do to the gateway, against real HTTP servers on 127.0.0.1:
answers that cost far more to validate than to send, stacked content encodings, redirects.

Memory is measured with tracemalloc and the event loop with a loop watcher, inside the test;
nothing here asserts on wall-clock time."""

from __future__ import annotations

import functools
import json
import time
import tracemalloc
import zlib
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from typing import Any, ClassVar

import pytest
from pydantic import BaseModel, ConfigDict

from gateway import Mutation, Tier, hookimpl
from gateway.rest import RestBackend, RestSettings, RestTool, Route
from gateway.rest.body import BoundedDecoder
from gateway.testing import make_gateway
from gateway.testing.backends import FakeBackend, Reply
from gateway.testing.loopwatch import LoopWatch

pytestmark = pytest.mark.anyio

JSON = {"Content-Type": "application/json"}


class ListSettings(RestSettings):
    env_prefix: ClassVar[str] = "LIST_API"


LISTS = RestBackend(
    name="lists", settings=ListSettings, settings_table="lists", title="the list API"
)


class NoArgs(BaseModel):
    model_config = ConfigDict(extra="forbid")


class NameArgs(BaseModel):
    model_config = ConfigDict(extra="forbid")
    name: str


class Entry(BaseModel):
    id: str
    name: str


class Listing(BaseModel):
    items: list[Entry]


def _listing(name: str, pause: float = 0.0) -> RestTool[NoArgs]:
    """``GET /entries``, its bare list wrapped; ``pause`` stands in for expensive reshaping."""

    def shape(data: Any, args: NoArgs) -> Any:
        time.sleep(pause)
        return {"items": data}

    return RestTool(
        name=name,
        description="All entries.",
        input_model=NoArgs,
        output_model=Listing,
        tier=Tier.READ,
        backend=LISTS,
        route=Route("GET", "/entries", what="the entries"),
        shape=shape,
    )


LIST = _listing("list_entries")
SLOW = _listing("list_entries_slowly", pause=1.5)
GET = RestTool(
    name="get_entry",
    description="One entry.",
    input_model=NameArgs,
    output_model=Entry,
    tier=Tier.READ,
    backend=LISTS,
    route=Route("GET", "/entries/{name}", what="entry {name}"),
)
CREATE = RestTool(
    name="create_entry",
    description="Create an entry.",
    input_model=NameArgs,
    output_model=Entry,
    tier=Tier.MUTATION,
    mutation=Mutation(
        "creates an entry", "nothing", reversible=True, destructive=False, idempotent=False
    ),
    backend=LISTS,
    route=Route("POST", "/entries", body=("name",), what="a new entry"),
)


class _Plugin:
    @hookimpl
    def register_tools(self, register: Any) -> None:
        for spec in (LIST, SLOW, GET, CREATE):
            register(spec)


class Api(FakeBackend):
    """Entries by name; anything else is set per test with ``override``."""

    def respond(self, request: Any) -> Reply:
        if request.path.startswith("/entries/"):
            name = request.path.removeprefix("/entries/")
            return Reply.json({"id": f"id-{name}", "name": name})
        if request.path == "/entries" and request.method == "POST":
            return Reply.json({"id": "new", "name": (request.json or {}).get("name", "")})
        return Reply.json({"detail": "Not Found"}, 404)


@asynccontextmanager
async def _gateway(tmp_path: Any, url: str, **table: Any) -> AsyncIterator[Any]:
    settings = {"url": url, "request_timeout": 30, **table}
    timeout = settings.pop("tool_timeout", 60)
    gw = make_gateway(
        objects={"lists": _Plugin()},
        entry_points=False,
        plugin_config={"lists": settings},
        env={},
        cwd=tmp_path,
        default_timeout=timeout,
    )
    async with gw:
        warm = await gw.call("get_entry", {"name": "warm"})  # the client exists, httpx imported
        assert not warm.is_error, warm.payload
        yield gw


def _error(result: Any) -> dict[str, Any]:
    assert result.is_error, result.payload
    return result.payload["error"]  # type: ignore[no-any-return]


async def _measured(call: Callable[[], Any]) -> tuple[Any, int, LoopWatch]:
    """The call's result, the peak of memory allocated during it, and the loop's longest stall."""
    tracemalloc.start()
    try:
        async with LoopWatch(1.0) as watch:
            result = await call()
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    return result, peak, watch


def _empty_objects(count: int) -> bytes:
    return b"[" + b"{}," * (count - 1) + b"{}]" if count else b"[]"


# --- validation bounded in time and memory (issue 21, item 4) --------------------------------


async def test_a_hundred_thousand_empty_objects_cost_their_first_error_not_all_of_them(tmp_path):
    body = _empty_objects(100_000)  # 300 KB: under every cap, 200,000 errors for pydantic
    with Api() as api:
        api.override("/entries", Reply(200, body, JSON))
        async with _gateway(tmp_path, api.url) as gw:
            result, peak, watch = await _measured(lambda: gw.call("list_entries", {}))
    err = _error(result)
    assert err["code"] == "BACKEND_ERROR" and not err["retryable"]
    assert "unexpected shape (items.0.id: Field required)" in err["message"]
    # Collecting and reading every error cost 125 MB and stalled every call for seconds.
    assert peak < 40_000_000, f"{peak:,} bytes allocated"
    assert watch.longest < 1.5, (watch.longest, watch.where)


async def test_an_8_mb_list_of_empty_objects_is_refused_before_it_is_parsed(tmp_path):
    body = _empty_objects(2_700_000)  # the case: 8.1 MB, under the 8 MiB cap
    with Api() as api:
        api.override("/entries", Reply(200, body, JSON))
        async with _gateway(tmp_path, api.url) as gw:
            result, peak, watch = await _measured(lambda: gw.call("list_entries", {}))
    err = _error(result)
    assert err["code"] == "BACKEND_ERROR" and not err["retryable"]
    assert "holds more than 200,000 JSON values (LIST_API_MAX_RESPONSE_VALUES)" in err["message"]
    assert "ask for less" in err["message"]
    # The body itself is read (8 MB, joined once); not one of its 2.7 million objects is built.
    assert peak < 40_000_000, f"{peak:,} bytes allocated"
    assert watch.longest < 0.8, (watch.longest, watch.where)


async def test_values_are_counted_outside_strings_and_the_limit_is_a_setting(tmp_path):
    text = 'a, [b] {c}, \\" d, ' * 20_000  # 360,000 commas and brackets, inside one string
    within = [{"id": str(i), "name": text if i == 0 else "n"} for i in range(300)]  # 901 values
    beyond = [{"id": str(i), "name": "n"} for i in range(334)]  # 1,003 values
    with Api() as api:
        async with _gateway(tmp_path, api.url, max_response_values=1000) as gw:
            api.override("/entries", Reply.json(within))
            ok = await gw.call("list_entries", {})
            api.override("/entries", Reply(200, json.dumps(beyond, indent=1).encode(), JSON))
            refused = _error(await gw.call("list_entries", {}))
    assert not ok.is_error, ok.payload
    assert ok.payload["items"][0]["name"] == text and len(ok.payload["items"]) == 300
    assert "more than 1,000 JSON values" in refused["message"]


async def test_the_tool_timeout_holds_while_a_large_answer_is_reshaped(tmp_path):
    body = json.dumps([{"id": str(i), "name": "n" * 40} for i in range(6000)]).encode()
    assert len(body) > 256 * 1024  # large: reshaped and validated off the event loop
    with Api() as api:
        api.override("/entries", Reply(200, body, JSON))
        async with _gateway(tmp_path, api.url, tool_timeout=0.4) as gw, LoopWatch(1.0) as watch:
            result = await gw.call("list_entries_slowly", {})
    err = _error(result)
    assert err["code"] == "TIMEOUT" and "list_entries_slowly" in err["message"]
    assert watch.longest < 0.8, (watch.longest, watch.where)  # the loop served meanwhile


async def test_an_answer_nested_100000_deep_is_a_backend_error(tmp_path):
    body = b"[" * 100_000 + b"]" * 100_000
    with Api() as api:
        api.override("/entries", Reply(200, body, JSON))
        async with _gateway(tmp_path, api.url) as gw:
            err = _error(await gw.call("list_entries", {}))
    assert err["code"] == "BACKEND_ERROR" and "nested too deeply" in err["message"]


# --- Content-Encoding (item 5) -------------------------------------------------------------


@functools.lru_cache(maxsize=8)  # three of the bombs below start with the same 64 MB gzip
def _encode(data: bytes, coding: str) -> bytes:
    wbits = {"gzip": 31, "deflate": 15, "raw-deflate": -15}[coding]
    packer = zlib.compressobj(9, zlib.DEFLATED, wbits)
    out = [packer.compress(data[i : i + (1 << 20)]) for i in range(0, len(data), 1 << 20)]
    return b"".join(out) + packer.flush()


def _layers(data: bytes, *codings: str) -> bytes:
    for coding in codings:
        data = _encode(data, coding)
    return data


BOMB = b'"' + b"a" * (64 << 20) + b'"'  # 64 MB once inflated


TEXT = b"".join(b"%d, {a: [b]} " % (i * i % 977) for i in range(40_000))  # ~500 KB
ENCODED = {
    "gzip, deflate": _layers(TEXT, "gzip", "deflate"),
    "deflate, gzip, gzip": _layers(TEXT, "raw-deflate", "gzip", "gzip"),
    "gzip": _encode(TEXT[:250_000], "gzip") + _encode(TEXT[250_000:], "gzip"),  # two members
}


@pytest.mark.parametrize("chunk", [1, 7, 4096, 1 << 20])
@pytest.mark.parametrize("header", list(ENCODED))
def test_the_decoder_gives_back_exactly_what_was_encoded_whatever_the_chunks(header, chunk):
    wire = ENCODED[header][:3000] if chunk == 1 else ENCODED[header]  # byte by byte: a prefix
    decoder = BoundedDecoder(header.split(", "))
    steps = [s for i in range(0, len(wire), chunk) for s in decoder.feed(wire[i : i + chunk])]
    assert all(len(step) <= 64 * 1024 for step in steps)
    if chunk == 1:
        assert TEXT.startswith(b"".join(steps))
    else:
        decoder.finish()
        assert b"".join(steps) == TEXT


@pytest.mark.parametrize(
    ("codings", "header"),
    [
        (("gzip", "gzip"), "gzip, gzip"),
        (("deflate", "gzip"), "deflate, gzip"),
        (("gzip", "raw-deflate"), "gzip, deflate"),
        (("gzip", "gzip", "gzip"), "gzip, x-gzip, gzip"),
    ],
)
async def test_stacked_content_encodings_never_inflate_past_the_cap(tmp_path, codings, header):
    wire = _layers(BOMB, *codings)
    assert len(wire) < 70_000  # a few KB that would become 64 MB
    with Api() as api:
        api.override("/entries", Reply(200, wire, {**JSON, "Content-Encoding": header}))
        async with _gateway(tmp_path, api.url, max_response_bytes=1 << 20) as gw:
            result, peak, _ = await _measured(lambda: gw.call("list_entries", {}))
    err = _error(result)
    assert err["code"] == "BACKEND_ERROR" and not err["retryable"]
    assert "larger than 1,048,576 bytes (LIST_API_MAX_RESPONSE_BYTES)" in err["message"]
    assert peak < 12_000_000, f"{peak:,} bytes allocated"  # the cap and a step, not 64 MB


async def test_stacked_encodings_of_a_good_answer_decode_and_others_are_refused(tmp_path):
    items = [{"id": str(i), "name": f"entry {i}"} for i in range(500)]
    good = _layers(json.dumps(items).encode(), "gzip", "deflate", "gzip")
    with Api() as api:
        async with _gateway(tmp_path, api.url) as gw:
            api.override(
                "/entries", Reply(200, good, {**JSON, "Content-Encoding": "gzip, deflate, gzip"})
            )
            ok = await gw.call("list_entries", {})
            api.override("/entries", Reply(200, b"[]", {**JSON, "Content-Encoding": "br"}))
            brotli = _error(await gw.call("list_entries", {}))
            api.override("/entries", Reply(200, b"[]", {**JSON, "Content-Encoding": "gzip"}))
            garbled = _error(await gw.call("list_entries", {}))
            asked = api.requests[-1].headers["accept-encoding"]
    assert not ok.is_error and ok.payload["items"] == items
    assert brotli["code"] == "BACKEND_ERROR" and "Content-Encoding br" in brotli["message"]
    assert garbled["code"] == "BACKEND_ERROR" and "invalid gzip data" in garbled["message"]
    assert asked == "gzip, deflate"  # only what is decoded here is asked for


# --- redirects (item 12) -------------------------------------------------------------------


@pytest.mark.parametrize("status", [301, 302, 303, 307, 308])
async def test_a_mutation_never_follows_a_redirect(tmp_path, status):
    with Api() as api, Api() as other:
        target = f"http://someone:pw-in-url@127.0.0.1:{other.port}/entries?token=abc#x"
        api.override("/entries", Reply.redirect(target, status), method="POST")
        async with _gateway(tmp_path, api.url, token="tok-secret-999") as gw:
            away = _error(await gw.call("create_entry", {"name": "n"}))
            api.override(
                "/entries", Reply.redirect(f"{api.url}/entries/again", status), method="POST"
            )
            home = _error(await gw.call("create_entry", {"name": "n"}))
    assert not other.requests  # nothing went there: no GET, no re-sent body
    assert [r.method for r in api.requests if r.path.startswith("/entries/again")] == []
    for err in (away, home):
        assert err["code"] == "BACKEND_ERROR" and not err["retryable"]
        assert f"with a redirect (HTTP {status})" in err["message"]
        assert "a change is never sent on" in err["message"]
    assert f"to http://127.0.0.1:{other.port}," in away["message"]  # the origin only
    assert "pw-in-url" not in away["message"] and "token=abc" not in away["message"]


async def test_a_read_follows_redirects_within_the_origin_only(tmp_path):
    with Api() as api, Api() as other:
        api.override("/entries/home", Reply.redirect(f"{api.url}/entries/stayed"))
        api.override("/entries/away", Reply.redirect(f"{other.url}/entries/landed?x=1"))
        api.override("/entries/loop", Reply.redirect(f"{api.url}/entries/loop", 307))
        async with _gateway(tmp_path, api.url, token="tok-secret-999") as gw:
            home = await gw.call("get_entry", {"name": "home"})
            away = _error(await gw.call("get_entry", {"name": "away"}))
            loop = _error(await gw.call("get_entry", {"name": "loop"}))
    assert home.payload == {"id": "id-stayed", "name": "stayed"}
    stayed = next(r for r in api.requests if r.path == "/entries/stayed")
    assert stayed.headers["authorization"] == "Bearer tok-secret-999"
    assert not other.requests
    assert away["code"] == "BACKEND_ERROR" and not away["retryable"]
    assert f"to another origin (http://127.0.0.1:{other.port})" in away["message"]
    assert "LIST_API_URL" in away["message"]
    assert loop["code"] == "BACKEND_ERROR" and "more than 5 times" in loop["message"]
    assert len([r for r in api.requests if r.path == "/entries/loop"]) == 6
