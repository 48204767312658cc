"""Example mcp-gateway plugin: notes kept in a JSON file inside the data roots."""
