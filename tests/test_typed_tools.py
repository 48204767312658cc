"""A plain tool is a typed async function: ``gateway.tool``, ``gateway.Plugin`` and
``gateway.Args``, loaded by a real gateway and called through the official MCP client."""

from __future__ import annotations

from typing import Annotated, Any, Literal

import pytest
from pydantic import BaseModel, ConfigDict, Field, SecretStr

from gateway import (
    Args,
    ErrorCode,
    GatewayError,
    Plugin,
    PluginContext,
    PromptContext,
    Resource,
    Tier,
    ToolContext,
    ToolSpec,
    env_field,
    hookimpl,
    tool,
)
from gateway.plugins import PluginState
from gateway.registry import RegistrationError
from gateway.testing import gateway_client, make_gateway, tool_error


class Point(BaseModel):
    x: int
    y: int


class Found(BaseModel):
    query: str
    got: dict[str, str]


Tag = Annotated[str, Field(min_length=1, max_length=20, pattern=r"^[a-z]+$")]


class FindArgs(BaseModel):
    model_config = ConfigDict(extra="forbid")
    query: str = Field(min_length=1, max_length=200, description="What to look for.")
    limit: int = Field(10, ge=1, le=50, description="At most this many.")
    tag: Tag | None = Field(None, description="Only with this tag.")
    tags: list[Tag] = Field(default_factory=list, max_length=5)
    near: Point | None = None
    order: Literal["new", "old"] = "new"


def _types(values: dict[str, Any]) -> dict[str, str]:
    return {name: type(value).__name__ for name, value in values.items()}


async def find_by_model(args: FindArgs, ctx: ToolContext[Any]) -> Found:
    return Found(query=args.query, got=_types(dict(args)))


BY_MODEL = ToolSpec(
    name="find_by_model",
    description="Find things by a query, a tag and a place.",
    input_model=FindArgs,
    output_model=Found,
    handler=find_by_model,
    tier=Tier.READ,
)


@tool(tier=Tier.READ)
async def find_typed(
    query: Annotated[str, Field(min_length=1, max_length=200, description="What to look for.")],
    limit: Annotated[int, Field(ge=1, le=50, description="At most this many.")] = 10,
    tag: Tag | None = Field(None, description="Only with this tag."),
    tags: list[Tag] = Field(default_factory=list, max_length=5),
    near: Point | None = None,
    order: Literal["new", "old"] = "new",
    *,
    ctx: ToolContext[Any],
) -> Found:
    """Find things by a query, a tag
    and a place.

    This second paragraph is for the reader of the code, not for the model.
    """
    assert isinstance(ctx, ToolContext) and ctx.tool == "find_typed"
    got = {"query": query, "limit": limit, "tag": tag, "tags": tags, "near": near, "order": order}
    return Found(query=query, got=_types(got))


def _gateway(tmp_path: Any, **objects: object) -> Any:
    return make_gateway(objects=dict(objects), entry_points=False, cwd=tmp_path)


@pytest.mark.anyio
async def test_a_typed_function_publishes_what_the_same_tool_declared_with_a_model_does(tmp_path):
    gw = _gateway(tmp_path, models=Plugin(tools=[BY_MODEL]), typed=Plugin(tools=[find_typed]))
    async with gw, gateway_client(gw) as client:
        listed = {t.name: t for t in (await client.list_tools()).tools}
    by_model, typed = listed["find_by_model"], listed["find_typed"]
    assert typed.input_schema == by_model.input_schema
    assert list(typed.input_schema["properties"]) == list(FindArgs.model_fields)
    assert typed.output_schema == by_model.output_schema
    assert typed.description == by_model.description  # the docstring's first paragraph
    assert typed.annotations.read_only_hint is True


@pytest.mark.anyio
async def test_the_function_gets_each_valid_argument_by_name_nested_models_as_models(tmp_path):
    gw = _gateway(tmp_path, typed=Plugin(tools=[find_typed]))
    async with gw, gateway_client(gw) as client:
        result = await client.call_tool(
            "find_typed", {"query": "q", "tags": ["a"], "near": {"x": 1, "y": 2}}
        )
    assert not result.is_error, result
    assert result.structured_content == {
        "query": "q",
        "got": {
            "query": "str",
            "limit": "int",
            "tag": "NoneType",
            "tags": "list",
            "near": "Point",
            "order": "str",
        },
    }


@pytest.mark.anyio
async def test_unknown_or_invalid_arguments_never_reach_the_function(tmp_path):
    calls: list[int] = []

    @tool(tier=Tier.READ)
    async def count(n: Annotated[int, Field(ge=1)]) -> dict[str, int]:
        """Count."""
        calls.append(n)
        return {"n": n}

    gw = _gateway(tmp_path, p=Plugin(tools=[count]))
    async with gw:
        unknown = await gw.call("count", {"n": 1, "m": 2})
        too_small = await gw.call("count", {"n": 0})
        missing = await gw.call("count", {})
        fine = await gw.call("count", {"n": 3})
    assert [r.code for r in (unknown, too_small, missing)] == ["VALIDATION_ERROR"] * 3
    assert "m: unknown field" in unknown.payload["error"]["message"]
    assert fine.payload == {"n": 3}
    assert calls == [3]


@pytest.mark.anyio
async def test_names_declared_inside_a_function_and_positional_only_parameters(tmp_path):
    class Box(BaseModel):  # only a local name: the string annotations below must find it
        size: int

    @tool(tier="read", name="boxed", description="Put a value in a box.")
    async def put(
        value: Annotated[str, Field(max_length=5)], /, box: Box, *, context: ToolContext[Any]
    ) -> Box:
        return Box(size=len(value) + box.size + len(context.tool))

    assert put.name == "boxed" and put.output_model is Box
    gw = _gateway(tmp_path, p=Plugin(tools=[put]))
    async with gw:
        result = await gw.call("boxed", {"value": "abc", "box": {"size": 10}})
    assert result.payload == {"size": 3 + 10 + len("boxed")}


@pytest.mark.parametrize(
    ("source", "reason"),
    [
        (
            "async def f(*names: str) -> dict: 'x'",
            "*names cannot become arguments of a tool; declare each argument as a parameter",
        ),
        (
            "async def f(**options: str) -> dict: 'x'",
            "**options cannot become arguments of a tool",
        ),
        ("async def f(a) -> dict: 'x'", "parameter 'a' has no type annotation"),
        (
            "async def f(ctx: int) -> dict: 'x'",
            "the parameter ctx receives the context: annotate it ToolContext",
        ),
        (
            "async def f(a: Nowhere) -> dict: 'x'",
            "the annotation of 'a' (Nowhere) cannot be resolved (NameError",
        ),
        (
            "async def f(a: int) -> int: 'x'",
            "returns int; return a pydantic model (it is published as the outputSchema), a dict, "
            "a ToolResult or InputRequired",
        ),
        (
            "async def f(_a: int) -> dict: 'x'",
            "parameter '_a' cannot be an argument: a name that starts with _ is private",
        ),
        (
            "async def f(model_config: int) -> dict: 'x'",
            "its parameters do not make an input model",
        ),
        (
            "async def f(c: ToolContext, ctx: ToolContext) -> dict: 'x'",
            "'c' and 'ctx' both ask for the context",
        ),
    ],
)
def test_what_cannot_be_a_tool_argument_is_refused_naming_the_function(source, reason):
    namespace: dict[str, Any] = {"__name__": "some_plugin"}
    exec(
        f"from __future__ import annotations\nfrom gateway import ToolContext\n{source}", namespace
    )
    with pytest.raises(RegistrationError) as refused:
        tool(tier=Tier.READ)(namespace["f"])
    assert str(refused.value).startswith("tool 'f' (function some_plugin.f): ")
    assert reason in str(refused.value)


def test_the_tier_given_positionally_is_refused_saying_how_to_give_it():
    with pytest.raises(RegistrationError) as refused:
        tool(Tier.READ)  # type: ignore[call-overload]
    assert str(refused.value) == (
        "@tool decorates a function, not Tier; its options are keywords (@tool(tier=...))"
    )


def _refusal(tmp_path: Any, spec: ToolSpec[Any]) -> str:
    gw = _gateway(tmp_path, p=Plugin(tools=[spec]))
    record = gw.plugin("p")
    assert record is not None and record.state is PluginState.FAILED
    assert not gw.tools("p")
    return str(record.reason)


def test_no_tier_no_mutation_or_a_blocking_function_is_refused_naming_the_function(tmp_path):
    @tool
    async def bare(a: int) -> dict[str, int]:
        """No tier: the FastMCP habit."""
        return {}

    @tool(tier=Tier.MUTATION)
    async def unstated(a: int) -> dict[str, int]:
        """A mutation without its Mutation."""
        return {}

    @tool(tier=Tier.READ)
    def blocking(a: int) -> dict[str, int]:  # type: ignore[type-var, arg-type]
        """Not async."""
        return {}

    @tool(tier=Tier.READ)
    async def silent(a: int) -> dict[str, int]:
        return {}

    where = "invalid tool declaration: tool '{0}' (function {1}.{2})"
    for spec, why in [
        (bare, "no tier; set tier='read' or tier='mutation'"),
        (unstated, "a mutation tool needs mutation=Mutation(consequence=..., requires=..."),
        (blocking, "must be an async function (async def)"),
        (silent, "no description; give the function a docstring (its first paragraph"),
    ]:
        fn = spec.function
        assert fn is not None
        reason = _refusal(tmp_path, spec)
        assert reason.startswith(where.format(spec.name, fn.__module__, fn.__qualname__)), reason
        assert why in reason


def test_a_spec_written_out_is_refused_in_the_words_it_always_was(tmp_path):
    spec = ToolSpec(
        name="plain", description="", input_model=FindArgs, handler=find_by_model, tier=None
    )
    assert _refusal(tmp_path, spec) == (
        "invalid tool declaration: tool 'plain': no tier; set tier='read' or tier='mutation'"
    )


TYPED_PLUGIN = """
from __future__ import annotations
from typing import Annotated
from pydantic import BaseModel, Field
from gateway import Plugin, Tier, ToolContext

plugin = Plugin()

class Greeting(BaseModel):
    text: str

@plugin.tool(tier=Tier.READ)
async def greet(name: Annotated[str, Field(max_length=20)], *, ctx: ToolContext) -> Greeting:
    '''Greet someone.'''
    return Greeting(text=f"hello {name}")
"""

STAR_ARGS_PLUGIN = """
from __future__ import annotations
from gateway import Plugin, Tier

plugin = Plugin()

@plugin.tool(tier=Tier.READ)
async def bad(*names: str) -> dict:
    '''Greet many.'''
    return {}
"""


@pytest.mark.anyio
async def test_an_entry_point_names_a_plugin_object_and_its_declaration_errors_skip_it(
    plugin_site, tmp_path
):
    plugin_site("gw-typed", {"typed": "gwfx_typed:plugin"}, {"gwfx_typed": TYPED_PLUGIN})
    plugin_site("gw-star", {"star": "gwfx_star:plugin"}, {"gwfx_star": STAR_ARGS_PLUGIN})
    gw = make_gateway(plugins=["typed", "star"], cwd=tmp_path)
    star = gw.plugin("star")
    assert star is not None and star.state is PluginState.FAILED
    assert star.reason == (
        "invalid tool declaration: tool 'bad' (function gwfx_star.bad): *names cannot become "
        "arguments of a tool; declare each argument as a parameter of its own"
    )
    async with gw:
        result = await gw.call("greet", {"name": "Ada"})
    assert result.payload == {"text": "hello Ada"}


class Settings(BaseModel):
    model_config = ConfigDict(extra="forbid")
    greeting: str = env_field("TYPED_GREETING", default="hello")
    url: str | None = env_field("TYPED_URL", default=None)
    token: SecretStr | None = env_field("TYPED_TOKEN", default=None)


def _settings_plugin() -> Plugin:
    plugin = Plugin(settings=Settings)

    @plugin.tool(tier=Tier.READ)
    async def greet(name: str, *, ctx: ToolContext[Settings]) -> dict[str, str]:
        """Greet someone with the configured word."""
        if name == "token":
            assert ctx.settings.token is not None
            raise GatewayError(ErrorCode.NOT_FOUND, f"no {ctx.settings.token.get_secret_value()}")
        return {"text": f"{ctx.settings.greeting} {name}"}

    @plugin.health_check
    async def greeting_set(ctx: PluginContext[Settings]) -> str:
        return ctx.settings.greeting

    @plugin.health_check(
        backend="remote",
        required=False,
        not_configured=lambda ctx: None if ctx.settings.url else "set TYPED_URL to enable it",
    )
    async def remote() -> None:
        return None

    @plugin.prompt(requires=("greet",))
    def welcome(
        who: Annotated[str, Field(description="Whom to welcome.")], *, ctx: PromptContext
    ) -> str:
        """Welcome someone with greet."""
        return f"call greet(name={who!r})" if ctx.has("greet") else "nothing to call"

    return plugin


@pytest.mark.anyio
async def test_settings_health_checks_and_prompts_are_declared_without_hooks(tmp_path):
    gw = make_gateway(
        objects={"p": _settings_plugin()},
        entry_points=False,
        cwd=tmp_path,
        env={"TYPED_GREETING": "ahoy", "TYPED_TOKEN": "tok-very-secret-1234"},
    )
    async with gw, gateway_client(gw) as client:
        greeted = await gw.call("greet", {"name": "Ada"})
        leaked = await gw.call("greet", {"name": "token"})
        health = {r.name: r for r in await gw.check_health(use_cache=False)}
        prompts = (await client.list_prompts()).prompts
        text = await client.get_prompt("welcome", {"who": "Ada"})
    assert greeted.payload == {"text": "ahoy Ada"}
    assert "tok-very-secret-1234" not in leaked.text()  # a SecretStr setting is a secret
    assert (health["greeting_set"].status, health["greeting_set"].detail) == ("ok", "ahoy")
    assert health["remote"].status == "unconfigured"
    assert "set TYPED_URL to enable it" in (health["remote"].detail or "")
    (welcome,) = [p for p in prompts if p.name == "welcome"]
    assert welcome.description == "Welcome someone with greet."
    assert [(a.name, a.description, a.required) for a in welcome.arguments or []] == [
        ("who", "Whom to welcome.", True)
    ]
    assert text.messages[0].content.text == "call greet(name='Ada')"


@pytest.mark.anyio
async def test_the_tools_of_a_plugin_serve_in_every_gateway_a_process_builds(tmp_path):
    # A generator is read once, when the plugin is declared; a gateway built later still
    # gets its tools.
    plugin = Plugin(tools=(spec for spec in [BY_MODEL]))
    for n in range(2):
        gw = _gateway(tmp_path / str(n), p=plugin)
        assert [t.name for t in gw.tools("p")] == ["find_by_model"]


@pytest.mark.anyio
async def test_tools_declared_after_the_plugin_are_its_tools_too(tmp_path):
    later: list[ToolSpec[Any]] = []
    plugin = Plugin(tools=later)
    later.append(BY_MODEL)
    assert [t.name for t in _gateway(tmp_path, p=plugin).tools("p")] == ["find_by_model"]


@pytest.mark.anyio
async def test_args_refuses_unknown_fields_and_publishes_no_description_of_its_own(tmp_path):
    async def nothing(args: Args, ctx: ToolContext[Any]) -> dict[str, bool]:
        return {"ok": True}

    # Args itself is the input model of a tool without arguments.
    spec = ToolSpec(
        name="nothing", description="Do nothing.", input_model=Args, handler=nothing, tier="read"
    )
    gw = _gateway(tmp_path, p=Plugin(tools=[spec]))
    async with gw, gateway_client(gw) as client:
        (listed,) = [t for t in (await client.list_tools()).tools if t.name == "nothing"]
        refused = await client.call_tool("nothing", {"x": 1})
    assert listed.input_schema == {
        "additionalProperties": False,
        "properties": {},
        "type": "object",
    }
    assert tool_error(refused)["code"] == "VALIDATION_ERROR"


class _Counter:
    def __init__(self) -> None:
        self.opened = self.closed = 0


COUNTER = Resource[_Counter]("counter")


class _CountingPlugin(Plugin):
    """A plugin with resources: its extra hooks are methods of a subclass."""

    @hookimpl
    async def open_resources(self, plugin: PluginContext[Any]) -> None:
        plugin.put(COUNTER, _Counter()).opened += 1

    @hookimpl
    async def close_resources(self, plugin: PluginContext[Any]) -> None:
        counter = plugin.get(COUNTER)
        assert counter is not None
        counter.closed += 1
        CLOSED.append(counter)


CLOSED: list[_Counter] = []


@pytest.mark.anyio
async def test_a_subclass_of_plugin_adds_the_hooks_it_needs(tmp_path):
    plugin = _CountingPlugin()

    @plugin.tool(tier=Tier.READ)
    async def opened(*, ctx: ToolContext[Any]) -> dict[str, int]:
        """How often the resources were opened."""
        counter = ctx.plugin.get(COUNTER)
        return {"opened": counter.opened if counter else -1}

    async with _gateway(tmp_path, p=plugin) as gw:
        result = await gw.call("opened", {})
    assert result.payload == {"opened": 1}
    assert [(c.opened, c.closed) for c in CLOSED] == [(1, 1)]
