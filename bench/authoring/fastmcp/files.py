# The files plugin of after/files.py in FastMCP: the same tools, parameters, descriptions,
# constraints and errors; the root and the size limit from the environment; the MCP
# annotations stated by hand; sync functions (FastMCP runs them in a thread).
from __future__ import annotations

import os
from pathlib import Path
from typing import Annotated

from fastmcp import FastMCP
from fastmcp.exceptions import ToolError
from pydantic import BaseModel, Field

mcp = FastMCP("files")
ROOT = Path(os.environ.get("FILES_ROOT", ".")).resolve()
MAX_BYTES = int(os.environ.get("FILES_MAX_BYTES", "1000000"))

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


def _resolve(path: str) -> Path:
    target = (ROOT / path).resolve()
    if target != ROOT and ROOT not in target.parents:
        raise ToolError(f"path: {path} is outside the data root")
    return target


@mcp.tool(annotations={"readOnlyHint": True})
def read_file(
    path: FilePath,
    max_chars: Annotated[int, Field(ge=1, le=100_000, description="Cut after this many.")] = 2000,
) -> FileText:
    """A text file, cut to max_chars characters."""
    target = _resolve(path)
    if not target.is_file():
        raise ToolError(f"no file {path}")
    if target.stat().st_size > MAX_BYTES:
        raise ToolError(f"path: {path} is over {MAX_BYTES} bytes")
    text = target.read_text(encoding="utf-8", errors="replace")
    return FileText(path=path, text=text[:max_chars], truncated=len(text) > max_chars)


@mcp.tool(annotations={"destructiveHint": True, "idempotentHint": True})
def write_file(
    path: FilePath,
    text: Annotated[str, Field(max_length=100_000, description="The new content.")],
) -> Written:
    """Write a text file."""
    target = _resolve(path)
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_text(text, encoding="utf-8")
    return Written(path=path, chars=len(text))
