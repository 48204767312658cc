"""scrape_jobs when the network is down: one preflight per run, short reasons that keep their
cause, and a result that says at the top when every term failed."""

from __future__ import annotations

import json
import socket
import time

import pytest
from gateway_scrape.reasons import MAX_REASON_CHARS, short_reason
from gateway_scrape.sources import RecordedSource
from scrape_testutil import postings, rows

from gateway.errors import Sanitizer

pytestmark = pytest.mark.anyio

# What python-jobspy reports for LinkedIn when DNS is down (one line, as requests words it).
DNS_DOWN = (
    "HTTPSConnectionPool(host='www.linkedin.com', port=443): Max retries exceeded with url: "
    "/jobs-guest/jobs/api/seeMoreJobPostings/search?keywords=ai+engineer&location=Ontario%2C+"
    "Canada&distance=50&f_TPR=r7200&pageNum=0&start=0 (Caused by NameResolutionError("
    '"<urllib3.connection.HTTPSConnection object at 0x7f3b2c1d9e50>: Failed to resolve '
    "'www.linkedin.com' ([Errno -3] Temporary failure in name resolution)\"))"
)


class Resolver:
    """A DNS resolver that counts its calls and fails (or answers) as told."""

    def __init__(self, *, fail: bool) -> None:
        self.fail = fail
        self.calls: list[str] = []

    async def __call__(self, host: str, port: int) -> object:
        self.calls.append(host)
        if self.fail:
            raise socket.gaierror(socket.EAI_AGAIN, "Temporary failure in name resolution")
        return [("ok",)]


def with_resolver(gw, resolver: Resolver) -> None:
    gw.plugin("scrape").context.resources["resolve"] = resolver


async def test_a_host_that_failed_its_retries_fails_later_terms_at_once_with_the_same_reason(
    scrape_gateway, recorded, tmp_path
):
    resolver = Resolver(fail=True)
    gw = scrape_gateway(recorded)
    with_resolver(gw, resolver)
    args = {
        "terms": ["ai engineer", "backend engineer", "machine learning"],
        "retry_count": 3,
        "retry_sleep_seconds": 0.2,
        "retry_backoff": 2,
    }
    async with gw:
        started = time.monotonic()
        res = await gw.call("scrape_jobs", args)
        took = time.monotonic() - started
    assert not res.is_error, res.payload
    errors = [r["error"] for r in res.payload["results"]]
    assert len(set(errors)) == 1 and "after 3 attempt(s)" in errors[0]
    assert resolver.calls == ["www.linkedin.com"] * 3  # the first term's attempts, no more
    # Sleeps of 0.2 + 0.4 s once, not once per term (1.8 s).
    assert 0.6 <= took < 1.5, took
    assert recorded.calls == []
    assert rows(tmp_path / "data/capture/jobs.db") == []


async def test_a_host_that_resolved_is_not_checked_again_in_the_same_run(scrape_gateway, recorded):
    resolver = Resolver(fail=False)
    gw = scrape_gateway(recorded)
    with_resolver(gw, resolver)
    async with gw:
        first = await gw.call("scrape_jobs", {"save_capture_json": False})
        second = await gw.call("scrape_jobs", {"save_capture_json": False})
    assert first.payload["totals"]["successful_terms"] == 3
    assert second.payload["totals"]["duplicate_count"] == 12
    assert resolver.calls == ["www.linkedin.com"] * 2  # once per run, not once per term


async def test_a_run_where_every_term_failed_says_so_first(scrape_gateway, recorded):
    gw = scrape_gateway(recorded)
    with_resolver(gw, Resolver(fail=True))
    async with gw:
        res = await gw.call("scrape_jobs", {"retry_count": 1, "save_capture_json": False})
    payload = res.payload
    assert next(iter(payload)) == "summary"  # the first thing a reader (or model) sees
    assert payload["summary"].startswith("All 3 terms failed; nothing was scraped or written. ")
    assert "could not resolve 'www.linkedin.com'" in payload["summary"]
    assert json.loads(res.text())["summary"] == payload["summary"]


async def test_summary_of_a_partial_and_of_a_full_success(scrape_gateway):
    source = RecordedSource({"a": postings(0, 2), "c": postings(10, 3)}, fail={"b": "blocked"})
    gw = scrape_gateway(source)
    async with gw:
        partial = await gw.call("scrape_jobs", {"terms": ["a", "b", "c"], "preflight_host": None})
        single = await gw.call(
            "scrape_jobs", {"terms": ["b"], "preflight_host": None, "save_capture_json": False}
        )
        again = await gw.call("scrape_jobs", {"terms": ["a"], "preflight_host": None})
    assert partial.payload["summary"] == (
        "2 of 3 terms scraped, 1 failed (see results): 5 new jobs inserted, 0 duplicates."
    )
    assert single.payload["summary"].startswith("The only term failed; nothing was scraped")
    assert again.payload["summary"] == "1 of 1 terms scraped: 0 new jobs inserted, 2 duplicates."


async def test_a_long_board_error_is_cut_between_words_and_keeps_its_cause(scrape_gateway):
    both = "linkedin: " + DNS_DOWN.replace("linkedin", "indeed") + "; linkedin: " + DNS_DOWN
    source = RecordedSource({}, fail={"t": "every board failed: " + both})
    gw = scrape_gateway(source)
    async with gw:
        res = await gw.call("scrape_jobs", {"terms": ["t"], "preflight_host": None})
    error = res.payload["results"][0]["error"]
    assert error.startswith("scrape failed: every board failed: linkedin: HTTPSConnectionPool(")
    assert len(both) > 600  # longer than the gateway lets any message be
    assert error.endswith('Temporary failure in name resolution)"))')
    # The cause stays; the host a failed connection names does not (the board is named first).
    assert "Failed to resolve '[host removed]'" in error and "linkedin.com" not in error
    assert " … " in error and "0x7f3b2c1d9e50" not in error
    assert len(error) <= len("scrape failed: ") + MAX_REASON_CHARS


@pytest.mark.parametrize("limit", [40, 80, 200, 400])
def test_short_reasons_cut_only_between_words(limit):
    text = " ".join(f"word{i}" for i in range(200)) + " the cause at the end"
    short = short_reason(text, Sanitizer(), limit=limit)
    assert len(short) <= limit
    words = set(text.split())
    assert all(w in words for w in short.replace(" … ", " ").split())
    assert short.endswith("end") and short.startswith("word0")


def test_a_short_reason_never_separates_a_secret_from_what_marks_it():
    text = " ".join(["filler"] * 150) + " Authorization: Bearer abcdef123456789 failed to connect"
    short = short_reason(text, Sanitizer(), limit=120)
    assert "abcdef123456789" not in short
    assert short.endswith("failed to connect")
    secret = Sanitizer(["s3cr3t-value"])
    assert "s3cr3t" not in short_reason(("x " * 300) + "token s3cr3t-value at the end", secret)
