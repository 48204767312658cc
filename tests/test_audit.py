"""The audit log: whole lines or a refused mutation, and every outcome recorded."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from typing import Any

import anyio
import pytest
from pydantic import BaseModel, ConfigDict

from gateway import Mutation, ToolSpec, hookimpl
from gateway.testing import make_gateway

SCRIPT = """
import json, resource, signal, sys
import anyio
from pathlib import Path
from pydantic import BaseModel, ConfigDict
from gateway import Mutation, ToolSpec, hookimpl
from gateway.testing import make_gateway

# A file over RLIMIT_FSIZE: the write that crosses it is cut short, the next one fails (EFBIG),
# exactly as when the disk fills mid-line. The signal would end the process otherwise.
signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
BUMPS = []

class In(BaseModel):
    model_config = ConfigDict(extra="forbid")

async def bump(args, ctx):
    BUMPS.append(1)
    return {"bumps": len(BUMPS)}

class P:
    @hookimpl
    def register_tools(self, register):
        register(ToolSpec(name="bump", description="d", input_model=In, handler=bump,
                          tier="mutation", mutation=Mutation(consequence="counts",
                          requires="nothing", reversible=True, destructive=False,
                          idempotent=False)))

cwd = Path(sys.argv[1])
audit = cwd / "audit.jsonl"
gw = make_gateway(objects={"p": P()}, entry_points=False, cwd=cwd)
_, hard = resource.getrlimit(resource.RLIMIT_FSIZE)

async def main():
    out = {}
    async with gw:
        out["first"] = (await gw.call("bump")).code
        resource.setrlimit(resource.RLIMIT_FSIZE, (audit.stat().st_size + 40, hard))
        out["cut"] = (await gw.call("bump")).payload
        out["bumps_after_cut"] = len(BUMPS)
        resource.setrlimit(resource.RLIMIT_FSIZE, (hard, hard))
        out["after"] = (await gw.call("bump")).code
    return out

print(json.dumps(anyio.run(main)))
"""


def test_a_short_audit_write_refuses_the_mutation_and_never_glues_lines(tmp_path):
    script = tmp_path / "short_write.py"
    script.write_text(textwrap.dedent(SCRIPT))
    run = subprocess.run(
        [sys.executable, str(script), str(tmp_path)],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert run.returncode == 0, run.stderr
    out = json.loads(run.stdout)
    assert out["first"] == "OK" and out["after"] == "OK"
    cut = out["cut"]["error"]
    assert cut["code"] == "INTERNAL_ERROR" and "was not run" in cut["message"]
    assert out["bumps_after_cut"] == 1  # the refused mutation did not run
    lines = (tmp_path / "audit.jsonl").read_text().split("\n")
    assert lines[-1] == ""
    parsed = []
    for line in lines[:-1]:
        try:
            parsed.append(json.loads(line))
        except ValueError:
            parsed.append(None)  # the fragment the cut write left, on a line of its own
    assert parsed.count(None) == 1
    outcomes = [p["outcome"] for p in parsed if p is not None]
    assert outcomes == ["STARTED", "OK", "STARTED", "OK"]


class _SlowChange:
    def __init__(self) -> None:
        self.running = anyio.Event()

    @hookimpl
    def register_tools(self, register: Any) -> None:
        class In(BaseModel):
            model_config = ConfigDict(extra="forbid")

        async def change(args: In, ctx: object) -> dict[str, Any]:
            self.running.set()
            await anyio.sleep(10)
            return {}

        register(
            ToolSpec(
                name="change",
                description="d",
                input_model=In,
                handler=change,
                tier="mutation",
                mutation=Mutation(
                    consequence="changes",
                    requires="nothing",
                    reversible=True,
                    destructive=False,
                    idempotent=True,
                ),
            )
        )


@pytest.mark.anyio
async def test_a_cancelled_mutation_records_cancelled_not_only_started(tmp_path):
    slow = _SlowChange()
    gw = make_gateway(objects={"p": slow}, entry_points=False, cwd=tmp_path)
    async with gw:
        # Cancelled 0.3 s after the handler began (not after the call was made: the first
        # call of a tool builds its model, which takes longer on a loaded machine).
        with anyio.CancelScope() as scope:
            async with anyio.create_task_group() as tg:
                tg.start_soon(gw.call, "change")
                await slow.running.wait()
                await anyio.sleep(0.3)
                scope.cancel()
    assert scope.cancelled_caught
    lines = [json.loads(x) for x in (tmp_path / "audit.jsonl").read_text().splitlines()]
    assert [x["outcome"] for x in lines] == ["STARTED", "CANCELLED"]
    assert lines[0]["correlation_id"] == lines[1]["correlation_id"]
    assert lines[1]["duration_ms"] >= 300
