"""What the official TypeScript SDK client (Claude Code, the MCP Inspector) makes of our results.

The TypeScript SDK 1.x checks any ``structuredContent`` against the tool's success
``outputSchema``, error or not, and throws its own -32602 instead of returning our error; the
Python client skips that check, so only this test can see it. The SDK (latest 1.x) is installed
with npm into a cache folder outside the repository, reused between runs.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from conftest import gateway_env
from fixture_plugins import ERRS
from npm_cache import cache_dir, npm_package

pytestmark = pytest.mark.e2e

SDK_SPEC = "@modelcontextprotocol/sdk@1"  # the latest 1.x, looked for once a week
DRIVER = Path(__file__).resolve().parent / "ts_client" / "call_tools.cjs"
JOB_UUID = "3f2b8c1e-4d5a-4b6c-8d7e-9f0a1b2c3d4e"


@pytest.fixture(scope="module")
def ts_sdk() -> Iterator[Path]:
    folder = cache_dir("ts-sdk-1")
    probe = folder / "node_modules" / "@modelcontextprotocol" / "sdk" / "package.json"
    with npm_package(folder, SDK_SPEC, probe) as why:
        if why is not None:
            pytest.skip(f"{why}: needed for the TypeScript SDK client test")
        yield folder


def _drive(
    sdk: Path,
    tmp_path: Path,
    calls: list[tuple[str, dict]],
    prompts: list[tuple[str, dict]] | None = None,
    **env: str,
) -> dict:
    environment = {k: v for k, v in gateway_env().items() if not k.startswith("GITEA_")} | env
    spec: dict[str, object] = {
        "command": sys.executable,
        "args": ["-m", "gateway.cli", "serve"],
        "cwd": str(tmp_path),
        "env": environment,
        "calls": [list(c) for c in calls],
    }
    if prompts is not None:
        spec["prompts"] = [list(p) for p in prompts]
    proc = subprocess.run(
        [shutil.which("node") or "node", str(DRIVER), str(sdk), json.dumps(spec)],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    return json.loads(proc.stdout)


def test_every_error_kind_reaches_the_typescript_client_with_its_code(
    ts_sdk, tmp_path, plugin_site
):
    plugin_site("gwfx-errs", {"errs": "gwfx_errs"}, {"gwfx_errs": ERRS})
    calls = [
        # tool, arguments, expected code (None: success)
        ("errs_typed", {"n": 2}, None),
        ("errs_plain", {"n": 2}, None),
        ("errs_typed", {"n": 0}, "VALIDATION_ERROR"),
        ("errs_plain", {"n": 9, "extra": 1}, "VALIDATION_ERROR"),
        ("no_such_tool", {}, "NOT_FOUND"),
        ("errs_typed", {"kind": "not_found"}, "NOT_FOUND"),
        ("errs_plain", {"kind": "not_found"}, "NOT_FOUND"),
        ("bulk_read_new_jobs", {}, "DB_NOT_FOUND"),
        ("bulk_read_new_jobs", {"limit": 0}, "VALIDATION_ERROR"),
        ("errs_typed", {"kind": "db_not_found"}, "DB_NOT_FOUND"),
        ("errs_plain", {"kind": "db_not_found"}, "DB_NOT_FOUND"),
        ("get_job_file", {"job_id": JOB_UUID, "file_path": "a.md"}, "BACKEND_UNAVAILABLE"),
        ("errs_typed_remote", {}, "BACKEND_UNAVAILABLE"),
        ("errs_plain_remote", {}, "BACKEND_UNAVAILABLE"),
        ("errs_typed", {"kind": "permission_denied"}, "PERMISSION_DENIED"),
        ("errs_plain", {"kind": "permission_denied"}, "PERMISSION_DENIED"),
        ("errs_denied", {}, "PERMISSION_DENIED"),
    ]
    out = _drive(
        ts_sdk,
        tmp_path,
        [(name, args) for name, args, _ in calls],
        PYTHONPATH=os.environ["PYTHONPATH"],
        MCP_GATEWAY_PLUGINS="errs,queue,gitea",
        MCP_GATEWAY_DENY_TOOLS="errs_denied",
        # Listed although unconfigured: their errors meet the client's outputSchema checks.
        MCP_GATEWAY_OFFER_UNCONFIGURED_TOOLS="1",
    )
    assert out["sdk"].startswith("1.")
    tools = out["tools"]
    assert tools["errs_typed"] and tools["bulk_read_new_jobs"] and tools["get_job_file"]
    assert not tools["errs_plain"] and not tools["errs_plain_remote"]
    for (name, args, code), got in zip(calls, out["calls"], strict=True):
        where = f"{name} {args}"
        assert "thrown" not in got, f"{where}: the client threw {got['thrown']}"
        result = got["result"]
        if code is None:
            assert result.get("isError") is not True, where
            assert result["structuredContent"] == {"value": 2}, where
            assert json.loads(result["content"][0]["text"]) == {"value": 2}, where
            continue
        assert result["isError"] is True, where
        assert "structuredContent" not in result, where
        error = json.loads(result["content"][0]["text"])["error"]
        assert error["code"] == code, (where, error)
        assert isinstance(error["message"], str) and error["message"], where
        assert isinstance(error["retryable"], bool), where


def test_prompts_and_instructions_reach_the_typescript_client(ts_sdk, tmp_path):
    job = "d2cf2e9a-cc1f-4422-b782-c51acec41000"
    out = _drive(
        ts_sdk,
        tmp_path,
        [],
        prompts=[
            ("review_frozen_job", {"job_id": job}),
            ("verify_citations", {"job_id": job}),
            ("review_frozen_job", {"job_id": "not-a-uuid"}),
            ("no_such_prompt", {}),
        ],
        MCP_GATEWAY_PLUGINS="orchestrator,citations,gitea",
        COCKPIT_API_URL="http://127.0.0.1:9",  # configured, so offered (never contacted)
        GITEA_URL="http://127.0.0.1:9",
    )
    names = {p["name"] for p in out["prompt_list"]}
    assert {"review_frozen_job", "verify_citations"} <= names
    review, verify, bad, unknown = out["prompts"]
    text = review["result"]["messages"][0]["content"]["text"]
    assert f'get_frozen_job(job_id="{job}")' in text and "get_job_diff" in text
    assert "get_citation_stats" in verify["result"]["messages"][0]["content"]["text"]
    assert bad["thrown"]["code"] == -32602 and "job_id" in bad["thrown"]["message"]
    assert unknown["thrown"]["code"] == -32602 and "unknown prompt" in unknown["thrown"]["message"]
    assert "review_frozen_job(job_id)" in out["instructions"]
    assert len(out["instructions"]) <= 2048
