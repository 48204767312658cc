"""What making every result encodable (no lone surrogate) costs an ordinary result.

The pipeline shapes a handler's result into the payload and its compact text. Since results
must be encodable as UTF-8 before they leave, shaping checks the text: a pydantic model's own
encoder refuses a surrogate at no extra cost, a dict's text is checked with ``str.isascii()``
(constant time) and, when it is not ASCII, one UTF-8 encoding pass. Only a result that holds a
lone surrogate pays for a rewrite.

Baseline, timed in the same run, alternating call by call: what shaping did before (a dict:
``json.dumps``; a model: ``model_dump`` plus ``model_dump_json``, which the transport asked
for anyway). Pages of the queue's shape (50 jobs, ~3 KB descriptions), ASCII text and text
with typographic quotes and a euro sign (not ASCII), as a dict and as a model.

Rerun: .venv/bin/python bench/core_encodable.py --repeats 200
Writes the ``encodable`` section of bench/results/core.md and prints it.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
import core_common as c
from core_redaction import Page, PagePlugin, make_page

from gateway.errors import encodable
from gateway.pipeline import _shape
from gateway.testing import make_gateway

JOBS = 50


def page(non_ascii: bool) -> Page:
    full = make_page(7)
    jobs = full.jobs[:JOBS]
    if non_ascii:
        jobs = [
            j.model_copy(
                update={
                    "description": f"We\u2019re hiring \u2013 \u201c{j.title}\u201d, \u20ac70k. "
                    + (j.description or "")
                }
            )
            for j in jobs
        ]
    return Page(jobs=jobs, count=len(jobs), has_more=True, next_cursor="c" * 40)


def before_dict(raw: dict[str, Any]) -> str:
    return json.dumps(raw, separators=(",", ":"), ensure_ascii=False)


def before_model(raw: Page) -> str:
    raw.model_dump(mode="json")
    return raw.model_dump_json()


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--repeats", type=int, default=200)
    args = ap.parse_args(argv)
    machine = c.Machine()
    with tempfile.TemporaryDirectory() as tmp:
        gw = make_gateway(
            objects={"p": PagePlugin(page(False))}, entry_points=False, env={}, cwd=Path(tmp)
        )
        tool = gw.registry.get("read_page")
        assert tool is not None
        dict_tool = dataclasses.replace(
            tool, spec=dataclasses.replace(tool.spec, output_model=None)
        )

        rows = []
        for label, non_ascii in (("ASCII", False), ("not ASCII", True)):
            model = page(non_ascii)
            data = model.model_dump(mode="json")
            size = len(model.model_dump_json().encode()) / 1e3
            variants: dict[str, tuple[Callable[[], object], Callable[[], object]]] = {
                "dict": (
                    lambda d=data: before_dict(d),
                    lambda d=data: _shape(dict_tool, d),
                ),
                "model": (
                    lambda m=model: before_model(m),
                    lambda m=model: _shape(tool, m),
                ),
            }
            for kind, (old, new) in variants.items():
                times: dict[str, list[int]] = {"before": [], "after": []}
                for rep in range(args.repeats + 5):
                    order = [("before", old), ("after", new)]
                    if rep % 2:
                        order.reverse()
                    for name, fn in order:
                        t0 = time.perf_counter_ns()
                        fn()
                        dt = time.perf_counter_ns() - t0
                        if rep >= 5:
                            times[name].append(dt)
                b, a = statistics.median(times["before"]), statistics.median(times["after"])
                text = before_dict(data)
                check = []
                for _ in range(args.repeats):
                    t0 = time.perf_counter_ns()
                    encodable(text)
                    check.append(time.perf_counter_ns() - t0)
                alone = statistics.median(check) if kind == "dict" else 0.0
                rows.append(
                    f"| {kind} | {label} | {size:.0f} | {b / 1e3:.0f} | {a / 1e3:.0f} | "
                    f"{a / b:.3f} x | {alone / 1e3:.1f} |"
                )
    body = (
        "## Encodable results (no lone surrogate) on an ordinary page\n\n"
        + c.facts_line(
            f".venv/bin/python bench/core_encodable.py --repeats {args.repeats}", machine
        )
        + f"- Method: the pipeline's shaping step on a {JOBS}-job page of the queue's shape, "
        "in process, against what shaping did before (same run, alternating call by call, "
        f"{args.repeats} calls each after 5 warm-up rounds; medians). `dict`: the handler returns "
        "a dict; `model`: a pydantic page, whose text the transport needed anyway.\n\n"
        "| result | text | kB | before µs | after µs | after / before | the added check alone µs |\n"
        "|---|---|---|---|---|---|---|\n" + "\n".join(rows) + "\n\n"
        "The added check is the last column (a model's encoder refuses a surrogate itself, so a "
        "model adds nothing); the before/after medians of the whole step differ by the machine's "
        "noise besides it.\n"
    )
    c.write_section("encodable", body)
    print(body)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
