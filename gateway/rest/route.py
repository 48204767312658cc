"""One HTTP call of a tool, as data: method, path, what goes where, how statuses are answered.

```python
JOB = Route("GET", "/api/jobs/{job_id}", what="job {job_id}", status={404: "no job {job_id}"})
```
Path placeholders are filled from the values of the same name (percent-encoded as one segment),
the names in ``query`` go into the query string and those in ``body`` into a JSON object
(``None`` values are left out), ``rename`` maps a value's name to the name on the wire. ``what``
names the call in messages, filled from the same values; so are ``status`` templates (by the
value's name or its wire name), and a :class:`~gateway.rest.RestTool` whose template names
something no argument is refuses to register. A route is cheap, immutable data:
declare it once at module level and send it from any number of tools.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal

from pydantic import BaseModel

from ..errors import FAILURE_FIELDS, StatusRule, template_fields

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
            # Templates name the arguments as the tool's model does, or as the wire does.
            values={**{wire(n, n): v for n, v in values.items()}, **values},
        )

    def unfilled(self, fields: Iterable[str]) -> list[tuple[int, str]]:
        """The ``(status, placeholder)`` pairs of ``status`` templates that neither the failure
        (``{reason}``, ``{status}``, ``{what}``, ``{title}``) nor one of ``fields`` (the
        arguments, by name or wire name) can fill."""
        known = {*FAILURE_FIELDS, *fields}
        known |= {self.rename[n] for n in known if n in self.rename}
        return [
            (code, name)
            for code, rule in self.status.items()
            for name in template_fields(rule)
            if name not in known
        ]


def _plain(value: Any) -> Any:
    if isinstance(value, BaseModel):
        return value.model_dump(mode="json")
    if isinstance(value, list | tuple):
        return [_plain(v) for v in value]
    return value
