"""Server tables as people write them: every key checked, every mistake one line with exit 2."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from gateway_servers.tables import from_mcp_json, from_tables, server_spec

from gateway.config import ConfigError
from gateway.spec import Tier


def spec_of(table: dict[str, object], env: dict[str, str] | None = None) -> object:
    return server_spec("fs", table, env or {}, where="gw.toml:3", label="[servers.fs]")


def mistake(table: object, env: dict[str, str] | None = None, name: str = "fs") -> str:
    with pytest.raises(ConfigError) as caught:
        server_spec(name, table, env or {}, where="gw.toml:3", label=f"[servers.{name}]")
    message = str(caught.value)
    assert "\n" not in message
    return message


def test_a_stdio_table_has_the_keys_of_an_mcp_json_entry_and_the_gateways_own(
    tmp_path: Path,
) -> None:
    home = str(tmp_path / "me")
    spec = server_spec(
        "fs",
        {
            "command": "npx",
            "args": ["-y", "@modelcontextprotocol/server-filesystem", "${HOME}/notes"],
            "env": {"DEBUG": "${DEBUG:-0}"},
            "cwd": "/srv",
            "tools": ["read_file"],
            "deny_tools": ["write_file"],
            "prefix": "fs_",
            "tiers": {"read_file": "read"},
            "timeout": 10,
            "pin": "approve",
            "list_wait": 2,
            "protocol": "2026-07-28",
        },
        {"HOME": home},
        where="gw.toml:3",
        label="[servers.fs]",
    )
    assert spec.command == "npx" and spec.transport == "stdio"
    assert spec.args == ("-y", "@modelcontextprotocol/server-filesystem", f"{home}/notes")
    assert spec.env == {"DEBUG": "0"}
    assert (spec.cwd, spec.tools, spec.deny_tools, spec.prefix) == (
        "/srv",
        ("read_file",),
        ("write_file",),
        "fs_",
    )
    assert spec.tiers == {"read_file": Tier.READ}
    assert (spec.timeout, spec.pin, spec.list_wait, spec.origin) == (10, "approve", 2, "gw.toml:3")
    assert spec.protocol == "2026-07-28"


def test_an_http_table_takes_url_and_headers() -> None:
    spec = server_spec(
        "remote",
        {
            "type": "http",
            "url": "https://mcp.example/mcp",
            "headers": {"Authorization": "Bearer ${TOKEN}"},
        },
        {"TOKEN": "t0k"},
        where="gw.toml:9",
        label="[servers.remote]",
    )
    assert spec.transport == "http" and spec.command is None
    assert spec.headers == {"Authorization": "Bearer t0k"}


@pytest.mark.parametrize(
    ("table", "says"),
    [
        ({"comand": "x"}, "gw.toml:3: [servers.fs] comand: unknown key; did you mean command?"),
        (
            {"command": "x", "timeout": "soon"},
            "gw.toml:3: [servers.fs] timeout: must be a finite number greater than 0, not 'soon'",
        ),
        (
            {"command": "x", "timeout": 0},
            "gw.toml:3: [servers.fs] timeout: must be a finite number greater than 0, not 0",
        ),
        (
            {"command": "x", "tiers": {"a": "write"}},
            "gw.toml:3: [servers.fs] tiers.a: must be one of read, mutation",
        ),
        (
            {"command": "x", "pin": "never"},
            "gw.toml:3: [servers.fs] pin: must be one of first-use, approve",
        ),
        (
            {"command": "x", "protocol": "2026"},
            "gw.toml:3: [servers.fs] protocol: must be one of 2025-11-25, 2026-07-28",
        ),
        (
            {"command": "x", "prefix": "a b"},
            "gw.toml:3: [servers.fs] prefix: string should match pattern",
        ),
        ({"args": ["x"]}, "gw.toml:3: [servers.fs] command: a stdio server needs command"),
        (
            {"command": "x", "url": "http://a/mcp"},
            "gw.toml:3: [servers.fs] command: a server has either command",
        ),
        ({"type": "http"}, "gw.toml:3: [servers.fs] url: an http server needs url"),
        (
            {"url": "http://a/mcp", "args": ["x"]},
            "gw.toml:3: [servers.fs] args: only a stdio server",
        ),
        (
            {"command": "x", "headers": {"A": "b"}},
            "gw.toml:3: [servers.fs] headers: only an http server",
        ),
        ({"url": "ftp://a"}, "gw.toml:3: [servers.fs] url: string should match pattern"),
        (
            {"type": "sse", "url": "http://a/sse"},
            "gw.toml:3: [servers.fs] type: 'sse' (the old HTTP+SSE transport) is not supported",
        ),
        (
            {"command": "x", "env": {"KEY": 5}},
            "gw.toml:3: [servers.fs] env.KEY: input should be a valid string",
        ),
        ("npx", "gw.toml:3: [servers.fs] must be a table"),
    ],
)
def test_each_mistake_names_the_server_and_key(table: object, says: str) -> None:
    assert mistake(table).startswith(says)


def test_an_unset_reference_names_the_variable_and_where() -> None:
    message = mistake({"command": "x", "env": {"KEY": "${PARTNER_KEY}"}})
    assert message == (
        "gw.toml:3: [servers.fs] env: ${PARTNER_KEY} is not set; export PARTNER_KEY or write "
        "${PARTNER_KEY:-default}"
    )


def test_a_value_given_for_a_credential_is_never_echoed() -> None:
    message = mistake(
        {"url": "http://a/mcp", "headers": {"Authorization": ["Bearer", "s3cret-value"]}}
    )
    assert "s3cret-value" not in message


def test_a_server_name_is_letters_digits_and_a_few_marks() -> None:
    assert "a server name is letters, digits" in mistake({"command": "x"}, name="my server")


def write_mcp_json(tmp_path: Path, servers: object) -> Path:
    path = tmp_path / ".mcp.json"
    path.write_text(json.dumps({"mcpServers": servers}))
    return path


def test_every_entry_of_an_mcp_json_is_mounted_as_it_is(tmp_path: Path) -> None:
    path = write_mcp_json(
        tmp_path,
        {
            "memory": {"command": "npx", "args": ["-y", "@modelcontextprotocol/server-memory"]},
            "remote": {"type": "http", "url": "https://mcp.example/mcp"},
            "plain": {"type": "stdio", "command": "srv", "env": {"A": "${A:-1}"}},
        },
    )
    specs = from_mcp_json(str(path), {}, "MCP_GATEWAY_SERVERS")
    assert [(s.name, s.transport) for s in specs] == [
        ("memory", "stdio"),
        ("remote", "http"),
        ("plain", "stdio"),
    ]
    assert specs[2].env == {"A": "1"}
    assert specs[0].origin == "MCP_GATEWAY_SERVERS (.mcp.json)"


@pytest.mark.parametrize(
    ("content", "says"),
    [
        (None, "MCP_GATEWAY_SERVERS: .mcp.json not found"),
        ("{not json", "MCP_GATEWAY_SERVERS: .mcp.json cannot be read (not valid JSON)"),
        ('{"servers": {}}', "MCP_GATEWAY_SERVERS (.mcp.json): no mcpServers object"),
        (
            '{"mcpServers": {"m": {"command": "x", "argz": []}}}',
            "MCP_GATEWAY_SERVERS (.mcp.json): mcpServers.m argz: unknown key; did you mean args?",
        ),
    ],
)
def test_a_broken_mcp_json_is_one_line(tmp_path: Path, content: str | None, says: str) -> None:
    path = tmp_path / ".mcp.json"
    if content is not None:
        path.write_text(content)
    with pytest.raises(ConfigError, match="^" + __import__("re").escape(says)):
        from_mcp_json(str(path), {}, "MCP_GATEWAY_SERVERS")


def test_tables_carry_where_they_were_written() -> None:
    specs = from_tables(
        {"a": {"command": "x"}, "b": {"url": "http://b/mcp"}},
        {"servers.a": "gw.toml:1", "servers.b": "gw.toml:4"},
        {},
        "gw.toml",
    )
    assert [s.origin for s in specs] == ["gw.toml:1", "gw.toml:4"]


# --- through the CLI: exit 2 and one line ------------------------------------------------------


def run(tmp_path: Path, *args: str, **env: str) -> subprocess.CompletedProcess[str]:
    environment = {k: v for k, v in os.environ.items() if not k.startswith("MCP_GATEWAY_")}
    environment.update(env)
    return subprocess.run(
        [sys.executable, "-m", "gateway.cli", *args],
        cwd=tmp_path,
        env=environment,
        capture_output=True,
        text=True,
        timeout=60,
    )


def one_line(done: subprocess.CompletedProcess[str]) -> str:
    assert done.returncode == 2, (done.returncode, done.stdout, done.stderr)
    lines = done.stderr.splitlines()
    assert len(lines) == 1, lines
    return lines[0]


def test_a_mistake_in_a_servers_table_stops_the_command_with_one_line(tmp_path: Path) -> None:
    (tmp_path / "gw.toml").write_text(
        '[gateway]\nread_only = false\n\n[servers.fs]\ncommand = "x"\ntimout = 5\n'
    )
    line = one_line(run(tmp_path, "--config", "gw.toml", "tools"))
    assert line == "mcp-gateway: gw.toml:4: [servers.fs] timout: unknown key; did you mean timeout?"


def test_an_unset_env_reference_in_a_servers_table_stops_with_its_line(tmp_path: Path) -> None:
    (tmp_path / "gw.toml").write_text(
        '[servers.fs]\ncommand = "x"\nenv = { KEY = { "$env" = "UNSET_3c9" } }\n'
    )
    line = one_line(run(tmp_path, "--config", "gw.toml", "plugins"))
    assert line == "mcp-gateway: gw.toml:3: [servers.fs] env: $env variable UNSET_3c9 is not set"


def test_servers_without_the_plugin_name_the_distribution_to_install(tmp_path: Path) -> None:
    (tmp_path / "gw.toml").write_text('[servers.fs]\ncommand = "x"\n')
    line = one_line(
        run(tmp_path, "--config", "gw.toml", "tools", MCP_GATEWAY_DISABLE_PLUGINS="servers")
    )
    assert line.startswith(
        "mcp-gateway: gw.toml:1: [servers]: the plugin servers that mounts them is disabled"
    )
    path = write_mcp_json(tmp_path, {"m": {"command": "x"}})
    line = one_line(
        run(tmp_path, "serve", MCP_GATEWAY_SERVERS=str(path), MCP_GATEWAY_PLUGINS="queue")
    )
    assert line.startswith(
        "mcp-gateway: MCP_GATEWAY_SERVERS: the plugin servers that mounts them is not in the allow-list"
    )


def test_an_mcp_json_mistake_stops_serve_with_one_line(tmp_path: Path) -> None:
    path = write_mcp_json(tmp_path, {"m": {"command": "x", "url": "http://m/mcp"}})
    line = one_line(run(tmp_path, "serve", "--transport", "http", MCP_GATEWAY_SERVERS=str(path)))
    assert (
        line
        == "mcp-gateway: MCP_GATEWAY_SERVERS (.mcp.json): mcpServers.m command: a server has either command (stdio) or url (http)"
    )


def test_a_name_configured_twice_is_refused(tmp_path: Path) -> None:
    (tmp_path / "gw.toml").write_text('[servers.m]\ncommand = "x"\n')
    path = write_mcp_json(tmp_path, {"m": {"command": "y"}})
    line = one_line(run(tmp_path, "--config", "gw.toml", "plugins", MCP_GATEWAY_SERVERS=str(path)))
    assert line == (
        "mcp-gateway: MCP_GATEWAY_SERVERS (.mcp.json): mcpServers.m: a server of that name is also "
        "configured at gw.toml:1; rename one of them"
    )
