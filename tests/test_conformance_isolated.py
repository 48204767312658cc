"""The official MCP conformance suite against ``mcp-gateway serve --transport http`` with the
test-support plugin of its fixtures (testing/conformance) ISOLATED: run in a worker process
of its own (issue 39), it must pass every scenario the 2026-07-28 revision requires, as it
does in the gateway's process (test_conformance.py). Its tools' content of every type, its
resources, templates, prompts and completions, its input requests and log messages all come
from the worker, over the machinery of mounted servers."""

from __future__ import annotations

import json

import pytest
from conformance import (
    FIXTURES_PLUGIN,
    REQUIRED,
    Run,
    conformance_suite,
    run_server_suite,
    with_fixtures,
)
from conftest import gateway_env
from wire import HttpServer, run_cli

pytestmark = pytest.mark.e2e


@pytest.fixture(scope="module")
def isolated_run(tmp_path_factory: pytest.TempPathFactory) -> tuple[Run, dict[str, str]]:
    with conformance_suite() as suite:
        if isinstance(suite, str):
            pytest.skip(f"{suite}: needed to run the MCP conformance suite")
        cwd = tmp_path_factory.mktemp("conformance-isolated")
        env = {**with_fixtures(gateway_env(), cwd / "site"), "MCP_GATEWAY_ISOLATE": FIXTURES_PLUGIN}
        listed = run_cli(cwd, env, "plugins", "--json")
        assert listed.returncode == 0, listed.stderr
        runs = {p["name"]: p["runs"] for p in json.loads(listed.stdout)}
        with HttpServer(cwd, env) as server:
            return run_server_suite(suite, f"{server.url}/mcp", cwd / "results"), runs


def test_the_fixtures_plugin_runs_in_a_worker(isolated_run: tuple[Run, dict[str, str]]) -> None:
    _, runs = isolated_run
    assert runs[FIXTURES_PLUGIN] == "worker"
    assert runs["queue"] == "process"


@pytest.mark.parametrize("scenario", REQUIRED)
def test_a_scenario_passes_with_the_fixtures_isolated(
    isolated_run: tuple[Run, dict[str, str]], scenario: str
) -> None:
    result = isolated_run[0].scenarios[scenario]
    assert result.passed, "\n".join(result.failures())


def test_every_required_scenario_passes_without_a_warning(
    isolated_run: tuple[Run, dict[str, str]],
) -> None:
    run = isolated_run[0]
    assert len(run.required) == 37 and not run.failing()
    warned = {
        n: [c["id"] for c in run.scenarios[n].checks if c.get("status") == "WARNING"]
        for n in run.required
    }
    assert not {n: w for n, w in warned.items() if w}
