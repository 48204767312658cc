"""Start-up without the cyclic garbage collector.

Starting a server creates hundreds of thousands of objects that live as long as the process
(the SDK's and the plugins' modules, classes and models) and almost no garbage, so each
collection the allocations trigger while starting walks them all for nothing. ``serve`` pauses
the collector until the server is built, then freezes what exists (``gc.freeze``: later
collections skip the start-up objects, as CPython's documentation suggests for long-lived
processes) and lets it run again for the calls.
"""

from __future__ import annotations

import gc


def pause_collector() -> None:
    gc.disable()


def resume_collector() -> None:
    """Before serving: the start-up objects frozen, the collector on again."""
    gc.freeze()
    gc.enable()
