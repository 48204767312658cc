"""A permission-prompt tool for ``claude -p --permission-prompt-tool mcp__approver__approve``.

A minimal MCP server over stdio (standard library only, so it starts at once): its one tool
answers every permission request Claude Code sends it with ``allow`` (``APPROVER_ANSWER=deny``
refuses instead) and appends the request, as one JSON line, to the file ``APPROVER_LOG`` names.
It stands for the user, or the program, that approves calls in a headless run.
"""

from __future__ import annotations

import json
import os
import sys
from typing import Any

TOOL = {
    "name": "approve",
    "description": "Decide a permission request.",
    "inputSchema": {
        "type": "object",
        "properties": {
            "tool_name": {"type": "string"},
            "input": {"type": "object"},
            "tool_use_id": {"type": "string"},
        },
        "required": ["tool_name", "input"],
    },
}


def answer(request: dict[str, Any]) -> dict[str, Any] | None:
    method = request.get("method")
    if "id" not in request:
        return None
    if method == "initialize":
        result: dict[str, Any] = {
            "protocolVersion": request.get("params", {}).get("protocolVersion", "2025-06-18"),
            "capabilities": {"tools": {}},
            "serverInfo": {"name": "approver", "version": "1"},
        }
    elif method == "tools/list":
        result = {"tools": [TOOL]}
    elif method == "tools/call":
        arguments = request.get("params", {}).get("arguments", {})
        with open(os.environ["APPROVER_LOG"], "a", encoding="utf-8") as log:
            log.write(json.dumps(arguments) + "\n")
        if os.environ.get("APPROVER_ANSWER") == "deny":
            decision = {"behavior": "deny", "message": "refused by the approver"}
        else:
            decision = {"behavior": "allow", "updatedInput": arguments.get("input", {})}
        result = {"content": [{"type": "text", "text": json.dumps(decision)}]}
    elif method == "ping":
        result = {}
    else:
        return {
            "jsonrpc": "2.0",
            "id": request["id"],
            "error": {"code": -32601, "message": f"no method {method}"},
        }
    return {"jsonrpc": "2.0", "id": request["id"], "result": result}


def main() -> None:
    for line in sys.stdin:
        if not line.strip():
            continue
        reply = answer(json.loads(line))
        if reply is not None:
            sys.stdout.write(json.dumps(reply) + "\n")
            sys.stdout.flush()


if __name__ == "__main__":
    main()
