"""Fixtures: the fake orchestrator (a real HTTP server on 127.0.0.1), fresh for every test."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from gateway_orchestrator_testing import FakeOrchestrator


@pytest.fixture
def orch() -> Iterator[FakeOrchestrator]:
    """The recorded scenario, MongoDB absent (as recorded)."""
    with FakeOrchestrator() as api:
        yield api
    assert not api.errors, api.errors[0]


@pytest.fixture
def orch_mongo() -> Iterator[FakeOrchestrator]:
    """The recorded scenario with MongoDB: audit, chat, graph changes and LLM requests served."""
    with FakeOrchestrator(mongo=True) as api:
        yield api
    assert not api.errors, api.errors[0]
