"""mcp-gateway plugin: MCP servers behind the gateway.

It only turns configuration into data: each ``[servers.<name>]`` table of the config file and
each entry of the ``.mcp.json`` file ``MCP_GATEWAY_SERVERS`` names becomes a
:class:`gateway.spec.ServerSpec` (``register_servers``). The core starts them, lists their tools
and serves them (``gateway.upstream``, ``gateway.mounts``).
"""
