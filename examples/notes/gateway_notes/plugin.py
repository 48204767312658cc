"""A complete, small third-party plugin: settings, a read tool, two mutation tools, a check.

Everything a plugin author writes is here; the gateway core does validation, tiers,
annotations, timeouts, error sanitization and auditing.
"""

from __future__ import annotations

import json
import os
import tempfile
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from gateway import (
    ErrorCode,
    GatewayError,
    HealthCheck,
    Mutation,
    PluginContext,
    Tier,
    ToolContext,
    ToolSpec,
    env_field,
    hookimpl,
)


class Settings(BaseModel):
    model_config = ConfigDict(extra="forbid")
    notes_file: str = env_field("NOTES_FILE", default="data/notes.json")


class Note(BaseModel):
    id: int
    text: str
    tags: list[str] = []


class SearchArgs(BaseModel):
    model_config = ConfigDict(extra="forbid")
    query: str = Field("", max_length=200, description="Substring to look for; empty lists all.")
    limit: int = Field(20, ge=1, le=100, description="At most this many notes.")


class SearchResult(BaseModel):
    notes: list[Note]
    count: int


class AddArgs(BaseModel):
    model_config = ConfigDict(extra="forbid")
    text: str = Field(min_length=1, max_length=2000, description="The note.")
    tags: list[str] = Field(default_factory=list, max_length=10)


class DeleteArgs(BaseModel):
    model_config = ConfigDict(extra="forbid")
    id: int = Field(ge=1, description="Id of the note to delete.")


def _path(ctx: ToolContext[Settings]) -> Path:
    return ctx.plugin.resolve_data_path(ctx.settings.notes_file, field_name="notes_file")


def _read(path: Path) -> list[dict[str, Any]]:
    if not path.exists():
        return []
    return list(json.loads(path.read_text(encoding="utf-8")))


def _write(path: Path, notes: list[dict[str, Any]]) -> None:
    # Atomic: a crash leaves the old file or the new one, never half of one.
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=".notes-")
    with os.fdopen(fd, "w", encoding="utf-8") as fh:
        json.dump(notes, fh)
    os.replace(tmp, path)


async def notes_search(args: SearchArgs, ctx: ToolContext[Settings]) -> SearchResult:
    notes = await ctx.run_sync(_read, _path(ctx))
    hits = [Note(**n) for n in notes if args.query.lower() in n["text"].lower()][: args.limit]
    return SearchResult(notes=hits, count=len(hits))


async def notes_add(args: AddArgs, ctx: ToolContext[Settings]) -> Note:
    path = _path(ctx)
    notes = await ctx.run_sync(_read, path)
    note = Note(id=max((n["id"] for n in notes), default=0) + 1, text=args.text, tags=args.tags)
    await ctx.run_sync(_write, path, [*notes, note.model_dump()])
    return note


async def notes_delete(args: DeleteArgs, ctx: ToolContext[Settings]) -> dict[str, Any]:
    path = _path(ctx)
    notes = await ctx.run_sync(_read, path)
    kept = [n for n in notes if n["id"] != args.id]
    if len(kept) == len(notes):
        raise GatewayError(ErrorCode.NOT_FOUND, f"no note with id {args.id}; search to see the ids")
    await ctx.run_sync(_write, path, kept)
    return {"deleted": args.id}


@hookimpl
def plugin_settings() -> type[BaseModel]:
    return Settings


@hookimpl
def register_tools(register: Any) -> None:
    register(
        ToolSpec(
            name="notes_search",
            title="Search notes",
            description="Find notes whose text contains a substring (case-insensitive).",
            input_model=SearchArgs,
            output_model=SearchResult,
            handler=notes_search,
            tier=Tier.READ,
        )
    )
    register(
        ToolSpec(
            name="notes_add",
            title="Add a note",
            description="Add a note and return it with its new id.",
            input_model=AddArgs,
            output_model=Note,
            handler=notes_add,
            tier=Tier.MUTATION,
            mutation=Mutation(
                consequence="appends a new note to the notes file",
                requires="nothing; the file is created if missing",
                reversible=True,
                destructive=False,
                idempotent=False,
            ),
        )
    )
    register(
        ToolSpec(
            name="notes_delete",
            title="Delete a note",
            description="Delete one note by id.",
            input_model=DeleteArgs,
            handler=notes_delete,
            tier=Tier.MUTATION,
            mutation=Mutation(
                consequence="removes the note from the notes file",
                requires="a note with this id exists",
                reversible=False,
                destructive=True,
                idempotent=False,
            ),
        )
    )


@hookimpl
def register_health_checks(register: Any, plugin: PluginContext[Settings]) -> None:
    async def notes_file_usable() -> str:
        path = plugin.resolve_data_path(plugin.settings.notes_file, field_name="notes_file")
        if path.exists() and not os.access(path, os.R_OK | os.W_OK):
            raise PermissionError(f"{plugin.display_path(path)} is not readable and writable")
        return plugin.display_path(path)

    register(HealthCheck(name="notes_file", check=notes_file_usable))
