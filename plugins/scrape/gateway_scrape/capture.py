"""Capture files: one JSON snapshot of the raw records per term, for audits and replays.

Written atomically (a temporary file in the same folder, flushed, then renamed over the final
name), so a crash leaves either no file or a complete one, never half of one.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import tempfile
from collections.abc import Sequence
from pathlib import Path
from typing import Any

_SLUG = re.compile(r"[^a-z0-9]+")

#: Version of the capture file layout below.
CAPTURE_FORMAT = 1


def term_slug(term: str) -> str:
    """A short, file-name-safe form of a search term (``"AI Engineer"`` → ``ai-engineer``)."""
    slug = _SLUG.sub("-", term.lower()).strip("-")[:60].strip("-")
    return slug or "term"


def capture_name(run_id: str, index: int, term: str) -> str:
    """``<run_id>_<NN>_<slug>.json``: unique per run and term, sorted by run then term order."""
    return f"{run_id}_{index:02d}_{term_slug(term)}.json"


def capture_document(
    *,
    run_id: str,
    term: str,
    location: str,
    sites: Sequence[str],
    fetched_at: str,
    records: Sequence[dict[str, Any]],
) -> dict[str, Any]:
    return {
        "format": CAPTURE_FORMAT,
        "run_id": run_id,
        "term": term,
        "location": location,
        "sites": list(sites),
        "fetched_at": fetched_at,
        "record_count": len(records),
        "records": list(records),
    }


def write_json_atomic(path: Path, document: Any) -> None:
    """Write ``document`` as JSON to ``path`` atomically; creates the parent folders."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.stem}-", suffix=".tmp")
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as fh:
            json.dump(document, fh, ensure_ascii=False, allow_nan=False, indent=1)
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise


def describe_os_error(exc: OSError) -> str:
    """What went wrong writing a capture file, without the path."""
    reason = exc.strerror or type(exc).__name__
    return f"capture file not written: {' '.join(str(reason).split())[:120]}"
