"""Normalization: field mapping, LinkedIn ids, captured_at, JSON-safe values, filters."""

from __future__ import annotations

import datetime as dt
import enum
import json
import math
from decimal import Decimal

import numpy as np
import pandas as pd
import pytest
from gateway_scrape.normalize import (
    captured_at,
    clean,
    jsonable_record,
    linkedin_job_id,
    normalize,
    to_jsonable,
)
from hypothesis import given, settings
from hypothesis import strategies as st

NOW = "2026-02-01T10:00:00Z"


def _dumps(value: object) -> str:
    return json.dumps(value, allow_nan=False)


@pytest.mark.parametrize(
    ("url", "expected"),
    [
        ("https://www.linkedin.com/jobs/view/4012345678", "4012345678"),
        ("https://www.linkedin.com/jobs/view/4012345678/", "4012345678"),
        ("https://ca.linkedin.com/jobs/view/4012345678?refId=abc&trk=x", "4012345678"),
        ("https://www.linkedin.com/jobs/search/?currentJobId=3999999999&keywords=ai", "3999999999"),
        ("https://www.linkedin.com/jobs/collections/recommended?foo=1&currentJobId=42", "42"),
        ("https://linkedin.com/jobs/view/17#top", "17"),
        ("https://www.linkedin.com/jobs/view/senior-engineer-at-acme", None),
        ("https://www.linkedin.com/jobs/view/12ab", None),
        ("https://www.linkedin.com/company/acme", None),
        ("https://notlinkedin.com/jobs/view/123", None),
        ("https://www.linkedin.com.evil.example/jobs/view/123", None),
        ("https://indeed.com/viewjob?jk=abc&currentJobId=5", None),
        ("http://[bad", None),
        ("", None),
        (None, None),
    ],
)
def test_linkedin_job_id_is_parsed_from_view_and_current_job_urls_only(url, expected):
    assert linkedin_job_id(url) == expected


def test_job_id_falls_back_to_the_source_id_when_the_url_has_none():
    job = normalize({"job_url": "https://ca.indeed.com/viewjob?jk=9f", "id": "in-9f"}, now=NOW)
    assert job.job_id == "in-9f"
    linked = normalize({"job_url": "https://www.linkedin.com/jobs/view/77", "id": "li-1"}, now=NOW)
    assert linked.job_id == "77"
    # A float id (a pandas column with gaps) keeps its integer text.
    assert normalize({"job_url": "https://x.example/1", "id": 123.0}, now=NOW).job_id == "123"
    assert normalize({"job_url": "https://x.example/1", "id": None}, now=NOW).job_id is None


def test_url_comes_from_job_url_then_job_url_direct():
    assert (
        normalize(
            {"job_url": "https://a.example/1", "job_url_direct": "https://b.example/1"}, now=NOW
        ).url
        == "https://a.example/1"
    )
    assert (
        normalize({"job_url": None, "job_url_direct": " https://b.example/1 "}, now=NOW).url
        == "https://b.example/1"
    )
    assert (
        normalize({"job_url": "", "job_url_direct": "https://b.example/1"}, now=NOW).url
        == "https://b.example/1"
    )
    assert normalize({"job_url": None, "job_url_direct": None}, now=NOW).url == ""
    assert normalize({}, now=NOW).url == ""


def test_fields_are_mapped_and_payload_is_the_whole_raw_record():
    raw = {
        "id": "li-1",
        "site": "linkedin",
        "job_url": "https://www.linkedin.com/jobs/view/1",
        "title": " AI Engineer ",
        "company": "Acme",
        "location": "Toronto, ON, Canada",
        "description": "Do **things**",
        "date_posted": "2026-01-30",
        "min_amount": 120000.0,
        "emails": None,
    }
    job = normalize(raw, now=NOW)
    assert (job.title, job.company, job.location, job.source, job.description) == (
        "AI Engineer",
        "Acme",
        "Toronto, ON, Canada",
        "linkedin",
        "Do **things**",
    )
    assert job.captured_at == "2026-01-30T00:00:00Z"
    assert json.loads(job.payload_json) == raw


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        ("2026-01-30", "2026-01-30T00:00:00Z"),
        ("2026-01-30T12:34:56", "2026-01-30T12:34:56Z"),
        ("2026-01-30T12:34:56Z", "2026-01-30T12:34:56Z"),
        ("2026-01-30T12:34:56+02:00", "2026-01-30T10:34:56Z"),
        (dt.date(2026, 1, 2), "2026-01-02T00:00:00Z"),
        (dt.datetime(2026, 1, 2, 3, 4, 5), "2026-01-02T03:04:05Z"),
        (pd.Timestamp("2026-01-02 03:04:05", tz="America/Toronto"), "2026-01-02T08:04:05Z"),
        (None, NOW),
        ("", NOW),
        ("yesterday", NOW),
        ("2026-13-45", NOW),
        (float("nan"), NOW),
        (pd.NaT, NOW),
        (1706745600, NOW),
        ("1900-01-01", NOW),
    ],
)
def test_captured_at_is_date_posted_when_valid_else_now(value, expected):
    assert captured_at(value, now=NOW) == expected


class Color(enum.Enum):
    RED = "red"


def test_to_jsonable_handles_nan_nat_numpy_pandas_dates_and_containers():
    raw = {
        "nan": float("nan"),
        "inf": float("inf"),
        "np_nan": np.float64("nan"),
        "np_float": np.float32(1.5),
        "np_int": np.int64(7),
        "np_bool": np.bool_(True),
        "np_str": np.str_("x"),
        "np_array": np.array([1, 2]),
        "np_dt": np.datetime64("2026-01-02T03:04:05"),
        "np_nat": np.datetime64("NaT"),
        "nat": pd.NaT,
        "na": pd.NA,
        "ts": pd.Timestamp("2026-01-02T03:04:05Z"),
        "date": dt.date(2026, 1, 2),
        "decimal": Decimal("2.5"),
        "bad_decimal": Decimal("NaN"),
        "enum": Color.RED,
        "nested": {"a": [np.int64(1), (float("nan"), "x")], 3: b"bytes"},
        "set": {2, 1},
        "other": object,
    }
    out = jsonable_record(raw)
    assert _dumps(out)
    assert out["nan"] is None and out["inf"] is None and out["np_nan"] is None
    assert out["np_float"] == 1.5 and type(out["np_float"]) is float
    assert out["np_int"] == 7 and type(out["np_int"]) is int
    assert out["np_bool"] is True
    assert out["np_str"] == "x" and type(out["np_str"]) is str
    assert out["np_array"] == [1, 2]
    assert out["np_dt"] == "2026-01-02T03:04:05"
    assert out["np_nat"] is None and out["nat"] is None and out["na"] is None
    assert out["ts"] == "2026-01-02T03:04:05+00:00"
    assert out["date"] == "2026-01-02"
    assert out["decimal"] == 2.5 and out["bad_decimal"] is None
    assert out["enum"] == "red"
    assert out["nested"] == {"a": [1, [None, "x"]], "3": "bytes"}
    assert out["set"] == [1, 2]
    assert isinstance(out["other"], str)


def test_a_real_dataframe_row_becomes_json_safe():
    frame = pd.DataFrame(
        [
            {
                "id": "a",
                "min_amount": 1.0,
                "vacancy_count": 3,
                "date_posted": dt.date(2026, 1, 2),
                "is_remote": True,
            },
            {
                "id": None,
                "min_amount": None,
                "vacancy_count": None,
                "date_posted": pd.NaT,
                "is_remote": None,
            },
        ]
    )
    records = [jsonable_record(r) for r in frame.to_dict("records")]
    assert _dumps(records)
    assert records[1] == {
        "id": None,
        "min_amount": None,
        "vacancy_count": None,
        "date_posted": None,
        "is_remote": None,
    }
    assert records[0]["vacancy_count"] == 3.0  # the column became float64 because of the gap


def test_clean_counts_each_filter_once_and_keeps_the_order():
    records = [
        {"job_url": "u1", "description": "d"},
        {"job_url": None, "description": None},  # no url wins over no description
        {"job_url": "u3", "description": ""},
        {"job_url_direct": "u4", "description": "d"},
    ]
    out = clean(records, require_description=True, now=NOW)
    assert [j.url for j in out.jobs] == ["u1", "u4"]
    assert (out.skipped_no_url, out.skipped_no_description) == (1, 1)
    lax = clean(records, require_description=False, now=NOW)
    assert [j.url for j in lax.jobs] == ["u1", "u3", "u4"]
    assert (lax.skipped_no_url, lax.skipped_no_description) == (1, 0)


# Values a source might hand over: JSON scalars plus what pandas/numpy produce.
_scalars = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(min_value=-(2**63), max_value=2**63 - 1),
    st.floats(allow_nan=True, allow_infinity=True),
    st.text(max_size=30),
    st.dates(),
    st.datetimes(timezones=st.one_of(st.none(), st.timezones())),
    st.integers(min_value=-(2**31), max_value=2**31).map(np.int64),
    st.floats(width=32).map(np.float32),
    st.booleans().map(np.bool_),
    st.sampled_from([pd.NaT, pd.NA, np.datetime64("NaT"), float("nan")]),
    st.decimals(allow_nan=True, allow_infinity=True),
)
_values = st.recursive(
    _scalars,
    lambda children: st.one_of(
        st.lists(children, max_size=4),
        st.dictionaries(st.text(max_size=8), children, max_size=4),
    ),
    max_leaves=12,
)
_keys = st.sampled_from(
    [
        "id",
        "site",
        "job_url",
        "job_url_direct",
        "title",
        "company",
        "location",
        "date_posted",
        "description",
        "extra",
    ]
)


@settings(max_examples=200, deadline=None)
@given(st.dictionaries(_keys, _values, max_size=10))
def test_any_record_normalizes_to_json_safe_values_without_raising(raw):
    record = jsonable_record(raw)
    assert json.loads(_dumps(record)) == record
    job = normalize(record, now=NOW)
    assert json.loads(job.payload_json) == record
    for value in (job.title, job.company, job.description, job.location, job.source, job.job_id):
        assert value is None or (isinstance(value, str) and value == value.strip() and value)
    assert isinstance(job.url, str) and isinstance(job.captured_at, str)
    assert job.captured_at == NOW or job.captured_at.endswith("Z")


@given(st.floats())
def test_every_float_becomes_a_finite_float_or_none(value):
    out = to_jsonable(value)
    assert out is None or (isinstance(out, float) and math.isfinite(out))
