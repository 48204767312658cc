"""Every line on stdin gets the answer JSON-RPC requires, garbage included."""

from __future__ import annotations

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
