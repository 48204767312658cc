"""The queue plugin's MCP tools (being written; the store API in gateway_queue.store is stable)."""

from __future__ import annotations
