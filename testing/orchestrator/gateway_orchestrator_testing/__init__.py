"""Test support for the orchestrator API, a distribution of its own (never installed in a
deployment): the stateful fake and the recorded exchanges.

- :class:`FakeOrchestrator`: a real HTTP server answering like the orchestrator, seeded with the
  recorded scenario (:mod:`.seed` names its ids).
- :data:`RECORDINGS`: the folder of the 207 recorded exchanges (``RECORDINGS_INDEX`` describes
  each); :func:`recorded_backend` replays them with the core's ``RecordedBackend``.
"""

from __future__ import annotations

from pathlib import Path

from gateway.testing.backends import RecordedBackend

from .fake import FakeOrchestrator
from .model import Clock
from .state import State

RECORDINGS = Path(__file__).parent / "recordings"
RECORDINGS_INDEX = Path(__file__).parent / "recordings_index.json"


def recorded_backend(*names: str) -> RecordedBackend:
    """A replay server over the recorded exchanges, with ``names`` (or globs) loaded."""
    backend = RecordedBackend(directory=RECORDINGS)
    backend.load(*names)
    return backend


__all__ = [
    "RECORDINGS",
    "RECORDINGS_INDEX",
    "Clock",
    "FakeOrchestrator",
    "State",
    "recorded_backend",
]
