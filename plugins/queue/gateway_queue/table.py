"""The jobs table as the plugins' declarations name it: its columns and statuses, the default
database and page size, and the progress record of creating its page index.

Plain values and one small class, so that importing the queue's and the scrape plugin's tool
declarations (every gateway start does, to list them) does not load the store: its code and
the SQLite driver come with the first database access. :mod:`gateway_queue.store` exports all
of these too.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field

ALLOWED_STATUSES: tuple[str, ...] = (
    "new",
    "shortlist",
    "reviewed",
    "reject",
    "resume_written",
    "applied",
)
JOB_FIELDS: tuple[str, ...] = (
    "id",
    "job_id",
    "title",
    "company",
    "description",
    "url",
    "location",
    "source",
    "status",
    "captured_at",
)
DEFAULT_DB_PATH = "data/capture/jobs.db"
#: Jobs in a page when the caller asks for no other number (``bulk_read_new_jobs``' default).
DEFAULT_PAGE_ROWS = 50
#: Virtual-machine steps SQLite runs per table row while creating the page index (scan, sort,
#: insert); progress estimates divide the steps seen by this. A test keeps it honest.
PAGE_INDEX_STEPS_PER_ROW = 11


@dataclass
class IndexProgress:
    """How far a page index creation has come (written from the SQLite thread)."""

    rows: int = 0
    steps: int = 0
    started: float = field(default_factory=time.monotonic)

    def fraction(self) -> float | None:
        """Estimated share done, at most 0.99 until the index is committed."""
        if self.rows <= 0:
            return None
        return min(self.steps / (self.rows * PAGE_INDEX_STEPS_PER_ROW), 0.99)

    def elapsed(self) -> float:
        return time.monotonic() - self.started
