"""The default scenario: the orchestrator as it was when the recordings were made.

Ids, texts, statuses and timestamps are the recorded ones, so a recorded request makes sense
against a freshly seeded fake (the ids below name the cases). Rows the recordings only show in
part (a few citations, requirements, files) are completed with plausible values of the same
shape. The MongoDB collections, absent when recording, hold a small example per kind.
"""

from __future__ import annotations

import json
import struct
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from .state import State

RECORDINGS = Path(__file__).parent / "recordings"

# Jobs, by the case each stands for.
JOB_SCRATCH = "7d2c8a43-8064-475f-8dbe-b01b2fbd61f1"  # created; the delete recordings' job
JOB_POSTMORTEM = "fc67a90c-6370-47dd-9b48-c2bcf697dfb3"  # created
JOB_CREATED = "507558f7-e53a-4ad7-9804-ceafb75cee01"  # created with every optional field
JOB_PROCESSING = "b652cfcb-ecad-42bb-9197-ea9b234dce17"  # processing; workspace, sources, citations
JOB_STUCK_CREATOR = "9e1a70eb-484c-43f6-828b-03c6686ab245"  # processing, agent offline, stuck
JOB_STUCK_VALIDATOR = "63bb27e0-ab82-4ae9-89d7-65f903735cc6"  # processing, no agent, stuck
JOB_PENDING_REVIEW = "d2cf2e9a-cc1f-4422-b782-c51acec41000"  # pending_review with a frozen file
JOB_FAILED_UNREACHABLE = "2007e4f3-bb94-4ab3-a55b-2837bec4e0b0"  # failed; its agent's pod is down
JOB_CANCELLED = "48943ae2-f41b-4ee3-bc31-7b5938fbedea"  # cancelled; agent completed
JOB_FAILED = "6d9f497c-6145-440e-8c8d-a61b80ff5d86"  # failed; its agent failed too
JOB_COMPLETED = "2e6d7c34-307a-4a63-b346-d2c6e1d84333"  # completed
JOB_REVIEW_NO_FROZEN = "fec7b75d-988d-4f99-8b8d-d499f333383e"  # pending_review, no frozen file
UNKNOWN_ID = "00000000-0000-4000-8000-000000000000"

AGENT_READY = "49291b0c-5a10-4905-b7ca-3ecc6b4cab1a"  # ready, latest heartbeat
AGENT_UNREACHABLE = "1d0a2f88-f92d-48c2-b8f0-2023f04c9d88"  # ready, pod refuses connections
AGENT_FAILED = "e7fcc4f4-0c9e-4e00-ac21-2037cefb9c5b"
AGENT_COMPLETED = "71b02fb5-e357-4d37-94d7-77ace5f9a2d9"
AGENT_WORKING = "213e02ed-7c4b-47c1-8dd1-d5f5d78f378c"  # working on JOB_PROCESSING
AGENT_BOOTING = "578684e9-2829-4961-9fa2-5a70923f6c50"
AGENT_OFFLINE = "bfcc3a36-57a8-46fb-b593-6fbfe28dd02d"

DS_POSTGRES = "94de1cb9-5e54-4c0e-b743-38399977aa75"  # global
DS_NEO4J = "1c1dc245-73a6-4f7e-99d8-15ca584cc683"  # global, credentials with a password
DS_MONGO = "b45805e5-d743-46c7-bdc5-0927f7bf81ea"  # global, unreachable
DS_JOB_POSTGRES = "373a3683-0614-4601-bcd8-2ed34a010c72"  # JOB_CREATED's clone of DS_POSTGRES

PASSWORD = "<PASSWORD>"  # what the recordings show in place of the real secrets


def at(text: str) -> datetime:
    """A recorded timestamp (UTC)."""
    return datetime.fromisoformat(text).replace(tzinfo=UTC)


def f4(value: float) -> float:
    """A PostgreSQL ``real``, as the API returns it (0.97 -> 0.9700000286102295)."""
    return float(struct.unpack("f", struct.pack("f", value))[0])


def seed(state: State) -> None:
    with state.lock:
        _agents(state)
        _jobs(state)
        _datasources(state)
        _requirements(state)
        _library(state)
        _workspaces(state)
        _mongo(state)


def _agents(state: State) -> None:
    rows = [
        (AGENT_READY, "defaults", "agent-defaults-0", 8001, 4122, "ready", None, "09:58:22.186821", "09:59:38.046518", {"memory_mb": 402, "cpu_percent": 2.0}),
        (AGENT_UNREACHABLE, "defaults", "agent-defaults-1", 8999, 4310, "ready", None, "09:58:22.178526", "09:59:38.039198", {}),
        (AGENT_FAILED, "debugger", "agent-debugger-0", 8001, 4297, "failed", None, "09:58:22.174271", "09:59:38.031519", {"last_error": "context window exceeded"}),
        (AGENT_COMPLETED, "coder", "agent-coder-0", 8001, 4254, "completed", None, "09:58:22.170364", "09:59:38.025096", {"memory_mb": 640, "tokens_processed": 512004}),
        (AGENT_WORKING, "researcher", "agent-researcher-0", 8001, 4188, "working", JOB_PROCESSING, "09:58:22.161377", "09:59:38.015692", {"memory_mb": 812, "cpu_percent": 37.5, "tokens_processed": 182340}),
        (AGENT_BOOTING, "writer", "agent-writer-0", 8001, 4203, "booting", None, "09:58:22.165924", "09:58:22.165924", {}),
    ]  # fmt: skip
    for agent_id, config, host, port, pid, status, job, registered, beat, meta in rows:
        state.add_agent(
            config,
            id=agent_id,
            hostname=host,
            pod_port=port,
            pid=pid,
            status=status,
            current_job_id=job,
            registered_at=at(f"2026-11-22T{registered}"),
            last_heartbeat=at(f"2026-11-22T{beat}"),
            metadata=meta,
            reachable=port != 8999,
        )
    state.add_agent(
        "researcher",
        id=AGENT_OFFLINE,
        hostname="agent-researcher-1",
        pid=4333,
        status="offline",
        registered_at=at("2026-11-19T09:59:38.137461"),
        last_heartbeat=at("2026-11-21T09:59:38.137461"),
    )


def _jobs(state: State) -> None:
    rows = [
        (JOB_SCRATCH, "Scratch job to be deleted", "created", "pending", "pending", "defaults", None, "2026-11-22T09:53:45.491628", None),
        (JOB_POSTMORTEM, "Post-mortem of job failures in the nightly extraction run", "created", "pending", "pending", "debugger", None, "2026-11-22T09:48:45.491628", None),
        (JOB_CREATED, "Extract GoBD retention and immutability requirements from the 2024 accounting procedure documentation", "created", "pending", "pending", "defaults", None, "2026-11-22T09:38:45.491628", None),
        (JOB_PROCESSING, "Research current BMF guidance on electronic invoice archiving (E-Rechnung) and summarise obligations for AP", "processing", "processing", "pending", "researcher", AGENT_WORKING, "2026-11-22T09:13:45.491628", "2026-11-22T09:56:45.491628"),
        (JOB_STUCK_CREATOR, "Extract requirements from the data-protection impact assessment (DPIA) v3", "processing", "processing", "pending", "defaults", AGENT_OFFLINE, "2026-11-22T06:58:45.491628", "2026-11-22T07:58:45.491628"),
        (JOB_STUCK_VALIDATOR, "Validate extracted requirements for the payroll interface against Neo4j metamodel", "processing", "completed", "processing", "defaults", None, "2026-11-22T05:58:45.491628", "2026-11-22T08:23:45.491628"),
        (JOB_PENDING_REVIEW, "Compile a source library on audit-trail requirements for ERP change logs", "pending_review", "completed", "completed", "researcher", AGENT_COMPLETED, "2026-11-22T04:58:45.491628", "2026-11-22T08:58:45.491628"),
        (JOB_FAILED_UNREACHABLE, "Research VAT rules for cross-border SaaS invoices (retry)", "failed", "failed", "pending", "researcher", AGENT_UNREACHABLE, "2026-11-21T07:58:45.491628", "2026-11-21T09:58:45.491628"),
        (JOB_CANCELLED, "Validate requirement set R-2024-Q3 against the domain model", "cancelled", "processing", "pending", "defaults", AGENT_COMPLETED, "2026-11-21T05:58:45.491628", "2026-11-21T06:58:45.491628"),
        (JOB_FAILED, "Add a CSV export for validated requirements to the reporting service", "failed", "failed", "pending", "coder", AGENT_FAILED, "2026-11-20T09:58:45.491628", None),
        (JOB_COMPLETED, "Write a one-page summary of GDPR Art. 30 record-of-processing obligations for the finance team", "completed", "completed", "completed", "writer", AGENT_COMPLETED, "2026-11-19T09:58:45.491628", None),
        (JOB_REVIEW_NO_FROZEN, "Draft a policy note on retention periods for travel expense receipts", "pending_review", "completed", "completed", "writer", None, "2026-11-16T09:58:45.491628", "2026-11-17T09:58:45.491628"),
    ]  # fmt: skip
    for job_id, text, status, creator, validator, config, agent, created, updated in rows:
        state.add_job(
            text,
            id=job_id,
            status=status,
            creator_status=creator,
            validator_status=validator,
            config_name=config,
            assigned_agent_id=agent,
            created_at=at(created),
            updated_at=at(updated or created),
        )
    full = state.jobs[JOB_CREATED]
    full.config_override = {"llm": {"temperature": 0.1}}
    full.context = {
        "department": "finance",
        "priority": "high",
        "instructions": "Focus on sections 3 and 8. Cite page numbers.",
    }
    state.jobs[JOB_COMPLETED].completed_at = at("2026-11-19T11:58:45.491628")
    failed = state.jobs[JOB_FAILED]
    failed.error_message = "Tool output exceeded the context window"
    failed.error_details = {"tool": "read_file", "tokens": 131072}


def _datasources(state: State) -> None:
    warehouse = "Compliance warehouse (local Postgres)"
    warehouse_text = "Requirements and citations tables of the local graphrag database"
    pg_url = f"postgresql://graphrag:{PASSWORD}@127.0.0.1:5432/graphrag"
    state.add_datasource(
        warehouse,
        "postgresql",
        pg_url,
        id=DS_POSTGRES,
        description=warehouse_text,
        created_at=at("2026-11-22T09:58:22.195732"),
    )
    state.add_datasource(
        "Domain knowledge graph",
        "neo4j",
        "bolt://127.0.0.1:7687",
        id=DS_NEO4J,
        description="BusinessObjects / Services metamodel",
        credentials={"username": "neo4j", "password": PASSWORD},
        read_only=False,
        created_at=at("2026-11-22T09:58:22.201147"),
    )
    state.add_datasource(
        "Agent log archive",
        "mongodb",
        "mongodb://127.0.0.1:27017/graphrag_logs",
        id=DS_MONGO,
        description="LLM request archive (not running in this setup)",
        created_at=at("2026-11-22T09:58:22.205064"),
        test_result=(
            "error",
            "127.0.0.1:27017: [Errno 111] Connection refused (configured timeouts: socketTimeoutMS: 20000.0ms, connectTimeoutMS: 20000.0ms), Timeout: 5.0s, Topology Description: <TopologyDescription id: 6b02bd2132a1d996c8c93ee7, topology_type: Unknown, servers: [<ServerDescription ('127.0.0.1', 27017) server_type: Unknown, rtt: None, error=AutoReconnect('127.0.0.1:27017: [Errno 111] Connection refused (configured timeouts: socketTimeoutMS: 20000.0ms, connectTimeoutMS: 20000.0ms)')>]>",
        ),
    )
    state.add_datasource(warehouse, "postgresql", pg_url, id=DS_JOB_POSTGRES, job_id=JOB_CREATED, description=warehouse_text, created_at=at("2026-11-22T09:58:22.224799"))  # fmt: skip


def _requirements(state: State) -> None:
    erech = "documents/source_processing.pdf"
    gdpr = "documents/source_completed.pdf"
    rows = [
        # job, id, requirement id, name, text, type, priority, status, document, gobd, gdpr, quality, fulfillment, neo4j, minute
        (JOB_PROCESSING, "06c4b7d9-024f-435d-8520-44844c79d5ce", "REQ-ERECH-001", "Structured invoice format", "Incoming B2B invoices shall be accepted in a structured format compliant with EN 16931 (XRechnung or ZUGFeRD).", "functional", "high", "integrated", erech, True, False, 0.86, "FULFILLED", "4:c3d4:201", 23),
        (JOB_PROCESSING, "cea21a79-2f66-49cf-81fd-b90fe2fb6de8", "REQ-ERECH-002", "Original format retention", "Electronic invoices shall be archived in the format in which they were received.", "compliance", "high", "validating", erech, True, False, 0.79, None, None, 24),
        (JOB_PROCESSING, "b8bbb8cd-8621-4030-9350-3a9c5da3ddb4", "REQ-ERECH-003", "Retention period", "Invoices shall be retained for eight years from the end of the calendar year of issue.", "compliance", "high", "pending", erech, True, False, None, None, None, 25),
        (JOB_PROCESSING, "fbb3b0b0-2d7b-4a09-b941-bfff6c312834", "REQ-ERECH-004", "Machine readability", "Archived invoices shall remain machine-readable for the whole retention period.", "compliance", "medium", "rejected", erech, True, False, 0.42, "UNCLEAR", None, 26),
        (JOB_PROCESSING, "15a03dc3-520a-457f-b819-69d815992369", "REQ-ERECH-005", "Viewer availability", "A viewer for the archived structured invoices shall be available to the tax auditor.", "functional", "low", "failed", erech, True, False, None, None, None, 27),
        (JOB_COMPLETED, "d225b571-42b9-459e-b6a0-92ee0621dbb8", "REQ-GDPR-001", "Record of processing activities", "The controller shall maintain a written record of all processing activities under its responsibility.", "compliance", "high", "integrated", gdpr, False, True, 0.92, "FULFILLED", "4:a1b2:101", 18),
        (JOB_COMPLETED, "812051bc-3d21-40a3-bafc-1cb5a0ce2745", "REQ-GDPR-002", "Purpose documentation", "Each record entry shall state the purposes of the processing.", "compliance", "high", "integrated", gdpr, False, True, 0.88, "PARTIALLY_FULFILLED", "4:a1b2:102", 19),
        (JOB_COMPLETED, "54571da1-ba62-423a-8d58-846761e23a7f", "REQ-GDPR-003", "Recipient categories", "The record shall list the categories of recipients to whom personal data have been or will be disclosed.", "compliance", "medium", "integrated", gdpr, False, True, 0.81, "FULFILLED", "4:a1b2:103", 20),
        (JOB_COMPLETED, "0f8d9d2e-5a0c-4f5e-9d47-2f1c8e6b7a40", "REQ-GDPR-004", "Retention of the record", "The record shall be retained for as long as the processing continues.", "compliance", "medium", "rejected", gdpr, False, True, 0.38, "NOT_FULFILLED", None, 21),
        (JOB_COMPLETED, "dfbf6d3c-d0a9-4074-bd38-f072b254277b", "REQ-GDPR-005", "Electronic form", "The record shall be kept in writing, including in electronic form.", "constraint", "low", "integrated", gdpr, False, True, 0.9, "FULFILLED", "4:a1b2:105", 22),
        (JOB_STUCK_VALIDATOR, "5b0e7c1a-93d4-4f0b-8a6e-1c2d3e4f5a61", "REQ-PAY-001", "Payroll export interface", "The payroll system shall export monthly salary postings to the general ledger.", "functional", "high", "pending", "documents/payroll_interface.pdf", True, False, None, None, None, 28),
        (JOB_STUCK_VALIDATOR, "5b0e7c1a-93d4-4f0b-8a6e-1c2d3e4f5a62", "REQ-PAY-002", "Posting reconciliation", "Each payroll posting shall be reconcilable with its source payslip.", "compliance", "high", "pending", "documents/payroll_interface.pdf", True, False, None, None, None, 29),
        (JOB_STUCK_VALIDATOR, "5b0e7c1a-93d4-4f0b-8a6e-1c2d3e4f5a63", "REQ-PAY-003", "Access restriction", "Access to payroll postings shall be restricted to the payroll team.", "constraint", "medium", "pending", "documents/payroll_interface.pdf", False, True, None, None, None, 30),
        (JOB_PENDING_REVIEW, "7c1f2a3b-4d5e-4f60-8a9b-0c1d2e3f4a51", "REQ-AUD-001", "Change log for master data", "Every change to ERP master data shall be logged with user, time, old and new value.", "compliance", "high", "integrated", "documents/erp_audit_trail.pdf", True, False, 0.9, "FULFILLED", "4:e5f6:301", 31),
        (JOB_PENDING_REVIEW, "7c1f2a3b-4d5e-4f60-8a9b-0c1d2e3f4a52", "REQ-AUD-002", "Tamper-proof change log", "The change log shall not be alterable by the users whose changes it records.", "compliance", "high", "integrated", "documents/erp_audit_trail.pdf", True, False, 0.87, "FULFILLED", "4:e5f6:302", 32),
    ]  # fmt: skip
    for row in rows:
        job, rid, ident, name, text, kind, prio, status, doc, gobd, gdpr_, q, ful, neo, minute = row
        k = int(ident[-3:])  # as recorded: REQ-GDPR-003 is on page 5, section 4.3, paragraph 3
        state.add_requirement(
            job,
            text,
            id=rid,
            requirement_id=ident,
            name=name,
            type=kind,
            priority=prio,
            status=status,
            source_document=doc,
            gobd_relevant=gobd,
            gdpr_relevant=gdpr_,
            quality_score=q,
            fulfillment_status=ful,
            neo4j_id=neo,
            created_at=at(f"2026-11-22T09:{minute:02d}:45.491628"),
            updated_at=at(f"2026-11-22T09:{minute + 10:02d}:45.491628"),
            source_location={"page": k + 2, "section": f"{k + 1}.{k}", "paragraph": k},
            reasoning="Extracted from an explicit shall-statement.",
            tags=["seed"],
        )


GOBD = (
    "Principles for the proper keeping and retention of books, records and documents in "
    "electronic form and for data access (GoBD). 3.2 Immutability. An entry or record may not be "
    "altered in such a way that its original content can no longer be ascertained. Changes must "
    "be logged so that both the original content and the fact that changes were made are "
    "recognisable. 8.1 Retention. Books and records, inventories, annual financial statements, "
    "management reports, the opening balance sheet and the work instructions and other "
    "organisational documents necessary for their understanding must be retained for ten years; "
    "commercial and business letters received and copies of commercial or business letters sent "
    "must be retained for six years. Invoices are retained for eight years following the "
    "amendment of the retention rules. 8.2 Machine readability. Electronically received documents "
    "must be retained in the format in which they were received; conversion into another format "
    "is permitted only if machine evaluability is not impaired and no changes to content occur."
)
FAQ = (
    "Structured electronic invoices (XRechnung, ZUGFeRD) must be archived in their original XML "
    "form. A PDF rendering alone is not sufficient for retention. Retention period for invoices is "
    "eight years. The archive must allow machine evaluation by the tax auditor."
)


def _library(state: State) -> None:
    add = state.add_source
    add(
        "GoBD (2019) - principles for electronic bookkeeping",
        (GOBD + " ") * 3,
        id=1,
        type="document",
        identifier="documents/gobd_2019_en.pdf",
        version="2019-11-28",
        metadata={"mime": "application/pdf", "pages": 44, "language": "en"},
        created_at=at("2026-11-22T08:58:45.491628"),
        jobs=(JOB_PROCESSING, JOB_COMPLETED, JOB_PENDING_REVIEW),
    )
    add(
        "FAQ: archiving structured e-invoices",
        FAQ,
        id=2,
        type="website",
        identifier="https://example.org/faq/e-invoicing-archiving",
        metadata={"fetched_at": "2026-11-20T08:12:00Z", "http_status": 200},
        created_at=at("2026-11-22T07:58:45.491628"),
        jobs=(JOB_PROCESSING, JOB_PENDING_REVIEW),
    )
    add(
        "Requirements table snapshot",
        "requirement_id,name,status\nREQ-ERECH-001,Structured invoice format,integrated\nREQ-ERECH-002,Original format retention,validating",
        id=3,
        type="database",
        identifier="postgresql://127.0.0.1:5432/graphrag#requirements",
        version="2026-11-21",
        metadata={"table": "requirements", "row_count": 2},
        created_at=at("2026-11-22T06:58:45.491628"),
        jobs=(JOB_PROCESSING,),
    )
    add("Interview notes - finance team", "Finance team stores incoming invoices in the DMS; XML attachments are sometimes dropped when scanning. Retention policy in DMS is set to ten years for all document classes.", id=4, type="custom", identifier="notes/interview_finance_2026-11-19.md", metadata={"kind": "interview", "author": "analyst"}, created_at=at("2026-11-22T05:58:45.491628"), jobs=(JOB_COMPLETED,))  # fmt: skip

    verified = "Quote found verbatim in source."
    why = "Supports requirement wording."
    cite = state.add_citation
    cite(
        JOB_PROCESSING,
        1,
        "Records must not be altered so that the original content becomes unascertainable.",
        id=1,
        verbatim_quote="An entry or record may not be altered in such a way that its original content can no longer be ascertained.",
        relevance_reasoning=why,
        confidence="high",
        extraction_method="direct_quote",
        locator={"page": 12, "section": "3.2"},
        verification_status="verified",
        verification_notes=verified,
        similarity_score=f4(0.97),
        matched_location={"char_start": 1200, "char_end": 1300},
        created_at=at("2026-11-22T09:08:45.491628"),
        created_by="agent-processing",
    )
    cite(
        JOB_PROCESSING,
        1,
        "Invoices must be retained for eight years.",
        id=2,
        verbatim_quote="Invoices are retained for eight years following the amendment of the retention rules.",
        relevance_reasoning=why,
        confidence="high",
        extraction_method="direct_quote",
        locator={"page": 31, "section": "8.1"},
        verification_status="verified",
        verification_notes=verified,
        similarity_score=f4(0.94),
        matched_location={"char_start": 1250, "char_end": 1350},
        created_at=at("2026-11-22T09:09:45.491628"),
        created_by="agent-processing",
    )
    cite(
        JOB_PROCESSING,
        2,
        "A PDF rendering of an XRechnung is not sufficient for archiving.",
        id=3,
        verbatim_quote="A PDF rendering alone is not sufficient for retention.",
        relevance_reasoning=why,
        confidence="medium",
        extraction_method="paraphrase",
        locator={"url": "https://example.org/faq/e-invoicing-archiving"},
        verification_status="pending",
        created_at=at("2026-11-22T09:10:45.491628"),
        created_by="agent-processing",
    )
    cite(
        JOB_PROCESSING,
        1,
        "Format conversion is allowed if machine evaluability is preserved.",
        id=4,
        quote_context="...Format conversion is allowed if machine evaluability is preserved....",
        relevance_reasoning=why,
        confidence="medium",
        extraction_method="inference",
        locator={"page": 33, "section": "8.2"},
        verification_status="unverified",
        created_at=at("2026-11-22T09:11:45.491628"),
        created_by="agent-processing",
    )
    cite(
        JOB_PROCESSING,
        3,
        "Two e-invoicing requirements are already tracked.",
        id=5,
        quote_context="...Two e-invoicing requirements are already tracked....",
        relevance_reasoning=why,
        confidence="low",
        extraction_method="aggregation",
        locator={"table": "requirements"},
        verification_status="failed",
        verification_notes="The snapshot lists two requirements, but neither is tracked as complete.",
        similarity_score=f4(0.41),
        matched_location={"char_start": 1400, "char_end": 1500},
        created_at=at("2026-11-22T09:12:45.491628"),
        created_by="agent-processing",
    )
    cite(
        JOB_COMPLETED,
        4,
        "The DMS applies a ten-year retention to all document classes.",
        id=6,
        verbatim_quote="Retention policy in DMS is set to ten years for all document classes.",
        relevance_reasoning=why,
        confidence="high",
        extraction_method="direct_quote",
        locator={"line": 2},
        verification_status="verified",
        verification_notes=verified,
        similarity_score=f4(0.99),
        matched_location={"char_start": 1450, "char_end": 1550},
        created_at=at("2026-11-22T09:13:45.491628"),
        created_by="agent-completed",
    )
    cite(JOB_PENDING_REVIEW, 1, "Changes must be logged so original content stays recognisable.", id=7, verbatim_quote="Changes must be logged so that both the original content and the fact that changes were made are recognisable.", relevance_reasoning=why, confidence="high", extraction_method="direct_quote", locator={"page": 12, "section": "3.2"}, verification_status="verified", verification_notes=verified, similarity_score=f4(0.96), matched_location={"char_start": 1500, "char_end": 1600}, created_at=at("2026-11-22T09:14:45.491628"), created_by="agent-pending_review")  # fmt: skip

    notes = [
        ("note", "Section 3.2 is the core immutability rule.", "p. 12"),
        ("highlight", "Changes must be logged", "p. 12"),
        ("summary", "Retention: 10y books, 6y letters, 8y invoices.", "pp. 31-32"),
        ("question", "Does the 8-year rule apply retroactively?", "p. 31"),
        ("critique", "English translation is unofficial.", None),
    ]
    for n, (kind, text, page) in enumerate(notes, start=1):
        state.add_annotation(JOB_PROCESSING, 1, kind, text, id=n, page_reference=page, created_at=at(f"2026-11-22T09:{27 + n}:45.491628"), created_by="agent-researcher-0")  # fmt: skip
    state.tag_source(JOB_PROCESSING, 1, "gobd", "immutability", "retention")
    state.tag_source(JOB_PROCESSING, 2, "e-invoicing", "gobd", "archiving")
    state.tag_source(JOB_PENDING_REVIEW, 1, "audit-trail")


TODOS = [
    ("todo_1", "Register GoBD 2019 as a source and cite section 3.2", "completed", "high", ["Cited as citation 1"]),
    ("todo_2", "Find the retention period for structured invoices", "completed", "high", []),
    ("todo_3", "Check whether a PDF rendering is sufficient for archiving", "in_progress", "medium", []),
    ("todo_4", "Summarise obligations per AP process step", "pending", "medium", []),
]  # fmt: skip


def _workspaces(state: State) -> None:
    job = JOB_PROCESSING
    state.write_file(job, "workspace.md", "# Workspace\n\n## Status\nPhase 2 (tactical): collecting primary sources on e-invoice archiving.\n\n## Key findings\n- Structured invoices must be archived in original XML form.\n- Retention: 8 years for invoices.\n\n## Open questions\n- Does the DMS keep the XML attachment?\n")  # fmt: skip
    state.write_file(job, "plan.md", "# Plan\n\n1. Phase 1 (strategic): scope the obligations\n2. Phase 2 (tactical): gather and cite sources\n3. Phase 3 (tactical): map obligations to AP process steps\n4. Phase 4 (strategic): write summary and freeze for review\n")  # fmt: skip
    state.set_todos(
        job,
        [
            {"id": i, "content": c, "status": s, "priority": p, "notes": n, "created_at": f"2026-11-22T09:{20 + k}:00+00:00"}
            for k, (i, c, s, p, n) in enumerate(TODOS)
        ],
    )  # fmt: skip
    state.write_file(job, "archive/todos_phase_1_strategic_20261122_091502.md", "# Archived Todos: Phase 1 Strategic\nArchived: 2026-11-22T09:15:02.120000+00:00\n\n## Completed (3)\n- [x] Read the job description and instructions\n  - Scope is accounts payable only\n- [x] Draft plan.md\n- [x] Stage tactical todos for phase 2\n\n## Not Completed (1)\n- [ ] Confirm scope with requester\n\n## Summary\n- Completed: 3\n- Not_completed: 1\n- Total: 4\n")  # fmt: skip
    state.write_file(job, "archive/phase_1_retrospective.md", "# Phase 1 retrospective\n\nScope settled on AP. One todo (scope confirmation) left open; no requester channel available.\n")  # fmt: skip
    recorded = {"workspace.md": 1795341533.6754718, "plan.md": 1795341533.6756756, "todos.yaml": 1795341533.675833}  # fmt: skip
    for name, modified in recorded.items():
        state.files[f"job_{job}/{name}"].modified = modified
    # A sibling folder that shares the job folder's name as a prefix: the API's sandbox serves it.
    state.write_workspace_file(f"job_{job}-old/notes.md", "Sibling directory outside the job workspace (sandbox prefix test).\n")  # fmt: skip

    review = JOB_PENDING_REVIEW
    state.write_file(review, "workspace.md", "# Workspace\n\nAll phases done; frozen for review.\n")
    state.write_file(review, "plan.md", "# Plan\n\n1. Collect sources\n2. Summarise audit-trail requirements\n")  # fmt: skip
    state.write_file(review, "output/audit_trail_requirements.md", "# Audit-trail requirements\n\n1. REQ-AUD-001 Change log for master data\n2. REQ-AUD-002 Tamper-proof change log\n")  # fmt: skip
    frozen = {
        "status": "pending_review",
        "timestamp": "2026-11-22T08:58:41.512000",
        "summary": "Compiled a source library of 2 sources with 1 verified citation and derived 2 audit-trail requirements for ERP change logs.",
        "deliverables": ["output/audit_trail_requirements.md", "workspace.md"],
        "confidence": 0.85,
        "job_id": review,
        "notes": "Only the English translation of GoBD was available.",
    }  # fmt: skip
    state.write_file(review, "output/job_frozen.json", json.dumps(frozen, indent=2))
    for name, modified in (("workspace.md", 1795341533.6768224), ("plan.md", 1795341533.6769493)):
        state.files[f"job_{review}/{name}"].modified = modified
    state.write_file(JOB_COMPLETED, "workspace.md", "# Workspace\n\nSummary delivered.\n")


def _load(name: str) -> Any:
    return json.loads((RECORDINGS / f"{name}.json").read_text(encoding="utf-8"))["response"]["json"]


def load_experts(state: State) -> None:
    # The expert configurations are static files of the orchestrator: served as recorded, and
    # for the experts recorded only in the list, the defaults merged with their summary.
    details = {
        "defaults": _load("GET_api_experts_{expert_id}__defaults"),
        "researcher": _load("GET_api_experts_{expert_id}"),
    }
    base = details["defaults"]["config"]
    for summary in _load("GET_api_experts"):
        detail = details.get(summary["id"])
        if detail is None:
            config = json.loads(json.dumps(base)) | {"agent_id": summary["id"]}
            config |= {
                k: summary[k] for k in ("display_name", "description", "icon", "color", "tags")
            }
            title = summary["display_name"]
            detail = {
                **summary,
                "config": config,
                "instructions": f"# {title} Instructions\n\n{summary['description']}\n",
            }
        state.experts.append(detail)


def _mongo(state: State) -> None:
    job = JOB_PROCESSING
    state.add_audit_entry(job, "llm", _id="6740a1c2e4b0a1b2c3d4e501", agent_type="researcher", node_name="agent", timestamp="2026-11-22T09:14:02.120000", phase="strategic", phase_number=1, latency_ms=1840, content="I will scope the obligations first.", metadata={"model": "openai/gpt-oss-120b"})  # fmt: skip
    state.add_audit_entry(job, "tool", _id="6740a1c2e4b0a1b2c3d4e502", agent_type="researcher", timestamp="2026-11-22T09:14:05.480000", phase="strategic", phase_number=1, tool={"name": "read_file", "arguments": {"path": "workspace.md"}, "call_id": "call_1"}, result="# Workspace\n\n## Status\n...")  # fmt: skip
    state.add_audit_entry(job, "error", _id="6740a1c2e4b0a1b2c3d4e503", agent_type="researcher", timestamp="2026-11-22T09:31:40.002000", phase="tactical", phase_number=2, error={"type": "ToolError", "message": "web_search: rate limited"})  # fmt: skip
    state.add_audit_entry(job, "llm", _id="6740a1c2e4b0a1b2c3d4e504", agent_type="researcher", iteration=2, timestamp="2026-11-22T09:31:52.900000", phase="tactical", phase_number=2, latency_ms=2210, content="Retrying the search with a narrower query.")  # fmt: skip
    state.add_chat_entry(job, _id="6740a1c2e4b0a1b2c3d4e601", turn_number=1, timestamp="2026-11-22T09:14:02.120000", phase="strategic", input_messages=[{"role": "user", "content": "Research current BMF guidance on electronic invoice archiving."}], response={"content": "I will scope the obligations first.", "tool_calls": []}, reasoning="Start with the plan.")  # fmt: skip
    state.add_chat_entry(job, _id="6740a1c2e4b0a1b2c3d4e602", turn_number=2, timestamp="2026-11-22T09:31:52.900000", phase="tactical", input_messages=[{"role": "tool", "content": "web_search: rate limited"}], response={"content": "Retrying the search with a narrower query.", "tool_calls": [{"name": "web_search", "args": {"query": "BMF E-Rechnung Archivierung"}}]})  # fmt: skip
    state.add_llm_request(
        job,
        _id="65f1c2a9e4b0a1b2c3d4e5f6",
        model="openai/gpt-oss-120b",
        timestamp="2026-11-22T09:14:02.120000",
        iteration=1,
        latency_ms=1840,
        metrics={"token_usage": {"prompt_tokens": 5120, "completion_tokens": 220, "reasoning_tokens": 96}},
        request={"messages": [{"role": "system", "content": "You are a researcher."}, {"role": "user", "content": "Research current BMF guidance."}], "tools": [{"name": "read_file"}, {"name": "web_search"}], "model_kwargs": {"temperature": 0.0}},
        response={"content": "I will scope the obligations first.", "tool_calls": [], "response_metadata": {"finish_reason": "stop"}},
    )  # fmt: skip
    state.graph_changes[job] = {
        "jobId": job,
        "timeRange": {"start": "2026-11-22T09:20:00.000Z", "end": "2026-11-22T09:40:00.000Z"},
        "summary": {"totalToolCalls": 12, "graphToolCalls": 2, "nodesCreated": 2, "nodesDeleted": 0, "nodesModified": 1, "relationshipsCreated": 1, "relationshipsDeleted": 0},
        "snapshots": [{"timestamp": "2026-11-22T09:20:00.000Z", "toolCallIndex": 0, "nodes": {}, "relationships": {}}],
        "deltas": [{"timestamp": "2026-11-22T09:25:00.000Z", "toolCallIndex": 4, "cypherQuery": "CREATE (r:Requirement {id: 'REQ-ERECH-001'})", "toolCallId": "call_5", "stepNumber": 9, "changes": {"nodesCreated": 1, "nodesDeleted": 0, "nodesModified": 0, "relationshipsCreated": 0, "relationshipsDeleted": 0, "matchedVariables": ["r"]}}],
    }  # fmt: skip
