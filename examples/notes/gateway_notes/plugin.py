"""A complete, small third-party plugin: settings, a read tool, two mutation tools, a check.

Everything a plugin author writes is here; the gateway core does validation, tiers,
annotations, timeouts, error sanitization and auditing. A tool is a typed async function: its
parameters are the tool's arguments (the published ``inputSchema``, unknown ones refused), its
return type the result, its docstring what the model reads about it.
"""

from __future__ import annotations

import json
import os
import tempfile
from pathlib import Path
from typing import Annotated, Any

from pydantic import BaseModel, ConfigDict, Field

from gateway import (
    ErrorCode,
    GatewayError,
    Mutation,
    Plugin,
    PluginContext,
    Tier,
    ToolContext,
    env_field,
)


class Settings(BaseModel):
    model_config = ConfigDict(extra="forbid")  # a misspelt key in [plugins.notes] is an error
    notes_file: str = env_field("NOTES_FILE", default="data/notes.json")


plugin = Plugin(settings=Settings)  # what the entry point names


class Note(BaseModel):
    id: int
    text: str
    tags: list[str] = []


class SearchResult(BaseModel):
    notes: list[Note]
    count: int


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


@plugin.tool(tier=Tier.READ, title="Search notes")
async def notes_search(
    query: Annotated[
        str, Field(max_length=200, description="Substring to look for; empty lists all.")
    ] = "",
    limit: Annotated[int, Field(ge=1, le=100, description="At most this many notes.")] = 20,
    *,
    ctx: ToolContext[Settings],
) -> SearchResult:
    """Find notes whose text contains a substring (case-insensitive)."""
    notes = await ctx.run_sync(_read, _path(ctx))  # blocking file I/O, off the event loop
    hits = [Note(**n) for n in notes if query.lower() in n["text"].lower()][:limit]
    return SearchResult(notes=hits, count=len(hits))


@plugin.tool(
    tier=Tier.MUTATION,
    title="Add a note",
    mutation=Mutation(
        consequence="appends a new note to the notes file",
        requires="nothing; the file is created if missing",
        reversible=True,
        destructive=False,
        idempotent=False,
    ),
)
async def notes_add(
    text: Annotated[str, Field(min_length=1, max_length=2000, description="The note.")],
    tags: list[str] = Field(default_factory=list, max_length=10),
    *,
    ctx: ToolContext[Settings],
) -> Note:
    """Add a note and return it with its new id."""
    path = _path(ctx)
    notes = await ctx.run_sync(_read, path)
    note = Note(id=max((n["id"] for n in notes), default=0) + 1, text=text, tags=tags)
    await ctx.run_sync(_write, path, [*notes, note.model_dump()])
    return note


@plugin.tool(
    tier=Tier.MUTATION,
    title="Delete a note",
    mutation=Mutation(
        consequence="removes the note from the notes file",
        requires="a note with this id exists",
        reversible=False,
        destructive=True,
        idempotent=False,
    ),
)
async def notes_delete(
    id: Annotated[int, Field(ge=1, description="Id of the note to delete.")],
    *,
    ctx: ToolContext[Settings],
) -> dict[str, Any]:
    """Delete one note by id."""
    path = _path(ctx)
    notes = await ctx.run_sync(_read, path)
    kept = [n for n in notes if n["id"] != id]
    if len(kept) == len(notes):
        raise GatewayError(ErrorCode.NOT_FOUND, f"no note with id {id}; search to see the ids")
    await ctx.run_sync(_write, path, kept)
    return {"deleted": id}


@plugin.health_check
async def notes_file(ctx: PluginContext[Settings]) -> str:
    path = ctx.resolve_data_path(ctx.settings.notes_file, field_name="notes_file")
    if path.exists() and not os.access(path, os.R_OK | os.W_OK):
        raise PermissionError(f"{ctx.display_path(path)} is not readable and writable")
    return ctx.display_path(path)
