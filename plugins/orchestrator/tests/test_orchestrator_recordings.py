"""The recorded exchanges ship with the test-support distribution and replay through the core's
RecordedBackend."""

from __future__ import annotations

import json
import tomllib
from fnmatch import fnmatch
from pathlib import Path

import httpx
from gateway_orchestrator_testing import RECORDINGS, RECORDINGS_INDEX, recorded_backend
from orch_http import send

SUPPORT = Path(__file__).resolve().parents[3] / "testing" / "orchestrator"


def test_every_recording_is_package_data():
    config = tomllib.loads((SUPPORT / "pyproject.toml").read_text())["tool"]["setuptools"]
    data = config["package-data"]["gateway_orchestrator_testing"]
    files = sorted(p.name for p in RECORDINGS.iterdir() if p.is_file())
    assert len(files) == 207
    assert all(any(fnmatch(f"recordings/{f}", g) for g in data) for f in files)
    assert RECORDINGS_INDEX.name in data
    indexed = {row["file"] for row in json.loads(RECORDINGS_INDEX.read_text())}
    assert indexed == set(files)


def test_every_recorded_request_replays_to_its_recorded_answer():
    with recorded_backend("*") as api:
        for name in sorted(api.recordings):
            exchange = json.loads((RECORDINGS / f"{name}.json").read_text())
            request, response = exchange["request"], exchange["response"]
            api.activate(name)  # several recordings share a request (approve, then its 400)
            status, body = send(
                api, request["method"], request["path"], request["query"], request["json"]
            )
            assert (status, body) == (response["status"], response["json"]), name
        assert api.unmatched == []
        assert {name for _, name in api.served} == set(api.recordings)


def test_a_client_that_normalizes_the_path_misses_the_recorded_traversal():
    # httpx drops "../" before sending: the request is not the one recorded, and says so.
    with recorded_backend("GET_api_jobs_{job_id}_workspace_{path}__sibling_prefix_escape") as api:
        job = "b652cfcb-ecad-42bb-9197-ea9b234dce17"
        resp = httpx.get(f"{api.url}/api/jobs/{job}/workspace/../job_{job}-old/notes.md")
        assert resp.status_code == 404 and "no recording matches" in resp.json()["detail"]
        assert [r.path for r in api.unmatched] == [f"/api/jobs/{job}/job_{job}-old/notes.md"]
