"""Tools of the orchestrator plugin: the table browser over the orchestrator's PostgreSQL.

The API serves six tables (its allow-list; ``list_tables`` names them). It pages by page number
and page size, so ``query_table`` maps ``offset``/``limit`` onto the one page that holds rows
``[offset, offset + limit)`` (the smallest such page size), or onto two pages of ``limit`` rows,
and slices: it returns exactly those rows whatever the offset. JSON columns come decoded, dates
in UTC, credentials masked (:mod:`.masking`), long texts cut to fit (:mod:`.bounded`).
"""

from __future__ import annotations

from collections.abc import Callable
from functools import partial
from typing import Any, Literal

from pydantic import BaseModel, Field

from gateway import Args, Tier
from gateway.rest import (
    OffsetPage,
    RestContext,
    RestTool,
    Route,
    decode_json_string,
    gather,
    offset_page,
    to_utc_iso,
)

from .backend import COCKPIT
from .bounded import bound_items
from .masking import MASK, credential_keys, is_secret_name, mask_connection_url, mask_value
from .params import NoArgs

TableName = Literal["agents", "citations", "datasources", "jobs", "requirements", "sources"]
MAX_PAGE_SIZE = 500  # the API's own bound on pageSize
HINT = "ask for fewer rows (limit)"
_NO_TABLE = {404: "no table {table_name} in the orchestrator API's allow-list; see list_tables"}
ROWS = Route(
    "GET",
    "/api/tables/{table_name}",
    query=("page", "page_size"),
    rename={"page_size": "pageSize"},
    what="table {table_name}",
    status=_NO_TABLE,
)


class TableArgs(Args):
    table_name: TableName = Field(description="As list_tables names it.")


class QueryArgs(TableArgs):
    limit: int = Field(50, ge=1, le=MAX_PAGE_SIZE, description="Rows.")
    offset: int = Field(0, ge=0, le=10_000_000, description="Rows to skip.")


class Table(BaseModel):
    name: str
    row_count: int


class Tables(BaseModel):
    tables: list[Table]


class Column(BaseModel):
    name: str
    type: str = Field(description="string, number, boolean, date, json or binary")
    nullable: bool


class TableSchema(BaseModel):
    table: str
    columns: list[Column]


class TableAnswer(BaseModel):
    """A page of ``GET /api/tables/{name}`` (``page`` and ``pageSize`` are the request's)."""

    columns: list[dict[str, Any]]
    rows: list[dict[str, Any]]
    total: int


class TablePage(OffsetPage):
    table: str
    columns: list[str]
    rows: list[dict[str, Any]]
    truncated_texts: int = Field(description=f"texts cut to fit; {HINT} to see more")


def page_plan(offset: int, limit: int) -> list[tuple[int, int]]:
    """The requests ``(page, page_size)`` that cover rows ``[offset, offset + limit)``: one page
    when a page size up to the API's maximum holds them all, else two pages of ``limit``."""
    last = offset + limit - 1
    for size in range(limit, MAX_PAGE_SIZE + 1):
        if offset // size == last // size:
            return [(offset // size + 1, size)]
    first = offset // limit + 1
    return [(first, limit), (first + 1, limit)]


Cell = Callable[[Any], Any]


def _decoded(kind: str | None) -> Cell:
    if kind == "json":
        return decode_json_string
    if kind == "date":
        return to_utc_iso
    return lambda value: value


def cell_shaper(name: str, kind: str | None) -> Cell:
    """How one column's cells reach the model: JSON decoded, dates in UTC, secrets masked.
    Decided once per column (a page of 500 rows has thousands of cells)."""
    decode = _decoded(kind)
    if name == "credentials":
        return lambda value: None if value is None else credential_keys(decode(value))
    if is_secret_name(name):
        return lambda value: None if value is None else MASK
    if name.endswith("url"):
        return lambda value: mask_connection_url(value) if isinstance(value, str) else value
    return lambda value: None if value is None else mask_value(decode(value))


async def query_table(args: QueryArgs, ctx: RestContext[Any]) -> TablePage:
    plan = page_plan(args.offset, args.limit)
    pages = await gather(
        [
            partial(ctx.fetch, ROWS, TableAnswer, {**dict(args), "page": page, "page_size": size})
            for page, size in plan
        ]
    )
    what = f"table {args.table_name}"
    kinds = {str(c.get("name")): c.get("type") for c in pages[0].columns}
    shapers = {name: cell_shaper(name, kind) for name, kind in kinds.items()}
    rows = [row for page in pages for row in page.rows]
    start = args.offset - (plan[0][0] - 1) * plan[0][1]
    picked = [
        {k: (shapers.get(k) or cell_shaper(k, None))(v) for k, v in row.items()}
        for row in rows[start : start + args.limit]
    ]
    shaped = bound_items(picked, hint=HINT)  # rows that do not fit are left for next_offset
    return ctx.validate(
        TablePage,
        {
            "table": args.table_name,
            "columns": list(kinds),
            "rows": shaped.items,
            **offset_page(
                total=pages[0].total,
                offset=args.offset,
                limit=args.limit,
                returned=len(shaped.items),
            ),
            "truncated_texts": shaped.truncated,
        },
        what,
    )


def _tables(data: Any, args: Any) -> Any:
    if not isinstance(data, list):
        return data
    return {
        "tables": [
            {"name": t.get("name"), "row_count": t.get("rowCount")}
            for t in data
            if isinstance(t, dict)
        ]
    }


def _schema(data: Any, args: TableArgs) -> Any:
    return {"table": args.table_name, "columns": data} if isinstance(data, list) else data


TOOLS = (
    RestTool(
        name="list_tables",
        description="The orchestrator database's browsable tables, with row counts.",
        input_model=NoArgs,
        output_model=Tables,
        tier=Tier.READ,
        backend=COCKPIT,
        route=Route("GET", "/api/tables", what="the table list"),
        shape=_tables,
    ),
    RestTool(
        name="query_table",
        description="Rows [offset, offset+limit) of a table, JSON decoded, secrets masked.",
        input_model=QueryArgs,
        output_model=TablePage,
        tier=Tier.READ,
        backend=COCKPIT,
        run=query_table,
        max_result_chars=100_000,
    ),
    RestTool(
        name="get_table_schema",
        description="A table's columns: name, type, nullable.",
        input_model=TableArgs,
        output_model=TableSchema,
        tier=Tier.READ,
        backend=COCKPIT,
        route=Route(
            "GET",
            "/api/tables/{table_name}/schema",
            what="the schema of table {table_name}",
            status=_NO_TABLE,
        ),
        shape=_schema,
    ),
)
