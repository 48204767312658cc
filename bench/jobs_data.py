"""Jobs data shaped like real users' files, for every jobs benchmark.

A user's ``jobs.db`` was written by JobWorkFlow's scrape step (python-jobspy rows, normalized):
descriptions of about 3 KB, a ``payload_json`` that repeats the whole record (description
included), ``captured_at`` as ``datetime.isoformat()`` text (midnight ``+00:00`` for boards that
give a date, microseconds for the "now" fallback), a few rows without ``captured_at`` from older
imports, about 30 % still ``new``, and no index but ``idx_jobs_status``. :func:`describe`
measures all of that on any file, so a benchmark prints what it measured, not what it assumed.
"""

from __future__ import annotations

import datetime as dt
import json
import random
import sqlite3
import sys
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "plugins" / "queue"))
from gateway_queue import store  # noqa: E402

SEED = 20260101
STATUSES = ["new"] * 30 + ["reject"] * 35 + ["reviewed"] * 15 + ["shortlist"] * 10
STATUSES += ["applied"] * 5 + ["resume_written"] * 5
NULL_SHARE = 0.01  # rows from older imports, before captured_at was filled
DAY_SHARE = 0.7  # boards that give a posting date: captured_at at midnight

_WORDS = [
    "python",
    "sqlite",
    "engineer",
    "platform",
    "distributed",
    "reliable",
    "systems",
    "team",
    "remote",
    "hybrid",
    "senior",
    "backend",
    "data",
    "pipeline",
    "cloud",
    "kubernetes",
    "observability",
    "latency",
    "design",
    "review",
    "mentor",
    "ship",
    "customers",
    "product",
    "roadmap",
    "growth",
    "salary",
    "benefits",
    "equity",
    "on-call",
    "testing",
    "automation",
    "the",
    "and",
    "with",
    "for",
    "our",
    "you",
    "will",
    "we",
    "are",
    "of",
    "to",
    "in",
    "a",
    "experience",
    "years",
    "building",
    "services",
    "APIs",
]


def description(rng: random.Random) -> str:
    """Markdown-ish prose of 2.5-3.5 KB, like python-jobspy's LinkedIn descriptions."""
    target = rng.randint(2500, 3500)
    parts: list[str] = ["**About the role**\n\n"]
    size = len(parts[0])
    while size < target:
        sentence = " ".join(rng.choice(_WORDS) for _ in range(rng.randint(8, 20)))
        text = sentence[0].upper() + sentence[1:] + ". "
        if rng.random() < 0.08:
            text += "\n\n- "
        parts.append(text)
        size += len(text)
    return "".join(parts)


def raw_record(n: int, rng: random.Random, desc: str) -> dict[str, Any]:
    """One python-jobspy row (its 34 columns), as the scrape step receives it."""
    job = 4_000_000_000 + n
    posted = dt.date(2025, 10, 1) + dt.timedelta(days=rng.randrange(120))
    return {
        "id": f"li-{job}",
        "site": "linkedin",
        "job_url": f"https://www.linkedin.com/jobs/view/{job}",
        "job_url_direct": f"https://careers.example.com/jobs/{n}" if n % 3 else None,
        "title": f"Senior Software Engineer, {rng.choice(_WORDS).title()} {n % 500}",
        "company": f"Company {n % 20_000}",
        "location": rng.choice(["Toronto, ON, Canada", "Ottawa, ON, Canada", "Remote"]),
        "date_posted": posted.isoformat() if rng.random() < DAY_SHARE else None,
        "job_type": "fulltime",
        "salary_source": "direct_data" if n % 4 == 0 else None,
        "interval": "yearly" if n % 4 == 0 else None,
        "min_amount": 110_000.0 + n % 50_000 if n % 4 == 0 else None,
        "max_amount": 150_000.0 + n % 50_000 if n % 4 == 0 else None,
        "currency": "CAD" if n % 4 == 0 else None,
        "is_remote": n % 5 == 0,
        "job_level": "mid-senior level",
        "job_function": "Engineering and Information Technology",
        "listing_type": None,
        "emails": None,
        "description": desc,
        "company_industry": "Software Development",
        "company_url": f"https://www.linkedin.com/company/company-{n % 20_000}",
        "company_logo": None,
        "company_url_direct": None,
        "company_addresses": None,
        "company_num_employees": None,
        "company_revenue": None,
        "company_description": None,
        "skills": None,
        "experience_range": None,
        "company_rating": None,
        "company_reviews_count": None,
        "vacancy_count": None,
        "work_from_home_type": None,
    }


def legacy_row(n: int, rng: random.Random, desc: str, status: str) -> tuple[Any, ...]:
    """The row JobWorkFlow's scrape step wrote for one posting (legacy insert columns)."""
    raw = raw_record(n, rng, desc)
    if rng.random() < NULL_SHARE:
        captured: str | None = None
    elif raw["date_posted"]:
        day = dt.datetime.fromisoformat(raw["date_posted"]).replace(tzinfo=dt.UTC)
        captured = day.isoformat()  # 2025-11-02T00:00:00+00:00
    else:
        moment = dt.datetime(2025, 10, 1, tzinfo=dt.UTC) + dt.timedelta(
            seconds=rng.randrange(120 * 86_400), microseconds=rng.randrange(1_000_000)
        )
        captured = moment.isoformat()  # 2025-11-02T13:04:05.123456+00:00
    created = (captured or "2025-10-01T00:00:00+00:00").replace("+00:00", "Z")
    cleaned = {
        "source": raw["site"],
        "company": raw["company"],
        "title": raw["title"],
        "location": raw["location"],
        "url": raw["job_url"],
        "description": desc,
        "jobId": str(4_000_000_000 + n),
        "capturedAt": captured,
        "id": str(uuid.UUID(int=rng.getrandbits(128))),
        "created_at": created,
    }
    return (
        raw["job_url"],
        raw["title"],
        desc,
        raw["site"],
        cleaned["jobId"],
        raw["location"],
        raw["company"],
        captured,
        json.dumps(cleaned, ensure_ascii=False),
        created,
        status,
    )


_LEGACY_INSERT = (
    "INSERT INTO jobs (url, title, description, source, job_id, location, company, captured_at,"
    " payload_json, created_at, status) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)"
)


def legacy_rows(count: int, *, seed: int = SEED) -> Iterator[tuple[Any, ...]]:
    rng = random.Random(seed)
    pool = [description(rng) for _ in range(5000)]
    for n in range(1, count + 1):
        yield legacy_row(n, rng, pool[rng.randrange(len(pool))], rng.choice(STATUSES))


def build_legacy(path: Path, count: int) -> float:
    """A legacy-shaped database with ``count`` jobs and no page index; returns seconds taken."""
    started = time.perf_counter()
    tmp = path.with_suffix(".building")
    tmp.unlink(missing_ok=True)
    path.parent.mkdir(parents=True, exist_ok=True)
    conn = sqlite3.connect(tmp, isolation_level=None)
    conn.execute("PRAGMA synchronous = OFF")  # build speed only; nothing reads it meanwhile
    conn.execute(store._CREATE_JOBS)
    conn.execute(store._CREATE_STATUS_INDEX)  # JobWorkFlow's only index
    conn.execute("BEGIN")
    batch: list[tuple[Any, ...]] = []
    for row in legacy_rows(count):
        batch.append(row)
        if len(batch) == 10_000:
            conn.executemany(_LEGACY_INSERT, batch)
            batch.clear()
    if batch:
        conn.executemany(_LEGACY_INSERT, batch)
    conn.execute("COMMIT")
    conn.close()
    tmp.rename(path)
    return time.perf_counter() - started


def legacy_file(folder: Path, rows: int) -> tuple[Path, str]:
    """``folder/legacy_<rows>.db``, built unless a complete one is there; and where it came from."""
    path = folder / f"legacy_{rows}.db"
    if path.exists():
        conn = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
        try:
            count = conn.execute("SELECT count(*) FROM jobs").fetchone()[0]
            indexes = {r[0] for r in conn.execute("SELECT name FROM sqlite_master")}
        finally:
            conn.close()
        if count == rows and store.PAGE_INDEX_NAME not in indexes:
            return path, "reused from an earlier run"
        path.unlink()
    print(f"building {path.name} ...", file=sys.stderr)
    took = build_legacy(path, rows)
    return path, f"built in this run in {took:.0f} s"


def describe(path: Path) -> dict[str, Any]:
    """Facts measured on the file: sizes, shares, timestamp resolution, indexes."""
    conn = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    try:
        rows = int(conn.execute("SELECT count(*) FROM jobs").fetchone()[0])
        new = int(conn.execute("SELECT count(*) FROM jobs WHERE status = 'new'").fetchone()[0])
        step = max(rows // 20_000, 1)  # every step-th row: a fair sample, cheap on 8 GB
        sample = conn.execute(
            "SELECT length(description), length(payload_json), captured_at FROM jobs "
            "WHERE id % ? = 0",
            (step,),
        ).fetchall()
        indexes = [
            r[0]
            for r in conn.execute(
                "SELECT name FROM sqlite_master WHERE type = 'index' AND sql IS NOT NULL "
                "ORDER BY name"
            )
        ]
        journal = conn.execute("PRAGMA journal_mode").fetchone()[0]
    finally:
        conn.close()
    captured = [c for _, _, c in sample]
    texts = [c for c in captured if isinstance(c, str)]
    return {
        "rows": rows,
        "new": new,
        "size_gb": path.stat().st_size / 1e9,
        "description_bytes": sum(d or 0 for d, _, _ in sample) / max(len(sample), 1),
        "payload_bytes": sum(p or 0 for _, p, _ in sample) / max(len(sample), 1),
        "null_share": captured.count(None) / max(len(captured), 1),
        "midnight_share": sum(1 for c in texts if "T00:00:00" in c and "." not in c)
        / max(len(captured), 1),
        "microsecond_share": sum(1 for c in texts if "." in c) / max(len(captured), 1),
        "indexes": indexes,
        "journal_mode": journal,
        "sampled": len(sample),
    }


def describe_text(facts: dict[str, Any]) -> str:
    return (
        f"{facts['rows']:,} jobs, {facts['new']:,} `new` ({facts['new'] / facts['rows']:.0%}), "
        f"{facts['size_gb']:.2f} GB; measured on {facts['sampled']:,} sampled rows: descriptions "
        f"{facts['description_bytes']:,.0f} bytes and `payload_json` "
        f"{facts['payload_bytes']:,.0f} bytes on average, `captured_at` NULL in "
        f"{facts['null_share']:.1%}, at midnight (day resolution) in "
        f"{facts['midnight_share']:.0%}, with microseconds in {facts['microsecond_share']:.0%}; "
        f"indexes: {', '.join(f'`{i}`' for i in facts['indexes']) or 'none'}; journal mode "
        f"{facts['journal_mode']}"
    )
