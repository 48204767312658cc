"""A small MCP server over stdio (standard library only) for the mounting tests.

What the reference servers cannot be made to do on demand: start slowly, change its tools,
crash, flood, show what arrived. ``python upstream_server.py CONFIG.json``; the config:

- ``tools``: the definitions it lists (``name``, ``description``, ``inputSchema``, …); a tool
  with a ``result`` answers with it, the others by their name below;
- ``start_delay``: seconds before it reads anything (a server that is slow to start);
- ``journal``: a file that gets one JSON line per message received (``_meta``, cancellations);
- ``exit_after``: exit with this status after answering ``tools/list`` once;
- ``stderr``: a line it writes to stderr when it starts;
- ``resources``, ``templates``, ``prompts``: what it lists of those (declared only when given);
  a resource with ``text`` is read as that text, any other URI (a template's) as the URI
  itself; a prompt answers a user message ``<name>: <arguments as JSON>``; a completion
  answers ``completions`` (by argument name).

A tool with an ``error`` (``{"code", "message"}``) answers every call with that JSON-RPC error.

Tools by name: ``echo`` (its arguments as text), ``sleep`` (``seconds``; progress each 0.1 s
when asked), ``add_tool`` (lists one more tool, ``added``, and says so), ``crash`` (exits 3),
``flood`` (one line of ``bytes`` bytes), ``env`` (its environment as JSON), ``meta`` (the
request's ``_meta``), ``fail`` (an ``isError`` result with the text given), ``spawn`` (starts
a child process that sleeps, and answers its pid), ``ask`` (asks the client ``method`` with
``params`` over its connection, a 2025 server-to-client request, and answers what came back,
as JSON; with ``progress_after``, it reports progress once answered), ``log`` (sends ``notifications/message`` at ``level`` with ``data``, then answers).
"""

from __future__ import annotations

import json
import os
import sys
import threading
import time

with open(sys.argv[1], encoding="utf-8") as fh:
    config = json.load(fh)
tools: list[dict] = list(config.get("tools", []))
lock = threading.Lock()
cancelled: set = set()
#: the server's own requests to the client, waiting for their answers
asked: dict = {}


def send(message: dict) -> None:
    data = json.dumps(message) + "\n"
    with lock:
        sys.stdout.write(data)
        sys.stdout.flush()


def journal(message: dict) -> None:
    path = config.get("journal")
    if path:
        with lock, open(path, "a", encoding="utf-8") as fh:
            fh.write(json.dumps(message) + "\n")


def text(value: str, error: bool = False) -> dict:
    return {"content": [{"type": "text", "text": value}], "isError": error}


def call(ident: object, params: dict) -> None:
    name = params.get("name")
    args = params.get("arguments") or {}
    meta = params.get("_meta") or {}
    tool = next((t for t in tools if t["name"] == name), None)
    if tool is None:
        send(
            {"jsonrpc": "2.0", "id": ident, "error": {"code": -32602, "message": f"no tool {name}"}}
        )
        return
    if "error" in tool:
        send({"jsonrpc": "2.0", "id": ident, "error": tool["error"]})
        return
    if "result" in tool:
        result = tool["result"]
    elif name == "echo":
        result = text(json.dumps(args, sort_keys=True))
    elif name == "sleep":
        token = meta.get("progressToken")
        end = time.monotonic() + float(args.get("seconds", 1))
        step = 0
        while time.monotonic() < end:
            if ident in cancelled:
                return
            time.sleep(0.1)
            step += 1
            if token is not None:
                send(
                    {
                        "jsonrpc": "2.0",
                        "method": "notifications/progress",
                        "params": {
                            "progressToken": token,
                            "progress": step,
                            "message": f"step {step}",
                        },
                    }
                )
        result = text("slept")
    elif name == "add_tool":
        tools.append(
            {"name": "added", "description": "Added later.", "inputSchema": {"type": "object"}}
        )
        send({"jsonrpc": "2.0", "method": "notifications/tools/list_changed"})
        result = text("added")
    elif name == "crash":
        os._exit(3)
    elif name == "flood":
        with lock:
            sys.stdout.write("x" * int(args.get("bytes", 10_000_000)) + "\n")
            sys.stdout.flush()
        return
    elif name == "env":
        result = text(json.dumps(dict(os.environ)))
    elif name == "meta":
        result = text(json.dumps(meta, sort_keys=True))
    elif name == "fail":
        result = text(str(args.get("text", "failed")), error=True)
    elif name == "ask":
        waiting = threading.Event()
        key = f"ask-{ident}"
        asked[key] = [waiting, None]
        send(
            {
                "jsonrpc": "2.0",
                "id": key,
                "method": args.get("method", "elicitation/create"),
                "params": args.get("params", {}),
            }
        )
        waiting.wait(30)
        token = meta.get("progressToken")
        if args.get("progress_after") and token is not None:  # reported once it was answered
            send(
                {
                    "jsonrpc": "2.0",
                    "method": "notifications/progress",
                    "params": {"progressToken": token, "progress": 1, "message": "answered"},
                }
            )
        result = text(json.dumps(asked.pop(key)[1], sort_keys=True))
    elif name == "log":
        send(
            {
                "jsonrpc": "2.0",
                "method": "notifications/message",
                "params": {"level": args.get("level", "warning"), "data": args.get("data", "")},
            }
        )
        result = text("logged")
    elif name == "spawn":
        import subprocess

        child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(600)"])
        result = text(str(child.pid))
    else:
        result = text("ok")
    send({"jsonrpc": "2.0", "id": ident, "result": result})


def main() -> None:
    if config.get("stderr"):
        sys.stderr.write(config["stderr"] + "\n")
        sys.stderr.flush()
    time.sleep(float(config.get("start_delay", 0)))
    listed = 0
    for line in sys.stdin:
        if not line.strip():
            continue
        message = json.loads(line)
        journal(message)
        method = message.get("method")
        ident = message.get("id")
        params = message.get("params") or {}
        if method is None and ident in asked:  # the client's answer to our own request
            asked[ident][1] = message.get("result", message.get("error"))
            asked[ident][0].set()
        elif method == "initialize":
            capabilities: dict = {"tools": {"listChanged": True}}
            if "resources" in config or "templates" in config:
                capabilities["resources"] = {}
            if "prompts" in config:
                capabilities["prompts"] = {}
                capabilities["completions"] = {}
            result = {
                "protocolVersion": params.get("protocolVersion", "2025-06-18"),
                "capabilities": capabilities,
                "serverInfo": {"name": "upstream-fixture", "version": "1.0"},
            }
            send({"jsonrpc": "2.0", "id": ident, "result": result})
        elif method == "resources/list":
            listed_resources = [
                {k: v for k, v in r.items() if k != "text"} for r in config.get("resources", [])
            ]
            send({"jsonrpc": "2.0", "id": ident, "result": {"resources": listed_resources}})
        elif method == "resources/templates/list":
            result = {"resourceTemplates": config.get("templates", [])}
            send({"jsonrpc": "2.0", "id": ident, "result": result})
        elif method == "resources/read":
            uri = params.get("uri")
            found = next((r for r in config.get("resources", []) if r["uri"] == uri), None)
            body = found["text"] if found and "text" in found else f"read {uri}"
            result = {"contents": [{"uri": uri, "mimeType": "text/plain", "text": body}]}
            send({"jsonrpc": "2.0", "id": ident, "result": result})
        elif method == "prompts/list":
            send({"jsonrpc": "2.0", "id": ident, "result": {"prompts": config.get("prompts", [])}})
        elif method == "prompts/get":
            said = (
                f"{params.get('name')}: {json.dumps(params.get('arguments') or {}, sort_keys=True)}"
            )
            message_out = {"role": "user", "content": {"type": "text", "text": said}}
            send({"jsonrpc": "2.0", "id": ident, "result": {"messages": [message_out]}})
        elif method == "completion/complete":
            values = config.get("completions", {}).get(params["argument"]["name"], [])
            result = {"completion": {"values": values, "total": len(values), "hasMore": False}}
            send({"jsonrpc": "2.0", "id": ident, "result": result})
        elif method == "tools/list":
            send({"jsonrpc": "2.0", "id": ident, "result": {"tools": tools}})
            listed += 1
            if config.get("exit_after") is not None and listed == 1:
                sys.stdout.flush()
                os._exit(int(config["exit_after"]))
        elif method == "tools/call":
            threading.Thread(target=call, args=(ident, params), daemon=True).start()
        elif method == "ping":
            send({"jsonrpc": "2.0", "id": ident, "result": {}})
        elif method == "notifications/cancelled":
            cancelled.add(params.get("requestId"))
        elif ident is not None:
            send(
                {
                    "jsonrpc": "2.0",
                    "id": ident,
                    "error": {"code": -32601, "message": "Method not found"},
                }
            )


if __name__ == "__main__":
    main()
