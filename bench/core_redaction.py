"""What redacting configured secrets from every successful result costs on a big page.

A page of 1,000 jobs with ~3 KB descriptions (the shape of the queue's ``bulk_read_new_jobs``
page, ~3.4 MB of JSON) goes through the real pipeline, in process, as a transport would ask
for it (``gw.call`` then ``result.text()``). Variants alternate, call by call:

* ``none``: no secret configured; the result is encoded, never searched (the baseline);
* ``3`` / ``12``: 3 or 12 configured secrets, none in the page (every real call: one literal
  search per secret over the encoded text);
* ``hit``: 3 secrets, one echoed inside one description (the rare rewrite path).

Also timed on the same text: the encoding alone, the literal search alone, and, for scale, the
regex sanitizer that error messages get (what a "regex pass over megabytes" would cost).

Rerun: .venv/bin/python bench/core_redaction.py --repeats 30
Writes the ``redaction`` section of bench/results/core.md and prints it.
"""

from __future__ import annotations

import argparse
import logging
import random
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import anyio
from pydantic import BaseModel, ConfigDict

sys.path.insert(0, str(Path(__file__).resolve().parent))
import core_common as c

from gateway import Tier, ToolSpec, hookimpl
from gateway.testing import make_gateway

JOBS = 1000
DESCRIPTION_CHARS = 3000
TOKEN = "9f1c2e7a4b8d0f6e3a5c7b9d1e2f4a6c8b0d2e4f"  # a Gitea-like 40-hex token


class Job(BaseModel):
    id: int
    job_id: str | None
    title: str | None
    company: str | None
    description: str | None
    url: str | None
    location: str | None
    source: str | None
    status: str | None
    captured_at: str | None


class Page(BaseModel):
    jobs: list[Job]
    count: int
    has_more: bool
    next_cursor: str | None


class _In(BaseModel):
    model_config = ConfigDict(extra="forbid")


def make_page(seed: int, *, leak: str | None = None) -> Page:
    rng = random.Random(seed)
    words = [
        "".join(rng.choice("abcdefghijklmnopqrstuvwxyz") for _ in range(rng.randint(2, 10)))
        for _ in range(2000)
    ]
    jobs = []
    for i in range(JOBS):
        text: list[str] = []
        size = 0
        while size < DESCRIPTION_CHARS:
            w = rng.choice(words)
            text.append(w)
            size += len(w) + 1
        description = " ".join(text)
        if leak and i == JOBS // 2:
            description = description[:1500] + f" deploy key {leak} " + description[1500:]
        jobs.append(
            Job(
                id=i + 1,
                job_id=f"{rng.getrandbits(128):032x}",
                title=f"Engineer {i}",
                company=f"Company {i % 97}",
                description=description,
                url=f"https://jobs.example/{i}",
                location="Remote",
                source="bench",
                status="new",
                captured_at="2026-11-22T12:00:00Z",
            )
        )
    return Page(jobs=jobs, count=JOBS, has_more=True, next_cursor="c" * 40)


class PagePlugin:
    def __init__(self, page: Page) -> None:
        self.page = page

    @hookimpl
    def register_tools(self, register: Any) -> None:
        page = self.page

        async def read_page(args: _In, ctx: Any) -> Page:
            return page

        register(
            ToolSpec(
                name="read_page",
                description="A page.",
                input_model=_In,
                output_model=Page,
                handler=read_page,
                tier=Tier.READ,
            )
        )


def secrets_env(n: int) -> dict[str, str]:
    rng = random.Random(n)
    env = {"GITEA_TOKEN": TOKEN} if n else {}
    for i in range(n - 1):
        env[f"SERVICE_{i}_API_KEY"] = "".join(
            rng.choice("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789")
            for _ in range(rng.choice([32, 40, 51]))
        )
    return env


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--repeats", type=int, default=30)
    args = ap.parse_args(argv)
    machine = c.Machine()
    # The hit variant logs one warning per call; that is not what is measured.
    logging.getLogger("gateway").setLevel(logging.ERROR)

    clean, leaky = make_page(1), make_page(1, leak=TOKEN)
    text = clean.model_dump_json()
    with tempfile.TemporaryDirectory() as tmp:
        gateways = {
            "none": make_gateway(
                objects={"p": PagePlugin(clean)}, entry_points=False, env={}, cwd=Path(tmp)
            ),
            "3": make_gateway(
                objects={"p": PagePlugin(clean)},
                entry_points=False,
                env=secrets_env(3),
                cwd=Path(tmp),
            ),
            "12": make_gateway(
                objects={"p": PagePlugin(clean)},
                entry_points=False,
                env=secrets_env(12),
                cwd=Path(tmp),
            ),
            "hit": make_gateway(
                objects={"p": PagePlugin(leaky)},
                entry_points=False,
                env=secrets_env(3),
                cwd=Path(tmp),
            ),
        }
        sizes = {k: len(g.sanitizer._in_json) for k, g in gateways.items()}
        times: dict[str, list[int]] = {k: [] for k in gateways}

        async def run() -> None:
            for gw in gateways.values():
                await gw.start()
            for rep in range(args.repeats + 2):
                order = list(gateways) if rep % 2 == 0 else list(reversed(gateways))
                for key in order:
                    t0 = time.perf_counter_ns()
                    result = await gateways[key].call("read_page", {})
                    out = result.text()
                    dt = time.perf_counter_ns() - t0
                    assert not result.is_error
                    assert (TOKEN in out) is False
                    if rep >= 2:  # two warm-up rounds
                        times[key].append(dt)
            for gw in gateways.values():
                await gw.stop()

        anyio.run(run)

        # The parts, on the same text, alternated.
        sanitizer3 = gateways["3"].sanitizer
        sanitizer12 = gateways["12"].sanitizer
        encode, scan3, scan12 = [], [], []
        for _ in range(args.repeats):
            t0 = time.perf_counter_ns()
            clean.model_dump_json()
            t1 = time.perf_counter_ns()
            assert not sanitizer3.result_has_secret(text)
            t2 = time.perf_counter_ns()
            assert not sanitizer12.result_has_secret(text)
            t3 = time.perf_counter_ns()
            encode.append(t1 - t0)
            scan3.append(t2 - t1)
            scan12.append(t3 - t2)
        regex = []
        for _ in range(3):
            t0 = time.perf_counter_ns()
            sanitizer3(text, max_chars=0)
            regex.append(time.perf_counter_ns() - t0)

    med = {k: statistics.median(v) for k, v in times.items()}
    mb = len(text.encode()) / 1e6

    def ms(ns: float) -> str:
        return f"{ns / 1e6:.2f}"

    rows = "\n".join(
        f"| `{k}` | {sizes[k]} | {ms(med[k])} | {ms(min(times[k]))} | {med[k] / med['none']:.3f} x |"
        for k in gateways
    )
    body = (
        "## Secret redaction of successful results (1,000-job page)\n\n"
        + c.facts_line(
            f".venv/bin/python bench/core_redaction.py --repeats {args.repeats}", machine
        )
        + f"- Method: in-process pipeline call of a tool returning a pydantic page of {JOBS} jobs "
        f"with ~{DESCRIPTION_CHARS} character descriptions ({mb:.2f} MB of JSON), then "
        "`result.text()` as a transport asks for it; variants alternate call by call, "
        f"{args.repeats} calls each after 2 warm-up rounds. `none` has no secret configured "
        "(encode only, the baseline); `3`/`12` configure that many secrets, none in the page; "
        "`hit` has one secret echoed in one description (rewrite path). Every result was checked "
        "to hold no secret.\n\n"
        "| variant | secrets searched | median ms | min ms | vs `none` |\n|---|---|---|---|---|\n"
        + rows
        + "\n\nThe parts, on the same encoded page (medians):\n\n"
        "| step | ms |\n|---|---|\n"
        f"| encode the page (`model_dump_json`, paid for the text content anyway) | {ms(statistics.median(encode))} |\n"
        f"| literal search, 3 secrets | {ms(statistics.median(scan3))} |\n"
        f"| literal search, 12 secrets | {ms(statistics.median(scan12))} |\n"
        f"| for scale: the regex sanitizer error messages get, over the whole page (3 runs) | {ms(statistics.median(regex))} |\n\n"
        f"**Cost** of redaction on a {JOBS}-job page with 3 secrets: "
        f"{ms(med['3'] - med['none'])} ms per call ({med['3'] / med['none']:.3f} x the call "
        f"without secrets); literal search alone {ms(statistics.median(scan3))} ms "
        f"(~{statistics.median(scan3) / 3 / mb / 1e3:.0f} µs per secret per MB).\n"
    )
    c.write_section("redaction", body)
    print(body)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
