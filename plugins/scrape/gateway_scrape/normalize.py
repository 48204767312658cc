"""From raw source records to rows for the jobs queue: JSON-safe values, field mapping, filters.

Pure functions, no I/O. pandas and numpy are never imported here: their values are recognised
by duck typing, so a source that returns plain dicts costs nothing extra.
"""

from __future__ import annotations

import enum
import json
import math
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from datetime import UTC, date, datetime, time
from decimal import Decimal
from functools import lru_cache
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from gateway_queue.store import NewJob

# LinkedIn posting ids: /jobs/view/<digits> or ...?currentJobId=<digits>.
_LINKEDIN_VIEW = re.compile(r"/jobs/view/(\d+)(?=[/?#]|$)")
_LINKEDIN_CURRENT = re.compile(r"[?&]currentJobId=(\d+)(?=[&#]|$)")

# The host of an absolute URL (scheme://[userinfo@]host[:port]/...); urlsplit is 4x slower.
_URL_HOST = re.compile(r"^[A-Za-z][A-Za-z0-9+.\-]*://(?:[^/?#@]*@)?([^/?#:\[\]]+)")

_NULL_TYPE_NAMES = frozenset({"NaTType", "NAType"})

# One encoder for every payload: json.dumps would build a new one per record.
_PAYLOAD = json.JSONEncoder(ensure_ascii=False, allow_nan=False, separators=(",", ":"))


def iso_utc(moment: datetime) -> str:
    """ISO-8601 UTC text, second precision, ``Z`` suffix: the jobs store's timestamp format
    (``2026-01-31T09:30:00Z``), so captured_at values sort as text."""
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=UTC)
    return moment.astimezone(UTC).isoformat(timespec="seconds").replace("+00:00", "Z")


def utc_now_iso() -> str:
    """The current UTC time, see :func:`iso_utc`."""
    return iso_utc(datetime.now(UTC))


def to_jsonable(value: Any) -> Any:
    """Turn a source value into plain JSON data: NaN/NaT/NA become ``None``, numpy scalars and
    arrays become Python numbers and lists, dates become ISO text, enums their value.

    Anything unknown becomes its ``str()``; the result always passes ``json.dumps(...,
    allow_nan=False)``.
    """
    if value is None or type(value) is bool or type(value) is str:
        return value
    if isinstance(value, str):  # numpy.str_ and other str subclasses
        return str(value)
    if type(value).__name__ in _NULL_TYPE_NAMES:  # pandas NaT / NA, before datetime checks
        return None
    if isinstance(value, int):
        return int(value)
    if isinstance(value, float):
        return float(value) if math.isfinite(value) else None
    if isinstance(value, Decimal):
        return to_jsonable(float(value)) if value.is_finite() else None
    if isinstance(value, datetime):
        return value.isoformat()
    if isinstance(value, (date, time)):
        return value.isoformat()
    if isinstance(value, enum.Enum):
        return to_jsonable(value.value)
    if isinstance(value, Mapping):
        return {str(k): to_jsonable(v) for k, v in value.items()}
    if isinstance(value, (list, tuple, set, frozenset)):
        items = sorted(value, key=repr) if isinstance(value, (set, frozenset)) else value
        return [to_jsonable(v) for v in items]
    if isinstance(value, (bytes, bytearray)):
        return bytes(value).decode("utf-8", errors="replace")
    module = type(value).__module__.split(".")[0]
    if module in {"numpy", "pandas"}:
        ndim: int = getattr(value, "ndim", 0)
        if ndim and hasattr(value, "tolist"):  # ndarray, Series values
            return to_jsonable(value.tolist())
        if hasattr(value, "isoformat"):  # pandas Timestamp / Timedelta-like
            return to_jsonable(value.isoformat())
        if hasattr(value, "item"):  # numpy scalar: int64, float32, bool_, datetime64
            try:
                return to_jsonable(value.item())
            except (TypeError, ValueError):
                pass
    return str(value)


def jsonable_record(raw: Mapping[Any, Any]) -> dict[str, Any]:
    """One raw record with every key a string and every value JSON-safe."""
    return {str(k): to_jsonable(v) for k, v in raw.items()}


def _text(value: Any) -> str | None:
    """A non-empty, stripped string or ``None``."""
    if value is None:
        return None
    text = value if isinstance(value, str) else str(value)
    text = text.strip()
    return text or None


def linkedin_job_id(url: str | None) -> str | None:
    """The numeric LinkedIn posting id in ``url``, or ``None`` when it is not a LinkedIn URL."""
    if not url:
        return None
    found = _URL_HOST.match(url)
    host = found.group(1).lower() if found else ""
    if host != "linkedin.com" and not host.endswith(".linkedin.com"):
        return None
    match = _LINKEDIN_VIEW.search(url) or _LINKEDIN_CURRENT.search(url)
    return match.group(1) if match else None


def _source_id(value: Any) -> str | None:
    if isinstance(value, float) and value.is_integer():
        value = int(value)  # an id column pandas turned into float64
    return _text(value)


def captured_at(date_posted: Any, *, now: str) -> str:
    """``date_posted`` as ISO-8601 UTC text when it is a valid date, else ``now``."""
    parsed: datetime | None = None
    if type(date_posted).__name__ in _NULL_TYPE_NAMES:
        return now
    if isinstance(date_posted, datetime):
        parsed = date_posted
    elif isinstance(date_posted, date):
        parsed = datetime.combine(date_posted, time.min)
    elif isinstance(date_posted, str):
        return _captured_at_text(date_posted) or now
    if parsed is None or parsed.year < 1970:
        return now
    try:
        return iso_utc(parsed)
    except (ValueError, OverflowError):  # e.g. year 9999 pushed past the range by its offset
        return now


@lru_cache(maxsize=4096)
def _captured_at_text(value: str) -> str | None:
    # Postings of one scrape share a handful of dates: parse each text once.
    text = value.strip()
    if not text:
        return None
    try:
        parsed = datetime.fromisoformat(text[:-1] + "+00:00" if text.endswith("Z") else text)
    except ValueError:
        return None
    return captured_at(parsed, now="") or None


def normalize(raw: Mapping[str, Any], *, now: str) -> NewJob:
    """Map one JSON-safe raw record (see :func:`jsonable_record`) to a jobs-queue row.

    ``url`` is ``job_url``, else ``job_url_direct`` (empty string when neither is set);
    ``job_id`` is the LinkedIn id in the URL, else the source ``id``; ``captured_at`` is
    ``date_posted`` when valid, else ``now``; ``payload_json`` is the whole raw record.
    """
    # The store with the first scrape: this module is imported with the tool's declaration.
    from gateway_queue.store import NewJob

    url = _text(raw.get("job_url")) or _text(raw.get("job_url_direct")) or ""
    return NewJob(
        url=url,
        title=_text(raw.get("title")),
        company=_text(raw.get("company")),
        description=_text(raw.get("description")),
        location=_text(raw.get("location")),
        source=_text(raw.get("site")),
        job_id=linkedin_job_id(url) or _source_id(raw.get("id")),
        captured_at=captured_at(raw.get("date_posted"), now=now),
        payload_json=_PAYLOAD.encode(raw),
    )


@dataclass
class Cleaned:
    """The rows to insert for one term, and how many raw records each filter dropped."""

    jobs: list[NewJob] = field(default_factory=list)
    skipped_no_url: int = 0
    skipped_no_description: int = 0


def clean(records: Iterable[Mapping[str, Any]], *, require_description: bool, now: str) -> Cleaned:
    """Normalize and filter: no URL → ``skipped_no_url``; with ``require_description``, no
    description → ``skipped_no_description``. Order is kept; duplicates are left to the store."""
    out = Cleaned()
    for raw in records:
        job = normalize(raw, now=now)
        if not job.url:
            out.skipped_no_url += 1
        elif require_description and not job.description:
            out.skipped_no_description += 1
        else:
            out.jobs.append(job)
    return out
