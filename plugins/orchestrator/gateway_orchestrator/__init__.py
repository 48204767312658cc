"""mcp-gateway plugin for the agent orchestrator ("Debug Cockpit API"): jobs, agents, workspaces,
audit history and database inspection over its REST API.

The stateful fake orchestrator and the recorded exchanges that the plugin's tests (and the
citations plugin's) run against are a distribution of their own, ``gateway_orchestrator_testing``.
"""
