"""Every recorded exchange behind the eight tools, replayed: the plugin sends exactly the
recorded request (method, path, query, body) and shapes the recorded answer.

Requests the plugin never sends (a malformed job id, a non-integer source, top_k=51, ...) are
refused before any request; their recorded answers are replayed for a request it does send,
to show that such an answer still comes out as a clean error."""

from __future__ import annotations

import dataclasses
import json
from typing import Any

import pytest
from gateway_orchestrator_testing import RECORDINGS, RECORDINGS_INDEX, recorded_backend
from gateway_orchestrator_testing import seed as ids

from gateway.testing.backends import RecordedBackend, Recording

pytestmark = pytest.mark.anyio

J = ids.JOB_PROCESSING
ENDPOINTS = {
    "/api/sources",
    "/api/sources/{source_id}",
    "/api/jobs/{job_id}/citations",
    "/api/citations/{citation_id}",
    "/api/jobs/{job_id}/sources/search",
    "/api/jobs/{job_id}/sources/{source_id}/annotations",
    "/api/jobs/{job_id}/sources/{source_id}/tags",
    "/api/jobs/{job_id}/citations/stats",
}
JOB_404 = "GET_api_jobs_{job_id}__404"

#: recording -> (tool, arguments, further recordings the call needs, expected error code)
REPLAYS: dict[str, tuple[str, dict[str, Any], tuple[str, ...], str | None]] = {
    "GET_api_sources": ("list_job_sources", {}, (), None),
    "GET_api_sources__job_id": ("list_job_sources", {"job_id": J}, (), None),
    "GET_api_sources__type_website": ("list_job_sources", {"source_type": "website"}, (), None),
    "GET_api_sources_{source_id}": ("get_source_detail", {"source_id": 1}, (), None),
    "GET_api_sources_{source_id}__404": (
        "get_source_detail",
        {"source_id": 999999},
        (),
        "NOT_FOUND",
    ),
    "GET_api_sources_{source_id}__content_limit_0_full": (
        "get_source_detail",
        {"source_id": 2, "content_limit": 0},
        (),
        None,
    ),
    "GET_api_sources_{source_id}__content_limit_200": (
        "get_source_detail",
        {"source_id": 1, "content_limit": 200},
        (),
        None,
    ),
    "GET_api_citations_{citation_id}": ("get_citation_detail", {"citation_id": 1}, (), None),
    "GET_api_citations_{citation_id}__404": (
        "get_citation_detail",
        {"citation_id": 999999},
        (),
        "NOT_FOUND",
    ),
    "GET_api_citations_{citation_id}__inference_no_quote": (
        "get_citation_detail",
        {"citation_id": 4},
        (),
        None,
    ),
    "GET_api_jobs_{job_id}_citations": ("list_job_citations", {"job_id": J}, (), None),
    "GET_api_jobs_{job_id}_citations__source_id": (
        "list_job_citations",
        {"job_id": J, "source_id": 2},
        (),
        None,
    ),
    "GET_api_jobs_{job_id}_citations__status_verified": (
        "list_job_citations",
        {"job_id": J, "verification_status": "verified"},
        (),
        None,
    ),
    "GET_api_jobs_{job_id}_citations__unknown_job": (
        "list_job_citations",
        {"job_id": ids.UNKNOWN_ID},
        (JOB_404,),
        "NOT_FOUND",
    ),
    "GET_api_jobs_{job_id}_citations_stats": ("get_citation_stats", {"job_id": J}, (), None),
    "GET_api_jobs_{job_id}_citations_stats__unknown_job": (
        "get_citation_stats",
        {"job_id": ids.UNKNOWN_ID},
        (JOB_404,),
        "NOT_FOUND",
    ),
    "GET_api_jobs_{job_id}_sources_search": (
        "search_job_sources",
        {"job_id": J, "query": "retention invoices", "mode": "keyword"},
        (),
        None,
    ),
    "GET_api_jobs_{job_id}_sources_search__no_results": (
        "search_job_sources",
        {"job_id": J, "query": "blockchain", "mode": "keyword"},
        ("GET_api_jobs_{job_id}",),
        None,
    ),
    "GET_api_jobs_{job_id}_sources_search__semantic_mode_ignored": (
        "search_job_sources",
        {"job_id": J, "query": "retention", "mode": "semantic", "top_k": 3},
        (),
        None,
    ),
    "GET_api_jobs_{job_id}_sources_search__source_type": (
        "search_job_sources",
        {
            "job_id": J,
            "query": "immutability",
            "mode": "keyword",
            "top_k": 5,
            "source_type": "document",
        },
        (),
        None,
    ),
    "GET_api_jobs_{job_id}_sources_search__tags": (
        "search_job_sources",
        {"job_id": J, "query": "archived", "mode": "keyword", "tags": "gobd,e-invoicing"},
        (),
        None,
    ),
    "GET_api_jobs_{job_id}_sources_{source_id}_annotations": (
        "get_source_annotations",
        {"job_id": J, "source_id": 1},
        (),
        None,
    ),
    "GET_api_jobs_{job_id}_sources_{source_id}_annotations__empty": (
        "get_source_annotations",
        {"job_id": ids.JOB_COMPLETED, "source_id": 1},
        ("GET_api_jobs_{job_id}__completed",),
        None,
    ),
    "GET_api_jobs_{job_id}_sources_{source_id}_annotations__type_question": (
        "get_source_annotations",
        {"job_id": J, "source_id": 1, "annotation_type": "question"},
        (),
        None,
    ),
    "GET_api_jobs_{job_id}_sources_{source_id}_tags": (
        "get_source_tags",
        {"job_id": J, "source_id": 1},
        (),
        None,
    ),
    "GET_api_jobs_{job_id}_sources_{source_id}_tags__empty": (
        "get_source_tags",
        {"job_id": J, "source_id": 4},
        ("GET_api_jobs_{job_id}",),
        None,
    ),
}

#: recording of a request the plugin refuses -> (tool, the arguments that would send it, the
#: field named, a valid call of the same tool the recorded answer is replayed for)
REFUSED: dict[str, tuple[str, dict[str, Any], str, dict[str, Any]]] = {
    "GET_api_sources__500_invalid_job_uuid": (
        "list_job_sources",
        {"job_id": "not-a-uuid"},
        "job_id",
        {"job_id": J},
    ),
    "GET_api_sources__type_unknown": (
        "list_job_sources",
        {"source_type": "book"},
        "source_type",
        {"source_type": "custom"},
    ),
    "GET_api_sources_{source_id}__422_not_int": (
        "get_source_detail",
        {"source_id": "abc"},
        "source_id",
        {"source_id": 7},
    ),
    "GET_api_citations_{citation_id}__422_not_int": (
        "get_citation_detail",
        {"citation_id": "abc"},
        "citation_id",
        {"citation_id": 7},
    ),
    "GET_api_jobs_{job_id}_citations__500_invalid_uuid": (
        "list_job_citations",
        {"job_id": "not-a-uuid"},
        "job_id",
        {"job_id": J},
    ),
    "GET_api_jobs_{job_id}_citations__status_unknown_empty": (
        "list_job_citations",
        {"job_id": J, "verification_status": "approved"},
        "verification_status",
        {"job_id": J, "verification_status": "unverified"},
    ),
    "GET_api_jobs_{job_id}_citations_stats__500_invalid_uuid": (
        "get_citation_stats",
        {"job_id": "not-a-uuid"},
        "job_id",
        {"job_id": J},
    ),
    "GET_api_jobs_{job_id}_sources_search__422_missing_query": (
        "search_job_sources",
        {"job_id": J, "mode": "keyword"},
        "query",
        {"job_id": J, "query": "x", "mode": "keyword"},
    ),
    "GET_api_jobs_{job_id}_sources_search__422_top_k": (
        "search_job_sources",
        {"job_id": J, "query": "x", "top_k": 51},
        "top_k",
        {"job_id": J, "query": "x", "top_k": 50},
    ),
    "GET_api_jobs_{job_id}_sources_search__500_invalid_uuid": (
        "search_job_sources",
        {"job_id": "not-a-uuid", "query": "retention", "mode": "keyword"},
        "job_id",
        {"job_id": J, "query": "retention", "mode": "keyword"},
    ),
    "GET_api_jobs_{job_id}_sources_{source_id}_annotations__422_source_not_int": (
        "get_source_annotations",
        {"job_id": J, "source_id": "abc"},
        "source_id",
        {"job_id": J, "source_id": 7},
    ),
    "GET_api_jobs_{job_id}_sources_{source_id}_annotations__500_invalid_uuid": (
        "get_source_annotations",
        {"job_id": "not-a-uuid", "source_id": 1},
        "job_id",
        {"job_id": J, "source_id": 1},
    ),
    "GET_api_jobs_{job_id}_sources_{source_id}_tags__500_invalid_uuid": (
        "get_source_tags",
        {"job_id": "not-a-uuid", "source_id": 1},
        "job_id",
        {"job_id": J, "source_id": 1},
    ),
}


def recorded(name: str) -> dict[str, Any]:
    return json.loads((RECORDINGS / f"{name}.json").read_text())


def answer(name: str) -> Any:
    return recorded(name)["response"]["json"]


def test_every_recording_behind_the_tools_is_replayed_or_refused():
    index = json.loads(RECORDINGS_INDEX.read_text())
    behind = {
        row["file"].removesuffix(".json") for row in index if row["path_template"] in ENDPOINTS
    }
    assert behind == set(REPLAYS) | set(REFUSED)
    assert not set(REPLAYS) & set(REFUSED)


def _gateway(gateway_factory: Any, api: RecordedBackend) -> Any:
    return gateway_factory(plugins=["citations"], env={"COCKPIT_API_URL": api.url})


@pytest.mark.parametrize("name", sorted(REPLAYS))
async def test_the_plugin_sends_the_recorded_request_and_shapes_the_recorded_answer(
    gateway_factory, name
):
    tool, args, also, expected = REPLAYS[name]
    with recorded_backend(name, *also) as api:
        gw = _gateway(gateway_factory, api)
        async with gw:
            result = await gw.call(tool, args)
        assert api.unmatched == [], [r.target for r in api.unmatched]
        assert [served for _, served in api.served] == [name, *also]
    assert result.code == (expected or "OK"), result.text()
    if expected is None:
        check_shape(tool, result.payload, answer(name))


def check_shape(tool: str, out: dict[str, Any], raw: Any) -> None:
    """The shaped result holds the recorded answer, decoded and normalized."""
    if tool == "list_job_sources":
        assert [s["id"] for s in out["sources"]] == [s["id"] for s in raw["sources"]]
        assert out["total"] == raw["total"] and out["has_more"] is False
        for got, sent in zip(out["sources"], raw["sources"], strict=True):
            assert got["metadata"] == json.loads(sent["metadata"])
            assert got["job_ids"] == sent.get("job_ids")
    elif tool == "get_source_detail":
        assert out["content"].startswith(raw["content"])
        assert out["content_truncated"] is raw["content_truncated"]
        assert out["full_content_length"] == raw["full_content_length"]
        assert ("[truncated]" in out["content"]) is raw["content_truncated"]
        assert out["metadata"] == json.loads(raw["metadata"])
    elif tool == "list_job_citations":
        assert out["citations"] == raw["citations"] and out["total"] == raw["total"]
    elif tool == "get_citation_detail":
        assert out["locator"] == json.loads(raw["locator"])
        matched = raw["matched_location"]
        assert out["matched_location"] == (matched and json.loads(matched))
        assert {k: v for k, v in out.items() if k not in ("locator", "matched_location")} == {
            k: v for k, v in raw.items() if k not in ("locator", "matched_location")
        }
    elif tool == "get_citation_stats":
        for key, counts in raw.items():
            if isinstance(counts, dict):
                assert out[key].items() >= counts.items()
                assert {v for k, v in out[key].items() if k not in counts} <= {0}
            else:
                assert out[key] == counts
    elif tool == "search_job_sources":
        assert out["mode"] == raw["mode"] == "keyword"
        assert [h["source_id"] for h in out["results"]] == [h["source_id"] for h in raw["results"]]
        for got, sent in zip(out["results"], raw["results"], strict=True):
            assert got["evidence_label"] == sent["evidence_label"]
            assert got["rank"] == sent["rank"]
            plain = sent["snippet"].replace("<b>", "**").replace("</b>", "**")
            assert plain.startswith(got["snippet"].partition(" [truncated] ")[0])
    elif tool == "get_source_annotations":
        assert out["annotations"] == raw and out["count"] == len(raw)
    elif tool == "get_source_tags":
        assert out["tags"] == raw
    else:  # pragma: no cover
        raise AssertionError(tool)


@pytest.mark.parametrize("name", sorted(REFUSED))
async def test_a_request_the_plugin_never_sends_is_refused_first(gateway_factory, name):
    tool, args, field, _ = REFUSED[name]
    with recorded_backend(name) as api:
        gw = _gateway(gateway_factory, api)
        async with gw:
            result = await gw.call(tool, args)
        assert api.requests == []
    assert result.code == "VALIDATION_ERROR"
    assert result.payload["error"]["details"]["fields"][0]["field"] == field


@pytest.mark.parametrize("name", sorted(REFUSED))
async def test_such_a_recorded_answer_is_still_a_clean_result(gateway_factory, name):
    # The recorded answer, replayed for the request the valid call sends: an API that answers
    # 500 or 422 to it is reported as such, never as INTERNAL_ERROR.
    tool, _, _, valid = REFUSED[name]
    with recorded_backend() as probe:
        gw = _gateway(gateway_factory, probe)
        async with gw:
            await gw.call(tool, valid)
    sent = probe.requests[0]
    rec = Recording.from_file(RECORDINGS / f"{name}.json")
    rec = dataclasses.replace(rec, path=sent.path, query=tuple(sorted(sent.query_pairs)))
    with RecordedBackend(rec) as api:
        if rec.status == 200:  # an empty answer: the job is looked up
            api.load(RECORDINGS / "GET_api_jobs_{job_id}.json")
        gw = _gateway(gateway_factory, api)
        async with gw:
            result = await gw.call(tool, valid)
        assert api.unmatched == []
    status = rec.status
    expected = {200: "OK", 422: "VALIDATION_ERROR", 500: "BACKEND_ERROR"}[status]
    assert result.code == expected, result.text()
    if status == 500:
        assert result.payload["error"]["retryable"] is True
    if status == 422:
        message = result.payload["error"]["message"]
        assert message.startswith("the orchestrator API rejected the arguments")
