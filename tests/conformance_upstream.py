"""An MCP server with the tool fixtures of the official conformance suite's tool scenarios
(``tools-list``, ``tools-call-*``, ``json-schema-2020-12``), written for these tests with the
official SDK's low-level server, from the scenarios' descriptions in the suite's own text.

``python conformance_upstream.py stdio`` serves stdio; ``python conformance_upstream.py http
PORT`` serves Streamable HTTP at ``http://127.0.0.1:PORT/mcp``: the same server, alone or
mounted behind the gateway, so the suite can measure both.
"""

from __future__ import annotations

import sys
from typing import Any

import anyio
import mcp_types as t
from mcp.server import Server, ServerRequestContext

#: A 1x1 PNG and a minimal WAV, as the suite's scenarios describe them.
IMAGE = "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8DwHwAFBQIAX8jx0gAAAABJRU5ErkJggg=="
AUDIO = "UklGRiYAAABXQVZFZm10IBAAAAABAAEAQB8AAAB9AAACABAAZGF0YQIAAAA="
OPEN: dict[str, Any] = {"type": "object"}
SCHEMA_2020_12: dict[str, Any] = {
    "$schema": "https://json-schema.org/draft/2020-12/schema",
    "type": "object",
    "$defs": {
        "address": {
            "$anchor": "addressDef",
            "type": "object",
            "properties": {"street": {"type": "string"}, "city": {"type": "string"}},
        }
    },
    "properties": {
        "name": {"type": "string"},
        "address": {"$ref": "#/$defs/address"},
        "contactMethod": {"type": "string", "enum": ["phone", "email"]},
        "phone": {"type": "string"},
        "email": {"type": "string"},
    },
    "allOf": [{"anyOf": [{"required": ["phone"]}, {"required": ["email"]}]}],
    "if": {"properties": {"contactMethod": {"const": "phone"}}, "required": ["contactMethod"]},
    "then": {"required": ["phone"]},
    "else": {"required": ["email"]},
    "additionalProperties": False,
}

READ = t.ToolAnnotations(read_only_hint=True)
TOOLS = {
    tool.name: tool
    for tool in [
        t.Tool(
            name="test_simple_text",
            description="Returns simple text",
            input_schema=OPEN,
            annotations=READ,
        ),
        t.Tool(
            name="test_image_content",
            description="Returns an image",
            input_schema=OPEN,
            annotations=READ,
        ),
        t.Tool(
            name="test_audio_content",
            description="Returns audio",
            input_schema=OPEN,
            annotations=READ,
        ),
        t.Tool(
            name="test_embedded_resource",
            description="Returns an embedded resource",
            input_schema=OPEN,
            annotations=READ,
        ),
        t.Tool(
            name="test_multiple_content_types",
            description="Returns text, an image and a resource",
            input_schema=OPEN,
            annotations=READ,
        ),
        t.Tool(
            name="test_error_handling",
            description="Returns an error result",
            input_schema=OPEN,
            annotations=READ,
        ),
        t.Tool(
            name="test_tool_with_progress",
            description="Reports progress, then returns",
            input_schema=OPEN,
            annotations=READ,
        ),
        t.Tool(
            name="json_schema_2020_12_tool",
            description="Tool with JSON Schema 2020-12 features",
            input_schema=SCHEMA_2020_12,
            annotations=READ,
        ),
    ]
}


def text(value: str) -> t.TextContent:
    return t.TextContent(type="text", text=value)


async def on_list_tools(ctx: ServerRequestContext[Any], params: Any) -> t.ListToolsResult:
    return t.ListToolsResult(tools=list(TOOLS.values()))


async def on_call_tool(
    ctx: ServerRequestContext[Any], params: t.CallToolRequestParams
) -> t.CallToolResult:
    name = params.name
    if name == "test_simple_text":
        return t.CallToolResult(content=[text("This is a simple text response for testing.")])
    if name == "test_image_content":
        return t.CallToolResult(
            content=[t.ImageContent(type="image", data=IMAGE, mime_type="image/png")]
        )
    if name == "test_audio_content":
        return t.CallToolResult(
            content=[t.AudioContent(type="audio", data=AUDIO, mime_type="audio/wav")]
        )
    if name == "test_embedded_resource":
        resource = t.TextResourceContents(
            uri="test://embedded-resource",
            mime_type="text/plain",
            text="This is an embedded resource content.",
        )
        return t.CallToolResult(content=[t.EmbeddedResource(type="resource", resource=resource)])
    if name == "test_multiple_content_types":
        resource = t.TextResourceContents(
            uri="test://mixed-content-resource",
            mime_type="application/json",
            text='{"test":"data","value":123}',
        )
        return t.CallToolResult(
            content=[
                text("Multiple content types test:"),
                t.ImageContent(type="image", data=IMAGE, mime_type="image/png"),
                t.EmbeddedResource(type="resource", resource=resource),
            ]
        )
    if name == "test_error_handling":
        return t.CallToolResult(
            content=[text("This tool intentionally returns an error for testing")], is_error=True
        )
    if name == "test_tool_with_progress":
        for done in (0, 50, 100):
            await ctx.session.report_progress(done, 100, f"{done}%")
            await anyio.sleep(0.05)
        return t.CallToolResult(content=[text("Progress complete")])
    if name == "json_schema_2020_12_tool":
        return t.CallToolResult(content=[text("ok")])
    return t.CallToolResult(content=[text(f"unknown tool {name}")], is_error=True)


def schema_of(name: str) -> dict[str, Any] | None:
    tool = TOOLS.get(name)
    return tool.input_schema if tool is not None else None


server: Server[Any] = Server(
    "conformance-upstream",
    version="1.0.0",
    on_list_tools=on_list_tools,
    on_call_tool=on_call_tool,
    get_tool_input_schema=schema_of,
)


async def serve_stdio() -> None:
    from mcp.server.stdio import stdio_server

    async with stdio_server() as (read, write):
        await server.run(read, write, server.create_initialization_options())


def serve_http(port: int) -> None:
    import uvicorn

    app = server.streamable_http_app(stateless_http=True, json_response=False)
    uvicorn.run(app, host="127.0.0.1", port=port, log_level="warning")


if __name__ == "__main__":
    if sys.argv[1] == "stdio":
        anyio.run(serve_stdio)
    else:
        serve_http(int(sys.argv[2]))
