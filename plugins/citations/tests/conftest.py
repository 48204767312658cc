"""Fixtures: the stateful fake orchestrator (a real HTTP server on 127.0.0.1), and gateways with
only the citations plugin pointed at it."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import pytest
from gateway_orchestrator_testing import FakeOrchestrator


@pytest.fixture
def orch() -> Iterator[FakeOrchestrator]:
    """The recorded scenario, fresh for every test."""
    with FakeOrchestrator() as api:
        yield api
    assert not api.errors, api.errors[0]


@pytest.fixture
def cit_gateway(gateway_factory: Callable[..., Any], orch: FakeOrchestrator) -> Callable[..., Any]:
    """A gateway with only the citations plugin, configured through COCKPIT_API_URL (``env``
    replaces the machine's environment)."""

    def make(**gateway_settings: Any) -> Any:
        return gateway_factory(
            plugins=["citations"], env={"COCKPIT_API_URL": orch.url}, **gateway_settings
        )

    return make
