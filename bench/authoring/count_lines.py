"""Code lines of the plugins in bench/authoring: the same two plugins written three ways, with
the ratios the target of issue 36 is about (ours at most 1.3 x FastMCP's code lines).

- ``tasks``: three tools over a small HTTP API (``tasks_api.py``): list, get, add.
- ``files``: two tools over files inside the data root: read_file, write_file.

``before/``: the gateway's API before typed functions (a model class per tool, ``ToolSpec`` /
``RestTool`` declarations, hooks); ``after/``: typed functions (``Plugin``, ``@plugin.tool``,
``RestTools``); ``fastmcp/``: FastMCP's current API (``@mcp.tool``), with the same parameters,
descriptions, constraints and errors, and the MCP annotations our tiers derive.

What is counted: the lines of a file that hold a Python token other than a comment, as
``tokenize`` reads them. Blank lines and comment-only lines are not counted; everything else
is, imports, decorators, docstrings (each line of a tool's description) and lines holding only
a closing bracket included. The files carry no module docstring (what each is says a comment).
All are formatted by the project's ``ruff format`` (100 columns), so both sides are laid out by
the same rules.

    python3 bench/authoring/count_lines.py
"""

from __future__ import annotations

import tokenize
from pathlib import Path

HERE = Path(__file__).resolve().parent
PLUGINS = {"tasks": "3 REST tools", "files": "2 local tools"}
VERSIONS = ("before", "after", "fastmcp")
_NOT_CODE = {
    tokenize.COMMENT,
    tokenize.NL,
    tokenize.NEWLINE,
    tokenize.INDENT,
    tokenize.DEDENT,
    tokenize.ENCODING,
    tokenize.ENDMARKER,
}


def code_lines(path: Path) -> int:
    """Lines holding a token other than a comment (a string over several lines: each)."""
    lines: set[int] = set()
    with tokenize.open(path) as fh:
        for token in tokenize.generate_tokens(fh.readline):
            if token.type not in _NOT_CODE:
                lines.update(range(token.start[0], token.end[0] + 1))
    return len(lines)


def main() -> None:
    counts = {(p, v): code_lines(HERE / v / f"{p}.py") for p in PLUGINS for v in VERSIONS}
    print(f"{'plugin':<24}{'before':>8}{'after':>8}{'FastMCP':>9}{'before/F':>10}{'after/F':>9}")
    for plugin, what in PLUGINS.items():
        before, after, fast = (counts[plugin, v] for v in VERSIONS)
        print(
            f"{f'{plugin} ({what})':<24}{before:>8}{after:>8}{fast:>9}"
            f"{before / fast:>9.2f}x{after / fast:>8.2f}x"
        )
    total = {v: sum(counts[p, v] for p in PLUGINS) for v in VERSIONS}
    print(
        f"{'both':<24}{total['before']:>8}{total['after']:>8}{total['fastmcp']:>9}"
        f"{total['before'] / total['fastmcp']:>9.2f}x{total['after'] / total['fastmcp']:>8.2f}x"
    )


if __name__ == "__main__":
    main()
