"""Configuration (TOML + environment) and the command line."""

from __future__ import annotations

import json
import os
import shlex
import subprocess
import sys
from pathlib import Path

import anyio
import pytest
from conftest import gateway_env
from fixture_plugins import SVC

from gateway.config import ConfigError, load_config
from gateway.plugins import PluginState
from gateway.testing import make_gateway


def test_environment_overrides_the_file_and_lists_parse(tmp_path):
    cfg = tmp_path / "gw.toml"
    cfg.write_text(
        '[gateway]\nread_only = false\ndefault_timeout = 12\nplugins = ["a", "b"]\n'
        'token = { "$env" = "GW_TOKEN_SOURCE" }\n[plugins.svc]\nurl = "http://file.example"\n'
    )
    env = {
        "MCP_GATEWAY_READ_ONLY": "yes",
        "MCP_GATEWAY_DISABLE_PLUGINS": "x, y",
        "GW_TOKEN_SOURCE": "tok-123456",
    }
    config = load_config(cfg, env=env, cwd=tmp_path)
    assert config.read_only is True
    assert config.default_timeout == 12
    assert config.plugins == ["a", "b"]
    assert config.disable_plugins == ["x", "y"]
    assert config.token is not None and config.token.get_secret_value() == "tok-123456"
    assert config.plugin_table("svc") == {"url": "http://file.example"}
    assert config.origins["read_only"] == "MCP_GATEWAY_READ_ONLY"
    assert config.origins["default_timeout"] == "gw.toml:3"


@pytest.mark.parametrize(
    ("text", "env", "fragment"),
    [
        ("[gateway]\nreadonly = true\n", {}, "gw.toml:2: [gateway] readonly: unknown setting"),
        ("[gateway]\ndefault_timeout = -1\n", {}, "default_timeout"),
        ("[gateway\n", {}, "gw.toml' cannot be read"),
        ("", {"MCP_GATEWAY_READ_ONLY": "maybe"}, "MCP_GATEWAY_READ_ONLY"),
    ],
)
def test_bad_core_config_is_a_clear_error(tmp_path, text, env, fragment):
    cfg = tmp_path / "gw.toml"
    cfg.write_text(text)
    with pytest.raises(ConfigError, match=None) as info:
        load_config(cfg, env=env, cwd=tmp_path)
    assert fragment in str(info.value)
    if "cannot be read" not in fragment:  # the file is named as given; a setting by its name
        assert str(tmp_path) not in str(info.value)


def test_plugin_settings_come_from_the_table_env_refs_and_declared_env_vars(plugin_site, tmp_path):
    plugin_site("gwfx-svc", {"svc": "gwfx_svc"}, {"gwfx_svc": SVC})
    table = {"svc": {"url": {"$env": "SVC_URL_FROM_REF"}}}
    gw = make_gateway(
        plugins=["svc"],
        plugin_config=table,
        env={"SVC_URL_FROM_REF": "http://ref.example"},
        cwd=tmp_path,
    )
    assert gw.plugin("svc").context.settings.url == "http://ref.example"
    gw = make_gateway(
        plugins=["svc"],
        plugin_config=table,
        env={"SVC_URL_FROM_REF": "http://ref.example", "SVC_URL": "http://env.example"},
        cwd=tmp_path,
    )
    assert gw.plugin("svc").context.settings.url == "http://env.example"
    bad = make_gateway(
        plugins=["svc"], plugin_config={"svc": {"colour": "red"}}, env={}, cwd=tmp_path
    )
    rec = bad.plugin("svc")
    assert rec.state is PluginState.FAILED and "colour" in (rec.reason or "")


def _run(tmp_path, *args, **env) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "gateway.cli", *args],
        cwd=tmp_path,
        env=gateway_env(**env),
        capture_output=True,
        text=True,
        timeout=60,
    )


def _python(
    tmp_path, code: str, *args: str, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    """``code`` run by a fresh interpreter (what it imports is a start's own)."""
    return subprocess.run(
        [sys.executable, "-c", code, *args],
        cwd=tmp_path,
        env=gateway_env() if env is None else env,
        capture_output=True,
        text=True,
        timeout=120,
    )


@pytest.fixture
def cli(cli_main):
    """``_run``'s twin in this process, for the tests of what a command prints."""

    def run(tmp_path, *args, **env) -> subprocess.CompletedProcess[str]:
        return cli_main(tmp_path, *args, env=gateway_env(**env))

    return run


def test_cli_lists_plugins_and_tools_as_json(tmp_path, cli):
    plugins = json.loads(cli(tmp_path, "plugins", "--json", MCP_GATEWAY_PLUGINS="notes").stdout)
    states = {p["name"]: (p["state"], p["tool_count"]) for p in plugins}
    assert states["notes"] == ("loaded", 3) and states["gateway"] == ("loaded", 1)
    tools = json.loads(cli(tmp_path, "tools", "--json", MCP_GATEWAY_PLUGINS="notes").stdout)
    assert {(t["name"], t["tier"]) for t in tools} >= {
        ("notes_add", "mutation"),
        ("notes_search", "read"),
    }


def test_cli_call_goes_through_the_pipeline(tmp_path, cli):
    ok = cli(
        tmp_path, "call", "notes_add", "--args", '{"text": "cli"}', MCP_GATEWAY_PLUGINS="notes"
    )
    assert ok.returncode == 0 and json.loads(ok.stdout)["text"] == "cli"
    bad = cli(
        tmp_path, "call", "notes_add", "--args", '{"txt": "cli"}', MCP_GATEWAY_PLUGINS="notes"
    )
    assert bad.returncode == 1 and json.loads(bad.stdout)["error"]["code"] == "VALIDATION_ERROR"
    broken = cli(tmp_path, "call", "notes_add", "--args", "{not json", MCP_GATEWAY_PLUGINS="notes")
    assert broken.returncode == 2 and "not valid JSON" in broken.stderr


def test_cli_health_exit_code_follows_required_checks(plugin_site, tmp_path, cli):
    from backends import closed_port_url

    plugin_site("gwfx-svc", {"svc": "gwfx_svc"}, {"gwfx_svc": SVC})
    pp = os.environ["PYTHONPATH"]
    good = cli(tmp_path, "health", "--json", MCP_GATEWAY_PLUGINS="notes")
    assert good.returncode == 0 and json.loads(good.stdout)["ok"] is True
    # The exit code a failed check gives a script, from a real process.
    down = _run(
        tmp_path,
        "health",
        "--json",
        MCP_GATEWAY_PLUGINS="svc",
        PYTHONPATH=pp,
        SVC_URL=closed_port_url(),
    )
    report = json.loads(down.stdout)
    assert down.returncode == 1 and report["checks"][0]["status"] == "failed"


def test_claude_config_json_has_every_part_with_an_absolute_command(tmp_path, cli):
    r = cli(tmp_path, "claude-config", "--json", "--name", "jobs gw", MCP_GATEWAY_PLUGINS="notes")
    assert r.returncode == 0, r.stderr
    out = json.loads(r.stdout)
    entry = out["mcp_json"]["mcpServers"]["jobs_gw"]
    script = Path(sys.executable).absolute().parent / "mcp-gateway"
    assert entry["command"] == str(script) and script.is_file()
    assert entry["args"] == ["serve"]
    assert entry["env"] == {"MCP_GATEWAY_PLUGINS": "notes"}  # the deployment Claude Code starts
    assert out["settings_json"]["enabledMcpjsonServers"] == ["jobs_gw"]
    permissions = out["settings_json"]["permissions"]
    assert permissions["allow"] == ["mcp__jobs_gw__gateway_status", "mcp__jobs_gw__notes_search"]
    assert permissions["ask"] == ["mcp__jobs_gw__notes_add", "mcp__jobs_gw__notes_delete"]
    assert shlex.split(out["claude_mcp_add"]) == [
        "claude",
        "mcp",
        "add",
        "--scope",
        "project",
        "-e",
        "MCP_GATEWAY_PLUGINS=notes",
        "jobs_gw",
        "--",
        str(script),
        "serve",
    ]
    confirm = out["confirm_each_call"]
    assert confirm["setting"] == "none" and confirm["tools"] == []
    assert "--permission-prompt-tool" in confirm["meaning"]
    assert [n.split(":")[0] for n in out["notes"]] == [
        "Trust",
        "Approval",
        "First start",
        "Mutations",
    ]
    assert out["warnings"] == []


def test_claude_config_prints_each_part_alone_ready_to_paste(tmp_path, cli):
    (tmp_path / "conf").mkdir()
    (tmp_path / "conf" / "gw.toml").write_text('[gateway]\nconfirm_each_call = "mutations"\n')
    args = ("--config", "conf/gw.toml", "claude-config")
    env = {"MCP_GATEWAY_PLUGINS": "notes", "MCP_GATEWAY_TOKEN": "tok-never-copied-123"}
    mcp = json.loads(cli(tmp_path, *args, "--mcp-json", **env).stdout)
    assert mcp["mcpServers"]["gateway"]["args"] == [
        "--config",
        str(tmp_path / "conf/gw.toml"),
        "serve",
    ]
    assert "tok-never-copied-123" not in json.dumps(mcp)
    settings = json.loads(cli(tmp_path, *args, "--settings", **env).stdout)
    assert set(settings) == {"enabledMcpjsonServers", "permissions"}
    assert settings["enabledMcpjsonServers"] == ["gateway"] and settings["permissions"]["ask"]
    added = cli(tmp_path, *args, "--add", **env)
    add = added.stdout.splitlines()
    assert len(add) == 1 and add[0].startswith("claude mcp add --scope project ")
    # The line alone leaves mutations unconfirmed (bypass mode, --allowedTools): said next to it.
    assert added.stderr.startswith("mcp-gateway: note: Mutations: `claude mcp add` only adds")
    assert "bypass mode or --allowedTools run mutations unasked" in added.stderr
    text = cli(tmp_path, *args, **env).stdout
    assert "# or, instead of editing .mcp.json (the settings block above is still needed" in text
    assert '# confirm_each_call = "mutations"' in text
    assert "Only a person may approve: notes_add, notes_delete." in text
    assert '#   "none":' in text and '#   "destructive":' in text


def test_claude_config_warns_when_the_server_name_makes_tool_names_too_long(tmp_path, cli):
    name = "s" * 110  # mcp__ + 110 + __ + any tool name is over 128
    r = cli(tmp_path, "claude-config", "--settings", "--name", name, MCP_GATEWAY_PLUGINS="notes")
    assert r.returncode == 0
    assert "Claude Code drops those tools" in r.stderr and "at most 107 characters" in r.stderr
    warnings = json.loads(
        cli(tmp_path, "claude-config", "--json", "--name", name, MCP_GATEWAY_PLUGINS="notes").stdout
    )["warnings"]
    assert len(warnings) == 1 and "gateway_status" in warnings[0]


@pytest.mark.e2e
@pytest.mark.anyio
async def test_the_printed_entry_starts_the_gateway_from_another_directory(tmp_path, cli):
    from mcp import Client, StdioServerParameters

    (tmp_path / "deploy").mkdir()
    (tmp_path / "deploy" / "gw.toml").write_text('[gateway]\nplugins = ["queue"]\n')
    (tmp_path / "project").mkdir()
    out = cli(tmp_path / "deploy", "--config", "gw.toml", "claude-config", "--mcp-json")
    entry = json.loads(out.stdout)["mcpServers"]["gateway"]
    # As Claude Code does: the entry's command, args and env, started in the project directory.
    env = {k: v for k, v in gateway_env().items() if k != "PYTHONPATH"} | entry["env"]
    params = StdioServerParameters(
        command=entry["command"], args=entry["args"], env=env, cwd=str(tmp_path / "project")
    )
    with anyio.fail_after(60):
        async with Client(params, mode="legacy") as client:
            names = {t.name for t in (await client.list_tools()).tools}
    assert names == {"gateway_status", "bulk_read_new_jobs", "bulk_update_job_status"}


def test_tools_sizes_counts_what_the_model_sees(tmp_path, cli):
    r = cli(tmp_path, "tools", "--sizes", "--json", MCP_GATEWAY_PLUGINS="notes")
    sizes = json.loads(r.stdout)
    by_name = {row["name"]: row for row in sizes["tools"]}
    gw = make_gateway(plugins=["notes"], cwd=tmp_path)
    for tool in gw.visible_tools():
        seen = {
            "name": tool.name,
            "description": tool.description,
            "inputSchema": tool.input_schema,
        }
        expected = len(json.dumps(seen, separators=(",", ":"), ensure_ascii=False).encode())
        assert by_name[tool.name]["bytes"] == expected
        assert by_name[tool.name]["tokens"] == -(-expected // 4)
    assert [row["bytes"] for row in sizes["tools"]] == sorted(
        (row["bytes"] for row in sizes["tools"]), reverse=True
    )
    assert sizes["total"] == {
        "tools": 4,
        "bytes": sum(row["bytes"] for row in sizes["tools"]),
        "tokens": -(-sum(row["bytes"] for row in sizes["tools"]) // 4),
    }
    text = cli(tmp_path, "tools", "--sizes", MCP_GATEWAY_PLUGINS="notes").stdout
    assert "total (4 tools)" in text and str(sizes["total"]["bytes"]) in text


def test_a_missing_config_file_is_named_as_given(tmp_path, cli):
    r = cli(tmp_path, "--config", "conf/nope.toml", "plugins")
    assert r.returncode == 2 and r.stderr == "mcp-gateway: config file 'conf/nope.toml' not found\n"


def test_cli_health_reports_an_unconfigured_backend_without_failing(plugin_site, tmp_path, cli):
    plugin_site("gwfx-svc", {"svc": "gwfx_svc"}, {"gwfx_svc": SVC})
    r = cli(
        tmp_path, "health", "--json", MCP_GATEWAY_PLUGINS="svc", PYTHONPATH=os.environ["PYTHONPATH"]
    )
    report = json.loads(r.stdout)
    assert r.returncode == 0 and report["checks"][0]["status"] == "unconfigured"
    assert "set SVC_URL" in report["checks"][0]["detail"]


COMMANDS_WITHOUT_THE_SDK = """
import contextlib, io, json, sys
import gateway.cli
for argv in json.loads(sys.argv[1]):
    with contextlib.redirect_stdout(io.StringIO()):
        code = gateway.cli.main(argv)
    assert code == 0, (argv, code)
print(json.dumps(sorted({m.split(".")[0] for m in sys.modules if m.startswith("mcp")})))
"""


def test_commands_other_than_serve_never_import_the_mcp_sdk(tmp_path):
    """The SDK's import is most of a server's start (~0.6 s of CPU): a command that serves
    nothing (listing plugins or tools, printing a config, a health check, one call) skips it."""
    commands = [
        ["plugins"],
        ["tools", "--json"],
        ["claude-config"],
        ["health"],
        ["call", "gateway_status", "--args", '{"check_health": false}'],
    ]
    run = _python(tmp_path, COMMANDS_WITHOUT_THE_SDK, json.dumps(commands))
    assert run.returncode == 0, run.stderr[-2000:]
    assert json.loads(run.stdout) == []


IMPORTED_WITH_THE_COMMAND = """
import json, sys
import gateway.cli
heavy = ("pydantic", "pydantic_core", "mcp", "mcp_types", "anyio", "gateway")
print(json.dumps(sorted(m for m in sys.modules if m.split(".")[0] in heavy)))
"""


def test_importing_the_command_imports_neither_pydantic_nor_the_api_nor_the_sdk(tmp_path):
    """`serve` pauses the garbage collector before its configuration is read and keeps it
    paused until the server is built (gateway.cli._serving): importing pydantic, the plugins'
    API and the SDK allocates hundreds of thousands of long-lived objects and no garbage. The
    console script imports gateway.cli first, so the pause covers those imports only if that
    import brings none of them (the package imports its API on use)."""
    run = _python(tmp_path, IMPORTED_WITH_THE_COMMAND)
    assert run.returncode == 0, run.stderr[-2000:]
    assert json.loads(run.stdout) == ["gateway", "gateway.cli", "gateway.configkit"]


FEATURE_MODULES = ("difflib", "gateway.limits", "gateway.deployment")

STARTED_WITHOUT_THOSE_FEATURES = """
import json, sys, anyio
from gateway import cli
from gateway.config import load_config
from gateway.server import build_server
config = load_config(None)
gateway = cli._build(config, traced=True)
build_server(gateway)
async def main():
    async with gateway:
        started = sorted(m for m in json.loads(sys.argv[1]) if m in sys.modules)
        status = await gateway.call("gateway_status", {"check_health": False})
    print(json.dumps([started, status.is_error, gateway.limiter is not None]))
    print(json.dumps(sorted(m for m in json.loads(sys.argv[1]) if m in sys.modules)))
anyio.run(main)
"""


@pytest.mark.parametrize("limited", [False, True])
def test_a_start_imports_the_modules_of_unused_features_only_on_use(tmp_path, limited):
    """What a start without a configuration mistake, a limit or a status report does not use
    is not imported by it (difflib for \"did you mean\", the limits, the status report's
    variables): each is imported where it is used, and works then."""
    env = gateway_env(MCP_GATEWAY_PLUGINS="gateway")
    if limited:
        env["MCP_GATEWAY_LIMIT_CALLS_PER_MINUTE"] = "100"
    run = _python(tmp_path, STARTED_WITHOUT_THOSE_FEATURES, json.dumps(FEATURE_MODULES), env=env)
    assert run.returncode == 0, run.stderr[-2000:]
    first, after = (json.loads(line) for line in run.stdout.splitlines()[-2:])
    started, status_failed, has_limiter = first
    assert started == (["gateway.limits"] if limited else [])
    assert status_failed is False and has_limiter is limited
    assert "gateway.deployment" in after  # the status report read the variables


def test_serve_gives_the_collector_back_when_it_stops_before_serving(tmp_path, monkeypatch):
    """A refused `serve` (here --port without --transport http) returns with the collector
    running, as a caller of main() had it."""
    import gc

    from gateway.cli import main

    monkeypatch.chdir(tmp_path)
    assert gc.isenabled()
    assert main(["serve", "--port", "9"]) == 2
    assert gc.isenabled()


def test_every_name_the_package_exports_is_the_one_its_module_defines():
    """The package imports its API on use (gateway/__init__): each name of ``__all__`` is
    found, by ``from gateway import *`` too, and is the object of the module defining it."""
    import importlib

    import gateway

    namespace: dict[str, object] = {}
    exec("from gateway import *", namespace)
    assert set(gateway.__all__) <= set(namespace) and set(gateway.__all__) <= set(dir(gateway))
    modules = ("config", "content", "errors", "hookspecs", "inputs", "prompts", "resources", "spec")
    for name in gateway.__all__:
        if name == "__version__":
            continue
        defined = [
            getattr(module, name)
            for module in (importlib.import_module(f"gateway.{m}") for m in modules)
            if name in vars(module)
        ]
        assert defined and namespace[name] is getattr(gateway, name) is defined[0], name
    with pytest.raises(AttributeError, match="no attribute 'Nope'"):
        _ = gateway.Nope  # type: ignore[attr-defined]
