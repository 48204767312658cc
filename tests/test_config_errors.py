"""An operator's configuration mistakes stop every command with exit 2 and one stderr line that
names the setting, where it came from (file:line or variable) and the closest valid name."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from conftest import gateway_env

from gateway.config import ConfigError, load_config

REPO = Path(__file__).resolve().parent.parent

SHARED_API = """
from __future__ import annotations
from pydantic import BaseModel, ConfigDict
from gateway import Tier, hookimpl
from gateway.rest import RestBackend, RestTool, Route

API = RestBackend.define(
    "sharedapi", env_prefix="SHARED_API", settings_table="sharedapi", title="the shared API",
    health_path="/health",
)

class In(BaseModel):
    model_config = ConfigDict(extra="forbid")

@hookimpl
def register_tools(register):
    register(RestTool(name="shared_x", description="Read x.", input_model=In, tier=Tier.READ,
                      backend=API, route=Route("GET", "/x", what="x")))
"""


def _cli(tmp_path, *args: str, toml: str | None = None, run=None, **env: str):
    """``mcp-gateway ARGS`` in ``tmp_path``: a real process, or ``run`` (the ``cli_main``
    fixture) in this one."""
    if toml is not None:
        (tmp_path / "gw.toml").write_text(textwrap.dedent(toml))
        args = ("--config", "gw.toml", *args)
    if run is not None:
        return run(tmp_path, *args, env=gateway_env(**env))
    return subprocess.run(
        [sys.executable, "-m", "gateway.cli", *args],
        cwd=tmp_path,
        env=gateway_env(**env),
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=60,
    )


def _refused(result: subprocess.CompletedProcess[str], tmp_path) -> str:
    """The one line a refused start prints (and that nothing else happened): exit code 2,
    one stderr line, no traceback, nothing on stdout."""
    assert result.returncode == 2, (result.returncode, result.stderr)
    lines = result.stderr.splitlines()
    assert len(lines) == 1, result.stderr
    assert lines[0].startswith("mcp-gateway: ") and "Traceback" not in result.stderr
    assert str(tmp_path) not in result.stderr and result.stdout == ""
    return lines[0]


# (config file, environment, the line's expected parts)
MISTAKES = {
    "misspelt section": (
        "# deployment\n[gatway]\nread_only = true\n",
        {},
        ["gw.toml:2: unknown section [gatway]", "did you mean [gateway]?"],
    ),
    "setting outside any table": (
        "read_only = true\n",
        {},
        ["gw.toml:1: read_only belongs in the [gateway] table"],
    ),
    "misspelt setting": (
        "[gateway]\nread_only = false\nreadonly = true\n",
        {},
        ["gw.toml:3: [gateway] readonly: unknown setting; did you mean read_only?"],
    ),
    "unknown plugin in the allow-list": (
        '[gateway]\n\nplugins = ["queue", "gitee"]\n',
        {},
        ["gw.toml:3: [gateway] plugins: unknown plugin 'gitee'", "did you mean gitea?"],
    ),
    "unknown plugin in the block-list": (
        '[gateway]\ndisable_plugins = ["scrap"]\n',
        {},
        ["gw.toml:2: [gateway] disable_plugins: unknown plugin 'scrap'", "did you mean scrape?"],
    ),
    "unknown plugin in MCP_GATEWAY_PLUGINS": (
        None,
        {"MCP_GATEWAY_PLUGINS": "queue,nosuch"},
        ["MCP_GATEWAY_PLUGINS: unknown plugin 'nosuch' (installed: ", "queue"],
    ),
    "unknown plugin in MCP_GATEWAY_DISABLE_PLUGINS": (
        None,
        {"MCP_GATEWAY_DISABLE_PLUGINS": "qeue"},
        ["MCP_GATEWAY_DISABLE_PLUGINS: unknown plugin 'qeue'", "did you mean queue?"],
    ),
    "the built-in plugin disabled": (
        None,
        {"MCP_GATEWAY_DISABLE_PLUGINS": "gateway"},
        ["MCP_GATEWAY_DISABLE_PLUGINS: the built-in plugin 'gateway' cannot be disabled"],
    ),
    "unset $env in [gateway]": (
        '[gateway]\ntoken = { "$env" = "GW_UNSET_TOKEN_VAR" }\n',
        {},
        ["gw.toml:2: [gateway] token: $env variable GW_UNSET_TOKEN_VAR is not set"],
    ),
    "unset $env in a plugin table": (
        '[plugins.gitea]\nurl = "http://127.0.0.1:9"\ntoken = { "$env" = "GW_UNSET_GITEA" }\n',
        {},
        ["gw.toml:3: [plugins.gitea] token: $env variable GW_UNSET_GITEA is not set"],
    ),
    "a boolean that is not one": (
        '[gateway]\nread_only = "banana"\n',
        {},
        [
            "gw.toml:2: [gateway] read_only: must be true or false (a TOML boolean, without "
            "quotes), not 'banana'"
        ],
    ),
    "a boolean variable that is not one": (
        None,
        {"MCP_GATEWAY_READ_ONLY": "maybe"},
        ["MCP_GATEWAY_READ_ONLY: must be true or false, not 'maybe'"],
    ),
    "a timeout that is not a number": (
        "[gateway]\ndefault_timeout = nan\n",
        {},
        [
            "gw.toml:2: [gateway] default_timeout: must be a finite number from 0.1 to 86400, not nan"
        ],
    ),
    "an infinite timeout variable": (
        None,
        {"MCP_GATEWAY_HEALTH_TIMEOUT": "inf"},
        ["MCP_GATEWAY_HEALTH_TIMEOUT: must be a finite number from 0.1 to 300, not 'inf'"],
    ),
    "a negative timeout": (
        "[gateway]\nload_timeout = -1\n",
        {},
        ["gw.toml:2: [gateway] load_timeout: must be a finite number from 0.1 to 600, not -1"],
    ),
    "a zero breaker count": (
        None,
        {"MCP_GATEWAY_BREAKER_FAILURES": "0"},
        ["MCP_GATEWAY_BREAKER_FAILURES: must be a whole number from 1 to 1000, not '0'"],
    ),
    "an unknown log level": (
        '[gateway]\nlog_level = "LOUD"\n',
        {},
        ["gw.toml:2: [gateway] log_level: must be one of DEBUG, INFO, WARNING, ERROR, CRITICAL"],
    ),
    "a log level close to a real one": (
        None,
        {"MCP_GATEWAY_LOG_LEVEL": "warn"},
        ["MCP_GATEWAY_LOG_LEVEL: must be one of", "not 'WARN'; did you mean WARNING?"],
    ),
    "an unknown confirmation choice": (
        '[gateway]\nconfirm_each_call = "all"\n',
        {},
        ["[gateway] confirm_each_call: must be one of destructive, mutations, none, not 'all'"],
    ),
    "providers without a provider": (
        None,
        {"MCP_GATEWAY_PROVIDERS": "get_job"},
        ["MCP_GATEWAY_PROVIDERS: 'get_job' is not NAME=PROVIDER"],
    ),
    "providers that are not names": (
        "[gateway]\nproviders = { get_job = 3 }\n",
        {},
        ["gw.toml:2: [gateway] providers[get_job]: input should be a valid string"],
    ),
    "a key of an inline table": (
        'gateway = { read_only = "x" }\n',
        {},
        ["gw.toml:1: [gateway] read_only: must be true or false", "not 'x'"],
    ),
    "a misspelt plugin table": (
        '[gateway]\nread_only = true\n\n[plugins.gitee]\nurl = "http://127.0.0.1:9"\n',
        {},
        ["gw.toml:4: unknown plugin table [plugins.gitee]", "did you mean [plugins.gitea]?"],
    ),
    # Booleans in the file are TOML booleans; a variable keeps its forms (1, true, yes).
    "a boolean written as a number": (
        "[gateway]\nread_only = 1\n",
        {},
        ["gw.toml:2: [gateway] read_only: must be true or false (a TOML boolean", "not 1"],
    ),
    "a boolean written as a word": (
        '[gateway]\nread_only = "yes"\n',
        {},
        ["gw.toml:2: [gateway] read_only: must be true or false", "not 'yes'"],
    ),
    "the telemetry switch written as a word": (
        '[telemetry]\nenabled = "yes"\n',
        {},
        ["gw.toml:2: [telemetry] enabled: must be true or false", "not 'yes'"],
    ),
    # Numbers in a range that makes sense, the range said.
    "a timeout too short to ever finish": (
        "[gateway]\ndefault_timeout = 1e-300\n",
        {},
        [
            "gw.toml:2: [gateway] default_timeout: must be a finite number from 0.1 to 86400, not 1e-300"
        ],
    ),
    "a timeout longer than a day": (
        "[gateway]\ndefault_timeout = 1e308\n",
        {},
        ["[gateway] default_timeout: must be a finite number from 0.1 to 86400, not 1e+308"],
    ),
    "a breaker that never opens": (
        "[gateway]\nbreaker_failures = 9223372036854775807\n",
        {},
        ["gw.toml:2: [gateway] breaker_failures: must be a whole number from 1 to 1000"],
    ),
    "a literal token in the file": (
        '[gateway]\ntoken = "0123456789abcdef-literal"\n',
        {},
        [
            "gw.toml:2: [gateway] token holds a secret, which comes from the environment, never "
            "from the file: set MCP_GATEWAY_TOKEN instead"
        ],
    ),
    "an audit log that is a folder": (
        '[gateway]\naudit_log = "/"\n',
        {},
        ["gw.toml:2: [gateway] audit_log: '/' is a folder; name a file"],
    ),
    "an audit log below a file": (
        '[gateway]\naudit_log = "gw.toml/audit.jsonl"\n',
        {},
        ["gw.toml:2: [gateway] audit_log: 'audit.jsonl' cannot be created: 'gw.toml' on its path"],
    ),
    # Names of tools and plugins: a misspelt one would settle, deny or guard nothing.
    "a misspelt denied tool": (
        '[gateway]\ndeny_tools = ["delete_job", "cancel_jb"]\n',
        {},
        [
            "gw.toml:2: [gateway] deny_tools: no plugin registers a tool called 'cancel_jb'; "
            "did you mean cancel_job?"
        ],
    ),
    "a misspelt denied tool in MCP_GATEWAY_DENY_TOOLS": (
        None,
        {"MCP_GATEWAY_DENY_TOOLS": "delete_jobb"},
        [
            "MCP_GATEWAY_DENY_TOOLS: no plugin registers a tool called 'delete_jobb'; did you "
            "mean delete_job?"
        ],
    ),
    "a denied tool of a plugin that is not loaded": (
        None,
        {"MCP_GATEWAY_PLUGINS": "queue", "MCP_GATEWAY_DENY_TOOLS": "delete_job"},
        [
            "MCP_GATEWAY_DENY_TOOLS: no loaded plugin registers a tool called 'delete_job' (not "
            "loaded: ",
            "orchestrator",
        ],
    ),
    "a provider for a name nobody claims": (
        '[gateway.providers]\nget_jobb = "orchestrator"\n',
        {},
        [
            "gw.toml:1: [gateway] providers[get_jobb]: 'get_jobb' is neither an installed plugin "
            "nor a tool a plugin registers; did you mean get_job?"
        ],
    ),
    "a provider that is no plugin": (
        None,
        {"MCP_GATEWAY_PROVIDERS": "get_job=orchestrater"},
        [
            "MCP_GATEWAY_PROVIDERS[get_job]: 'orchestrater' is no installed plugin",
            "did you mean orchestrator?",
        ],
    ),
    "a provider that is no distribution of the plugin": (
        '[gateway.providers]\nqueue = "mcp-plugin-gateway-queu"\n',
        {},
        [
            "[gateway] providers[queue]: no installed distribution 'mcp-plugin-gateway-queu' "
            "provides plugin 'queue'",
            "did you mean mcp-plugin-gateway-queue?",
        ],
    ),
    "a misspelt tool scope under an allow-list": (
        '[gateway]\nplugins = ["queue"]\n\n[auth]\nissuer = "https://idp.example"\n\n'
        '[auth.tool_scopes]\nbulk_update_job_statsu = "queue:admin"\n',
        {},
        [
            "gw.toml:8: [auth.tool_scopes] bulk_update_job_statsu: no loaded plugin registers a "
            "tool called 'bulk_update_job_statsu'",
            "did you mean bulk_update_job_status?",
        ],
    ),
    "one scope for reading and changing": (
        '[auth]\nissuer = "https://idp.example"\nscopes = { read = "gw", mutate = "gw" }\n',
        {},
        ["gw.toml:3: [auth] scopes: read and mutate are both 'gw'"],
    ),
    "keys fetched again for every unknown kid": (
        '[auth]\nissuer = "https://idp.example"\njwks_refetch_seconds = 0\n',
        {},
        ["gw.toml:3: [auth] jwks_refetch_seconds: must be a finite number from 1 to 3600"],
    ),
}

#: A plugin's own settings that do not fit: a configuration mistake like the core's.
PLUGIN_MISTAKES = {
    "a misspelt key in a backend's table": (
        '[plugins.orchestrator]\nurll = "http://127.0.0.1:9"\n',
        {},
        "gw.toml:2: [plugins.orchestrator] urll: unknown setting; did you mean url?",
    ),
    "a URL that is not http": (
        None,
        {"COCKPIT_API_URL": "ftp://x"},
        "COCKPIT_API_URL: must be an http:// or https:// URL without query or fragment, e.g. "
        "http://127.0.0.1:8085, not 'ftp://x'",
    ),
    "a timeout that is not a number": (
        None,
        {"COCKPIT_API_REQUEST_TIMEOUT": "nan"},
        "COCKPIT_API_REQUEST_TIMEOUT: must be a finite number greater than 0 and at most 600, "
        "not 'nan'",
    ),
    "a negative size": (
        None,
        {"COCKPIT_API_MAX_RESPONSE_BYTES": "-1"},
        "COCKPIT_API_MAX_RESPONSE_BYTES: must be a whole number from 1024 to 1073741824, not '-1'",
    ),
    "a URL with a space": (
        None,
        {"GITEA_URL": "http://gitea example"},
        "GITEA_URL: must be an http:// or https:// URL",
    ),
    "a boolean written as a word": (
        '[plugins.gitea]\nverify_tls = "no"\n',
        {},
        "gw.toml:2: [plugins.gitea] verify_tls: must be true or false (a TOML boolean, without "
        "quotes), not 'no'",
    ),
    "a literal token": (
        '[plugins.gitea]\nurl = "http://127.0.0.1:9"\ntoken = "0123456789abcdef-literal"\n',
        {},
        "gw.toml:3: [plugins.gitea] token holds a secret, which comes from the environment, never "
        'from the file: set GITEA_TOKEN instead, or name a variable with { "$env" = "NAME" }',
    ),
    "a plugin's own setting": (
        "[plugins.queue]\ndb_path = 5\n",
        {},
        "gw.toml:2: [plugins.queue] db_path:",
    ),
}


@pytest.mark.parametrize("case", list(MISTAKES))
def test_each_configuration_mistake_refuses_to_start_naming_it(tmp_path, case, cli_main):
    toml, env, parts = MISTAKES[case]
    line = _refused(_cli(tmp_path, "plugins", toml=toml, run=cli_main, **env), tmp_path)
    for part in parts:
        assert part in line, line


@pytest.mark.parametrize("case", list(PLUGIN_MISTAKES))
def test_a_plugins_settings_mistake_refuses_to_start_naming_it(tmp_path, case, cli_main):
    toml, env, expected = PLUGIN_MISTAKES[case]
    line = _refused(_cli(tmp_path, "tools", toml=toml, run=cli_main, **env), tmp_path)
    assert line.startswith(f"mcp-gateway: {expected}"), line
    assert "0123456789abcdef-literal" not in line


@pytest.mark.parametrize("command", [["plugins"], ["health"]])
def test_plugins_and_health_show_every_plugin_then_exit_2_for_a_settings_mistake(
    tmp_path, command, cli_main
):
    done = _cli(tmp_path, *command, "--json", run=cli_main, COCKPIT_API_URL="ftp://x")
    line = "mcp-gateway: COCKPIT_API_URL: must be an http:// or https:// URL"
    assert done.returncode == 2 and done.stderr.startswith(line), done.stderr
    assert len(done.stderr.splitlines()) == 1, done.stderr  # no log line says it again
    report = json.loads(done.stdout)
    plugins = report if command == ["plugins"] else report["failed_plugins"]
    states = {p["name"]: (p["state"], p["reason"]) for p in plugins}
    assert states["orchestrator"][0] == "failed"
    assert states["orchestrator"][1] == "invalid settings: " + done.stderr.strip()[13:]
    if command == ["plugins"]:
        assert states["queue"] == ("loaded", None)  # the others are shown as they are


def _serve(tmp_path, *args: str, **env: str) -> subprocess.CompletedProcess[str]:
    """The installed ``mcp-gateway`` command, as Claude Code starts it, in ``tmp_path``."""
    return subprocess.run(
        [str(Path(sys.executable).parent / "mcp-gateway"), *args],
        cwd=tmp_path,
        env=gateway_env(**env),
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=60,
    )


@pytest.mark.parametrize("transport", [["serve"], ["serve", "--transport", "http", "--port", "0"]])
def test_serve_stops_for_a_misspelt_denied_tool_and_for_a_plugins_bad_setting(tmp_path, transport):
    # Each would have served a deployment other than the one configured: delete_job callable,
    # or the orchestrator's 30 tools gone.
    denied = _refused(_serve(tmp_path, *transport, MCP_GATEWAY_DENY_TOOLS="delete_jobb"), tmp_path)
    assert denied == (
        "mcp-gateway: MCP_GATEWAY_DENY_TOOLS: no plugin registers a tool called 'delete_jobb'; "
        "did you mean delete_job?"
    )
    (tmp_path / "gw.toml").write_text('[plugins.orchestrator]\nurll = "http://127.0.0.1:9"\n')
    table = _refused(_serve(tmp_path, "--config", "gw.toml", *transport), tmp_path)
    assert table == (
        "mcp-gateway: gw.toml:2: [plugins.orchestrator] urll: unknown setting; did you mean url?"
    )


@pytest.mark.parametrize(
    ("command", "in_process"),
    [
        # A real process for serve over either transport and for one of the commands that
        # only inspect (the exit code, stdout and stderr as a caller sees them); the others
        # share that command's path through the CLI.
        (["serve"], False),
        (["serve", "--transport", "http", "--port", "0"], False),
        (["tools"], False),
        (["health"], True),
        (["call", "gateway_status"], True),
        (["claude-config"], True),
    ],
)
def test_every_command_refuses_a_bad_configuration(tmp_path, command, in_process, cli_main):
    run = cli_main if in_process else None
    line = _refused(_cli(tmp_path, *command, run=run, MCP_GATEWAY_PLUGINS="nosuch"), tmp_path)
    assert "MCP_GATEWAY_PLUGINS: unknown plugin 'nosuch'" in line
    # A plugin table is checked once the plugins are loaded: a different path, same answer.
    table = _refused(_cli(tmp_path, *command, toml="[plugins.gitee]\n", run=run), tmp_path)
    assert "gw.toml:1: unknown plugin table [plugins.gitee]" in table


def test_tables_of_disabled_plugins_and_of_loaded_backends_are_valid(
    plugin_site, tmp_path, cli_main
):
    plugin_site("gwfx-shared", {"shared": "gwfx_shared"}, {"gwfx_shared": SHARED_API})
    toml = '[plugins.scrape]\n[plugins.sharedapi]\nurl = "http://127.0.0.1:9"\n'
    # scrape is installed but not in the allow-list; sharedapi is the backend table of "shared".
    ok = _cli(tmp_path, "plugins", "--json", toml=toml, run=cli_main, MCP_GATEWAY_PLUGINS="shared")
    assert ok.returncode == 0, ok.stderr
    # Without the plugin that reads it, the backend's table names nothing.
    line = _refused(
        _cli(tmp_path, "plugins", toml=toml, run=cli_main, MCP_GATEWAY_DISABLE_PLUGINS="shared"),
        tmp_path,
    )
    assert "gw.toml:2: unknown plugin table [plugins.sharedapi]" in line


def test_a_short_token_is_refused_on_a_non_loopback_address(tmp_path):
    # Refused before anything binds: no traffic leaves this machine.
    line = _refused(
        _cli(
            tmp_path,
            "serve",
            "--transport",
            "http",
            "--host",
            "192.0.2.10",
            MCP_GATEWAY_PLUGINS="queue",
            MCP_GATEWAY_TOKEN="short-token-15",
        ),
        tmp_path,
    )
    assert line == (
        "mcp-gateway: MCP_GATEWAY_TOKEN: 14 characters is too short to guard the non-loopback "
        "address 192.0.2.10; use at least 16 (e.g. from 'python3 -c \"import secrets; "
        "print(secrets.token_urlsafe(32))\"')"
    )
    assert "short-token-15" not in line  # a secret, even a bad one, is never printed
    # A token from the file: test_a_refused_serve_never_imports_the_sdk_or_the_web_stack.


REFUSED_SERVES = """
import json, sys
import gateway.cli
codes = [gateway.cli.main(argv) for argv in json.loads(sys.argv[1])]
served = {m.split(".")[0] for m in sys.modules if m.startswith(("mcp", "starlette", "uvicorn"))}
print(json.dumps([codes, sorted(served)]))
"""


def test_a_refused_serve_never_imports_the_sdk_or_the_web_stack(tmp_path):
    """Importing them is most of a start's CPU: a start that its configuration stops, before
    or after the plugins are loaded, is refused without them."""
    (tmp_path / "table.toml").write_text("[plugins.gitee]\n")
    (tmp_path / "gw.toml").write_text('[gateway]\ntoken = { "$env" = "GW_SHORT_TOKEN" }\n')
    starts = [
        ["--config", "table.toml", "serve"],
        ["--config", "table.toml", "serve", "--transport", "http", "--port", "0"],
        ["--config", "gw.toml", "serve", "--transport", "http", "--host", "::"],
    ]
    run = subprocess.run(
        [sys.executable, "-c", REFUSED_SERVES, json.dumps(starts)],
        cwd=tmp_path,
        env=gateway_env(GW_SHORT_TOKEN="0123456789"),
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert run.returncode == 0, run.stderr[-2000:]
    assert json.loads(run.stdout) == [[2, 2, 2], []], run.stderr[-2000:]
    table, table_http, token = run.stderr.splitlines()
    assert table == table_http and table.startswith(
        "mcp-gateway: table.toml:1: unknown plugin table [plugins.gitee]"
    )
    # A token from the file is named by its line there.
    assert token.startswith("mcp-gateway: gw.toml:2: [gateway] token: 10 characters")


def test_config_is_accepted_after_the_subcommand_too(tmp_path, cli_main):
    (tmp_path / "gw.toml").write_text('[gateway]\nplugins = ["queue"]\n')
    for args in (
        ["--config", "gw.toml", "tools", "--json"],
        ["tools", "--json", "--config", "gw.toml"],
    ):
        out = _cli(tmp_path, *args, run=cli_main)
        assert out.returncode == 0, out.stderr
        assert '"bulk_read_new_jobs"' in out.stdout and '"scrape_jobs"' not in out.stdout
    bad = _cli(tmp_path, "health", "--config", "missing.toml", run=cli_main)
    assert _refused(bad, tmp_path) == "mcp-gateway: config file 'missing.toml' not found"


# -- the command line ---------------------------------------------------------------------

USAGE = " (see mcp-gateway serve --help)"


@pytest.mark.parametrize(
    ("args", "line"),
    [
        (
            ["--port", "70000"],
            "argument --port: '70000' is not a port: use 1 to 65535 (0: any free port)" + USAGE,
        ),
        (
            ["--port", "-1"],
            "argument --port: '-1' is not a port: use 1 to 65535 (0: any free port)" + USAGE,
        ),
        (
            ["--host", "127.0.0.l"],
            "argument --host: '127.0.0.l' is neither an IP address nor a host name this machine "
            "resolves" + USAGE,
        ),
        (["--transport", "htp"], "argument --transport: invalid choice: 'htp'"),
    ],
)
def test_a_bad_address_is_one_line_and_exit_2(tmp_path, args, line):
    done = _serve(tmp_path, "serve", "--transport", "http", *args)
    assert _refused(done, tmp_path).startswith(f"mcp-gateway: {line}")


def test_host_and_port_without_http_are_a_mistake_not_ignored(tmp_path):
    done = _serve(tmp_path, "serve", "--port", "8000")
    assert _refused(done, tmp_path) == (
        "mcp-gateway: --port applies only to --transport http; stdio serves on standard input "
        "and output (add --transport http to listen on a port)"
    )
    both = _refused(_serve(tmp_path, "serve", "--host", "::1", "--port", "1"), tmp_path)
    assert both.startswith("mcp-gateway: --host and --port apply only to --transport http")


def test_a_port_in_use_is_one_line_and_exit_2(tmp_path):
    import socket

    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        done = _serve(
            tmp_path,
            "serve",
            "--transport",
            "http",
            "--port",
            str(port),
            MCP_GATEWAY_PLUGINS="queue",
        )
    assert _refused(done, tmp_path) == (
        f"mcp-gateway: --port {port}: port {port} on 127.0.0.1 is already in use (another "
        "server listens there); choose another with --port"
    )


def test_the_command_alone_prints_its_help(tmp_path):
    done = _serve(tmp_path)
    assert done.returncode == 0 and done.stderr == ""
    assert done.stdout.startswith("usage: mcp-gateway ")
    for command in ("serve", "plugins", "tools", "health", "call", "claude-config"):
        assert f"\n    {command} " in done.stdout


@pytest.mark.parametrize(
    ("command", "options"),
    [
        ("serve", ["--transport", "--host", "--port", "--config"]),
        ("plugins", ["--json", "--config"]),
        ("tools", ["--json", "--sizes", "--config"]),
        ("health", ["--json", "--config"]),
        ("call", ["--args", "--config"]),
        ("claude-config", ["--name", "--mcp-json", "--settings", "--add", "--json"]),
    ],
)
def test_each_commands_help_says_what_it_does_its_options_and_an_example(
    tmp_path, command, options, cli_main
):
    done = cli_main(tmp_path, command, "--help", env=gateway_env())
    assert done.returncode == 0, done.stderr
    text = done.stdout
    usage, what, rest = text.split("\n\n", 2)
    assert usage.startswith(f"usage: mcp-gateway {command}")
    assert len(what.split()) >= 12, what  # a sentence or more, not a label
    helped = [line.split()[0] for line in rest.splitlines() if line.startswith("  --")]
    for option in options:
        assert option in helped, option
        described = rest.split(option, 1)[1].split("\n  --", 1)[0]
        assert len(described.split()) >= 3, (option, described)  # every option is explained
    example = rest.split("\nexample", 1)[1]
    assert f"\n  mcp-gateway {command}" in example or f" {command}" in example.splitlines()[1]


def test_an_empty_variable_counts_as_unset_and_providers_parse(tmp_path):
    env = {
        "MCP_GATEWAY_READ_ONLY": "",
        "MCP_GATEWAY_PROVIDERS": "get_job=orchestrator, queue=mcp-plugin-gateway-queue",
    }
    config = load_config(env=env, cwd=tmp_path)
    assert config.read_only is False
    assert config.providers == {"get_job": "orchestrator", "queue": "mcp-plugin-gateway-queue"}
    (tmp_path / "gw.toml").write_text('[gateway.providers]\nget_job = "orchestrator"\n')
    assert load_config(tmp_path / "gw.toml", env={}, cwd=tmp_path).providers == {
        "get_job": "orchestrator"
    }


def test_the_audit_log_defaults_to_the_users_state_directory(tmp_path):
    state = tmp_path / "state"
    config = load_config(env={"XDG_STATE_HOME": str(state), "HOME": "/nowhere"}, cwd=tmp_path)
    assert config.audit_log == state / "mcp-gateway" / "audit.jsonl"
    # No (or a relative, hence invalid) XDG_STATE_HOME: ~/.local/state.
    for env in ({"HOME": str(tmp_path)}, {"HOME": str(tmp_path), "XDG_STATE_HOME": "rel"}):
        config = load_config(env=env, cwd=tmp_path / "project")
        assert config.audit_log == tmp_path / ".local/state/mcp-gateway/audit.jsonl"
    # An explicit setting wins; a relative one is relative to the working directory.
    env = {"XDG_STATE_HOME": str(state), "MCP_GATEWAY_AUDIT_LOG": "logs/audit.jsonl"}
    assert load_config(env=env, cwd=tmp_path).audit_log == tmp_path / "logs/audit.jsonl"


def test_the_config_file_is_named_as_it_was_given(tmp_path, monkeypatch):
    (tmp_path / "conf").mkdir()
    (tmp_path / "conf" / "gw.toml").write_text("[gateway\n")
    monkeypatch.chdir(tmp_path)
    for given in ("conf/gw.toml", str(tmp_path / "conf" / "gw.toml")):
        with pytest.raises(ConfigError) as info:
            load_config(given, env={}, cwd=tmp_path)
        assert str(info.value).startswith(f"config file {given!r} cannot be read: ")
    # From the command line, where the operator typed it.
    missing = _serve(tmp_path, "--config", "/nope/gw.toml", "serve")
    assert _refused(missing, tmp_path) == "mcp-gateway: config file '/nope/gw.toml' not found"


@pytest.mark.parametrize("via", ["option", "variable"])
def test_a_config_path_that_is_no_regular_file_is_refused_at_once(tmp_path, via):
    """A FIFO would keep the start waiting for a writer, /dev/zero would be read until memory
    runs out: only a regular file is read, and only up to 1 MiB."""
    os.mkfifo(tmp_path / "gw.fifo")
    (tmp_path / "zero.toml").symlink_to("/dev/zero")
    (tmp_path / "conf").mkdir()
    (tmp_path / "big.toml").write_text("# padding\n" * 110_000)  # over 1 MiB of comments
    for name, says in [
        ("gw.fifo", "is a FIFO, not a regular file"),
        ("zero.toml", "is a device, not a regular file"),
        ("conf", "is a folder, not a file"),
        ("big.toml", "is larger than 1 MiB: not a configuration file"),
    ]:
        if via == "option":
            done = _serve(tmp_path, "--config", name, "serve")
        else:
            done = _serve(tmp_path, "serve", MCP_GATEWAY_CONFIG=name)
        assert _refused(done, tmp_path) == f"mcp-gateway: config file {name!r} {says}"


def test_the_readmes_sample_configuration_loads_as_printed(tmp_path):
    """Copied as it is into a file, with none of its variables set, it serves: every installed
    plugin loads with it."""
    readme = (REPO / "README.md").read_text()
    section = readme.split("\n## Configuration\n", 1)[1]
    sample = section.split("```toml\n", 1)[1].split("```", 1)[0]
    (tmp_path / "gw.toml").write_text(sample)
    done = _serve(tmp_path, "--config", "gw.toml", "plugins", "--json")
    assert done.returncode == 0 and done.stderr == "", done.stderr
    states = {p["name"]: p["state"] for p in json.loads(done.stdout)}
    assert {"gateway", "queue", "gitea", "orchestrator"} <= set(states)
    assert set(states.values()) == {"loaded"}
    config = load_config(tmp_path / "gw.toml", env={}, cwd=tmp_path)
    lines = sample.splitlines()
    log_level = next(i for i, x in enumerate(lines, 1) if x.startswith("log_level"))
    assert config.origins["log_level"] == f"gw.toml:{log_level}"
