"""Results that fit Claude Code: long texts inside a JSON answer cut to a size budget.

Claude Code keeps a tool result inline up to 50,000 characters (more only when the tool raises
it) and refuses results over ~25k tokens. Audit entries, LLM requests and table rows carry texts
of any length, so a result is shaped to a budget: every string leaf is cut at one common length
``L``, the largest that keeps the whole JSON within the budget (short strings are never touched;
the longest lose most), and each cut string ends with a marker saying how much was left out and
how to see more. ``L`` is found by binary search over the sorted string lengths, so shaping costs
one ``json.dumps`` and one walk of the answer.

A list of many small items (a page of 200 audit entries) can outgrow any cut of its texts: its
keys and numbers alone are too long. :func:`bound_items` then keeps the leading items that fit
``LIST_CAP`` and says how many it left out, so the tool can tell where to continue.
"""

from __future__ import annotations

import json
from bisect import bisect_right
from dataclasses import dataclass
from itertools import accumulate
from typing import Any

from gateway.rest import truncation_marker

#: Total characters of a list result (a page of entries or rows): within the 50,000 inline.
LIST_BUDGET = 40_000
#: Hard cap on a list result: inline with ``max_result_chars``, well under 25k tokens.
LIST_CAP = 60_000
#: What a string keeps at least, whatever the budget: below it a text says nothing.
FLOOR = 200
#: What a marker costs at most, besides its hint (the 40 stand for a hint of that length).
_MARKER_COST = len("\n" + truncation_marker(100_000, 100_000, hint=" ")) + 40


@dataclass(eq=False)  # compared by identity: no __eq__ to compile at start
class Bounded:
    """A JSON value cut to a budget, and how many of its strings were cut."""

    value: Any
    truncated: int


def clip(text: str, limit: int, hint: str) -> str:
    """``text`` cut at ``limit`` characters with the marker on a line of its own, or unchanged
    when it fits."""
    if len(text) <= limit:
        return text
    return text[:limit] + "\n" + truncation_marker(len(text) - limit, len(text), hint=hint)


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


def size_of(value: Any) -> int:
    """Characters of ``value`` as compact JSON (what Claude Code hands the model)."""
    return len(json.dumps(value, ensure_ascii=False, separators=(",", ":")))


def _common_limit_for(value: Any, budget: int, ceiling: int) -> tuple[int | None, int]:
    """The length every string of ``value`` is cut at (None: it fits as it is), and the size
    of ``value``'s JSON."""
    size = size_of(value)
    if size <= min(budget, ceiling):  # no string can be longer than the whole
        return None, size
    lengths: list[int] = []
    _lengths(value, lengths)
    if size <= budget and max(lengths, default=0) <= ceiling:
        return None, size
    # Escapes make the JSON a little longer than its strings; that overhead stays with the
    # skeleton (keys, punctuation, numbers), which no cut can shrink.
    skeleton = size - sum(lengths)
    return common_limit(lengths, budget - skeleton, ceiling), size


def bound(value: Any, *, budget: int, hint: str, ceiling: int | None = None) -> Bounded:
    """``value`` (decoded JSON) with its strings cut so that its compact JSON takes about
    ``budget`` characters at most; no string keeps more than ``ceiling`` (default: the budget).
    ``hint`` ends each marker: what to ask for to see more ("ask for fewer rows (limit)")."""
    limit, _ = _common_limit_for(value, budget, budget if ceiling is None else ceiling)
    if limit is None:
        return Bounded(value, 0)
    count = [0]
    cut = _cut(value, limit, hint, count)
    return Bounded(cut, count[0])


@dataclass(eq=False)  # compared by identity: no __eq__ to compile at start
class BoundedItems:
    """The leading items of a list that fit, their texts cut, and how many were left out."""

    items: list[Any]
    truncated: int
    omitted: int


def bound_items(
    items: list[Any], *, hint: str, budget: int = LIST_BUDGET, cap: int = LIST_CAP
) -> BoundedItems:
    """``items`` with their texts cut to ``budget`` (see :func:`bound`), then only the leading
    items whose JSON fits ``cap``: at least one, so a result always makes progress."""
    limit, size = _common_limit_for(items, budget, budget)
    if limit is None and size <= cap:
        return BoundedItems(items, 0, 0)
    # Each item cut and measured once, until the list cannot fit: the compact JSON of a list
    # is its items' JSON joined by commas in brackets, so the rows past the cap (most of a
    # 500-row page) are never cut or serialized.
    shaped: list[Any] = []
    sizes: list[int] = []
    counts: list[int] = []
    whole = 1  # "[", then each item with the comma or bracket after it
    for item in items:
        count = [0]
        one = item if limit is None else _cut(item, limit, hint, count)
        shaped.append(one)
        counts.append(count[0])
        sizes.append(size_of(one))
        whole += sizes[-1] + 1
        if whole > cap:
            break
    else:
        return BoundedItems(shaped, sum(counts), 0)
    # Too many items for any cut of their texts: keep the leading ones that fit.
    kept = 0
    used = 2  # the brackets
    for one_size in sizes:
        used += one_size + 1
        if used > cap and kept:
            break
        kept += 1
    return BoundedItems(shaped[:kept], sum(counts[:kept]), len(items) - kept)
