"""One HTTP call of a tool, as data: method, path, what goes where, how statuses are answered.

```python
JOB = Route("GET", "/api/jobs/{job_id}", what="job {job_id}", status={404: "no job {job_id}"})
```
Path placeholders are filled from the values of the same name (percent-encoded as one segment),
the names in ``query`` go into the query string and those in ``body`` into a JSON object
(``None`` values are left out), ``rename`` maps a value's name to the name on the wire. ``what``
names the call in messages, filled from the same values. A route is cheap, immutable data:
declare it once at module level and send it from any number of tools.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal

from pydantic import BaseModel

from .status import StatusRule

if TYPE_CHECKING:
    from .client import Answer, RestClient

Method = Literal["GET", "POST", "PUT", "PATCH", "DELETE"]
_PLACEHOLDER = re.compile(r"\{(\w+)\}")


@dataclass(frozen=True)
class Route:
    """One HTTP call. ``what`` is a noun phrase for messages, filled from the values
    ("job {job_id}"); ``status`` overrides answers per status code; ``allow_null`` accepts an
    empty (``null``) answer; ``body=None`` sends no body at all, ``body=()`` an empty object."""

    method: Method
    path: str
    query: tuple[str, ...] = ()
    body: tuple[str, ...] | None = None
    rename: Mapping[str, str] = field(default_factory=dict)
    status: Mapping[int, StatusRule] = field(default_factory=dict)
    what: str | None = None
    allow_null: bool = False

    def describe(self, values: Mapping[str, Any]) -> str:
        if self.what is None:
            return f"{self.method} {self.path}"
        try:
            return self.what.format_map(dict(values))
        except (KeyError, IndexError, ValueError):
            return self.what

    async def send(self, client: RestClient, args: BaseModel | Mapping[str, Any]) -> Any:
        """Send this route with values taken from ``args`` and return the decoded JSON."""
        return (await self.request(client, args)).data

    async def request(self, client: RestClient, args: BaseModel | Mapping[str, Any]) -> Answer:
        """Send this route with values taken from ``args``: the answer with its size."""
        values = dict(args)
        wire = self.rename.get
        path_params = {name: values.get(name) for name in _PLACEHOLDER.findall(self.path)}
        params = {wire(n, n): _plain(values.get(n)) for n in self.query}
        json_body = (
            None
            if self.body is None
            else {wire(n, n): _plain(values[n]) for n in self.body if values.get(n) is not None}
        )
        return await client.answer(
            self.method,
            self.path,
            path_params=path_params,
            params=params,
            json_body=json_body,
            status=self.status,
            what=self.describe(values),
            allow_null=self.allow_null,
        )


def _plain(value: Any) -> Any:
    if isinstance(value, BaseModel):
        return value.model_dump(mode="json")
    if isinstance(value, list | tuple):
        return [_plain(v) for v in value]
    return value
