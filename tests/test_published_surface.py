"""``tools/list``, ``prompts/list`` and the instructions stay byte for byte what the snapshot
pins (with every first-party plugin and both backends): a change to what the model pays for on
every turn must be deliberate, and shows in the snapshot's diff (see ``published.py``)."""

from __future__ import annotations

import json

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
    """The first start writes the schema cache, the next reads it: both publish the snapshot."""
    env = {"XDG_CACHE_HOME": str(tmp_path)}
    expected = SNAPSHOT.read_text(encoding="ascii")
    folder = tmp_path / "mcp-gateway" / "schemas"
    assert render(published(env)) == expected
    entries = {e: e.stat().st_mtime_ns for e in sorted(folder.glob("*.json"))}
    assert [e.name.rsplit("-", 1)[0] for e in entries] == PLUGINS
    assert render(published(env)) == expected
    # read, not built and written again
    assert {e: e.stat().st_mtime_ns for e in sorted(folder.glob("*.json"))} == entries
