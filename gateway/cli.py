"""``mcp-gateway``: serve, and inspect what a deployment will serve.

Everything printed for people goes to stdout, except under ``serve`` (stdio), where stdout
is the protocol and logs go to stderr.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import logging
import sys
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

from .config import (
    ConfigError,
    GatewayConfig,
    check_auth_names,
    check_plugin_names,
    check_plugin_tables,
    check_servers_plugin,
    label,
    load_config,
)

if TYPE_CHECKING:
    from .app import Gateway, HealthResult
    from .errors import Sanitizer
    from .startrecord import StartRecord
    from .telemetry import Telemetry

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


def _parser() -> argparse.ArgumentParser:
    config_help = "TOML config file (default: $MCP_GATEWAY_CONFIG, else none)"
    # Accepted after the subcommand too; SUPPRESS keeps a value given before it.
    common = argparse.ArgumentParser(add_help=False)
    common.add_argument("--config", default=argparse.SUPPRESS, help=config_help)
    p = argparse.ArgumentParser(prog="mcp-gateway", description="A plugin-based MCP gateway.")
    p.add_argument("--config", default=None, help=config_help)
    p.add_argument(
        "--version",
        action=_Version,
        nargs=0,
        help="the core's and every installed plugin's distribution version",
    )
    sub = p.add_subparsers(dest="command", required=True)

    s = sub.add_parser("serve", parents=[common], help="run the MCP server (stdio by default)")
    s.add_argument("--transport", choices=["stdio", "http"], default="stdio")
    s.add_argument("--host", default="127.0.0.1", help="HTTP bind address (default 127.0.0.1)")
    s.add_argument("--port", type=int, default=8765, help="HTTP port (default 8765)")

    for name, text in (
        ("plugins", "list plugins: name, version, state, reason, tool count"),
        ("tools", "list the tools a client will see: name, plugin, tier"),
        ("health", "run health checks; exit 1 if a required check fails"),
    ):
        sp = sub.add_parser(name, parents=[common], help=text)
        sp.add_argument("--json", action="store_true", help="machine-readable output")
        if name == "tools":
            sp.add_argument(
                "--sizes",
                action="store_true",
                help="bytes and estimated tokens each tool costs the model on every turn",
            )

    sv = sub.add_parser(
        "servers", parents=[common], help="the MCP servers mounted behind the gateway"
    )
    sv_sub = sv.add_subparsers(dest="servers_command", required=True)
    approve = sv_sub.add_parser(
        "approve",
        parents=[common],
        help="start the servers (or those named), list their tools and record those "
        "definitions as the approved ones; print what changed",
    )
    approve.add_argument(
        "names", nargs="*", metavar="NAME", help="servers to approve (default: all)"
    )

    c = sub.add_parser(
        "call", parents=[common], help="call one tool through the same pipeline; print its JSON"
    )
    c.add_argument("tool")
    c.add_argument("--args", default="{}", help="arguments as a JSON object")

    cc = sub.add_parser(
        "claude-config",
        parents=[common],
        help="print the .mcp.json entry, the project settings and the 'claude mcp add' line",
    )
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
    return p


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
    try:
        return _main(argv)
    except KeyboardInterrupt:
        return 130  # Ctrl-C before serving began: the user knows; a traceback says nothing


def _config_error(exc: ConfigError) -> int:
    sys.stderr.write(f"mcp-gateway: {exc}\n")
    return 2


def _check_tables(gateway: Any, config: GatewayConfig) -> None:
    """After loading: a ``[plugins.<name>]`` must name an installed plugin or a table that a
    loaded plugin (or its REST backend) read."""
    installed = set(installed_plugins())
    check_servers_plugin(config, gateway.plugin("servers"), installed)
    check_plugin_tables(config, installed | config.consulted_tables)
    whole = all(p.state.value == "loaded" for p in gateway.plugins)
    # A mounted server's tools are known once it runs: none of its names is refused here.
    servers = set(gateway.mounts.records)
    tools = {t for p in gateway.plugins for t in (*p.tools, *p.withheld)}
    check_auth_names(
        config, {*installed, BUILTIN, *servers}, tools if whole and not servers else None
    )


def _build(config: GatewayConfig, *, traced: bool, defer_loading: bool = False) -> Gateway:
    """The gateway, its tables checked (``ConfigError``). Only a gateway that runs calls
    (``serve``, ``call``) exports telemetry, as the process's providers: a plugin's own
    OpenTelemetry spans then join the gateway's traces."""
    from .app import build_gateway
    from .telemetry import OFF, build_telemetry

    def telemetry(sanitizer: Sanitizer) -> Telemetry:
        if not traced:
            return OFF
        return build_telemetry(config.telemetry, sanitizer, config.env, install_global=True)

    gateway = build_gateway(config, telemetry=telemetry, defer_loading=defer_loading)
    if not defer_loading:  # deferred: the start record's inputs say it passed last time
        _check_tables(gateway, config)
    return gateway


def _main(argv: list[str] | None) -> int:
    args = _parser().parse_args(argv)
    record = None
    try:
        config = load_config(args.config)
        if args.command == "serve" and args.transport == "stdio":
            from .startrecord import lookup

            # The same configuration and installed plugins as a start that passed the checks.
            record = lookup(config)
        if record is None:
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
        return _serve(args, config, record)

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
    import anyio

    from .logs import configure_logging

    try:
        gateway = _build(config, traced=args.command == "call")
    except ConfigError as exc:
        return _config_error(exc)
    # The gateway's own sanitizer knows the plugins' secrets; log through it from now on.
    configure_logging(gateway.sanitizer, level=config.log_level, debug=config.debug)

    if args.command == "plugins":
        records = [r.as_dict() for r in gateway.plugins]
        if args.json:
            emit(_json(records))
        else:
            rows = [
                [r["name"], r["version"], r["state"], str(r["tool_count"]), _reason(r)]
                for r in records
            ]
            emit(_table(rows, ["PLUGIN", "VERSION", "STATE", "TOOLS", "REASON"]))
        return 0

    if args.command == "tools" and args.sizes:
        from .claude import tool_sizes

        sizes = tool_sizes(gateway)
        if args.json:
            emit(_json(sizes))
        else:
            total = sizes["total"]
            rows = [
                [r["name"], r["plugin"], str(r["bytes"]), str(r["tokens"])] for r in sizes["tools"]
            ]
            rows.append(
                [f"total ({total['tools']} tools)", "", str(total["bytes"]), str(total["tokens"])]
            )
            emit(_table(rows, ["TOOL", "PLUGIN", "BYTES", "~TOKENS"]))
            emit(f"({sizes['method']})")
        return 0

    if args.command == "tools":
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
        return 0

    if args.command == "health":

        async def run_health() -> list[HealthResult]:
            async with gateway:
                return await gateway.check_health(use_cache=False)

        checks = anyio.run(run_health)
        failed = [r for r in checks if r.blocking]
        results = [r.as_dict() for r in checks]
        plugin_failures = [p for p in gateway.plugins if p.state.value == "failed"]
        withheld = [
            {"plugin": p.name, "tool": tool, "reason": why}
            for p in gateway.plugins
            for tool, why in p.withheld.items()
        ]
        if args.json:
            emit(
                _json(
                    {
                        "ok": not failed,
                        "checks": results,
                        "failed_plugins": [p.as_dict() for p in plugin_failures],
                        "withheld_tools": withheld,
                    }
                )
            )
        else:
            rows = [
                [
                    r["plugin"],
                    r["check"],
                    r["status"],
                    "yes" if r["required"] else "no",
                    r["detail"] or "",
                ]
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
        return 1 if failed or plugin_failures or withheld else 0

    if args.command == "call":
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
                return await gateway.call(args.tool, arguments)

        result = anyio.run(run_call)
        emit(_json(result.payload))
        return 1 if result.is_error else 0

    if args.command == "servers":
        try:
            code, lines = anyio.run(gateway.mounts.approve, list(args.names))
        except ConfigError as exc:
            return _config_error(exc)
        for line in lines:
            emit(line)
        return code

    if args.command == "claude-config":
        from .claude import claude_config

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
        else:
            emit(cc.text())
        return 0
    return 2  # pragma: no cover - argparse enforces the choices


def _serve(args: argparse.Namespace, config: GatewayConfig, record: StartRecord | None) -> int:
    from .lifecycle import SignalGuard

    # From here on only a real signal stops the process (not a plugin raising
    # KeyboardInterrupt or calling interrupt_main); see gateway.lifecycle.
    with SignalGuard() as guard, contextlib.suppress(KeyboardInterrupt):
        return _serve_guarded(args, config, guard, record)
    return 0


def _serve_guarded(
    args: argparse.Namespace, config: Any, guard: Any, record: StartRecord | None
) -> int:
    from .startup import pause_collector, resume_collector

    pause_collector()  # until the server is built; the SDK's import is most of a start
    from .logs import configure_logging
    from .stdio import protected_stdio, stdout_to_stderr

    if args.transport == "stdio":
        interactive = sys.stdin is not None and sys.stdin.isatty()
        # Before any plugin is imported: from here on only the protocol reaches stdout.
        with protected_stdio() as wire:
            try:
                # With a record the plugins load after the first listing (gateway.server).
                gateway = _build(config, traced=True, defer_loading=record is not None)
            except ConfigError as exc:
                return _config_error(exc)
            # The SDK only once the start passed its checks: a refused start skips its import.
            from .server import run_stdio

            configure_logging(gateway.sanitizer, level=config.log_level, debug=config.debug)
            if record is not None:
                logging.getLogger("gateway.cli").debug(
                    "answering the first listing from the last start's record; the plugins "
                    "load after it"
                )
            if interactive:  # started by hand: say that it runs and how to stop it
                count = len(record.tools) if record else len(gateway.offered_tools())
                sys.stderr.write(f"mcp-gateway: serving {count} tools over stdio; Ctrl-C to stop\n")
                sys.stderr.flush()
            resume_collector()
            run_stdio(gateway, wire, guard, record)
        return 0
    from .auth.settings import is_loopback_host

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

        resume_collector()
        try:
            serve_http(gateway, host=args.host, port=args.port, guard=guard)
        except HttpSettingsError as exc:
            sys.stderr.write(f"mcp-gateway: {exc}\n")
            return 2
    return 0


if __name__ == "__main__":  # pragma: no cover
    raise SystemExit(main())
