"""The test server against Gitea's recorded swagger, and the plugin against the same swagger.

``gitea_swagger_subset.json`` is the GET subset of Gitea's ``templates/swagger/v1_json.tmpl``
(go-gitea/gitea at 3db3c058, MIT). Go's encoding/json writes nil pointers and slices as
``null``, which Swagger 2.0 cannot express, so every property may also be null here.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import httpx
import pytest
from gateway_gitea_testing import OWNER, TOKEN, Site
from jsonschema import Draft4Validator

SWAGGER = json.loads((Path(__file__).parent / "gitea_swagger_subset.json").read_text())


def _nullable(schema: Any) -> Any:
    if isinstance(schema, dict):
        out = {k: _nullable(v) for k, v in schema.items() if k != "properties"}
        if "properties" in schema:
            out["properties"] = {
                name: {"anyOf": [_nullable(prop), {"type": "null"}]}
                for name, prop in schema["properties"].items()
            }
        return out
    if isinstance(schema, list):
        return [_nullable(s) for s in schema]
    return schema


DEFINITIONS = _nullable(SWAGGER["definitions"])


def response_schema(path: str, status: str) -> dict[str, Any]:
    response = SWAGGER["paths"][path]["get"]["responses"][status]
    if "$ref" in response:
        response = SWAGGER["responses"][response["$ref"].rsplit("/", 1)[1]]
    return {**response["schema"], "definitions": DEFINITIONS}


def check(body: Any, schema: dict[str, Any]) -> None:
    errors = sorted(Draft4Validator(schema).iter_errors(body), key=str)
    assert not errors, [f"{list(e.absolute_path)}: {e.message}" for e in errors[:5]]


@pytest.fixture
def api(site: Site):
    with httpx.Client(
        base_url=f"{site.gitea.url}/api/v1", headers={"Authorization": f"token {TOKEN}"}
    ) as client:
        yield client


def test_successful_answers_match_the_swagger(api: httpx.Client, site: Site):
    repo = f"/repos/{OWNER}/job-{site.job}"
    tree = site.repo.git("rev-parse", "main^{tree}").strip()
    cases = [
        ("/version", "/version", {}),
        (repo, "/repos/{owner}/{repo}", {}),
        (f"{repo}/commits", "/repos/{owner}/{repo}/commits", {}),
        (
            f"{repo}/commits",
            "/repos/{owner}/{repo}/commits",
            {
                "sha": "job-frozen",
                "stat": "false",
                "files": "false",
                "verification": "false",
                "not": "phase_1_start",
            },
        ),
        (f"{repo}/git/trees/{tree}", "/repos/{owner}/{repo}/git/trees/{sha}", {}),
        (
            f"{repo}/git/trees/{tree}",
            "/repos/{owner}/{repo}/git/trees/{sha}",
            {"recursive": "true", "per_page": "5", "page": "2"},
        ),
        (f"{repo}/tags", "/repos/{owner}/{repo}/tags", {"limit": "3"}),
    ]
    for url, template, params in cases:
        resp = api.get(url, params=params)
        assert resp.status_code == 200, (url, resp.text)
        check(resp.json(), response_schema(template, "200"))
    commits = api.get(f"{repo}/commits", params={"limit": 2}).json()
    assert {"files", "stats"} <= set(commits[0])  # stat/files default to true


def test_error_answers_have_the_documented_shapes(api: httpx.Client, site: Site):
    repo = f"/repos/{OWNER}/job-{site.job}"
    empty = f"/repos/{OWNER}/job-{site.empty_job}"
    api_error = {"$ref": "#/definitions/APIError", "definitions": DEFINITIONS}
    missing = api.get(f"/repos/{OWNER}/job-0badc0de-0000-4000-8000-000000000000")
    assert missing.status_code == 404 and missing.json()["message"] == "not found"
    assert missing.json()["errors"] is None
    assert api.get(f"/repos/nobody/job-{site.job}").json()["message"] == "GetUserByName"
    unknown_ref = api.get(f"{repo}/commits", params={"sha": "nope"})
    assert (unknown_ref.status_code, unknown_ref.text) == (404, "null")
    conflict = api.get(f"{empty}/commits")
    assert conflict.status_code == 409
    check(conflict.json(), api_error)
    assert api.get(f"{empty}/tags").json() == []
    bad_tree = api.get(f"{repo}/git/trees/{'0' * 40}")
    assert bad_tree.status_code == 400
    check(bad_tree.json(), api_error)
    refused = httpx.get(f"{site.gitea.url}/api/v1/version", headers={"Authorization": "token x"})
    assert refused.status_code == 401
    check(refused.json(), api_error)
    clipped = api.get(f"/repos/{OWNER}/job-{site.busy_job}/commits", params={"limit": 100})
    assert len(clipped.json()) == 50 and clipped.headers["X-Total-Count"] == "130"


def test_raw_quirks(api: httpx.Client, site: Site):
    raw = f"/repos/{OWNER}/job-{site.job}/raw/plan.md"
    head = site.repo.git("show", "main:plan.md")
    old = site.repo.git("show", "phase_1_start:plan.md")
    assert api.get(raw, params={"ref": "phase_1_start"}).text == old
    # A short SHA or an unknown name silently serves the default branch.
    assert api.get(raw, params={"ref": site.repo.commits["c1"][:7]}).text == head
    assert api.get(raw, params={"ref": "no-such-branch"}).text == head
    assert api.get(raw, params={"ref": "f" * 40}).status_code == 404
    ranged = api.get(raw, params={"ref": "main"}, headers={"Range": "bytes=0-9"})
    assert ranged.status_code == 206 and ranged.text == head[:10]
    assert ranged.headers["Content-Range"] == f"bytes 0-9/{len(head.encode())}"
    folder = api.get(f"/repos/{OWNER}/job-{site.job}/raw/output", params={"ref": "main"})
    assert folder.status_code == 404 and folder.json()["message"] == "getBlobForEntry"


# Every field the plugin reads from Gitea's JSON, by definition: nothing undocumented.
READ_BY_THE_PLUGIN = {
    "Commit": ["sha", "commit", "parents"],
    "RepoCommit": ["tree", "message", "author", "committer"],
    "CommitMeta": ["sha", "created"],
    "CommitUser": ["name", "email", "date"],
    "GitTreeResponse": ["tree", "total_count", "truncated"],
    "GitEntry": ["path", "mode", "type", "sha", "size"],
    "Tag": ["name", "id", "commit", "message"],
    "Repository": ["empty", "default_branch"],
    "ServerVersion": ["version"],
}


def test_the_plugin_reads_only_fields_the_swagger_declares():
    for definition, fields in READ_BY_THE_PLUGIN.items():
        declared = SWAGGER["definitions"][definition]["properties"]
        assert set(fields) <= set(declared), definition
    headers = SWAGGER["responses"]["CommitList"]["headers"]
    assert "X-Total" in headers  # the fallback when X-Total-Count is absent
