"""Maintenance commands for the jobs database, independent of the gateway.

    python -m gateway_queue ensure-indexes [--db data/capture/jobs.db]

creates the page index (and idx_jobs_status) on a database written by the previous pipeline,
so that every page of ``bulk_read_new_jobs`` is an index range scan. Idempotent; never alters
rows; never creates the database. The scrape plugin's writer creates the index by itself.
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

from . import store


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m gateway_queue")
    sub = parser.add_subparsers(dest="command", required=True)
    ensure = sub.add_parser("ensure-indexes", help="create the read indexes if missing")
    ensure.add_argument(
        "--db",
        default=os.environ.get("JOBS_DB_PATH") or store.DEFAULT_DB_PATH,
        help="jobs database (default: $JOBS_DB_PATH, else %(default)s)",
    )
    args = parser.parse_args(argv)
    path = Path(args.db)
    try:
        store.ensure_indexes(path)
    except FileNotFoundError:
        print(f"error: {args.db} not found", file=sys.stderr)
        return 2
    except store.StoreError as exc:
        print(f"error: {args.db}: {exc.reason}", file=sys.stderr)
        return 1
    print(f"{args.db}: indexes present ({store.PAGE_INDEX_NAME}, idx_jobs_status)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
