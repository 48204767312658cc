"""Tool registry: checks each spec once and derives what MCP publishes from it.

Everything a client sees about a tool (``inputSchema``, ``outputSchema``, annotations, the
``MUTATION:`` paragraph) is computed here from the :class:`~gateway.spec.ToolSpec`, so it
cannot drift from what the pipeline enforces.
"""

from __future__ import annotations

import inspect
import json
import weakref
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol

from pydantic import BaseModel, ValidationError
from pydantic.json_schema import GenerateJsonSchema

from .errors import ARGUMENTS, encodable, field_errors, invalid
from .inputs import NO_INPUTS, Inputs
from .spec import (
    TOOL_NAME,
    LogFn,
    Mutation,
    PluginContext,
    ProgressFn,
    Tier,
    ToolContext,
    ToolSpec,
    declared_at,
)
from .spec import RegistrationError as RegistrationError

if TYPE_CHECKING:
    from .schemacache import SchemaCache


#: Claude Code cuts a tool description (MUTATION paragraph included) after this many
#: characters, and drops a tool whose full name ``mcp__<server>__<tool>`` is longer than
#: MAX_FULL_NAME characters.
MAX_DESCRIPTION_CHARS = 2048
MAX_FULL_NAME = 128


def client_server_name(name: str) -> str:
    """The server name as Claude Code uses it in tool names and permission rules."""
    return "".join(ch if ch.isascii() and (ch.isalnum() or ch in "_-") else "_" for ch in name)


def full_tool_name(server: str, tool: str) -> str:
    """``mcp__<server>__<tool>``: how Claude Code names the tool (and its permission rule)."""
    return f"mcp__{client_server_name(server)}__{tool}"


class ListedTool(Protocol):
    """A tool as ``tools/list`` shows it: a :class:`RegisteredTool`, or an MCP client's ``Tool``."""

    @property
    def name(self) -> str: ...
    @property
    def description(self) -> str | None: ...
    @property
    def input_schema(self) -> dict[str, Any]: ...


def json_bytes(value: Any) -> int:
    """UTF-8 bytes of ``value`` as compact JSON, the way a client encodes it."""
    return len(json.dumps(value, separators=(",", ":"), ensure_ascii=False).encode())


def context_bytes(tool: ListedTool) -> int:
    """What a tool costs the model on every turn: the bytes of its name, description and
    ``inputSchema`` as compact JSON (Claude Code shows the model nothing else of a tool)."""
    return json_bytes(
        {"name": tool.name, "description": tool.description, "inputSchema": tool.input_schema}
    )


@dataclass
class RegisteredTool:
    spec: ToolSpec
    tier: Tier
    plugin: PluginContext[Any]
    input_schema: dict[str, Any]
    output_schema: dict[str, Any] | None
    description: str
    annotations: dict[str, Any]
    meta: dict[str, Any] | None = None
    extra: dict[str, Any] = field(default_factory=dict)
    #: the compiled validator of ``input_schema`` (built on the first call)
    _checker: Any = field(default=None, repr=False, compare=False)

    @property
    def name(self) -> str:
        return self.spec.name

    @property
    def backend(self) -> str | None:
        """The backend whose breaker and configuration gate the tool's calls."""
        return self.spec.backend_name

    @property
    def timeout(self) -> float | None:
        return self.spec.timeout

    @property
    def output_model(self) -> type[BaseModel] | None:
        return self.spec.output_model

    def validate(self, arguments: Any) -> Any:
        """``arguments`` as the tool takes them, checked against the published ``inputSchema``
        first (see :func:`check_arguments`); ``VALIDATION_ERROR`` naming each field and rule."""
        if self._checker is None:
            self._checker = compile_schema(self.input_schema)
        return check_arguments(self._checker, self.spec.input_model, arguments)

    async def invoke(
        self,
        args: Any,
        correlation_id: str,
        progress: ProgressFn,
        *,
        inputs: Inputs = NO_INPUTS,
        log: LogFn | None = None,
    ) -> Any:
        """Run the tool's own code with valid ``args`` (``inputs``: the client's answers when
        the call is made again after it asked; ``log``: sends the client log messages)."""
        ctx: ToolContext[Any] = ToolContext(
            self.plugin, self.spec.name, correlation_id, progress, inputs
        )
        if log is not None:
            ctx._log = log
        return await self.spec.handler(args, ctx)


# -- arguments, checked by the published schema itself -------------------------------------------

#: Nesting no tool needs; deeper arguments (a 100,000-deep list) are refused before any
#: recursive code (validation, encoding, a handler) sees them.
MAX_DEPTH = 64
#: JSON types pydantic's lax mode takes from other JSON types (``"5"`` or ``true`` for an
#: integer): where the schema says one of these, its own word on a wrong type is the answer.
_LAX = frozenset({"integer", "number", "boolean"})
_TYPE_RULES = {
    "integer": ("int_type", "Input should be a valid integer"),
    "number": ("float_type", "Input should be a valid number"),
    "boolean": ("bool_type", "Input should be a valid boolean"),
    "string": ("string_type", "Input should be a valid string"),
    "object": ("dict_type", "Input should be a valid object"),
    "array": ("list_type", "Input should be a valid array"),
}
_LIMITS = {
    "minimum": ("greater_than_equal", "Input should be greater than or equal to {}"),
    "maximum": ("less_than_equal", "Input should be less than or equal to {}"),
    "exclusiveMinimum": ("greater_than", "Input should be greater than {}"),
    "exclusiveMaximum": ("less_than", "Input should be less than {}"),
    "multipleOf": ("multiple_of", "Input should be a multiple of {}"),
    "minLength": ("string_too_short", "String should have at least {} characters"),
    "maxLength": ("string_too_long", "String should have at most {} characters"),
    "minItems": ("too_short", "List should have at least {} items"),
    "maxItems": ("too_long", "List should have at most {} items"),
    "minProperties": ("too_short", "Object should have at least {} properties"),
    "maxProperties": ("too_long", "Object should have at most {} properties"),
    "pattern": ("string_pattern_mismatch", "String should match pattern '{}'"),
}


def compile_schema(schema: dict[str, Any]) -> Any:
    """The validator of a published ``inputSchema``: by the JSON Schema draft it declares in
    ``$schema`` (2020-12 when none). Formats are annotations, as the drafts say by default.
    ``jsonschema`` is imported here, on the first call, not while the gateway starts."""
    from jsonschema.validators import Draft202012Validator, validator_for

    cls = validator_for(schema, default=Draft202012Validator)
    return cls(schema)


def check_arguments(checker: Any, model: type[BaseModel] | None, arguments: Any) -> Any:
    """``arguments`` checked against the published schema, then built into ``model`` (when the
    tool has one), or a ``VALIDATION_ERROR`` naming every field and rule, never a value.

    The schema is the contract: pydantic's lax mode would take ``"5"`` or ``true`` for an
    integer, and an optional argument is published without ``null`` (see
    :func:`optional_without_null`) while its model takes ``None``. Where both refuse a field,
    the model's words are used (they are the ones clients were written against)."""
    if arguments is None:
        arguments = {}
    if not isinstance(arguments, dict):
        raise invalid(
            [{"field": ARGUMENTS, "rule": "dict_type", "message": "must be a JSON object"}]
        )
    deep = too_deep(arguments)
    if deep is not None:
        raise invalid(
            [
                {
                    "field": deep,
                    "rule": "too_deep",
                    "message": f"nested deeper than {MAX_DEPTH} levels",
                }
            ]
        )
    refused = list(_schema_errors(checker, arguments))
    if model is None:
        if refused:
            raise invalid(_ordered(refused, arguments))
        return arguments
    try:
        args = model.model_validate(arguments)
    except ValidationError as exc:
        by_model = field_errors(exc)
    else:
        if not refused:
            return args
        by_model = []
    lax = [f for f in refused if f.pop("lax", "")]
    said = {f["field"] for f in lax}
    fields = lax + [f for f in by_model if f["field"] not in said]
    said |= {f["field"] for f in by_model}
    fields += [f for f in refused if f["field"] not in said]
    raise invalid(_ordered(fields, arguments))


def _ordered(fields: list[dict[str, str]], arguments: dict[str, Any]) -> list[dict[str, str]]:
    """In the order the client wrote the arguments (missing ones last), each field once."""
    order = {key: i for i, key in enumerate(arguments)}
    seen: set[tuple[str, str]] = set()
    unique = []
    for f in fields:
        key = (f["field"], f["rule"])
        if key not in seen:
            seen.add(key)
            unique.append(f)
    unique.sort(key=lambda f: _position(f["field"], order))
    return unique


def _position(path: str, order: dict[str, int]) -> tuple[int, list[tuple[int, int | str]]]:
    top, *rest = path.split(".")
    steps: list[tuple[int, int | str]] = [(0, int(p)) if p.isdigit() else (1, p) for p in rest]
    return order.get(top, len(order)), steps


def _schema_errors(checker: Any, arguments: dict[str, Any]) -> Any:
    """What the schema refuses, as ``{field, rule, message}`` (``lax`` marks a wrong type where
    pydantic would have coerced), in the words pydantic uses for the same rules."""
    for err in checker.iter_errors(arguments):
        path = [str(p) for p in err.absolute_path]
        where = ".".join(path) or ARGUMENTS
        kind, value = err.validator, err.validator_value
        if kind == "type":
            expected = {value} if isinstance(value, str) else set(value)
            if err.instance is None:
                yield {
                    "field": where,
                    "rule": "null_not_allowed",
                    "message": "null is not allowed here; leave the field out to use its default",
                }
                continue
            rule, message = _TYPE_RULES.get(
                min(expected - {"null"}, default="string"), _TYPE_RULES["string"]
            )
            lax = "1" if expected & _LAX and "string" not in expected else ""
            yield {"field": where, "rule": rule, "message": message, "lax": lax}
        elif kind == "required" and isinstance(err.instance, dict):
            for name in value:
                if name not in err.instance:
                    field_name = ".".join([*path, str(name)])
                    yield {
                        "field": field_name,
                        "rule": "missing",
                        "message": "required field is missing",
                    }
        elif kind == "additionalProperties" and isinstance(err.instance, dict):
            known = set(err.schema.get("properties", {}))
            for name in err.instance:
                if name not in known:
                    yield {
                        "field": ".".join([*path, str(name)]),
                        "rule": "extra_forbidden",
                        "message": "unknown field; it is not a parameter of this tool",
                    }
        elif kind in ("enum", "const"):
            options = value if kind == "enum" else [value]
            shown = [json.dumps(o, ensure_ascii=False)[:40] for o in options[:10]]
            more = " or another allowed value" if len(options) > 10 else ""
            said = shown[0] if len(shown) == 1 else ", ".join(shown[:-1]) + " or " + shown[-1]
            yield {
                "field": where,
                "rule": "enum" if kind == "enum" else "literal_error",
                "message": f"Input should be {said}{more}",
            }
        elif kind in _LIMITS:
            rule, template = _LIMITS[kind]
            yield {"field": where, "rule": rule, "message": template.format(str(value)[:80])}
        else:
            yield {
                "field": where,
                "rule": str(kind),
                "message": f"does not satisfy the schema's {kind} rule",
            }


def too_deep(value: Any, limit: int = MAX_DEPTH) -> str | None:
    """The top-level argument nested deeper than ``limit`` levels, if any (iterative: a
    100,000-deep value cannot exhaust the stack here)."""
    if not isinstance(value, dict):
        return None
    for key, top in value.items():
        stack: list[tuple[Any, int]] = [(top, 1)]
        while stack:
            node, depth = stack.pop()
            if depth > limit:
                return str(key)
            if isinstance(node, dict):
                stack.extend((v, depth + 1) for v in node.values())
            elif isinstance(node, list):
                stack.extend((v, depth + 1) for v in node)
    return None


_NAME_MAPS = ("properties", "$defs", "definitions", "patternProperties")
_DEF_PREFIX = "#/$defs/"


def _refs(node: Any) -> set[str]:
    """The definitions ``node`` refers to, however deep (one set filled as the walk goes:
    building a set per node and joining them took most of a start's schema compaction)."""
    found: set[str] = set()
    todo = [node]
    while todo:
        item = todo.pop()
        if isinstance(item, dict):
            ref = item.get("$ref")
            if isinstance(ref, str):
                found.add(ref.removeprefix(_DEF_PREFIX))
            todo.extend(item.values())
        elif isinstance(item, list):
            todo.extend(item)
    return found


def _recursive_defs(defs: dict[str, Any]) -> set[str]:
    """Definitions that reach themselves through ``$ref``s: those cannot be inlined."""
    direct = {name: _refs(body) for name, body in defs.items()}
    recursive = set()
    for start in defs:
        seen, todo = set(), list(direct[start])
        while todo:
            name = todo.pop()
            if name == start:
                recursive.add(start)
                break
            if name in seen or name not in direct:
                continue
            seen.add(name)
            todo.extend(direct[name])
    return recursive


def optional_without_null(schema: Any) -> Any:
    """For *input* schemas: an optional argument whose default is ``null`` is published as its
    type alone (``{"type": "string"}``, not ``["string", "null"]`` with ``"default": null``).
    Leaving the argument out is how a client says "none"; ``null`` is still accepted by the
    model that validates it. The two branches cost the model ~40 bytes per such argument on
    every turn. Output schemas keep ``null``: strict clients check results against them."""
    if isinstance(schema, list):
        return [optional_without_null(v) for v in schema]
    if not isinstance(schema, dict):
        return schema
    out = {k: optional_without_null(v) for k, v in schema.items()}
    props = out.get("properties")
    if isinstance(props, dict):
        out["properties"] = {name: _drop_null(prop) for name, prop in props.items()}
    return out


def _drop_null(prop: Any) -> Any:
    if not isinstance(prop, dict) or "default" not in prop or prop["default"] is not None:
        return prop
    kinds = prop.get("type")
    if isinstance(kinds, list) and "null" in kinds and len(kinds) == 2:
        rest = {k: v for k, v in prop.items() if k != "default"}
        rest["type"] = next(k for k in kinds if k != "null")
        return rest
    branches = prop.get("anyOf")
    if isinstance(branches, list) and len(branches) == 2 and {"type": "null"} in branches:
        kept = next(b for b in branches if b != {"type": "null"})
        if isinstance(kept, dict):
            rest = {k: v for k, v in prop.items() if k not in ("default", "anyOf")}
            return {**kept, **rest}
    return prop


def compact_schema(schema: dict[str, Any]) -> dict[str, Any]:
    """The same JSON Schema, smaller and cheaper to check, for every published schema.

    - pydantic's generated ``title`` keywords ("X", "EchoArgs") go: they repeat field and model
      names and tell a client nothing (keys of ``properties`` stay: a field may be ``title``);
    - ``$ref``s to non-recursive ``$defs`` are inlined: strict clients (the official SDK checks
      every result against ``outputSchema``) resolve them on every check, and some clients
      handle ``$ref`` poorly;
    - ``anyOf`` of plain types becomes a type list (``["string", "null"]``).
    """
    defs = schema.get("$defs", {}) if isinstance(schema.get("$defs"), dict) else {}
    keep = _recursive_defs(defs)

    def walk(node: Any) -> Any:
        if isinstance(node, list):
            return [walk(v) for v in node]
        if not isinstance(node, dict):
            return node
        ref = node.get("$ref")
        if isinstance(ref, str) and ref.startswith(_DEF_PREFIX):
            name = ref.removeprefix(_DEF_PREFIX)
            if name in defs and name not in keep:
                rest = {k: v for k, v in node.items() if k != "$ref"}
                return walk({**defs[name], **rest})
        out: dict[str, Any] = {}
        for key, value in node.items():
            if key == "$defs":
                continue
            if key in _NAME_MAPS and isinstance(value, dict):
                out[key] = {name: walk(sub) for name, sub in value.items()}
            elif key == "title" and isinstance(value, str):
                continue
            else:
                out[key] = walk(value)
        branches = out.get("anyOf")
        if isinstance(branches, list) and all(
            isinstance(b, dict) and set(b) == {"type"} and isinstance(b["type"], str)
            for b in branches
        ):
            del out["anyOf"]
            out["type"] = [b["type"] for b in branches]
        return out

    result: dict[str, Any] = walk(schema)
    if keep:
        result["$defs"] = {name: walk(defs[name]) for name in sorted(keep)}
    return result


def mutation_paragraph(m: Mutation) -> str:
    reversible = "reversible" if m.reversible else "NOT reversible"
    kind = "destructive" if m.destructive else "not destructive"
    idem = "idempotent" if m.idempotent else "not idempotent"
    consequence = m.consequence.strip().rstrip(".")
    requires = m.requires.strip().rstrip(".")
    return (
        f"MUTATION: {consequence}. Requires: {requires}. "
        f"This change is {reversible}; {kind}; {idem}. Ask the user to confirm before calling."
    )


def validate_spec(spec: object) -> Tier:
    """Check a spec and return its tier; raise :class:`RegistrationError` with the reason."""
    if not isinstance(spec, ToolSpec):
        raise RegistrationError(f"register() takes a ToolSpec, got {type(spec).__name__}")
    if not isinstance(spec.name, str) or not TOOL_NAME.fullmatch(spec.name):
        raise RegistrationError(f"tool name {spec.name!r} does not match ^[a-zA-Z0-9_-]{{1,64}}$")
    where = declared_at("tool", spec.name, spec.function)
    if spec.tier is None:
        raise RegistrationError(f"{where}: no tier; set tier='read' or tier='mutation'")
    try:
        tier = Tier(spec.tier)
    except ValueError:
        raise RegistrationError(
            f"{where}: unknown tier {spec.tier!r}; use 'read' or 'mutation'"
        ) from None
    if not isinstance(spec.description, str) or not spec.description.strip():
        if spec.function is not None:
            raise RegistrationError(
                f"{where}: no description; give the function a docstring (its first "
                "paragraph is the description) or pass description="
            )
        raise RegistrationError(f"{where}: description is empty")
    if not (isinstance(spec.input_model, type) and issubclass(spec.input_model, BaseModel)):
        raise RegistrationError(f"{where}: input_model must be a pydantic BaseModel subclass")
    if spec.input_model.model_config.get("extra") != "forbid":
        raise RegistrationError(
            f"{where}: input_model must set model_config = ConfigDict(extra='forbid') "
            "so unknown arguments are rejected"
        )
    if spec.output_model is not None and not (
        isinstance(spec.output_model, type) and issubclass(spec.output_model, BaseModel)
    ):
        raise RegistrationError(f"{where}: output_model must be a pydantic BaseModel subclass")
    if spec.function is not None and not inspect.iscoroutinefunction(spec.function):
        raise RegistrationError(f"{where}: must be an async function (async def)")
    if not inspect.iscoroutinefunction(spec.handler):
        raise RegistrationError(f"{where}: handler must be an async function")
    if spec.timeout is not None and not (spec.timeout > 0):
        raise RegistrationError(f"{where}: timeout must be positive")
    if tier is Tier.MUTATION:
        m = spec.mutation
        if not isinstance(m, Mutation):
            raise RegistrationError(
                f"{where}: a mutation tool needs mutation=Mutation(consequence=..., requires=..., "
                "reversible=..., destructive=..., idempotent=...)"
            )
        if not m.consequence.strip() or not m.requires.strip():
            raise RegistrationError(f"{where}: Mutation.consequence and .requires must be stated")
        for flag in ("reversible", "destructive", "idempotent"):
            if not isinstance(getattr(m, flag), bool):
                raise RegistrationError(f"{where}: Mutation.{flag} must be True or False")
    elif spec.mutation is not None:
        raise RegistrationError(f"{where}: a read tool cannot carry a Mutation")
    return tier


#: A model class's compact schema, generated once per process: a process that builds many
#: gateways from the same plugin modules (the test kit, an embedder) pays for it once. A class
#: is immutable once created; a model built per registration is a new class, never a hit.
_SCHEMAS: weakref.WeakKeyDictionary[type[BaseModel], dict[str, Any]] = weakref.WeakKeyDictionary()


class _Schemas(GenerateJsonSchema):
    """pydantic's schema generator, without a TypeAdapter built per default value where the
    value is its own JSON (a string, an integer, a boolean or null): the same schemas, a fifth
    less time to generate them (the work of a start that finds no schema in the cache)."""

    def encode_default(self, dft: Any) -> Any:
        if type(dft) in _OWN_JSON:
            return dft
        return super().encode_default(dft)


_OWN_JSON = (str, int, bool, type(None))


def _shared_schema(model: type[BaseModel], cache: SchemaCache | None = None) -> dict[str, Any]:
    """``model``'s compact schema as this process keeps it: a caller copies before changing it."""
    found = _SCHEMAS.get(model)
    if found is None:
        key, generated = cache.get(model) if cache is not None else (None, None)
        if generated is None:
            generated = model.model_json_schema(schema_generator=_Schemas)
            if key is not None and cache is not None:
                cache.put(key, generated)
        found = _SCHEMAS[model] = compact_schema(generated)
    return found


def _copied(value: Any) -> Any:
    """A copy of JSON data: what ``copy.deepcopy`` gives for it, several times faster (it
    copied every tool's schemas for each gateway built, a third of the build's time)."""
    if isinstance(value, dict):
        return {key: _copied(item) for key, item in value.items()}
    if isinstance(value, list):
        return [_copied(item) for item in value]
    return value


def build_tool(
    spec: ToolSpec, plugin: PluginContext[Any], schemas: SchemaCache | None = None
) -> RegisteredTool:
    """Validate a spec and derive its published form (its models' schemas from ``schemas``
    when models with the same fingerprint had them generated before)."""
    tier = validate_spec(spec)
    where = declared_at("tool", spec.name, spec.function)
    try:
        model_schema = _shared_schema(spec.input_model, schemas)
        output_schema = (
            _copied(_shared_schema(spec.output_model, schemas)) if spec.output_model else None
        )
    except Exception as exc:  # pydantic raises several kinds for unschematizable models
        raise RegistrationError(f"{where}: schema cannot be generated ({exc})") from None
    # A tool owns its schemas: optional_without_null builds every dict and list anew, so the
    # input schema needs no copy of its own (the output schema gets one).
    input_schema = optional_without_null(model_schema)
    if input_schema.get("type") != "object":
        raise RegistrationError(f"{where}: input schema root must be an object")
    description = spec.description.strip()
    if tier is Tier.MUTATION:
        assert spec.mutation is not None
        description = f"{description}\n\n{mutation_paragraph(spec.mutation)}"
    if len(description) > MAX_DESCRIPTION_CHARS:
        raise RegistrationError(
            f"{where}: description is {len(description)} characters"
            + (" with its MUTATION paragraph" if tier is Tier.MUTATION else "")
            + f"; Claude Code cuts it after {MAX_DESCRIPTION_CHARS}: say it in fewer words "
            "(parameter details belong in the input model's field descriptions)"
        )
    title = spec.title or spec.name.replace("_", " ").capitalize()
    published = json.dumps([title, description, input_schema, output_schema], ensure_ascii=False)
    if encodable(published) is not published:
        raise RegistrationError(
            f"{where}: its title, description or schema holds a lone surrogate "
            "(not valid Unicode), which no client could receive"
        )
    annotations: dict[str, Any] = {
        "title": title,
        "read_only_hint": tier is Tier.READ,
        "destructive_hint": bool(spec.mutation and spec.mutation.destructive),
        "idempotent_hint": tier is Tier.READ or bool(spec.mutation and spec.mutation.idempotent),
        "open_world_hint": spec.open_world,
    }
    meta = (
        {"anthropic/maxResultSizeChars": min(int(spec.max_result_chars), 500_000)}
        if spec.max_result_chars
        else None
    )
    return RegisteredTool(
        spec=spec,
        tier=tier,
        plugin=plugin,
        input_schema=input_schema,
        output_schema=output_schema,
        description=description,
        annotations=annotations,
        meta=meta,
    )


class Registry:
    """All tools of all loaded plugins, by name.

    A name two plugins register is contested: neither serves it (each plugin's other tools
    still do) until ``providers`` names the plugin that should, and both are reported. The
    built-in plugin's tools are never contested: a plugin's tool of the same name is withheld.
    """

    def __init__(self, providers: Mapping[str, str] | None = None, builtin: str = "") -> None:
        self._providers = dict(providers or {})
        self._builtin = builtin
        self._tools: dict[str, RegisteredTool] = {}
        self._claims: dict[str, list[RegisteredTool]] = {}  # every registration of a name
        self._held: dict[str, dict[str, str]] = {}  # plugin → tool names it keeps back, why
        #: each source's place in a listing (:meth:`gateway.plugins.PluginLoader.keep`): the
        #: tools are listed in it, each source's in the order it registered them
        self.order: dict[str, int] = {}

    def add_all(self, tools: list[RegisteredTool]) -> None:
        """Add one plugin's tools; a name registered twice by the plugin refuses the lot."""
        seen: set[str] = set()
        for tool in tools:
            if tool.name in seen:
                raise RegistrationError(f"tool {tool.name!r} is registered twice by this plugin")
            seen.add(tool.name)
        for tool in tools:
            self._claims.setdefault(tool.name, []).append(tool)
            self._resolve(tool.name)

    def _resolve(self, name: str) -> None:
        claims = self._claims.get(name, [])
        if not claims:
            self._claims.pop(name, None)
            self._tools.pop(name, None)
            return
        winner = self._winner(name, claims)
        if winner is None:
            self._tools.pop(name, None)
        else:
            self._tools[name] = winner

    def _winner(self, name: str, claims: list[RegisteredTool]) -> RegisteredTool | None:
        if len(claims) == 1:
            return claims[0]
        by_plugin = {t.plugin.name: t for t in claims}
        return by_plugin.get(self._builtin) or by_plugin.get(self._providers.get(name, ""))

    def remove_plugin(self, plugin_name: str) -> None:
        for name in [
            n for n, c in self._claims.items() if any(t.plugin.name == plugin_name for t in c)
        ]:
            self._claims[name] = [t for t in self._claims[name] if t.plugin.name != plugin_name]
            self._resolve(name)

    def withheld(self, plugin_name: str) -> dict[str, str]:
        """This plugin's tools that another plugin's claim keeps from serving, and why."""
        out = {}
        for name, claims in self._claims.items():
            mine = [t for t in claims if t.plugin.name == plugin_name]
            if not mine or self._tools.get(name) is mine[0]:
                continue
            out[name] = self.why_withheld(name) or ""
        return out

    def hold(self, plugin_name: str, held: Mapping[str, str]) -> None:
        """Tool names a source keeps back itself (a mounted server's definition that changed
        since it was approved), and why: a call by such a name is answered with the reason."""
        self._held[plugin_name] = dict(held)

    def why_withheld(self, name: str) -> str | None:
        """Why a registered tool name is not served (``None`` when it is, or is unknown)."""
        for held in self._held.values():
            if name in held and name not in self._tools:
                return held[name]
        claims = self._claims.get(name, [])
        if len(claims) < 2:
            return None
        plugins = [t.plugin.name for t in claims]
        winner = self._tools.get(name)
        listed = " and ".join(repr(p) for p in plugins)
        if winner is None:
            return (
                f"plugins {listed} both provide tool {name!r}, so neither serves it; the "
                f"operator chooses with providers.{name} = '<plugin>' "
                f"(MCP_GATEWAY_PROVIDERS={name}=<plugin>)"
            )
        if winner.plugin.name == self._builtin:
            return f"the built-in plugin provides tool {name!r}; {listed} claim it"
        return f"providers.{name} = {winner.plugin.name!r} chooses that plugin's tool {name!r}"

    def get(self, name: str) -> RegisteredTool | None:
        return self._tools.get(name)

    def all(self) -> list[RegisteredTool]:
        last = len(self.order)
        return sorted(self._tools.values(), key=lambda t: self.order.get(t.plugin.name, last))
