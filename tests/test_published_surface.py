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
