"""The ``[auth]`` settings, tiers as scopes, the challenge header and the local identity."""

from __future__ import annotations

import os
import pwd
import re
import tomllib
from pathlib import Path

import pytest

from gateway.auth import (
    AuthConfigError,
    Identity,
    ScopePolicy,
    calling_as,
    challenge,
    current_caller,
    load_auth_config,
    local_identity,
    resolve_resource,
)
from gateway.auth.keys import discovery_urls, key_algorithms
from gateway.auth.verifier import audience_matches, normalize_resource
from gateway.config import ConfigError
from gateway.spec import Tier

ISSUER = "https://idp.example/realms/team"
REPO = Path(__file__).resolve().parent.parent


def test_no_issuer_means_no_oauth():
    assert load_auth_config(None, {}) is None
    assert load_auth_config({}, {"MCP_GATEWAY_AUTH_ISSUER": "  "}) is None


def test_settings_without_an_issuer_are_an_error_not_ignored():
    with pytest.raises(AuthConfigError, match="without an issuer"):
        load_auth_config({"audience": ["https://gw.example/mcp"]}, {})


def test_the_environment_beats_the_table():
    table = {"issuer": "https://old.example", "scopes": {"read": "r", "mutate": "m"}}
    env = {
        "MCP_GATEWAY_AUTH_ISSUER": ISSUER,
        "MCP_GATEWAY_AUTH_AUDIENCE": "https://gw.example/mcp, api://gateway",
        "MCP_GATEWAY_AUTH_MUTATE_SCOPE": "gw:write",
    }
    config = load_auth_config(table, env)
    assert config is not None
    assert config.issuer == ISSUER
    assert config.audience == ("https://gw.example/mcp", "api://gateway")
    assert (config.scopes.read, config.scopes.mutate) == ("r", "gw:write")


def test_defaults():
    config = load_auth_config({"issuer": ISSUER}, {})
    assert config is not None
    assert (config.scopes.read, config.scopes.mutate) == ("gateway:read", "gateway:mutate")
    assert "HS256" not in config.algorithms and "none" not in config.algorithms
    assert config.audiences("https://gw.example/mcp") == ("https://gw.example/mcp",)
    assert config.leeway_seconds == 30 and config.introspection is None


def test_the_static_token_and_oauth_together_are_an_error():
    with pytest.raises(AuthConfigError, match="choose one") as err:
        load_auth_config({"issuer": ISSUER}, {}, static_token=True)
    assert isinstance(err.value, ConfigError)  # the CLI reports it like any config error


def test_the_introspection_secret_comes_from_the_environment():
    table = {"issuer": ISSUER, "introspection": {"client_id": "gw", "client_secret": "s3cret"}}
    with pytest.raises(AuthConfigError, match="secrets come from the environment") as err:
        load_auth_config(table, {})
    assert "s3cret" not in str(err.value)
    from_env = {
        "issuer": ISSUER,
        "introspection": {"client_id": "gw", "client_secret": {"$env": "X"}},
    }
    config = load_auth_config(from_env, {"X": "s3cret"})
    assert config is not None and config.introspection is not None
    assert config.introspection.client_secret.get_secret_value() == "s3cret"
    assert "s3cret" not in repr(config)
    by_variable = load_auth_config(
        {"issuer": ISSUER},
        {
            "MCP_GATEWAY_AUTH_INTROSPECTION_CLIENT_ID": "gw",
            "MCP_GATEWAY_AUTH_INTROSPECTION_CLIENT_SECRET": "s3cret",
        },
    )
    assert by_variable is not None and by_variable.introspection is not None


@pytest.mark.parametrize(
    ("table", "says"),
    [
        ({"issuer": "ftp://idp.example"}, "absolute https URL"),
        ({"issuer": "http://idp.example"}, "must use https"),
        ({"issuer": "https://idp.example/?tenant=1"}, "query"),
        ({"issuer": ISSUER, "jwks_url": "http://keys.example/jwks"}, "must use https"),
        ({"issuer": ISSUER, "algorithms": ["RS256", "HS256"]}, "not accepted: HS256"),
        ({"issuer": ISSUER, "algorithms": ["none"]}, "never none"),
        ({"issuer": ISSUER, "algorithms": []}, "at least one"),
        ({"issuer": ISSUER, "scopes": {"read": "gateway read"}}, "one OAuth scope token"),
        ({"issuer": ISSUER, "scopes": {"mutate": 'a"b'}}, "one OAuth scope token"),
        ({"issuer": ISSUER, "tool_scopes": {"delete job": "x"}}, "not a tool name"),
        ({"issuer": ISSUER, "tool_scopes": {"delete_job": "x y"}}, "one OAuth scope token"),
        (
            {"issuer": ISSUER, "leeway_seconds": 3600},
            "[auth] leeway_seconds: must be a finite number from 0 to 300",
        ),
        ({"issuer": ISSUER, "isuer": 5}, "[auth] isuer: unknown setting; did you mean issuer?"),
        (
            {"issuer": ISSUER, "plugin_scopes": {"queue": {"mutat": "q"}}},
            "[auth.plugin_scopes.queue] mutat: unknown setting; did you mean mutate?",
        ),
        (
            {"issuer": ISSUER, "scopes": {"read": "a b"}},
            "[auth.scopes] read: a scope name must be one OAuth",
        ),
    ],
)
def test_bad_settings_name_the_setting(table, says):
    with pytest.raises(AuthConfigError, match=r"^\[auth[\].]") as err:
        load_auth_config(table, {})
    assert says in str(err.value)


def test_plain_http_is_allowed_to_a_loopback_issuer():
    config = load_auth_config({"issuer": "http://127.0.0.1:8080/realms/dev"}, {})
    assert config is not None and config.issuer == "http://127.0.0.1:8080/realms/dev"


def test_the_issuer_is_kept_exactly_as_written():
    for issuer in ("https://tenant.example.com/", "https://idp.example"):
        config = load_auth_config({"issuer": issuer}, {})
        assert config is not None and config.issuer == issuer


def test_the_documented_toml_example_loads():
    from gateway.auth import settings

    doc = settings.__doc__ or ""
    text = doc.split("```toml", 1)[1].split("```", 1)[0]
    table = tomllib.loads(text)["auth"]
    config = load_auth_config(table, {"MCP_GATEWAY_AUTH_INTROSPECTION_CLIENT_SECRET": "x"})
    assert config is not None and config.tool_scopes == {"delete_job": "orchestrator:admin"}


def test_docs_auth_md_shows_every_setting_and_variable_and_its_example_loads():
    from gateway.auth.settings import _ENV, ENV_PREFIX, AuthConfig, IntrospectionConfig

    doc = (REPO / "docs" / "auth.md").read_text()
    text = doc.split("```toml", 1)[1].split("```", 1)[0]
    table = tomllib.loads(text)["auth"]
    config = load_auth_config(table, {"MCP_GATEWAY_AUTH_INTROSPECTION_CLIENT_SECRET": "x"})
    assert config is not None and config.resource == "https://gateway.example.com/mcp"
    for name in [*AuthConfig.model_fields, *IntrospectionConfig.model_fields]:
        assert name in text, name
    documented = set(re.findall(r"MCP_GATEWAY_AUTH_[A-Z_]+[A-Z]", doc))
    assert documented == {ENV_PREFIX + suffix for suffix in _ENV.values()}


def test_the_resource_is_the_bound_loopback_address_unless_set():
    config = load_auth_config({"issuer": ISSUER}, {})
    assert config is not None
    assert resolve_resource(config, "127.0.0.1", 8765) == "http://127.0.0.1:8765/mcp"
    assert resolve_resource(config, "::1", 8765) == "http://[::1]:8765/mcp"
    for host in ("0.0.0.0", "10.0.0.5", "gateway.example"):
        with pytest.raises(AuthConfigError, match="set resource"):
            resolve_resource(config, host, 8765)
    public = load_auth_config({"issuer": ISSUER, "resource": "https://gw.example/mcp"}, {})
    assert public is not None
    assert resolve_resource(public, "0.0.0.0", 8765) == "https://gw.example/mcp"


# -- tiers as scopes ------------------------------------------------------------------------


def _caller(*scopes: str) -> Identity:
    return Identity("alice", "cli", frozenset(scopes), "jwt")


def test_each_tier_needs_its_scope():
    policy = ScopePolicy()
    reader, writer = _caller("gateway:read"), _caller("gateway:mutate")
    assert policy.missing(reader, tier=Tier.READ, plugin="queue", name="bulk_read_new_jobs") is None
    assert (
        policy.missing(reader, tier=Tier.MUTATION, plugin="queue", name="bulk_update_job_status")
        == "gateway:mutate"
    )
    # The tiers do not imply each other: a writer that should read carries both scopes.
    assert policy.missing(writer, tier=Tier.READ, plugin="queue", name="x") == "gateway:read"


def test_plugin_and_tool_overrides_win_in_that_order():
    config = load_auth_config(
        {
            "issuer": ISSUER,
            "plugin_scopes": {"orchestrator": {"mutate": "orch:operate"}},
            "tool_scopes": {"delete_job": "orch:admin"},
        },
        {},
    )
    assert config is not None
    policy = ScopePolicy.from_config(config)
    need = policy.required
    assert need(tier=Tier.MUTATION, plugin="orchestrator", name="cancel_job") == "orch:operate"
    assert need(tier=Tier.READ, plugin="orchestrator", name="list_jobs") == "gateway:read"
    assert need(tier=Tier.MUTATION, plugin="orchestrator", name="delete_job") == "orch:admin"
    assert need(tier=Tier.MUTATION, plugin="queue", name="bulk_update_job_status") == (
        "gateway:mutate"
    )
    assert policy.supported() == ["gateway:read", "gateway:mutate", "orch:operate", "orch:admin"]
    assert policy.to_request() == ["gateway:read", "gateway:mutate"]
    assert policy.grants_anything(_caller("orch:admin"))
    assert not policy.grants_anything(_caller("openid", "profile"))


def test_callers_without_scopes_are_not_limited_by_them():
    local = local_identity()
    assert local.scopes is None and local.via == "local"
    assert ScopePolicy().missing(local, tier=Tier.MUTATION, plugin="q", name="x") is None


def test_the_local_caller_is_the_os_user_unless_a_transport_set_one():
    assert current_caller().subject == pwd.getpwuid(os.getuid()).pw_name
    with calling_as(_caller("gateway:read")) as who:
        assert current_caller() is who
    assert current_caller().via == "local"


def test_what_the_audit_and_status_show_of_a_caller():
    caller = Identity("alice", "cli", frozenset({"b", "a"}), "jwt", "https://i", 1700000000)
    assert caller.audit_fields() == {"subject": "alice", "client": "cli"}
    assert caller.as_status() == {
        "subject": "alice",
        "client": "cli",
        "scopes": ["a", "b"],
        "authenticated_by": "jwt",
        "expires_at": 1700000000,
    }


# -- the pieces ----------------------------------------------------------------------------


def test_challenge_quotes_its_values():
    assert challenge("https://gw/.well-known/oauth-protected-resource/mcp") == (
        'Bearer resource_metadata="https://gw/.well-known/oauth-protected-resource/mcp"'
    )
    header = challenge(
        "https://m", error="invalid_token", description='say "no" \\ \r\n', scope="a b"
    )
    assert header == (
        'Bearer error="invalid_token", error_description="say \\"no\\" \\\\ ", scope="a b", '
        'resource_metadata="https://m"'
    )


def test_audiences_compare_as_urls():
    assert normalize_resource("HTTPS://GW.Example:443/mcp/") == "https://gw.example/mcp"
    assert normalize_resource("api://gateway") == "api://gateway"
    wanted = ("https://gw.example/mcp",)
    assert audience_matches(["account", "https://gw.example:443/mcp/"], wanted)
    assert audience_matches("https://GW.example/mcp", wanted)
    assert not audience_matches("https://gw.example/mcp/other", wanted)
    assert not audience_matches("https://gw.example:8443/mcp", wanted)
    assert not audience_matches(None, wanted) and not audience_matches(42, wanted)


def test_discovery_urls_for_issuers_with_and_without_a_path():
    assert discovery_urls("https://idp.example", "auto") == [
        "https://idp.example/.well-known/openid-configuration",
        "https://idp.example/.well-known/oauth-authorization-server",
    ]
    assert discovery_urls("https://idp.example/realms/team", "oauth") == [
        "https://idp.example/.well-known/oauth-authorization-server/realms/team"
    ]
    assert discovery_urls("https://idp.example/realms/team", "auto")[-1] == (
        "https://idp.example/.well-known/openid-configuration/realms/team"
    )


def test_which_algorithms_a_key_verifies():
    assert key_algorithms({"kty": "RSA"}) == {"RS256", "RS384", "RS512", "PS256", "PS384", "PS512"}
    assert key_algorithms({"kty": "RSA", "alg": "PS256"}) == {"PS256"}
    assert key_algorithms({"kty": "RSA", "alg": "HS256"}) == frozenset()
    assert key_algorithms({"kty": "EC", "crv": "P-384"}) == {"ES384"}
    assert key_algorithms({"kty": "OKP", "crv": "Ed25519"}) == {"EdDSA"}
    assert key_algorithms({"kty": "oct", "alg": "HS256"}) == frozenset()
