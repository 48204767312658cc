"""What REST tools take and give, worded once: ids checked before any request, the API's
timestamps and JSON-in-strings, offset paging, and the one marker of a cut text.

- :func:`uuid_check`: a UUID argument, lower-cased, refused with a message naming where the
  model finds valid ids (APIs answer malformed ids inconsistently: 404, an empty 200, or a 500
  carrying database text);
- :data:`JsonString` (a JSON document encoded inside a string, decoded) and :data:`UtcTimestamp`
  (ISO-8601 in UTC with ``Z``) for fields of answers;
- :class:`OffsetPage` and :func:`offset_page` for offset/limit paging with a known total;
- :func:`truncation_marker`: how every tool says that it cut a text, and how to read on.
"""

from __future__ import annotations

import json
import re
from datetime import UTC, datetime, tzinfo
from typing import Annotated, Any, TypedDict

from pydantic import AfterValidator, BaseModel, BeforeValidator

_UUID = re.compile(r"^[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}$")


def uuid_check(what: str, where: str) -> AfterValidator:
    """The validator of a UUID argument: ``Annotated[str, Field(max_length=36, …),
    uuid_check("job", "list_jobs")]`` refuses anything else with "must be a job UUID;
    list_jobs shows them" and passes the id on in lower case."""

    def check(value: str) -> str:
        if not _UUID.fullmatch(value):
            raise ValueError(f"must be a {what} UUID; {where} shows them")
        return value.lower()

    return AfterValidator(check)


def decode_json_string(value: Any) -> Any:
    """A JSON document sent inside a string (``"{\\"a\\": 1}"``) as the document; other values,
    and strings that are not JSON, unchanged."""
    if isinstance(value, str) and (value.lstrip()[:1] in ("{", "[", '"') or value == "null"):
        try:
            return json.loads(value)
        except ValueError:
            return value
    return value


#: A field the API sends as a JSON-encoded string; the model sees the decoded value.
JsonString = Annotated[Any, BeforeValidator(decode_json_string)]


def to_utc_iso(value: Any, *, naive: tzinfo | None = None) -> Any:
    """``2026-11-22T09:58:22.221362+00:00`` or ``…Z`` or epoch seconds → ``…Z`` in UTC. Times
    without an offset are left as they are (their zone is unknown), unless ``naive`` is the zone
    the API writes them in."""
    if isinstance(value, int | float) and not isinstance(value, bool):
        moment = datetime.fromtimestamp(value, UTC)
    elif isinstance(value, str):
        try:
            moment = datetime.fromisoformat(value.replace("Z", "+00:00"))
        except ValueError:
            return value
        if moment.tzinfo is None:
            if naive is None:
                return value
            moment = moment.replace(tzinfo=naive)
    else:
        return value
    return moment.astimezone(UTC).isoformat().replace("+00:00", "Z")


#: An ISO-8601 timestamp normalized to UTC with a ``Z``.
UtcTimestamp = Annotated[str, BeforeValidator(to_utc_iso)]


class OffsetPage(BaseModel):
    """The paging fields of a result (what :func:`offset_page` fills): base of a page model."""

    total: int
    offset: int
    limit: int
    has_more: bool
    next_offset: int | None = None


class PageFields(TypedDict):
    total: int
    offset: int
    limit: int
    has_more: bool
    next_offset: int | None


def offset_page(*, total: int, offset: int, limit: int, returned: int) -> PageFields:
    """``has_more`` and ``next_offset`` for offset/limit paging with a known total."""
    next_offset = offset + returned
    more = returned > 0 and next_offset < total
    return {
        "total": total,
        "offset": offset,
        "limit": limit,
        "has_more": more,
        "next_offset": next_offset if more else None,
    }


def truncation_marker(
    omitted: int | None, total: int | None, *, unit: str = "characters", hint: str = ""
) -> str:
    """The one way a tool says it cut a text: ``[truncated] 2,300 of 5,300 characters not
    shown; <hint>``, the hint saying how to see the rest (``[truncated] more characters not
    shown; …`` when the amounts are unknown). The caller puts it where the text was cut (after
    a line break in documents); clients split a result on ``[truncated]``."""
    if omitted is None or total is None:
        marker = f"[truncated] more {unit} not shown"
    else:
        marker = f"[truncated] {omitted:,} of {total:,} {unit} not shown"
    return f"{marker}; {hint}" if hint else marker
