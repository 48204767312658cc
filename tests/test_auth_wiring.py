"""OAuth wired into the core, in-process: ``[auth]`` in the deployment's config, scopes in the
pipeline on top of the policy, the caller in the audit, the HTTP app's checks and
``claude-config`` for an OAuth deployment. The same over a real server: test_auth_serve.py."""

from __future__ import annotations

import json
import textwrap
from pathlib import Path
from typing import Any

import pytest
from conftest import gateway_env
from wire import run_cli

from gateway.app import Gateway, build_gateway
from gateway.auth.identity import Identity, calling_as
from gateway.claude import claude_config
from gateway.config import (
    ConfigError,
    GatewayConfig,
    ToolNames,
    check_auth_plugins,
    check_tool_names,
    load_config,
)
from gateway.http import HttpSettingsError, build_http_app

ISSUER = "https://idp.example/realms/team"


def _config(tmp_path: Path, toml: str, **env: str) -> GatewayConfig:
    path = tmp_path / "gw.toml"
    path.write_text(textwrap.dedent(toml))
    return load_config(path, env=env, cwd=tmp_path)


def _gateway(tmp_path: Path, auth: str = "", gateway: str = "") -> Gateway:
    config = _config(
        tmp_path,
        f"""
        [gateway]
        plugins = ["notes"]
        audit_log = "audit.jsonl"
        {gateway}

        [auth]
        issuer = "{ISSUER}"
        {auth}
        """,
    )
    return build_gateway(config)


def _caller(*scopes: str, subject: str = "alice") -> Identity:
    return Identity(subject, "claude-code", frozenset(scopes), "jwt", ISSUER, 2_000_000_000)


async def _call(gw: Gateway, who: Identity, tool: str, **args: Any) -> dict[str, Any]:
    with calling_as(who):
        return (await gw.call(tool, args)).payload


# -- the config ---------------------------------------------------------------------------


def test_the_auth_table_is_part_of_the_deployments_config(tmp_path):
    config = _config(
        tmp_path,
        f"""
        [auth]
        issuer = "{ISSUER}"
        resource = "https://gw.example/mcp"

        [auth.tool_scopes]
        notes_delete = "notes:admin"
        """,
    )
    assert config.auth is not None and config.auth.issuer == ISSUER
    assert config.auth.tool_scopes == {"notes_delete": "notes:admin"}
    assert load_config(env={}, cwd=tmp_path).auth is None


@pytest.mark.parametrize(
    ("toml", "env", "says"),
    [
        (
            '[auth]\nissuer = "https://idp.example"\nresorce = "https://gw/mcp"\n',
            {},
            "gw.toml:3: [auth] resorce: unknown setting; did you mean resource?",
        ),
        (
            '[auth]\nissuer = "http://idp.example"\n',
            {},
            "gw.toml:2: [auth] issuer: issuer must use https (plain http only to a loopback "
            "address)",
        ),
        (
            '[auth]\nissuer = "https://idp.example"\n[auth.introspection]\nclient_id = "gw"\n'
            'client_secret = { "$env" = "GW_SECRET" }\n',
            {},
            "gw.toml:3: [auth] introspection: $env variable GW_SECRET is not set",
        ),
        (
            '[auth]\nissuer = "https://idp.example"\n',
            {"MCP_GATEWAY_AUTH_AUDIENCE": " , "},
            None,
        ),
        (
            '[gateway]\ntoken = { "$env" = "T" }\n[auth]\nissuer = "https://idp.example"\n',
            {"T": "a-shared-token-123456"},
            "gw.toml:4: [auth] issuer: both a shared token (gw.toml:2: [gateway] token) and an "
            "OAuth issuer are set: choose one; for a team behind an identity provider, unset "
            "the token",
        ),
        ('auth = "https://idp.example"\n', {}, "gw.toml:1: auth must be a table ([auth])"),
        (
            '[auht]\nissuer = "x"\n',
            {},
            "gw.toml:1: unknown section [auht] (known: [gateway], [plugins.*], [servers.*], "
            "[telemetry], [auth]); did you mean [auth]?",
        ),
        (
            "[auth]\nleeway_seconds = 5\n",
            {},
            "gw.toml:1: [auth]: settings without an issuer; set issuer "
            "(MCP_GATEWAY_AUTH_ISSUER) to turn OAuth on, or remove the [auth] table",
        ),
        ("", {"MCP_GATEWAY_AUTH_ISSUER": "ftp://x"}, "MCP_GATEWAY_AUTH_ISSUER: issuer must be"),
    ],
)
def test_auth_mistakes_name_the_setting_and_where_it_came_from(tmp_path, toml, env, says):
    (tmp_path / "gw.toml").write_text(toml)
    if says is None:
        assert load_config(tmp_path / "gw.toml", env=env, cwd=tmp_path).auth is not None
        return
    with pytest.raises(ConfigError) as err:
        load_config(tmp_path / "gw.toml", env=env, cwd=tmp_path)
    assert str(err.value).startswith(says)


def test_auth_mistakes_stop_every_command_with_exit_2(tmp_path):
    (tmp_path / "gw.toml").write_text('[auth]\nissuer = "https://idp.example"\nscope = 1\n')
    done = run_cli(tmp_path, gateway_env(), "--config", "gw.toml", "tools")
    assert done.returncode == 2 and done.stdout == ""
    assert done.stderr == (
        "mcp-gateway: gw.toml:3: [auth] scope: unknown setting; did you mean scopes?\n"
    )


def test_scope_overrides_must_name_an_installed_plugin_and_a_registered_tool(tmp_path):
    config = _config(
        tmp_path,
        f"""
        [auth]
        issuer = "{ISSUER}"

        [auth.plugin_scopes.note]
        mutate = "notes:write"

        [auth.tool_scopes]
        notes_delet = "notes:admin"
        """,
    )
    with pytest.raises(ConfigError) as err:
        check_auth_plugins(config, {"notes", "gateway"})
    assert str(err.value) == (
        "gw.toml:5: [auth.plugin_scopes] note: no plugin called 'note' is installed; did you "
        "mean notes?"
    )
    check_auth_plugins(config, {"note", "gateway"})
    tools = ToolNames(frozenset({"notes_delete", "notes_add"}))
    with pytest.raises(ConfigError) as err:
        check_tool_names(config, tools)
    assert str(err.value) == (
        "gw.toml:9: [auth.tool_scopes] notes_delet: no plugin registers a tool called "
        "'notes_delet'; did you mean notes_delete?"
    )
    # The plugins that are not loaded are named: their tools are not known.
    with pytest.raises(ConfigError) as err:
        check_tool_names(config, ToolNames(tools.known, not_loaded=("queue",)))
    assert "no loaded plugin registers a tool called 'notes_delet' (not loaded: queue)" in str(
        err.value
    )
    # A plugin failed before it registered: the name may be one of its tools, so it passes.
    check_tool_names(config, ToolNames(tools.known, unknown=("broken",)))


# -- the pipeline -------------------------------------------------------------------------


@pytest.mark.anyio
async def test_each_call_needs_its_scope_with_plugin_and_tool_overrides(tmp_path):
    gw = _gateway(
        tmp_path,
        auth="""
        [auth.plugin_scopes.notes]
        read = "notes:read"

        [auth.tool_scopes]
        notes_delete = "notes:admin"
        """,
    )
    writer = _caller("gateway:read", "gateway:mutate")
    async with gw:
        refused = await _call(gw, writer, "notes_search")
        assert refused["error"]["code"] == "PERMISSION_DENIED"
        assert refused["error"]["details"] == {"missing_scope": "notes:read"}
        assert "needs the OAuth scope notes:read" in refused["error"]["message"]
        assert "error" not in await _call(gw, writer, "notes_add", text="x")
        admin = await _call(gw, writer, "notes_delete", id=1)
        assert admin["error"]["details"] == {"missing_scope": "notes:admin"}
        assert "error" not in await _call(gw, writer, "gateway_status", check_health=False)
        # No transport set a caller: the local OS user, whom no scope limits.
        assert "error" not in (await gw.call("notes_search", {})).payload


@pytest.mark.anyio
async def test_the_deployments_policy_still_applies_on_top_of_the_scopes(tmp_path):
    gw = _gateway(tmp_path, gateway="read_only = true")
    async with gw:
        hidden = await _call(gw, _caller("gateway:mutate", "gateway:read"), "notes_add", text="x")
    assert hidden["error"]["code"] == "PERMISSION_DENIED"
    assert "read-only" in hidden["error"]["message"] and "details" not in hidden["error"]


@pytest.mark.anyio
async def test_both_audit_lines_carry_the_callers_subject_and_client(tmp_path):
    gw = _gateway(tmp_path)
    async with gw:
        await _call(gw, _caller("gateway:mutate", subject="dave"), "notes_add", text="x")
    lines = [json.loads(x) for x in (tmp_path / "audit.jsonl").read_text().splitlines()]
    assert [(x["outcome"], x["subject"], x["client"]) for x in lines] == [
        ("STARTED", "dave", "claude-code"),
        ("OK", "dave", "claude-code"),
    ]


# -- the HTTP app -------------------------------------------------------------------------


def test_oauth_serves_off_loopback_once_the_public_url_is_known(tmp_path):
    allowed = {"allowed_hosts": ["gw.example:*"], "allowed_origins": []}
    gw = _gateway(tmp_path, auth='resource = "https://gw.example/mcp"')
    build_http_app(gw, host="10.0.0.5", port=8765, **allowed)
    with pytest.raises(HttpSettingsError, match="exclude each other"):
        build_http_app(gw, host="10.0.0.5", port=8765, token="shared-0123456789", **allowed)
    without = _gateway(tmp_path)
    with pytest.raises(HttpSettingsError, match=r"set resource \(MCP_GATEWAY_AUTH_RESOURCE\)"):
        build_http_app(without, host="10.0.0.5", port=8765, **allowed)


# -- claude-config --------------------------------------------------------------------------


def test_claude_config_connects_an_oauth_deployment_over_http(tmp_path):
    gw = _gateway(tmp_path, auth='resource = "https://gw.example/mcp"')
    cc = claude_config(gw, "team-gw")
    assert cc.mcp_json() == {
        "mcpServers": {"team-gw": {"type": "http", "url": "https://gw.example/mcp"}}
    }
    assert cc.add_command() == (
        "claude mcp add --transport http --scope project team-gw https://gw.example/mcp"
    )
    assert "mcp__team-gw__notes_add" in cc.settings_json()["permissions"]["ask"]
    assert any("/mcp → team-gw → Authenticate" in n for n in cc.as_dict()["notes"])
    assert not cc.warnings
    local = claude_config(_gateway(tmp_path), "gw")
    assert local.mcp_json()["mcpServers"]["gw"]["url"] == "http://127.0.0.1:8765/mcp"
    assert any("resource is not set" in w for w in local.warnings)
