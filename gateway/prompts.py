"""Workflows as MCP prompts: plugins register them like tools, the core checks and renders them.

A prompt is data too: a name, a description, a pydantic model of its arguments and a function
that writes the steps. Claude Code offers each as a slash command
(``/mcp__<server>__<prompt>``). The render function gets a :class:`PromptContext` that says which
tools this deployment really offers (installed, loaded, visible under its policy), so a prompt
names only tools that exist: under ``read_only`` it proposes no mutation, without the gitea
plugin it reads workspace files instead of git history.

Arguments arrive as strings (MCP sends prompt arguments as a string map); the model validates
and converts them as it does tool input, before the render function runs. Claude Code splits a
slash command's text on whitespace and hands each argument one word, dropping the words past
the last argument, so no server can receive a free-text argument whole from it. The model
sees the whole text anyway (in the same message, as ``<command-args>``), so for Claude Code a
prompt's ``free_text`` argument is rendered as a pointer to those words instead of the one
word that arrived (docs/claude-code.md). The rendered text is
cleaned of secrets; a render function that raises gives a generic error, its detail goes to the
log.

A render function may also return messages (:func:`gateway.content.message`: text, images,
embedded resources), or :class:`~gateway.inputs.InputRequired` to ask the client first (its
answers are then in ``ctx.inputs``). ``complete`` suggests values for an argument the user is
typing (``completion/complete``).
"""

from __future__ import annotations

import inspect
import logging
import re
from collections.abc import Awaitable, Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from pydantic import BaseModel, ValidationError

from .content import MAX_CONTENT_BYTES, Message, json_size, text
from .errors import ErrorCode, GatewayError, Sanitizer, format_validation_error
from .inputs import NO_INPUTS, InputRequired, Inputs
from .spec import TOOL_NAME, PluginContext

if TYPE_CHECKING:
    from .registry import RegisteredTool

log = logging.getLogger("gateway.prompts")

#: What a render function returns: the text of the user message, the messages, or a request
#: to ask the client first.
Rendered = str | Sequence[Message] | InputRequired
PromptRender = Callable[[Any, "PromptContext"], Rendered | Awaitable[Rendered]]
#: Suggests values for argument ``name`` from what the user typed so far (``value``) and the
#: arguments already given: ``complete(name, value, arguments)``, may be async.
Completer = Callable[[str, str, Mapping[str, str]], Sequence[str] | Awaitable[Sequence[str]]]
#: At most this many suggestions are sent (the protocol's limit).
MAX_COMPLETIONS = 100

MAX_PROMPT_CHARS = 20_000
_TOOL_WORD = re.compile(r"\b[a-z][a-z0-9_]{2,63}\b")


@dataclass(frozen=True)
class PromptSpec:
    """One workflow. ``arguments`` (a pydantic model with ``extra="forbid"``) is both what
    ``prompts/list`` publishes (name, description, required) and the validator; its fields must
    accept strings (``int`` fields are converted, as MCP sends strings). ``render(args, ctx)``
    (may be async) returns the text of the user message. ``requires``: tools without which the
    workflow makes no sense; the prompt is listed only when all of them are offered.
    ``free_text``: the argument holding free text (words and spaces), which must be the last.
    ``complete``: suggests values for an argument (see :data:`Completer`)."""

    name: str
    description: str
    arguments: type[BaseModel]
    render: PromptRender
    title: str | None = None
    requires: tuple[str, ...] = ()
    free_text: str | None = None
    complete: Completer | None = None


#: Clients known to split a slash command's text into one word per prompt argument.
WORD_SPLITTING_CLIENTS = frozenset({"claude-code"})


@dataclass(frozen=True)
class PromptContext:
    """What a render function may rely on: the plugin, and the tools this deployment offers."""

    plugin: PluginContext[Any]
    tools: frozenset[str]
    read_only: bool
    #: the client's answers when the prompt is asked for again after it asked (gateway.inputs)
    inputs: Inputs = NO_INPUTS

    def has(self, *names: str) -> bool:
        """Are all these tools offered (installed, loaded and visible under the policy)?"""
        return all(n in self.tools for n in names)


@dataclass
class RegisteredPrompt:
    spec: PromptSpec
    plugin: PluginContext[Any]
    arguments: list[dict[str, Any]]
    #: a mounted server's prompt: the read-tier call that gets it from the server (its
    #: ``render`` is not used)
    tool: RegisteredTool | None = None

    @property
    def name(self) -> str:
        return self.spec.name


def build_prompt(spec: object, plugin: PluginContext[Any]) -> RegisteredPrompt:
    """Check a prompt spec and derive its published arguments; raise ``ValueError`` with why."""
    if not isinstance(spec, PromptSpec):
        raise ValueError(f"register() takes a PromptSpec, got {type(spec).__name__}")
    if not isinstance(spec.name, str) or not TOOL_NAME.fullmatch(spec.name):
        raise ValueError(f"prompt name {spec.name!r} does not match ^[a-zA-Z0-9_-]{{1,64}}$")
    where = f"prompt {spec.name!r}"
    if not isinstance(spec.description, str) or not spec.description.strip():
        raise ValueError(f"{where}: description is empty")
    if not (isinstance(spec.arguments, type) and issubclass(spec.arguments, BaseModel)):
        raise ValueError(f"{where}: arguments must be a pydantic BaseModel subclass")
    if spec.arguments.model_config.get("extra") != "forbid":
        raise ValueError(f"{where}: arguments must set model_config = ConfigDict(extra='forbid')")
    if not callable(spec.render):
        raise ValueError(f"{where}: render must be a function")
    if spec.complete is not None and not callable(spec.complete):
        raise ValueError(f"{where}: complete must be a function")
    published = []
    for name, field in spec.arguments.model_fields.items():
        published.append(
            {
                "name": name,
                "description": (field.description or "").strip() or None,
                "required": field.is_required(),
            }
        )
    if spec.free_text is not None and (not published or published[-1]["name"] != spec.free_text):
        raise ValueError(f"{where}: free_text {spec.free_text!r} must name the last argument")
    return RegisteredPrompt(spec, plugin, published)


def command_words(prompt: RegisteredPrompt, arguments: dict[str, Any]) -> dict[str, Any]:
    """The arguments of a client that passed one word per argument, with the free-text one
    pointing at the user's whole text (which such a client shows the model with the prompt)."""
    name = prompt.spec.free_text
    if name is None or not isinstance(arguments.get(name), str):
        return arguments
    position = len(prompt.arguments)
    where = "after the command" if position == 1 else f"from word {position} on"
    return {
        **arguments,
        name: f"the user's own words {where}, in full, as in <command-args> above (Claude "
        "Code passes a prompt only their first word)",
    }


class PromptRegistry:
    """All prompts of all loaded plugins, by name; names are unique like tool names. A mounted
    server's prompts are claimed (:meth:`claim_all`): a name a plugin or another server has
    too is served by neither and reported, as a tool name is."""

    def __init__(self) -> None:
        self._prompts: dict[str, RegisteredPrompt] = {}
        self._claims: dict[str, list[RegisteredPrompt]] = {}
        #: each source's place in a listing (as the tool registry's ``order``)
        self.order: dict[str, int] = {}

    def add_all(self, prompts: list[RegisteredPrompt]) -> None:
        seen: set[str] = set()
        for p in prompts:
            other = self._prompts.get(p.name)
            if p.name in seen or other is not None:
                owner = other.plugin.name if other else "this plugin"
                raise ValueError(f"prompt {p.name!r} is already provided by {owner!r}")
            seen.add(p.name)
        for p in prompts:
            self._prompts[p.name] = p

    def claim_all(self, prompts: list[RegisteredPrompt]) -> None:
        """A mounted server's prompts (its earlier ones are removed first by the caller)."""
        for p in prompts:
            self._claims.setdefault(p.name, []).append(p)

    def remove_plugin(self, plugin: str) -> None:
        for name in [n for n, p in self._prompts.items() if p.plugin.name == plugin]:
            del self._prompts[name]
        for name in list(self._claims):
            self._claims[name] = [p for p in self._claims[name] if p.plugin.name != plugin]
            if not self._claims[name]:
                del self._claims[name]

    def _served(self) -> dict[str, RegisteredPrompt]:
        out = {n: p for n, p in self._prompts.items() if n not in self._claims}
        for name, claims in self._claims.items():
            if len(claims) == 1 and name not in self._prompts:
                out[name] = claims[0]
        last = len(self.order)
        return dict(sorted(out.items(), key=lambda kv: self.order.get(kv[1].plugin.name, last)))

    def withheld(self, plugin: str) -> dict[str, str]:
        """This source's prompts another's claim keeps from serving, and why."""
        out = {}
        for name, claims in self._claims.items():
            every = ([self._prompts[name]] if name in self._prompts else []) + claims
            if len(every) > 1 and any(p.plugin.name == plugin for p in every):
                owners = " and ".join(repr(p.plugin.name) for p in every)
                out[f"prompt {name}"] = (
                    f"{owners} both provide prompt {name!r}, so neither serves it"
                )
        return out

    def get(self, name: str) -> RegisteredPrompt | None:
        return self._served().get(name)

    def all(self) -> list[RegisteredPrompt]:
        return list(self._served().values())

    def offered(self, tools: Iterable[str]) -> list[RegisteredPrompt]:
        """The prompts whose required tools are all offered."""
        have = set(tools)
        return [p for p in self._served().values() if set(p.spec.requires) <= have]


async def render_prompt(
    prompt: RegisteredPrompt,
    arguments: dict[str, Any] | None,
    *,
    tools: frozenset[str],
    read_only: bool,
    sanitizer: Sanitizer,
    client: str | None = None,
) -> str:
    """Validate the arguments and render the prompt's text; ``GatewayError`` for bad input.
    ``client``: the client's name from its ``initialize`` (``clientInfo.name``), if known."""
    rendered = await render_messages(
        prompt, arguments, tools=tools, read_only=read_only, sanitizer=sanitizer, client=client
    )
    if isinstance(rendered, InputRequired) or len(rendered) != 1:
        raise GatewayError(ErrorCode.INTERNAL_ERROR, f"prompt {prompt.name!r} rendered no text")
    block = rendered[0]["content"]
    if block.get("type") != "text":
        raise GatewayError(ErrorCode.INTERNAL_ERROR, f"prompt {prompt.name!r} rendered no text")
    return str(block["text"])


async def render_messages(
    prompt: RegisteredPrompt,
    arguments: dict[str, Any] | None,
    *,
    tools: frozenset[str],
    read_only: bool,
    sanitizer: Sanitizer,
    client: str | None = None,
    inputs: Inputs = NO_INPUTS,
) -> list[dict[str, Any]] | InputRequired:
    """Validate the arguments and render the prompt: its messages as JSON (``PromptMessage``s;
    a text becomes one user message), or what it asks the client first. ``GatewayError`` for
    bad input, a render function that raises or returns what is not a prompt."""
    arguments = dict(arguments or {})
    if client in WORD_SPLITTING_CLIENTS:
        arguments = command_words(prompt, arguments)
    try:
        args = prompt.spec.arguments.model_validate(arguments)
    except ValidationError as exc:
        raise format_validation_error(exc) from None
    ctx = PromptContext(prompt.plugin, tools, read_only, inputs)
    try:
        rendered = prompt.spec.render(args, ctx)
        if inspect.isawaitable(rendered):
            rendered = await rendered
        if isinstance(rendered, InputRequired):
            return rendered.checked()
        return _messages(rendered, sanitizer)
    except GatewayError:
        raise
    except Exception as exc:
        log.error(
            "prompt=%s render failed: %s: %s", prompt.name, type(exc).__name__, sanitizer(str(exc))
        )
        raise not_rendered(prompt.name) from None


def not_rendered(name: str) -> GatewayError:
    """The client's error of a prompt whose render failed (or rendered too much): the detail
    is in the log only."""
    return GatewayError(
        ErrorCode.INTERNAL_ERROR,
        f"prompt {name!r} could not be rendered; the gateway log has the details",
    )


def _messages(rendered: object, sanitizer: Sanitizer) -> list[dict[str, Any]]:
    """What a render function returned as JSON messages: secrets redacted from the text,
    each text cut to :data:`MAX_PROMPT_CHARS`, the whole bounded by ``MAX_CONTENT_BYTES``."""
    if isinstance(rendered, str):
        rendered = [Message("user", text(rendered))]
    if not isinstance(rendered, Sequence) or not rendered:
        raise TypeError(f"render returned {type(rendered).__name__}, not a text or messages")
    out = []
    for item in rendered:
        if not isinstance(item, Message):
            raise TypeError(f"render returned a {type(item).__name__} among its messages")
        wire = item.wire()
        block = wire["content"]
        if block.get("type") == "text":
            block["text"] = sanitizer.redact_secrets(str(block["text"]))[:MAX_PROMPT_CHARS]
        elif sanitizer.checks_results:
            wire["content"] = sanitizer.redact_data(block)
        out.append(wire)
    if json_size(out) > MAX_CONTENT_BYTES:
        raise ValueError(f"the messages are over {MAX_CONTENT_BYTES // (1024 * 1024)} MB")
    return out


async def complete_argument(
    prompt: RegisteredPrompt, name: str, value: str, context: Mapping[str, str]
) -> list[str]:
    """The prompt's suggestions for argument ``name`` (none when it has no ``complete``)."""
    if prompt.spec.complete is None or name not in {a["name"] for a in prompt.arguments}:
        return []
    found = prompt.spec.complete(name, value, context)
    if inspect.isawaitable(found):
        found = await found
    return [str(v) for v in list(found)[:MAX_COMPLETIONS]]


def mentioned_tools(text: str, known: Iterable[str]) -> set[str]:
    """The tool names a text mentions, out of ``known`` (for tests and checks)."""
    names = set(known)
    return {w for w in _TOOL_WORD.findall(text) if w in names}
