"""A plugin's BaseException is that plugin's failure; only a real signal stops the gateway, and
stopping closes every plugin's resources first."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time

import pytest
from conftest import gateway_env
from fixture_plugins import GOOD
from wire import HttpServer, StdioServer

from gateway.plugins import PluginState
from gateway.testing import make_gateway

RAISES = {
    "keyboard_interrupt": "KeyboardInterrupt()",
    "cancelled": "asyncio.CancelledError()",
    "generator_exit": "GeneratorExit()",
    "group": 'BaseExceptionGroup("several", [KeyboardInterrupt(), ValueError("x")])',
    "custom": "Boom()",
}
HOOKS = [
    "import",
    "plugin_settings",
    "register_tools",
    "register_prompts",
    "register_health_checks",
    "register_servers",
    "open_resources",
]
_PRELUDE = """
import asyncio
from pydantic import BaseModel
from gateway import hookimpl

class Boom(BaseException):
    pass
"""


#: What these tests stop is the gateway's own process with its plugins in it (they read
#: variables they do not declare, as only a plugin in process can); a worker's stop is in
#: test_isolated.py.
IN_PROCESS = "none"


def _raising_plugin(hook: str, raise_: str) -> str:
    if hook == "import":
        return _PRELUDE + f"raise {raise_}\n"
    args = {"plugin_settings": "", "open_resources": "plugin"}.get(hook, "register")
    prefix = "async " if hook == "open_resources" else ""
    return _PRELUDE + f"@hookimpl\n{prefix}def {hook}({args}):\n    raise {raise_}\n"


@pytest.mark.anyio
@pytest.mark.parametrize("kind", list(RAISES))
@pytest.mark.parametrize("hook", HOOKS)
async def test_a_base_exception_from_any_load_step_fails_only_that_plugin(
    plugin_site, tmp_path, hook, kind
):
    module = f"gwfx_be_{hook}_{kind}"
    plugin_site(
        "gwfx-be",
        {"raiser": module, "good": "gwfx_be_good"},
        {module: _raising_plugin(hook, RAISES[kind]), "gwfx_be_good": GOOD},
    )
    gw = make_gateway(plugins=["raiser", "good"], cwd=tmp_path)
    async with gw:
        raiser = gw.plugin("raiser")
        assert raiser is not None and raiser.state is PluginState.FAILED, raiser
        assert hook.replace("import", "failed to import") in (raiser.reason or "")
        assert (await gw.call("good_echo", {"text": "hi"})).payload == {"echo": "hi"}


CLOSE_AND_CHECK = """
import asyncio, os
from pathlib import Path
from pydantic import BaseModel, ConfigDict
from gateway import HealthCheck, ToolSpec, hookimpl

class Boom(BaseException):
    pass

class In(BaseModel):
    model_config = ConfigDict(extra="forbid")

async def ping(args, ctx):
    return {"pong": True}

async def check():
    raise {raise_}

@hookimpl
def register_tools(register):
    register(ToolSpec(name="ping", description="d", input_model=In, handler=ping, tier="read"))

@hookimpl
def register_health_checks(register):
    register(HealthCheck(name="bad", check=check))

@hookimpl
async def close_resources(plugin):
    Path(os.environ["CLOSED_MARKER"]).write_text("closed")
    raise {raise_}
"""


@pytest.mark.anyio
@pytest.mark.parametrize("kind", list(RAISES))
async def test_a_base_exception_from_a_health_check_or_close_resources_is_contained(
    plugin_site, tmp_path, monkeypatch, kind
):
    monkeypatch.setenv("CLOSED_MARKER", str(tmp_path / "closed"))
    module = f"gwfx_cc_{kind}"
    plugin_site(
        "gwfx-cc", {"cc": module}, {module: CLOSE_AND_CHECK.replace("{raise_}", RAISES[kind])}
    )
    gw = make_gateway(plugins=["cc"], cwd=tmp_path)
    async with gw:
        status = await gw.call("gateway_status", {"check_health": True})
        assert not status.is_error
        [check] = next(p for p in status.payload["plugins"] if p["name"] == "cc")["health"]
        assert check["status"] == "failed"
    assert (tmp_path / "closed").read_text() == "closed"  # and stop() returned


@pytest.mark.e2e
def test_a_close_resources_raising_keyboard_interrupt_still_exits_0(plugin_site, tmp_path):
    source = CLOSE_AND_CHECK.replace("{raise_}", "KeyboardInterrupt()")
    plugin_site("gwfx-ccki", {"cc": "gwfx_ccki"}, {"gwfx_ccki": source})
    env = gateway_env(
        PYTHONPATH=os.environ["PYTHONPATH"],
        MCP_GATEWAY_ISOLATE=IN_PROCESS,
        MCP_GATEWAY_PLUGINS="cc",
        CLOSED_MARKER=str(tmp_path / "closed"),
    )
    with StdioServer(tmp_path, env) as server:
        assert server.call("ping")["structuredContent"] == {"pong": True}
        assert server.proc.stdin is not None
        server.proc.stdin.close()
        assert server.wait() == 0, server.stderr()
    assert (tmp_path / "closed").exists()


#: A plugin whose background code does what must not end the process, on request.
BACKGROUND = """
import _thread, asyncio, os, sys, threading, time
from pathlib import Path
from pydantic import BaseModel, ConfigDict
from gateway import ToolSpec, hookimpl
from gateway import lifecycle

# The stubborn task outlives any wait at the stop; the default 5 s would be half the test.
lifecycle.SHUTDOWN_WAIT = 0.5

class In(BaseModel):
    model_config = ConfigDict(extra="forbid")
    what: str = ""

async def _later(exc):
    await asyncio.sleep(0.05)
    raise exc

async def _stubborn():
    while True:
        try:
            await asyncio.sleep(10)
        except asyncio.CancelledError:
            pass

async def trigger(args, ctx):
    loop = asyncio.get_running_loop()
    if args.what == "task_exit":
        loop.create_task(_later(SystemExit(3)))
    elif args.what == "task_interrupt":
        loop.create_task(_later(KeyboardInterrupt()))
    elif args.what == "callback_exit":
        loop.call_soon(sys.exit, 4)
    elif args.what == "interrupt_main":
        threading.Thread(target=_thread.interrupt_main).start()
    elif args.what == "interrupt_main_term":
        import signal
        threading.Thread(target=_thread.interrupt_main, args=(signal.SIGTERM,)).start()
    elif args.what == "stubborn":  # a task that ignores cancellation, forever
        loop.create_task(_stubborn())
    await asyncio.sleep(0.15)  # each trigger goes off (after 0.05 s at most) during the call
    return {"triggered": args.what}

async def ping(args, ctx):
    return {"pong": True}

@hookimpl
def register_tools(register):
    register(ToolSpec(name="trigger", description="d", input_model=In, handler=trigger,
                      tier="read"))
    register(ToolSpec(name="ping", description="d", input_model=In, handler=ping, tier="read"))

@hookimpl
def close_resources(plugin):
    Path(os.environ["CLOSED_MARKER"]).write_text("closed")
"""
TRIGGERS = [
    "task_exit",
    "task_interrupt",
    "callback_exit",
    "interrupt_main",
    "interrupt_main_term",
    "stubborn",
]


@pytest.fixture
def background(plugin_site, tmp_path):
    plugin_site("gwfx-bg", {"bg": "gwfx_bg"}, {"gwfx_bg": BACKGROUND})
    return gateway_env(
        PYTHONPATH=os.environ["PYTHONPATH"],
        MCP_GATEWAY_ISOLATE=IN_PROCESS,
        MCP_GATEWAY_PLUGINS="bg",
        CLOSED_MARKER=str(tmp_path / "closed"),
    )


@pytest.mark.e2e
@pytest.mark.parametrize("server_class", [StdioServer, HttpServer])
def test_background_system_exit_keyboard_interrupt_and_interrupt_main_end_nothing(
    background, tmp_path, server_class
):
    with server_class(tmp_path, background) as server:
        for what in TRIGGERS:
            server.call("trigger", {"what": what})
            time.sleep(0.1)
            assert server.proc.poll() is None, (what, server.stderr())
            assert server.call("ping")["structuredContent"] == {"pong": True}, what
        assert not (tmp_path / "closed").exists()
        server.signal(signal.SIGTERM)  # and a real signal still stops it, cleanly
        assert server.wait() == 0
    assert (tmp_path / "closed").exists()
    assert "ignored a simulated SIGINT" in server.stderr()


@pytest.mark.e2e
@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGHUP, signal.SIGINT])
def test_a_stop_signal_closes_plugin_resources_then_exits_0_on_stdio(background, tmp_path, signum):
    with StdioServer(tmp_path, background) as server:
        assert server.call("ping")["structuredContent"] == {"pong": True}
        server.signal(signum)
        assert server.wait() == 0, server.stderr()
    assert (tmp_path / "closed").read_text() == "closed"


@pytest.mark.e2e
@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGHUP])
def test_a_stop_signal_closes_plugin_resources_then_exits_0_over_http(background, tmp_path, signum):
    with HttpServer(tmp_path, background) as server:
        assert server.call("ping")["structuredContent"] == {"pong": True}
        assert server.stop(signum) == 0, server.stderr()
    assert (tmp_path / "closed").read_text() == "closed"


SLOW_IMPORT = """
import os, pathlib, time
pathlib.Path(os.environ["IMPORTING_MARKER"]).touch()
time.sleep(30)
"""


@pytest.mark.e2e
def test_a_real_signal_during_plugin_import_still_stops_start_up(plugin_site, tmp_path):
    plugin_site("gwfx-slow", {"slow": "gwfx_slow"}, {"gwfx_slow": SLOW_IMPORT})
    importing = tmp_path / "importing"
    env = gateway_env(
        PYTHONPATH=os.environ["PYTHONPATH"],
        MCP_GATEWAY_ISOLATE=IN_PROCESS,
        MCP_GATEWAY_PLUGINS="slow",
        MCP_GATEWAY_LOAD_TIMEOUT="60",
        IMPORTING_MARKER=str(importing),
    )
    with StdioServer(tmp_path, env, initialize=False) as server:
        deadline = time.monotonic() + 60
        while not importing.exists():  # however long the interpreter takes to get there
            assert time.monotonic() < deadline, server.stderr()
            time.sleep(0.05)
        server.signal(signal.SIGTERM)
        assert server.wait(timeout=10) == 0
        assert "Traceback" not in server.stderr()


@pytest.mark.e2e
def test_an_unread_stderr_neither_wedges_the_http_server_nor_its_sigterm(plugin_site, tmp_path):
    chatty = BACKGROUND.replace(
        'async def ping(args, ctx):\n    return {"pong": True}',
        "async def ping(args, ctx):\n    for i in range(20000):\n"
        '        ctx.logger.warning("line %d %s", i, "x" * 200)\n    return {"pong": True}',
    )
    plugin_site("gwfx-chatty", {"bg": "gwfx_chatty"}, {"gwfx_chatty": chatty})
    env = gateway_env(
        PYTHONPATH=os.environ["PYTHONPATH"],
        MCP_GATEWAY_ISOLATE=IN_PROCESS,
        MCP_GATEWAY_PLUGINS="bg",
        CLOSED_MARKER=str(tmp_path / "closed"),
    )
    with HttpServer(tmp_path, env, stderr=subprocess.PIPE) as server:  # never read
        for _ in range(3):  # 12 MB of log lines, far more than a pipe holds
            assert server.call("ping")["structuredContent"] == {"pong": True}
        started = time.monotonic()
        assert server.stop(signal.SIGTERM, timeout=15) == 0
        assert time.monotonic() - started < 10
    assert (tmp_path / "closed").exists()


LOOP_STARTING = """
import os, signal, sys, warnings
import anyio
from gateway.lifecycle import SignalGuard, run

warnings.simplefilter("error")  # a coroutine never awaited, a task destroyed pending
with SignalGuard() as guard:
    async def serve():
        with anyio.CancelScope() as scope, guard.serving(scope.cancel):
            with anyio.fail_after(20):
                await anyio.sleep_forever()
        print("served until the stop")

    def main():
        os.kill(os.getpid(), signal.{sig})  # arrives while run() sets its loop up
        return serve()

    run(main, guard)
print("received", signal.Signals(guard.received).name)
"""


@pytest.mark.e2e
@pytest.mark.parametrize("sig", ["SIGINT", "SIGTERM"])
def test_a_real_signal_while_the_loop_starts_stops_the_server_once_it_serves(sig):
    # Ctrl-C typed just after "serving ... Ctrl-C to stop" can land in asyncio's own set-up
    # (creating the main task): raised there, it left "Task was destroyed but it is pending"
    # and "coroutine ... was never awaited" on the person's terminal.
    done = subprocess.run(
        [sys.executable, "-X", "dev", "-c", LOOP_STARTING.replace("{sig}", sig)],
        env=gateway_env(PYTHONPATH=os.environ["PYTHONPATH"]),
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.split("\n") == ["served until the stop", f"received {sig}", ""]
    assert "Traceback" not in done.stderr and "never awaited" not in done.stderr, done.stderr
