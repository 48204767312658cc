"""``mcp-gateway``: serve, and inspect what a deployment will serve.

Everything printed for people goes to stdout, except under ``serve`` (stdio), where stdout
is the protocol and logs go to stderr.
"""

from __future__ import annotations

import argparse
import contextlib
import gc
import json
import sys
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any, NoReturn

from .configkit import ConfigError

if TYPE_CHECKING:
    from .app import Gateway, HealthResult
    from .config import GatewayConfig
    from .errors import Sanitizer
    from .plugins import PluginRecord
    from .telemetry import Telemetry

    #: A subcommand other than ``serve``, set on its parser with ``set_defaults(func=...)``: it
    #: reports on the built gateway through ``emit`` (stdout) and returns the exit status.
    _Command = Callable[[argparse.Namespace, GatewayConfig, Gateway, Callable[[str], None]], int]

BUILTIN = "gateway"
#: A bearer token guarding a non-loopback address must be at least this long.
MIN_TOKEN_CHARS = 16


def installed_plugins() -> dict[str, tuple[str, str]]:
    """Entry point name → (distribution, version), from metadata alone: nothing is imported."""
    from .entrypoints import installed_plugins as installed

    return {p.name: (p.distribution, p.version) for p in installed()}


def versions() -> str:
    import importlib.metadata as md

    from . import __version__

    try:
        core = md.version("mcp-plugin-gateway")
    except md.PackageNotFoundError:  # pragma: no cover - running from a bare source tree
        core = __version__
    lines = [f"mcp-plugin-gateway {core}"]
    for name, (dist, version) in sorted(installed_plugins().items()):
        lines.append(f"plugin {name}: {dist} {version}")
    return "\n".join(lines)


class _Version(argparse.Action):
    def __call__(
        self,
        parser: argparse.ArgumentParser,
        namespace: argparse.Namespace,
        values: str | Sequence[Any] | None,
        option_string: str | None = None,
    ) -> None:
        sys.stdout.write(versions() + "\n")
        parser.exit()


class _Help(argparse.HelpFormatter):
    """Wraps each paragraph of a description to the terminal; keeps indented lines (the
    examples) as written."""

    def _fill_text(self, text: str, width: int, indent: str) -> str:
        return "\n".join(
            indent + line
            if line.startswith("  ")
            else super(_Help, self)._fill_text(line, width, indent)
            for line in text.splitlines()
        )


class _Parser(argparse.ArgumentParser):
    """A command-line mistake is one line, like a configuration mistake, and exit code 2."""

    def error(self, message: str) -> NoReturn:
        self.exit(2, f"mcp-gateway: {message} (see {self.prog} --help)\n")


def _port(text: str) -> int:
    try:
        port = int(text)
    except ValueError:
        port = -1
    if not 0 <= port <= 65535:
        raise argparse.ArgumentTypeError(
            f"{text[:20]!r} is not a port: use 1 to 65535 (0: any free port)"
        )
    return port


def _host(text: str) -> str:
    """An IP address, or a host name this machine resolves: a typo (``127.0.0.l``) is said to
    be one, not taken for a non-loopback address that needs a token."""
    import ipaddress
    import socket

    try:
        ipaddress.ip_address(text.strip("[]"))
        return text
    except ValueError:
        pass
    try:
        socket.getaddrinfo(text, None, type=socket.SOCK_STREAM)
    except (OSError, UnicodeError):
        raise argparse.ArgumentTypeError(
            f"{text[:80]!r} is neither an IP address nor a host name this machine resolves"
        ) from None
    return text


#: What each command does, its options' help and an example (its ``--help``).
_COMMANDS: dict[str, tuple[str, str, str]] = {
    "serve": (
        "run the MCP server (stdio by default)",
        "Serve the installed plugins' tools over MCP: over stdio (what Claude Code starts) or, "
        "with --transport http, as Streamable HTTP at /mcp, with /healthz and /readyz. A "
        "configuration mistake stops it with exit code 2 and one line on stderr.",
        "mcp-gateway serve\n"
        "  mcp-gateway --config gw.toml serve --transport http --host 127.0.0.1 --port 8765",
    ),
    "plugins": (
        "list plugins: name, version, state, reason, tool count",
        "List the installed plugins: name, version, state (loaded, failed, disabled), why, the "
        "tools not offered and the variable that enables them, tool count. Exit code 2 when a "
        "plugin's settings do not fit (the table still shows every plugin).",
        "mcp-gateway plugins\n  mcp-gateway plugins --json",
    ),
    "tools": (
        "list the tools a client will see: name, plugin, tier",
        "List the tools a client is offered: name, plugin, tier, title; with --sizes, what "
        "each costs the model's context on every turn.",
        "mcp-gateway tools\n  mcp-gateway tools --sizes --json",
    ),
    "health": (
        "run health checks; exit 1 if a required check fails",
        "Run every plugin's health checks once. Exit code 1 when a required check fails or a "
        "plugin failed to load, 2 when a plugin's settings do not fit; an unconfigured "
        "backend is reported, not a failure.",
        "mcp-gateway health\n  MCP_GATEWAY_PLUGINS=gitea mcp-gateway health --json",
    ),
    "servers": (
        "the MCP servers mounted behind the gateway: approve their tools",
        "Manage the MCP servers mounted behind the gateway ([servers.<name>] tables or "
        "MCP_GATEWAY_SERVERS). 'approve' starts the servers (or those named), lists their tools "
        "and records those definitions as the approved ones, printing what changed; a tool whose "
        "definition changed since is withheld until it is approved again.",
        "mcp-gateway servers approve\n  mcp-gateway --config gw.toml servers approve fs",
    ),
    "call": (
        "call one tool through the same pipeline; print its JSON",
        "Call one tool through the same pipeline a client's call takes (policy, validation, "
        "breaker, timeout, sanitizing, audit) and print its JSON result; exit code 1 on an "
        "error result.",
        "mcp-gateway call gateway_status --args '{\"check_health\": false}'",
    ),
    "claude-config": (
        "print the .mcp.json entry, the project settings and the 'claude mcp add' line",
        "Print what to paste into Claude Code for this deployment: the .mcp.json entry (with "
        "the settings the plugins read from the environment, secrets as ${VAR}), the "
        ".claude/settings.json block (read tools allowed, mutation tools asked for) and the "
        "'claude mcp add' line. Run it where the backends are configured.",
        "mcp-gateway claude-config\n  mcp-gateway --config gw.toml claude-config --settings",
    ),
}


def _parser() -> argparse.ArgumentParser:
    config_help = "TOML config file (default: $MCP_GATEWAY_CONFIG, else none)"
    # Accepted after the subcommand too; SUPPRESS keeps a value given before it.
    common = _Parser(add_help=False)
    common.add_argument("--config", default=argparse.SUPPRESS, help=config_help)
    p = _Parser(
        prog="mcp-gateway",
        description="A plugin-based MCP gateway: one MCP server whose tools come from the "
        "installed plugins.",
        epilog="examples:\n  mcp-gateway serve\n  mcp-gateway tools\n"
        "  mcp-gateway SUBCOMMAND --help",
        formatter_class=_Help,
    )
    p.add_argument("--config", default=None, help=config_help)
    p.add_argument(
        "--version",
        action=_Version,
        nargs=0,
        help="the core's and every installed plugin's distribution version",
    )
    sub = p.add_subparsers(dest="command", metavar="SUBCOMMAND")

    def command(name: str, func: _Command | None) -> argparse.ArgumentParser:
        summary, description, example = _COMMANDS[name]
        heading = "examples" if "\n" in example else "example"
        parser = sub.add_parser(
            name,
            parents=[common],
            help=summary,
            description=description,
            epilog=f"{heading}:\n  {example}",
            formatter_class=_Help,
        )
        parser.set_defaults(func=func)
        return parser

    _serve_options(command("serve", None))  # serve runs no _Command: see _main
    for name, func in (
        ("plugins", _plugins_command),
        ("tools", _tools_command),
        ("health", _health_command),
    ):
        sp = command(name, func)
        sp.add_argument(
            "--json", action="store_true", help="print JSON (for programs) instead of a table"
        )
        if name == "tools":
            sp.add_argument(
                "--sizes",
                action="store_true",
                help="bytes and estimated tokens each tool costs the model on every turn",
            )
    _servers_options(command("servers", _servers_command), common)
    c = command("call", _call_command)
    c.add_argument("tool", help="the tool's name (mcp-gateway tools lists them)")
    c.add_argument("--args", default="{}", help="arguments as a JSON object (default {})")
    _claude_config_options(command("claude-config", _claude_config_command))
    return p


def _serve_options(s: argparse.ArgumentParser) -> None:
    s.add_argument(
        "--transport",
        choices=["stdio", "http"],
        default="stdio",
        help="stdio (default: what Claude Code starts) or http (Streamable HTTP at /mcp)",
    )
    # None: not given (only --transport http takes them; given with stdio, they are a mistake).
    s.add_argument("--host", type=_host, default=None, help="HTTP bind address (default 127.0.0.1)")
    s.add_argument(
        "--port", type=_port, default=None, help="HTTP port (default 8765; 0: any free port)"
    )


def _servers_options(sv: argparse.ArgumentParser, common: argparse.ArgumentParser) -> None:
    sv_sub = sv.add_subparsers(dest="servers_command", metavar="ACTION", required=True)
    approve = sv_sub.add_parser(
        "approve",
        parents=[common],
        help="start the servers (or those named), list their tools and record those "
        "definitions as the approved ones; print what changed",
    )
    approve.add_argument(
        "names", nargs="*", metavar="NAME", help="servers to approve (default: all)"
    )


def _claude_config_options(cc: argparse.ArgumentParser) -> None:
    cc.add_argument(
        "--name", default=None, help="server name in Claude Code (default: server_name, gateway)"
    )
    only = cc.add_mutually_exclusive_group()
    only.add_argument(
        "--mcp-json", action="store_true", help="only the .mcp.json document, to paste as is"
    )
    only.add_argument(
        "--settings",
        action="store_true",
        help="only .claude/settings.json: the server approved, the permissions",
    )
    only.add_argument("--add", action="store_true", help="only the 'claude mcp add' line")
    only.add_argument(
        "--json", action="store_true", help="all parts, notes and warnings as one JSON object"
    )


def _table(rows: list[list[str]], header: list[str]) -> str:
    widths = [max(len(str(x)) for x in col) for col in zip(header, *rows, strict=False)]
    lines = [
        "  ".join(str(v).ljust(w) for v, w in zip(r, widths, strict=False)).rstrip()
        for r in [header, *rows]
    ]
    return "\n".join(lines)


def _reason(record: dict[str, Any]) -> str:
    withheld = record.get("withheld_tools")
    unoffered = record.get("not_offered") or []
    if record["reason"] or not (withheld or unoffered):
        return str(record["reason"] or "")
    parts = [f"{len(g['tools'])} tool(s) not offered: {g['reason']}" for g in unoffered]
    if withheld:
        # Why each is (a name two plugins claim, a changed definition) is in the JSON.
        parts.append("tools withheld: " + ", ".join(withheld) + " (plugins --json says why)")
    return "; ".join(parts)


def _json(obj: Any) -> str:
    return json.dumps(obj, indent=2, ensure_ascii=False)


def main(argv: list[str] | None = None) -> int:
    collecting = gc.isenabled()  # `serve` pauses the collector (see _main): given back after
    try:
        return _main(argv)
    except KeyboardInterrupt:
        return 130  # Ctrl-C before serving began: the user knows; a traceback says nothing
    finally:
        if collecting:
            gc.enable()


def _config_error(exc: ConfigError) -> int:
    sys.stderr.write(f"mcp-gateway: {exc}\n")
    return 2


class _SettingsMistake(ConfigError):
    """A loaded plugin's settings do not fit. ``plugins`` and ``health`` still report the
    deployment (with that plugin failed) before they exit 2; every other command stops."""

    def __init__(self, message: str, gateway: Gateway) -> None:
        super().__init__(message)
        self.gateway = gateway


def _check_tables(gateway: Gateway, config: GatewayConfig) -> None:
    """After loading: a ``[plugins.<name>]`` must name an installed plugin or a table that a
    loaded plugin (or its REST backend) read; the plugins the deployment selected (every
    installed one without an allow-list) must take their settings; and every setting that
    names a tool or plugin must name one."""
    from .config import (
        check_auth_plugins,
        check_plugin_tables,
        check_providers,
        check_servers_plugin,
        check_tool_names,
    )
    from .entrypoints import installed_plugins as entry_points

    found = entry_points()
    installed = {p.name for p in found}
    check_servers_plugin(config, gateway.plugin("servers"), installed)
    if gateway.workers.settled:  # else once they loaded: which tables they read is known then
        check_plugin_tables(config, installed | config.consulted_tables)
    mistake = next((p.settings_mistake for p in gateway.plugins if p.settings_mistake), None)
    if mistake is not None:
        raise _SettingsMistake(mistake, gateway)
    check_auth_plugins(config, {*installed, BUILTIN, *gateway.mounts.records})
    tools = gateway.tool_names()
    check_tool_names(config, tools)
    dists: dict[str, set[str]] = {}
    for p in found:
        dists.setdefault(p.name, set()).add(p.distribution)
    check_providers(config, tools, dists)


def _build(config: GatewayConfig, *, traced: bool, isolated: bool = False) -> Gateway:
    """The gateway, its tables checked (``ConfigError``). Only a gateway that runs calls
    (``serve``, ``call``) exports telemetry, as the process's providers: a plugin's own
    OpenTelemetry spans then join the gateway's traces. ``isolated``: the plugins that run
    in workers are loaded first (and their workers stopped), for a command that reports on
    them without starting the gateway; one that starts it checks them with
    :func:`_check_started`."""
    import anyio

    from . import __version__
    from .app import build_gateway
    from .telemetry import OFF, build_telemetry

    def telemetry(sanitizer: Sanitizer) -> Telemetry:
        if not traced:
            return OFF
        return build_telemetry(
            config.telemetry, sanitizer, config.env, version=__version__, install_global=True
        )

    gateway = build_gateway(config, telemetry=telemetry)
    if isolated and gateway.workers:
        anyio.run(gateway.load_isolated)
    _check_tables(gateway, config)
    return gateway


def _check_started(gateway: Gateway, config: GatewayConfig) -> None:
    """Once the gateway started (its isolated plugins loaded in their workers): their settings
    and the tool names that name theirs are checked as those of plugins in process."""
    if gateway.workers:
        _check_tables(gateway, config)


def _transport_options(args: argparse.Namespace) -> None:
    """``--host`` and ``--port`` belong to ``--transport http``: given for stdio, they would
    be ignored, and the operator would think the server listens there."""
    if args.command != "serve":
        return
    if args.transport == "stdio":
        given = [f"--{k}" for k in ("host", "port") if getattr(args, k) is not None]
        if given:
            verb = "apply" if len(given) > 1 else "applies"
            raise ConfigError(
                f"{' and '.join(given)} {verb} only to --transport http; stdio serves on "
                "standard input and output (add --transport http to listen on a port)"
            )
        return
    args.host = "127.0.0.1" if args.host is None else args.host
    args.port = 8765 if args.port is None else args.port


def _main(argv: list[str] | None) -> int:
    parser = _parser()
    args = parser.parse_args(argv)
    if args.command is None:  # `mcp-gateway` alone: what it can do
        parser.print_help()
        return 0
    if args.command == "serve":
        # Before the configuration, pydantic, the plugins' API and the SDK are imported: the
        # collector stays paused until the server is built (see _serving). The package
        # imports its API on use (gateway/__init__), so nothing heavy was imported yet.
        gc.disable()
    from .config import check_plugin_names, load_config

    try:
        _transport_options(args)
        config = load_config(args.config)
        check_plugin_names(config, set(installed_plugins()), builtin=BUILTIN)
    except ConfigError as exc:
        return _config_error(exc)
    from .errors import Sanitizer
    from .logs import configure_logging

    configure_logging(
        Sanitizer.from_environment(roots=config.data_roots, env=dict(config.env)),
        level=config.log_level,
        debug=config.debug,
    )
    if args.command == "serve":
        return _serve(args, config)

    from .stdio import stdout_to_stderr

    # Plugins are imported and run from here on: what they print goes to stderr, so the
    # output below (often JSON for another program) stays clean.
    lines: list[str] = []
    with stdout_to_stderr(), contextlib.redirect_stdout(sys.stderr):
        code = _command(args, config, lines.append)
    sys.stdout.write("".join(line + "\n" for line in lines))
    sys.stdout.flush()
    return code


def _command(args: argparse.Namespace, config: GatewayConfig, emit: Callable[[str], None]) -> int:
    mistake = None
    try:
        gateway = _build(
            config,
            traced=args.command == "call",
            isolated=args.command in ("plugins", "tools", "claude-config"),
        )
    except _SettingsMistake as exc:
        if args.command not in ("plugins", "health"):
            return _config_error(exc)
        # The diagnosing commands still show every plugin (this one failed, with the same
        # line as its reason), then exit 2 like every configuration mistake.
        gateway, mistake = exc.gateway, exc
    except ConfigError as exc:
        return _config_error(exc)
    code = _run_command(args, config, gateway, emit)
    return _config_error(mistake) if mistake is not None else code


def _run_command(
    args: argparse.Namespace, config: GatewayConfig, gateway: Gateway, emit: Callable[[str], None]
) -> int:
    from .logs import configure_logging

    # The gateway's own sanitizer knows the plugins' secrets; log through it from now on.
    configure_logging(gateway.sanitizer, level=config.log_level, debug=config.debug)
    run: _Command = args.func
    return run(args, config, gateway, emit)


def _plugins_command(
    args: argparse.Namespace, config: GatewayConfig, gateway: Gateway, emit: Callable[[str], None]
) -> int:
    records = [r.as_dict() for r in gateway.plugins]
    if args.json:
        emit(_json(records))
    else:
        rows = [
            [r["name"], r["version"], r["state"], r["runs"], str(r["tool_count"]), _reason(r)]
            for r in records
        ]
        emit(_table(rows, ["PLUGIN", "VERSION", "STATE", "RUNS", "TOOLS", "REASON"]))
    return 0


def _tools_command(
    args: argparse.Namespace, config: GatewayConfig, gateway: Gateway, emit: Callable[[str], None]
) -> int:
    if args.sizes:
        return _tool_sizes(args, gateway, emit)
    tools = [
        {"name": t.name, "plugin": t.plugin, "tier": t.tier.value, "title": t.title}
        for t in gateway.described_tools()
    ]
    if args.json:
        emit(_json(tools))
    else:
        emit(
            _table(
                [[t["name"], t["plugin"], t["tier"], t["title"]] for t in tools],
                ["TOOL", "PLUGIN", "TIER", "TITLE"],
            )
        )
    unapproved = gateway.mounts.unapproved()
    if unapproved:  # described from their approvals, started by nothing here: say why none
        sys.stderr.write(
            f"mcp-gateway: note: no tool of {', '.join(unapproved)} is approved yet, so none is "
            "listed; `mcp-gateway servers approve` starts the servers and records their tools "
            '(serve does the first time each answers, unless its pin is "approve")\n'
        )
    return 0


def _tool_sizes(args: argparse.Namespace, gateway: Gateway, emit: Callable[[str], None]) -> int:
    from .claude import tool_sizes

    sizes = tool_sizes(gateway)
    if args.json:
        emit(_json(sizes))
        return 0
    total = sizes["total"]
    rows = [[r["name"], r["plugin"], str(r["bytes"]), str(r["tokens"])] for r in sizes["tools"]]
    rows.append([f"total ({total['tools']} tools)", "", str(total["bytes"]), str(total["tokens"])])
    emit(_table(rows, ["TOOL", "PLUGIN", "BYTES", "~TOKENS"]))
    emit(f"({sizes['method']})")
    return 0


def _health_command(
    args: argparse.Namespace, config: GatewayConfig, gateway: Gateway, emit: Callable[[str], None]
) -> int:
    import anyio

    late: list[ConfigError] = []

    async def run_health() -> list[HealthResult]:
        async with gateway:
            try:
                _check_started(gateway, config)
            except ConfigError as exc:  # reported with the rest, then exit 2
                late.append(exc)
            # Mounted servers start with the gateway: each is checked once it answered (or
            # its list_wait passed), not failed for still starting.
            await gateway.settled()
            return await gateway.check_health(use_cache=False)

    checks = anyio.run(run_health)
    failed = [r for r in checks if r.blocking]
    plugin_failures = [p for p in gateway.plugins if p.state.value == "failed"]
    withheld = [
        {"plugin": p.name, "tool": tool, "reason": why}
        for p in gateway.plugins
        for tool, why in p.withheld.items()
    ]
    results = [r.as_dict() for r in checks]
    if args.json:
        report = {
            "ok": not failed,
            "checks": results,
            "failed_plugins": [p.as_dict() for p in plugin_failures],
            "withheld_tools": withheld,
        }
        emit(_json(report))
    else:
        _health_table(results, plugin_failures, withheld, emit)
    if late:
        return _config_error(late[0])
    return 1 if failed or plugin_failures or withheld else 0


def _health_table(
    results: list[dict[str, Any]],
    plugin_failures: list[PluginRecord],
    withheld: list[dict[str, str]],
    emit: Callable[[str], None],
) -> None:
    rows = [
        [r["plugin"], r["check"], r["status"], "yes" if r["required"] else "no", r["detail"] or ""]
        for r in results
    ]
    emit(
        _table(rows, ["PLUGIN", "CHECK", "STATUS", "REQUIRED", "DETAIL"])
        if rows
        else "no health checks registered"
    )
    for p in plugin_failures:
        emit(f"plugin {p.name} failed to load: {p.reason}")
    for w in withheld:
        emit(f"plugin {w['plugin']}: tool {w['tool']} withheld: {w['reason']}")


def _call_command(
    args: argparse.Namespace, config: GatewayConfig, gateway: Gateway, emit: Callable[[str], None]
) -> int:
    import anyio

    try:
        arguments = json.loads(args.args)
    except json.JSONDecodeError as exc:
        sys.stderr.write(f"mcp-gateway: --args is not valid JSON ({exc.msg} at {exc.pos})\n")
        return 2
    except RecursionError:
        sys.stderr.write("mcp-gateway: --args is nested too deeply\n")
        return 2

    async def run_call() -> Any:
        async with gateway:
            _check_started(gateway, config)
            return await gateway.call(args.tool, arguments)

    try:
        result = anyio.run(run_call)
    except ConfigError as exc:
        return _config_error(exc)
    if result.input_required is not None:
        asked = ", ".join(sorted(result.input_required.needs()))
        sys.stderr.write(
            f"mcp-gateway: tool {args.tool} asks the client for input first ({asked}), "
            "which a call from the command line cannot give; call it from an MCP client\n"
        )
        return 1
    emit(_json(result.payload))
    return 1 if result.is_error else 0


def _servers_command(
    args: argparse.Namespace, config: GatewayConfig, gateway: Gateway, emit: Callable[[str], None]
) -> int:
    import anyio

    try:
        code, lines = anyio.run(gateway.mounts.approve, list(args.names))
    except ConfigError as exc:
        return _config_error(exc)
    for line in lines:
        emit(line)
    return code


def _claude_config_command(
    args: argparse.Namespace, config: GatewayConfig, gateway: Gateway, emit: Callable[[str], None]
) -> int:
    from .claude import ADD_NOTE, claude_config

    cc = claude_config(gateway, args.name or config.server_name, config_path=args.config)
    if args.json:
        emit(_json(cc.as_dict()))
        return 0
    for warning in cc.warnings:
        sys.stderr.write(f"mcp-gateway: warning: {warning}\n")
    if args.mcp_json:
        emit(_json(cc.mcp_json()))
    elif args.settings:
        emit(_json(cc.settings_json()))
    elif args.add:
        emit(cc.add_command())
        sys.stderr.write(f"mcp-gateway: note: {ADD_NOTE}\n")
    else:
        emit(cc.text())
    return 0


def _serving() -> None:
    """Before serving: the start-up objects frozen, the cyclic garbage collector on again.

    Starting a server creates hundreds of thousands of objects that live as long as the process
    (the SDK's and the plugins' modules, classes and models) and almost no garbage, so each
    collection the allocations trigger while starting walks them all for nothing. ``serve``
    pauses the collector until the server is built, then freezes what exists (``gc.freeze``:
    later collections skip the start-up objects, as CPython's documentation suggests for
    long-lived processes) and lets it run again for the calls.
    """
    gc.freeze()
    gc.enable()


def _serve(args: argparse.Namespace, config: GatewayConfig) -> int:
    from .lifecycle import SignalGuard

    # From here on only a real signal stops the process (not a plugin raising
    # KeyboardInterrupt or calling interrupt_main); see gateway.lifecycle.
    with SignalGuard() as guard, contextlib.suppress(KeyboardInterrupt):
        return _serve_guarded(args, config, guard)
    return 0


def _serve_guarded(args: argparse.Namespace, config: Any, guard: Any) -> int:
    gc.disable()  # until the server is built; the SDK's import is most of a start (see _serving)
    from .logs import configure_logging
    from .stdio import protected_stdio, stdout_to_stderr

    if args.transport == "stdio":
        interactive = sys.stdin is not None and sys.stdin.isatty()
        # Before any plugin is imported: from here on only the protocol reaches stdout.
        with protected_stdio() as wire:
            try:
                gateway = _build(config, traced=True)
            except ConfigError as exc:
                return _config_error(exc)
            # The SDK only once the start passed its checks: a refused start skips its import.
            from .server import run_stdio

            configure_logging(gateway.sanitizer, level=config.log_level, debug=config.debug)
            if interactive:  # started by hand: say that it runs, what is missing, how to stop
                count = len(gateway.offered_tools())
                missing = gateway.unoffered_summary()
                sys.stderr.write(
                    f"mcp-gateway: serving {count} tool{'' if count == 1 else 's'} over stdio"
                    f"{'; ' + missing if missing else ''}; Ctrl-C to stop\n"
                )
                sys.stderr.flush()
            _serving()
            try:
                run_stdio(gateway, wire, guard, started=lambda gw: _check_started(gw, config))
            except ConfigError as exc:  # an isolated plugin's settings, checked as it loaded
                return _config_error(exc)
        return 0
    from .auth.settings import is_loopback_host
    from .config import label

    token = config.token.get_secret_value() if config.token else ""
    if token and len(token) < MIN_TOKEN_CHARS and not is_loopback_host(args.host):
        setting = label(config.origins.get("token", "token"), "token")
        return _config_error(
            ConfigError(
                f"{setting}: {len(token)} characters is too short to guard the non-loopback "
                f"address {args.host}; use at least {MIN_TOKEN_CHARS} (e.g. from "
                "'python3 -c \"import secrets; print(secrets.token_urlsafe(32))\"')"
            )
        )
    with stdout_to_stderr():
        try:
            gateway = _build(config, traced=True)
        except ConfigError as exc:
            return _config_error(exc)
        configure_logging(gateway.sanitizer, level=config.log_level, debug=config.debug)
        # The SDK and the web stack only once the start passed its checks, as for stdio.
        from .http import HttpSettingsError, serve_http

        _serving()
        try:
            serve_http(gateway, host=args.host, port=args.port, guard=guard)
        except HttpSettingsError as exc:
            sys.stderr.write(f"mcp-gateway: {exc}\n")
            return 2
    return 0


if __name__ == "__main__":  # pragma: no cover
    raise SystemExit(main())
