"""Workspace paths and long texts: the gateway never lets a path out of the job's workspace
(the API's own sandbox is a string-prefix test that serves the sibling folder
``job_<id>-old/``), sends each segment percent-encoded, and bounds long texts with a marker that
says how much is left and how to read on."""

from __future__ import annotations

import posixpath
from urllib.parse import unquote

import pytest
from gateway_orchestrator.workspace import check_workspace_path, workspace_url
from gateway_orchestrator_testing import seed as ids
from hypothesis import given
from hypothesis import strategies as st
from orch_http import send
from orch_kit import error, ok, orchestrator_gateway

from gateway.testing.backends import Reply

JOB = ids.JOB_PROCESSING
SIBLING = f"../job_{JOB}-old/notes.md"

BAD_PATHS = [
    SIBLING,
    f"%2e%2e/job_{JOB}-old/notes.md",
    f"%2E%2E/job_{JOB}-old/notes.md",
    f"%252e%252e/job_{JOB}-old/notes.md",  # double-encoded
    f"..%2Fjob_{JOB}-old%2Fnotes.md",
    f"./../job_{JOB}-old/notes.md",
    f"archive/../../job_{JOB}-old/notes.md",
    "../../../../etc/passwd",
    "/etc/passwd",
    "//etc/passwd",
    "C:/Windows/win.ini",
    "archive\\..\\..\\etc\\passwd",
    "plan.md\x00.txt",
    "plan\n.md",
    "",
    ".",
    "./",
    "a" * 1025,
]


@pytest.mark.anyio
@pytest.mark.parametrize("path", BAD_PATHS)
async def test_paths_leaving_the_workspace_are_refused_before_any_request(orch, tmp_path, path):
    async with orchestrator_gateway(orch.url, tmp_path) as gw:
        message = error(
            await gw.call("get_workspace_file", {"job_id": JOB, "path": path}), "VALIDATION_ERROR"
        )
    assert message.startswith("Invalid arguments: path:")
    assert orch.requests == []


def test_the_api_itself_serves_the_sibling_folder(orch):
    # Why the gateway checks paths: the API's prefix sandbox lets this through.
    status, body = send(orch, "GET", f"/api/jobs/{JOB}/workspace/{SIBLING}")
    assert status == 200 and "outside the job workspace" in body["content"]


@pytest.mark.anyio
async def test_each_segment_is_sent_percent_encoded(orch, tmp_path):
    name = "docs/spaces & #hash?.md"
    orch.state.write_file(JOB, name, "odd name\n")
    orch.state.write_file(JOB, "données/résumé.md", "café\n")
    async with orchestrator_gateway(orch.url, tmp_path) as gw:
        odd = ok(await gw.call("get_workspace_file", {"job_id": JOB, "path": name}))
        accents = ok(
            await gw.call("get_workspace_file", {"job_id": JOB, "path": "./données//résumé.md"})
        )
    assert (odd["content"], accents["content"]) == ("odd name\n", "café\n")
    assert accents["path"] == "données/résumé.md"  # empty and "." segments dropped
    assert [r.path for r in orch.requests] == [
        f"/api/jobs/{JOB}/workspace/docs/spaces%20%26%20%23hash%3F.md",
        f"/api/jobs/{JOB}/workspace/donn%C3%A9es/r%C3%A9sum%C3%A9.md",
    ]


@pytest.mark.anyio
async def test_a_missing_file_names_the_path_and_where_to_look(orch, tmp_path):
    async with orchestrator_gateway(orch.url, tmp_path) as gw:
        message = error(
            await gw.call("get_workspace_file", {"job_id": JOB, "path": "nope.md"}), "NOT_FOUND"
        )
    assert "'nope.md'" in message and "get_workspace_overview" in message


PIECES = st.sampled_from(
    ["..", ".", "/", "\\", "%2e", "%2E", "%2f", "%25", "%", "2e", "a", "job_x-old", ":", "C:", " "]
)


@given(st.one_of(st.lists(PIECES, max_size=12).map("".join), st.text(max_size=40)))
def test_every_accepted_path_stays_inside_the_job_folder(raw):
    """Whatever is accepted, the API (which percent-decodes the path once, joins it to the job
    folder and normalizes it) resolves inside the job folder, never beside it."""
    try:
        path = check_workspace_path(raw)
    except ValueError:
        return
    base = f"/workspace/job_{JOB}"
    sent = unquote(workspace_url(JOB, path).split("/workspace/", 1)[1])
    assert sent == path  # the API sees exactly the checked path
    resolved = posixpath.normpath(posixpath.join(base, sent))
    assert resolved.startswith(base + "/")


# --- long texts --------------------------------------------------------------------------------


@pytest.mark.anyio
async def test_a_long_file_is_cut_with_a_marker_and_read_on_by_offset(orch, tmp_path):
    text = "".join(f"line {i:05d} of the agent's memory\n" for i in range(3000))  # 99,000 chars
    orch.state.write_file(JOB, "workspace.md", text)
    args = {"job_id": JOB, "path": "workspace.md"}
    parts = []
    async with orchestrator_gateway(orch.url, tmp_path) as gw:
        first = ok(await gw.call("get_workspace_file", args))
        page, offset = first, 0
        while True:
            body = page["content"]
            if page["truncated"]:
                body, marker = body.rsplit("\n[truncated] ", 1)
                assert marker == (
                    f"{len(text) - page['next_offset']:,} of {len(text):,} characters not shown; "
                    f"call again with offset={page['next_offset']}"
                )
            parts.append(body)
            if page["next_offset"] is None:
                break
            offset = page["next_offset"]
            page = ok(await gw.call("get_workspace_file", {**args, "offset": offset}))
        past = error(
            await gw.call("get_workspace_file", {**args, "offset": len(text)}), "VALIDATION_ERROR"
        )
        error(
            await gw.call("get_workspace_file", {**args, "max_chars": 80_001}), "VALIDATION_ERROR"
        )
        small = ok(await gw.call("get_workspace_file", {**args, "max_chars": 100}))
    assert (first["total_chars"], first["truncated"], first["next_offset"]) == (
        99_000,
        True,
        40_000,
    )
    assert "".join(parts) == text and len(parts) == 3
    assert "past the end" in past and "99000 characters" in past
    assert small["content"].startswith(text[:100] + "\n[truncated] 98,900 of 99,000 characters")


@pytest.mark.anyio
async def test_the_overview_cuts_long_texts_and_reads_more_on_request(orch, tmp_path):
    text = "".join(f"memory {i:04d} {'x' * 40}\n" for i in range(100))  # 5,300 chars
    orch.state.write_file(JOB, "workspace.md", text)
    args = {"job_id": JOB}
    async with orchestrator_gateway(orch.url, tmp_path) as gw:
        preview = ok(await gw.call("get_workspace_overview", args))
        assert [r.path for r in orch.requests] == [f"/api/jobs/{JOB}/workspace"]
        whole = ok(await gw.call("get_workspace_overview", {**args, "max_chars": 10_000}))
        assert orch.requests[-1].path == f"/api/jobs/{JOB}/workspace/workspace.md"
        more = ok(await gw.call("get_workspace_overview", {**args, "max_chars": 3000}))
        less = ok(await gw.call("get_workspace_overview", {**args, "max_chars": 100}))
    hint = "get_workspace_file(path='workspace.md', offset={}) or a larger max_chars reads on"
    assert preview["workspace_md"] == (
        text[:2000] + "\n[truncated] 3,300 of 5,300 bytes not shown; " + hint.format(2000)
    )
    assert preview["truncated"] == ["workspace.md"]
    assert preview["plan_md"].startswith("# Plan") and "[truncated]" not in preview["plan_md"]
    assert (whole["workspace_md"], whole["truncated"]) == (text, [])
    assert more["workspace_md"] == (
        text[:3000] + "\n[truncated] 2,300 of 5,300 characters not shown; " + hint.format(3000)
    )
    assert less["workspace_md"].startswith(
        text[:100] + "\n[truncated] 5,200 of 5,300 bytes not shown"
    )
    assert less["truncated"] == ["workspace.md", "plan.md"]


@pytest.mark.anyio
async def test_the_overview_keeps_the_preview_when_the_whole_file_cannot_be_read(orch, tmp_path):
    orch.state.write_file(JOB, "workspace.md", "é" * 3000)
    orch.override(f"/api/jobs/{JOB}/workspace/workspace.md", Reply.json({"detail": "boom"}, 500))
    async with orchestrator_gateway(orch.url, tmp_path) as gw:
        out = ok(await gw.call("get_workspace_overview", {"job_id": JOB, "max_chars": 5000}))
    # Sizes are bytes: 3,000 characters of two bytes each.
    assert out["workspace_md"].startswith(
        "é" * 2000 + "\n[truncated] 2,000 of 6,000 bytes not shown"
    )
