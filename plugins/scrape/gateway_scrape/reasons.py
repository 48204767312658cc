"""Short, safe failure reasons: what failed and why, cut between words.

Board and network errors are long chains ("HTTPSConnectionPool(...): Max retries exceeded with
url: /jobs-guest/...?keywords=… (Caused by NameResolutionError(...: Failed to resolve
'www.linkedin.com' ([Errno -3] Temporary failure in name resolution)))"): the first words say
what failed, the last say why. A reason too long to show keeps both ends and drops the middle.
"""

from __future__ import annotations

import re
from collections.abc import Callable

#: Longest per-term reason, in characters (the gateway bounds every message at 600).
MAX_REASON_CHARS = 400
_ELLIPSIS = " … "
# Object reprs carry memory addresses that say nothing to a reader.
_OBJECT_AT = re.compile(r"<([\w.]+?)(?: object)? at 0x[0-9a-fA-F]+>")
# Words sanitized together with the text they precede: an auth scheme and its token, a key and
# its value. Keeping a few words before a cut lets the sanitizer recognise such pairs.
_CONTEXT_WORDS = 4
# Raw text sanitized in one piece: well under the sanitizer's own 600-character limit.
_CHUNK_CHARS = 480


def _words_within(words: list[str], budget: int, *, from_end: bool) -> list[str]:
    taken: list[str] = []
    size = 0
    for word in reversed(words) if from_end else words:
        extra = len(word) + (1 if taken else 0)
        if size + extra > budget:
            break
        taken.append(word)
        size += extra
    if not taken and words:  # one enormous "word" (a URL): cut it, it is all there is
        word = words[-1] if from_end else words[0]
        taken = [word[-budget:] if from_end else word[:budget]]
    return list(reversed(taken)) if from_end else taken


def short_reason(
    text: str, sanitize: Callable[[str], str], *, limit: int = MAX_REASON_CHARS
) -> str:
    """``text`` on one line, sanitized, at most ``limit`` characters, cut only between words.

    A longer text keeps its beginning (what failed) and its end (the cause), joined by ``…``.
    Each end is sanitized on its own, a few words of context included, before it is cut: the
    sanitizer's own length limit never cuts the cause off, and a secret is never separated
    from the word that marks it as one.
    """
    words = _OBJECT_AT.sub(r"<\1>", text).split()
    whole = sanitize(" ".join(words))
    if len(whole) <= limit:
        return whole
    tail_budget = (limit - len(_ELLIPSIS)) * 3 // 5
    head_budget = limit - len(_ELLIPSIS) - tail_budget
    head_raw = _words_within(words, _CHUNK_CHARS, from_end=False)
    head = _words_within(sanitize(" ".join(head_raw)).split(" "), head_budget, from_end=False)
    tail_raw = _words_within(words, _CHUNK_CHARS, from_end=True)
    before = (
        words[: len(words) - len(tail_raw)][-_CONTEXT_WORDS:] if len(tail_raw) < len(words) else []
    )
    tail_words = sanitize(" ".join(before + tail_raw)).split(" ")
    tail = _words_within(tail_words, tail_budget, from_end=True)
    return " ".join(head) + _ELLIPSIS + " ".join(tail)
