"""mcp-gateway plugin ``gitea``: read a job's git history from its Gitea repository."""

__version__ = "0.1.0"
