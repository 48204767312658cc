"""Isolated plugins (issue 39): what a plugin in a worker process costs, and what it spares.

    .venv/bin/python bench/isolation_bench.py latency   # ~1 minute
    .venv/bin/python bench/isolation_bench.py blocked   # ~1 minute
    .venv/bin/python bench/isolation_bench.py startup   # ~4 minutes
    .venv/bin/python bench/isolation_bench.py memory    # ~30 s

``latency``: one ``tools/call`` (``echo_0`` of the generated trivial plugin of the core
benchmarks, ``{x}`` → ``{y: x + 1}``) three ways, from a raw JSON-RPC client over stdio: the
bare SDK server; ``mcp-gateway serve`` with the plugin in its process; the same with the plugin
in a worker (``MCP_GATEWAY_ISOLATE=bench_trivial``). One call each per round, order rotated.
Target: the worker's median added latency over in process ≤ 1 ms.

``blocked``: the gateway with the trivial plugin in its process and a second generated plugin
in a worker whose tool blocks its event loop (``time.sleep``); the trivial plugin's calls
before, during and after such a call. Target: their median while the worker is blocked within
10 % of the median without.

``startup``: spawn → the handshake → ``tools/list`` response, both stdio protocols, for the
bare server (listing as many tools), the deployment (the five first-party plugins in process),
the deployment plus the trivial plugin as a third-party plugin (in a worker, the default), and
everything in workers (``isolate = all``). Target: the one isolated plugin ≤ 1.15 x bare.

``memory``: each worker's resident memory once idle, as ``gateway_status`` reports it, with
every plugin in a worker; and the gateway's own. Figures go to ``bench/results/isolation.md``.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time
from dataclasses import dataclass
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import core_bench as cb
import core_common as c

RESULTS = c.BENCH / "results" / "isolation.md"
LATENCY_TARGET_MS = 1.0
BLOCKED_TARGET = 1.10
BLOCK_SECONDS = 2.0
STARTUP_TARGET = 1.15

BLOCKER_MODULE = "gw_bench_blocker"
BLOCKER_SOURCE = '''"""Benchmark plugin: a tool that blocks its event loop (generated)."""

from __future__ import annotations

import time
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from gateway import Tier, ToolSpec, hookimpl


class BlockArgs(BaseModel):
    model_config = ConfigDict(extra="forbid")
    seconds: float = Field(ge=0, le=120)


async def block(args: BlockArgs, ctx: Any) -> dict[str, Any]:
    time.sleep(args.seconds)
    return {"slept": args.seconds}


@hookimpl
def register_tools(register: Any) -> None:
    register(ToolSpec(name="block", description="Block.", input_model=BlockArgs, handler=block,
                      tier=Tier.READ, timeout=120))
'''


def log(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


#: The blocking plugin's own folder: on PYTHONPATH only where it is measured.
BLOCKER_DIR = c.WORK / "blocker"


def write_blocker() -> None:
    BLOCKER_DIR.mkdir(parents=True, exist_ok=True)
    (BLOCKER_DIR / f"{BLOCKER_MODULE}.py").write_text(BLOCKER_SOURCE)
    info = BLOCKER_DIR / f"{BLOCKER_MODULE}-0.0.0.dist-info"
    info.mkdir(exist_ok=True)
    (info / "METADATA").write_text(
        "Metadata-Version: 2.1\nName: gw-bench-blocker\nVersion: 0.0.0\nSummary: blocks\n"
    )
    (info / "entry_points.txt").write_text(
        f"[mcp_gateway.plugins]\nbench_blocker = {BLOCKER_MODULE}\n"
    )


@dataclass(frozen=True)
class Setup:
    """A server to start: what the core benchmarks' ``Target`` is, with any environment."""

    label: str
    kind: str
    env_extra: tuple[tuple[str, str], ...] = ()
    deployment: bool = False
    plugin: bool = True  # the generated plugins' folder on PYTHONPATH

    @property
    def is_gateway(self) -> bool:
        return self.kind != "bare"

    def env(self, tools: int) -> dict[str, str]:
        env = {
            k: v
            for k, v in os.environ.items()
            if not k.startswith(("MCP_GATEWAY_", "PYTHON", "XDG_CACHE_HOME"))
            and k not in (c.TOOLS_ENV, *c.DEPLOYMENT_ENV)
        }
        env["XDG_CACHE_HOME"] = str(c.CACHE_DIR)
        if self.plugin:
            env["PYTHONPATH"] = str(c.PLUGIN_DIR)
        if self.is_gateway:
            env[c.TOOLS_ENV] = str(tools)
            if self.deployment:
                env.update(c.DEPLOYMENT_ENV)
        env.update(self.env_extra)
        return env

    def stdio_argv(self, tools: int, python_flags: tuple[str, ...] = ()) -> list[str]:
        return c.Target(self.label, self.kind).stdio_argv(tools, python_flags)


def alternate(i: int, items: list[str]) -> list[str]:
    k = i % len(items)
    return items[k:] + items[:k]


def listed(proc: c.StdioProc, req: int = 1) -> list[str]:
    resp, _ = proc.request({"jsonrpc": "2.0", "id": req, "method": "tools/list"}, timeout=120)
    return [t["name"] for t in resp["result"]["tools"]]


# --- per call -----------------------------------------------------------------------------------


def latency(args: argparse.Namespace) -> str:
    machine = c.Machine()
    setups = {
        "bare": Setup("bare SDK server", "bare"),
        "in process": Setup(
            "gateway, plugin in process",
            "gateway",
            (("MCP_GATEWAY_PLUGINS", c.PLUGIN_NAME), ("MCP_GATEWAY_ISOLATE", "none")),
        ),
        "worker": Setup(
            "gateway, plugin in a worker",
            "gateway",
            (("MCP_GATEWAY_PLUGINS", c.PLUGIN_NAME), ("MCP_GATEWAY_ISOLATE", c.PLUGIN_NAME)),
        ),
    }
    procs = {
        n: c.StdioProc(s.stdio_argv(1), s.env(1), f"iso-lat-{i}")
        for i, (n, s) in enumerate(setups.items())
    }
    times: dict[str, list[float]] = {n: [] for n in procs}
    try:
        for proc in procs.values():
            proc.handshake()
            assert "echo_0" in listed(proc)
        for i in range(args.warmup + args.calls):
            for name in alternate(i, list(procs)):
                t0 = time.perf_counter_ns()
                resp, _ = procs[name].request(c.call_msg(1000 + i, "echo_0", i))
                elapsed = time.perf_counter_ns() - t0
                c.check_echo(resp, i)
                if i >= args.warmup:
                    times[name].append(elapsed)
    finally:
        for proc in procs.values():
            proc.close()
    med = {n: statistics.median(v) for n, v in times.items()}
    added = (med["worker"] - med["in process"]) / 1e6
    ok = added <= LATENCY_TARGET_MS
    rows = "\n".join(
        f"| {setups[n].label} | {c.fmt_us(med[n])} | {c.fmt_us(c.percentile(v, 95))} |"
        for n, v in times.items()
    )
    return (
        "## Latency: a call of a plugin in a worker against the same plugin in process\n\n"
        + c.facts_line(
            f".venv/bin/python bench/isolation_bench.py latency --calls {args.calls}", machine
        )
        + f"- {args.calls} calls each after {args.warmup} warm-up calls, one per setup per "
        "round, order rotated every round; raw JSON-RPC client over pipes; every answer "
        "checked\n\n"
        "| path | median µs | p95 µs |\n|---|---:|---:|\n"
        + rows
        + f"\n\n**Target** a worker's median added latency over in process ≤ "
        f"{LATENCY_TARGET_MS:g} ms: {c.fmt_us(med['worker'])} - {c.fmt_us(med['in process'])} "
        f"µs = +{added:.3f} ms → **{c.verdict(ok)}**\n"
    )


def blocked(args: argparse.Namespace) -> str:
    machine = c.Machine()
    write_blocker()
    setup = Setup(
        "gateway",
        "gateway",
        (
            ("MCP_GATEWAY_PLUGINS", f"{c.PLUGIN_NAME},bench_blocker"),
            ("MCP_GATEWAY_ISOLATE", "bench_blocker"),
            ("PYTHONPATH", os.pathsep.join([str(c.PLUGIN_DIR), str(BLOCKER_DIR)])),
        ),
    )
    proc = c.StdioProc(setup.stdio_argv(1), setup.env(1), "iso-blocked")
    phases: dict[str, list[float]] = {"normal": [], "blocked": []}
    req = 10
    per_round = max(1, args.calls // args.rounds)
    try:
        proc.handshake()
        assert {"echo_0", "block"} <= set(listed(proc))
        for i in range(args.warmup):
            req += 1
            proc.request(c.call_msg(req, "echo_0", i))
        for r in range(args.rounds):
            for phase in ("normal", "blocked") if r % 2 == 0 else ("blocked", "normal"):
                if phase == "blocked":
                    block = {"name": "block", "arguments": {"seconds": BLOCK_SECONDS}}
                    params = {"jsonrpc": "2.0", "id": 5 + r, "method": "tools/call"}
                    proc.send({**params, "params": block})
                    time.sleep(0.2)  # the worker's loop is blocked from here on
                    until = time.monotonic() + BLOCK_SECONDS - 0.2
                for i in range(per_round):
                    req += 1
                    t0 = time.perf_counter_ns()
                    resp, _ = proc.request(c.call_msg(req, "echo_0", i))
                    phases[phase].append(time.perf_counter_ns() - t0)
                    c.check_echo(resp, i)
                if phase == "blocked":
                    assert time.monotonic() < until, "the calls outlasted the block"
                    time.sleep(max(0.0, until - time.monotonic()) + 0.3)  # it ends
    finally:
        proc.close()
    normal = statistics.median(phases["normal"])
    during = statistics.median(phases["blocked"])
    r = during / normal
    ok = r <= BLOCKED_TARGET
    rows = "\n".join(
        f"| {name} | {len(v)} | {c.fmt_us(statistics.median(v))} | "
        f"{c.fmt_us(c.percentile(v, 95))} |"
        for name, v in phases.items()
    )
    return (
        "## Another plugin's calls while a worker is blocked\n\n"
        + c.facts_line(
            f".venv/bin/python bench/isolation_bench.py blocked --calls {args.calls}", machine
        )
        + f"- `echo_0` of the trivial plugin (in process), in {args.rounds} rounds of "
        f"{per_round} calls without and {per_round} calls with a call of `block` running (the "
        f"other plugin, in a worker, holds its worker's event loop in `time.sleep` for "
        f"{BLOCK_SECONDS:g} s), the order of the two alternated by round; raw JSON-RPC client "
        "over pipes\n\n"
        "| phase | calls | median µs | p95 µs |\n|---|---:|---:|---:|\n"
        + rows
        + f"\n\n**Target** the median during a block within 10 % of the median without: "
        f"{c.fmt_us(during)} / {c.fmt_us(normal)} µs = {r:.3f} x → **{c.verdict(ok)}**\n"
    )


# --- start-up and memory ------------------------------------------------------------------------


def startup(args: argparse.Namespace) -> str:
    machine = c.Machine()
    cb.compile_sources()
    deployed = (
        Setup(
            "gateway, the five first-party plugins in process",
            "gateway",
            deployment=True,
            plugin=False,
        ),
        Setup("the same and a third-party plugin in a worker", "gateway-one", deployment=True),
        Setup(
            "every plugin in a worker (isolate = all)",
            "gateway-all",
            (("MCP_GATEWAY_ISOLATE", "all"),),
            deployment=True,
        ),
    )
    tools = args.tools
    counts: dict[str, int] = {}
    for setup in deployed:  # one unmeasured start each: the schema cache, the page cache
        _, counts[setup.kind], _ = cb.cold_once(setup, tools, f"iso-warm-{setup.kind}")
    bare = Setup("bare SDK server", "bare")
    out = [
        "## Start-up with plugins in workers\n\n",
        c.facts_line(
            f".venv/bin/python bench/isolation_bench.py startup --runs {args.runs}", machine
        ),
        f"- {args.runs} starts of each, alternated (rotated order), after one unmeasured start "
        "each; raw JSON-RPC client; spawn → the handshake → the `tools/list` response (the "
        "gateway's first listing waits until its workers loaded). The third-party plugin is the "
        f"core benchmarks' generated one ({tools} trivial tools, its own distribution on "
        "`PYTHONPATH`, so in a worker by default); the bare server lists as many tools as the "
        "deployment with it, with the same `PYTHONPATH`. Sources byte-compiled first.\n\n",
    ]
    verdicts = []
    for protocol, handshake in cb.HANDSHAKES.items():
        kinds = [bare, *deployed]
        times: dict[str, list[float]] = {s.kind: [] for s in kinds}
        counts["bare"] = counts["gateway-one"]
        for i in range(args.runs):
            for setup in (kinds[(j + i) % len(kinds)] for j in range(len(kinds))):
                n = counts["bare"] if setup.kind == "bare" else tools
                ns, listed_n, _ = cb.cold_once(setup, n, f"iso-{protocol}-{i}", protocol)
                times[setup.kind].append(ns)
                if setup.kind != "bare":
                    assert listed_n == counts[setup.kind], (setup.kind, listed_n)
        med = {k: c.median(v) for k, v in times.items()}
        one = med["gateway-one"] / med["bare"]
        ok = one <= STARTUP_TARGET
        verdicts.append(ok)
        out.append(f"Protocol {protocol}: {handshake}\n\n")
        out.append("| server | tools | min ms | median ms | max ms | x bare |\n")
        out.append("|---|---:|---:|---:|---:|---:|\n")
        for setup in kinds:
            v = times[setup.kind]
            out.append(
                f"| {setup.label} | {counts[setup.kind]} | {c.fmt_ms(min(v))} | "
                f"{c.fmt_ms(med[setup.kind])} | {c.fmt_ms(max(v))} | "
                f"{med[setup.kind] / med['bare']:.3f} |\n"
            )
        out.append(
            f"\n**Target** the five in process and one third-party plugin in a worker ≤ "
            f"{STARTUP_TARGET} x bare: {c.fmt_ms(med['gateway-one'])} / {c.fmt_ms(med['bare'])} "
            f"ms = {one:.3f} x → **{c.verdict(ok)}**; everything in workers: "
            f"{med['gateway-all'] / med['bare']:.3f} x (informational)\n\n"
        )
    return "".join(out)


def memory(args: argparse.Namespace) -> str:
    machine = c.Machine()
    setup = Setup("gateway", "gateway", (("MCP_GATEWAY_ISOLATE", "all"),), deployment=True)
    proc = c.StdioProc(setup.stdio_argv(args.tools), setup.env(args.tools), "iso-memory")
    try:
        proc.handshake()
        listed(proc)
        time.sleep(2.0)  # idle
        resp, _ = proc.request(
            {
                "jsonrpc": "2.0",
                "id": 2,
                "method": "tools/call",
                "params": {"name": "gateway_status", "arguments": {"check_health": False}},
            }
        )
        status = json.loads(resp["result"]["content"][0]["text"])
        gateway_kb = _rss_kb(proc.proc.pid)
    finally:
        proc.close()
    rows = []
    for p in status["plugins"]:
        if p.get("runs") == "worker" and p["state"] == "loaded":
            worker = p.get("worker") or {}
            rows.append(f"| {p['name']} | {p['tool_count']} | {worker.get('memory_mb', '?')} |")
    total = sum(
        float((p.get("worker") or {}).get("memory_mb") or 0)
        for p in status["plugins"]
        if p.get("runs") == "worker"
    )
    return (
        "## Memory of idle workers\n\n"
        + c.facts_line(".venv/bin/python bench/isolation_bench.py memory", machine)
        + "- The deployment with every plugin in a worker (`isolate = all`; the servers plugin "
        "stays in process) and the third-party trivial plugin, idle 2 s after its first "
        "listing; each worker's resident memory (`VmRSS`) as `gateway_status` reports it\n\n"
        "| plugin (in a worker) | tools | resident MB |\n|---|---:|---:|\n"
        + "\n".join(rows)
        + f"\n\nWorkers together: {total:.0f} MB; the gateway's own process: "
        f"{gateway_kb / 1024:.0f} MB\n"
    )


def _rss_kb(pid: int) -> float:
    with open(f"/proc/{pid}/status", encoding="ascii") as fh:
        for line in fh:
            if line.startswith("VmRSS:"):
                return float(line.split()[1])
    return float("nan")


def write(body: str) -> None:
    RESULTS.parent.mkdir(parents=True, exist_ok=True)
    sections: dict[str, str] = {}
    if RESULTS.exists():
        current = None
        for line in RESULTS.read_text().splitlines(keepends=True):
            if line.startswith("## "):
                current = line
                sections[current] = ""
            if current is not None:
                sections[current] += line
    sections[body.splitlines(keepends=True)[0]] = body
    RESULTS.write_text(
        "# Plugins in workers: benchmarks (issue 39)\n\n"
        "Written by `bench/isolation_bench.py`; each section can be rerun on its own.\n\n"
        + "\n".join(s.rstrip("\n") + "\n" for s in sections.values())
    )


def main() -> int:
    parser = argparse.ArgumentParser()
    sub = parser.add_subparsers(dest="command", required=True)
    for name, calls in (("latency", 1000), ("blocked", 1000)):
        p = sub.add_parser(name)
        p.add_argument("--calls", type=int, default=calls)
        p.add_argument("--warmup", type=int, default=100)
        p.add_argument("--rounds", type=int, default=10)
    st = sub.add_parser("startup")
    st.add_argument("--runs", type=int, default=10)
    st.add_argument("--tools", type=int, default=10)
    mem = sub.add_parser("memory")
    mem.add_argument("--tools", type=int, default=10)
    args = parser.parse_args()
    for d in (c.WORK, c.LOG_DIR, c.RUN_DIR):
        d.mkdir(parents=True, exist_ok=True)
    c.write_plugin()
    run = {"latency": latency, "blocked": blocked, "startup": startup, "memory": memory}
    body = run[args.command](args)
    print(body)
    write(body)
    return 0 if "**MISS**" not in body else 1


if __name__ == "__main__":
    raise SystemExit(main())
