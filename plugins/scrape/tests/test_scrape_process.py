"""Real processes: the gateway does not import jobspy/pandas to list tools, and a process
killed inside a term's insert transaction leaves nothing of that term; a rerun completes it."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest
from scrape_testutil import rows

LIST_TOOLS = textwrap.dedent(
    """
    import json, sys
    import anyio
    from gateway.app import build_gateway
    from gateway.config import load_config
    from gateway.testing import gateway_client

    async def main():
        gateway = build_gateway(load_config(env={}))
        async with gateway_client(gateway) as client:
            tools = [t.name for t in (await client.list_tools()).tools]
        print(json.dumps({
            "tools": tools,
            "scrape": gateway.plugin("scrape").state.value,
            "jobspy": "jobspy" in sys.modules,
            "pandas": "pandas" in sys.modules,
            "numpy": "numpy" in sys.modules,
            "run": "gateway_scrape.run" in sys.modules,
            "preflight": "gateway_scrape.preflight" in sys.modules,
            "store": "gateway_queue.store" in sys.modules,
        }))

    anyio.run(main)
    """
)


def test_listing_tools_imports_neither_jobspy_nor_pandas_nor_the_runs_code(tmp_path):
    """A start registers the tool and lists it; the run's modules (the run, its DNS
    preflight, the queue's store) come with the first scrape, which the other tests make."""
    proc = subprocess.run(
        [sys.executable, "-c", LIST_TOOLS],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 0, proc.stderr
    out = json.loads(proc.stdout.strip().splitlines()[-1])
    assert out["scrape"] == "loaded" and "scrape_jobs" in out["tools"]
    assert out == {**out, "jobspy": False, "pandas": False, "numpy": False}
    assert out == {**out, "run": False, "preflight": False, "store": False}


# Runs scrape_jobs in a child process: term "small" (10 rows), then term "big" (1,500 rows).
# With "block", every SQLite connection the process opens gets a trace callback; when the big
# term's transaction reaches its COMMIT (every row inserted, nothing committed) it signals the
# test and sleeps, to be killed there.
RUN_SCRAPE = textwrap.dedent(
    """
    import json, sqlite3, sys, time
    from pathlib import Path
    import anyio
    from gateway.testing import make_gateway
    from gateway_scrape.sources import RecordedSource

    workdir, ready, mode = Path(sys.argv[1]), Path(sys.argv[2]), sys.argv[3]
    BIG = 1500

    def record(n):
        return {"id": f"li-{n}", "site": "linkedin", "title": f"Job {n}",
                "job_url": f"https://www.linkedin.com/jobs/view/{n}", "description": "text"}

    real_connect = sqlite3.connect

    def connect(*args, **kwargs):
        # The real connection, observed: a trace callback sees each statement before it runs.
        conn, inserts = real_connect(*args, **kwargs), [0]
        def trace(statement):
            sql = statement.strip().upper()
            if sql.startswith("INSERT"):
                inserts[0] += 1
            elif sql == "COMMIT" and inserts[0] >= BIG:
                ready.with_suffix(".tmp").write_text(str(inserts[0]))
                ready.with_suffix(".tmp").replace(ready)  # appears complete or not at all
                time.sleep(600)
        conn.set_trace_callback(trace)
        return conn

    if mode == "block":
        sqlite3.connect = connect

    async def main():
        gw = make_gateway(plugins=["scrape"], cwd=workdir, env={})
        gw.plugin("scrape").context.resources["source"] = RecordedSource({
            "small": [record(n) for n in range(10)],
            "big": [record(n) for n in range(1000, 1000 + BIG)],
        })
        async with gw:
            res = await gw.call("scrape_jobs", {"terms": ["small", "big"], "preflight_host": None,
                                                "save_capture_json": False})
        print(json.dumps(res.payload))

    anyio.run(main)
    """
)


def _run(workdir: Path, ready: Path, mode: str) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-c", RUN_SCRAPE, str(workdir), str(ready), mode],
        cwd=workdir,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


@pytest.mark.skipif(not hasattr(signal, "SIGKILL"), reason="needs SIGKILL")
def test_a_process_killed_inside_an_insert_leaves_no_partial_term_and_a_rerun_completes_it(
    tmp_path,
):
    ready = tmp_path / "ready"
    db = tmp_path / "data/capture/jobs.db"
    proc = _run(tmp_path, ready, "block")
    try:
        deadline = time.monotonic() + 90
        while not ready.exists():
            assert proc.poll() is None, proc.communicate()[1]
            assert time.monotonic() < deadline, "the child never reached the big term's COMMIT"
            time.sleep(0.05)
        assert ready.read_text() == "1500"  # every row of the big term was inside the transaction
        os.kill(proc.pid, signal.SIGKILL)
    finally:
        proc.kill()
        proc.communicate(timeout=30)
    assert proc.returncode == -signal.SIGKILL

    # The small term was committed before; nothing of the big one survived the kill.
    urls = [u for (u,) in rows(db)]
    assert len(urls) == 10 and all(int(u.rsplit("/", 1)[1]) < 10 for u in urls)

    rerun = _run(tmp_path, ready, "plain")
    out, err = rerun.communicate(timeout=120)
    assert rerun.returncode == 0, err
    payload = json.loads(out.strip().splitlines()[-1])
    small, big = payload["results"]
    assert (small["inserted_count"], small["duplicate_count"]) == (0, 10)
    assert (big["inserted_count"], big["duplicate_count"]) == (1500, 0)
    assert len(rows(db)) == 1510
