"""Run the FastMCP plugins of this folder: list their tools and call each one, the tasks tools
against the fake API of ``tasks_api.py``, the files tools in a temporary root. FastMCP is not a
dependency of the project: run this with a Python that has it, e.g. a throw-away venv::

    python3 -m venv .fastmcp-venv && .fastmcp-venv/bin/pip install fastmcp
    .fastmcp-venv/bin/python bench/authoring/check_fastmcp.py

Exits non-zero when a call does not answer as the gateway's versions do (tests/
test_authoring_bench.py makes the same calls of those).
"""

from __future__ import annotations

import asyncio
import importlib.util
import json
import os
import sys
import tempfile
from pathlib import Path
from types import ModuleType
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

from tasks_api import serving  # noqa: E402


def load(name: str) -> ModuleType:
    spec = importlib.util.spec_from_file_location(
        f"fastmcp_{name}", HERE / "fastmcp" / f"{name}.py"
    )
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


async def calls(module: ModuleType, todo: list[tuple[str, dict[str, Any]]]) -> list[Any]:
    from fastmcp import Client

    out = []
    async with Client(module.mcp) as client:
        for tool in await client.list_tools():
            params = tool.input_schema.get("properties", {})
            print(f"  {tool.name}: {tool.description!r} {sorted(params)}")
        for name, arguments in todo:
            result = await client.call_tool(name, arguments, raise_on_error=False)
            text = result.content[0].text if result.content else ""
            answer = {"error": text} if result.is_error else result.structured_content
            print(f"  {name}({json.dumps(arguments)[:60]}) -> {json.dumps(answer)[:100]}")
            out.append(answer)
    return out


async def main() -> int:
    with serving() as api, tempfile.TemporaryDirectory() as root:
        os.environ.update(TASKS_API_URL=api.url, FILES_ROOT=root, FILES_MAX_BYTES="100")
        print("tasks")
        added, listed, got, missing, bad = await calls(
            load("tasks"),
            [
                ("tasks_add", {"title": "write the bench", "due": "2026-12-01"}),
                ("tasks_list", {"done": False}),
                ("tasks_get", {"task_id": 1}),
                ("tasks_get", {"task_id": 9}),
                ("tasks_add", {"title": "x", "due": "tomorrow"}),
            ],
        )
        print("files")
        written, read, cut, outside, big, too_big = await calls(
            load("files"),
            [
                ("write_file", {"path": "notes/a.txt", "text": "hello world"}),
                ("read_file", {"path": "notes/a.txt"}),
                ("read_file", {"path": "notes/a.txt", "max_chars": 5}),
                ("read_file", {"path": "../elsewhere.txt"}),
                ("write_file", {"path": "big.txt", "text": "x" * 200}),
                ("read_file", {"path": "big.txt"}),
            ],
        )
    task = {"id": 1, "title": "write the bench", "done": False, "due": "2026-12-01"}
    checks = [
        added == got == task,
        listed == {"tasks": [task], "total": 1},
        missing == {"error": "no task 9"},
        "error" in bad and "pattern" in bad["error"],
        written == {"path": "notes/a.txt", "chars": 11},
        read == {"path": "notes/a.txt", "text": "hello world", "truncated": False},
        cut == {"path": "notes/a.txt", "text": "hello", "truncated": True},
        outside == {"error": "path: ../elsewhere.txt is outside the data root"},
        big == {"path": "big.txt", "chars": 200},
        too_big == {"error": "path: big.txt is over 100 bytes"},
    ]
    print("all answered as expected" if all(checks) else f"unexpected: {checks}")
    return 0 if all(checks) else 1


if __name__ == "__main__":
    raise SystemExit(asyncio.run(main()))
