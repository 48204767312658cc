"""What a client is shown, as one JSON document: ``tools/list``, ``prompts/list`` and the
server instructions, with all five first-party plugins installed and both backends configured.

Every byte of it is context the model pays for on every turn, so it is pinned by a committed
snapshot (``tests/golden/published.json``) that ``test_published_surface.py`` compares against.
After a deliberate change to a tool, a prompt or the instructions, regenerate the snapshot::

    .venv/bin/python tests/published.py --write

and review its diff like code.
"""

from __future__ import annotations

import json
import sys
import tempfile
from pathlib import Path
from typing import Any

import anyio

SNAPSHOT = Path(__file__).resolve().parent / "golden" / "published.json"
PLUGINS = ["citations", "gitea", "orchestrator", "queue", "scrape"]
#: Both REST backends configured (their URLs are never contacted: listing does no I/O).
ENV = {"COCKPIT_API_URL": "http://127.0.0.1:9", "GITEA_URL": "http://127.0.0.1:9"}


async def _published(cwd: Path, env: dict[str, str]) -> dict[str, Any]:
    from gateway.testing import gateway_client, make_gateway

    gw = make_gateway(plugins=PLUGINS, env={**ENV, **env}, cwd=cwd)
    async with gw, gateway_client(gw) as client:
        tools = (await client.list_tools()).tools
        prompts = (await client.list_prompts()).prompts
        instructions = client.instructions
    return {
        "instructions": instructions,
        "prompts": [p.model_dump(mode="json", by_alias=True, exclude_none=True) for p in prompts],
        "tools": [t.model_dump(mode="json", by_alias=True, exclude_none=True) for t in tools],
    }


def published(env: dict[str, str] | None = None) -> dict[str, Any]:
    """The published surface, gathered in a throw-away data root (``env``: more variables)."""
    with tempfile.TemporaryDirectory() as tmp:
        return anyio.run(_published, Path(tmp), dict(env or {}))


def render(surface: dict[str, Any]) -> str:
    """The snapshot's exact text: sorted keys, one-space indents, ASCII, a final newline."""
    return json.dumps(surface, indent=1, sort_keys=True) + "\n"


def main(argv: list[str]) -> int:
    text = render(published())
    if argv == ["--write"]:
        SNAPSHOT.parent.mkdir(parents=True, exist_ok=True)
        SNAPSHOT.write_text(text, encoding="ascii")
        print(f"wrote {SNAPSHOT.name}", file=sys.stderr)
        return 0
    if argv:
        print(__doc__, file=sys.stderr)
        return 2
    sys.stdout.write(text)
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
