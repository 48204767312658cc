"""Helpers for the scrape plugin's tests: recorded postings, a gateway whose source is a
RecordedSource, reading the jobs file. Test modules import the fixtures they use from here."""

from __future__ import annotations

import sqlite3
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from gateway_scrape.sources import RecordedSource

from gateway.app import Gateway

#: Arguments that keep a test off the network and fast: no DNS preflight, no sleeps.
OFFLINE = {"preflight_host": None, "retry_sleep_seconds": 0}


def posting(n: int, *, site: str = "linkedin", **overrides: Any) -> dict[str, Any]:
    """One raw record shaped like a python-jobspy row (a subset of its columns)."""
    record: dict[str, Any] = {
        "id": f"li-{4_000_000_000 + n}",
        "site": site,
        "job_url": f"https://www.linkedin.com/jobs/view/{4_000_000_000 + n}",
        "job_url_direct": f"https://careers.example.com/jobs/{n}",
        "title": f"Engineer {n}",
        "company": f"Company {n % 7}",
        "location": "Toronto, ON, Canada",
        "date_posted": "2026-01-15",
        "description": f"Build things, number {n}.",
        "is_remote": n % 2 == 0,
        "min_amount": 100_000.0 + n,
    }
    record.update(overrides)
    return record


def postings(start: int, count: int, **overrides: Any) -> list[dict[str, Any]]:
    return [posting(n, **overrides) for n in range(start, start + count)]


def rows(db: Path, *columns: str) -> list[tuple[Any, ...]]:
    """The jobs rows ordered by id (read-only, plain sqlite3)."""
    cols = ", ".join(columns or ("url",))
    conn = sqlite3.connect(f"{db.resolve().as_uri()}?mode=ro", uri=True)
    try:
        return conn.execute(f"SELECT {cols} FROM jobs ORDER BY id").fetchall()
    finally:
        conn.close()


def use_source(gw: Gateway, source: object) -> None:
    """Swap the plugin's source for this gateway (after ``async with gw`` opened resources)."""
    record = gw.plugin("scrape")
    assert record is not None and record.context is not None, record
    record.context.resources["source"] = source


@pytest.fixture
def scrape_gateway(gateway_factory: Callable[..., Gateway]) -> Callable[..., Gateway]:
    """``scrape_gateway(source)``: a gateway with the scrape plugin whose source is ``source``."""

    def build(source: object, **kwargs: Any) -> Gateway:
        gw = gateway_factory(plugins=["scrape"], **kwargs)
        record = gw.plugin("scrape")
        assert record is not None and record.context is not None, record
        # Before start: open_resources keeps a source that is already there.
        record.context.resources["source"] = source
        return gw

    return build


@pytest.fixture
def recorded() -> RecordedSource:
    return RecordedSource(
        {
            "ai engineer": postings(0, 5),
            "backend engineer": postings(100, 4),
            "machine learning": postings(200, 3),
        }
    )
