"""Configuration (TOML + environment) and the command line."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest
from conftest import gateway_env
from fixture_plugins import SVC

from gateway.cli import main
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
    assert config.audit_log == tmp_path / "data/gateway/audit.jsonl"


@pytest.mark.parametrize(
    ("text", "env", "fragment"),
    [
        ("[gateway]\nreadonly = true\n", {}, "unknown setting(s) readonly"),
        ("[gateway]\ndefault_timeout = -1\n", {}, "default_timeout"),
        ("[gateway\n", {}, "cannot be read"),
        ("", {"MCP_GATEWAY_READ_ONLY": "maybe"}, "MCP_GATEWAY_READ_ONLY"),
    ],
)
def test_bad_core_config_is_a_clear_error(tmp_path, text, env, fragment):
    cfg = tmp_path / "gw.toml"
    cfg.write_text(text)
    with pytest.raises(ConfigError, match=None) as info:
        load_config(cfg, env=env, cwd=tmp_path)
    assert fragment in str(info.value)
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


def test_cli_lists_plugins_and_tools_as_json(tmp_path):
    plugins = json.loads(_run(tmp_path, "plugins", "--json", MCP_GATEWAY_PLUGINS="notes").stdout)
    states = {p["name"]: (p["state"], p["tool_count"]) for p in plugins}
    assert states["notes"] == ("loaded", 3) and states["gateway"] == ("loaded", 1)
    tools = json.loads(_run(tmp_path, "tools", "--json", MCP_GATEWAY_PLUGINS="notes").stdout)
    assert {(t["name"], t["tier"]) for t in tools} >= {
        ("notes_add", "mutation"),
        ("notes_search", "read"),
    }


def test_cli_call_goes_through_the_pipeline(tmp_path):
    ok = _run(
        tmp_path, "call", "notes_add", "--args", '{"text": "cli"}', MCP_GATEWAY_PLUGINS="notes"
    )
    assert ok.returncode == 0 and json.loads(ok.stdout)["text"] == "cli"
    bad = _run(
        tmp_path, "call", "notes_add", "--args", '{"txt": "cli"}', MCP_GATEWAY_PLUGINS="notes"
    )
    assert bad.returncode == 1 and json.loads(bad.stdout)["error"]["code"] == "VALIDATION_ERROR"
    broken = _run(tmp_path, "call", "notes_add", "--args", "{not json", MCP_GATEWAY_PLUGINS="notes")
    assert broken.returncode == 2 and "not valid JSON" in broken.stderr


def test_cli_health_exit_code_follows_required_checks(plugin_site, tmp_path):
    from backends import closed_port_url

    plugin_site("gwfx-svc", {"svc": "gwfx_svc"}, {"gwfx_svc": SVC})
    pp = os.environ["PYTHONPATH"]
    good = _run(tmp_path, "health", "--json", MCP_GATEWAY_PLUGINS="notes", PYTHONPATH=pp)
    assert good.returncode == 0 and json.loads(good.stdout)["ok"] is True
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


def test_claude_config_allows_read_tools_and_asks_for_mutations(tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("MCP_GATEWAY_PLUGINS", "notes")
    assert main(["claude-config", "--name", "jobs gw"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert list(out["mcpServers"]) == ["jobs_gw"]
    assert out["mcpServers"]["jobs_gw"]["args"][-1] == "serve"
    assert "mcp__jobs_gw__notes_search" in out["permissions"]["allow"]
    assert set(out["permissions"]["ask"]) == {
        "mcp__jobs_gw__notes_add",
        "mcp__jobs_gw__notes_delete",
    }


def test_a_missing_config_file_is_reported_without_its_path(tmp_path):
    r = _run(tmp_path, "--config", str(tmp_path / "nope.toml"), "plugins")
    assert r.returncode == 2 and "nope.toml" in r.stderr and str(tmp_path) not in r.stderr


def test_cli_health_reports_an_unconfigured_backend_without_failing(plugin_site, tmp_path):
    plugin_site("gwfx-svc", {"svc": "gwfx_svc"}, {"gwfx_svc": SVC})
    r = _run(
        tmp_path, "health", "--json", MCP_GATEWAY_PLUGINS="svc", PYTHONPATH=os.environ["PYTHONPATH"]
    )
    report = json.loads(r.stdout)
    assert r.returncode == 0 and report["checks"][0]["status"] == "unconfigured"
    assert "set SVC_URL" in report["checks"][0]["detail"]
