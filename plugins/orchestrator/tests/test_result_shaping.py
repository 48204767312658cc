"""The shaping the inspection tools share: texts cut to a budget, secrets masked, Mongo times."""

from __future__ import annotations

import json
import re

import pytest
from gateway_orchestrator.bounded import FLOOR, bound, bound_items, clip, common_limit
from gateway_orchestrator.masking import (
    credential_keys,
    is_secret_name,
    mask_connection_url,
    mask_value,
)
from gateway_orchestrator.mongo import mongo_time
from hypothesis import given, settings
from hypothesis import strategies as st

MARKER = re.compile(r"\n\[truncated\] ([\d,]+) of ([\d,]+) characters not shown; (.*)$")

# Long strings are built by repetition: generating 3,000 random characters is slow.
texts = st.text(max_size=30) | st.builds(
    lambda head, c, n: head + c * n, st.text(max_size=10), st.characters(), st.integers(0, 5000)
)
json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | texts,
    lambda inner: st.lists(inner, max_size=8) | st.dictionaries(st.text(max_size=8), inner),
    max_leaves=40,
)


def _size(value) -> int:
    return len(json.dumps(value, ensure_ascii=False, separators=(",", ":")))


def _strings(value):
    if isinstance(value, str):
        yield value
    elif isinstance(value, dict):
        for v in value.values():
            yield from _strings(v)
    elif isinstance(value, list):
        for v in value:
            yield from _strings(v)


@settings(max_examples=200, deadline=None)
@given(value=json_values, budget=st.integers(500, 20_000))
def test_bound_fits_the_budget_or_cuts_everything_to_the_floor(value, budget):
    shaped = bound(value, budget=budget, hint="ask for less")
    before, after = list(_strings(value)), list(_strings(shaped.value))
    assert len(before) == len(after)
    cut = 0
    for old, new in zip(before, after, strict=True):
        if new == old:
            continue
        cut += 1
        marker = MARKER.search(new)
        assert marker is not None and marker.group(3) == "ask for less"
        kept = new[: marker.start()]
        assert old.startswith(kept) and len(kept) >= FLOOR
        assert int(marker.group(1).replace(",", "")) == len(old) - len(kept)
        assert int(marker.group(2).replace(",", "")) == len(old)
    assert cut == shaped.truncated
    if _size(value) <= budget:
        assert shaped.value == value and cut == 0
    # Unless every string is already down to the floor, the budget holds.
    limit = max([len(s) for s in after if not MARKER.search(s)] + [0])
    limit = max([limit] + [MARKER.search(s).start() for s in after if MARKER.search(s)])
    if limit > FLOOR:
        assert _size(shaped.value) <= budget


def test_common_limit_keeps_short_strings_whole():
    # 10 short strings (100) and 2 long ones (10,000): the long ones share what is left.
    limit = common_limit([100] * 10 + [10_000] * 2, room=5_000, ceiling=50_000)
    assert 1_800 < limit < 2_000  # (5,000 - 1,000) / 2, less the markers
    assert common_limit([100] * 10, room=50, ceiling=1_000) == FLOOR


def test_clip_says_what_was_left_out():
    assert clip("abc", 5, "x") == "abc"
    assert clip("a" * 1234, 1000, "raise max_chars") == (
        "a" * 1000 + "\n[truncated] 234 of 1,234 characters not shown; raise max_chars"
    )


@pytest.mark.parametrize(
    ("url", "masked"),
    [
        ("postgresql://graphrag:<PASSWORD>@127.0.0.1:5432/graphrag", "postgresql://127.0.0.1:5432/graphrag"),
        ("postgresql://u:p@ss/w?rd@db:5432/x", "postgresql://db:5432/x"),
        ("mongodb://a:b@h1:1,h2:2/db?replicaSet=rs&authSource=admin", "mongodb://h1:1,h2:2/db?replicaSet=rs&authSource=admin"),
        ("postgresql://db/x?sslmode=require&password=p1&sslpassword=p2", "postgresql://db/x?sslmode=require&password=***&sslpassword=***"),
        ("bolt://127.0.0.1:7687", "bolt://127.0.0.1:7687"),
        ("host=db port=5432 password='s e c' user=me", "host=db port=5432 password=*** user=me"),
        ("", ""),
    ],
)  # fmt: skip
def test_connection_urls_lose_their_passwords(url, masked):
    assert mask_connection_url(url) == masked


@pytest.mark.parametrize(
    ("name", "secret"),
    [
        ("password", True),
        ("DB_PASSWORD", True),
        ("sslpassword", True),
        ("access_token", True),
        ("apiKey", True),
        ("client_secret", True),
        ("private_key", True),
        ("credentials", True),
        ("max_tokens", False),
        ("token_usage", False),
        ("total_tokens_used", False),
        ("primary_key", False),
        ("username", False),
        ("connection_url", False),
    ],
)
def test_secret_names(name, secret):
    assert is_secret_name(name) is secret


def test_credentials_are_their_key_names_and_texts_lose_passwords():
    assert credential_keys({"username": "neo4j", "password": "x"}) == ["password", "username"]
    assert credential_keys({}) == credential_keys(None) == []
    assert credential_keys("opaque-secret") == ["(unnamed secret)"]
    assert mask_value(
        {
            "note": "clone https://bot:ghp_abc123@git.example/r.git, see https://x.org/@me/post",
            "env": "PGPASSWORD=hunter2 PGUSER=me",
            "llm": {"api_key": "sk-1", "max_tokens": 10, "token_usage": {"prompt_tokens": 1}},
            "token": None,
        }
    ) == {
        "note": "clone https://git.example/r.git, see https://x.org/@me/post",
        "env": "PGPASSWORD=*** PGUSER=me",
        "llm": {"api_key": "***", "max_tokens": 10, "token_usage": {"prompt_tokens": 1}},
        "token": None,
    }


@pytest.mark.parametrize(
    ("raw", "utc"),
    [
        ("2026-11-22T09:14:02.120000", "2026-11-22T09:14:02.120000Z"),  # pymongo's naive UTC
        ("2026-11-22T09:20:00.000Z", "2026-11-22T09:20:00Z"),
        ("2026-11-22T10:20:00+01:00", "2026-11-22T09:20:00Z"),
        ("yesterday", "yesterday"),
    ],
)
def test_mongo_times_are_utc(raw, utc):
    assert mongo_time(raw) == utc


@settings(max_examples=100, deadline=None)
@given(
    items=st.lists(st.dictionaries(st.text(max_size=6), st.integers() | texts), max_size=40),
    cap=st.integers(100, 5_000),
)
def test_bound_items_keeps_the_leading_items_that_fit(items, cap):
    shaped = bound_items(items, hint="fewer", budget=cap, cap=cap)
    kept = shaped.items
    assert shaped.omitted == len(items) - len(kept)
    assert len(kept) == len(items) or len(kept) >= 1  # always progress
    for old, new in zip(items, kept, strict=False):
        assert set(old) == set(new)  # the same items, in order, texts perhaps cut
    if len(kept) > 1 and shaped.omitted:
        assert _size(kept) <= cap


def test_a_cut_list_exactly_at_the_cap_is_kept_whole_and_one_character_less_leaves_one_out():
    items = [{"text": "y" * 900, "n": i} for i in range(6)]
    cut = bound(items, budget=2_000, hint="h")  # the same cut bound_items makes
    assert cut.truncated == 6
    size = _size(cut.value)
    whole = bound_items(items, hint="h", budget=2_000, cap=size)
    assert (whole.items, whole.truncated, whole.omitted) == (cut.value, 6, 0)
    less = bound_items(items, hint="h", budget=2_000, cap=size - 1)
    assert (less.items, less.truncated, less.omitted) == (cut.value[:5], 5, 1)
