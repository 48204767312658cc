"""What a mounted MCP server offers besides tools: its resources, resource templates and prompts.

Each time a server lists (:meth:`gateway.mounts.Mounts._apply`) they are put in the gateway's
registries under the rules its tools follow:

- **names**: the server's ``prefix`` goes before each prompt's name and each resource's and
  template's ``name`` (a URI is the resource itself and stays as the server wrote it); calls
  upstream use the server's own names and URIs;
- **collisions**: a prompt name, URI or URI template another source (a plugin, another
  server) has too is served by neither, and both report it; one the server lists twice is
  noted and served once;
- **read tier**: reading a resource and getting a prompt are calls of the read tier through
  the pipeline's layers (:meth:`gateway.pipeline.Pipeline.serve`): the OAuth read scope, the
  audit where reads are audited, the server's breaker and timeout, the sanitizer (configured
  secrets redacted from what comes back) and the size bound; what the server asks the client
  first (an input-required result) is asked through the gateway;
- **completions** of a prompt's arguments and a template's variables are asked of the server;
- **subscriptions**: a server that declares ``resources.subscribe`` has its resources (and
  the URIs of its templates) subscribable: the gateway subscribes it to a URI when the first
  client does and unsubscribes it when the last one goes (again after each restart), and
  passes its ``notifications/resources/updated`` to the clients subscribed to that URI (one
  mounted at 2026-07-28 tells them on the listen stream the gateway keeps open to it, opened
  again with the URIs subscribed to when they change: :meth:`Upstream._listening`).

Their definitions are not pinned (only tools are: they are what the model is told to call).

A plugin's worker (:mod:`gateway.isolation`) is mounted by the same code, with ``private``:
the ``_meta`` key under which it tells the gateway alone what a plugin in process has (a
prompt's ``requires`` and ``free_text``; the tools offered and ``read_only`` it renders a
prompt with). Its reads are then timed and guarded as a plugin's in process are (the
gateway's default timeout, no backend of the worker's own), and nothing under that key is
published.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

from pydantic import BaseModel, ConfigDict

from .pipeline import McpResult
from .prompts import PromptContext, PromptRegistry, PromptSpec, RegisteredPrompt
from .registry import RegisteredTool
from .resources import RegisteredResource, ResourceRegistry
from .spec import PluginContext, ServerSpec, Tier, ToolContext, ToolSpec
from .upstream import Listing, Upstream

log = logging.getLogger("gateway.mounts")


class _Passed(BaseModel):
    """Arguments checked by the server itself."""

    model_config = ConfigDict(extra="allow")


def mount_extras(
    spec: ServerSpec,
    listing: Listing,
    plugin: PluginContext[Any],
    upstream: Upstream,
    resources: ResourceRegistry,
    prompts: PromptRegistry,
    *,
    private: str | None = None,
    prompt_meta: Callable[[], dict[str, Any]] | None = None,
) -> tuple[list[str], list[str], list[str]]:
    """Put the server's resources, templates and prompts in the registries (its earlier ones
    out); the URIs and templates served, the prompt names, and notes for the operator.
    ``private`` and ``prompt_meta``: a plugin's worker's (see the module's docstring)."""
    notes: list[str] = []
    items: dict[str, RegisteredResource] = {}
    _add_resources(items, spec, listing, plugin, upstream, private, notes)
    _add_templates(items, spec, listing, plugin, upstream, private, notes)
    resources.remove_plugin(spec.name)
    resources.add_all(list(items.values()))
    mounted = _mounted_prompts(spec, listing, plugin, upstream, private, prompt_meta, notes)
    prompts.remove_plugin(spec.name)
    prompts.claim_all(list(mounted.values()))
    return list(items), list(mounted), notes


def _add_resources(
    items: dict[str, RegisteredResource],
    spec: ServerSpec,
    listing: Listing,
    plugin: PluginContext[Any],
    upstream: Upstream,
    private: str | None,
    notes: list[str],
) -> None:
    for listed in listing.resources:
        uri, name = listed.get("uri"), listed.get("name")
        if not isinstance(uri, str) or not isinstance(name, str) or not uri:
            notes.append("a resource without a uri or name is not served")
            continue
        published = _public({**listed, "name": spec.prefix + name}, private)
        read = _read_tool(spec, spec.prefix + name, upstream, plugin, "resources/read", private)
        item = RegisteredResource(uri, published, read, spec.name)
        _add(items, _subscribable(item, listed, listing, upstream, private), notes)


def _add_templates(
    items: dict[str, RegisteredResource],
    spec: ServerSpec,
    listing: Listing,
    plugin: PluginContext[Any],
    upstream: Upstream,
    private: str | None,
    notes: list[str],
) -> None:
    for listed in listing.templates:
        template, name = listed.get("uriTemplate"), listed.get("name")
        if not isinstance(template, str) or not isinstance(name, str) or not template:
            notes.append("a resource template without a uriTemplate or name is not served")
            continue
        try:
            from mcp.shared.uri_template import UriTemplate

            UriTemplate.parse(template)
        except ValueError:
            notes.append(f"resource template {template[:120]!r} is not an RFC 6570 template")
            continue
        published = _public({**listed, "name": spec.prefix + name}, private)
        read = _read_tool(spec, spec.prefix + name, upstream, plugin, "resources/read", private)
        item = RegisteredResource(
            template,
            published,
            read,
            spec.name,
            template=True,
            complete=_completer(upstream, {"type": "ref/resource", "uri": template}),
        )
        _add(items, _subscribable(item, listed, listing, upstream, private), notes)


def _mounted_prompts(
    spec: ServerSpec,
    listing: Listing,
    plugin: PluginContext[Any],
    upstream: Upstream,
    private: str | None,
    prompt_meta: Callable[[], dict[str, Any]] | None,
    notes: list[str],
) -> dict[str, RegisteredPrompt]:
    mounted: dict[str, RegisteredPrompt] = {}
    for listed in listing.prompts:
        original = listed.get("name")
        if not isinstance(original, str) or not original:
            notes.append("a prompt without a name is not served")
            continue
        made = _prompt(spec, listed, original, upstream, plugin, private, prompt_meta)
        if made.name in mounted:
            notes.append(f"it lists prompt {original!r} twice; it is served once")
        mounted[made.name] = made
    return mounted


def _subscribable(
    item: RegisteredResource,
    listed: dict[str, Any],
    listing: Listing,
    upstream: Upstream,
    private: str | None,
) -> RegisteredResource:
    """``item``, subscribable when its server declares ``resources.subscribe`` (a worker:
    and says so of this resource, as its plugin declared it); the gateway then subscribes the
    server to a URI while a client is (:meth:`Upstream.watch`)."""
    if not listing.subscribe:
        return item
    if private is not None:
        meta = listed.get("_meta")
        own = meta.get(private) if isinstance(meta, dict) else None
        if not isinstance(own, dict) or own.get("subscribable") is not True:
            return item
    item.subscribable = True
    item.watch = upstream.watch
    return item


def _add(items: dict[str, RegisteredResource], item: RegisteredResource, notes: list[str]) -> None:
    if item.key in items:
        notes.append(f"it lists {item.key[:120]!r} twice; it is served once")
    items[item.key] = item


def _public(listed: dict[str, Any], private: str | None) -> dict[str, Any]:
    """``listed`` without what its worker says to the gateway alone."""
    meta = listed.get("_meta")
    if private is None or not isinstance(meta, dict) or private not in meta:
        return listed
    rest = {k: v for k, v in meta.items() if k != private}
    out = {k: v for k, v in listed.items() if k != "_meta"}
    return {**out, "_meta": rest} if rest else out


def _read_tool(
    spec: ServerSpec,
    name: str,
    upstream: Upstream,
    plugin: PluginContext[Any],
    method: str,
    private: str | None,
    prompt: str | None = None,
    prompt_meta: Callable[[], dict[str, Any]] | None = None,
) -> RegisteredTool:
    """The read-tier call that asks the server: ``resources/read`` of the URI it is given
    (``{"uri": …}``), or ``prompts/get`` of ``prompt`` (``{"arguments": …}``); under the
    server's breaker and timeout (a worker's: as a plugin's in process)."""

    async def ask(args: Any, ctx: ToolContext[Any]) -> McpResult:
        given = dict(args)
        if prompt is None:
            params: dict[str, Any] = {"uri": given["uri"]}
        else:
            params = {"name": prompt, "arguments": given.get("arguments") or {}}
        extra = {private: prompt_meta()} if private and prompt_meta is not None else None
        result = await upstream.request(
            method, params, inputs=ctx.inputs, log=ctx.log, extra_meta=extra
        )
        return McpResult(_public(result, private))

    tool_spec: ToolSpec[Any] = ToolSpec(
        name=name,
        description=f"{method} of MCP server {spec.name}",
        input_model=_Passed,
        handler=ask,
        tier=Tier.READ,
        timeout=None if private else spec.timeout,
        backend=None if private else spec.name,
    )
    return RegisteredTool(
        spec=tool_spec,
        tier=Tier.READ,
        plugin=plugin,
        input_schema={"type": "object"},
        output_schema=None,
        description=tool_spec.description,
        annotations={"title": name},
    )


def _prompt(
    spec: ServerSpec,
    listed: dict[str, Any],
    original: str,
    upstream: Upstream,
    plugin: PluginContext[Any],
    private: str | None,
    prompt_meta: Callable[[], dict[str, Any]] | None,
) -> RegisteredPrompt:
    name = spec.prefix + original
    meta = listed.get("_meta")
    own = meta.get(private) if private and isinstance(meta, dict) else None
    own = own if isinstance(own, dict) else {}
    free_text = own.get("free_text")
    description = str(listed.get("description") or "")

    def unused(args: Any, ctx: PromptContext) -> str:  # the read tool gets it instead
        raise AssertionError("a mounted prompt is got through its read tool")

    arguments = [
        {
            "name": str(a.get("name")),
            "description": a.get("description"),
            "required": bool(a.get("required")),
        }
        for a in listed.get("arguments") or []
        if isinstance(a, dict) and isinstance(a.get("name"), str)
    ]
    prompt_spec = PromptSpec(
        name=name,
        description=description if private else description.strip() or name,
        arguments=_Passed,
        render=unused,
        title=listed.get("title") if isinstance(listed.get("title"), str) else None,
        # A worker's word here can only hide its prompt, or shorten one argument's text.
        requires=tuple(t for t in _strings(own.get("requires"))),
        free_text=free_text if isinstance(free_text, str) else None,
        complete=_completer(upstream, {"type": "ref/prompt", "name": original}),
    )
    read = _read_tool(spec, name, upstream, plugin, "prompts/get", private, original, prompt_meta)
    return RegisteredPrompt(prompt_spec, plugin, arguments, tool=read)


def _strings(value: Any) -> list[str]:
    return [v for v in value if isinstance(v, str)] if isinstance(value, list) else []


def _completer(upstream: Upstream, ref: dict[str, Any]) -> Any:
    """Asks the server to complete an argument of ``ref`` (a prompt or a template)."""

    async def complete(name: str, value: str, arguments: Any) -> list[str]:
        params: dict[str, Any] = {"ref": ref, "argument": {"name": name, "value": value}}
        if arguments:
            params["context"] = {"arguments": dict(arguments)}
        result = await upstream.request("completion/complete", params)
        values = (result.get("completion") or {}).get("values") or []
        return [str(v) for v in values if isinstance(v, str | int | float)]

    return complete
