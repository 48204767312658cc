"""The fixtures of the MCP conformance suite's server scenarios, written as a gateway plugin.

Each tool, resource and prompt below is one the suite (``@modelcontextprotocol/conformance``,
``server --requirements 2026-07-28``) calls by name, with the content it checks. They use only
the plugin API: :class:`~gateway.ToolResult` and the content helpers for results of any type,
:class:`~gateway.InputRequired` for input requests, ``@plugin.resource`` and
``@plugin.resource_template`` for resources, prompts returning messages. What they do not do
themselves (sealing request state, refusing a client that lacks a capability with -32021,
progress over an event stream, caching hints) the gateway does for every plugin.
"""

from __future__ import annotations

import base64
import json
from collections.abc import Mapping
from typing import Any

import anyio

from gateway import (
    InputRequired,
    Message,
    Plugin,
    PromptContext,
    ResourceContext,
    Tier,
    ToolContext,
    ToolResult,
    audio,
    elicit,
    embedded,
    image,
    list_roots,
    message,
    sample,
    text,
)

#: The suite's fixture data: a 1x1 PNG and a minimal WAV.
PNG = base64.b64decode(
    "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8DwHwAFBQIAX8jx0gAAAABJRU5ErkJggg=="
)
WAV = base64.b64decode("UklGRiYAAABXQVZFZm10IBAAAAABAAEAQB8AAAB9AAACABAAZGF0YQIAAAA=")

plugin = Plugin()


def form(**properties: str) -> dict[str, object]:
    """The JSON Schema of a form of required fields of the given types."""
    return {
        "type": "object",
        "properties": {name: {"type": kind} for name, kind in properties.items()},
        "required": list(properties),
    }


# -- tools: content of every type ----------------------------------------------------------------


@plugin.tool(tier=Tier.READ)
async def test_simple_text() -> ToolResult:
    """Returns a simple text response."""
    return ToolResult(["This is a simple text response for testing."])


@plugin.tool(tier=Tier.READ)
async def test_image_content() -> ToolResult:
    """Returns an image (a 1x1 PNG)."""
    return ToolResult([image(PNG, "image/png")])


@plugin.tool(tier=Tier.READ)
async def test_audio_content() -> ToolResult:
    """Returns audio (a minimal WAV)."""
    return ToolResult([audio(WAV, "audio/wav")])


@plugin.tool(tier=Tier.READ)
async def test_embedded_resource() -> ToolResult:
    """Returns an embedded text resource."""
    return ToolResult(
        [
            embedded(
                "test://embedded-resource",
                text="This is an embedded resource content.",
                mime_type="text/plain",
            )
        ]
    )


@plugin.tool(tier=Tier.READ)
async def test_multiple_content_types() -> ToolResult:
    """Returns text, an image and an embedded resource together."""
    return ToolResult(
        [
            text("Multiple content types test:"),
            image(PNG, "image/png"),
            embedded(
                "test://mixed-content-resource",
                text=json.dumps({"test": "data", "value": 123}, separators=(",", ":")),
                mime_type="application/json",
            ),
        ]
    )


@plugin.tool(tier=Tier.READ)
async def test_error_handling() -> ToolResult:
    """Returns an error result (a tool error, not a protocol error)."""
    return ToolResult(["This tool intentionally returns an error for testing"], is_error=True)


@plugin.tool(tier=Tier.READ)
async def test_tool_with_progress(*, ctx: ToolContext[Any]) -> ToolResult:
    """Reports progress 0, 50 and 100 of 100, then returns."""
    for step in (0, 50, 100):
        await ctx.progress(step, 100, f"step {step}")
        if step < 100:
            await anyio.sleep(0.05)
    return ToolResult(["Progress complete"])


@plugin.tool(tier=Tier.READ)
async def test_logging_tool(*, ctx: ToolContext[Any]) -> ToolResult:
    """Sends log messages at info and warning (only a client that asked for them gets them)."""
    await ctx.log("info", "the logging tool started")
    await ctx.log("warning", "the logging tool warns")
    return ToolResult(["Logging complete"])


# -- tools: input requests --------------------------------------------------------------------------


@plugin.tool(tier=Tier.READ)
async def test_missing_capability(*, ctx: ToolContext[Any]) -> ToolResult | InputRequired:
    """Needs the client's model (sampling): refused with -32021 when the client cannot."""
    said = ctx.inputs.answer("sample")
    if said is None:
        return InputRequired({"sample": sample("Say hello.", max_tokens=20)})
    return ToolResult([f"The model said: {_sampled(said)}"])


@plugin.tool(tier=Tier.READ)
async def test_streaming_elicitation(*, ctx: ToolContext[Any]) -> ToolResult | InputRequired:
    """Asks the user a question (never with a request of its own on the stream)."""
    answer = ctx.inputs.accepted("user_name")
    if answer is None:
        return InputRequired({"user_name": elicit("What is your name?", form(name="string"))})
    return ToolResult([f"Hello, {answer.get('name')}!"])


@plugin.tool(tier=Tier.READ)
async def test_input_required_result_elicitation(
    *, ctx: ToolContext[Any]
) -> ToolResult | InputRequired:
    """Asks the user's name, then greets them."""
    answer = ctx.inputs.accepted("user_name")
    if answer is None:
        return InputRequired({"user_name": elicit("What is your name?", form(name="string"))})
    return ToolResult([f"Hello, {answer.get('name')}!"])


@plugin.tool(tier=Tier.READ)
async def test_input_required_result_sampling(
    *, ctx: ToolContext[Any]
) -> ToolResult | InputRequired:
    """Asks the client's model a question, then returns its answer."""
    said = ctx.inputs.answer("capital_question")
    if said is None:
        question = sample("What is the capital of France?", max_tokens=100)
        return InputRequired({"capital_question": question})
    return ToolResult([f"The model answered: {_sampled(said)}"])


@plugin.tool(tier=Tier.READ)
async def test_input_required_result_list_roots(
    *, ctx: ToolContext[Any]
) -> ToolResult | InputRequired:
    """Asks for the client's roots, then names them."""
    found = ctx.inputs.answer("client_roots")
    if found is None:
        return InputRequired({"client_roots": list_roots()})
    return ToolResult([f"Roots: {', '.join(_roots(found)) or 'none'}"])


@plugin.tool(tier=Tier.READ)
async def test_input_required_result_request_state(
    *, ctx: ToolContext[Any]
) -> ToolResult | InputRequired:
    """Asks for a confirmation with request state; finishes when both come back."""
    if ctx.inputs.state == "request-state-v1" and ctx.inputs.answer("confirm") is not None:
        return ToolResult(["state-ok: the request state came back unchanged"])
    confirm = elicit("Please confirm", form(ok="boolean"))
    return InputRequired({"confirm": confirm}, state="request-state-v1")


@plugin.tool(tier=Tier.READ)
async def test_input_required_result_multiple_inputs(
    *, ctx: ToolContext[Any]
) -> ToolResult | InputRequired:
    """Asks the user, the model and the roots at once."""
    keys = ("user_name", "greeting", "client_roots")
    if ctx.inputs.state == "multiple-inputs-v1" and all(ctx.inputs.answer(k) for k in keys):
        return ToolResult(["All three inputs arrived"])
    return InputRequired(
        {
            "user_name": elicit("What is your name?", form(name="string")),
            "greeting": sample("Generate a greeting", max_tokens=50),
            "client_roots": list_roots(),
        },
        state="multiple-inputs-v1",
    )


@plugin.tool(tier=Tier.READ)
async def test_input_required_result_multi_round(
    *, ctx: ToolContext[Any]
) -> ToolResult | InputRequired:
    """Asks in two rounds, each with state of its own, then finishes."""
    inputs = ctx.inputs
    if inputs.state == "multi-round-2" and inputs.accepted("step2") is not None:
        return ToolResult([f"Favourite colour: {inputs.accepted('step2')}"])
    if inputs.state == "multi-round-1" and inputs.accepted("step1") is not None:
        step2 = elicit("Step 2: What is your favorite color?", form(color="string"))
        return InputRequired({"step2": step2}, state="multi-round-2")
    step1 = elicit("Step 1: What is your name?", form(name="string"))
    return InputRequired({"step1": step1}, state="multi-round-1")


@plugin.tool(tier=Tier.READ)
async def test_input_required_result_tampered_state(
    *, ctx: ToolContext[Any]
) -> ToolResult | InputRequired:
    """Asks with request state; state changed on the way is refused by the gateway."""
    if ctx.inputs.state == "tamper-check-v1":
        return ToolResult(["The request state was intact"])
    return InputRequired(
        {"confirm": elicit("Confirm?", form(ok="boolean"))}, state="tamper-check-v1"
    )


@plugin.tool(tier=Tier.READ)
async def test_input_required_result_capabilities(
    *, ctx: ToolContext[Any]
) -> ToolResult | InputRequired:
    """Asks only what the client declared it can answer."""
    inputs = ctx.inputs
    wanted = {
        "user_name": ("elicitation", elicit("What is your name?", form(name="string"))),
        "greeting": ("sampling", sample("Generate a greeting", max_tokens=50)),
        "client_roots": ("roots", list_roots()),
    }
    asked = {k: r for k, (need, r) in wanted.items() if inputs.can(need) and not inputs.answer(k)}
    if asked:
        return InputRequired(asked)
    return ToolResult(["Asked only what the client can answer"])


def _sampled(answer: Mapping[str, object]) -> str:
    content = answer.get("content")
    said = content.get("text") if isinstance(content, dict) else None
    return said if isinstance(said, str) else "(no text)"


def _roots(answer: Mapping[str, object]) -> list[str]:
    roots = answer.get("roots")
    return (
        [str(r.get("uri")) for r in roots if isinstance(r, dict)] if isinstance(roots, list) else []
    )


# -- resources --------------------------------------------------------------------------------------


@plugin.resource("test://static-text", mime_type="text/plain")
async def static_text() -> str:
    """A static text resource."""
    return "This is the content of the static text resource."


@plugin.resource("test://static-binary", mime_type="image/png")
async def static_binary() -> bytes:
    """A static binary resource (a 1x1 PNG)."""
    return PNG


@plugin.resource_template(
    "test://template/{id}/data",
    mime_type="application/json",
    complete=lambda name, value, arguments: [v for v in ("123", "456") if v.startswith(value)],
)
async def template_data(id: str, ctx: ResourceContext[Any]) -> str:
    """Data for any id."""
    return json.dumps({"id": id, "templateTest": True, "data": f"Data for ID: {id}"})


# -- prompts ----------------------------------------------------------------------------------------


@plugin.prompt
def test_simple_prompt() -> str:
    """A simple prompt without arguments."""
    return "This is a simple prompt for testing."


def _suggest(name: str, value: str, arguments: Mapping[str, str]) -> list[str]:
    return [v for v in ("test", "testValue1", "testing") if v.startswith(value)]


@plugin.prompt(complete=_suggest)
def test_prompt_with_arguments(arg1: str, arg2: str) -> str:
    """A prompt with two required arguments."""
    return f"Prompt with arguments: arg1='{arg1}', arg2='{arg2}'"


@plugin.prompt
def test_prompt_with_embedded_resource(resourceUri: str) -> list[Message]:
    """A prompt that embeds the resource it is given."""
    resource = embedded(
        resourceUri, text="Embedded resource content for testing.", mime_type="text/plain"
    )
    return [message(resource), message("Please process the embedded resource above.")]


@plugin.prompt
def test_prompt_with_image() -> list[Message]:
    """A prompt with an image."""
    return [message(image(PNG, "image/png")), message("Please analyze the image above.")]


@plugin.prompt
def test_input_required_result_prompt(*, ctx: PromptContext) -> list[Message] | InputRequired:
    """A prompt that asks the user for context first."""
    answer = ctx.inputs.accepted("user_context")
    if answer is None:
        question = elicit("What context should the prompt use?", form(context="string"))
        return InputRequired({"user_context": question})
    return [message(f"Use this context: {answer.get('context')}")]
