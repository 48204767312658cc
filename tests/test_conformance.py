"""The official MCP conformance suite against ``mcp-gateway serve --transport http``.

The suite (pinned in ``conformance.py``) runs the server scenarios the 2026-07-28 revision
requires, on that revision's stateless wire, against the gateway as a deployment serves it
(the embedded defaults, every plugin of this checkout). Each scenario the gateway passes is a
test that it still does; those it fails today are listed once, below, and one test checks that
exactly those fail, so a change that makes one pass fails here until it leaves the list.
"""

from __future__ import annotations

import re
import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest
from conformance import REVISION, Run, conformance_suite, run_server_suite
from conftest import gateway_env
from npm_cache import npm_package
from wire import HttpServer, free_port

pytestmark = pytest.mark.e2e

#: Required scenarios the gateway fails today. Issue 38 (all of MCP through the gateway) will
#: empty this list: resources and templates, completions, prompts and tools with any content
#: type, progress over an event stream, caching hints on resource lists, input-required results
#: and the -32021 refusal of a tool that needs an undeclared client capability.
EXPECTED_TO_FAIL = [
    "server-stateless",  # no tool needing sampling, so nothing is refused with -32021
    "completion-complete",
    "tools-call-image",
    "tools-call-audio",
    "tools-call-embedded-resource",
    "tools-call-mixed-content",
    "tools-call-with-progress",
    "resources-list",
    "resources-read-text",
    "resources-read-binary",
    "resources-templates-read",
    "prompts-get-simple",
    "prompts-get-with-args",
    "prompts-get-embedded-resource",
    "prompts-get-with-image",
    "caching",  # tools/list and prompts/list carry the hints; resources/* are -32601
    "input-required-result-basic-elicitation",
    "input-required-result-basic-sampling",
    "input-required-result-basic-list-roots",
    "input-required-result-request-state",
    "input-required-result-multiple-input-requests",
    "input-required-result-multi-round",
    "input-required-result-non-tool-request",
    "input-required-result-result-type",
    "input-required-result-tampered-state",
    "input-required-result-capability-check",
]

#: Required scenarios the gateway passes today. Some pass only because the suite accepts what
#: the gateway answers for a tool it does not have (an ``isError`` text result): the two
#: ``tools-call-*`` here and the four ``input-required-result-*`` ones; they stay here so that
#: nothing that passes can start failing unnoticed.
PASSING = [
    "tools-list",
    "tools-call-simple-text",  # without its fixture (``test_simple_text``)
    "tools-call-error",  # without its fixture (``test_error_handling``)
    "server-sse-multiple-streams",
    "sep-2164-resource-not-found",  # with two SHOULD warnings (-32601, no data.uri)
    "prompts-list",
    "dns-rebinding-protection",
    "input-required-result-missing-input-response",  # a warning only, by the suite's rules
    "input-required-result-unsupported-methods",
    "input-required-result-ignore-extra-params",  # a warning only, by the suite's rules
    "input-required-result-validate-input",  # a warning only, by the suite's rules
]


@pytest.fixture(scope="module")
def conformance_run(tmp_path_factory: pytest.TempPathFactory) -> Run:
    with conformance_suite() as suite:
        if isinstance(suite, str):
            pytest.skip(f"{suite}: needed to run the MCP conformance suite")
        cwd = tmp_path_factory.mktemp("conformance")
        with HttpServer(cwd, gateway_env()) as server:
            return run_server_suite(suite, f"{server.url}/mcp", cwd / "results")


def test_the_lists_here_are_the_revisions_required_set(conformance_run: Run) -> None:
    assert len(conformance_run.required) == 37
    assert sorted(PASSING + EXPECTED_TO_FAIL) == sorted(conformance_run.required)


@pytest.mark.parametrize("scenario", PASSING)
def test_a_scenario_that_passed_still_passes(conformance_run: Run, scenario: str) -> None:
    result = conformance_run.scenarios[scenario]
    assert result.passed, "\n".join(result.failures())


def test_the_scenarios_failing_are_exactly_those_listed(conformance_run: Run) -> None:
    failing = conformance_run.failing()
    fixed = sorted(set(EXPECTED_TO_FAIL) - set(failing))
    assert not fixed, f"these pass now ({REVISION}): take them off EXPECTED_TO_FAIL: {fixed}"
    broken = {
        n: conformance_run.scenarios[n].failures() for n in failing if n not in EXPECTED_TO_FAIL
    }
    assert not broken, broken


@pytest.fixture
def unreachable_registry(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """npm pointed at a loopback port nothing listens on, retrying nothing."""
    monkeypatch.setenv("npm_config_registry", f"http://127.0.0.1:{free_port()}/")
    monkeypatch.setenv("npm_config_fetch_retries", "0")
    yield


@pytest.mark.usefixtures("unreachable_registry")
def test_no_registry_and_no_earlier_copy_is_a_reason_to_skip_not_a_failure(
    tmp_path: Path,
) -> None:
    if shutil.which("npm") is None:
        pytest.skip("npm is needed to reach a registry")
    probe = tmp_path / "node_modules" / "absent" / "package.json"
    with npm_package(tmp_path, "absent@1.0.0", probe, skip_unreachable=True) as why:
        # one line, saying which package and npm's error code
        assert why == "npm install absent@1.0.0 failed (code ECONNREFUSED)", why
    with (
        pytest.raises(AssertionError, match=re.escape("npm install absent@1.0.0 failed")),
        npm_package(tmp_path, "absent@1.0.0", probe),
    ):
        pass
