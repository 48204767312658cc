"""The conformance kit runs handlers for real and flags one that blocks the event loop."""

from __future__ import annotations

import textwrap

import pytest
from fixture_plugins import BLOCKING, POLITE

from gateway.testing import assert_plugin_conforms


@pytest.fixture
def installed(plugin_site):
    plugin_site(
        "gwfx-loop",
        {"polite": "gwfx_polite", "blocking": "gwfx_blocking"},
        {"gwfx_polite": POLITE, "gwfx_blocking": BLOCKING},
    )


def test_a_handler_that_blocks_the_loop_is_flagged_with_its_line(installed, tmp_path):
    with pytest.raises(AssertionError) as info:
        assert_plugin_conforms("blocking", cwd=tmp_path)
    message = str(info.value)
    assert 'tool \'blocking_read\' called with {"job_id": "' in message  # a guessed UUID
    assert "blocked the event loop for 1.5 s (more than 1 s)" in message
    line = textwrap.dedent(BLOCKING).splitlines().index("    time.sleep(1.5)") + 1
    assert f"site/gwfx_blocking.py:{line} in slow_query" in message  # the blocking line
    assert "ctx.run_sync" in message


def test_awaiting_for_long_is_fine_and_unguessable_arguments_come_from_calls(installed, tmp_path):
    assert_plugin_conforms("polite", cwd=tmp_path)  # polite_wait awaits 1.2 s: not a block
    with pytest.raises(
        AssertionError, match=r"tool 'polite_by_code' called with \{\"code\": \"N-007\"\}"
    ):
        assert_plugin_conforms(
            "polite", cwd=tmp_path, calls={"polite_by_code": [{"code": "N-007"}]}
        )
    with pytest.raises(AssertionError, match="blocked the event loop"):
        assert_plugin_conforms(
            "polite", cwd=tmp_path, calls={"polite_wait": [{"seconds": 0}]}, max_loop_block=0.0001
        )


def test_calls_must_name_the_plugins_tools(installed, tmp_path):
    with pytest.raises(AssertionError, match="does not have"):
        assert_plugin_conforms("polite", cwd=tmp_path, calls={"nope": [{}]})
