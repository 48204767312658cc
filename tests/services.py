"""Services that replicas of the gateway share, started for the tests as real processes:
Redis, PostgreSQL and HAProxy from Debian's packages, on 127.0.0.1, each on a free port with
its data in a folder of its own, stopped and removed when the ``with`` block ends.

    with redis_server() as redis: ...          # redis.url, redis.command("PING")
    with postgres_server() as pg: ...          # pg.dsn (a password-protected superuser)
    with haproxy([("127.0.0.1", 8001), ...], health_path="/healthz") as lb: ...   # lb.url

Each skips the test, saying why, when its program is not installed (.ci/run installs them).
PostgreSQL refuses to run as root: under root it runs as the ``postgres`` user (else
``nobody``).
"""

from __future__ import annotations

import contextlib
import glob
import os
import pwd
import secrets
import shutil
import signal
import socket
import subprocess
import tempfile
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

START_SECONDS = 60  # each waits this long for its service to answer, on a loaded machine too


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _program(name: str, *extra_dirs: str) -> str:
    found = shutil.which(name) or next(
        (str(Path(d) / name) for d in extra_dirs if (Path(d) / name).is_file()), None
    )
    if found is None:
        pytest.skip(f"{name} is needed (not installed; .ci/run installs it with apt-get)")
    return found


@contextlib.contextmanager
def _process(
    name: str,
    argv: list[str],
    log: Path,
    ready: Callable[[], bool],
    stop_signal: int = signal.SIGTERM,
    **popen: Any,
) -> Iterator[subprocess.Popen[bytes]]:
    """``argv`` running, its output in ``log``, once ``ready()``; stopped (``stop_signal``,
    then SIGKILL after 20 s) when the block ends."""
    with log.open("wb") as out:
        proc = subprocess.Popen(
            argv, stdin=subprocess.DEVNULL, stdout=out, stderr=subprocess.STDOUT, **popen
        )
    try:
        deadline = time.monotonic() + START_SECONDS
        while not ready():
            if proc.poll() is not None or time.monotonic() > deadline:
                what = f"exited with {proc.returncode}" if proc.poll() is not None else "no answer"
                raise AssertionError(f"{name} did not start ({what}):\n{_tail(log)}")
            time.sleep(0.05)
        yield proc
    finally:
        if proc.poll() is None:
            proc.send_signal(stop_signal)
            try:
                proc.wait(timeout=20)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()


def _tail(log: Path) -> str:
    try:
        return log.read_text(errors="replace")[-3000:]
    except OSError:
        return "(no output)"


def listening(port: int) -> bool:
    with socket.socket() as s:
        s.settimeout(1)
        return s.connect_ex(("127.0.0.1", port)) == 0


# --- Redis ------------------------------------------------------------------------------


@dataclass
class Redis:
    port: int
    password: str | None = None
    #: its working folder, removed when it stops
    folder: Path | None = None

    @property
    def url(self) -> str:
        auth = f":{self.password}@" if self.password else ""
        return f"redis://{auth}127.0.0.1:{self.port}/0"

    def command(self, *args: str) -> bytes:
        """One command in Redis's protocol over a fresh connection; the raw first reply line
        (``b"+PONG"``, ``b"$5"`` before a bulk string, ``b"-ERR ..."``)."""
        with socket.create_connection(("127.0.0.1", self.port), timeout=5) as s:
            if self.password:
                s.sendall(_resp("AUTH", self.password))
                s.makefile("rb").readline()
            s.sendall(_resp(*args))
            reader = s.makefile("rb")
            first = reader.readline().rstrip(b"\r\n")
            if first.startswith(b"$") and first != b"$-1":
                return reader.readline().rstrip(b"\r\n")
            return first


def _resp(*args: str) -> bytes:
    out = [f"*{len(args)}\r\n".encode()]
    for arg in args:
        data = arg.encode()
        out.append(b"$%d\r\n%s\r\n" % (len(data), data))
    return b"".join(out)


@contextlib.contextmanager
def redis_server(password: str | None = None) -> Iterator[Redis]:
    """Debian's redis-server, in memory only (no snapshots, no append-only file)."""
    program = _program("redis-server")
    with tempfile.TemporaryDirectory(prefix="mcp-gateway-redis-") as folder:
        redis = Redis(free_port(), password, Path(folder))
        argv = [program, "--port", str(redis.port), "--bind", "127.0.0.1", "--dir", folder]
        argv += ["--save", "", "--appendonly", "no", "--daemonize", "no", "--logfile", ""]
        if password:
            argv += ["--requirepass", password]

        def ready() -> bool:
            with contextlib.suppress(OSError):
                return redis.command("PING") == b"+PONG"
            return False

        with _process("redis-server", argv, Path(folder) / "log", ready):
            yield redis


# --- PostgreSQL -------------------------------------------------------------------------


@dataclass
class Postgres:
    port: int
    password: str
    user: str = "postgres"
    database: str = "postgres"
    #: the operating-system user the server runs as
    runs_as: str = ""
    pid: int = 0
    #: the cluster's folder, removed when it stops
    folder: Path | None = None

    @property
    def dsn(self) -> str:
        return f"postgresql://{self.user}:{self.password}@127.0.0.1:{self.port}/{self.database}"


def _pg_bin() -> Path:
    # Debian keeps the server's programs out of PATH, under /usr/lib/postgresql/<version>/bin.
    versions = sorted(
        glob.glob("/usr/lib/postgresql/*/bin"), key=lambda p: int(Path(p).parent.name)
    )
    return Path(_program("initdb", *reversed(versions))).parent


@contextlib.contextmanager
def postgres_server() -> Iterator[Postgres]:
    """A fresh cluster (initdb) and its server, TCP on 127.0.0.1 only, the superuser
    ``postgres`` with a random password (scram-sha-256), nothing synced to disk."""
    bindir = _pg_bin()
    account: pwd.struct_passwd | None = None
    if os.geteuid() == 0:
        for name in ("postgres", "nobody"):
            with contextlib.suppress(KeyError):
                account = pwd.getpwnam(name)
                break
        if account is None:
            pytest.skip("PostgreSQL refuses root, and neither a postgres nor a nobody user exists")
    owner: dict[str, Any] = (
        {"user": account.pw_uid, "group": account.pw_gid, "extra_groups": []}
        if account is not None
        else {}
    )
    pg = Postgres(free_port(), secrets.token_urlsafe(16))
    pg.runs_as = account.pw_name if account is not None else pwd.getpwuid(os.geteuid()).pw_name
    root = Path(tempfile.mkdtemp(prefix="mcp-gateway-postgres-"))
    pg.folder = root
    try:
        (root / "password").write_text(pg.password + "\n")
        if account is not None:
            for path in (root, root / "password"):
                os.chown(path, account.pw_uid, account.pw_gid)
        data = root / "data"
        init = subprocess.run(
            [
                *(str(bindir / "initdb"), "-D", str(data), "-U", pg.user),
                *("--auth=scram-sha-256", f"--pwfile={root / 'password'}", "--no-sync"),
                *("-E", "UTF8", "--locale=C"),
            ],
            cwd=root,
            capture_output=True,
            text=True,
            timeout=120,
            **owner,
        )
        assert init.returncode == 0, f"initdb failed:\n{init.stdout[-2000:]}{init.stderr[-2000:]}"
        argv = [str(bindir / "postgres"), "-D", str(data), "-p", str(pg.port)]
        for setting in (
            "listen_addresses=127.0.0.1",
            f"unix_socket_directories={root}",
            "fsync=off",
            "synchronous_commit=off",
            "full_page_writes=off",
        ):
            argv += ["-c", setting]

        def ready() -> bool:
            # The postmaster writes "ready" on line 8 of its pid file once it takes
            # connections (what pg_ctl -w waits for).
            with contextlib.suppress(OSError, IndexError):
                lines = (data / "postmaster.pid").read_text().splitlines()
                return lines[7].strip() == "ready"
            return False

        # SIGINT: PostgreSQL's "fast" shutdown (sessions ended, no recovery at next start).
        with _process(
            "postgres", argv, root / "log", ready, cwd=root, stop_signal=signal.SIGINT, **owner
        ) as proc:
            pg.pid = proc.pid
            yield pg
    finally:
        shutil.rmtree(root, ignore_errors=True)


# --- HAProxy ----------------------------------------------------------------------------


@dataclass
class HAProxy:
    port: int
    stats_port: int
    config: str

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    @property
    def stats_url(self) -> str:
        """HAProxy's statistics as CSV (``;csv``): a row per server, its ``status`` UP/DOWN."""
        return f"http://127.0.0.1:{self.stats_port}/stats;csv"


def haproxy_config(
    port: int,
    stats_port: int,
    backends: Sequence[tuple[str, int]],
    *,
    health_path: str | None = None,
    health_host: str | None = None,
    retries: int = 2,
    forward_for: bool = False,
) -> str:
    """Round robin over ``backends``. A request whose connection failed is tried again on
    another server (``retry-on conn-failure``, ``option redispatch 1``); nothing else is
    retried, so a request a server may have run (a mutation) is never sent twice. With
    ``health_path``, servers are checked every second (``GET`` with ``Host: health_host``:
    the gateway checks Host headers) and taken out while they fail. ``forward_for``: each
    request carries its client's address in ``X-Forwarded-For``."""
    lines = [
        "global",
        "    log stderr format raw local0 notice",
        "defaults",
        "    mode http",
        "    log global",
        "    timeout connect 2s",
        "    timeout client 60s",
        "    timeout server 60s",
        f"    retries {retries}",
        "    retry-on conn-failure",
        "    option redispatch 1",
        "frontend gateway",
        f"    bind 127.0.0.1:{port}",
        "    default_backend replicas",
        "frontend stats",
        f"    bind 127.0.0.1:{stats_port}",
        "    stats enable",
        "    stats uri /stats",
        "backend replicas",
        "    balance roundrobin",
    ]
    if forward_for:
        lines.append("    option forwardfor")
    check = ""
    if health_path:
        lines.append("    option httpchk")
        send = f"    http-check send meth GET uri {health_path}"
        lines.append(send + (f" hdr Host {health_host}" if health_host else ""))
        lines.append("    http-check expect status 200")
        check = " check inter 1s fall 2 rise 1"
    lines += [f"    server r{i} {host}:{p}{check}" for i, (host, p) in enumerate(backends)]
    return "\n".join(lines) + "\n"


@contextlib.contextmanager
def haproxy(
    backends: Sequence[tuple[str, int]],
    *,
    health_path: str | None = None,
    health_host: str | None = None,
    retries: int = 2,
    forward_for: bool = False,
) -> Iterator[HAProxy]:
    """Debian's haproxy in front of ``backends`` (see :func:`haproxy_config`), on a free port,
    in the foreground."""
    program = _program("haproxy")
    port, stats_port = free_port(), free_port()
    config = haproxy_config(
        port,
        stats_port,
        backends,
        health_path=health_path,
        health_host=health_host,
        retries=retries,
        forward_for=forward_for,
    )
    with tempfile.TemporaryDirectory(prefix="mcp-gateway-haproxy-") as folder:
        path = Path(folder) / "haproxy.cfg"
        path.write_text(config)
        checked = subprocess.run(
            [program, "-c", "-q", "-f", str(path)], capture_output=True, text=True, timeout=30
        )
        assert checked.returncode == 0, f"haproxy -c:\n{checked.stdout}{checked.stderr}"

        def ready() -> bool:
            return listening(port) and listening(stats_port)

        # -db: in the foreground, not a daemon; SIGUSR1 would be its soft stop, SIGTERM ends it.
        with _process("haproxy", [program, "-db", "-f", str(path)], Path(folder) / "log", ready):
            yield HAProxy(port, stats_port, config)
