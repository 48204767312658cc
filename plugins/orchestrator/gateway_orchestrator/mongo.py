"""What the MongoDB-backed endpoints share: the "no MongoDB" answers, Mongo timestamps, and
the shaping of raw documents.

MongoDB is optional for the orchestrator. Without it the audit and chat endpoints still answer
200, with no entries and ``error: "MongoDB not available"``, and graph changes and LLM requests
answer 503. An empty success would tell the model "this job did nothing", so every such answer
becomes ``BACKEND_UNAVAILABLE`` saying the data is missing. It is not a transport failure (the
API answered), so it never counts for the breaker: the other orchestrator tools keep working.
"""

from __future__ import annotations

from datetime import UTC
from typing import Annotated, Any

from pydantic import BaseModel, BeforeValidator, Field

from gateway import ErrorCode, GatewayError
from gateway.rest import Failure, StatusRule, status_error, to_utc_iso, validate_answer

NO_MONGO = "audit data unavailable: the orchestrator has no MongoDB configured"


def no_mongo() -> GatewayError:
    return GatewayError(
        ErrorCode.BACKEND_UNAVAILABLE,
        f"{NO_MONGO} (its MONGODB_URL is unset or unreachable); the other orchestrator tools "
        "still work",
        retryable=False,
    )


def _mongo_or_default(failure: Failure) -> BaseException:
    if "mongo" in failure.reason.lower():
        return no_mongo()
    return status_error(failure)


#: Status rules for the endpoints that answer 503 without MongoDB.
MONGO_STATUS: dict[int, StatusRule] = {503: _mongo_or_default}


class Envelope(BaseModel):
    """A page of the audit or chat endpoint."""

    entries: list[dict[str, Any]] = []
    total: int = 0
    page: int = 1
    page_size: int | None = Field(None, alias="pageSize")
    has_more: bool = Field(False, alias="hasMore")


def check_envelope(data: Any, what: str) -> Envelope:
    """A paged audit/chat answer, or the error its ``error`` key stands for."""
    error = data.get("error") if isinstance(data, dict) else None
    if error:
        if "mongo" in str(error).lower():
            raise no_mongo()
        raise GatewayError(
            ErrorCode.BACKEND_ERROR,
            f"the orchestrator API could not read {what}: {str(error)[:200]}; retry later",
        )
    return validate_answer(Envelope, data, "the orchestrator API", what)


def mongo_time(value: Any) -> Any:
    """A MongoDB date as the API sends it, in UTC with ``Z``. pymongo hands out naive datetimes
    that are UTC and FastAPI writes them without an offset, so a naive time here is UTC (the
    API's own time-range endpoint appends the ``Z`` to the same values)."""
    return to_utc_iso(value, naive=UTC)


#: A MongoDB timestamp, ISO-8601 in UTC with ``Z``.
MongoTime = Annotated[str, BeforeValidator(mongo_time)]


def document(raw: Any, *, drop: tuple[str, ...] = ("job_id",)) -> Any:
    """A raw document with ``_id`` as ``id`` (first), without the keys in ``drop``."""
    if not isinstance(raw, dict):
        return raw
    doc = {"id": raw.get("_id")} if "_id" in raw else {}
    doc.update((k, v) for k, v in raw.items() if k != "_id" and k not in drop)
    return doc
