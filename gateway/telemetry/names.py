"""The attribute and metric names the gateway records.

The MCP ones follow the OpenTelemetry semantic conventions for the Model Context Protocol
(``mcp.*``, ``gen_ai.*``, ``jsonrpc.*``), backend requests the HTTP client conventions and
SQLite statements the database ones. What only this gateway knows lives under
``mcp_gateway.*``.
"""

from __future__ import annotations

# MCP server spans and mcp.server.operation.duration
MCP_METHOD = "mcp.method.name"
MCP_PROTOCOL_VERSION = "mcp.protocol.version"
MCP_SESSION_ID = "mcp.session.id"
JSONRPC_REQUEST_ID = "jsonrpc.request.id"
RPC_STATUS_CODE = "rpc.response.status_code"
GEN_AI_OPERATION = "gen_ai.operation.name"
GEN_AI_TOOL = "gen_ai.tool.name"
GEN_AI_PROMPT = "gen_ai.prompt.name"
ERROR_TYPE = "error.type"
NETWORK_TRANSPORT = "network.transport"
NETWORK_PROTOCOL = "network.protocol.name"

# backend requests (HTTP client)
HTTP_METHOD = "http.request.method"
HTTP_STATUS = "http.response.status_code"
HTTP_RESEND = "http.request.resend_count"
URL_TEMPLATE = "url.template"
SERVER_ADDRESS = "server.address"
SERVER_PORT = "server.port"

# SQLite statements
DB_SYSTEM = "db.system.name"
DB_OPERATION = "db.operation.name"
DB_COLLECTION = "db.collection.name"
DB_ROWS = "db.response.returned_rows"

# the gateway's own
PLUGIN = "mcp_gateway.plugin"
TIER = "mcp_gateway.tool.tier"
TIMEOUT = "mcp_gateway.tool.timeout"  # seconds
BACKEND = "mcp_gateway.backend"
BREAKER_STATE = "mcp_gateway.breaker.state"
BREAKER_PREVIOUS = "mcp_gateway.breaker.previous_state"
CORRELATION_ID = "mcp_gateway.correlation_id"
REFUSAL = "mcp_gateway.refusal.reason"

# metrics
OPERATION_DURATION = "mcp.server.operation.duration"
BACKEND_DURATION = "http.client.request.duration"
BREAKER_TRANSITIONS = "mcp_gateway.breaker.transitions"
CALLS_REFUSED = "mcp_gateway.calls.refused"

#: The bucket boundaries the conventions give for mcp.server.operation.duration (seconds).
OPERATION_BUCKETS = (0.01, 0.02, 0.05, 0.1, 0.2, 0.5, 1.0, 2.0, 5.0, 10.0, 30.0, 60.0, 120.0, 300.0)
#: ... and for http.client.request.duration.
HTTP_BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.075, 0.1, 0.25, 0.5, 0.75, 1.0, 2.5, 5.0, 7.5, 10.0)

#: Method names a span may be named after; any other (client input) is recorded as _OTHER.
KNOWN_METHODS = frozenset(
    {
        "initialize",
        "ping",
        "server/discover",
        "tools/list",
        "tools/call",
        "prompts/list",
        "prompts/get",
        "resources/list",
        "resources/read",
        "resources/templates/list",
        "resources/subscribe",
        "resources/unsubscribe",
        "subscriptions/listen",
        "completion/complete",
        "logging/setLevel",
        "notifications/initialized",
        "notifications/cancelled",
        "notifications/progress",
        "notifications/roots/list_changed",
    }
)
HTTP_METHODS = frozenset({"GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS"})
OTHER = "_OTHER"
