"""Backends declared as objects: the core knows them only through the ``Backend`` protocol
(its hub builds settings, a health check and a client once per name), and imports nothing
from its REST kit, which is one implementation of that protocol among possible others."""

from __future__ import annotations

import ast
import sqlite3
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from pydantic import BaseModel, ConfigDict, SecretStr

import gateway
from gateway import ErrorCode, GatewayError, Tier, ToolSpec, env_field, hookimpl
from gateway.backends import BackendHub
from gateway.errors import Sanitizer
from gateway.spec import Backend, HealthCheck, ToolContext
from gateway.testing import make_gateway

pytestmark = pytest.mark.anyio

CORE = Path(gateway.__file__).parent


def _imports(path: Path) -> list[str]:
    """Every module ``path`` imports, anywhere in it, as an absolute dotted name."""
    out = []
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            out += [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = "gateway." * (node.level > 0) + (node.module or "")
            out += [base] + [f"{base}.{a.name}".replace("..", ".") for a in node.names]
    return out


def test_the_core_imports_nothing_from_its_rest_kit():
    core = sorted(CORE.glob("*.py"))
    assert len(core) > 30
    reaching = {
        p.name: [m for m in _imports(p) if m == "gateway.rest" or m.startswith("gateway.rest.")]
        for p in core
    }
    assert {name: found for name, found in reaching.items() if found} == {}


# --- a backend that is not REST: a SQLite file behind the hub ----------------------------------


class LedgerSettings(BaseModel):
    model_config = ConfigDict(extra="forbid")
    path: str | None = env_field("LEDGER_DB", default=None)
    key: SecretStr | None = env_field("LEDGER_KEY", default=None)


class Ledger:
    """The one client of the ledger: a SQLite connection, closed at shut-down."""

    def __init__(self, path: str) -> None:
        self.db = sqlite3.connect(path)
        self.closed = False

    def total(self) -> int:
        return int(self.db.execute("SELECT coalesce(sum(amount), 0) FROM entries").fetchone()[0])

    async def aclose(self) -> None:
        self.db.close()
        self.closed = True


OPENED: list[Ledger] = []


@dataclass(frozen=True)
class LedgerBackend:
    name: str = "ledger"
    settings: type[LedgerSettings] = LedgerSettings
    settings_table: str = "ledger"

    def same_identity(self, other: Any) -> bool:
        return isinstance(other, LedgerBackend) and other.settings_table == self.settings_table

    def secret_values(self, settings: LedgerSettings) -> list[str]:
        return [settings.key.get_secret_value()] if settings.key is not None else []

    def not_configured(self, settings: LedgerSettings, unexpanded: Mapping[str, str]) -> str | None:
        return None if settings.path else "the ledger is not configured: set LEDGER_DB"

    def enabled_by(self) -> str:
        return "LEDGER_DB"

    def open_client(self, settings: LedgerSettings, sanitizer: Sanitizer) -> Ledger:
        assert settings.path is not None
        OPENED.append(Ledger(settings.path))
        return OPENED[-1]

    def health_check(
        self,
        settings: LedgerSettings,
        client: Callable[[], Ledger],
        not_configured: str | None,
    ) -> HealthCheck:
        async def check() -> str:
            return f"{client().total()} in the ledger"

        return HealthCheck(
            name="ledger_db",
            check=check,
            backend=self.name,
            not_configured=not_configured,
            shared=True,
        )


LEDGER = LedgerBackend()


class NoArgs(BaseModel):
    model_config = ConfigDict(extra="forbid")


def _total_tool(name: str) -> ToolSpec[NoArgs]:
    async def handler(args: NoArgs, ctx: ToolContext[Any]) -> dict[str, Any]:
        hub = ctx.plugin.backends
        assert isinstance(hub, BackendHub)
        ledger: Ledger = hub.client(LEDGER)
        if name == "ledger_leak":
            key = hub.settings(LEDGER).key.get_secret_value()
            raise GatewayError(ErrorCode.BACKEND_ERROR, f"the ledger refused key {key}")
        return {"total": ledger.total()}

    return ToolSpec(
        name=name,
        description="The ledger's total.",
        input_model=NoArgs,
        handler=handler,
        tier=Tier.READ,
        backend=LEDGER,
    )


def _plugin(*specs: ToolSpec[Any]) -> object:
    class Plugin:
        @hookimpl
        def register_tools(self, register: Any) -> None:
            for spec in specs:
                register(spec)

    return Plugin()


def _ledger(tmp_path: Path) -> str:
    path = tmp_path / "ledger.db"
    with sqlite3.connect(path) as db:
        db.execute("CREATE TABLE entries (amount INTEGER)")
        db.executemany("INSERT INTO entries VALUES (?)", [(40,), (2,)])
    db.close()
    return str(path)


def test_a_non_rest_backend_is_a_backend():
    assert isinstance(LEDGER, Backend)
    assert not isinstance("ledger", Backend)


async def test_a_backend_of_another_kind_gets_settings_check_and_one_client_from_the_hub(
    tmp_path,
):
    OPENED.clear()
    gw = make_gateway(
        objects={
            "first": _plugin(_total_tool("ledger_total"), _total_tool("ledger_leak")),
            "second": _plugin(_total_tool("ledger_sum")),
        },
        entry_points=False,
        env={"LEDGER_DB": _ledger(tmp_path), "LEDGER_KEY": "sekrit-key-123456"},
        cwd=tmp_path,
    )
    async with gw:
        assert [t.name for t in gw.visible_tools() if t.name.startswith("ledger")] == [
            "ledger_total",
            "ledger_leak",
            "ledger_sum",
        ]
        first = await gw.call("ledger_total", {})
        second = await gw.call("ledger_sum", {})
        assert first.payload == second.payload == {"total": 42}
        assert len(OPENED) == 1, "one client per backend name"
        results = await gw.check_health()
        ledger = [r for r in results if r.name == "ledger_db"]
        assert len(ledger) == 1, "one shared check"
        assert ledger[0].ok and ledger[0].detail == "42 in the ledger"
        assert sorted([*ledger[0].shared_with, ledger[0].plugin]) == ["first", "second"]
        assert gw.backends.users("ledger") == ["first", "second"]
        # The hub made the backend's secret known: no message shows it.
        failed = await gw.call("ledger_leak", {})
        assert failed.payload["error"]["code"] == "BACKEND_ERROR"
        assert "the ledger refused key" in failed.payload["error"]["message"]
        assert "sekrit-key-123456" not in str(failed.payload)
    assert OPENED[0].closed, "closed at shut-down"


async def test_an_unconfigured_backend_of_another_kind_waits_for_its_setting(tmp_path):
    gw = make_gateway(
        objects={"first": _plugin(_total_tool("ledger_total"))},
        entry_points=False,
        env={},
        cwd=tmp_path,
    )
    async with gw:
        assert "ledger_total" not in [t.name for t in gw.visible_tools()]
        assert gw.unoffered_summary().startswith("1 tool waits for LEDGER_DB")
        health = [r for r in await gw.check_health() if r.name == "ledger_db"]
        assert health[0].status == "unconfigured"
