# The files plugin of after/files.py, written with the API before typed functions: a model
# class per tool, ToolSpec(...) registrations, a settings hook.
from __future__ import annotations

from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from gateway import (
    ErrorCode,
    GatewayError,
    Mutation,
    Tier,
    ToolContext,
    ToolSpec,
    env_field,
    hookimpl,
)


class Settings(BaseModel):
    model_config = ConfigDict(extra="forbid")
    max_bytes: int = env_field("FILES_MAX_BYTES", default=1_000_000)


class Args(BaseModel):
    model_config = ConfigDict(extra="forbid")


class ReadArgs(Args):
    path: str = Field(min_length=1, max_length=500, description="Path inside the data root.")
    max_chars: int = Field(2000, ge=1, le=100_000, description="Cut after this many.")


class WriteArgs(Args):
    path: str = Field(min_length=1, max_length=500, description="Path inside the data root.")
    text: str = Field(max_length=100_000, description="The new content.")


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


async def read_file(args: ReadArgs, ctx: ToolContext[Settings]) -> FileText:
    target = ctx.plugin.resolve_data_path(args.path, field_name="path")
    text = await ctx.run_sync(_read, target, args.path, ctx.settings.max_bytes)
    return FileText(
        path=args.path, text=text[: args.max_chars], truncated=len(text) > args.max_chars
    )


async def write_file(args: WriteArgs, ctx: ToolContext[Settings]) -> Written:
    target = ctx.plugin.resolve_data_path(args.path, field_name="path")
    await ctx.run_sync(_write, target, args.text)
    return Written(path=args.path, chars=len(args.text))


@hookimpl
def plugin_settings() -> type[BaseModel]:
    return Settings


@hookimpl
def register_tools(register: Any) -> None:
    register(
        ToolSpec(
            name="read_file",
            description="A text file, cut to max_chars characters.",
            input_model=ReadArgs,
            output_model=FileText,
            handler=read_file,
            tier=Tier.READ,
        )
    )
    register(
        ToolSpec(
            name="write_file",
            description="Write a text file.",
            input_model=WriteArgs,
            output_model=Written,
            handler=write_file,
            tier=Tier.MUTATION,
            mutation=Mutation(
                consequence="writes the text to the file, replacing what it held",
                requires="nothing; folders are created",
                reversible=False,
                destructive=True,
                idempotent=True,
            ),
        )
    )
