"""Preflight retries (real resolver, zero sleeps) and atomic capture files."""

from __future__ import annotations

import json
import os
import socket

import pytest
from gateway_scrape.capture import capture_name, term_slug, write_json_atomic
from gateway_scrape.preflight import backoff_delays, preflight


def test_backoff_delays_grow_geometrically_with_no_sleep_after_the_last_attempt():
    assert backoff_delays(3, 30, 2) == [30, 60]
    assert backoff_delays(4, 1.5, 3) == [1.5, 4.5, 13.5]
    assert backoff_delays(1, 30, 2) == []
    assert backoff_delays(3, 0, 10) == [0, 0]


@pytest.mark.anyio
async def test_an_unresolvable_host_is_retried_retry_count_times_with_the_backoff_sleeps():
    attempts: list[str] = []
    sleeps: list[float] = []

    async def resolve(host: str, port: int) -> object:
        attempts.append(host)
        raise socket.gaierror(socket.EAI_NONAME, "Name or service not known")

    async def sleep(seconds: float) -> None:
        sleeps.append(seconds)

    result = await preflight(
        "jobs.example.invalid", attempts=4, sleep_seconds=2, backoff=3, resolve=resolve, sleep=sleep
    )
    assert not result.ok and result.attempts == 4
    assert attempts == ["jobs.example.invalid"] * 4
    assert sleeps == [2, 6, 18]
    assert "after 4 attempt(s) (Name or service not known)" in (result.reason or "")
    assert "preflight_host=null" in (result.reason or "")


@pytest.mark.anyio
async def test_a_host_that_resolves_on_a_later_attempt_passes():
    calls = 0

    async def flaky(host: str, port: int) -> object:
        nonlocal calls
        calls += 1
        if calls < 3:
            raise socket.gaierror(socket.EAI_AGAIN, "Temporary failure in name resolution")
        return [("ok",)]

    result = await preflight("x.example", attempts=3, sleep_seconds=0, backoff=2, resolve=flaky)
    assert result.ok and result.attempts == 3


@pytest.mark.anyio
async def test_the_real_resolver_fails_for_an_invalid_name_and_passes_for_localhost():
    bad = await preflight("nonexistent.invalid", attempts=2, sleep_seconds=0, backoff=2)
    assert not bad.ok and bad.attempts == 2
    good = await preflight("localhost", attempts=2, sleep_seconds=0, backoff=2)
    assert good.ok and good.attempts == 1


@pytest.mark.parametrize(
    ("term", "slug"),
    [
        ("AI Engineer", "ai-engineer"),
        ("  C++ / C#  ", "c-c"),
        ("机器学习", "term"),
        ("../../etc/passwd", "etc-passwd"),
        ("x" * 100, "x" * 60),
    ],
)
def test_term_slugs_are_file_name_safe(term, slug):
    assert term_slug(term) == slug
    assert "/" not in capture_name("run", 1, term)


def test_capture_names_are_unique_per_term_even_when_slugs_collide():
    assert capture_name("r1", 1, "C++") != capture_name("r1", 2, "C#")


def test_atomic_write_creates_folders_and_leaves_no_temporary_file(tmp_path):
    target = tmp_path / "a" / "b" / "capture.json"
    write_json_atomic(target, {"records": [1, "é"]})
    assert json.loads(target.read_text(encoding="utf-8")) == {"records": [1, "é"]}
    assert os.listdir(target.parent) == ["capture.json"]


def test_a_failed_atomic_write_keeps_the_previous_file_and_cleans_up(tmp_path):
    target = tmp_path / "capture.json"
    write_json_atomic(target, {"v": 1})
    with pytest.raises(ValueError):
        write_json_atomic(target, {"v": float("nan")})  # not valid JSON: refused mid-write
    assert json.loads(target.read_text()) == {"v": 1}
    assert os.listdir(tmp_path) == ["capture.json"]
