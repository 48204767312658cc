"""Bytes each installed tool adds to `tools/list`, so description and schema bloat is visible.

Rerun: .venv/bin/python bench/tool_sizes.py   (prints a Markdown table)
"""

from __future__ import annotations

import json
import tempfile
from pathlib import Path

import anyio

from gateway.testing import gateway_client, make_gateway


async def main() -> None:
    with tempfile.TemporaryDirectory() as tmp:
        gw = make_gateway(cwd=Path(tmp), env={})
        async with gw, gateway_client(gw) as client:
            tools = (await client.list_tools()).tools
    rows = []
    for tool in tools:
        wire = tool.model_dump(mode="json", by_alias=True, exclude_none=True)
        parts = {
            k: len(json.dumps(wire.get(k, ""), separators=(",", ":")))
            for k in ("description", "inputSchema", "outputSchema")
        }
        rows.append((tool.name, len(json.dumps(wire, separators=(",", ":"))), parts))
    print("| tool | bytes | description | inputSchema | outputSchema |")
    print("|---|---:|---:|---:|---:|")
    for name, total, p in sorted(rows, key=lambda r: -r[1]):
        print(
            f"| `{name}` | {total} | {p['description']} | {p['inputSchema']} | {p['outputSchema']} |"
        )
    print(f"| **all {len(rows)} tools** | {sum(r[1] for r in rows)} | | | |")


if __name__ == "__main__":
    anyio.run(main)
