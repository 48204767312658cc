"""bulk_read_new_jobs through the gateway pipeline and the official MCP client, on real files."""

from __future__ import annotations

import json
import sqlite3
import subprocess
import sys
from contextlib import closing

import pytest
from gateway_queue import store
from gateway_queue.cursor import decode_cursor, encode_cursor
from gwq_testutil import (
    DB_REL,
    add_rows,
    as_jobs,
    init_db,
    legacy_db,
    new_jobs_in_order,
    open_fds_to,
    snapshot,
)

from gateway.testing import assert_plugin_conforms, gateway_client, tool_error


@pytest.fixture
def db(tmp_path):
    """The default database, created by the store's writer (schema + indexes)."""
    path = tmp_path / DB_REL
    init_db(path)
    return path


@pytest.mark.anyio
async def test_queue_plugin_conforms(tmp_path, db):
    await assert_plugin_conforms("queue", cwd=tmp_path)


@pytest.mark.anyio
async def test_queue_plugin_conforms_without_a_database(tmp_path):
    await assert_plugin_conforms("queue", cwd=str(tmp_path))  # a str works as well as a Path
    assert not (tmp_path / DB_REL).exists()


SQLITE_ON_FIRST_CALL = """
import json, sys, anyio
STORE = ("gateway_queue.store", "gateway_queue.connection", "sqlite3", "aiosqlite")
from gateway.testing import make_gateway
gw = make_gateway(plugins=["queue"], cwd=sys.argv[1], env={})
async def main():
    async with gw:
        gw.visible_tools()
        assert not set(STORE) & set(sys.modules), "imported at start-up"
        result = await gw.call("bulk_read_new_jobs", {"limit": 5})
        assert set(STORE) <= set(sys.modules)
    print(json.dumps(result.payload))
anyio.run(main)
"""


def test_the_store_is_imported_by_the_first_call_not_at_start_up(tmp_path, db):
    """A gateway start imports the plugin to register its tools and opens no database (the
    background index waits): the store and the driver (sqlite3 and aiosqlite, ~7 ms) come
    with the first call, and work then."""
    add_rows(db, [{"status": "new"} for _ in range(3)])
    run = subprocess.run(
        [sys.executable, "-c", SQLITE_ON_FIRST_CALL, str(tmp_path)],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert run.returncode == 0, run.stderr[-2000:]
    page = json.loads(run.stdout.splitlines()[-1])
    assert page["count"] == 3 and page["jobs"] == as_jobs(new_jobs_in_order(db))


def test_make_gateway_takes_a_str_working_directory(tmp_path):
    from gateway.testing import make_gateway

    gw = make_gateway(plugins=["queue"], cwd=str(tmp_path), env={})
    assert gw.plugin("queue").context.data_roots == (tmp_path.resolve(),)


async def read(gw, **args):
    return await gw.call("bulk_read_new_jobs", args)


@pytest.mark.anyio
async def test_default_batch_is_50_new_jobs_in_order_with_exactly_the_contract_fields(
    gateway_factory, db
):
    add_rows(db, [{"status": "new", "captured_at": f"2025-01-{d % 28 + 1:02d}"} for d in range(60)])
    add_rows(db, [{"status": s} for s in ("shortlist", "reject", "applied", "reviewed")])
    gw = gateway_factory(plugins=["queue"])
    async with gw:
        result = await read(gw)
    assert not result.is_error, result.payload
    page = result.payload
    assert set(page) == {"jobs", "count", "has_more", "next_cursor"}
    assert page["count"] == 50 == len(page["jobs"])
    assert page["has_more"] is True and isinstance(page["next_cursor"], str)
    assert page["jobs"] == as_jobs(new_jobs_in_order(db)[:50])
    for job in page["jobs"]:
        assert list(job) == list(store.JOB_FIELDS)
        assert job["status"] == "new"


@pytest.mark.anyio
async def test_missing_values_are_null_and_every_value_is_a_json_type(gateway_factory, db):
    add_rows(db, [{"status": "new"}])  # only the NOT NULL columns set
    add_rows(db, [{"status": "new", "title": b"blob \xff title", "captured_at": "2025-02-01"}])
    gw = gateway_factory(plugins=["queue"])
    async with gw:
        page = (await read(gw)).payload
    first, second = page["jobs"]
    assert first["title"] == "blob \ufffd title"  # a BLOB still comes back as a string
    assert {k for k, v in second.items() if v is None} == {
        "job_id",
        "title",
        "company",
        "description",
        "location",
        "source",
        "captured_at",
    }
    assert json.loads(json.dumps(page)) == page


@pytest.mark.anyio
async def test_fewer_new_jobs_than_the_limit_returns_all_of_them_and_no_cursor(gateway_factory, db):
    add_rows(db, [{"status": "new", "captured_at": "2025-01-01"} for _ in range(3)])
    gw = gateway_factory(plugins=["queue"])
    async with gw:
        page = (await read(gw, limit=1000)).payload
    assert page["count"] == 3 and page["has_more"] is False and page["next_cursor"] is None


@pytest.mark.anyio
async def test_exactly_limit_rows_means_no_further_page(gateway_factory, db):
    add_rows(db, [{"status": "new", "captured_at": "2025-01-01"} for _ in range(4)])
    gw = gateway_factory(plugins=["queue"])
    async with gw:
        page = (await read(gw, limit=4)).payload
    assert page["count"] == 4 and page["has_more"] is False and page["next_cursor"] is None


@pytest.mark.anyio
async def test_no_new_jobs_is_an_empty_result_not_an_error(gateway_factory, db):
    add_rows(db, [{"status": "reject"}])
    gw = gateway_factory(plugins=["queue"])
    async with gw:
        result = await read(gw)
    assert not result.is_error
    assert result.payload == {"jobs": [], "count": 0, "has_more": False, "next_cursor": None}


@pytest.mark.anyio
async def test_paging_with_cursors_visits_every_new_job_once_including_null_and_equal_times(
    gateway_factory, db
):
    times = [None, "2025-01-01", "2025-01-01", None, "2025-03-01", "2025-01-01", None, "2025-02-01"]
    add_rows(db, [{"status": "new", "captured_at": t} for t in times * 3])
    add_rows(db, [{"status": "reviewed", "captured_at": "2025-01-01"}])
    gw = gateway_factory(plugins=["queue"])
    seen, cursor, pages = [], None, 0
    async with gw:
        while True:
            args = {"limit": 5} | ({"cursor": cursor} if cursor else {})
            page = (await read(gw, **args)).payload
            seen += page["jobs"]
            pages += 1
            if not page["has_more"]:
                break
            cursor = page["next_cursor"]
    assert seen == as_jobs(new_jobs_in_order(db))
    assert pages == 5


@pytest.mark.parametrize(
    ("limit", "words"),
    [(0, "invalid batch size"), (-5, "invalid batch size"), (1001, "batch size too large")],
)
@pytest.mark.anyio
async def test_out_of_range_limits_are_refused_with_the_reason(gateway_factory, db, limit, words):
    gw = gateway_factory(plugins=["queue"])
    async with gw:
        result = await read(gw, limit=limit)
    assert result.code == "VALIDATION_ERROR"
    assert words in result.payload["error"]["message"]
    assert result.payload["error"]["details"]["fields"][0]["field"] == "limit"


@pytest.mark.parametrize(
    "args",
    [
        {"limit": "10"},
        {"limit": 2.5},
        {"limit": True},
        {"cursor": 123},
        {"cursor": ["x"]},
        {"db_path": 7},
        {"status": "new"},
        {"batch_size": 10},
    ],
)
@pytest.mark.anyio
async def test_wrong_types_and_unknown_arguments_are_validation_errors(gateway_factory, db, args):
    gw = gateway_factory(plugins=["queue"])
    async with gw:
        result = await read(gw, **args)
    assert result.code == "VALIDATION_ERROR", result.payload


def _valid_cursor() -> str:
    return encode_cursor(store.Keyset(captured_at="2025-01-01T00:00:00Z", id=42))


def _tampered() -> list[str]:
    good = _valid_cursor()
    import base64

    raw = base64.urlsafe_b64decode(good + "=" * (-len(good) % 4))
    edited = raw.replace(b'"i":42', b'"i":43')
    return [
        "",
        "not-a-cursor",
        "%%%",
        good[:-3],  # truncated
        good + "A",
        good[:10] + ("B" if good[10] != "B" else "C") + good[11:],
        base64.urlsafe_b64encode(edited).decode().rstrip("="),  # id changed, old checksum
        base64.urlsafe_b64encode(b'{"v":1,"c":null,"i":1}').decode(),  # no checksum
        good + "==",  # padded spelling of the same bytes
    ]


@pytest.mark.parametrize("cursor", _tampered())
@pytest.mark.anyio
async def test_malformed_truncated_or_tampered_cursors_are_validation_errors(
    gateway_factory, db, cursor
):
    gw = gateway_factory(plugins=["queue"])
    async with gw:
        result = await read(gw, cursor=cursor)
    assert result.code == "VALIDATION_ERROR", result.payload
    assert "cursor" in result.payload["error"]["message"]


def test_cursor_round_trips_text_null_and_blob_keysets():
    for key in (
        store.Keyset("2025-01-01T00:00:00Z", 7),
        store.Keyset(None, 1),
        store.Keyset(b"\x00\xffraw", 2**63 - 1),
        store.Keyset("ünïcode", -3),
    ):
        cursor = encode_cursor(key)
        assert cursor.isascii() and "=" not in cursor
        assert decode_cursor(cursor) == key


@pytest.mark.anyio
async def test_missing_database_is_db_not_found_with_the_relative_path_and_nothing_created(
    gateway_factory, tmp_path
):
    gw = gateway_factory(plugins=["queue"])
    async with gw:
        default = await read(gw)
        other = await read(gw, db_path="elsewhere/other.db")
    assert default.code == "DB_NOT_FOUND"
    assert DB_REL in default.payload["error"]["message"]
    assert "elsewhere/other.db" in other.payload["error"]["message"]
    assert str(tmp_path) not in default.text() + other.text()
    assert not (tmp_path / "data" / "capture").exists()
    assert not (tmp_path / "elsewhere").exists()


@pytest.mark.parametrize(
    ("make", "reason"),
    [
        (lambda p: p.write_bytes(b"garbage, not sqlite " * 200), "not a SQLite database"),
        (
            lambda p: sqlite3.connect(p).execute("CREATE TABLE other (x)").connection.close(),
            "no jobs table",
        ),
        (
            lambda p: (
                sqlite3.connect(p)
                .execute("CREATE TABLE jobs (id INTEGER PRIMARY KEY)")
                .connection.close()
            ),
            "expected columns",
        ),
        (lambda p: p.mkdir(), "folder"),
    ],
)
@pytest.mark.anyio
async def test_unusable_files_are_db_error_with_the_reason_and_no_sql_or_absolute_path(
    gateway_factory, tmp_path, make, reason
):
    path = tmp_path / "bad.db"
    make(path)
    gw = gateway_factory(plugins=["queue"])
    async with gw:
        result = await read(gw, db_path="bad.db")
    assert result.code == "DB_ERROR"
    message = result.payload["error"]["message"]
    assert reason in message and "bad.db" in message
    assert str(tmp_path) not in result.text()
    for sql in ("SELECT", "FROM jobs", "PRAGMA", "CREATE"):
        assert sql not in message


@pytest.mark.anyio
async def test_corrupt_pages_are_db_error(gateway_factory, tmp_path):
    path = tmp_path / "corrupt.db"
    init_db(path)
    add_rows(path, [{"status": "new", "description": "x" * 3000} for _ in range(50)])
    data = bytearray(path.read_bytes())
    page = 4096
    for offset in range(2 * page, len(data), page):  # keep the header and schema page
        data[offset : offset + 64] = b"\xa5" * 64
    path.write_bytes(bytes(data))
    gw = gateway_factory(plugins=["queue"])
    async with gw:
        result = await read(gw, db_path="corrupt.db")
    assert result.code == "DB_ERROR", result.payload
    assert "corrupt" in result.payload["error"]["message"]


@pytest.mark.anyio
async def test_db_path_outside_the_data_roots_is_a_validation_error(gateway_factory, tmp_path):
    outside = legacy_db(tmp_path.parent / f"{tmp_path.name}-outside.db")
    gw = gateway_factory(plugins=["queue"])
    async with gw:
        for value in (str(outside), "../" + outside.name, "data/../../x.db"):
            result = await read(gw, db_path=value)
            assert result.code == "VALIDATION_ERROR", value
            assert "db_path" in result.payload["error"]["message"]
    outside.unlink()


@pytest.mark.anyio
async def test_db_path_setting_and_env_var_choose_the_database(gateway_factory, tmp_path):
    a = tmp_path / "a.db"
    b = tmp_path / "b.db"
    for path, title in ((a, "from setting"), (b, "from env")):
        init_db(path)
        add_rows(path, [{"status": "new", "title": title}])
    gw = gateway_factory(plugins=["queue"], plugin_config={"queue": {"db_path": "a.db"}})
    async with gw:
        assert (await read(gw)).payload["jobs"][0]["title"] == "from setting"
    gw = gateway_factory(plugins=["queue"], env={"JOBS_DB_PATH": "b.db"})
    async with gw:
        assert (await read(gw)).payload["jobs"][0]["title"] == "from env"


@pytest.mark.anyio
async def test_reading_never_changes_the_file_and_closes_it_on_every_path(gateway_factory, db):
    add_rows(db, [{"status": "new", "captured_at": f"2025-01-{i % 9 + 1:02d}"} for i in range(30)])
    before = snapshot(db)
    fds_before = open_fds_to(db)
    gw = gateway_factory(plugins=["queue"])
    async with gw:
        cursor = None
        for _ in range(3):
            page = (await read(gw, limit=7, **({"cursor": cursor} if cursor else {}))).payload
            cursor = page["next_cursor"]
        assert (await read(gw, limit=0)).code == "VALIDATION_ERROR"
        assert (await read(gw, cursor="bogus")).code == "VALIDATION_ERROR"
        assert (await read(gw, db_path="nowhere.db")).code == "DB_NOT_FOUND"
    assert snapshot(db) == before
    assert open_fds_to(db) == fds_before == 0


@pytest.mark.anyio
async def test_failing_reads_leave_the_broken_file_untouched_and_closed(gateway_factory, tmp_path):
    path = tmp_path / "nojobs.db"
    with closing(sqlite3.connect(path)) as conn, conn:
        conn.execute("CREATE TABLE other (x)")
    conn.close()
    before = snapshot(path)
    gw = gateway_factory(plugins=["queue"])
    async with gw:
        assert (await read(gw, db_path="nojobs.db")).code == "DB_ERROR"
    assert snapshot(path) == before
    assert open_fds_to(path) == 0


@pytest.mark.anyio
async def test_legacy_database_without_the_page_index_reads_correctly(gateway_factory, tmp_path):
    path = legacy_db(tmp_path / DB_REL)
    add_rows(path, [{"status": "new", "captured_at": t} for t in ("b", None, "a", "b", None)])
    gw = gateway_factory(plugins=["queue"])
    async with gw:
        first = (await read(gw, limit=2)).payload
        rest = (await read(gw, limit=10, cursor=first["next_cursor"])).payload
    assert first["jobs"] + rest["jobs"] == as_jobs(new_jobs_in_order(path))


@pytest.mark.anyio
async def test_official_client_sees_the_page_as_structured_content_and_text(gateway_factory, db):
    add_rows(db, [{"status": "new", "title": "Dev", "captured_at": "2025-01-01"}])
    gw = gateway_factory(plugins=["queue"])
    async with gw, gateway_client(gw) as client:
        listed = {t.name: t for t in (await client.list_tools()).tools}
        result = await client.call_tool("bulk_read_new_jobs", {"limit": 10})
        bad = await client.call_tool("bulk_read_new_jobs", {"limit": 0})
        missing = await client.call_tool("bulk_read_new_jobs", {"db_path": "missing.db"})
    tool = listed["bulk_read_new_jobs"]
    assert tool.annotations.read_only_hint is True
    assert tool.input_schema["properties"]["limit"]["minimum"] == 1
    assert tool.input_schema["properties"]["limit"]["maximum"] == 1000
    assert not result.is_error
    assert result.structured_content["jobs"][0]["title"] == "Dev"
    assert json.loads(result.content[0].text) == result.structured_content
    assert bad.is_error and tool_error(bad)["code"] == "VALIDATION_ERROR"
    assert missing.is_error and tool_error(missing)["code"] == "DB_NOT_FOUND"


def test_compact_output_schema_accepts_and_rejects_exactly_what_the_model_schema_does():
    from gateway_queue.plugin import ReadResult
    from jsonschema import Draft202012Validator

    from gateway.registry import compact_schema

    compact = Draft202012Validator(compact_schema(ReadResult.model_json_schema()))
    original = Draft202012Validator(ReadResult.model_json_schema())
    job = {f: "x" for f in store.JOB_FIELDS} | {"id": 1}
    docs = [
        {"jobs": [job], "count": 1, "has_more": True, "next_cursor": "abc"},
        {"jobs": [job | {"title": None}], "count": 1, "has_more": False, "next_cursor": None},
        {"jobs": [], "count": 0, "has_more": False, "next_cursor": None},
        {"jobs": [job | {"title": 5}], "count": 1, "has_more": False, "next_cursor": None},
        {"jobs": [job | {"id": "1"}], "count": 1, "has_more": False, "next_cursor": None},
        {"jobs": [{"id": 1}], "count": 1, "has_more": False, "next_cursor": None},
        {"jobs": job, "count": 1, "has_more": False, "next_cursor": None},
        {"jobs": [], "count": 0, "has_more": False, "next_cursor": 3},
        {"jobs": [], "count": 0, "has_more": "no", "next_cursor": None},
        {"jobs": [], "count": 0, "has_more": False},
    ]
    verdicts = [(compact.is_valid(d), original.is_valid(d)) for d in docs]
    assert all(a == b for a, b in verdicts), verdicts
    assert [a for a, _ in verdicts] == [True, True, True] + [False] * 7
    assert "$ref" not in json.dumps(compact.schema) and "anyOf" not in json.dumps(compact.schema)


@pytest.mark.anyio
async def test_a_symlink_inside_the_root_pointing_outside_is_refused(gateway_factory, tmp_path):
    outside = tmp_path.parent / f"{tmp_path.name}-target.db"
    init_db(outside)
    (tmp_path / "link.db").symlink_to(outside)
    before = snapshot(outside)
    gw = gateway_factory(plugins=["queue"])
    async with gw:
        result = await read(gw, db_path="link.db")
        update = await gw.call(
            "bulk_update_job_status",
            {"updates": [{"id": 1, "status": "new"}], "db_path": "link.db"},
        )
    assert result.code == update.code == "VALIDATION_ERROR"
    assert snapshot(outside) == before
    outside.unlink()


@pytest.mark.anyio
async def test_a_legacy_row_with_a_null_id_is_db_error_naming_the_problem(
    gateway_factory, tmp_path
):
    from gwq_testutil import LEGACY_DDL

    path = tmp_path / "noid.db"
    with closing(sqlite3.connect(path)) as conn, conn:
        conn.executescript(LEGACY_DDL.replace("id INTEGER PRIMARY KEY AUTOINCREMENT", "id INTEGER"))
        conn.execute("INSERT INTO jobs (url, payload_json, created_at) VALUES ('u', '{}', 'x')")
    conn.close()
    gw = gateway_factory(plugins=["queue"])
    async with gw:
        result = await read(gw, db_path="noid.db")
    assert result.code == "DB_ERROR", result.payload
    assert "no id (NULL)" in result.payload["error"]["message"]


@pytest.mark.anyio
async def test_a_path_component_over_255_bytes_is_a_validation_error(gateway_factory, tmp_path):
    long_name = "x" * 300
    gw = gateway_factory(plugins=["queue"])
    async with gw:
        results = [
            await read(gw, db_path=f"data/{long_name}/jobs.db"),
            await read(gw, db_path=f"{long_name}.db"),
            await gw.call(
                "bulk_update_job_status",
                {"updates": [{"id": 1, "status": "new"}], "db_path": f"{long_name}.db"},
            ),
        ]
    for result in results:
        assert result.code == "VALIDATION_ERROR", result.payload
        message = result.payload["error"]["message"]
        assert message.startswith("db_path: not a usable path (File name too long")
        assert "255 bytes" in message and long_name not in message


@pytest.mark.anyio
async def test_a_page_of_huge_jobs_stops_at_the_character_budget_and_says_has_more(
    gateway_factory, tmp_path
):
    path = tmp_path / "huge.db"
    init_db(path)
    add_rows(path, [{"status": "new", "description": "x" * 200_000} for _ in range(30)])
    gw = gateway_factory(plugins=["queue"])
    seen: list[int] = []
    cursor = None
    async with gw:
        for _ in range(10):
            args = {"db_path": "huge.db", "limit": 1000} | ({"cursor": cursor} if cursor else {})
            result = await gw.call("bulk_read_new_jobs", args)
            page = result.payload
            assert len(result.text()) < store.MAX_PAGE_CHARS + 250_000
            seen += [j["id"] for j in page["jobs"]]
            if not page["has_more"]:
                break
            assert page["count"] < 30
            cursor = page["next_cursor"]
    assert sorted(seen) == list(range(1, 31))
