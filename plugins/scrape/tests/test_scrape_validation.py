"""Arguments are validated before any network or database work, and bad ones change nothing."""

from __future__ import annotations

import tempfile
from pathlib import Path
from typing import Any

import anyio
import pytest
from gateway_queue.store import ALLOWED_STATUSES
from gateway_scrape.models import MAX_TERMS
from gateway_scrape.sources import SUPPORTED_SITES, RecordedSource
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from scrape_testutil import OFFLINE, postings, rows

from gateway.testing import make_gateway

BAD_ARGUMENTS: list[tuple[str, Any]] = [
    ("terms", []),
    ("terms", [f"t{i}" for i in range(MAX_TERMS + 1)]),
    ("terms", [""]),
    ("terms", ["   "]),
    ("terms", ["ai", "AI"]),
    ("terms", "ai engineer"),
    ("terms", [1]),
    ("location", ""),
    ("location", 5),
    ("sites", []),
    ("sites", ["monster"]),
    ("sites", ["linkedin", "linkedin"]),
    ("sites", "linkedin"),
    ("results_wanted", 0),
    ("results_wanted", 201),
    ("results_wanted", "20"),
    ("results_wanted", 2.5),
    ("hours_old", 0),
    ("hours_old", 169),
    ("db_path", ""),
    ("status", "deleted"),
    ("status", None),
    ("require_description", "true"),
    ("preflight_host", ""),
    ("preflight_host", "not a host!"),
    ("preflight_host", "http://www.linkedin.com"),
    ("retry_count", 0),
    ("retry_count", 11),
    ("retry_sleep_seconds", -1),
    ("retry_sleep_seconds", 301),
    ("retry_backoff", 0.5),
    ("retry_backoff", 11),
    ("save_capture_json", 1),
    ("capture_dir", ""),
    ("dry_run", "yes"),
    ("unknown_field", 1),
]


@pytest.mark.anyio
@pytest.mark.parametrize(("field", "value"), BAD_ARGUMENTS)
async def test_bad_arguments_are_a_validation_error_naming_the_field_and_touch_nothing(
    gateway_factory, tmp_path, field, value
):
    source = RecordedSource({"ai": postings(0, 1)})
    gw = gateway_factory(plugins=["scrape"])
    gw.plugin("scrape").context.resources["source"] = source
    async with gw:
        res = await gw.call("scrape_jobs", {**OFFLINE, field: value})
    assert res.code == "VALIDATION_ERROR", res.payload
    assert field in res.payload["error"]["message"]
    assert source.calls == []
    assert not (tmp_path / "data").exists()


@pytest.mark.anyio
@pytest.mark.parametrize(
    ("field", "value"),
    [
        ("db_path", "../outside/jobs.db"),
        ("db_path", "{absolute}/jobs.db"),
        ("capture_dir", "../outside"),
        ("capture_dir", "{absolute}/capture"),
    ],
)
async def test_paths_outside_the_data_roots_are_refused_before_any_work(
    gateway_factory, tmp_path, field, value
):
    outside = tmp_path.parent / f"{tmp_path.name}-outside"  # absolute, next to the data root
    value = value.format(absolute=outside)
    source = RecordedSource({"ai": postings(0, 1)})
    gw = gateway_factory(plugins=["scrape"])
    gw.plugin("scrape").context.resources["source"] = source
    async with gw:
        res = await gw.call("scrape_jobs", {**OFFLINE, "terms": ["ai"], field: value})
    assert res.code == "VALIDATION_ERROR"
    assert field in res.payload["error"]["message"]
    assert str(tmp_path.parent) not in res.text()  # the absolute path is not echoed
    assert source.calls == []
    assert not (tmp_path / "data").exists() and not (tmp_path.parent / "outside").exists()
    assert not outside.exists()


# --- property: valid requests always give a consistent report ---------------------------

_terms = st.lists(
    st.sampled_from(["a", "b", "c", "fails", "empty"]), min_size=1, max_size=5, unique=True
)
_requests = st.fixed_dictionaries(
    {"terms": _terms},
    optional={
        "sites": st.lists(st.sampled_from(SUPPORTED_SITES), min_size=1, max_size=3, unique=True),
        "results_wanted": st.integers(1, 200),
        "hours_old": st.integers(1, 168),
        "status": st.sampled_from(ALLOWED_STATUSES),
        "require_description": st.booleans(),
        "save_capture_json": st.booleans(),
        "dry_run": st.booleans(),
    },
)


def _records() -> dict[str, list[dict[str, Any]]]:
    # Overlapping URLs across terms, some without URL or description.
    base = postings(0, 6)
    base[1]["job_url"] = base[1]["job_url_direct"] = None
    base[2]["description"] = ""
    return {"a": base[:4], "b": base[2:], "c": postings(3, 5), "empty": []}


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(_requests)
def test_any_valid_request_gives_ordered_results_whose_counters_add_up(request):
    with tempfile.TemporaryDirectory() as tmp:
        gw = make_gateway(plugins=["scrape"], cwd=Path(tmp), env={})
        source = RecordedSource(_records(), fail={"fails": "board down"})
        gw.plugin("scrape").context.resources["source"] = source
        res = anyio.run(gw.call, "scrape_jobs", {**OFFLINE, **request})
        assert not res.is_error, res.payload
        out = res.payload
        assert [r["term"] for r in out["results"]] == request["terms"]
        dry = request.get("dry_run", False)
        for r in out["results"]:
            assert r["success"] == (r["term"] != "fails")
            assert (
                r["fetched_count"]
                == r["cleaned_count"] + r["skipped_no_url"] + r["skipped_no_description"]
            )
            if dry or not r["success"]:
                assert r["inserted_count"] == r["duplicate_count"] == 0
            else:
                assert r["cleaned_count"] == r["inserted_count"] + r["duplicate_count"]
            assert (r["capture_path"] is not None) == (
                r["success"] and request.get("save_capture_json", True)
            )
        totals = out["totals"]
        for key in ("fetched_count", "cleaned_count", "inserted_count", "duplicate_count"):
            assert totals[key] == sum(r[key] for r in out["results"])
        assert totals["term_count"] == totals["successful_terms"] + totals["failed_terms"]
        db = Path(tmp) / "data/capture/jobs.db"
        if dry:
            assert not db.exists()
        else:
            stored = rows(db, "status")
            assert len(stored) == totals["inserted_count"]
            assert {s for (s,) in stored} <= {request.get("status", "new")}
