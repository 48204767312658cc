"""Where raw postings come from: the :class:`JobSource` interface and its implementations.

``JobSpySource`` is the real one. It imports python-jobspy (and with it pandas) on its first
fetch only, so the gateway starts without them. ``RecordedSource`` serves records it was
given, per term: tests use it, and so can a replay of saved capture files.

A source is plain blocking code; the tool calls it through ``ctx.run_sync`` (off the event
loop). It returns raw records as dicts and raises :class:`SourceError` (or anything else) when
the term cannot be fetched; the tool turns either into a failed term and carries on.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any, Protocol, runtime_checkable

from .normalize import jsonable_record

#: The boards python-jobspy supports (its ``jobspy.model.Site`` values). Kept here so the
#: input schema can list them without importing jobspy; a test checks they still match.
SUPPORTED_SITES: tuple[str, ...] = (
    "linkedin",
    "indeed",
    "zip_recruiter",
    "glassdoor",
    "google",
    "bayt",
    "naukri",
    "bdjobs",
    "hellowork",
)


class SourceError(Exception):
    """A term could not be fetched; the message is short, safe to show, and says why."""


@runtime_checkable
class JobSource(Protocol):
    """Fetch raw postings for one search term (blocking)."""

    def fetch(
        self,
        term: str,
        location: str,
        sites: Sequence[str],
        results_wanted: int,
        hours_old: int,
    ) -> list[dict[str, Any]]: ...


class JobSpySource:
    """python-jobspy's ``scrape_jobs``, with descriptions fetched (the queue needs them).

    Boards that fail do not raise in python-jobspy 1.4+: they are listed in
    ``DataFrame.attrs["errors"]``. When every requested board failed the term fails with
    their reasons; when only some did, their reasons are returned as warnings next to the
    records of the others (see :attr:`last_warnings`).
    """

    def __init__(
        self,
        *,
        country_indeed: str = "canada",
        fetch_description: bool = True,
        description_format: str = "markdown",
    ) -> None:
        self.country_indeed = country_indeed
        self.fetch_description = fetch_description
        self.description_format = description_format

    def fetch(
        self,
        term: str,
        location: str,
        sites: Sequence[str],
        results_wanted: int,
        hours_old: int,
    ) -> list[dict[str, Any]]:
        records, _warnings = self.fetch_with_warnings(
            term, location, sites, results_wanted, hours_old
        )
        return records

    def fetch_with_warnings(
        self,
        term: str,
        location: str,
        sites: Sequence[str],
        results_wanted: int,
        hours_old: int,
    ) -> tuple[list[dict[str, Any]], list[str]]:
        import jobspy  # first use only: it imports pandas, numpy, curl_cffi, bs4 (~1 s)

        frame = jobspy.scrape_jobs(
            site_name=list(sites),
            search_term=term,
            location=location,
            results_wanted=results_wanted,
            hours_old=hours_old,
            country_indeed=self.country_indeed,
            fetch_description=self.fetch_description,
            description_format=self.description_format,
            verbose=0,  # errors only, and python-jobspy logs to stderr: stdout is the transport
        )
        attrs = getattr(frame, "attrs", None) or {}
        errors: Mapping[str, Any] = attrs.get("errors") or {}
        records = [jsonable_record(row) for row in frame.to_dict("records")]
        reasons = [f"{site}: {_one_line(msg)}" for site, msg in errors.items()]
        if errors and not records and set(errors) >= set(sites):
            raise SourceError("every board failed: " + "; ".join(reasons))
        warnings = reasons + [
            f"{site}: {_one_line(msg)}"
            for site, msgs in (attrs.get("warnings") or {}).items()
            for msg in msgs
        ]
        return records, warnings


def _one_line(message: Any) -> str:
    # Not cut here: the tool shortens the whole reason between words, keeping its cause.
    return " ".join(str(message).split())


class RecordedSource:
    """Serves the records it was given for each term (tests, replays of capture files).

    ``records`` maps a term to its records; an unknown term has none. ``fail`` maps a term to
    the reason its fetch fails. ``on_fetch`` is called with each term before it is served.
    Every call's arguments are kept in ``calls``.
    """

    def __init__(
        self,
        records: Mapping[str, Sequence[Mapping[str, Any]]] | None = None,
        *,
        fail: Mapping[str, str] | None = None,
        on_fetch: Callable[[str], None] | None = None,
    ) -> None:
        self.records = {k: [dict(r) for r in v] for k, v in (records or {}).items()}
        self.fail = dict(fail or {})
        self.on_fetch = on_fetch
        self.calls: list[dict[str, Any]] = []

    def fetch(
        self,
        term: str,
        location: str,
        sites: Sequence[str],
        results_wanted: int,
        hours_old: int,
    ) -> list[dict[str, Any]]:
        self.calls.append(
            {
                "term": term,
                "location": location,
                "sites": list(sites),
                "results_wanted": results_wanted,
                "hours_old": hours_old,
            }
        )
        if self.on_fetch is not None:
            self.on_fetch(term)
        if term in self.fail:
            raise SourceError(self.fail[term])
        return [dict(r) for r in self.records.get(term, [])]
