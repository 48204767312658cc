"""The core distribution ships every subpackage of ``gateway``.

The editable install the tests run on finds any folder, so a package missing from
``[tool.setuptools] packages`` only shows in a real (wheel) install, as an ImportError.
"""

from __future__ import annotations

import tomllib
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent


def test_every_gateway_package_is_in_the_distribution():
    config = tomllib.loads((REPO / "pyproject.toml").read_text())
    listed = set(config["tool"]["setuptools"]["packages"])
    found = {
        ".".join(init.parent.relative_to(REPO).parts)
        for init in (REPO / "gateway").rglob("__init__.py")
    }
    assert listed == found
