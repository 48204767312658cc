"""MCP servers behind the gateway (issue 37): what a mounted server's call costs, and start-up.

    .venv/bin/python bench/mount_bench.py latency      # ~2 minutes
    .venv/bin/python bench/mount_bench.py startup      # ~3 minutes

``latency``: one ``tools/call`` (``echo_0``, ``{x}`` → ``{y: x + 1}``) of the bare low-level SDK
server of the core benchmarks (``core_bare_server.py``) over stdio, three ways, each from a raw
JSON-RPC client (so no client library is measured): made directly; through ``mcp-gateway
serve`` mounting that server (``[servers.bare]``); through FastMCP's proxy of the same server
(``fastmcp.server.create_proxy(StdioTransport(...), mode="auto")``, FastMCP 4 in a virtual
environment of its own under ``bench/.work``); and, for reference, the same tool from a plugin in
the gateway's own process (the core benchmarks' generated plugin): what the gateway's front and
pipeline cost with no server behind them. The calls alternate between the four, one each per
round, in a rotated order. Target: the gateway's median added latency (its median minus the
direct median) ≤ 0.5 ms and below FastMCP's. ``--protocol`` picks the client's protocol: the
stateless 2026-07-28 (the default: Claude Code opens stdio servers with ``server/discover`` and sends
each request with its ``_meta`` envelope) or the 2025-11-25 ``initialize`` handshake; each has its
own section in the results.

``startup``: spawn → ``initialize`` → ``tools/list`` until the listing holds the tools of the
servers that answer, for (a) the bare server itself, (b) the gateway mounting two such servers,
(c) the gateway mounting the same two and a third that answers only after 5 s. Target: (c) ≤
1.15 x (b): the slow server costs the others' listing nothing; (c) / (a) is reported too.
Figures go to ``bench/results/mounts.md``.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import core_common as c

RESULTS = c.BENCH / "results" / "mounts.md"
FASTMCP = "fastmcp==4.2.3"
FASTMCP_VENV = c.WORK / "fastmcp-venv"
LATENCY_TARGET_MS = 0.5
STARTUP_TARGET = 1.15
SLOW_SECONDS = 5.0

PROXY_SOURCE = """
import sys
from fastmcp.client.transports import StdioTransport
from fastmcp.server import create_proxy

proxy = create_proxy(StdioTransport(command=sys.argv[1], args=sys.argv[2:]), mode="auto")
proxy.run(show_banner=False, log_level="WARNING")
"""

#: A server that answers nothing for SLOW_SECONDS: sleeps, then becomes the bare server.
SLOW_SOURCE = """
import runpy, sys, time
time.sleep(float(sys.argv[1]))
sys.argv = [sys.argv[2], *sys.argv[3:]]
runpy.run_path(sys.argv[0], run_name="__main__")
"""


def log(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


def bare_argv(tools: int = 1) -> list[str]:
    return [c.PY, str(c.BARE_SERVER), "--tools", str(tools), "stdio"]


def env() -> dict[str, str]:
    out = {
        k: v for k, v in os.environ.items() if not k.startswith(("MCP_GATEWAY_", "PYTHON", "XDG_"))
    }
    out["XDG_CACHE_HOME"] = str(c.CACHE_DIR)
    out["XDG_STATE_HOME"] = str(c.WORK / "state")
    return out


def gateway_config(name: str, servers: dict[str, list[str]]) -> Path:
    lines = []
    for server, argv in servers.items():
        lines += [
            f"[servers.{server}]",
            f"command = {json.dumps(argv[0])}",
            f"args = {json.dumps(argv[1:])}",
            "",
        ]
    path = c.WORK / f"{name}.toml"
    path.write_text("\n".join(lines))
    return path


def gateway_argv(config: Path) -> list[str]:
    return [c.PY, "-m", "gateway.cli", "--config", str(config), "serve"]


def gateway_env() -> dict[str, str]:
    return {**env(), "MCP_GATEWAY_PLUGINS": "servers"}


def fastmcp_python() -> Path:
    python = FASTMCP_VENV / "bin" / "python"
    if not python.exists():
        log(f"creating {FASTMCP_VENV.relative_to(c.REPO)} with {FASTMCP}")
        subprocess.run([sys.executable, "-m", "venv", str(FASTMCP_VENV)], check=True)
        subprocess.run(
            [str(python), "-m", "pip", "install", "-q", "--disable-pip-version-check", FASTMCP],
            check=True,
        )
    return python


def opened(proc: c.StdioProc, modern: bool) -> None:
    """The client's opening: ``server/discover`` (2026-07-28) or the ``initialize`` handshake."""
    if not modern:
        proc.handshake()
        return
    resp, _ = proc.request(c.modern(0, "server/discover"), timeout=60)
    if "error" in resp:
        raise RuntimeError(f"server/discover failed: {resp['error']}")


def listed(
    proc: c.StdioProc, want: set[str], req: int, deadline: float, *, modern: bool = False
) -> int:
    """Ask ``tools/list`` until it holds ``want``; returns the next request id."""
    while True:
        message = (
            c.modern(req, "tools/list")
            if modern
            else {"jsonrpc": "2.0", "id": req, "method": "tools/list"}
        )
        resp, _ = proc.request(message, timeout=60)
        req += 1
        names = {t["name"] for t in resp["result"]["tools"]}
        if want <= names:
            return req
        if time.monotonic() > deadline:
            raise TimeoutError(f"{sorted(want - names)} never listed")
        time.sleep(0.005)


# --- latency --------------------------------------------------------------------------------


def latency(args: argparse.Namespace) -> str:
    c.WORK.mkdir(parents=True, exist_ok=True)
    c.LOG_DIR.mkdir(parents=True, exist_ok=True)
    c.RUN_DIR.mkdir(parents=True, exist_ok=True)
    machine = c.Machine()
    proxy_script = c.WORK / "fastmcp_proxy.py"
    proxy_script.write_text(PROXY_SOURCE)
    setups = {
        "direct": (bare_argv(), env()),
        "gateway": (gateway_argv(gateway_config("latency", {"bare": bare_argv()})), gateway_env()),
        "fastmcp": ([str(fastmcp_python()), str(proxy_script), *bare_argv()], env()),
        # The same tool from a plugin in the gateway's own process, no server behind it: what
        # the gateway's front and pipeline cost alone, the floor a mounted call stands on.
        "in process": (
            [c.PY, "-m", "gateway.cli", "serve"],
            {
                **env(),
                "PYTHONPATH": str(c.write_plugin()),
                "MCP_GATEWAY_PLUGINS": c.PLUGIN_NAME,
                "MCP_GATEWAY_ISOLATE": "none",
                c.TOOLS_ENV: "1",
            },
        ),
    }
    modern = args.protocol == c.MODERN
    procs = {name: c.StdioProc(argv, e, f"mount-{name}") for name, (argv, e) in setups.items()}
    times: dict[str, list[float]] = {name: [] for name in procs}
    try:
        for proc in procs.values():
            opened(proc, modern)
            listed(proc, {"echo_0"}, 1, time.monotonic() + 60, modern=modern)
        order = list(procs)
        for i in range(args.warmup + args.calls):
            for name in order[i % len(order) :] + order[: i % len(order)]:
                proc = procs[name]
                message = c.call_msg(1000 + i, "echo_0", i)
                if modern:
                    message["params"]["_meta"] = c.modern(0, "tools/call")["params"]["_meta"]
                t0 = time.perf_counter_ns()
                resp, _ = proc.request(message)
                elapsed = time.perf_counter_ns() - t0
                c.check_echo(resp, i)
                if i >= args.warmup:
                    times[name].append(elapsed)
    finally:
        for proc in procs.values():
            proc.close()
    med = {name: statistics.median(v) for name, v in times.items()}
    opening = (
        f"{c.MODERN}: `server/discover`, each request with its `_meta` envelope (what Claude "
        "Code sends)"
        if modern
        else f"{c.PROTOCOL}: the `initialize` handshake"
    )
    added = {name: (med[name] - med["direct"]) / 1e6 for name in ("gateway", "fastmcp")}
    ok = added["gateway"] <= LATENCY_TARGET_MS and added["gateway"] < added["fastmcp"]
    # A mounted call is the gateway's own work (front and pipeline, as in process) plus the
    # server's answer (the direct call) plus what passing it on adds: the rest.
    passing = (med["gateway"] - med["in process"] - med["direct"]) / 1e3
    rows = "\n".join(
        f"| {name} | {c.fmt_us(med[name])} | {c.fmt_us(c.percentile(v, 95))} | "
        + ("—" if name == "direct" else f"{(med[name] - med['direct']) / 1e3:+.0f}")
        + " |"
        for name, v in times.items()
    )
    return (
        f"## Latency ({opening}): a mounted server's call, direct vs through the gateway vs "
        "FastMCP's proxy\n\n"
        + c.facts_line(
            f".venv/bin/python bench/mount_bench.py latency --calls {args.calls} "
            f"--protocol {args.protocol}",
            machine,
        )
        + f"- {args.calls} calls each after {args.warmup} warm-up calls, one per setup per round, "
        f"order rotated every round; raw JSON-RPC client over pipes, {opening}; FastMCP "
        f"{FASTMCP.split('==')[1]}, proxy mode auto; *in process*: the same tool (the core "
        "benchmarks' generated plugin, one tool) from a plugin in the gateway's own process, "
        "no server behind it\n\n"
        "| path | median µs | p95 µs | added median µs |\n|---|---:|---:|---:|\n"
        + rows
        + f"\n\n**Target** gateway's added median ≤ {LATENCY_TARGET_MS} ms and below FastMCP's: "
        f"gateway +{added['gateway']:.3f} ms, FastMCP +{added['fastmcp']:.3f} ms → "
        f"**{'PASS' if ok else 'MISS'}**\n\n"
        "Where the gateway's share goes (medians): the mounted call "
        f"{c.fmt_us(med['gateway'])} µs = the gateway's front and pipeline, as for a tool in "
        f"process, {c.fmt_us(med['in process'])} µs + the server's own answer, as the direct "
        f"call, {c.fmt_us(med['direct'])} µs + passing the call on to the server and back, "
        f"{passing:+.0f} µs. The added latency is mostly the first: a call through the gateway "
        "is answered by its front and pipeline, and the server behind it answers too.\n"
    )


# --- start-up -----------------------------------------------------------------------------------


def startup_once(argv: list[str], e: dict[str, str], want: set[str], tag: str) -> float:
    proc = c.StdioProc(argv, e, tag)
    try:
        proc.handshake()
        listed(proc, want, 1, time.monotonic() + 60)
        return (time.perf_counter_ns() - proc.started_ns) / 1e6
    finally:
        proc.close()


def startup(args: argparse.Namespace) -> str:
    c.WORK.mkdir(parents=True, exist_ok=True)
    c.LOG_DIR.mkdir(parents=True, exist_ok=True)
    c.RUN_DIR.mkdir(parents=True, exist_ok=True)
    machine = c.Machine()
    slow_script = c.WORK / "slow_server.py"
    slow_script.write_text(SLOW_SOURCE)
    slow_argv = [
        c.PY,
        str(slow_script),
        str(SLOW_SECONDS),
        str(c.BARE_SERVER),
        "--tools",
        "1",
        "stdio",
    ]
    two = gateway_config("startup-two", {"a": bare_argv(), "b": bare_argv()})
    three = gateway_config("startup-three", {"a": bare_argv(), "b": bare_argv(), "slow": slow_argv})
    # Each server's tools under a prefix, so that the three do not claim the same names.
    for path in (two, three):
        text = path.read_text()
        for server in ("a", "b", "slow"):
            text = text.replace(
                f"[servers.{server}]\n", f'[servers.{server}]\nprefix = "{server}_"\n'
            )
        path.write_text(text)
    setups = {
        "bare": (bare_argv(), env(), {"echo_0"}),
        "two": (gateway_argv(two), gateway_env(), {"a_echo_0", "b_echo_0"}),
        "three": (gateway_argv(three), gateway_env(), {"a_echo_0", "b_echo_0"}),
    }
    # One unmeasured start of each first: the gateways approve the definitions (first use).
    for name, (argv, e, want) in setups.items():
        startup_once(argv, e, want, f"startup-{name}-warm")
    times: dict[str, list[float]] = {name: [] for name in setups}
    order = list(setups)
    for i in range(args.runs):
        for name in order[i % 3 :] + order[: i % 3]:
            argv, e, want = setups[name]
            times[name].append(startup_once(argv, e, want, f"startup-{name}-{i}"))
    med = {name: statistics.median(v) for name, v in times.items()}
    slow_vs_two = med["three"] / med["two"]
    slow_vs_bare = med["three"] / med["bare"]
    rows = "\n".join(
        f"| {label} | {med[name]:.0f} | {min(times[name]):.0f} | {max(times[name]):.0f} |"
        for name, label in (
            ("bare", "(a) the bare server alone: spawn → its tools listed"),
            ("two", "(b) the gateway mounting two of them: spawn → both listed"),
            (
                "three",
                f"(c) the same and a third answering after {SLOW_SECONDS:g} s: the two listed",
            ),
        )
    )
    ok = slow_vs_two <= STARTUP_TARGET
    return (
        "## Start-up with a slow server\n\n"
        + c.facts_line(f".venv/bin/python bench/mount_bench.py startup --runs {args.runs}", machine)
        + f"- {args.runs} starts of each, alternated (rotated order); the time until a "
        "`tools/list` holds the servers' tools (the gateway's first listing waits for servers "
        "still starting: at most their `list_wait`, and a server much slower than the others "
        "does not hold it)\n\n"
        "| start-up | median ms | min | max |\n|---|---:|---:|---:|\n"
        + rows
        + f"\n\n(c) / (a) = {slow_vs_bare:.2f} x (the servers start when the gateway has "
        "started: their own start-up follows the gateway's)\n\n"
        f"**Target** the others' listing with a {SLOW_SECONDS:g} s server ≤ {STARTUP_TARGET} x "
        f"without it: {med['three']:.0f} / {med['two']:.0f} ms = {slow_vs_two:.3f} x → "
        f"**{'PASS' if ok else 'MISS'}**\n"
    )


def write(section: str, body: str) -> None:
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
    title = body.splitlines(keepends=True)[0]
    sections[title] = body
    # Before the protocol was named, one latency section measured the handshake only.
    sections.pop(
        "## Latency: a mounted server's call, direct vs through the gateway vs FastMCP's proxy\n",
        None,
    )
    RESULTS.write_text(
        "# MCP servers behind the gateway: benchmarks (issue 37)\n\n"
        "Written by `bench/mount_bench.py`; each section can be rerun on its own.\n\n"
        + "\n".join(s.rstrip("\n") + "\n" for s in sections.values())
    )


def main() -> int:
    parser = argparse.ArgumentParser()
    sub = parser.add_subparsers(dest="command", required=True)
    lat = sub.add_parser("latency")
    lat.add_argument("--calls", type=int, default=1000)
    lat.add_argument("--warmup", type=int, default=100)
    lat.add_argument("--protocol", choices=[c.MODERN, c.PROTOCOL], default=c.MODERN)
    st = sub.add_parser("startup")
    st.add_argument("--runs", type=int, default=10)
    args = parser.parse_args()
    body = latency(args) if args.command == "latency" else startup(args)
    print(body)
    write(body.splitlines()[0], body)
    return 0 if "**PASS**" in body else 1


if __name__ == "__main__":
    raise SystemExit(main())
