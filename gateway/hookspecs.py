"""The plugin contract: eight hooks, each called once per plugin, each failure isolated.

A plugin is a module (or object) named by an entry point in the group ``mcp_gateway.plugins``
whose functions are decorated with :data:`hookimpl`. An implementation may accept any subset
of a hook's arguments, as usual with pluggy.

The core calls every hook for one plugin at a time, inside its own ``try``. If any hook of a
plugin raises, or returns something the core rejects, that plugin is skipped as a whole (its
tools and checks are withdrawn), its reason is recorded and shown by ``mcp-gateway plugins``
and the ``gateway_status`` tool, and every other plugin keeps serving.

Order at start-up, per plugin: ``plugin_settings`` → ``register_tools`` →
``register_prompts`` → ``register_resources`` → ``register_health_checks`` →
``register_servers``; then, when the server starts, ``open_resources``; at shut-down,
``close_resources``. None of these may do network I/O except ``open_resources`` and
``close_resources``, and those should only open clients, not probe backends: the gateway
must answer ``initialize`` and ``tools/list`` at once even when every backend is down.

Time limits: the import and the load-time hooks of one plugin share ``load_timeout``;
``open_resources`` and ``close_resources`` get ``resource_timeout`` each. They hold for
blocking code too (see :func:`gateway.plugins.time_limit`); a plugin that overruns is skipped.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING

import pluggy
from pydantic import BaseModel

from .spec import HealthCheck, PluginContext, ServerSpec, ToolSpec

if TYPE_CHECKING:
    from .prompts import PromptSpec
    from .resources import ResourceSpec, ResourceTemplateSpec

PROJECT = "mcp_gateway"
ENTRY_POINT_GROUP = "mcp_gateway.plugins"

hookspec = pluggy.HookspecMarker(PROJECT)
#: Decorate a plugin's hook functions with this.
hookimpl = pluggy.HookimplMarker(PROJECT)


@hookspec(firstresult=True)
def plugin_settings() -> type[BaseModel] | None:
    """Return the pydantic model of this plugin's settings, or ``None`` for none.

    Called first, once. The core fills the model from the ``[plugins.<name>]`` table of the
    config file and from environment variables, and hands the instance to the other hooks as
    ``plugin.settings``. A field declares its environment variable with
    ``gateway.env_field("GITEA_URL", default=None)``. String values ``{"$env": "NAME"}`` in the
    config file read that variable. ``SecretStr`` values are redacted from every message.
    If validation fails the plugin is skipped with the field and rule as the reason.
    """


@hookspec
def register_tools(register: Callable[[ToolSpec], None], plugin: PluginContext[BaseModel]) -> None:
    """Register this plugin's tools by calling ``register(ToolSpec(...))`` once per tool.

    Called once, after ``plugin_settings``. No I/O. A spec with a bad name, a missing or
    unknown tier, a mutation without ``Mutation(...)``, a non-async handler or an input model
    that allows extra fields is a registration error: the whole plugin is then skipped with
    that reason. A tool name another plugin registers too costs only that tool: neither serves
    it, both report it, and the deployment's ``providers`` setting picks one.
    """


@hookspec
def register_prompts(
    register: Callable[[PromptSpec], None], plugin: PluginContext[BaseModel]
) -> None:
    """Register workflows as MCP prompts by calling ``register(PromptSpec(...))`` once each.

    Called once, after ``register_tools``. No I/O. A prompt's arguments model is validated like
    tool input (``extra="forbid"``); its render function gets a ``PromptContext`` naming the tools
    this deployment offers, so it can name only those. A prompt is listed only while every tool
    in its ``requires`` is offered. A bad spec or a name taken by another plugin skips the
    plugin with that reason; a render function that raises gives the client a generic error.
    """


@hookspec
def register_resources(
    register: Callable[[ResourceSpec | ResourceTemplateSpec], None],
    plugin: PluginContext[BaseModel],
) -> None:
    """Offer MCP resources by calling ``register(ResourceSpec(...))`` (one URI) or
    ``register(ResourceTemplateSpec(...))`` (URIs by a template) once each.

    Called once, after ``register_prompts``. No I/O: a reader runs when a client reads. A read
    is of the read tier and passes the pipeline's layers like a read tool's call (scopes,
    audit where reads are audited, breaker, timeout, sanitizer, size bounds); a file-backed
    resource (``path=``) is read only inside the data roots. A bad spec, or a URI the plugin
    registers twice, skips the plugin with that reason; a URI another source registers too is
    served by neither, and both report it.
    """


@hookspec
def register_health_checks(
    register: Callable[[HealthCheck], None], plugin: PluginContext[BaseModel]
) -> None:
    """Register named async checks of this plugin's backends with ``register(HealthCheck(...))``.

    Called once, after ``register_resources``. No I/O here: the checks run later, on demand
    (``mcp-gateway health``, ``gateway_status``, ``/readyz``), each under its own timeout, with
    results cached. Set ``HealthCheck.not_configured`` when settings leave a backend unset: its
    tools are then not offered.
    """


@hookspec
def register_servers(
    register: Callable[[ServerSpec], None], plugin: PluginContext[BaseModel]
) -> None:
    """Mount MCP servers by calling ``register(ServerSpec(...))`` once per server.

    Called once, after ``register_health_checks``. No I/O: the core starts (or connects to) the
    servers when the gateway starts, lists their tools and serves them through the same
    pipeline as plugin tools (each server reported like a plugin of its name). A spec that is
    not a ``ServerSpec`` skips the plugin. Raise ``gateway.config.ConfigError`` for a mistake in
    the deployment's configuration: the plugin is skipped with that one line as its reason, and
    the CLI stops with exit status 2 showing it.
    """


@hookspec
def open_resources(plugin: PluginContext[BaseModel]) -> Awaitable[None] | None:
    """Open shared resources once, before the first call (may be ``async``).

    Store them in ``plugin.resources`` (an ``httpx.AsyncClient`` with keep-alive, a path).
    Runs under a timeout; a failure here skips the plugin. Do not probe backends here.
    """


@hookspec
def close_resources(plugin: PluginContext[BaseModel]) -> Awaitable[None] | None:
    """Close what ``open_resources`` opened (may be ``async``). Called once at shut-down,
    also when the process is stopping because of an error. Failures are logged, not raised."""
