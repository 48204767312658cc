"""The stateful fake orchestrator: a real HTTP server on 127.0.0.1 that answers like the
"Debug Cockpit API" did when recorded, over an in-memory state a test can shape."""

from __future__ import annotations

from gateway.testing.backends import FakeBackend, ReceivedRequest, Reply

from . import audit, citations, jobs, monitoring, workspace
from .api import Router
from .model import Clock
from .seed import load_experts
from .seed import seed as seed_scenario
from .state import State

ROUTER = Router()
# Declaration order matters where templates overlap, as in the API: graph routes first.
for _module in (audit, jobs, workspace, monitoring, citations):
    ROUTER.include(_module.router)


class FakeOrchestrator(FakeBackend):
    """``with FakeOrchestrator() as api:`` serves the recorded scenario at ``api.url``.

    ``api.state`` is the data (see :class:`~.state.State` for its helpers: ``add_job``,
    ``add_agent``, ``freeze_job``, ``set_job_status``, ``add_source``, ``write_file``, ...);
    ``seed=False`` starts with no rows (the experts, being files, are there); ``mongo=True`` serves the MongoDB-backed endpoints instead of
    their degraded answers (switchable later with ``api.state.mongo``); ``clock`` fixes time.
    The fault modes, request log and overrides of :class:`FakeBackend` all apply."""

    def __init__(
        self, *, seed: bool = True, mongo: bool = False, clock: Clock | None = None, port: int = 0
    ) -> None:
        super().__init__(port=port)
        self.state = State(clock, mongo=mongo)
        load_experts(self.state)  # configuration files, not rows: there even when empty
        if seed:
            seed_scenario(self.state)

    def respond(self, request: ReceivedRequest) -> Reply:
        with self.state.lock:
            return ROUTER.dispatch(self.state, request)
