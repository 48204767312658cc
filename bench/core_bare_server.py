"""The baseline for the core benchmarks: a bare low-level ``mcp.server.Server``.

Serves the same trivial read tools as the gateway's benchmark plugin (``echo_0..echo_{N-1}``,
``{x: int}`` → ``{y: x + 1}``) with explicit input/output schemas, annotations and
``get_tool_input_schema``, over stdio or Streamable HTTP (stateless, JSON responses, uvicorn on
127.0.0.1), the way ``gateway/http.py`` serves. It does only what any hand-written SDK server
must: no validation library, no plugins, no policy.

    .venv/bin/python bench/core_bare_server.py --tools 10 stdio
    .venv/bin/python bench/core_bare_server.py --tools 10 http --port 8766
"""

from __future__ import annotations

import gc
import os

# BARE_GC_PAUSED=1: start as ``mcp-gateway serve`` does (gateway/cli.py), the collector
# paused until the server is built, so the benchmark can also compare like with like.
GC_PAUSED = os.environ.get("BARE_GC_PAUSED") == "1"
if GC_PAUSED:
    gc.disable()

import argparse  # noqa: E402
import json  # noqa: E402
from typing import Any  # noqa: E402

import mcp_types as t  # noqa: E402
from mcp.server import Server, ServerRequestContext  # noqa: E402
from mcp.server.lowlevel.server import NotificationOptions  # noqa: E402
from mcp.shared.exceptions import MCPError  # noqa: E402

DESCRIPTION = "Return y = x + 1."
INPUT_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {"x": {"type": "integer", "description": "Any integer."}},
    "required": ["x"],
    "additionalProperties": False,
}
OUTPUT_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {"y": {"type": "integer"}},
    "required": ["y"],
}


def build_server(n: int) -> Server[Any]:
    tools = {
        f"echo_{i}": t.Tool(
            name=f"echo_{i}",
            title=f"Echo {i}",
            description=DESCRIPTION,
            input_schema=INPUT_SCHEMA,
            output_schema=OUTPUT_SCHEMA,
            annotations=t.ToolAnnotations(
                read_only_hint=True,
                destructive_hint=False,
                idempotent_hint=True,
                open_world_hint=False,
            ),
        )
        for i in range(n)
    }
    listed = t.ListToolsResult(tools=list(tools.values()))

    async def on_list_tools(
        ctx: ServerRequestContext[Any], params: t.PaginatedRequestParams | None
    ) -> t.ListToolsResult:
        return listed

    async def on_call_tool(
        ctx: ServerRequestContext[Any], params: t.CallToolRequestParams
    ) -> t.CallToolResult:
        if params.name not in tools:
            raise MCPError(code=t.INVALID_PARAMS, message=f"unknown tool {params.name!r}")
        x = (params.arguments or {}).get("x")
        if not isinstance(x, int) or isinstance(x, bool):
            return t.CallToolResult(
                content=[t.TextContent(type="text", text="x must be an integer")], is_error=True
            )
        payload = {"y": x + 1}
        return t.CallToolResult(
            content=[t.TextContent(type="text", text=json.dumps(payload, separators=(",", ":")))],
            structured_content=payload,
        )

    def input_schema(name: str) -> dict[str, Any] | None:
        return INPUT_SCHEMA if name in tools else None

    return Server(
        "bare",
        version="0",
        get_tool_input_schema=input_schema,
        on_list_tools=on_list_tools,
        on_call_tool=on_call_tool,
    )


async def serve_stdio(server: Server[Any]) -> None:
    from mcp.server.stdio import stdio_server

    options = server.create_initialization_options(NotificationOptions(tools_changed=False))
    async with stdio_server() as (read, write):
        await server.run(read, write, options)


def serve_http(server: Server[Any], port: int) -> None:
    import uvicorn

    app = server.streamable_http_app(
        streamable_http_path="/mcp", json_response=True, stateless_http=True, host="127.0.0.1"
    )
    uvicorn.run(app, host="127.0.0.1", port=port, log_level="warning", lifespan="on")


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--tools", type=int, default=10)
    sub = p.add_subparsers(dest="transport", required=True)
    sub.add_parser("stdio")
    h = sub.add_parser("http")
    h.add_argument("--port", type=int, required=True)
    args = p.parse_args()
    server = build_server(args.tools)
    if args.transport == "stdio":
        import anyio

        if GC_PAUSED:
            gc.freeze()
            gc.enable()

        anyio.run(serve_stdio, server)
    else:
        serve_http(server, args.port)


if __name__ == "__main__":
    main()
