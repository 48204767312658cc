"""`gateway.testing` is a pytest plugin loaded by every pytest run wherever the core is
installed: loading it must not import the server stack, which only the helpers that serve use."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap

SERVER_STACK = ("mcp", "starlette", "uvicorn", "httpx")


def _loaded(code: str) -> list[str]:
    probe = f"import sys, json\n{code}\nprint(json.dumps([m for m in {SERVER_STACK!r} if m in sys.modules]))"
    out = subprocess.run(
        [sys.executable, "-c", probe], capture_output=True, text=True, timeout=60, check=True
    )
    loaded: list[str] = json.loads(out.stdout.splitlines()[-1])
    return loaded


def test_importing_the_kit_imports_no_server_stack():
    assert _loaded("import gateway.testing") == []
    # The helpers that need it import it when used: the in-process MCP client does.
    assert "mcp" in _loaded(
        "import anyio\n"
        "from gateway.testing import gateway_client, make_gateway\n"
        "async def main():\n"
        "    async with gateway_client(make_gateway(plugins=[], entry_points=False)):\n"
        "        pass\n"
        "anyio.run(main)"
    )


def test_a_pytest_run_that_loads_the_kit_imports_no_server_stack(tmp_path):
    (tmp_path / "test_probe.py").write_text(
        textwrap.dedent(
            f"""
            import sys

            def test_probe(pytestconfig):
                assert pytestconfig.pluginmanager.has_plugin("mcp_gateway")
                assert [m for m in {SERVER_STACK!r} if m in sys.modules] == []
            """
        )
    )
    run = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", str(tmp_path)],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert run.returncode == 0, run.stdout + run.stderr
