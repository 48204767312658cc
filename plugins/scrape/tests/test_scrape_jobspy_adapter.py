"""The real python-jobspy adapter, with ``jobspy.scrape_jobs`` replaced by a function that
returns a real pandas DataFrame with python-jobspy's own column set."""

from __future__ import annotations

import datetime as dt
import inspect
import json
from pathlib import Path
from typing import Any

import jobspy
import numpy as np
import pandas as pd
import pytest
from gateway_scrape.sources import SUPPORTED_SITES, JobSpySource, SourceError
from jobspy.model import JobPost, Location, Site
from scrape_testutil import OFFLINE, rows

DB = Path("data/capture/jobs.db")
REAL_SCRAPE_JOBS = jobspy.scrape_jobs

#: python-jobspy 1.4's DataFrame columns. If an upgrade changes them, this test says so
#: before the mapping silently loses a field.
JOBSPY_COLUMNS = [
    "id",
    "site",
    "job_url",
    "job_url_direct",
    "title",
    "company",
    "location",
    "date_posted",
    "job_type",
    "salary_source",
    "interval",
    "min_amount",
    "max_amount",
    "currency",
    "is_remote",
    "job_level",
    "job_function",
    "listing_type",
    "emails",
    "description",
    "company_industry",
    "company_url",
    "company_logo",
    "company_url_direct",
    "company_addresses",
    "company_num_employees",
    "company_revenue",
    "company_description",
    "skills",
    "experience_range",
    "company_rating",
    "company_reviews_count",
    "vacancy_count",
    "work_from_home_type",
]


def test_the_supported_sites_are_python_jobspys_sites():
    assert list(SUPPORTED_SITES) == [s.value for s in Site]


def test_python_jobspys_column_set_is_the_one_the_mapping_was_written_for():
    assert list(JobPost.model_fields) == JOBSPY_COLUMNS


def _frame() -> pd.DataFrame:
    """Rows the way python-jobspy builds them (JobPost.model_dump), plus the awkward values
    pandas produces: NaN, None, NaT, numpy scalars."""
    real = JobPost(
        id="li-4012345678",
        site="linkedin",
        job_url="https://www.linkedin.com/jobs/view/4012345678",
        job_url_direct="https://careers.acme.example/jobs/1",
        title="Machine Learning Engineer",
        company="Acme",
        location=Location(city="Toronto", state="ON", country="canada"),
        date_posted=dt.date(2026, 1, 30),
        min_amount=120000,
        max_amount=150000,
        currency="CAD",
        emails=["jobs@acme.example"],
        description="Build **models**.",
    ).model_dump()
    no_description = JobPost(
        id="li-4012345679",
        site="linkedin",
        job_url="https://www.linkedin.com/jobs/view/4012345679",
        title="Backend Engineer",
        company="Beta",
    ).model_dump()
    awkward = dict.fromkeys(JOBSPY_COLUMNS, None)
    awkward.update(
        id=np.str_("in-9f8e"),
        site="indeed",
        job_url=float("nan"),  # missing: job_url_direct is the URL
        job_url_direct="https://ca.indeed.com/viewjob?jk=9f8e",
        title="AI Engineer",
        company=np.nan,
        location="Ottawa, ON, Canada",
        date_posted=pd.NaT,
        min_amount=np.float64("nan"),
        max_amount=np.float64(99000.5),
        company_rating=np.float32(4.5),
        company_reviews_count=np.int64(321),
        vacancy_count=np.nan,
        is_remote=np.bool_(True),
        description="Ship LLM features.",
    )
    no_url = dict(awkward, id="in-0", job_url=None, job_url_direct=None, title="Ghost")
    return pd.DataFrame([real, no_description, awkward, no_url], columns=list(JobPost.model_fields))


class FakeScrape:
    """Stands in for jobspy.scrape_jobs: checks the call against the real signature."""

    def __init__(self, frame: pd.DataFrame, attrs: dict[str, Any] | None = None) -> None:
        self.frame = frame
        self.attrs = attrs or {}
        self.calls: list[dict[str, Any]] = []

    def __call__(self, **kwargs: Any) -> pd.DataFrame:
        inspect.signature(REAL_SCRAPE_JOBS).bind(**kwargs)  # same names the real one takes
        self.calls.append(kwargs)
        frame = self.frame.copy()
        frame.attrs = dict(self.attrs)
        return frame


@pytest.mark.anyio
async def test_the_jobspy_adapter_maps_a_real_dataframe_into_the_jobs_table(
    gateway_factory, monkeypatch, tmp_path
):
    fake = FakeScrape(_frame())
    monkeypatch.setattr(jobspy, "scrape_jobs", fake)
    gw = gateway_factory(plugins=["scrape"])
    async with gw:
        res = await gw.call(
            "scrape_jobs",
            {
                **OFFLINE,
                "terms": ["ml engineer"],
                "sites": ["linkedin", "indeed"],
                "results_wanted": 5,
                "hours_old": 24,
            },
        )
    assert not res.is_error, res.payload
    term = res.payload["results"][0]
    assert (term["fetched_count"], term["skipped_no_url"], term["skipped_no_description"]) == (
        4,
        1,
        1,
    )
    assert (term["cleaned_count"], term["inserted_count"]) == (2, 2)

    (call,) = fake.calls
    assert call["site_name"] == ["linkedin", "indeed"]
    assert (call["search_term"], call["location"]) == ("ml engineer", "Ontario, Canada")
    assert (call["results_wanted"], call["hours_old"]) == (5, 24)
    assert call["fetch_description"] is True and call["country_indeed"] == "canada"

    stored = rows(
        tmp_path / DB,
        "url",
        "job_id",
        "title",
        "company",
        "location",
        "source",
        "description",
        "captured_at",
        "status",
        "payload_json",
    )
    real, awkward = stored
    assert real[:8] == (
        "https://www.linkedin.com/jobs/view/4012345678",
        "4012345678",
        "Machine Learning Engineer",
        "Acme",
        "Toronto, ON, Canada",
        "linkedin",
        "Build **models**.",
        "2026-01-30T00:00:00Z",
    )
    assert real[8] == "new"
    payload = json.loads(real[9])
    assert list(payload) == JOBSPY_COLUMNS
    assert payload["emails"] == "jobs@acme.example" and payload["min_amount"] == 120000.0

    assert awkward[:7] == (
        "https://ca.indeed.com/viewjob?jk=9f8e",
        "in-9f8e",
        "AI Engineer",
        None,
        "Ottawa, ON, Canada",
        "indeed",
        "Ship LLM features.",
    )
    assert awkward[7].endswith("Z") and awkward[7] != "NaT"  # NaT date_posted: now
    raw = json.loads(awkward[9])
    assert raw["job_url"] is None and raw["date_posted"] is None and raw["min_amount"] is None
    assert raw["max_amount"] == 99000.5 and raw["company_rating"] == 4.5
    assert raw["company_reviews_count"] == 321 and raw["is_remote"] is True


@pytest.mark.anyio
async def test_a_term_whose_every_board_failed_is_reported_failed(
    gateway_factory, monkeypatch, tmp_path
):
    empty = _frame().iloc[0:0]
    monkeypatch.setattr(
        jobspy,
        "scrape_jobs",
        FakeScrape(
            empty, {"errors": {"linkedin": "response status code 429 (blocked: use a proxy)"}}
        ),
    )
    gw = gateway_factory(plugins=["scrape"])
    async with gw:
        res = await gw.call("scrape_jobs", {**OFFLINE, "terms": ["a"]})
    (term,) = res.payload["results"]
    assert not term["success"]
    assert (
        term["error"]
        == "scrape failed: every board failed: linkedin: response status code 429 (blocked: use a proxy)"
    )


def test_boards_that_failed_next_to_working_ones_become_warnings(monkeypatch):
    monkeypatch.setattr(
        jobspy,
        "scrape_jobs",
        FakeScrape(
            _frame(),
            {
                "errors": {"indeed": "timed out"},
                "warnings": {"linkedin": ["is_remote isn't supported, ignoring it"]},
            },
        ),
    )
    records, warnings = JobSpySource().fetch_with_warnings(
        "a", "Ontario", ["linkedin", "indeed"], 5, 2
    )
    assert len(records) == 4
    assert warnings == ["indeed: timed out", "linkedin: is_remote isn't supported, ignoring it"]


def test_an_empty_result_without_errors_is_an_empty_success(monkeypatch):
    monkeypatch.setattr(jobspy, "scrape_jobs", FakeScrape(_frame().iloc[0:0]))
    assert JobSpySource().fetch("a", "Ontario", ["linkedin"], 5, 2) == []


def test_all_boards_failing_raises_source_error(monkeypatch):
    monkeypatch.setattr(
        jobspy,
        "scrape_jobs",
        FakeScrape(_frame().iloc[0:0], {"errors": {"linkedin": "boom\nline two"}}),
    )
    with pytest.raises(SourceError, match="linkedin: boom line two"):
        JobSpySource().fetch("a", "Ontario", ["linkedin"], 5, 2)
