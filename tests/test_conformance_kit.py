"""The conformance kit runs handlers for real and flags one that blocks the event loop."""

from __future__ import annotations

import re
import subprocess
import sys
import textwrap

import pytest
from fixture_plugins import BLOCKING, POLITE

from gateway.testing import assert_plugin_conforms, run_check


@pytest.fixture
def installed(plugin_site):
    plugin_site(
        "gwfx-loop",
        {"polite": "gwfx_polite", "blocking": "gwfx_blocking"},
        {"gwfx_polite": POLITE, "gwfx_blocking": BLOCKING},
    )


@pytest.mark.anyio
async def test_a_handler_that_blocks_the_loop_is_flagged_with_its_line(installed, tmp_path):
    with pytest.raises(AssertionError) as info:
        await assert_plugin_conforms("blocking", cwd=tmp_path)
    message = str(info.value)
    assert 'tool \'blocking_read\' called with {"job_id": "' in message  # a guessed UUID
    # At least the 1.5 s the handler sleeps; a busy machine adds to it.
    blocked = re.search(r"blocked the event loop for (\d+\.\d) s \(more than 1 s\)", message)
    assert blocked is not None and float(blocked[1]) >= 1.5, message
    line = textwrap.dedent(BLOCKING).splitlines().index("    time.sleep(1.5)") + 1
    assert f"site/gwfx_blocking.py:{line} in slow_query" in message  # the blocking line
    assert "ctx.run_sync" in message


def test_awaiting_for_long_is_fine_and_unguessable_arguments_come_from_calls(installed, tmp_path):
    # A sync test runs the checks with run_check.
    run_check(assert_plugin_conforms("polite", cwd=tmp_path))  # polite_wait awaits 1.2 s
    with pytest.raises(
        AssertionError, match=r"tool 'polite_by_code' called with \{\"code\": \"N-007\"\}"
    ):
        run_check(
            assert_plugin_conforms(
                "polite", cwd=tmp_path, calls={"polite_by_code": [{"code": "N-007"}]}
            )
        )
    with pytest.raises(AssertionError, match="blocked the event loop"):
        run_check(
            assert_plugin_conforms(
                "polite",
                cwd=tmp_path,
                calls={"polite_wait": [{"seconds": 0}]},
                max_loop_block=0.0001,
            )
        )


@pytest.mark.anyio
async def test_calls_must_name_the_plugins_tools(installed, tmp_path):
    with pytest.raises(AssertionError, match="does not have"):
        await assert_plugin_conforms("polite", cwd=tmp_path, calls={"nope": [{}]})


NEVER_RUN = """
import pytest
from gateway.testing import assert_backend_tools_degrade, assert_plugin_conforms


def test_sync_without_run_check(tmp_path):
    assert_plugin_conforms("polite", cwd=tmp_path)


@pytest.mark.anyio
async def test_async_without_await(tmp_path):
    assert_backend_tools_degrade("polite", cwd=tmp_path)
"""


def test_a_check_that_is_never_run_fails_its_test_and_says_how_to_run_it(tmp_path):
    (tmp_path / "test_never_run.py").write_text(NEVER_RUN)
    run = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-rf", str(tmp_path)],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=120,
    )
    out = run.stdout + run.stderr
    assert run.returncode == 1, out
    assert "2 failed" in out
    assert "assert_plugin_conforms('polite') was never run: `await` it in an async test" in out
    assert "assert_backend_tools_degrade('polite') was never run" in out
    assert "run_check(...) on it in a sync test" in out
