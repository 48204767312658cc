"""Results that fit Claude Code: long texts inside a JSON answer cut to a size budget.

Claude Code keeps a tool result inline up to 50,000 characters (more only when the tool raises
it) and refuses results over ~25k tokens. Audit entries, LLM requests and table rows carry texts
of any length, so a result is shaped to a budget: every string leaf is cut at one common length
``L``, the largest that keeps the whole JSON within the budget (short strings are never touched;
the longest lose most), and each cut string ends with a marker saying how much was left out and
how to see more. ``L`` is found by binary search over the sorted string lengths, so shaping costs
one ``json.dumps`` and one walk of the answer.
"""

from __future__ import annotations

import json
from bisect import bisect_right
from dataclasses import dataclass
from itertools import accumulate
from typing import Any

#: Total characters of a list result (a page of entries or rows): within the 50,000 inline.
LIST_BUDGET = 40_000
#: What a string keeps at least, whatever the budget: below it a text says nothing.
FLOOR = 200
_MARKER = " … [truncated: {omitted:,} of {total:,} chars left out; {hint}]"
_MARKER_COST = len(_MARKER.format(omitted=100_000, total=100_000, hint="")) + 40


@dataclass
class Bounded:
    """A JSON value cut to a budget, and how many of its strings were cut."""

    value: Any
    truncated: int


def clip(text: str, limit: int, hint: str) -> str:
    """``text`` cut at ``limit`` characters with the marker, or unchanged when it fits."""
    if len(text) <= limit:
        return text
    return text[:limit] + _MARKER.format(omitted=len(text) - limit, total=len(text), hint=hint)


def _lengths(value: Any, out: list[int]) -> None:
    if isinstance(value, str):
        out.append(len(value))
    elif isinstance(value, dict):
        for item in value.values():
            _lengths(item, out)
    elif isinstance(value, list):
        for item in value:
            _lengths(item, out)


def _cut(value: Any, limit: int, hint: str, count: list[int]) -> Any:
    if isinstance(value, str):
        if len(value) > limit:
            count[0] += 1
            return clip(value, limit, hint)
        return value
    if isinstance(value, dict):
        return {k: _cut(v, limit, hint, count) for k, v in value.items()}
    if isinstance(value, list):
        return [_cut(v, limit, hint, count) for v in value]
    return value


def common_limit(lengths: list[int], room: int, ceiling: int) -> int:
    """The largest ``L`` in ``[FLOOR, ceiling]`` whose cut strings (each at most ``L`` plus a
    marker) take at most ``room`` characters; ``FLOOR`` when even that does not fit."""
    ordered = sorted(lengths)
    prefix = [0, *accumulate(ordered)]

    def cost(limit: int) -> int:
        kept = bisect_right(ordered, limit)  # strings no longer than the limit stay whole
        return prefix[kept] + (len(ordered) - kept) * (limit + _MARKER_COST)

    low, high = FLOOR, max(FLOOR, ceiling)
    if cost(low) > room:
        return FLOOR
    while low < high:
        mid = (low + high + 1) // 2
        if cost(mid) <= room:
            low = mid
        else:
            high = mid - 1
    return low


def bound(value: Any, *, budget: int, hint: str, ceiling: int | None = None) -> Bounded:
    """``value`` (decoded JSON) with its strings cut so that its compact JSON takes about
    ``budget`` characters at most; no string keeps more than ``ceiling`` (default: the budget).
    ``hint`` ends each marker: what to ask for to see more ("ask for fewer rows (limit)")."""
    size = len(json.dumps(value, ensure_ascii=False, separators=(",", ":")))
    ceiling = budget if ceiling is None else ceiling
    if size <= min(budget, ceiling):  # no string can be longer than the whole
        return Bounded(value, 0)
    lengths: list[int] = []
    _lengths(value, lengths)
    if size <= budget and max(lengths, default=0) <= ceiling:
        return Bounded(value, 0)
    text_chars = sum(lengths)
    # Escapes make the JSON a little longer than its strings; that overhead stays with the
    # skeleton (keys, punctuation, numbers), which no cut can shrink.
    skeleton = size - text_chars
    limit = common_limit(lengths, budget - skeleton, ceiling)
    count = [0]
    cut = _cut(value, limit, hint, count)
    return Bounded(cut, count[0])
