"""Where a value sits in a TOML file, and the valid name closest to a misspelt one.

``tomllib`` gives values without positions; :class:`TomlLines` finds the line of a table or
key by reading the file's headers (``[a.b]``), dotted keys (``a.b = 1``) and inline tables
(``a = { b = 1 }``), which is all a configuration file uses.
"""

from __future__ import annotations

import difflib
import re
from collections.abc import Iterable

_HEADER = re.compile(r"\s*\[\[?\s*(?P<name>[^\]]+?)\s*\]\]?\s*(#.*)?$")
_KEY = re.compile(
    r"""\s*(?P<key>(?:[A-Za-z0-9_-]+|"[^"]*"|'[^']*')(?:\s*\.\s*(?:[A-Za-z0-9_-]+|"[^"]*"|'[^']*'))*)\s*="""
)
_PART = re.compile(r"""[A-Za-z0-9_-]+|"[^"]*"|'[^']*'""")


def _dotted(text: str) -> tuple[str, ...]:
    return tuple(p.strip("\"'") for p in _PART.findall(text))


class TomlLines:
    """``where(("plugins", "gitea", "token"))`` → ``"gw.toml:7"`` (just the name if unknown)."""

    def __init__(self, name: str, text: str) -> None:
        self.name = name
        self._entries: list[tuple[int, tuple[str, ...], str]] = []
        table: tuple[str, ...] = ()
        for number, line in enumerate(text.splitlines(), 1):
            header = _HEADER.match(line)
            if header:
                table = _dotted(header["name"])
                self._entries.append((number, table, ""))
                continue
            key = _KEY.match(line)
            if key:
                self._entries.append((number, (*table, *_dotted(key["key"])), line[key.end() :]))

    def line(self, path: tuple[str, ...]) -> int | None:
        for number, found, _ in self._entries:
            if found == path:
                return number
        # A key inside an inline table (``gateway = { read_only = 1 }``) or a table that is
        # only ever written as dotted keys (``gateway.read_only = 1``): the closest line.
        for depth in range(len(path) - 1, 0, -1):
            for number, found, rest in self._entries:
                if found == path[:depth] and re.search(rf"\b{re.escape(path[depth])}\s*=", rest):
                    return number
            for number, found, _ in self._entries:
                if found[:depth] == path[:depth]:
                    return number
        return None

    def where(self, path: tuple[str, ...]) -> str:
        number = self.line(path)
        return f"{self.name}:{number}" if number is not None else self.name


def closest(word: str, choices: Iterable[str], *, template: str = "{}", upper: bool = False) -> str:
    """``"; did you mean <name>?"`` for the valid name nearest ``word``, or ``""``."""
    pool = {c.lower(): c for c in choices}
    match = difflib.get_close_matches(word.lower(), list(pool), n=1, cutoff=0.6)
    if not match:
        return ""
    name = pool[match[0]]
    return f"; did you mean {template.format(name.upper() if upper else name)}?"
