"""Keyset pagination, property-tested: over random tables and page sizes, the pages of
bulk_read_new_jobs, called through the gateway pipeline, concatenate to exactly the rows of a
direct ``ORDER BY captured_at DESC, id DESC`` query: none missing, none repeated."""

from __future__ import annotations

import itertools
import tempfile
from pathlib import Path

import anyio
from gateway_queue import store
from gwq_testutil import LEGACY_DDL, as_jobs, new_jobs_in_order, setup_connection
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from gateway.testing import make_gateway

# Few distinct values, so equal captured_at values are common; NULLs and (legacy) BLOBs too.
captured_at = st.one_of(
    st.none(),
    st.sampled_from(["2025-01-01T00:00:00Z", "2025-01-02", "2025-01-02T10:00:00Z", "", "Z"]),
    st.text(max_size=3),
    st.binary(max_size=2),
)
status = st.sampled_from(["new", "new", "new", "reject", "shortlist", "applied"])
rows = st.lists(
    st.tuples(st.integers(min_value=1, max_value=10_000), status, captured_at),
    max_size=40,
    unique_by=lambda r: r[0],  # ids are unique; insertion order is not id order
)

_counter = itertools.count()


def build(root: Path, table: list[tuple[int, str, object]], page_index: bool) -> str:
    name = f"prop-{next(_counter)}.db"
    conn = setup_connection(root / name)
    conn.executescript(LEGACY_DDL)
    if page_index:
        conn.execute(store._CREATE_PAGE_INDEX)
    conn.executemany(
        "INSERT INTO jobs (id, url, status, captured_at, payload_json, created_at)"
        " VALUES (?, ?, ?, ?, '{}', 'now')",
        [(i, f"u{i}", s, c) for i, s, c in table],
    )
    conn.commit()
    conn.close()
    return name


async def drain(gw, db_path: str, limit: int) -> list[dict]:
    seen: list[dict] = []
    cursor = None
    for _ in range(100):
        args = {"limit": limit, "db_path": db_path} | ({"cursor": cursor} if cursor else {})
        result = await gw.call("bulk_read_new_jobs", args)
        assert not result.is_error, result.payload
        page = result.payload
        assert page["count"] == len(page["jobs"]) <= limit
        assert (page["next_cursor"] is None) is (not page["has_more"])
        if page["has_more"]:
            assert page["count"] == limit
        seen += page["jobs"]
        if not page["has_more"]:
            return seen
        cursor = page["next_cursor"]
    raise AssertionError("pagination did not end")


def test_pages_concatenate_to_the_direct_query_for_random_tables_and_page_sizes():
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp).resolve()
        gw = make_gateway(plugins=["queue"], cwd=root)

        @settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
        @given(table=rows, limit=st.integers(min_value=1, max_value=12), indexed=st.booleans())
        def check(table, limit, indexed):
            name = build(root, table, indexed)
            got = anyio.run(drain, gw, name, limit)
            expected = new_jobs_in_order(root / name)
            assert [j["id"] for j in got] == [r[0] for r in expected]
            ids = [j["id"] for j in got]
            assert len(ids) == len(set(ids))
            texts = [
                tuple(v.decode("utf-8", "replace") if isinstance(v, bytes) else v for v in r)
                for r in expected
            ]
            assert got == as_jobs(texts)
            (root / name).unlink()

        check()


sized_rows = st.lists(
    st.tuples(st.integers(min_value=1, max_value=10_000), captured_at, st.integers(0, 400)),
    max_size=30,
    unique_by=lambda r: r[0],
)


def test_pages_bounded_by_characters_still_visit_every_new_job_once():
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp).resolve()

        @settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
        @given(
            table=sized_rows,
            limit=st.integers(min_value=1, max_value=12),
            max_chars=st.integers(min_value=1, max_value=2_000),
        )
        def check(table, limit, max_chars):
            path = root / f"sized-{next(_counter)}.db"
            conn = setup_connection(path)
            conn.executescript(LEGACY_DDL)
            conn.executemany(
                "INSERT INTO jobs (id, url, status, captured_at, description, payload_json,"
                " created_at) VALUES (?, ?, 'new', ?, ?, '{}', 'now')",
                [(i, f"u{i}", c, "d" * n) for i, c, n in table],
            )
            conn.commit()
            conn.close()

            async def drain() -> list[int]:
                seen: list[int] = []
                after = None
                for _ in range(100):
                    page, more = await store.read_new_jobs(path, limit, after, max_chars=max_chars)
                    assert 1 <= len(page) <= limit or (not page and not more)
                    chars = sum(store._row_chars(r) for r in page)
                    assert len(page) == 1 or chars <= max_chars
                    seen += [r[0] for r in page]
                    if not more:
                        return seen
                    after = store.Keyset(captured_at=page[-1][-1], id=page[-1][0])
                raise AssertionError("pagination did not end")

            assert anyio.run(drain) == [r[0] for r in new_jobs_in_order(path)]
            path.unlink()

        check()
