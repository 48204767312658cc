"""PostgreSQL full-text search with the ``'simple'`` configuration, as far as the API shows it.

- :func:`lexemes`: ``to_tsvector('simple', text)``: lower-cased words with their positions, no
  stemming, no stop words; a hyphenated word gives the whole word and then each part, each at its
  own position, as PostgreSQL's parser does.
- :func:`matches`: ``to_tsvector @@ plainto_tsquery``: every query word is present.
- :func:`rank`: ``ts_rank`` with the default weights (all positions weight D = 0.1) and no
  normalization: ``calc_rank_or`` for one distinct word, ``calc_rank_and`` (word proximity) for
  more; returned as a ``real`` (float4), like the API's ``rank``. The evidence labels hang on it.
- :func:`headline`: an approximation of ``ts_headline(..., 'MaxFragments=2, MaxWords=60,
  MinWords=20')``: up to two fragments around matches joined by ``" ... "``, matching words in
  ``<b>...</b>``. The real fragment boundaries differ; the form is the same.
"""

from __future__ import annotations

import math
import re
import struct

WORD = re.compile(r"[^\W_]+(?:[-.][^\W_]+)*")
WEIGHT_D = 0.1
MAX_POSITIONS = 256  # a tsvector keeps at most 256 positions per lexeme


def _tokens(text: str) -> list[tuple[str, int, int]]:
    """(lexeme, start, end) in order; a hyphenated word is followed by its parts."""
    out: list[tuple[str, int, int]] = []
    for m in WORD.finditer(text):
        word = m.group().lower()
        if "-" in word:
            out.append((word, m.start(), m.end()))
            offset = m.start()
            for part in word.split("-"):
                out.append((part, offset, offset + len(part)))
                offset += len(part) + 1
        else:
            out.append((word, m.start(), m.end()))
    return out


def lexemes(text: str) -> dict[str, list[int]]:
    found: dict[str, list[int]] = {}
    for position, (word, _, _) in enumerate(_tokens(text), start=1):
        positions = found.setdefault(word, [])
        if len(positions) < MAX_POSITIONS:
            positions.append(min(position, 16383))
    return found


def query_words(query: str) -> list[str]:
    """``plainto_tsquery('simple', query)``: its distinct words (all must match)."""
    words: list[str] = []
    for word, _, _ in _tokens(query):
        if word not in words:
            words.append(word)
    return words


def matches(vector: dict[str, list[int]], words: list[str]) -> bool:
    return bool(words) and all(w in vector for w in words)


def _word_distance(distance: int) -> float:
    if distance > 100:
        return 1e-30
    return 1.0 / (1.005 + 0.05 * math.exp(distance / 1.5 - 2))


def rank(vector: dict[str, list[int]], words: list[str]) -> float:
    if len(words) < 2:
        result = 0.0
        for word in words:
            positions = vector.get(word, [])
            if not positions:
                continue
            resj = sum(WEIGHT_D / ((j + 1) * (j + 1)) for j in range(len(positions)))
            # the heaviest position is the first, all weights being equal
            result += (WEIGHT_D + resj - WEIGHT_D) / 1.64493406685
        result = result / len(words) if words else 0.0
    else:
        result = -1.0
        seen: list[list[int]] = []
        for word in words:
            here = vector.get(word, [])
            for earlier in seen:
                for p in here:
                    for q in earlier:
                        distance = abs(p - q)
                        if distance == 0:
                            continue
                        weight = math.sqrt(WEIGHT_D * WEIGHT_D * _word_distance(distance))
                        result = weight if result < 0 else 1.0 - (1.0 - result) * (1.0 - weight)
            seen.append(here)
        if result < 0:
            result = 1e-20
    return float(struct.unpack("f", struct.pack("f", result))[0])


def evidence_label(value: float) -> str:
    if value > 0.1:
        return "HIGH"
    if value > 0.01:
        return "MEDIUM"
    return "LOW"


def headline(text: str, words: list[str], max_words: int = 60, max_fragments: int = 2) -> str:
    spans = [(m.group(), m.start(), m.end()) for m in WORD.finditer(text)]
    wanted = set(words)

    def hit(word: str) -> bool:
        low = word.lower()
        return low in wanted or ("-" in low and bool(wanted & set(low.split("-"))))

    hits = [i for i, (w, _, _) in enumerate(spans) if hit(w)]
    if not spans:
        return ""
    fragments: list[tuple[int, int]] = []
    for index in hits:
        if len(fragments) == max_fragments:
            break
        if fragments and index <= fragments[-1][1]:
            continue
        start = max(0, index - max_words // 4)
        fragments.append((start, min(len(spans) - 1, start + max_words - 1)))
    if not fragments:
        fragments = [(0, min(len(spans), max_words) - 1)]
    pieces = []
    for first, last in fragments:
        out, cursor = [], spans[first][1]
        for word, start, end in spans[first : last + 1]:
            out.append(text[cursor:start])
            out.append(f"<b>{word}</b>" if hit(word) else word)
            cursor = end
        pieces.append("".join(out))
    return " ... ".join(pieces)
