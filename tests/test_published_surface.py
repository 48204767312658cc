"""``tools/list``, ``prompts/list`` and the instructions stay byte for byte what the snapshot
pins (with every first-party plugin and both backends): a change to what the model pays for on
every turn must be deliberate, and shows in the snapshot's diff (see ``published.py``)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import published as published_module
from published import PLUGINS, SNAPSHOT, published, render


def test_what_clients_are_shown_matches_the_snapshot_byte_for_byte():
    surface = published()
    assert len(surface["tools"]) == 47 and len(surface["prompts"]) == 5
    plugins = {
        line.split(":")[0].removeprefix("- ") for line in surface["instructions"].splitlines()
    }
    assert set(PLUGINS) <= plugins, "a first-party plugin is not installed"
    expected = SNAPSHOT.read_text(encoding="ascii")
    actual = render(surface)
    if actual != expected:
        want = {t["name"]: t for t in json.loads(expected)["tools"]}
        changed = [t["name"] for t in surface["tools"] if want.get(t["name"]) != t]
        raise AssertionError(
            f"the published surface differs from {SNAPSHOT.name} (tools changed: {changed}); "
            "if deliberate, regenerate it with `.venv/bin/python tests/published.py --write`"
        )


def test_schemas_from_the_schema_cache_are_the_same_bytes(tmp_path):
    """The first start writes the schema cache, the next reads it: both publish the snapshot.
    Each is a process of its own (in one, schemas are generated once per model anyway)."""
    expected = SNAPSHOT.read_text(encoding="ascii")
    cache = tmp_path / "mcp-gateway" / "schemas" / "schemas.json"
    script = (
        "import sys, published; "
        f"sys.stdout.write(published.render(published.published({{'XDG_CACHE_HOME': {str(tmp_path)!r}}})))"
    )

    def start() -> str:
        proc = subprocess.run(
            [sys.executable, "-c", script],
            cwd=Path(published_module.__file__).parent,
            capture_output=True,
            text=True,
            timeout=120,
        )
        assert proc.returncode == 0, proc.stderr[-2000:]
        return proc.stdout

    assert start() == expected
    written = cache.stat().st_mtime_ns
    assert start() == expected
    # Every schema was found: a start that had to generate one writes the file again.
    assert cache.stat().st_mtime_ns == written
