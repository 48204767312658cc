"""The image's health check (deploy/container/healthcheck.py), also the Kubernetes probes: it
sends a Host header the gateway accepts, read the way the gateway reads its settings, and the
token where one is set; it says in one line why it fails."""

from __future__ import annotations

import runpy
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import gateway_env
from wire import HttpServer, free_port

pytestmark = pytest.mark.e2e

HEALTHCHECK = Path(__file__).resolve().parent.parent / "deploy" / "container" / "healthcheck.py"
TOKEN = "healthcheck-token-9d04b1"


@pytest.fixture
def host_header(monkeypatch):
    for name in ("MCP_GATEWAY_ALLOWED_HOSTS", "MCP_GATEWAY_CONFIG", "MCP_GATEWAY_TOKEN"):
        monkeypatch.delenv(name, raising=False)
    return runpy.run_path(str(HEALTHCHECK))["host_header"]


def test_the_host_sent_is_the_first_allowed_one_with_the_port_for_a_wildcard(
    host_header, monkeypatch, tmp_path
):
    assert host_header(8765) == "127.0.0.1:8765"  # nothing configured: the loopback default
    config = tmp_path / "gw.toml"
    config.write_text('[gateway]\nallowed_hosts = ["gw.example:*", "other"]\n')
    monkeypatch.setenv("MCP_GATEWAY_CONFIG", str(config))
    assert host_header(9000) == "gw.example:9000"
    # The variable wins over the file, as in the gateway; empty or an unexpanded reference
    # counts as unset.
    monkeypatch.setenv("MCP_GATEWAY_ALLOWED_HOSTS", "gateway.example.com, [::1]:*")
    assert host_header(9000) == "gateway.example.com"
    monkeypatch.setenv("MCP_GATEWAY_ALLOWED_HOSTS", "${HOSTS}")
    assert host_header(9000) == "gw.example:9000"
    monkeypatch.setenv("MCP_GATEWAY_ALLOWED_HOSTS", "")
    assert host_header(9000) == "gw.example:9000"
    # An unreadable file: the loopback default (the gateway reports its own file's errors).
    config.write_text("[gateway\n")
    assert host_header(9000) == "127.0.0.1:9000"


def _check(port: int, path: str, **env: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-I", "-S", str(HEALTHCHECK), path, str(port)],
        env={"PATH": "/usr/bin:/bin", **env},
        capture_output=True,
        text=True,
        timeout=30,
    )


def test_it_passes_against_gateways_with_and_without_allowed_hosts(tmp_path):
    hosts = {"MCP_GATEWAY_ALLOWED_HOSTS": "gw.example:*"}
    plain = gateway_env(MCP_GATEWAY_PLUGINS="queue", MCP_GATEWAY_TOKEN=TOKEN)
    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    with (
        HttpServer(tmp_path / "a", plain) as loopback,
        HttpServer(tmp_path / "b", {**plain, **hosts}) as named,
    ):
        for path in ("/healthz", "/readyz"):
            done = _check(loopback.port, path, MCP_GATEWAY_TOKEN=TOKEN)
            assert (done.returncode, done.stderr) == (0, ""), path
            done = _check(named.port, path, MCP_GATEWAY_TOKEN=TOKEN, **hosts)
            assert (done.returncode, done.stderr) == (0, ""), path
        # Without the names the gateway was given, it is refused (421): the header matters.
        refused = _check(named.port, "/healthz")
        assert refused.returncode == 1
        assert refused.stderr.startswith("healthcheck: GET /healthz: HTTP 421")
        # /readyz without the token: 401, and the check says so.
        unready = _check(loopback.port, "/readyz")
        assert unready.returncode == 1 and unready.stderr.count("\n") == 1
        assert unready.stderr.startswith("healthcheck: GET /readyz: HTTP 401")


def test_nothing_listening_fails_with_one_line_naming_the_port():
    port = free_port()
    done = _check(port, "/healthz")
    assert done.returncode == 1 and done.stderr.count("\n") == 1
    assert done.stderr.startswith(f"healthcheck: GET /healthz on port {port}: ")
