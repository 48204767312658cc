"""The plugin's settings, the ``scrape_jobs`` arguments (schema and validator) and its result."""

from __future__ import annotations

from typing import Annotated, Literal

from gateway_queue.table import ALLOWED_STATUSES, DEFAULT_DB_PATH
from pydantic import BaseModel, ConfigDict, Field, StringConstraints, field_validator

from gateway import env_field

from .sources import SUPPORTED_SITES

MAX_TERMS = 20
DEFAULT_TERMS = ("ai engineer", "backend engineer", "machine learning")
DEFAULT_CAPTURE_DIR = "data/capture"

# A DNS name or IPv4 literal: labels of letters, digits and inner hyphens.
_HOSTNAME = r"^[A-Za-z0-9](?:[A-Za-z0-9-]{0,61}[A-Za-z0-9])?(?:\.[A-Za-z0-9](?:[A-Za-z0-9-]{0,61}[A-Za-z0-9])?)*\.?$"

Site = Literal[SUPPORTED_SITES]  # type: ignore[valid-type]
Status = Literal[ALLOWED_STATUSES]  # type: ignore[valid-type]
Term = Annotated[str, StringConstraints(strip_whitespace=True, min_length=1, max_length=200)]


class Settings(BaseModel):
    """``[plugins.scrape]`` in the config file; environment variables override."""

    model_config = ConfigDict(extra="forbid")

    timeout_seconds: float = env_field(
        "MCP_GATEWAY_SCRAPE_TIMEOUT",
        default=900.0,
        description="Time limit of one scrape_jobs call. Terms not finished shortly before it "
        "(15 s, or a quarter of it if shorter) are reported as failed instead of losing the "
        "whole run to a TIMEOUT.",
    )
    country_indeed: str = env_field(
        "MCP_GATEWAY_SCRAPE_COUNTRY_INDEED",
        default="canada",
        description="Country of the Indeed and Glassdoor boards (python-jobspy's country_indeed).",
    )
    fetch_description: bool = env_field(
        "MCP_GATEWAY_SCRAPE_FETCH_DESCRIPTION",
        default=True,
        description="Fetch each posting's full description (LinkedIn needs one request per "
        "posting); without it most LinkedIn records have no description.",
    )

    @field_validator("timeout_seconds")
    @classmethod
    def _timeout_range(cls, value: float) -> float:
        if not 1 <= value <= 86_400:
            raise ValueError("must be between 1 and 86400 seconds")
        return value


class ScrapeArgs(BaseModel):
    """Arguments of ``scrape_jobs``. Validated before any network or database work."""

    model_config = ConfigDict(extra="forbid", strict=True)

    terms: list[Term] = Field(
        list(DEFAULT_TERMS),
        min_length=1,
        max_length=MAX_TERMS,
        description=f"Search terms, scraped one after the other in this order (1-{MAX_TERMS}, "
        "no duplicates).",
    )
    location: Annotated[
        str, StringConstraints(strip_whitespace=True, min_length=1, max_length=200)
    ] = Field("Ontario, Canada", description="Where the jobs are, as the boards understand it.")
    sites: list[Site] = Field(
        ["linkedin"],
        min_length=1,
        max_length=len(SUPPORTED_SITES),
        description="Job boards to scrape (python-jobspy site names), no duplicates.",
    )
    results_wanted: int = Field(20, ge=1, le=200, description="Postings wanted per term and board.")
    hours_old: int = Field(
        2, ge=1, le=168, description="Only postings published within this many hours."
    )
    db_path: str = Field(
        DEFAULT_DB_PATH,
        min_length=1,
        max_length=500,
        description="Jobs database, inside the data roots; created with its folders if missing.",
    )
    status: Status = Field(
        "new", description="Status of newly inserted rows; existing rows are never changed."
    )
    require_description: bool = Field(
        True, description="Skip postings without a description (counted in skipped_no_description)."
    )
    preflight_host: str | None = Field(
        "www.linkedin.com",
        max_length=253,
        pattern=_HOSTNAME,
        description="Host name resolved before each term (DNS check with retries); null skips it.",
    )
    retry_count: int = Field(
        3, ge=1, le=10, description="Preflight attempts per term before the term is marked failed."
    )
    retry_sleep_seconds: float = Field(
        30, ge=0, le=300, description="Sleep after the first failed preflight attempt."
    )
    retry_backoff: float = Field(
        2, ge=1, le=10, description="Each further sleep is this many times longer."
    )
    save_capture_json: bool = Field(
        True, description="Write one JSON file of raw records per term (also in a dry run)."
    )
    capture_dir: str = Field(
        DEFAULT_CAPTURE_DIR,
        min_length=1,
        max_length=500,
        description="Folder of the capture files, inside the data roots.",
    )
    dry_run: bool = Field(
        False,
        description="Scrape, normalize, filter and count, but neither create nor write the "
        "database (inserted_count and duplicate_count stay 0).",
    )

    @field_validator("terms")
    @classmethod
    def _unique_terms(cls, terms: list[str]) -> list[str]:
        seen: set[str] = set()
        for term in terms:
            if term.casefold() in seen:
                raise ValueError(f"duplicate term {term[:60]!r}; list each term once")
            seen.add(term.casefold())
        return terms

    @field_validator("sites")
    @classmethod
    def _unique_sites(cls, sites: list[str]) -> list[str]:
        if len(set(sites)) != len(sites):
            raise ValueError("list each site once")
        return sites


class TermResult(BaseModel):
    """What happened to one term. ``success`` is false when its preflight or scrape failed."""

    term: str
    success: bool
    fetched_count: int = 0
    cleaned_count: int = 0
    inserted_count: int = 0
    duplicate_count: int = 0
    skipped_no_url: int = 0
    skipped_no_description: int = 0
    capture_path: str | None = Field(
        default=None, description="Capture file, relative to the data root."
    )
    capture_error: str | None = Field(
        default=None, description="Why the capture file was not written (does not fail the term)."
    )
    error: str | None = Field(default=None, description="Why the term failed.")
    warnings: list[str] = Field(
        default_factory=list, description="Boards that failed or complained while others worked."
    )


class Totals(BaseModel):
    term_count: int
    successful_terms: int
    failed_terms: int
    fetched_count: int
    cleaned_count: int
    inserted_count: int
    duplicate_count: int
    skipped_no_url: int
    skipped_no_description: int


class ScrapeResult(BaseModel):
    summary: str = Field(description="What the run did, in one sentence.")
    run_id: str
    started_at: str
    finished_at: str
    duration_ms: int
    dry_run: bool
    results: list[TermResult]
    totals: Totals


COUNTERS = (
    "fetched_count",
    "cleaned_count",
    "inserted_count",
    "duplicate_count",
    "skipped_no_url",
    "skipped_no_description",
)


def totals_of(results: list[TermResult]) -> Totals:
    sums = {name: sum(getattr(r, name) for r in results) for name in COUNTERS}
    ok = sum(1 for r in results if r.success)
    return Totals(
        term_count=len(results), successful_terms=ok, failed_terms=len(results) - ok, **sums
    )
