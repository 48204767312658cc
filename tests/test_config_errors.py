"""An operator's configuration mistakes stop every command with exit 2 and one stderr line that
names the setting, where it came from (file:line or variable) and the closest valid name."""

from __future__ import annotations

import json
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
        ["gw.toml:2: [gateway] read_only: must be true or false, not 'banana'"],
    ),
    "a boolean variable that is not one": (
        None,
        {"MCP_GATEWAY_READ_ONLY": "maybe"},
        ["MCP_GATEWAY_READ_ONLY: must be true or false, not 'maybe'"],
    ),
    "a timeout that is not a number": (
        "[gateway]\ndefault_timeout = nan\n",
        {},
        ["gw.toml:2: [gateway] default_timeout: must be a finite number greater than 0, not nan"],
    ),
    "an infinite timeout variable": (
        None,
        {"MCP_GATEWAY_HEALTH_TIMEOUT": "inf"},
        ["MCP_GATEWAY_HEALTH_TIMEOUT: must be a finite number greater than 0, not 'inf'"],
    ),
    "a negative timeout": (
        "[gateway]\nload_timeout = -1\n",
        {},
        ["gw.toml:2: [gateway] load_timeout: must be greater than 0, not -1"],
    ),
    "a zero breaker count": (
        None,
        {"MCP_GATEWAY_BREAKER_FAILURES": "0"},
        ["MCP_GATEWAY_BREAKER_FAILURES: must be greater than 0, not '0'"],
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
        ["gw.toml:1: [gateway] read_only: must be true or false, not 'x'"],
    ),
    "a misspelt plugin table": (
        '[gateway]\nread_only = true\n\n[plugins.gitee]\nurl = "http://127.0.0.1:9"\n',
        {},
        ["gw.toml:4: unknown plugin table [plugins.gitee]", "did you mean [plugins.gitea]?"],
    ),
}


@pytest.mark.parametrize("case", list(MISTAKES))
def test_each_configuration_mistake_refuses_to_start_naming_it(tmp_path, case, cli_main):
    toml, env, parts = MISTAKES[case]
    line = _refused(_cli(tmp_path, "plugins", toml=toml, run=cli_main, **env), tmp_path)
    for part in parts:
        assert part in line, line


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
    (tmp_path / "gw.toml").write_text('[gateway]\ntoken = "0123456789"\n')
    starts = [
        ["--config", "table.toml", "serve"],
        ["--config", "table.toml", "serve", "--transport", "http", "--port", "0"],
        ["--config", "gw.toml", "serve", "--transport", "http", "--host", "::"],
    ]
    run = subprocess.run(
        [sys.executable, "-c", REFUSED_SERVES, json.dumps(starts)],
        cwd=tmp_path,
        env=gateway_env(),
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


def test_load_config_errors_never_carry_the_files_folder(tmp_path):
    (tmp_path / "gw.toml").write_text("[gateway\n")
    with pytest.raises(ConfigError) as info:
        load_config(tmp_path / "gw.toml", env={}, cwd=tmp_path)
    assert "gw.toml" in str(info.value) and "cannot be read" in str(info.value)
    assert str(tmp_path) not in str(info.value)


def test_the_readmes_configuration_example_is_accepted(tmp_path):
    readme = (REPO / "README.md").read_text()
    example = readme.split("## Configuration", 1)[1].split("```toml\n", 1)[1].split("```", 1)[0]
    (tmp_path / "gw.toml").write_text(example)
    config = load_config(tmp_path / "gw.toml", env={"GITEA_TOKEN": "t" * 20}, cwd=tmp_path)
    assert config.plugin_table("gitea")["token"] == "t" * 20
    assert config.origins["log_level"] == "gw.toml:" + str(
        example.splitlines().index(
            next(x for x in example.splitlines() if x.startswith("log_level"))
        )
        + 1
    )
