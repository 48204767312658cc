"""Gateway core vs a bare low-level ``mcp`` server: cold start, stdio latency, HTTP throughput,
what OAuth adds to an HTTP call, ``tools/list`` size. Figures go to ``bench/results/core.md``
(one section per subcommand).

    .venv/bin/python bench/core_bench.py all         # everything, ~6 minutes
    .venv/bin/python bench/core_bench.py cold        # or: imports, startprofile, latency, http,
                                                     #     http-auth, listsize

Targets (from the issues): cold start median ≤ 1.15 x bare; stdio call median ≤ 1.2 x bare;
stateless Streamable HTTP throughput ≥ 0.85 x bare; checking an OAuth access token (JWKS
cached) adds ≤ 0.3 ms per call under that load. Only 127.0.0.1 is used; generated files live
in ``bench/.work/`` (git-ignored). Exit status 1 if a target is missed.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import re
import shutil
import subprocess
import sys
import time
from collections import defaultdict
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

import core_common as c

COLD_TARGET = 1.15
LATENCY_TARGET = 1.2
HTTP_TARGET = 0.85
AUTH_TARGET_MS = 0.3


def rerun(sub: str, **opts: Any) -> str:
    flags = " ".join(f"--{k.replace('_', '-')} {v}" for k, v in opts.items())
    return f".venv/bin/python bench/core_bench.py {sub} {flags}".rstrip()


def log(msg: str) -> None:
    print(msg, file=sys.stderr, flush=True)


TOOLS_LIST = {"jsonrpc": "2.0", "id": 1, "method": "tools/list"}


# --- cold start ---------------------------------------------------------------------------


def cold_once(
    target: c.Target, tools: int, tag: str, protocol: str = c.PROTOCOL
) -> tuple[float, int, float]:
    """Spawn → the handshake → tools/list response, in ns; the tool count; and the server's CPU
    seconds over its whole life (start, handshake, list, shutdown). The handshake of
    ``protocol``: ``initialize`` and ``notifications/initialized`` (2025), or
    ``server/discover`` (2026-07-28, what Claude Code sends)."""
    p = c.spawn_stdio(target, tools, tag)
    try:
        if protocol == c.MODERN:
            p.send(c.modern(0, "server/discover"))
            first, _ = p.recv(0)
            p.send(c.modern(1, "tools/list"))
        else:
            p.send(c.initialize_msg(0))
            first, _ = p.recv(0)
            p.send(c.INITIALIZED)
            p.send(TOOLS_LIST)
        if "error" in first:
            raise RuntimeError(f"{target.label}: the handshake failed: {first['error']}")
        resp, _ = p.recv(1)
        elapsed = time.perf_counter_ns() - p.started_ns
    finally:
        p.close()
    if "error" in resp:
        raise RuntimeError(f"{target.label}: tools/list failed: {resp['error']}")
    return elapsed, len(resp["result"]["tools"]), p.cpu_seconds or float("nan")


def python_floor(runs: int) -> list[float]:
    out = []
    for _ in range(runs):
        t0 = time.perf_counter_ns()
        subprocess.run([c.PY, "-c", "pass"], check=True, cwd=c.RUN_DIR)
        out.append(time.perf_counter_ns() - t0)
    return out


def cold_series(
    targets: tuple[c.Target, ...],
    tools: dict[str, int],
    runs: int,
    tag: str,
    protocol: str = c.PROTOCOL,
) -> tuple[dict[str, list[float]], dict[str, list[float]], dict[str, int]]:
    """``runs`` cold starts of each target, alternated (A B C, C B A, …: none always pays the
    colder cache), after one discarded run each (page cache, ``.pyc`` files, schema cache)."""
    for target in targets:
        cold_once(target, tools[target.kind], f"{tag}-warmup", protocol)
    times: dict[str, list[float]] = {t.kind: [] for t in targets}
    cpu: dict[str, list[float]] = {t.kind: [] for t in targets}
    counts: dict[str, int] = {}
    for i in range(runs):
        for target in c.alternating(i, targets):
            ns, n, cpu_s = cold_once(target, tools[target.kind], f"{tag}-{i}", protocol)
            times[target.kind].append(ns)
            cpu[target.kind].append(cpu_s * 1e9)
            counts[target.kind] = n
    return times, cpu, counts


def deployed_plugins() -> list[str]:
    """``name version`` of every plugin the deployment loads (``mcp-gateway plugins --json``)."""
    target = c.DEPLOYED[1]
    proc = subprocess.run(
        [c.PY, "-m", "gateway.cli", "plugins", "--json"],
        capture_output=True,
        text=True,
        env=target.env(0),
        cwd=c.RUN_DIR,
        timeout=120,
        check=True,
    )
    return [
        f"{p['name']} {p['version']}"
        for p in json.loads(proc.stdout)
        if p["state"] == "loaded" and p["name"] != "gateway"  # the built-in: always there
    ]


_COMPILE = """
import compileall, importlib.metadata as md, importlib.util, sys
tops = {"gateway"} | {ep.module.split(".")[0] for ep in md.entry_points(group="mcp_gateway.plugins")}
for top in sorted(tops):
    spec = importlib.util.find_spec(top)
    for where in (spec.submodule_search_locations or []) if spec else []:
        compileall.compile_dir(where, quiet=1)
"""


def compile_sources() -> None:
    """Byte-compile the gateway and every plugin it finds, as pip does when it installs a wheel.

    A checkout imports them from source; where ``PYTHONDONTWRITEBYTECODE`` is set (this
    machine sets it) no ``.pyc`` is ever written, so every start would compile ~100 modules
    that a deployment from wheels never compiles, while the bare server's SDK, installed by
    pip, is compiled already."""
    for target in (c.DEPLOYED[1], c.GATEWAY):
        subprocess.run(
            [c.PY, "-c", _COMPILE], env=target.env(0), cwd=c.RUN_DIR, timeout=300, check=True
        )


def cold_rows(
    targets: tuple[c.Target, ...],
    times: dict[str, list[float]],
    cpu: dict[str, list[float]],
    counts: dict[str, int],
) -> list[str]:
    return [
        f"| {t.label} ({counts[t.kind]} tools listed) | {c.fmt_ms(min(times[t.kind]))} | "
        f"{c.fmt_ms(c.median(times[t.kind]))} | {c.fmt_ms(max(times[t.kind]))} | "
        f"{c.fmt_ms(c.median(cpu[t.kind]))} | {' '.join(c.fmt_ms(x) for x in times[t.kind])} |"
        for t in targets
    ]


COLD_HEADER = (
    "| server | min ms | median ms | max ms | median CPU ms | runs (ms, in order) |\n"
    "|---|---|---|---|---|---|\n"
)


#: The handshakes measured, and what each is.
HANDSHAKES = {
    c.PROTOCOL: "`initialize` → `initialized` → `tools/list`",
    c.MODERN: "`server/discover` → `tools/list` (what Claude Code sends)",
}


def deployment_section(
    protocol: str, runs: int, deployed_tools: int, plugins: list[str]
) -> tuple[bool, str, float]:
    """The deployment's cold starts in ``protocol``: whether the target was met, the text, and
    the gateway's median CPU time over the bare server's."""
    deployed = (*c.DEPLOYED, c.GATEWAY_NO_CACHE, c.BARE_GC_PAUSED)
    tools = {t.kind: 0 if t.is_gateway else deployed_tools for t in deployed}
    times, cpu, counts = cold_series(deployed, tools, runs, f"cold-{protocol}", protocol)
    med = {k: c.median(v) for k, v in times.items()}
    r = c.ratio(med["gateway"], med["bare"])
    off = c.ratio(med["gateway-no-cache"], med["bare"])
    gc_r = c.ratio(med["gateway"], med["bare-gc"])
    cpu_r = c.ratio(c.median(cpu["gateway"]), c.median(cpu["bare"]))
    ok = r <= COLD_TARGET
    text = (
        f"Protocol {protocol}: {HANDSHAKES[protocol]}\n\n"
        + COLD_HEADER
        + "\n".join(cold_rows(deployed, times, cpu, counts))
        + f"\n\n**Target** cold start with every installed plugin ({counts['gateway']} tools from "
        f"{', '.join(p.split()[0] for p in plugins)}), protocol {protocol}, median ≤ "
        f"{COLD_TARGET} x bare: {c.fmt_ms(med['gateway'])} / {c.fmt_ms(med['bare'])} ms = "
        f"{r:.3f} x → **{c.verdict(ok)}**\n\n"
        f"Informational: with the schema cache off {c.fmt_ms(med['gateway-no-cache'])} / "
        f"{c.fmt_ms(med['bare'])} ms = {off:.3f} x; like for like against the bare server also "
        f"started with the collector paused {gc_r:.3f} x; CPU time gateway / bare {cpu_r:.2f} x.\n"
    )
    return ok, text, cpu_r


def bench_cold(args: argparse.Namespace) -> bool:
    load = c.Machine()
    plugins = deployed_plugins()
    shutil.rmtree(c.CACHE_DIR, ignore_errors=True)
    compile_sources()
    _, deployed_tools, _ = cold_once(c.DEPLOYED[1], 0, "cold-probe")
    log(
        f"cold start: {args.runs} runs each, alternated; deployment: {deployed_tools} tools from "
        f"{', '.join(plugins)}; core: N={args.tools}"
    )
    sections = [
        deployment_section(protocol, args.runs, deployed_tools, plugins) for protocol in HANDSHAKES
    ]
    times, cpu, counts = cold_series(
        c.TARGETS, {"bare": args.tools, "gateway": args.tools}, args.runs, "cold"
    )
    floor = python_floor(args.runs)
    med = {k: c.median(v) for k, v in times.items()}
    r = c.ratio(med["gateway"], med["bare"])
    ok = r <= COLD_TARGET
    floor_row = (
        f"| `python -c pass` (floor) | {c.fmt_ms(min(floor))} | {c.fmt_ms(c.median(floor))} | "
        f"{c.fmt_ms(max(floor))} | | {' '.join(c.fmt_ms(x) for x in floor)} |"
    )
    cpu_ratio = c.ratio(c.median(cpu["gateway"]), c.median(cpu["bare"]))
    body = (
        "## Cold start (stdio): spawn → the handshake → `tools/list` response\n\n"
        + c.facts_line(rerun("cold", runs=args.runs, tools=args.tools), load)
        + f"- Method: raw JSON-RPC client on the pipes, in both protocols (the 2025 handshake, "
        f"{c.PROTOCOL}; and the stateless {c.MODERN}, opened with `server/discover` as Claude Code "
        f"does), {args.runs} runs each, alternated (A B C D, then D C B A, …), after one discarded "
        "run each (it also writes the gateway's schema cache in `bench/.work/cache`, as a "
        "deployment's first start does; every later start reads it, see "
        "`gateway/schemacache.py`). The gateway's and the plugins' sources are byte-compiled "
        "first, as pip compiles a wheel it installs (the SDK the bare server imports is): an "
        "editable checkout under `PYTHONDONTWRITEBYTECODE` would otherwise compile every module "
        "at every start.\n"
        f"- **Deployment**: `mcp-gateway serve` (the venv's console script, the command `claude-config` gives Claude Code): every "
        f"installed plugin ({', '.join(plugins)}; and the built-in `gateway_status`), "
        f"`COCKPIT_API_URL` and `GITEA_URL` set (never contacted while starting), "
        f"{deployed_tools} tools; the bare server lists as many trivial tools. Every start "
        "imports the plugins and lists what they publish.\n"
        f"- **Core only**: the gateway with `MCP_GATEWAY_PLUGINS=bench_trivial` (N = {args.tools} "
        f"generated echo tools, plus `gateway_status`), protocol {c.PROTOCOL}: what the core "
        "itself costs.\n\n"
        "`serve` pauses the garbage collector while it starts (`gateway/cli.py`), which also "
        "speeds up the SDK import the bare server pays with the collector on; the bare server "
        "started the same way is measured too (informational).\n\n"
        + "\n".join(text for _, text, _ in sections)
        + "\nCore only:\n\n"
        + COLD_HEADER
        + "\n".join([*cold_rows(c.TARGETS, times, cpu, counts), floor_row])
        + f"\n\n**Target** cold start, core only (trivial plugin, {counts['gateway']} tools), "
        f"median ≤ {COLD_TARGET} x bare: {c.fmt_ms(med['gateway'])} / {c.fmt_ms(med['bare'])} ms "
        f"= {r:.3f} x → **{c.verdict(ok)}**\n"
        "\nCross-check, less sensitive to how much CPU the shared machine left the servers "
        "(CPU time still inflates somewhat under contention): CPU time (user + system, whole "
        "process life incl. shutdown), gateway / bare = "
        + ", ".join(f"{cpu_r:.2f} x" for _, _, cpu_r in sections)
        + f" (deployment, by protocol), {cpu_ratio:.2f} x (core only) (medians; informational, "
        "the target is on wall time).\n"
    )
    c.write_section("cold", body)
    log(body)
    return ok and all(ok_p for ok_p, _, _ in sections)


# --- import time ----------------------------------------------------------------------------


@dataclass
class ImportRow:
    name: str
    self_us: int
    cum_us: int
    level: int
    parent: str | None = None


def parse_importtime(text: str) -> dict[str, ImportRow]:
    """``-X importtime`` lines → rows with their importer (post-order: children come first)."""
    rows: list[ImportRow] = []
    pending: dict[int, list[ImportRow]] = defaultdict(list)
    for line in text.splitlines():
        if not line.startswith("import time:") or "self [us]" in line:
            continue
        parts = line[len("import time:") :].split("|")
        if len(parts) != 3:
            continue
        raw = parts[2]
        name = raw.strip()
        level = (len(raw) - len(raw.lstrip()) - 1) // 2
        row = ImportRow(name, int(parts[0]), int(parts[1]), level)
        for child in pending.pop(level + 1, []):
            child.parent = name
        pending[level].append(row)
        rows.append(row)
    return {r.name: r for r in rows}


def importtime_run(target: c.Target, tools: int, tag: str) -> dict[str, ImportRow]:
    err = c.LOG_DIR / f"{target.kind}-{tag}.importtime"
    p = c.StdioProc(
        target.stdio_argv(tools, ["-X", "importtime"]), target.env(tools), tag, stderr_path=err
    )
    try:
        p.handshake()
        p.request(TOOLS_LIST)
    finally:
        p.close()
    return parse_importtime(err.read_text(encoding="utf-8", errors="replace"))


PHASES_SCRIPT = """
import json, time
t0 = time.perf_counter()
import mcp.server, mcp.server.stdio
t1 = time.perf_counter()
import gateway.cli, gateway.app, gateway.server
t2 = time.perf_counter()
cfg = gateway.config.load_config()
t3 = time.perf_counter()
gw = gateway.app.build_gateway(cfg)
t4 = time.perf_counter()
gateway.server.build_server(gw)
t5 = time.perf_counter()
print(json.dumps({"sdk": t1 - t0, "gateway_modules": t2 - t1, "load_config": t3 - t2,
                  "build_gateway": t4 - t3, "build_server": t5 - t4,
                  "tools": len(gw.visible_tools())}))
"""
PHASE_LABELS = {
    "sdk": "`import mcp.server, mcp.server.stdio` (the bare server pays this too)",
    "gateway_modules": "import `gateway.cli`, `gateway.app`, `gateway.server` after the SDK",
    "load_config": "`load_config()`",
    "build_gateway": "`build_gateway()`: entry-point scan, plugin import, settings, tool schemas",
    "build_server": "`build_server()`: the MCP tool list",
}


def gateway_phases(tools: int, runs: int) -> str:
    """Where the gateway's extra start-up time goes, timed in a fresh interpreter per run."""
    samples: dict[str, list[float]] = defaultdict(list)
    for _ in range(runs):
        proc = subprocess.run(
            [c.PY, "-c", PHASES_SCRIPT],
            capture_output=True,
            text=True,
            env=c.GATEWAY.env(tools),
            cwd=c.RUN_DIR,
            timeout=60,
        )
        if proc.returncode != 0:
            tail = proc.stderr.strip().splitlines()[-1:] or ["no output"]
            return (
                f"(phase timing failed: {tail[0][:200]}; the gateway's internals may have moved)\n"
            )
        for k, v in json.loads(proc.stdout).items():
            samples[k].append(v)
    rows = "\n".join(
        f"| {label} | {c.median(samples[k]) * 1000:.1f} |" for k, label in PHASE_LABELS.items()
    )
    return (
        f"Gateway start-up phases in a fresh interpreter ({runs} runs, medians; "
        f"{c.median(samples['tools']):.0f} tools):\n\n| phase | ms |\n|---|---|\n" + rows + "\n"
    )


#: Where a deployment's start goes, in a fresh interpreter started as ``serve`` starts (the
#: collector paused): each phase timed, the plugins' imports and their tools' definitions (the
#: schemas, of which the models' fingerprints that key the schema cache) measured inside
#: ``build_gateway``; with ``profile``, ``build_gateway`` under cProfile, own time by package.
START_SCRIPT = """
import cProfile, gc, json, os, pstats, sys, time
from collections import defaultdict
gc.disable()
t0 = time.perf_counter()
import mcp.server, mcp.server.stdio
t1 = time.perf_counter()
import gateway.cli, gateway.app, gateway.server
t2 = time.perf_counter()
import importlib.metadata as md
import gateway.plugins as plugins, gateway.schemacache as schemacache
spent = defaultdict(float)
def timed(owner, name, key):
    inner = getattr(owner, name)
    def wrapper(*args, **kwargs):
        start = time.perf_counter()
        try:
            return inner(*args, **kwargs)
        finally:
            spent[key] += time.perf_counter() - start
    setattr(owner, name, wrapper)
timed(md.EntryPoint, "load", "plugin_imports")
timed(plugins, "build_tool", "tools")
timed(schemacache, "fingerprint", "fingerprints")
cfg = gateway.config.load_config()
t3 = time.perf_counter()
profile = cProfile.Profile() if sys.argv[1:] == ["profile"] else None
if profile: profile.enable()
gw = gateway.app.build_gateway(cfg)
if profile: profile.disable()
t4 = time.perf_counter()
gateway.server.build_server(gw)
t5 = time.perf_counter()
own = defaultdict(float)
if profile:
    for (file, _, func), row in pstats.Stats(profile).stats.items():
        parts = file.replace(os.sep, "/").split("/")
        if "site-packages" in parts:
            pkg = parts[parts.index("site-packages") + 1]
        elif any(p.startswith("gateway") for p in parts):
            pkg = next(p for p in reversed(parts) if p.startswith("gateway"))
        elif file == "~":
            pkg = "built-in functions (exec, compile, getattr, ...)"
        else:
            pkg = "standard library"
        own[pkg.removesuffix(".py")] += row[2]
print(json.dumps({"sdk": t1 - t0, "gateway_modules": t2 - t1, "load_config": t3 - t2,
                  "build_gateway": t4 - t3, "build_server": t5 - t4, **spent,
                  "tools_count": len(gw.visible_tools()), "own": own}))
"""
START_LABELS = {
    "sdk": "`import mcp.server, mcp.server.stdio` (the bare server pays this too)",
    "gateway_modules": "import `gateway.cli`, `gateway.app`, `gateway.server` after the SDK",
    "load_config": "`load_config()`",
    "build_gateway": "`build_gateway()`, all of it:",
    "plugin_imports": "&nbsp;&nbsp;of which the plugins' imports (their modules and models)",
    "tools": "&nbsp;&nbsp;of which their tools' definitions (schemas from the cache, annotations)",
    "fingerprints": "&nbsp;&nbsp;&nbsp;&nbsp;of which the models' fingerprints (the cache's keys)",
    "build_server": "`build_server()`: the MCP tool list",
}


def bench_startprofile(args: argparse.Namespace) -> bool:
    """Where the deployment's start goes beyond the bare server's: phases, then what it
    imports that the bare server does not (``-X importtime``), then a profile."""
    load = c.Machine()
    compile_sources()
    target = c.DEPLOYED[1]
    env = target.env(args.tools)
    samples: dict[str, list[float]] = defaultdict(list)
    own: dict[str, float] = {}
    for i in range(args.runs + 1):
        profiled = i == args.runs  # the last run under cProfile, not in the medians
        proc = subprocess.run(
            [c.PY, "-c", START_SCRIPT, *(["profile"] if profiled else [])],
            capture_output=True,
            text=True,
            env=env,
            cwd=c.RUN_DIR,
            timeout=120,
        )
        if proc.returncode != 0:
            tail = proc.stderr.strip().splitlines()[-1:] or ["no output"]
            log(f"start profile failed: {tail[0][:300]}")
            return False
        out = json.loads(proc.stdout.strip().splitlines()[-1])
        if profiled:
            own = out["own"]
            continue
        for k, v in out.items():
            if k != "own":
                samples[k].append(v)
    phase_rows = "\n".join(
        f"| {label} | {c.median(samples[k]) * 1000:.1f} |" for k, label in START_LABELS.items()
    )
    total_own = sum(own.values()) or 1.0
    own_rows = "\n".join(
        f"| `{pkg}` | {sec * 1000:.0f} | {sec / total_own * 100:.0f}% |"
        for pkg, sec in sorted(own.items(), key=lambda kv: -kv[1])[:10]
    )
    imports: dict[str, list[dict[str, ImportRow]]] = {"bare": [], "gateway": []}
    for i in range(args.runs):
        for t in c.DEPLOYED if i % 2 == 0 else c.DEPLOYED[::-1]:
            imports[t.kind].append(importtime_run(t, args.tools, f"startprofile-{i}"))

    def med_self(kind: str, name: str) -> float:
        return c.median(r[name].self_us for r in imports[kind] if name in r)

    bare_names = set().union(*(set(r) for r in imports["bare"]))
    extra = set.intersection(*(set(r) for r in imports["gateway"])) - bare_names
    by_pkg: dict[str, float] = defaultdict(float)
    count_pkg: dict[str, int] = defaultdict(int)
    for n in extra:
        by_pkg[n.split(".")[0]] += med_self("gateway", n)
        count_pkg[n.split(".")[0]] += 1
    pkg_rows = "\n".join(
        f"| `{p}` | {count_pkg[p]} | {v / 1000:.1f} |"
        for p, v in sorted(by_pkg.items(), key=lambda kv: -kv[1])[:10]
    )
    top_rows = "\n".join(
        f"| `{n}` | {med_self('gateway', n) / 1000:.1f} |"
        for n in sorted(extra, key=lambda n: -med_self("gateway", n))[:12]
    )
    body = (
        "## Where a deployment's start goes (every installed plugin)\n\n"
        + c.facts_line(rerun("startprofile", runs=args.runs, tools=args.tools), load)
        + f"- Method: the deployment of the cold-start section ({c.median(samples['tools_count']):.0f} "
        f"tools), started {args.runs} times in a fresh interpreter as `serve` starts (collector "
        "paused), each phase timed (medians); then each server under `-X importtime` through its "
        f"first `tools/list` ({args.runs} runs each, alternated), and `build_gateway()` once under "
        "cProfile. Sources byte-compiled first.\n\n"
        "| phase | ms |\n|---|---:|\n" + phase_rows + "\n\n"
        f"What the deployment imports that the bare server never does ({len(extra)} modules; "
        "self time under `-X importtime`, which inflates it), by package:\n\n"
        "| package | modules | self ms |\n|---|---:|---:|\n" + pkg_rows + "\n\n"
        "The modules with the most self time among them (their bodies: classes, models, "
        "dataclasses, patterns):\n\n| module | self ms |\n|---|---:|\n" + top_rows + "\n\n"
        "`build_gateway()` under cProfile (inflated), own time by package:\n\n"
        "| package | own ms | share |\n|---|---:|---:|\n" + own_rows + "\n"
    )
    c.write_section("startprofile", body)
    log(body)
    return True


def bench_imports(args: argparse.Namespace) -> bool:
    load = c.Machine()
    compile_sources()
    log(f"import time: {args.runs} runs each (-X importtime, through the first tools/list)")
    runs: dict[str, list[dict[str, ImportRow]]] = {t.kind: [] for t in c.TARGETS}
    for i in range(args.runs):
        for target in c.alternating(i):
            runs[target.kind].append(importtime_run(target, args.tools, f"imports-{i}"))

    def med_self(kind: str, name: str) -> float:
        return c.median(r[name].self_us for r in runs[kind] if name in r)

    def med_cum(kind: str, name: str) -> float:
        return c.median(r[name].cum_us for r in runs[kind] if name in r)

    totals = {k: c.median(sum(x.self_us for x in r.values()) for r in v) for k, v in runs.items()}
    names = {k: set().union(*(set(r) for r in v)) for k, v in runs.items()}
    # Present in every gateway run and in no bare run: what the gateway adds.
    gw_always = set.intersection(*(set(r) for r in runs["gateway"]))
    extra = sorted(gw_always - names["bare"], key=lambda n: -med_self("gateway", n))
    extra_total = sum(med_self("gateway", n) for n in extra)
    last = runs["gateway"][-1]
    by_pkg: dict[str, float] = defaultdict(float)
    count_pkg: dict[str, int] = defaultdict(int)
    for n in extra:
        by_pkg[n.split(".")[0]] += med_self("gateway", n)
        count_pkg[n.split(".")[0]] += 1

    def top_level(kind: str, limit: int = 10) -> list[str]:
        sample = runs[kind][-1]
        level0 = [r for r in sample.values() if r.level == 0]
        level0.sort(key=lambda r: -med_cum(kind, r.name))
        return [f"`{r.name}` {med_cum(kind, r.name) / 1000:.0f}" for r in level0[:limit]]

    extra_rows = "\n".join(
        f"| `{n}` | {med_self('gateway', n) / 1000:.1f} | {med_cum('gateway', n) / 1000:.1f} | "
        f"`{last[n].parent or '(top level)'}` |"
        for n in extra[:10]
    )
    pkg_rows = "\n".join(
        f"| `{p}` | {count_pkg[p]} | {v / 1000:.1f} |"
        for p, v in sorted(by_pkg.items(), key=lambda kv: -kv[1])[:10]
    )
    body = (
        "## Import cost (`python -X importtime`, process start through the first `tools/list`)\n\n"
        + c.facts_line(rerun("imports", runs=args.runs, tools=args.tools), load)
        + f"- Method: each server started under `-X importtime`, handshake + `tools/list` over stdio, "
        f"then stdin closed; {args.runs} runs each, per-module medians. `-X importtime` inflates "
        "absolute times; compare the two columns, not against the cold-start table.\n\n"
        f"| | bare | gateway |\n|---|---|---|\n"
        f"| modules imported | {len(runs['bare'][-1])} | {len(runs['gateway'][-1])} |\n"
        f"| sum of self times, ms | {totals['bare'] / 1000:.0f} | {totals['gateway'] / 1000:.0f} |\n"
        f"| top-level imports by cumulative ms | {', '.join(top_level('bare', 6))} | "
        f"{', '.join(top_level('gateway', 6))} |\n\n"
        f"**Extra modules** (imported by the gateway in every run, never by the bare server): "
        f"{len(extra)} modules, {extra_total / 1000:.0f} ms of self time "
        f"({c.ratio(extra_total, totals['bare']) * 100:.0f}% of the bare server's total).\n\n"
        "Top 10 extra modules by self time:\n\n"
        "| module | self ms | cumulative ms | imported by |\n|---|---|---|---|\n"
        + extra_rows
        + "\n\nExtra modules grouped by top-level package:\n\n"
        "| package | modules | self ms |\n|---|---|---|\n"
        + pkg_rows
        + "\n\n"
        + gateway_phases(args.tools, 5)
    )
    c.write_section("imports", body)
    log(body)
    return True


# --- per-call latency over stdio --------------------------------------------------------------


def bench_latency(args: argparse.Namespace) -> bool:
    load = c.Machine()
    log(f"stdio latency: {args.calls} calls after {args.warmup} warm-up, alternating servers")
    procs = {t.kind: c.spawn_stdio(t, args.tools, "latency") for t in c.TARGETS}
    lat: dict[str, list[float]] = {t.kind: [] for t in c.TARGETS}
    try:
        for p in procs.values():
            p.handshake()
            p.request(TOOLS_LIST)
        req_id = 10
        cpu0: dict[str, float] = {}
        for i in range(args.warmup + args.calls):
            if i == args.warmup:
                cpu0 = {kind: p.cpu_so_far() for kind, p in procs.items()}
            for kind in (t.kind for t in c.alternating(i)):
                p = procs[kind]
                req_id += 1
                msg = c.call_msg(req_id, "echo_0", i)
                t0 = time.perf_counter_ns()
                p.send(msg)
                resp, _ = p.recv(req_id)
                dt = time.perf_counter_ns() - t0
                c.check_echo(resp, i)
                if i >= args.warmup:
                    lat[kind].append(dt)
        cpu_us = {k: (p.cpu_so_far() - cpu0[k]) / args.calls * 1e6 for k, p in procs.items()}
    finally:
        for p in procs.values():
            p.close()
    rows = [latency_row(f"raw JSON-RPC client → {t.label}", lat[t.kind]) for t in c.TARGETS]
    r = c.ratio(c.median(lat["gateway"]), c.median(lat["bare"]))
    ok = r <= LATENCY_TARGET
    sdk_note = ""
    if args.sdk:
        sdk = asyncio.run(sdk_latency(args))
        rows += [latency_row(f"SDK `Client` (legacy) → {t.label}", sdk[t.kind]) for t in c.TARGETS]
        rs = c.ratio(c.median(sdk["gateway"]), c.median(sdk["bare"]))
        sdk_note = (
            f"- With the official SDK client the ratio of medians is {rs:.3f} x (informational).\n"
        )
    body = (
        "## Per-call latency over stdio (`tools/call` of `echo_0`)\n\n"
        + c.facts_line(
            rerun("latency", calls=args.calls, warmup=args.warmup, tools=args.tools)
            + ("" if args.sdk else " --no-sdk"),
            load,
        )
        + f"- Method: both servers running, calls alternate in A B, B A order (bare, gateway, then gateway, bare, …); each call is "
        f"send → wait for the response → next. {args.warmup} warm-up calls each are dropped, then "
        f"{args.calls} calls each; every response checked (`structuredContent` == `{{y: x + 1}}`, "
        "text content equal, no error).\n\n"
        "| path | median µs | p95 µs | min µs | mean µs |\n|---|---|---|---|---|\n"
        + "\n".join(rows)
        + "\n\n"
        + sdk_note
        + "- Cross-check, less sensitive to how much CPU the shared machine left the servers "
        "(CPU time still inflates somewhat under contention): "
        "server CPU time per call (user + system, all threads, from `/proc`, 10 ms ticks over the "
        f"{args.calls} measured calls), gateway / bare = {cpu_us['gateway']:.0f} / "
        f"{cpu_us['bare']:.0f} µs = {c.ratio(cpu_us['gateway'], cpu_us['bare']):.2f} x "
        "(informational, the target is on wall time).\n"
        + f"\n**Target** stdio call median ≤ {LATENCY_TARGET} x bare: "
        f"{c.fmt_us(c.median(lat['gateway']))} / {c.fmt_us(c.median(lat['bare']))} µs = {r:.3f} x → "
        f"**{c.verdict(ok)}**\n"
    )
    c.write_section("latency", body)
    log(body)
    return ok


def latency_row(label: str, ns: list[float]) -> str:
    return (
        f"| {label} | {c.fmt_us(c.median(ns))} | {c.fmt_us(c.percentile(ns, 95))} | "
        f"{c.fmt_us(min(ns))} | {c.fmt_us(sum(ns) / len(ns))} |"
    )


async def sdk_latency(args: argparse.Namespace) -> dict[str, list[float]]:
    from contextlib import AsyncExitStack

    from mcp import Client, StdioServerParameters

    out: dict[str, list[float]] = {t.kind: [] for t in c.TARGETS}
    async with AsyncExitStack() as stack:
        clients = {}
        for t in c.TARGETS:
            argv = t.stdio_argv(args.tools)
            params = StdioServerParameters(
                command=argv[0], args=argv[1:], env=t.env(args.tools), cwd=str(c.RUN_DIR)
            )
            clients[t.kind] = await stack.enter_async_context(Client(params, mode="legacy"))
        for i in range(args.warmup + args.calls):
            for kind in (t.kind for t in c.alternating(i)):
                client = clients[kind]
                t0 = time.perf_counter_ns()
                res = await client.call_tool("echo_0", {"x": i})
                dt = time.perf_counter_ns() - t0
                if res.is_error or res.structured_content != {"y": i + 1}:
                    raise AssertionError(f"{kind}: wrong result {res!r}")
                if i >= args.warmup:
                    out[kind].append(dt)
    return out


# --- Streamable HTTP throughput ------------------------------------------------------------------

CALL_BODY = json.dumps(c.call_msg(1, "echo_0", 41), separators=(",", ":"))
#: The same call asking for progress (``_meta.progressToken``): the gateway answers a 2025 call
#: that asks as an event stream (gateway/http.py), the bare JSON-only server as before.
PROGRESS_BODY = json.dumps(
    {
        **c.call_msg(1, "echo_0", 41),
        "params": {"name": "echo_0", "arguments": {"x": 41}, "_meta": {"progressToken": "p"}},
    },
    separators=(",", ":"),
)


def answer_of(raw: bytes) -> Any:
    """The JSON-RPC answer of a response body: JSON, or the last event of an event stream."""
    text = raw.decode("utf-8")
    if text.lstrip().startswith(("event:", "data:", ":", "id:")):
        events = [line[5:] for line in text.splitlines() if line.startswith("data:")]
        return json.loads(events[-1])
    return json.loads(text)


def use_progress_body() -> None:
    """``http --progress``: every call asks for progress."""
    global CALL_BODY
    CALL_BODY = PROGRESS_BODY


EXPECT = '"y":42'

WRK_LUA = """-- generated by bench/core_bench.py: POST one tools/call, check every response
wrk.method = "POST"
wrk.body = '%(body)s'
wrk.headers["Content-Type"] = "application/json"
wrk.headers["Accept"] = "application/json, text/event-stream"
wrk.headers["MCP-Protocol-Version"] = "%(protocol)s"
%(extra)s

local threads = {}
function setup(thread)
  table.insert(threads, thread)
end

non200 = 0
bad = 0
good = 0
function response(status, headers, body)
  if status ~= 200 then
    non200 = non200 + 1
  elseif string.find(body, '%(expect)s', 1, true) == nil
      or string.find(body, '"isError":true', 1, true) ~= nil
      or string.find(body, '"error":', 1, true) ~= nil then
    bad = bad + 1
  else
    good = good + 1
  end
end

function done(summary, latency, requests)
  local n2, b, g = 0, 0, 0
  for _, t in ipairs(threads) do
    n2 = n2 + t:get("non200")
    b = b + t:get("bad")
    g = g + t:get("good")
  end
  local e = summary.errors
  io.write(string.format(
    'LOADJSON {"requests":%%d,"duration_us":%%d,"errors":%%d,"non200":%%d,"bad":%%d,"good":%%d,' ..
    '"p50_us":%%d,"p95_us":%%d,"p99_us":%%d,"mean_us":%%.1f}\\n',
    summary.requests, summary.duration, e.connect + e.read + e.write + e.status + e.timeout,
    n2, b, g, latency:percentile(50), latency:percentile(95), latency:percentile(99), latency.mean))
end
"""


@dataclass
class HttpRun:
    target: c.Target
    rps: float
    p50_ms: float
    p95_ms: float
    requests: int
    errors: int
    non200: int
    bad: int
    server_cpu: float
    loadgen_cpu: float
    extra: dict[str, Any] = field(default_factory=dict)


def run_loadgen(
    port: int, args: argparse.Namespace, tool: str, headers: dict[str, str] | None = None
) -> tuple[dict[str, Any], float]:
    """Run the load generator as a child; its JSON summary and its CPU seconds."""
    url = f"http://127.0.0.1:{port}/mcp"
    headers = headers or {}
    if tool == "wrk":
        script = c.WORK / "core_call.lua"
        extra = "\n".join(f'wrk.headers["{k}"] = "{v}"' for k, v in headers.items())
        script.write_text(
            WRK_LUA % {"body": CALL_BODY, "protocol": c.PROTOCOL, "expect": EXPECT, "extra": extra},
            encoding="utf-8",
        )
        argv = [
            "wrk",
            "-t1",
            f"-c{args.clients}",
            f"-d{args.duration}s",
            "--timeout",
            "5s",
            "-s",
            str(script),
            url,
        ]
    else:
        argv = [
            c.PY,
            __file__,
            "_loadgen",
            "--port",
            str(port),
            "--clients",
            str(args.clients),
            "--duration",
            str(args.duration),
            *[f"--header={k}: {v}" for k, v in headers.items()],
            *(["--progress"] if CALL_BODY == PROGRESS_BODY else []),
        ]
    out_path = c.LOG_DIR / "loadgen.out"
    with out_path.open("wb") as out:
        proc = subprocess.Popen(argv, stdout=out, stderr=subprocess.STDOUT, cwd=c.RUN_DIR)
        _, status, usage = os.wait4(proc.pid, 0)
        proc.returncode = os.waitstatus_to_exitcode(status)
    text = out_path.read_text(encoding="utf-8", errors="replace")
    m = re.search(r"^LOADJSON (\{.*\})$", text, re.M)
    if proc.returncode != 0 or not m:
        raise RuntimeError(f"load generator failed (rc {proc.returncode}):\n{text[-2000:]}")
    return json.loads(m.group(1)), usage.ru_utime + usage.ru_stime


def http_once(
    target: c.Target, args: argparse.Namespace, tool: str, headers: dict[str, str] | None = None
) -> HttpRun:
    hp = c.start_http(target, args.tools, CALL_BODY.encode(), headers=headers)
    try:
        status, raw = c.http_post(hp.port, CALL_BODY.encode(), headers=headers)
        if status != 200:
            raise AssertionError(f"{target.label}: HTTP {status}: {raw[:300]!r}")
        c.check_echo(answer_of(raw), 41)
        if EXPECT.encode() not in raw:
            raise AssertionError(
                f"{target.label}: body is not compact JSON, the check would fail: {raw[:300]!r}"
            )
        cpu0 = hp.cpu_seconds()
        res, lg_cpu = run_loadgen(hp.port, args, tool, headers)
        cpu = hp.cpu_seconds() - cpu0
    finally:
        hp.stop()
    secs = res["duration_us"] / 1e6
    return HttpRun(
        target,
        res["requests"] / secs,
        res["p50_us"] / 1000,
        res["p95_us"] / 1000,
        res["requests"],
        res["errors"],
        res["non200"],
        res["bad"],
        cpu / secs,
        lg_cpu / secs,
        res,
    )


def load_facts(sub: str, args: argparse.Namespace, load: c.Machine, **extra: Any) -> str:
    """The facts line of a section measured under the HTTP load, with its rerun command."""
    command = rerun(
        sub,
        clients=args.clients,
        duration=args.duration,
        rounds=args.rounds,
        **extra,
        tools=args.tools,
    )
    command += " --python-loadgen" if args.python_loadgen else ""
    command += " --progress" if getattr(args, "progress", False) else ""
    return c.facts_line(command, load)


def bench_http(args: argparse.Namespace) -> bool:
    tool = "wrk" if c.which("wrk") and not args.python_loadgen else "python"
    load = c.Machine()
    log(
        f"HTTP: {args.clients} clients x {args.duration} s, {args.rounds} round(s), load generator: {tool}"
    )
    runs: list[HttpRun] = []
    for i in range(args.rounds):
        for target in c.alternating(i):
            runs.append(http_once(target, args, tool))
            log(f"  {target.label}: {runs[-1].rps:.0f} rps")
    rps = {t.kind: c.median(r.rps for r in runs if r.target is t) for t in c.TARGETS}
    r = c.ratio(rps["gateway"], rps["bare"])
    per_cpu = {
        t.kind: c.median(x.rps / x.server_cpu for x in runs if x.target is t and x.server_cpu > 0)
        for t in c.TARGETS
    }
    failures = sum(x.errors + x.non200 + x.bad for x in runs)
    ok = r >= HTTP_TARGET and failures == 0
    rows = "\n".join(
        f"| {i // 2 + 1} | {x.target.label} | {x.rps:.0f} | {x.p50_ms:.1f} | {x.p95_ms:.1f} | {x.requests} | "
        f"{x.errors} / {x.non200} / {x.bad} | {x.server_cpu * 100:.0f}% | "
        f"{x.rps / x.server_cpu:.0f} | {x.loadgen_cpu * 100:.0f}% |"
        for i, x in enumerate(runs)
    )
    gen = (
        f"`wrk -t1 -c{args.clients} -d{args.duration}s` with a Lua script that POSTs the call and checks "
        "every response body"
        if tool == "wrk"
        else f"the lean asyncio raw-socket HTTP/1.1 keep-alive client in this script ({args.clients} connections)"
    )
    progress = bool(getattr(args, "progress", False))
    title = (
        "## Streamable HTTP, calls asking for progress (event streams): throughput under load"
        if progress
        else "## Streamable HTTP, stateless JSON: throughput under load"
    )
    body = (
        f"{title}\n\n"
        + load_facts("http", args, load)
        + f"- Method: each server alone on a free 127.0.0.1 port (uvicorn, 1 worker); {gen}; "
        f"{args.clients} concurrent keep-alive connections for {args.duration} s; body `{CALL_BODY}`, "
        f"headers `Content-Type: application/json`, `Accept: application/json, text/event-stream`, "
        f"`MCP-Protocol-Version: {c.PROTOCOL}`. One response verified as a correct `tools/call` result "
        "before each run. Rounds alternate the order. CPU columns: CPU time / wall time of the server "
        "process and of the load generator (100% = one core).\n"
        "- Gateway: `python -m gateway.cli serve --transport http --port P`; bare: "
        "`bench/core_bare_server.py --tools N http --port P`.\n\n"
        "| round | server | req/s | p50 ms | p95 ms | requests | socket errors / non-200 / bad body | "
        "server CPU | req per server CPU-s | load-gen CPU |\n|---|---|---|---|---|---|---|---|---|---|\n"
        + rows
        + (
            # The target is on plain JSON; with progress the gateway streams, the bare server not.
            "\n\nInformational (no target: the gateway answers each call as an event stream, the "
            f"bare JSON-only server with JSON): {rps['gateway']:.0f} / {rps['bare']:.0f} req/s = "
            f"{r:.3f} x, {failures} errors.\n"
            if progress
            else f"\n\n**Target** HTTP throughput ≥ {HTTP_TARGET} x bare (median of rounds, 0 "
            f"errors): {rps['gateway']:.0f} / {rps['bare']:.0f} req/s = {r:.3f} x, {failures} "
            f"errors → **{c.verdict(ok)}**\n"
        )
        + "\nCross-check, less sensitive to how much CPU the shared machine left the server "
        "(CPU time still inflates somewhat under contention): "
        f"requests per server CPU-second, gateway / bare = {per_cpu['gateway']:.0f} / "
        f"{per_cpu['bare']:.0f} = {c.ratio(per_cpu['gateway'], per_cpu['bare']):.2f} x (medians; "
        "informational, the target is on throughput).\n"
    )
    c.write_section("http-progress" if progress else "http", body)
    log(body)
    return ok if not progress else failures == 0


# --- OAuth under the HTTP load ------------------------------------------------------------------


def bench_http_auth(args: argparse.Namespace) -> bool:
    """The same load against the gateway without and with OAuth (one access token, as a client
    re-uses it; the issuer's keys cached after the first call): what the check adds per call."""
    from auth_verify import RESOURCE, Issuer

    tool = "wrk" if c.which("wrk") and not args.python_loadgen else "python"
    load = c.Machine()
    log(
        f"HTTP + OAuth ({args.alg}): {args.clients} clients x {args.duration} s, {args.rounds} round(s)"
    )
    runs: list[HttpRun] = []
    with Issuer() as idp:
        oauth = c.Target(
            f"gateway + OAuth ({args.alg})",
            "gateway",
            (
                ("MCP_GATEWAY_AUTH_ISSUER", idp.url),
                ("MCP_GATEWAY_AUTH_JWKS_URL", f"{idp.url}/keys"),
                ("MCP_GATEWAY_AUTH_AUDIENCE", RESOURCE),
            ),
        )
        bearer = {"Authorization": f"Bearer {idp.tokens(args.alg, 1)[0]}"}
        for i in range(args.rounds):
            order = (c.GATEWAY, oauth) if i % 2 == 0 else (oauth, c.GATEWAY)
            for target in order:
                runs.append(http_once(target, args, tool, bearer if target is oauth else None))
                log(f"  {target.label}: {runs[-1].rps:.0f} rps")
        fetches = sum(1 for r in idp.requests if r.path == "/keys")
    off = [x for x in runs if x.target is c.GATEWAY]
    on = [x for x in runs if x.target is not c.GATEWAY]
    # Per round: what a call cost the server with OAuth minus without, in server CPU time
    # (robust to what other processes take) and in wall time (1 / throughput: the server is
    # one busy event loop under this load).
    cpu_ms = [
        (b.server_cpu / b.rps - a.server_cpu / a.rps) * 1000 for a, b in zip(off, on, strict=True)
    ]
    wall_ms = [(1 / b.rps - 1 / a.rps) * 1000 for a, b in zip(off, on, strict=True)]
    cost, cost_wall = c.median(cpu_ms), c.median(wall_ms)
    failures = sum(x.errors + x.non200 + x.bad for x in runs)
    ok = cost <= AUTH_TARGET_MS and failures == 0
    rows = "\n".join(
        f"| {i // 2 + 1} | {x.target.label} | {x.rps:.0f} | {x.p50_ms:.1f} | {x.p95_ms:.1f} | "
        f"{x.errors} / {x.non200} / {x.bad} | {x.server_cpu * 100:.0f}% | "
        f"{x.server_cpu / x.rps * 1e6:.0f} |"
        for i, x in enumerate(runs)
    )
    body = (
        "## OAuth under the HTTP load: what checking the access token adds per call\n\n"
        + load_facts("http-auth", args, load, alg=args.alg)
        + "- Method: the load of the HTTP section (same body, "
        f"{args.clients} keep-alive connections for {args.duration} s, load generator: {tool}) "
        "against the gateway without auth and with `[auth]` pointing at an identity provider on "
        f"127.0.0.1 (`bench/auth_verify.py`'s, a 2048-bit RSA and a P-256 key); every request "
        f"carries the same {args.alg} access token, as a client re-uses its token. The JWKS is "
        f"fetched once and cached ({fetches} fetch(es) in the whole run). Rounds alternate the "
        "order. Per round, the cost of OAuth per call = server CPU time per request with OAuth "
        "minus without (robust to other processes); the wall-time figure is 1/throughput with "
        "minus without (the server is one busy event loop under this load).\n\n"
        "| round | server | req/s | p50 ms | p95 ms | socket errors / non-200 / bad body | "
        "server CPU | server CPU µs per request |\n|---|---|---|---|---|---|---|---|\n"
        + rows
        + f"\n\nPer round, OAuth adds (CPU ms): {', '.join(f'{x:.3f}' for x in cpu_ms)}; "
        f"(wall ms): {', '.join(f'{x:.3f}' for x in wall_ms)}. Throughput with OAuth / without = "
        f"{c.median(x.rps for x in on):.0f} / {c.median(x.rps for x in off):.0f} req/s = "
        f"{c.ratio(c.median(x.rps for x in on), c.median(x.rps for x in off)):.3f} x.\n\n"
        f"**Target** checking an access token ({args.alg}, JWKS cached) adds ≤ {AUTH_TARGET_MS} ms "
        f"per HTTP call under load (median of rounds, server CPU time, 0 errors): "
        f"{cost:.3f} ms (wall {cost_wall:.3f} ms), {failures} errors → **{c.verdict(ok)}**\n"
    )
    c.write_section("http-auth", body)
    log(body)
    return ok


# --- the lean Python load generator (used when wrk is not installed) ------------------------------


async def _lg_client(
    port: int, deadline: float, lat: list[int], stats: dict[str, int], headers: list[str]
) -> None:
    body = CALL_BODY.encode()
    head = (
        f"POST /mcp HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nContent-Length: {len(body)}\r\n"
        + "".join(f"{k}: {v}\r\n" for k, v in c.HTTP_HEADERS.items())
        + "".join(f"{h}\r\n" for h in headers)
        + "\r\n"
    ).encode()
    request = head + body
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    try:
        while time.monotonic() < deadline:
            t0 = time.perf_counter_ns()
            writer.write(request)
            headers = await reader.readuntil(b"\r\n\r\n")
            status = int(headers.split(b" ", 2)[1])
            lower = headers.lower()
            m = re.search(rb"content-length:\s*(\d+)", lower)
            if m:
                payload = await reader.readexactly(int(m.group(1)))
            elif b"transfer-encoding: chunked" in lower:
                chunks = []
                while True:
                    size = int((await reader.readuntil(b"\r\n")).strip(), 16)
                    chunk = await reader.readexactly(size + 2)
                    if size == 0:
                        break
                    chunks.append(chunk[:-2])
                payload = b"".join(chunks)
            else:
                raise RuntimeError("response without length")
            lat.append(time.perf_counter_ns() - t0)
            if status != 200:
                stats["non200"] += 1
            elif (
                EXPECT.encode() not in payload
                or b'"isError":true' in payload
                or b'"error":' in payload
            ):
                stats["bad"] += 1
            else:
                stats["good"] += 1
    except (OSError, asyncio.IncompleteReadError, ValueError):
        stats["errors"] += 1
    finally:
        writer.close()


async def _loadgen(port: int, clients: int, duration: float, headers: list[str]) -> None:
    lat: list[int] = []
    stats = {"non200": 0, "bad": 0, "good": 0, "errors": 0}
    t0 = time.perf_counter()
    deadline = time.monotonic() + duration
    await asyncio.gather(*(_lg_client(port, deadline, lat, stats, headers) for _ in range(clients)))
    wall = time.perf_counter() - t0
    res = {
        "requests": len(lat),
        "duration_us": int(wall * 1e6),
        **stats,
        "p50_us": c.percentile(lat, 50) / 1000,
        "p95_us": c.percentile(lat, 95) / 1000,
        "p99_us": c.percentile(lat, 99) / 1000,
        "mean_us": sum(lat) / max(1, len(lat)) / 1000,
    }
    print("LOADJSON " + json.dumps(res), flush=True)


# --- tools/list size -------------------------------------------------------------------------------


def compact(obj: Any) -> int:
    return len(json.dumps(obj, separators=(",", ":"), ensure_ascii=False).encode())


def listing(target: c.Target, tools: int) -> tuple[dict[str, Any], int, list[dict[str, Any]], int]:
    with c.spawn_stdio(target, tools, f"listsize-{tools}") as p:
        init = p.handshake()
        init_bytes = compact(init)
        resp, list_bytes = p.request(TOOLS_LIST)
    return init, init_bytes, resp["result"]["tools"], list_bytes


def bench_listsize(args: argparse.Namespace) -> bool:
    load = c.Machine()
    log("tools/list size")
    rows, breakdown, samples = [], {}, {}
    extra_tools: dict[str, str] = {}
    init_rows = []
    for n in args.sizes:
        for target in c.TARGETS:
            init, init_bytes, tools, list_bytes = listing(target, n)
            echo = [t for t in tools if t["name"].startswith("echo_")]
            if len(echo) != n:
                raise AssertionError(f"{target.label}: listed {len(echo)} echo tools, expected {n}")
            per_tool = sum(compact(t) for t in echo) / n
            others = [t for t in tools if not t["name"].startswith("echo_")]
            for t in others:
                extra_tools[t["name"]] = f"{compact(t)} bytes"
            rows.append(
                f"| {n} | {target.label} | {len(tools)} | {list_bytes} | {per_tool:.0f} | "
                f"{(list_bytes - sum(compact(t) for t in others)) / n:.0f} |"
            )
            if n == args.sizes[0]:
                breakdown[target.kind] = {k: compact(v) for k, v in echo[0].items()}
                samples[target.kind] = json.dumps(
                    echo[0], separators=(",", ":"), ensure_ascii=False
                )
                instr = init["result"].get("instructions") or ""
                init_rows.append(f"| {target.label} | {init_bytes} | {len(instr.encode())} |")
    keys = sorted(set(breakdown["bare"]) | set(breakdown["gateway"]))
    field_rows = "\n".join(
        f"| `{k}` | {breakdown['bare'].get(k, '—')} | {breakdown['gateway'].get(k, '—')} |"
        for k in keys
    )
    ratio_per_tool = c.ratio(sum(breakdown["gateway"].values()), sum(breakdown["bare"].values()))
    body = (
        "## `tools/list` size\n\n"
        + c.facts_line(rerun("listsize", sizes=" ".join(map(str, args.sizes))), load)
        + "- Method: the raw `tools/list` response line over stdio (bytes on the wire, as the SDK "
        "serializes it), and each tool re-serialized as compact UTF-8 JSON. Both servers publish the "
        "same description (`Return y = x + 1.`) and the same parameter description, so the "
        "difference is what each adds around them. The gateway also lists its built-in "
        f"`gateway_status` ({', '.join(f'`{k}` {v}' for k, v in extra_tools.items())}).\n\n"
        "| N | server | tools listed | response bytes | bytes per echo tool | wire bytes per echo tool (response minus extra tools, ÷ N) |\n"
        "|---|---|---|---|---|---|\n"
        + "\n".join(rows)
        + f"\n\nPer-field bytes of `echo_0` (compact JSON of each value; gateway/bare per tool = "
        f"{ratio_per_tool:.2f} x):\n\n| field | bare | gateway |\n|---|---|---|\n"
        + field_rows
        + "\n\n`initialize` response (once per session; the gateway sends `instructions`):\n\n"
        "| server | bytes | of which instructions |\n|---|---|---|\n"
        + "\n".join(init_rows)
        + "\n\n<details><summary><code>echo_0</code> as each server lists it</summary>\n\n"
        f"bare:\n\n```json\n{samples['bare']}\n```\n\ngateway:\n\n```json\n{samples['gateway']}\n```\n\n"
        "</details>\n"
    )
    c.write_section("listsize", body)
    log(body)
    return True


# --- main ----------------------------------------------------------------------------------------------


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = p.add_subparsers(dest="command", required=True)

    def add(name: str, help_text: str) -> argparse.ArgumentParser:
        sp = sub.add_parser(name, help=help_text)
        sp.add_argument("--tools", type=int, default=10, help="N trivial tools (default 10)")
        return sp

    cold = add("cold", "cold start to the first tools/list response")
    cold.add_argument("--runs", type=int, default=10)
    imp = add("imports", "python -X importtime: what the gateway imports beyond the bare server")
    imp.add_argument("--runs", type=int, default=5)
    prof = add("startprofile", "where the start of a deployment (every installed plugin) goes")
    prof.add_argument("--runs", type=int, default=5)
    lat = add("latency", "per-call latency over stdio")
    lat.add_argument("--calls", type=int, default=1000)
    lat.add_argument("--warmup", type=int, default=50)
    lat.add_argument(
        "--no-sdk", dest="sdk", action="store_false", help="skip the SDK-client figures"
    )
    http = add("http", "stateless Streamable HTTP throughput")
    http.add_argument("--clients", type=int, default=20)
    http.add_argument("--duration", type=int, default=10)
    http.add_argument("--rounds", type=int, default=5)
    http.add_argument(
        "--python-loadgen", action="store_true", help="use the asyncio client even if wrk exists"
    )
    http.add_argument(
        "--progress",
        action="store_true",
        help="every call carries a progressToken (the gateway answers with an event stream)",
    )
    auth = add("http-auth", "what checking an OAuth access token adds to an HTTP call")
    auth.add_argument("--clients", type=int, default=20)
    auth.add_argument("--duration", type=int, default=10)
    auth.add_argument("--rounds", type=int, default=5)
    auth.add_argument("--alg", choices=["RS256", "ES256"], default="RS256")
    auth.add_argument(
        "--python-loadgen", action="store_true", help="use the asyncio client even if wrk exists"
    )
    size = sub.add_parser("listsize", help="tools/list bytes per tool")
    size.add_argument("--sizes", type=int, nargs="+", default=[10, 50])
    sub.add_parser("all", help="everything above with the defaults; rewrites bench/results/core.md")
    lg = sub.add_parser("_loadgen", help=argparse.SUPPRESS)
    lg.add_argument("--port", type=int, required=True)
    lg.add_argument("--clients", type=int, default=20)
    lg.add_argument("--duration", type=float, default=10)
    lg.add_argument("--header", action="append", default=[], help="NAME: VALUE, sent too")
    lg.add_argument("--progress", action="store_true")
    args = p.parse_args(argv)
    if getattr(args, "progress", False):
        use_progress_body()

    if args.command == "_loadgen":
        asyncio.run(_loadgen(args.port, args.clients, args.duration, args.header))
        return 0
    c.write_plugin()
    steps = {
        "listsize": bench_listsize,
        "cold": bench_cold,
        "imports": bench_imports,
        "startprofile": bench_startprofile,
        "latency": bench_latency,
        "http": bench_http,
        "http-auth": bench_http_auth,
    }
    if args.command != "all":
        return 0 if steps[args.command](args) else 1
    started = time.monotonic()
    ok = True
    for name, fn in steps.items():
        ok &= fn(p.parse_args([name]))
    log(f"all done in {time.monotonic() - started:.0f} s; results in bench/results/core.md")
    return 0 if ok else 1


if __name__ == "__main__":
    raise SystemExit(main())
