"""mcp-gateway plugin `queue`: the SQLite jobs store and the tools that read and triage it.

`gateway_queue.store` is plain synchronous sqlite3 code shared with other plugins (the scrape
plugin writes through it); `gateway_queue.plugin` holds the MCP tools.
"""
