"""Every line on stdin gets the answer JSON-RPC requires, garbage included."""

from __future__ import annotations

import json
import time

import pytest
from conftest import gateway_env
from wire import StdioServer

pytestmark = pytest.mark.e2e


def test_lines_that_are_not_json_rpc_messages_are_answered_and_serving_goes_on(tmp_path):
    env = gateway_env(MCP_GATEWAY_PLUGINS="gateway")
    deep = b'{"jsonrpc":"2.0","id":9,"method":"tools/call","params":{"arguments":' + (
        b"[" * 100_000 + b"]" * 100_000 + b"}}"
    )
    with StdioServer(tmp_path, env) as server:
        for line, code, ident in (
            (b"garbage", -32700, None),
            (b'{"jsonrpc": "2.0", "id": 3, "method": ', -32700, None),
            (deep, -32700, None),
            (b"[1, 2]", -32600, None),
            (b'{"id": 5, "hello": "world"}', -32600, 5),
            (b'{"jsonrpc": "2.0", "id": "a", "method": 7}', -32600, "a"),
        ):
            server.send_raw(b"   ")  # blank lines are not messages: no answer
            server.send_raw(line)
            answer = server.read_message()
            assert answer["error"]["code"] == code, (line[:40], answer)
            assert answer["id"] == ident
        assert server.request("tools/list")["result"]["tools"]


def test_a_message_longer_than_the_read_buffer_and_one_sent_in_pieces_are_read_whole(tmp_path):
    env = gateway_env(MCP_GATEWAY_PLUGINS="gateway")
    with StdioServer(tmp_path, env) as server:
        # 3 MB on one line: over the megabyte the event loop buffers before it reads on.
        big = {"check_health": False, "padding": "x" * 3_000_000}
        answer = server.request("tools/call", {"name": "gateway_status", "arguments": big})
        error = json.loads(answer["result"]["content"][0]["text"])["error"]
        assert error["code"] == "VALIDATION_ERROR" and "padding" in error["message"]
        line = json.dumps(
            {"jsonrpc": "2.0", "id": 77, "method": "tools/list", "params": {}}
        ).encode()
        assert server.proc.stdin is not None
        for piece in (line[:10], line[10:30], line[30:] + b"\n"):
            server.proc.stdin.write(piece)
            server.proc.stdin.flush()
            time.sleep(0.05)
        answer = server.read_message()
        assert answer["id"] == 77 and answer["result"]["tools"]
