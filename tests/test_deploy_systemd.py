"""The systemd unit (deploy/mcp-gateway.service): systemd itself finds nothing wrong with it
(``systemd-analyze verify``, where installed), and its command line, environment and
directories, run here as systemd would run them, serve and put the audit log where the unit
says."""

from __future__ import annotations

import json
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

import httpx
import pytest
from conftest import gateway_env
from wire import MCP_HEADERS, free_port, wait_listening

pytestmark = pytest.mark.e2e

UNIT = Path(__file__).resolve().parent.parent / "deploy" / "mcp-gateway.service"
INSTALLED = "/opt/mcp-gateway/bin/mcp-gateway"
TOKEN = "systemd-unit-token-c8e15a"


def unit() -> dict[str, list[tuple[str, str]]]:
    """[Section] → its (key, value) lines in order (a key may repeat: Environment=)."""
    sections: dict[str, list[tuple[str, str]]] = {}
    current: list[tuple[str, str]] | None = None
    for raw in UNIT.read_text().splitlines():
        line = raw.strip()
        if not line or line.startswith(("#", ";")):
            continue
        assert not line.endswith("\\"), "no continued lines: the parse below would miss them"
        if line.startswith("[") and line.endswith("]"):
            current = sections.setdefault(line[1:-1], [])
            continue
        key, sep, value = line.partition("=")
        assert sep and current is not None, line
        current.append((key.strip(), value.strip()))
    return sections


def service(key: str) -> list[str]:
    return [v for k, v in unit()["Service"] if k == key]


def _mcp_gateway() -> str:
    return str(Path(sys.executable).parent / "mcp-gateway")


NO_SYSTEMD = pytest.mark.skipif(
    shutil.which("systemd-analyze") is None, reason="systemd-analyze not on PATH"
)


@NO_SYSTEMD
def test_systemd_analyze_verify_finds_nothing(tmp_path):
    # The one thing that differs here: the gateway is installed in this venv, not /opt.
    copy = tmp_path / UNIT.name
    copy.write_text(UNIT.read_text().replace(INSTALLED, _mcp_gateway()))
    done = subprocess.run(
        ["systemd-analyze", "verify", str(copy)], capture_output=True, text=True, timeout=60
    )
    # verify exits 0 on an unknown key or a misspelt value, but says so: nothing may be said.
    assert (done.returncode, done.stderr, done.stdout) == (0, "", "")


@NO_SYSTEMD
def test_a_misspelt_setting_is_what_verify_reports(tmp_path):
    copy = tmp_path / UNIT.name
    text = UNIT.read_text().replace(INSTALLED, _mcp_gateway())
    copy.write_text(text.replace("Restart=on-failure", "Restart=on-fialure"))
    done = subprocess.run(
        ["systemd-analyze", "verify", str(copy)], capture_output=True, text=True, timeout=60
    )
    assert "on-fialure" in done.stderr


def test_the_units_command_serves_and_audits_where_the_unit_says(tmp_path):
    (command,) = service("ExecStart")
    argv = shlex.split(command)
    assert argv[0] == INSTALLED and argv[1:4] == ["serve", "--transport", "http"]
    port = free_port()
    # Here: this venv's gateway, on loopback and a free port.
    argv = [_mcp_gateway(), *argv[1:]]
    argv[argv.index("--host") + 1] = "127.0.0.1"
    argv[argv.index("--port") + 1] = str(port)

    # systemd's specifiers and directories: %S the state root, %C the cache root.
    state, cache = tmp_path / "var-lib", tmp_path / "var-cache"
    (directory,) = service("StateDirectory")
    (cache_directory,) = service("CacheDirectory")
    (state / directory).mkdir(parents=True)
    (cache / cache_directory).mkdir(parents=True)
    env = gateway_env(MCP_GATEWAY_PLUGINS="notes")
    for assignments in service("Environment"):
        for assignment in shlex.split(assignments):
            key, _, value = assignment.partition("=")
            env[key] = value.replace("%S", str(state)).replace("%C", str(cache))
    # The EnvironmentFile holds the token; the TOML file is the deployment's own.
    (env_file,) = service("EnvironmentFile")
    config = tmp_path / "gateway.toml"
    config.write_text("[gateway]\n")
    assert env.pop("MCP_GATEWAY_CONFIG") == str(Path(env_file).parent / "gateway.toml")
    env["MCP_GATEWAY_CONFIG"] = str(config)
    env["MCP_GATEWAY_TOKEN"] = TOKEN
    (cwd,) = service("WorkingDirectory")
    cwd_path = Path(cwd.replace("%S", str(state)))
    assert cwd_path == state / directory

    proc = subprocess.Popen(
        argv, cwd=cwd_path, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE
    )
    try:
        with httpx.Client(timeout=20) as client:
            url = f"http://127.0.0.1:{port}"
            assert wait_listening(client, url, proc), proc.stderr.read() if proc.stderr else ""
            body = {
                "jsonrpc": "2.0",
                "id": 1,
                "method": "tools/call",
                "params": {"name": "notes_add", "arguments": {"text": "from the unit"}},
            }
            headers = {**MCP_HEADERS, "Authorization": f"Bearer {TOKEN}"}
            answer = client.post(url + "/mcp", json=body, headers=headers)
            assert answer.status_code == 200 and not answer.json()["result"]["isError"]
    finally:
        proc.terminate()
        code = proc.wait(timeout=30)
    assert code == 0  # SIGTERM, what systemd sends on stop: a clean exit
    audit = state / "mcp-gateway" / "audit.jsonl"
    lines = [json.loads(line) for line in audit.read_text().splitlines()]
    assert [(a["tool"], a["outcome"]) for a in lines] == [
        ("notes_add", "STARTED"),
        ("notes_add", "OK"),
    ]
