# Two tools over files inside the gateway's data roots, as typed functions.
from __future__ import annotations

from pathlib import Path
from typing import Annotated

from pydantic import BaseModel, ConfigDict, Field

from gateway import ErrorCode, GatewayError, Mutation, Plugin, Tier, ToolContext, env_field


class Settings(BaseModel):
    model_config = ConfigDict(extra="forbid")
    max_bytes: int = env_field("FILES_MAX_BYTES", default=1_000_000)


plugin = Plugin(settings=Settings)

FilePath = Annotated[
    str, Field(min_length=1, max_length=500, description="Path inside the data root.")
]


class FileText(BaseModel):
    path: str
    text: str
    truncated: bool


class Written(BaseModel):
    path: str
    chars: int


def _read(target: Path, path: str, max_bytes: int) -> str:
    if not target.is_file():
        raise GatewayError(ErrorCode.NOT_FOUND, f"no file {path}")
    if target.stat().st_size > max_bytes:
        raise GatewayError(ErrorCode.VALIDATION_ERROR, f"path: {path} is over {max_bytes} bytes")
    return target.read_text(encoding="utf-8", errors="replace")


def _write(target: Path, text: str) -> None:
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_text(text, encoding="utf-8")


@plugin.tool(tier=Tier.READ)
async def read_file(
    path: FilePath,
    max_chars: Annotated[int, Field(ge=1, le=100_000, description="Cut after this many.")] = 2000,
    *,
    ctx: ToolContext[Settings],
) -> FileText:
    """A text file, cut to max_chars characters."""
    target = ctx.plugin.resolve_data_path(path, field_name="path")
    text = await ctx.run_sync(_read, target, path, ctx.settings.max_bytes)
    return FileText(path=path, text=text[:max_chars], truncated=len(text) > max_chars)


@plugin.tool(
    tier=Tier.MUTATION,
    mutation=Mutation(
        consequence="writes the text to the file, replacing what it held",
        requires="nothing; folders are created",
        reversible=False,
        destructive=True,
        idempotent=True,
    ),
)
async def write_file(
    path: FilePath,
    text: Annotated[str, Field(max_length=100_000, description="The new content.")],
    *,
    ctx: ToolContext[Settings],
) -> Written:
    """Write a text file."""
    target = ctx.plugin.resolve_data_path(path, field_name="path")
    await ctx.run_sync(_write, target, text)
    return Written(path=path, chars=len(text))
