"""Commands for the jobs database, independent of the gateway.

    python -m gateway_queue init [--db data/capture/jobs.db]
    python -m gateway_queue ensure-indexes [--db data/capture/jobs.db]

``init`` creates an empty jobs store where there is none: the folders, the file, the exact
legacy ``jobs`` table, ``idx_jobs_status`` and the page index. On an existing store it creates
only what is missing and never alters rows. ``ensure-indexes`` adds the indexes to a database
written by the previous pipeline (it never creates the database). Both print what they did.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import sys
import time

from . import store


def _init(db: str) -> int:
    started = time.perf_counter()
    try:
        report = asyncio.run(store.init_store(db))
    except store.StoreError as exc:
        print(f"error: {db}: {exc.reason}", file=sys.stderr)
        return 1
    took = time.perf_counter() - started
    if report.created_file:
        print(f"{db}: created an empty jobs store ({', '.join(report.created)})")
    elif report.created:
        print(f"{db}: existing jobs store; created {', '.join(report.created)} in {took:.1f} s")
    else:
        print(f"{db}: jobs store already complete (table jobs and its indexes); nothing to do")
    return 0


def _ensure_indexes(db: str) -> int:
    started = time.perf_counter()
    try:
        created = asyncio.run(store.create_page_index(db))
    except FileNotFoundError:
        print(
            f"error: {db} not found; create a new store with: python -m gateway_queue init",
            file=sys.stderr,
        )
        return 2
    except store.StoreError as exc:
        print(f"error: {db}: {exc.reason}", file=sys.stderr)
        return 1
    if created:
        took = time.perf_counter() - started
        print(f"{db}: created {store.PAGE_INDEX_NAME} in {took:.1f} s (idx_jobs_status present)")
    else:
        print(f"{db}: indexes present ({store.PAGE_INDEX_NAME}, idx_jobs_status); nothing to do")
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m gateway_queue")
    sub = parser.add_subparsers(dest="command", required=True)
    default = os.environ.get("JOBS_DB_PATH") or store.DEFAULT_DB_PATH
    for name, text in (
        ("init", "create an empty jobs store (or what is missing of one)"),
        ("ensure-indexes", "create the read indexes on an existing database if missing"),
    ):
        command = sub.add_parser(name, help=text)
        command.add_argument(
            "--db", default=default, help="jobs database (default: $JOBS_DB_PATH, else %(default)s)"
        )
    args = parser.parse_args(argv)
    if args.command == "init":
        return _init(args.db)
    return _ensure_indexes(args.db)


if __name__ == "__main__":
    sys.exit(main())
