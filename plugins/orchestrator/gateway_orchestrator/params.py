"""Parameter types shared by the history, monitoring and table tools, worded once (every byte
of a schema is paid on every turn of the model's conversation)."""

from __future__ import annotations

from typing import Annotated

from pydantic import AfterValidator, Field

from gateway import Args


class NoArgs(Args):
    pass


def _not_zero(value: int) -> int:
    if value == 0:
        raise ValueError("pages start at 1 (-1 is the last)")
    return value


Page = Annotated[
    int, Field(ge=-1, le=1_000_000, description="1-based; -1 = last."), AfterValidator(_not_zero)
]
PageSize = Annotated[int, Field(ge=1, le=200, description="Entries per page.")]

#: For single documents: the result's size in characters; longer texts are cut with a marker.
MAX_CHARS_CEILING = 80_000
MaxChars = Annotated[
    int,
    Field(ge=2_000, le=MAX_CHARS_CEILING, description="Cap on result size; texts are cut to fit."),
]
#: Lets Claude Code keep a result of ``MAX_CHARS_CEILING`` inline (its default limit is 50,000).
RESULT_CHARS = 100_000
