"""What the gateway adds over the raw citation endpoints, each against the stateful fake."""

from __future__ import annotations

import json
import re
import tempfile
from pathlib import Path
from typing import Any

import anyio
import pytest
from gateway_citations.search import plain_snippet
from gateway_citations.sources import CONTENT_CAP
from gateway_orchestrator_testing import FakeOrchestrator
from gateway_orchestrator_testing import seed as ids
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from gateway.testing import make_gateway

pytestmark = pytest.mark.anyio

JOB = ids.JOB_PROCESSING
JOB_TOOLS: dict[str, dict[str, Any]] = {
    "list_job_sources": {},
    "list_job_citations": {},
    "search_job_sources": {"query": "retention"},
    "get_source_annotations": {"source_id": 1},
    "get_source_tags": {"source_id": 1},
    "get_citation_stats": {},
}


async def call(gw: Any, name: str, args: dict[str, Any]) -> Any:
    result = await gw.call(name, args)
    assert result.code != "INTERNAL_ERROR", result.text()
    return result


def wire(api: FakeOrchestrator) -> list[tuple[str, str, dict[str, str]]]:
    return [(r.method, r.path, r.query) for r in api.requests]


# --- ids are checked before any request --------------------------------------------------------


@pytest.mark.parametrize("tool", sorted(JOB_TOOLS))
@pytest.mark.parametrize(
    "job_id", ["not-a-uuid", "b652cfcb-ecad-42bb-9197-ea9b234dce1", "'; DROP TABLE jobs; --", ""]
)
async def test_a_malformed_job_id_is_refused_before_any_request(cit_gateway, orch, tool, job_id):
    gw = cit_gateway()
    async with gw:
        result = await call(gw, tool, {"job_id": job_id, **JOB_TOOLS[tool]})
    assert result.code == "VALIDATION_ERROR"
    assert result.payload["error"]["details"]["fields"][0]["field"] == "job_id"
    assert "list_jobs" in result.payload["error"]["message"]
    assert orch.requests == []  # the API would have answered 500 with asyncpg's text


@pytest.mark.parametrize(
    ("tool", "args", "field"),
    [
        ("get_source_detail", {"source_id": "abc"}, "source_id"),
        ("get_source_detail", {"source_id": "1"}, "source_id"),
        ("get_source_detail", {"source_id": True}, "source_id"),
        ("get_source_detail", {"source_id": 0}, "source_id"),
        ("get_source_detail", {"source_id": 2**31}, "source_id"),
        ("get_citation_detail", {"citation_id": 1.5}, "citation_id"),
        ("get_citation_detail", {"citation_id": -3}, "citation_id"),
        ("get_source_tags", {"job_id": JOB, "source_id": "abc"}, "source_id"),
        ("get_source_annotations", {"job_id": JOB, "source_id": [1]}, "source_id"),
        ("list_job_citations", {"job_id": JOB, "source_id": "2"}, "source_id"),
        (
            "list_job_citations",
            {"job_id": JOB, "verification_status": "approved"},
            "verification_status",
        ),
        ("list_job_sources", {"source_type": "book"}, "source_type"),
        (
            "get_source_annotations",
            {"job_id": JOB, "source_id": 1, "annotation_type": "x"},
            "annotation_type",
        ),
        ("search_job_sources", {"job_id": JOB, "query": "x", "top_k": 51}, "top_k"),
        ("search_job_sources", {"job_id": JOB, "query": "   "}, "query"),
        ("search_job_sources", {"job_id": JOB}, "query"),
        ("search_job_sources", {"job_id": JOB, "query": "x", "mode": "vector"}, "mode"),
        (
            "search_job_sources",
            {"job_id": JOB, "query": "x", "snippet_chars": 5000},
            "snippet_chars",
        ),
        ("list_job_sources", {"limit": 101}, "limit"),
        ("list_job_sources", {"offset": -1}, "offset"),
        ("get_source_detail", {"source_id": 1, "content_limit": CONTENT_CAP + 1}, "content_limit"),
    ],
)
async def test_bad_arguments_are_refused_naming_the_field_before_any_request(
    cit_gateway, orch, tool, args, field
):
    gw = cit_gateway()
    async with gw:
        result = await call(gw, tool, args)
    assert result.code == "VALIDATION_ERROR"
    fields = [f["field"] for f in result.payload["error"]["details"]["fields"]]
    assert fields[0].split(".")[0] == field
    assert orch.requests == []


# --- unknown jobs: NOT_FOUND, never a result that looks like an empty job ------------------------


@pytest.mark.parametrize("tool", sorted(JOB_TOOLS))
async def test_an_unknown_job_is_not_found_and_says_where_the_ids_are(cit_gateway, orch, tool):
    gw = cit_gateway()
    async with gw:
        result = await call(gw, tool, {"job_id": ids.UNKNOWN_ID, **JOB_TOOLS[tool]})
    assert result.code == "NOT_FOUND", result.payload
    message = result.payload["error"]["message"]
    assert ids.UNKNOWN_ID in message and "list_jobs" in message
    # the citation endpoint answered (empty, 200), then the job was looked up
    assert wire(orch)[-1] == ("GET", f"/api/jobs/{ids.UNKNOWN_ID}", {})


async def test_a_known_job_with_nothing_in_it_is_an_honest_empty_result(cit_gateway, orch):
    gw = cit_gateway()
    async with gw:
        stats = await call(gw, "get_citation_stats", {"job_id": ids.JOB_SCRATCH})
        tags = await call(gw, "get_source_tags", {"job_id": JOB, "source_id": 4})
        cites = await call(gw, "list_job_citations", {"job_id": ids.JOB_SCRATCH})
    assert not stats.is_error and stats.payload["total_citations"] == 0
    assert set(stats.payload["citations_by_verification_status"].values()) == {0}
    assert tags.payload == {"job_id": JOB, "source_id": 4, "tags": []}
    assert cites.payload["citations"] == [] and cites.payload["has_more"] is False


async def test_a_job_with_data_costs_one_request(cit_gateway, orch):
    gw = cit_gateway()
    async with gw:
        for tool, extra in JOB_TOOLS.items():
            assert not (await call(gw, tool, {"job_id": JOB, **extra})).is_error
    assert not any(path == f"/api/jobs/{JOB}" for _, path, _ in wire(orch))
    assert len(orch.requests) == len(JOB_TOOLS)


# --- list_job_sources ------------------------------------------------------------------------------


async def test_sources_across_jobs_carry_their_job_ids_and_page_to_the_end(cit_gateway, orch):
    gw = cit_gateway()
    seen: list[int] = []
    offsets = []
    async with gw:
        offset: int | None = 0
        while offset is not None:
            offsets.append(offset)
            page = (await call(gw, "list_job_sources", {"limit": 3, "offset": offset})).payload
            assert page["total"] == 4 and page["limit"] == 3 and page["offset"] == offset
            assert all(s["job_ids"] for s in page["sources"])
            seen += [s["id"] for s in page["sources"]]
            offset = page["next_offset"]
            assert page["has_more"] is (offset is not None)
        first = (await call(gw, "list_job_sources", {"limit": 1})).payload["sources"][0]
        scoped = (await call(gw, "list_job_sources", {"job_id": JOB, "limit": 2})).payload
    assert offsets == [0, 3]
    assert first["id"] == 1  # newest first
    assert first["job_ids"] == [JOB, ids.JOB_COMPLETED, ids.JOB_PENDING_REVIEW]
    assert sorted(seen) == [1, 2, 3, 4]
    assert scoped["job_id"] == JOB and scoped["total"] == 3 and scoped["next_offset"] == 2
    assert all(s["job_ids"] is None for s in scoped["sources"])
    assert scoped["sources"][0]["metadata"] == {
        "mime": "application/pdf",
        "pages": 44,
        "language": "en",
    }
    assert wire(orch)[-1] == ("GET", "/api/sources", {"limit": "2", "offset": "0", "job_id": JOB})


async def test_list_job_sources_filters_by_type_on_the_wire(cit_gateway, orch):
    gw = cit_gateway()
    async with gw:
        page = (await call(gw, "list_job_sources", {"source_type": "website"})).payload
    assert [s["id"] for s in page["sources"]] == [2]
    assert wire(orch) == [
        ("GET", "/api/sources", {"limit": "50", "offset": "0", "type": "website"})
    ]


# --- get_source_detail -------------------------------------------------------------------------------


def _long_source(api: FakeOrchestrator, chars: int) -> int:
    text = ("The archive keeps every invoice for eight years. " * (chars // 49 + 1))[:chars]
    return api.state.add_source("Long manual", text, type="document", jobs=(JOB,)).id


async def test_source_content_defaults_to_2000_chars_with_a_marker_saying_how_much_is_left(
    cit_gateway, orch
):
    source_id = _long_source(orch, 5000)
    gw = cit_gateway()
    async with gw:
        detail = (await call(gw, "get_source_detail", {"source_id": source_id})).payload
    assert wire(orch) == [("GET", f"/api/sources/{source_id}", {"content_limit": "2000"})]
    kept, marker = detail["content"].split("\n[truncated] ")
    assert kept == orch.state.sources[source_id].content[:2000]
    assert marker == "3,000 of 5,000 characters not shown; content_limit=0 shows up to 20,000"
    assert detail["content_truncated"] is True
    assert (detail["returned_chars"], detail["full_content_length"]) == (2000, 5000)


async def test_content_limit_0_is_the_whole_source_up_to_the_cap(cit_gateway, orch):
    short, huge = 2, _long_source(orch, CONTENT_CAP + 10_000)
    gw = cit_gateway()
    async with gw:
        whole = (
            await call(gw, "get_source_detail", {"source_id": short, "content_limit": 0})
        ).payload
        result = await call(gw, "get_source_detail", {"source_id": huge, "content_limit": 0})
    assert whole["content"] == orch.state.sources[short].content
    assert whole["content_truncated"] is False and "[truncated]" not in whole["content"]
    capped = result.payload
    assert capped["returned_chars"] == CONTENT_CAP and capped["content_truncated"] is True
    assert capped["content"].endswith(
        "\n[truncated] 10,000 of 30,000 characters not shown; this tool shows at most 20,000; "
        "search_job_sources finds passages in the rest"
    )
    # inside Claude Code's limits: under the tool's published result size, ~5k tokens of prose
    assert len(result.text()) < 30_000
    assert ("GET", f"/api/sources/{huge}", {"content_limit": "0"}) in wire(orch)


async def test_an_unknown_source_is_not_found_naming_the_listing_tool(cit_gateway, orch):
    gw = cit_gateway()
    async with gw:
        result = await call(gw, "get_source_detail", {"source_id": 999999})
    assert result.code == "NOT_FOUND"
    assert result.payload["error"]["message"] == "no source 999999; list_job_sources shows the ids"


# --- citations ---------------------------------------------------------------------------------------


async def test_citations_filter_by_source_and_verification_status(cit_gateway, orch):
    gw = cit_gateway()
    async with gw:
        failed = (
            await call(gw, "list_job_citations", {"job_id": JOB, "verification_status": "failed"})
        ).payload
        of_source = (await call(gw, "list_job_citations", {"job_id": JOB, "source_id": 1})).payload
    assert [c["id"] for c in failed["citations"]] == [5]
    assert failed["citations"][0]["verification_status"] == "failed"
    assert {c["source_id"] for c in of_source["citations"]} == {1} and of_source["total"] == 3
    assert wire(orch) == [
        ("GET", f"/api/jobs/{JOB}/citations", {"limit": "50", "offset": "0", "status": "failed"}),
        ("GET", f"/api/jobs/{JOB}/citations", {"limit": "50", "offset": "0", "source_id": "1"}),
    ]


async def test_citation_detail_decodes_locator_and_matched_location(cit_gateway, orch):
    gw = cit_gateway()
    async with gw:
        one = (await call(gw, "get_citation_detail", {"citation_id": 1})).payload
        unverified = (await call(gw, "get_citation_detail", {"citation_id": 4})).payload
        missing = await call(gw, "get_citation_detail", {"citation_id": 424242})
    assert one["locator"] == {"page": 12, "section": "3.2"}
    assert one["matched_location"] == {"char_start": 1200, "char_end": 1300}
    assert one["created_at"] == "2026-11-22T09:08:45.491628Z"
    assert unverified["matched_location"] is None and unverified["verbatim_quote"] is None
    assert (
        missing.code == "NOT_FOUND" and "list_job_citations" in missing.payload["error"]["message"]
    )


async def test_citation_stats_count_every_known_value_zeros_included(cit_gateway, orch):
    gw = cit_gateway()
    async with gw:
        stats = (await call(gw, "get_citation_stats", {"job_id": ids.JOB_COMPLETED})).payload
    assert stats["sources_by_type"] == {"document": 1, "website": 0, "database": 0, "custom": 1}
    assert stats["citations_by_verification_status"] == {
        "pending": 0,
        "verified": 1,
        "failed": 0,
        "unverified": 0,
    }
    assert stats["citations_by_confidence"] == {"high": 1, "medium": 0, "low": 0}
    assert stats["citations_by_extraction_method"] == {
        "direct_quote": 1,
        "paraphrase": 0,
        "inference": 0,
        "aggregation": 0,
        "negative": 0,
    }
    assert (stats["total_sources"], stats["total_citations"]) == (2, 1)


async def test_citation_stats_keep_values_the_api_counts_that_this_plugin_does_not_know(
    cit_gateway, orch
):
    orch.state.add_citation(JOB, 1, "A new kind", confidence="very_high", extraction_method="ocr")
    gw = cit_gateway()
    async with gw:
        stats = (await call(gw, "get_citation_stats", {"job_id": JOB})).payload
    assert stats["citations_by_confidence"]["very_high"] == 1
    assert stats["citations_by_extraction_method"]["ocr"] == 1
    assert stats["citations_by_extraction_method"]["negative"] == 0


# --- annotations and tags ----------------------------------------------------------------------------


async def test_annotations_filter_by_type_and_tags_are_listed(cit_gateway, orch):
    gw = cit_gateway()
    async with gw:
        every = (await call(gw, "get_source_annotations", {"job_id": JOB, "source_id": 1})).payload
        questions = (
            await call(
                gw,
                "get_source_annotations",
                {"job_id": JOB, "source_id": 1, "annotation_type": "question"},
            )
        ).payload
        tags = (await call(gw, "get_source_tags", {"job_id": JOB, "source_id": 1})).payload
    assert every["count"] == 5
    kinds = [a["annotation_type"] for a in every["annotations"]]
    assert kinds == ["note", "highlight", "summary", "question", "critique"]
    assert [a["content"] for a in questions["annotations"]] == [
        "Does the 8-year rule apply retroactively?"
    ]
    assert tags["tags"] == ["gobd", "immutability", "retention"]
    assert wire(orch)[1] == (
        "GET",
        f"/api/jobs/{JOB}/sources/1/annotations",
        {"type": "question"},
    )


# --- search_job_sources -------------------------------------------------------------------------------


async def test_search_states_the_mode_that_ran_when_the_api_falls_back(cit_gateway, orch):
    gw = cit_gateway()
    async with gw:
        asked = (
            await call(gw, "search_job_sources", {"job_id": JOB, "query": "retention"})
        ).payload
        keyword = (
            await call(
                gw, "search_job_sources", {"job_id": JOB, "query": "retention", "mode": "keyword"}
            )
        ).payload
    assert (asked["mode_requested"], asked["mode"]) == ("hybrid", "keyword")
    assert asked["note"] == "hybrid search is not available: the orchestrator ran keyword search"
    assert (keyword["mode_requested"], keyword["mode"], keyword["note"]) == ("keyword",) * 2 + (
        None,
    )
    # the mode asked for is sent: an orchestrator that can run it will
    assert [r.query["mode"] for r in orch.requests] == ["hybrid", "keyword"]


async def test_each_hit_has_its_evidence_label_with_a_reason_and_a_plain_snippet(cit_gateway, orch):
    gw = cit_gateway()
    async with gw:
        result = (
            await call(gw, "search_job_sources", {"job_id": JOB, "query": "retention invoices"})
        ).payload
    hits = result["results"]
    assert [(h["source_id"], h["evidence_label"]) for h in hits] == [(2, "HIGH"), (1, "MEDIUM")]
    assert hits[0]["evidence_reason"].startswith("strong keyword match (rank 0.186)")
    assert hits[0]["evidence_reason"].endswith("; matched: invoices, retention")
    assert hits[1]["evidence_reason"].startswith("moderate keyword match (rank 0.0")
    assert result["summary"] == "2 hit(s): 1 HIGH, 1 MEDIUM; best: source 2 (HIGH)"
    assert result["count"] == 2
    for hit in hits:
        assert "<b>" not in hit["snippet"] and "</b>" not in hit["snippet"]
        assert "**retention**" in hit["snippet"].lower() or "**Retention**" in hit["snippet"]


async def test_snippets_are_cut_at_snippet_chars_around_a_match_with_a_marker(cit_gateway, orch):
    gw = cit_gateway()
    async with gw:
        result = (
            await call(
                gw,
                "search_job_sources",
                {"job_id": JOB, "query": "retention", "snippet_chars": 80},
            )
        ).payload
        default = (
            await call(gw, "search_job_sources", {"job_id": JOB, "query": "retention"})
        ).payload
    for hit in result["results"]:
        text, _, marker = hit["snippet"].partition(" [truncated] ")
        assert len(text) <= 80 and text.count("**") % 2 == 0
        assert "**retention**" in text.lower()
        assert (
            marker.endswith(" characters not shown") and int(marker.split()[0].replace(",", "")) > 0
        )
    for hit in default["results"]:
        assert len(hit["snippet"].partition(" [truncated] ")[0]) <= 1000


async def test_the_default_snippet_holds_a_paragraph_and_the_match_past_500_characters(
    cit_gateway, orch
):
    # The API's snippet: a fragment around "immutability", then one around "conversion" that
    # starts past character 400; the old 500-character cut ended just before the match.
    args = {"job_id": JOB, "query": "immutability conversion"}
    gw = cit_gateway()
    async with gw:
        whole = (await call(gw, "search_job_sources", args)).payload["results"][0]["snippet"]
        narrow = (await call(gw, "search_job_sources", {**args, "snippet_chars": 300})).payload
    assert "[truncated]" not in whole and whole.index("**conversion**") > 450
    text = narrow["results"][0]["snippet"].partition(" [truncated] ")[0]
    assert text.startswith("… ") and text.endswith(" …") and len(text) <= 300
    assert "**conversion**" in text and "**Immutability**" in text  # both matches, centred


async def test_search_filters_go_on_the_wire_and_tags_are_normalized(cit_gateway, orch):
    gw = cit_gateway()
    async with gw:
        tagged = (
            await call(
                gw,
                "search_job_sources",
                {"job_id": JOB, "query": "archived", "tags": " gobd , e-invoicing,,gobd"},
            )
        ).payload
        typed = (
            await call(
                gw,
                "search_job_sources",
                {"job_id": JOB, "query": "retention", "source_type": "website", "top_k": 1},
            )
        ).payload
    assert [h["source_id"] for h in tagged["results"]] == [2]
    assert orch.requests[0].query == {
        "query": "archived",
        "mode": "hybrid",
        "top_k": "10",
        "tags": "gobd,e-invoicing",
    }
    assert [h["source_type"] for h in typed["results"]] == ["website"]
    assert (
        orch.requests[1].query["source_type"] == "website"
        and orch.requests[1].query["top_k"] == "1"
    )


async def test_no_hits_in_a_known_job_is_said_plainly(cit_gateway, orch):
    gw = cit_gateway()
    async with gw:
        result = (
            await call(gw, "search_job_sources", {"job_id": JOB, "query": "blockchain"})
        ).payload
    assert result["results"] == [] and result["count"] == 0
    assert result["summary"] == "no source of this job matches 'blockchain'"


async def test_a_reason_the_api_gives_is_kept(cit_gateway, orch):
    # The CitationEngine's own search says why; an API that forwards it is not second-guessed.
    body = {
        "job_id": JOB,
        "query": "retention",
        "mode": "hybrid",
        "results": [
            {
                "source_id": 1,
                "source_name": "GoBD",
                "source_type": "document",
                "evidence_label": "HIGH",
                "evidence_reason": "matched by keyword and semantic search",
                "score": 0.032,
                "chunk_text": "Retention: ten years",
                "page_reference": "p. 31",
            }
        ],
        "total": 1,
    }
    from gateway.testing.backends import Reply

    orch.override(f"/api/jobs/{JOB}/sources/search", Reply.json(body))
    gw = cit_gateway()
    async with gw:
        result = (
            await call(gw, "search_job_sources", {"job_id": JOB, "query": "retention"})
        ).payload
    hit = result["results"][0]
    assert hit["evidence_reason"] == "matched by keyword and semantic search"
    assert (hit["rank"], hit["snippet"], hit["page_reference"]) == (
        0.032,
        "Retention: ten years",
        "p. 31",
    )
    assert result["mode"] == "hybrid" and result["note"] is None


async def test_an_answer_of_another_shape_is_a_backend_error_naming_the_field(cit_gateway, orch):
    from gateway.testing.backends import Reply

    orch.override(f"/api/jobs/{JOB}/citations/stats", Reply.json({"job_id": JOB, "total": 3}))
    orch.override("/api/sources/1", Reply.json({"id": "one"}))
    gw = cit_gateway()
    async with gw:
        stats = await call(gw, "get_citation_stats", {"job_id": JOB})
        source = await call(gw, "get_source_detail", {"source_id": 1})
    assert stats.code == "BACKEND_ERROR" and "total_sources" in stats.payload["error"]["message"]
    assert source.code == "BACKEND_ERROR" and "(id:" in source.payload["error"]["message"]


# --- the snippet shaping on its own --------------------------------------------------------------------


@given(
    words=st.lists(
        st.tuples(st.text("abc xyz.", min_size=1, max_size=12), st.booleans()), max_size=40
    ),
    limit=st.integers(50, 1000),
)
@example(
    words=[(" aaaaaaaa", False), *[("aaaaaaaaa", False)] * 3, ("aaaaaaaaaaa", False)], limit=50
)
@example(words=[*[("aaaaaaaaa", False)] * 6, ("x", True), ("a ", False)], limit=50)
@example(words=[("aaaaaaaa", True)] * 4, limit=50)
def test_plain_snippets_keep_the_most_matches_and_leave_no_bold_open(words, limit):
    raw = " ".join(f"<b>{w}</b>" if bold else w for w, bold in words)
    text, _, marker = plain_snippet(raw, limit).partition(" [truncated] ")
    plain = raw.replace("<b>", "**").replace("</b>", "**")
    assert "<b>" not in text and "</b>" not in text
    assert text.count("**") % 2 == 0
    if len(plain) <= limit:
        assert (text, marker) == (plain, "")
        return
    middle = text.removeprefix("… ").removesuffix(" …")
    assert len(text) <= limit and middle in plain
    # An ellipsis exactly where text was left out (whitespace at either end is not text): the
    # middle stands somewhere in the plain text with text before it iff it starts with "… ", and
    # after it iff it ends with " …" (a repetitive text holds the middle in several places).
    lead, trail = text.startswith("… "), text.endswith(" …")
    at = [i for i in range(len(plain)) if plain.startswith(middle, i)]
    assert any(
        bool(plain[:i].strip()) is lead and bool(plain[i + len(middle) :].strip()) is trail
        for i in at
    )
    assert marker == f"{len(plain) - len(middle):,} of {len(plain):,} characters not shown"
    # No window of the same size holds more whole matches.
    room = limit - 4
    spans = [(m.start(), m.end()) for m in re.finditer(r"\*\*.*?\*\*", plain, re.DOTALL)]
    most = max(
        (sum(1 for s, e in spans if a <= s and e <= a + room) for a in range(len(plain))),
        default=0,
    )
    assert middle.count("**") // 2 >= most


def test_json_of_a_snippet_is_what_a_model_reads():
    assert json.dumps(plain_snippet("a <b>x</b> b", 50)) == '"a **x** b"'


# --- fuzzed arguments ------------------------------------------------------------------------------

_JUNK = st.one_of(
    st.none(), st.booleans(), st.floats(allow_nan=False), st.text(max_size=40), st.integers()
)
# Plausible values per field (about half the calls are valid and reach the API); one value in
# eight, a missing required field or an unknown field are junk.
_INTS = st.one_of(st.integers(-2, 5), st.integers(2**31 - 2, 2**31 + 2))
_FIELD_VALUES = {
    "job_id": st.one_of(
        st.sampled_from([JOB, JOB.upper(), ids.UNKNOWN_ID, ids.JOB_COMPLETED]),
        st.uuids().map(str),
    ),
    "source_id": _INTS,
    "citation_id": _INTS,
    "query": st.one_of(st.sampled_from(["retention", "eight years", "x"]), st.text(max_size=60)),
    "mode": st.sampled_from(["hybrid", "keyword", "semantic"]),
    "source_type": st.sampled_from(["document", "website"]),
    "tags": st.sampled_from(["gobd", "gobd, e-invoicing", ",,"]),
    "verification_status": st.sampled_from(["failed", "verified"]),
    "annotation_type": st.sampled_from(["note", "question"]),
    "top_k": st.integers(0, 51),
    "snippet_chars": st.integers(40, 1100),
    "limit": st.integers(0, 101),
    "offset": _INTS,
    "content_limit": st.integers(-1, 20_001),
}
_TOOL_FIELDS = {
    "list_job_sources": ("job_id", "source_type", "limit", "offset"),
    "get_source_detail": ("source_id", "content_limit"),
    "list_job_citations": ("job_id", "source_id", "verification_status", "limit", "offset"),
    "get_citation_detail": ("citation_id",),
    "search_job_sources": (
        "job_id",
        "query",
        "mode",
        "source_type",
        "tags",
        "top_k",
        "snippet_chars",
    ),
    "get_source_annotations": ("job_id", "source_id", "annotation_type"),
    "get_source_tags": ("job_id", "source_id"),
    "get_citation_stats": ("job_id",),
}


_REQUIRED = {
    "list_job_citations": ("job_id",),
    "search_job_sources": ("job_id", "query"),
    "get_source_annotations": ("job_id", "source_id"),
    "get_source_tags": ("job_id", "source_id"),
    "get_citation_stats": ("job_id",),
    "get_source_detail": ("source_id",),
    "get_citation_detail": ("citation_id",),
}


@st.composite
def _call_of(draw: Any) -> tuple[str, dict[str, Any]]:
    tool = draw(st.sampled_from(sorted(_TOOL_FIELDS)))
    fields = _TOOL_FIELDS[tool]
    junk = st.sampled_from([False] * 7 + [True])
    required = [f for f in fields if f in _REQUIRED.get(tool, ()) and not draw(junk)]
    optional = [f for f in fields if f not in required]
    chosen = required + (draw(st.lists(st.sampled_from(optional), unique=True)) if optional else [])
    args = {n: draw(_JUNK if draw(junk) else _FIELD_VALUES[n]) for n in chosen}
    if draw(junk):
        args["bogus"] = draw(_JUNK)
    return tool, args


_CALLS = _call_of()
_UUID_SEGMENT = r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}"


_REQUEST_PATH = re.compile(
    rf"^/api/(sources(/\d+)?|citations/\d+|jobs/{_UUID_SEGMENT}(/citations(/stats)?"
    rf"|/sources/search|/sources/\d+/(annotations|tags))?)$"
)


@given(calls=st.lists(_CALLS, min_size=25, max_size=25))
@settings(max_examples=8, deadline=None, suppress_health_check=[HealthCheck.too_slow])
def test_fuzzed_arguments_never_crash_and_only_well_formed_ids_reach_the_api(calls):
    async def main(api: FakeOrchestrator, cwd: Path) -> list[str]:
        gw = make_gateway(plugins=["citations"], env={"COCKPIT_API_URL": api.url}, cwd=cwd)
        async with gw:
            return [(await gw.call(tool, args)).code for tool, args in calls]

    with FakeOrchestrator() as api, tempfile.TemporaryDirectory() as tmp:
        codes = anyio.run(main, api, Path(tmp))
        assert not api.errors
    assert set(codes) <= {"OK", "VALIDATION_ERROR", "NOT_FOUND"}, codes
    for request in api.requests:
        assert _REQUEST_PATH.match(request.path), request.path
        numbers = [*re.findall(r"/(\d+)(?:/|$)", request.path), request.query.get("source_id", "1")]
        assert all(1 <= int(n) < 2**31 for n in numbers), request.target
