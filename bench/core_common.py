"""Shared helpers for the gateway-core benchmarks (``bench/core_bench.py``).

Everything here touches only 127.0.0.1 and the git-ignored ``bench/.work/`` folder:

* a generated trivial-tools plugin (``gw_bench_trivial`` + a ``.dist-info`` folder) that the
  gateway subprocess finds through ``PYTHONPATH`` as a real ``mcp_gateway.plugins`` entry point,
  so nothing is installed into the venv;
* the command lines for the gateway and for the bare low-level SDK server (same tools);
* a raw JSON-RPC client over the stdio pipes, so the client's own imports are never measured;
* small statistics and the section-by-section writer for ``bench/results/core.md``.
"""

from __future__ import annotations

import contextlib
import datetime as _dt
import json
import math
import os
import platform
import re
import resource
import select
import shutil
import socket
import statistics
import subprocess
import sys
import time
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

BENCH = Path(__file__).resolve().parent
REPO = BENCH.parent
WORK = BENCH / ".work"
PLUGIN_DIR = WORK / "plugin"
RUN_DIR = WORK / "run"
LOG_DIR = WORK / "logs"
#: The deployment's user cache (``XDG_CACHE_HOME``): where the gateway keeps tool schemas.
CACHE_DIR = WORK / "cache"
RESULTS = BENCH / "results" / "core.md"
BARE_SERVER = BENCH / "core_bare_server.py"
PY = sys.executable

PROTOCOL = "2025-06-18"
#: The stateless protocol Claude Code opens a stdio server with (``server/discover``).
MODERN = "2026-07-28"
PLUGIN_NAME = "bench_trivial"
PLUGIN_MODULE = "gw_bench_trivial"
TOOLS_ENV = "GW_BENCH_TRIVIAL_N"
DESCRIPTION = "Return y = x + 1."

# --- the generated plugin --------------------------------------------------------------

PLUGIN_SOURCE = f'''"""Benchmark plugin: N trivial read tools echo_0..echo_(N-1), y = x + 1 (generated)."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from gateway import PluginContext, Tier, ToolContext, ToolSpec, env_field, hookimpl


class Settings(BaseModel):
    model_config = ConfigDict(extra="forbid")
    tools: int = env_field("{TOOLS_ENV}", default=10)


class EchoArgs(BaseModel):
    model_config = ConfigDict(extra="forbid")
    x: int = Field(description="Any integer.")


class EchoResult(BaseModel):
    y: int


async def echo(args: EchoArgs, ctx: ToolContext[Settings]) -> EchoResult:
    return EchoResult(y=args.x + 1)


@hookimpl
def plugin_settings() -> type[BaseModel]:
    return Settings


@hookimpl
def register_tools(register: Any, plugin: PluginContext[Settings]) -> None:
    for i in range(plugin.settings.tools):
        register(
            ToolSpec(
                name=f"echo_{{i}}",
                title=f"Echo {{i}}",
                description="{DESCRIPTION}",
                input_model=EchoArgs,
                output_model=EchoResult,
                handler=echo,
                tier=Tier.READ,
            )
        )
'''

DIST_INFO = f"{PLUGIN_MODULE}-0.0.0.dist-info"
METADATA = (
    "Metadata-Version: 2.1\nName: gw-bench-trivial\nVersion: 0.0.0\nSummary: benchmark plugin\n"
)
ENTRY_POINTS = f"[mcp_gateway.plugins]\n{PLUGIN_NAME} = {PLUGIN_MODULE}\n"


def write_plugin() -> Path:
    """(Re)generate the plugin under ``bench/.work/plugin`` and return that folder."""
    PLUGIN_DIR.mkdir(parents=True, exist_ok=True)
    (PLUGIN_DIR / f"{PLUGIN_MODULE}.py").write_text(PLUGIN_SOURCE, encoding="utf-8")
    info = PLUGIN_DIR / DIST_INFO
    info.mkdir(exist_ok=True)
    (info / "METADATA").write_text(METADATA, encoding="utf-8")
    (info / "entry_points.txt").write_text(ENTRY_POINTS, encoding="utf-8")
    for d in (RUN_DIR, LOG_DIR):
        d.mkdir(parents=True, exist_ok=True)
    return PLUGIN_DIR


# --- what to run -------------------------------------------------------------------------


@dataclass(frozen=True)
class Target:
    """One server under test: its label, a stdio command and an HTTP command (port → argv)."""

    label: str
    kind: str  # "bare…" or "gateway…": what it is, and its key in the results
    extra_env: tuple[tuple[str, str], ...] = ()  # e.g. a gateway variant's MCP_GATEWAY_AUTH_*
    #: a deployment: the gateway with every installed plugin (not the generated one)
    deployment: bool = False

    @property
    def is_gateway(self) -> bool:
        return self.kind.startswith("gateway")

    def env(self, tools: int) -> dict[str, str]:
        env = {
            k: v
            for k, v in os.environ.items()
            if not k.startswith(("MCP_GATEWAY_", "PYTHON", "XDG_CACHE_HOME"))
            and k not in (TOOLS_ENV, *DEPLOYMENT_ENV)
        }
        env["XDG_CACHE_HOME"] = str(CACHE_DIR)
        if self.deployment:
            # Neither server gets the generated plugin's folder: the gateway would load it.
            if self.is_gateway:
                env.update(DEPLOYMENT_ENV)
        else:
            # Both servers get the same extra sys.path entry, so neither pays for it alone.
            env["PYTHONPATH"] = str(PLUGIN_DIR)
            if self.is_gateway:
                env["MCP_GATEWAY_PLUGINS"] = PLUGIN_NAME
                env[TOOLS_ENV] = str(tools)
        env.update(self.extra_env)
        return env

    def stdio_argv(self, tools: int, python_flags: Sequence[str] = ()) -> list[str]:
        if self.is_gateway:
            # The console script, as `claude-config` writes it for Claude Code (`python -m`
            # would import runpy besides); an interpreter flag needs the interpreter.
            script = Path(PY).parent / "mcp-gateway"
            if not python_flags and script.is_file():
                return [str(script), "serve"]
            return [PY, *python_flags, "-m", "gateway.cli", "serve"]
        return [PY, *python_flags, str(BARE_SERVER), "--tools", str(tools), "stdio"]

    def http_argv(self, tools: int, port: int) -> list[str]:
        if self.is_gateway:
            return [PY, "-m", "gateway.cli", "serve", "--transport", "http", "--port", str(port)]
        return [PY, str(BARE_SERVER), "--tools", str(tools), "http", "--port", str(port)]


BARE = Target("bare SDK server", "bare")
#: The core with the generated plugin in its own process (a plugin of another distribution would
#: run in a worker by default: bench/isolation_bench.py measures that).
GATEWAY = Target("gateway", "gateway", extra_env=(("MCP_GATEWAY_ISOLATE", "none"),))
TARGETS = (BARE, GATEWAY)
#: A deployment as Claude Code starts it: ``mcp-gateway serve`` with every installed plugin and
#: both REST backends configured (never contacted while starting), against the bare server
#: listing as many trivial tools.
DEPLOYMENT_ENV = {"COCKPIT_API_URL": "http://127.0.0.1:9", "GITEA_URL": "http://127.0.0.1:9"}
DEPLOYED = (
    Target("bare SDK server", "bare", deployment=True),
    Target("gateway, every installed plugin", "gateway", deployment=True),
)
#: The deployment with the schema cache off: what a start costs that must generate every tool's
#: schema (the first one after an install or upgrade, less writing the cache).
GATEWAY_NO_CACHE = Target(
    "gateway, every installed plugin, schema cache off",
    "gateway-no-cache",
    extra_env=(("MCP_GATEWAY_SCHEMA_CACHE", "0"),),
    deployment=True,
)
#: The bare server started the way ``serve`` starts (the collector paused until it is built):
#: what the gateway itself adds, like for like (informational).
BARE_GC_PAUSED = Target(
    "bare SDK server, collector paused while starting",
    "bare-gc",
    extra_env=(("BARE_GC_PAUSED", "1"),),
    deployment=True,
)


def alternating(i: int, targets: tuple[Target, ...] = TARGETS) -> tuple[Target, ...]:
    """Round ``i``'s order: bare first in even rounds, the gateway first in odd ones (ABBA), so
    neither pays more of a warming cache or of a neighbour's load."""
    return targets if i % 2 == 0 else targets[::-1]


# --- raw JSON-RPC over stdio ---------------------------------------------------------------


def initialize_msg(req_id: int = 0) -> dict[str, Any]:
    return {
        "jsonrpc": "2.0",
        "id": req_id,
        "method": "initialize",
        "params": {
            "protocolVersion": PROTOCOL,
            "capabilities": {},
            "clientInfo": {"name": "core-bench", "version": "0"},
        },
    }


INITIALIZED = {"jsonrpc": "2.0", "method": "notifications/initialized"}


def modern(req_id: int, method: str) -> dict[str, Any]:
    """A request of the stateless protocol: version, client and capabilities in its ``_meta``."""
    meta = {
        "io.modelcontextprotocol/protocolVersion": MODERN,
        "io.modelcontextprotocol/clientInfo": {"name": "core-bench", "version": "0"},
        "io.modelcontextprotocol/clientCapabilities": {},
    }
    return {"jsonrpc": "2.0", "id": req_id, "method": method, "params": {"_meta": meta}}


def call_msg(req_id: int, tool: str, x: int) -> dict[str, Any]:
    return {
        "jsonrpc": "2.0",
        "id": req_id,
        "method": "tools/call",
        "params": {"name": tool, "arguments": {"x": x}},
    }


class ServerDied(RuntimeError):
    pass


class StdioProc:
    """A server subprocess spoken to with line-delimited JSON-RPC on its pipes."""

    def __init__(
        self,
        argv: list[str],
        env: dict[str, str],
        log_name: str,
        *,
        stderr_path: Path | None = None,
    ) -> None:
        self.log_path = stderr_path or (LOG_DIR / f"{log_name}.stderr")
        self._err = self.log_path.open("wb")
        self.started_ns = time.perf_counter_ns()
        self.proc = subprocess.Popen(
            argv,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=self._err,
            env=env,
            cwd=RUN_DIR,
            bufsize=0,
        )
        assert self.proc.stdin is not None and self.proc.stdout is not None
        self._in = self.proc.stdin.fileno()
        self._out = self.proc.stdout.fileno()
        self._buf = b""
        self.cpu_seconds: float | None = None  # user + system, set by close()

    def send(self, msg: dict[str, Any]) -> None:
        data = (json.dumps(msg, separators=(",", ":")) + "\n").encode()
        view = memoryview(data)
        while view:
            n = os.write(self._in, view)
            view = view[n:]

    def _readline(self, deadline: float) -> bytes:
        while True:
            nl = self._buf.find(b"\n")
            if nl >= 0:
                line, self._buf = self._buf[:nl], self._buf[nl + 1 :]
                return line
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise TimeoutError(f"no response in time; see {self.log_path.relative_to(REPO)}")
            ready, _, _ = select.select([self._out], [], [], remaining)
            if ready:
                chunk = os.read(self._out, 1 << 16)
                if not chunk:
                    raise ServerDied(f"server closed stdout; see {self.log_path.relative_to(REPO)}")
                self._buf += chunk

    def recv(self, req_id: int, timeout: float = 30.0) -> tuple[dict[str, Any], int]:
        """The response to ``req_id`` (notifications in between are skipped) and its size."""
        deadline = time.monotonic() + timeout
        while True:
            line = self._readline(deadline)
            msg = json.loads(line)
            if msg.get("id") == req_id and ("result" in msg or "error" in msg):
                return msg, len(line) + 1

    def request(self, msg: dict[str, Any], timeout: float = 30.0) -> tuple[dict[str, Any], int]:
        self.send(msg)
        return self.recv(msg["id"], timeout)

    def handshake(self) -> dict[str, Any]:
        resp, _ = self.request(initialize_msg(0))
        if "error" in resp:
            raise RuntimeError(f"initialize failed: {resp['error']}")
        self.send(INITIALIZED)
        return resp

    def close(self, timeout: float = 10.0) -> None:
        """Close stdin (the server exits on EOF), reap it, keep its total CPU time."""
        with contextlib.suppress(OSError):
            self.proc.stdin.close()  # type: ignore[union-attr]
        try:
            deadline = time.monotonic() + timeout
            while self.proc.returncode is None:
                pid, status, usage = os.wait4(self.proc.pid, os.WNOHANG)
                if pid:
                    self.proc.returncode = os.waitstatus_to_exitcode(status)
                    self.cpu_seconds = usage.ru_utime + usage.ru_stime
                elif time.monotonic() > deadline:
                    self.proc.kill()
                    self.proc.wait(5)
                else:
                    time.sleep(0.005)
        finally:
            self.proc.stdout.close()  # type: ignore[union-attr]
            self._err.close()

    def cpu_so_far(self) -> float:
        return proc_cpu_seconds(self.proc.pid)

    def __enter__(self) -> StdioProc:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def spawn_stdio(
    target: Target, tools: int, tag: str, python_flags: Sequence[str] = ()
) -> StdioProc:
    return StdioProc(
        target.stdio_argv(tools, python_flags), target.env(tools), f"{target.kind}-{tag}"
    )


def check_echo(resp: dict[str, Any], x: int) -> None:
    """Raise unless ``resp`` is a successful tools/call result with y = x + 1."""
    if "error" in resp:
        raise AssertionError(f"JSON-RPC error: {resp['error']}")
    result = resp["result"]
    if result.get("isError") or result.get("structuredContent") != {"y": x + 1}:
        raise AssertionError(f"wrong tools/call result: {json.dumps(result)[:300]}")
    text = result["content"][0]["text"]
    if json.loads(text) != {"y": x + 1}:
        raise AssertionError(f"text content does not match structuredContent: {text[:200]}")


def proc_cpu_seconds(pid: int) -> float:
    """User + system CPU time of a live process, all its threads (from /proc; 10 ms ticks)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    ticks = os.sysconf("SC_CLK_TCK")
    return (int(fields[11]) + int(fields[12])) / ticks


# --- HTTP servers ---------------------------------------------------------------------------


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


HTTP_HEADERS = {
    "Content-Type": "application/json",
    "Accept": "application/json, text/event-stream",
    "MCP-Protocol-Version": PROTOCOL,
}


def http_post(
    port: int, body: bytes, timeout: float = 5.0, headers: dict[str, str] | None = None
) -> tuple[int, bytes]:
    """One POST to ``/mcp`` with the stdlib (connection closed afterwards)."""
    import http.client

    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=timeout)
    try:
        conn.request("POST", "/mcp", body=body, headers={**HTTP_HEADERS, **(headers or {})})
        resp = conn.getresponse()
        return resp.status, resp.read()
    finally:
        conn.close()


@dataclass
class HttpProc:
    target: Target
    port: int
    proc: subprocess.Popen[bytes]
    log_path: Path
    _log: Any = field(repr=False, default=None)

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(5)
        if self._log is not None:
            self._log.close()

    def cpu_seconds(self) -> float:
        return proc_cpu_seconds(self.proc.pid)


def start_http(
    target: Target,
    tools: int,
    probe_body: bytes,
    timeout: float = 30.0,
    headers: dict[str, str] | None = None,
) -> HttpProc:
    """Start the server on a free loopback port and wait until ``/mcp`` answers ``probe_body``."""
    port = free_port()
    log_path = LOG_DIR / f"{target.kind}-http.stderr"
    log = log_path.open("wb")
    proc = subprocess.Popen(
        target.http_argv(tools, port),
        stdin=subprocess.DEVNULL,
        stdout=log,
        stderr=subprocess.STDOUT,
        env=target.env(tools),
        cwd=RUN_DIR,
    )
    hp = HttpProc(target, port, proc, log_path, log)
    deadline = time.monotonic() + timeout
    while True:
        if proc.poll() is not None:
            hp.stop()
            raise ServerDied(
                f"{target.label} exited with {proc.returncode}; see {log_path.relative_to(REPO)}"
            )
        try:
            status, _ = http_post(port, probe_body, timeout=2.0, headers=headers)
            if status == 200:
                return hp
        except OSError:
            pass
        if time.monotonic() > deadline:
            hp.stop()
            raise TimeoutError(
                f"{target.label} did not answer on 127.0.0.1:{port} within {timeout:g} s"
            )
        time.sleep(0.1)


# --- statistics -------------------------------------------------------------------------------


def percentile(values: Sequence[float], q: float) -> float:
    """Nearest-rank percentile (q in 0..100)."""
    s = sorted(values)
    if not s:
        return float("nan")
    k = max(0, min(len(s) - 1, math.ceil(q / 100 * len(s)) - 1))
    return s[k]


def median(values: Iterable[float]) -> float:
    return float(statistics.median(list(values)))


def ratio(a: float, b: float) -> float:
    return a / b if b else float("nan")


def verdict(ok: bool) -> str:
    return "PASS" if ok else "MISS"


# --- machine facts and the results file ------------------------------------------------------


def nproc() -> int:
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # pragma: no cover - not Linux
        return os.cpu_count() or 0


def loadavg() -> str:
    try:
        return " ".join(f"{x:.2f}" for x in os.getloadavg())
    except OSError:  # pragma: no cover
        return "n/a"


def cpu_model() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown"


def package_version(name: str) -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version(name)
    except PackageNotFoundError:
        return "not installed"


def _system_ticks() -> tuple[int, int]:
    """(busy, total) CPU ticks of the whole machine since boot, from ``/proc/stat``.
    Busy includes ``steal``: time the hypervisor gave to other guests."""
    fields = [int(x) for x in Path("/proc/stat").read_text().split("\n", 1)[0].split()[1:9]]
    user, nice, system, _idle, _iowait, irq, softirq, steal = fields
    return user + nice + system + irq + softirq + steal, sum(fields)


def _own_seconds() -> float:
    """CPU seconds of this process plus every child it has reaped (servers, wrk, python)."""
    me = resource.getrusage(resource.RUSAGE_SELF)
    kids = resource.getrusage(resource.RUSAGE_CHILDREN)
    return me.ru_utime + me.ru_stime + kids.ru_utime + kids.ru_stime


class Machine:
    """Taken when a section starts: the load average then, and counters to tell at the end how
    much of the machine's CPU *other* processes used while the section ran."""

    BUSY_SHARE = 0.25  # other processes used a quarter of all cores: figures are suspect

    def __init__(self) -> None:
        self.load_before = loadavg()
        self._ticks = _system_ticks()
        self._own = _own_seconds()

    def others_share(self) -> float | None:
        try:
            busy, total = _system_ticks()
        except OSError:  # pragma: no cover - not Linux
            return None
        d_total = total - self._ticks[1]
        if d_total <= 0:
            return None
        own_ticks = (_own_seconds() - self._own) * os.sysconf("SC_CLK_TCK")
        return max(0.0, (busy - self._ticks[0] - own_ticks) / d_total)


def gateway_revision() -> str:
    """The commit the measured core comes from, and whether ``gateway/`` had local edits."""
    try:
        head = subprocess.run(
            ["git", "rev-parse", "--short", "HEAD"],
            cwd=REPO,
            capture_output=True,
            text=True,
            timeout=10,
        ).stdout.strip()
        dirty = subprocess.run(
            ["git", "status", "--porcelain", "--", "gateway"],
            cwd=REPO,
            capture_output=True,
            text=True,
            timeout=10,
        ).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        return "an unknown commit"
    if not head:
        return "an unknown commit"
    return f"commit {head}" + (" with uncommitted changes in gateway/" if dirty else "")


def facts_line(command: str, machine: Machine) -> str:
    """The header every figure section carries: when, where, load, how to rerun."""
    now = _dt.datetime.now().astimezone().strftime("%Y-%m-%d %H:%M %Z")
    share = machine.others_share()
    others = "n/a" if share is None else f"{share * 100:.0f}% of all {nproc()} cores"
    warn = share is not None and share >= Machine.BUSY_SHARE
    return (
        f"- Date: {now}; nproc: {nproc()} ({cpu_model()}); Python {platform.python_version()}; "
        f"mcp {package_version('mcp')}, mcp-plugin-gateway {package_version('mcp-plugin-gateway')} "
        f"at {gateway_revision()}\n"
        f"- Load average (1/5/15 min) before the run: {machine.load_before}; CPU used by other "
        f"processes during the run: {others}\n"
        f"- Rerun: `{command}`\n"
        + (
            "- **Warning**: other processes used a large share of the CPU during this run, so the "
            "wall-clock ratios are unreliable; compare the CPU-time cross-check, or rerun when "
            "the machine is quieter.\n"
            if warn
            else ""
        )
    )


SECTION_ORDER = (
    "summary",
    "cold",
    "imports",
    "startprofile",
    "latency",
    "http",
    "http-progress",
    "http-auth",
    "listsize",
    "redaction",
    "encodable",
)
TITLE = "# Gateway core benchmarks: gateway vs a bare low-level `mcp` server"
INTRO = (
    "Written by `bench/core_bench.py` (every section can be rerun on its own; `all` runs them in "
    "order, ~3 minutes). The baseline is `bench/core_bare_server.py`, a low-level "
    "`mcp.server.Server` serving trivial read tools `echo_0..echo_{N-1}` (`{x: int}` → "
    "`{y: x + 1}`) with explicit schemas, annotations and `get_tool_input_schema`. The cold start "
    "is measured twice: as a deployment runs (the gateway with every installed plugin, against "
    "the bare server listing as many tools) and for the core alone. The core-only figures and the "
    "other sections run the gateway with the same trivial tools from a generated plugin "
    "(`bench_trivial`, found as a real `mcp_gateway.plugins` entry point on `PYTHONPATH`, nothing "
    "installed) plus its built-in `gateway_status`. Every ratio compares figures from the same "
    "run. The machine is shared, so expect run-to-run variation of about ±25%.\n"
)


def _marker(name: str) -> tuple[str, str]:
    return f"<!-- BEGIN {name} -->", f"<!-- END {name} -->"


def read_sections() -> dict[str, str]:
    if not RESULTS.exists():
        return {}
    text = RESULTS.read_text(encoding="utf-8")
    out = {}
    for name in SECTION_ORDER:
        begin, end = _marker(name)
        m = re.search(re.escape(begin) + r"\n(.*?)" + re.escape(end), text, re.S)
        if m:
            out[name] = m.group(1)
    return out


def write_section(name: str, body: str) -> None:
    """Replace one section of ``bench/results/core.md`` (others are kept) and rebuild the summary."""
    sections = read_sections()
    sections[name] = body.rstrip("\n") + "\n"
    sections["summary"] = summary(sections)
    parts = [TITLE, "", INTRO]
    for key in SECTION_ORDER:
        if key in sections:
            begin, end = _marker(key)
            parts += [begin, sections[key].rstrip("\n"), end, ""]
    RESULTS.parent.mkdir(parents=True, exist_ok=True)
    RESULTS.write_text("\n".join(parts), encoding="utf-8")


_VERDICT = re.compile(
    r"^\*\*Target\*\* (?P<target>.+?): (?P<value>.+?) → \*\*(?P<v>PASS|MISS)\*\*", re.M
)


def summary(sections: dict[str, str]) -> str:
    rows = []
    for key in SECTION_ORDER:
        if key == "summary" or key not in sections:
            continue
        for m in _VERDICT.finditer(sections[key]):
            rows.append(f"| {m['target']} | {m['value']} | **{m['v']}** |")
    if not rows:
        return "## Summary\n\nNo targeted figure has been measured yet.\n"
    return (
        "## Summary\n\n| target (from the issue) | measured | verdict |\n|---|---|---|\n"
        + "\n".join(rows)
        + "\n\nDetails, per-run figures and the rerun command of each are in the sections below.\n"
    )


def fmt_ms(ns: float) -> str:
    return f"{ns / 1e6:.0f}"


def fmt_us(ns: float) -> str:
    return f"{ns / 1e3:.0f}"


def which(name: str) -> str | None:
    return shutil.which(name)
