"""Example plugin for mcp-gateway: a bookmarks API's tools, declared in the REST dialect."""
