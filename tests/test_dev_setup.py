"""The deployment `python3 dev.py run` serves holds the first-party plugins only; the example
plugin is installed for the test run alone (on its PYTHONPATH), never offered to a client."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent
EXAMPLES_SITE = REPO / ".venv" / "examples-site"


def _entry_points(pythonpath: str | None) -> set[str]:
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    if pythonpath:
        env["PYTHONPATH"] = pythonpath
    code = (
        "import importlib.metadata as md, json;"
        "print(json.dumps(sorted(e.name for e in md.entry_points(group='mcp_gateway.plugins'))))"
    )
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True)
    return set(json.loads(out.stdout))


@pytest.mark.skipif(not EXAMPLES_SITE.is_dir(), reason="run through `python3 dev.py test`")
def test_deployment_venv_offers_no_example_plugin():
    deployed = _entry_points(None)
    assert {"queue", "scrape", "gitea"} <= deployed
    assert "notes" not in deployed
    assert "notes" in _entry_points(str(EXAMPLES_SITE))
