"""Contract: the fake orchestrator answers every recorded request the way the real one did.

For each recording behind the gateway's tools (the orchestrator's 30, the citations plugin's 8,
the Gitea proxy routes and ``/api/health``), a freshly seeded fake, prepared where the recording
followed earlier mutations, gets the recorded request byte for byte (raw path, query, body) and
must answer the recorded status with:

- a body of the same shape: the same keys and JSON types, recursively, lists empty or not alike;
- and, since the seed is the recorded scenario, the recorded body itself, except where a value
  depends on when or in what order things ran (listed in ``VOLATILE`` with the reason).
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import pytest
from gateway_orchestrator_testing import RECORDINGS, RECORDINGS_INDEX, FakeOrchestrator
from gateway_orchestrator_testing import seed as ids
from orch_http import send

# Recordings deliberately not reproduced: endpoints no tool of the gateway calls, used by the
# recording session to set the scene (agents registering, datasource administration) or by the
# cockpit UI alone. Their state changes are made with the fake's helpers instead.
NOT_REPRODUCED = {
    "POST_api_agents_register": "agent self-registration; tests add agents with add_agent()",
    "POST_api_agents_register__422": "agent self-registration",
    "POST_api_agents_register__same_hostname": "agent self-registration",
    "POST_api_agents_{agent_id}_heartbeat": "agent heartbeats; tests set agent state directly",
    "POST_api_agents_{agent_id}_heartbeat__404": "agent heartbeats",
    "POST_api_agents_{agent_id}_heartbeat__422_bad_status": "agent heartbeats",
    "DELETE_api_agents_{agent_id}": "agent deregistration",
    "DELETE_api_agents_{agent_id}__404": "agent deregistration",
    "POST_api_datasources": "datasource administration; tests use add_datasource()",
    "POST_api_datasources__400_bad_type": "datasource administration",
    "POST_api_datasources__409_duplicate_type": "datasource administration",
    "POST_api_datasources__422_missing_fields": "datasource administration",
    "POST_api_datasources__job_scoped": "datasource administration",
    "PUT_api_datasources_{datasource_id}": "datasource administration",
    "PUT_api_datasources_{datasource_id}__404_empty_body": "datasource administration",
    "DELETE_api_datasources_{datasource_id}": "datasource administration",
    "DELETE_api_datasources_{datasource_id}__404": "datasource administration",
    "GET_api_jobs_{job_id}_datasources": "per-job datasource resolution, used by the cockpit only",
    "GET_api_stats_daily": "daily statistics, used by the cockpit only",
    "GET_api_workspace_status": "the server's own workspace path, redacted in the recording",
    "GET_api_jobs_{job_id}_todos_archives_{filename}": "archived todo parsing, cockpit only",
    "GET_api_jobs_{job_id}_todos_archives_{filename}__404": "archived todo parsing, cockpit only",
    "GET_api_jobs_{job_id}_todos_archives_{filename}__404_dotdot": "archived todo parsing",
}


def _approve(api: FakeOrchestrator) -> None:
    status, _ = send(api, "POST", f"/api/jobs/{ids.JOB_PENDING_REVIEW}/approve")
    assert status == 200


def _busy(*agents: str) -> Callable[[FakeOrchestrator], None]:
    def prepare(api: FakeOrchestrator) -> None:
        for agent_id in agents:
            api.state.agents[agent_id].status = "working"

    return prepare


def _assign_first(api: FakeOrchestrator) -> None:
    status, _ = send(api, "POST", f"/api/jobs/{ids.JOB_CREATED}/assign/{ids.AGENT_READY}")
    assert status == 200


def _delete_first(api: FakeOrchestrator) -> None:
    assert send(api, "DELETE", f"/api/jobs/{ids.JOB_SCRATCH}")[0] == 200


# Answers that match the recording in shape only.
VOLATILE = {
    "POST_api_jobs": "a new job: its id and timestamps are new",
    "POST_api_jobs__full_body": "a new job: its id and timestamps are new",
    "POST_api_jobs_{job_id}_approve": "approved_at is the time of the approval",
    "GET_api_jobs_{job_id}__after_approve": "updated_at is the time of the approval",
    "GET_api_jobs_{job_id}_workspace_{path}__job_completion_after_approve": "holds approved_at",
    "GET_api_jobs_{job_id}_progress": "elapsed_seconds and eta_seconds run with the clock",
    "GET_api_jobs_{job_id}_progress__completed": "elapsed_seconds runs with the clock",
    "GET_api_jobs_{job_id}_sources_search": "ts_rank is emulated in double, PostgreSQL in float4",
    "GET_api_jobs_{job_id}_sources_search__semantic_mode_ignored": "ts_headline is approximated",
    "GET_api_jobs_{job_id}_sources_search__source_type": "ts_headline is approximated",
    "GET_api_stats_jobs__after_mutations": "counts after a session of mutations not all recorded",
    "GET_api_stats_agents__after_mutations": "counts after a session of mutations not all recorded",
}

# What happened before a recording in the recording session, replayed on a fresh fake.
PREPARE: dict[str, Callable[[FakeOrchestrator], None]] = {
    "DELETE_api_jobs_{job_id}__404_again": _delete_first,
    "POST_api_jobs_{job_id}_approve__400_after_approve": _approve,
    "GET_api_jobs_{job_id}__after_approve": _approve,
    "GET_api_jobs_{job_id}_frozen__404_after_approve": _approve,
    "GET_api_jobs_{job_id}_workspace_{path}__job_completion_after_approve": _approve,
    "POST_api_jobs_{job_id}_assign_{agent_id}__400_job_not_assignable": _assign_first,
    # Both ready agents were busy with the jobs assigned and resumed earlier in the session.
    "POST_api_jobs_{job_id}_resume__400_no_ready_agents": _busy(
        ids.AGENT_READY, ids.AGENT_UNREACHABLE
    ),
    "POST_api_jobs_{job_id}_resume__502_agent_unreachable": _busy(ids.AGENT_READY),
}

INDEX = json.loads(RECORDINGS_INDEX.read_text())
NAMES = sorted(row["file"].removesuffix(".json") for row in INDEX)


def load(name: str) -> dict[str, Any]:
    return json.loads((RECORDINGS / f"{name}.json").read_text())


def shape_mismatch(recorded: Any, actual: Any, where: str = "body") -> str | None:
    """Where ``actual`` differs in shape from ``recorded``, or None."""
    if isinstance(recorded, dict):
        if not isinstance(actual, dict):
            return f"{where}: object expected, got {type(actual).__name__}"
        if set(recorded) != set(actual):
            return f"{where}: keys {sorted(set(recorded) ^ set(actual))} differ"
        for key in recorded:
            found = shape_mismatch(recorded[key], actual[key], f"{where}.{key}")
            if found:
                return found
        return None
    if isinstance(recorded, list):
        if not isinstance(actual, list):
            return f"{where}: list expected, got {type(actual).__name__}"
        if bool(recorded) != bool(actual):
            return f"{where}: {len(recorded)} items recorded, {len(actual)} answered"
        for i, (r, a) in enumerate(zip(recorded, actual, strict=False)):
            found = shape_mismatch(r, a, f"{where}[{i}]")
            if found:
                return found
        return None
    if type(recorded) is not type(actual):
        return f"{where}: {type(recorded).__name__} expected, got {type(actual).__name__} ({actual!r:.80})"
    return None


@pytest.mark.parametrize("name", [n for n in NAMES if n not in NOT_REPRODUCED])
def test_the_fake_answers_the_recorded_request_as_recorded(orch, name):
    exchange = load(name)
    request, response = exchange["request"], exchange["response"]
    if name in PREPARE:
        PREPARE[name](orch)
    status, body = send(orch, request["method"], request["path"], request["query"], request["json"])
    recorded = response.get("json")
    assert status == response["status"], (status, body)
    assert shape_mismatch(recorded, body) is None, shape_mismatch(recorded, body)
    if name not in VOLATILE:
        assert body == recorded


def test_the_exception_lists_name_real_recordings_with_reasons():
    for exceptions in (NOT_REPRODUCED, VOLATILE, PREPARE):
        assert set(exceptions) <= set(NAMES)
    assert not set(NOT_REPRODUCED) & set(VOLATILE)
    assert all(reason.strip() for reason in [*NOT_REPRODUCED.values(), *VOLATILE.values()])
    assert all(load(name)["response"]["status"] < 400 for name in VOLATILE)
    assert len(NAMES) == 207
