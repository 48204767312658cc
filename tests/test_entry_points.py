"""Installed plugins are read from the installation's metadata once per process, and the test
kit reads them again once the installation changed: every gateway a test session builds shares
the scan, and an installation changed right after a scan is seen by the next one."""

from __future__ import annotations

import importlib.metadata as md
import shutil
from typing import Any

import pytest
from fixture_plugins import GOOD

from gateway import entrypoints
from gateway.testing import make_gateway, refresh_installed


@pytest.fixture
def scans(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The groups read from the installation's metadata, one entry per reading."""
    seen: list[str] = []
    read = md.entry_points

    def counted(**selection: Any) -> Any:
        seen.append(selection.get("group", ""))
        return read(**selection)

    monkeypatch.setattr(entrypoints.md, "entry_points", counted)
    return seen


def names() -> list[tuple[str, str]]:
    refresh_installed()
    return [(p.name, p.distribution) for p in entrypoints.installed_plugins()]


def test_gateways_built_one_after_another_read_the_metadata_once(plugin_site, tmp_path, scans):
    plugin_site("gw-good", {"good": "gwfx_good"}, {"gwfx_good": GOOD})
    first = make_gateway(plugins=["good"], cwd=tmp_path)
    second = make_gateway(plugins=["good"], cwd=tmp_path)
    assert [p.name for p in first.plugins] == [p.name for p in second.plugins]
    assert "good" in [p.name for p in second.plugins]
    assert scans == ["mcp_gateway.plugins"]


def test_a_distribution_installed_or_removed_right_after_a_scan_is_seen(plugin_site, scans):
    site = plugin_site("gw-first", {"first": "gwfx_first"}, {"gwfx_first": GOOD})
    assert ("first", "gw-first") in names()
    plugin_site("gw-second", {"second": "gwfx_second"}, {"gwfx_second": GOOD})
    assert {("first", "gw-first"), ("second", "gw-second")} <= set(names())
    shutil.rmtree(site / "gw_second-1.2.3.dist-info")
    assert ("second", "gw-second") not in names()
    assert len(scans) == 3


def test_entry_points_rewritten_in_place_are_seen(plugin_site, scans):
    plugin_site("gw-renamed", {"old": "gwfx_renamed"}, {"gwfx_renamed": GOOD})
    assert ("old", "gw-renamed") in names()
    plugin_site("gw-renamed", {"a_new_name": "gwfx_renamed"}, {"gwfx_renamed": GOOD})
    found = names()
    assert ("a_new_name", "gw-renamed") in found and ("old", "gw-renamed") not in found
    names()
    assert len(scans) == 2


def test_each_plugin_has_the_name_version_and_summary_of_its_distributions_metadata(
    plugin_site, tmp_path
):
    """The scan reads the metadata's header only (not the long description after it): each
    installed plugin, and one whose summary is folded over two lines and whose description
    has header-like lines, gets exactly what the distribution's full metadata holds."""
    site = plugin_site("gw-meta", {"meta": "gwfx_meta"}, {"gwfx_meta": GOOD})
    (info,) = site.glob("gw_meta-*.dist-info")
    (info / "METADATA").write_text(
        "Metadata-Version: 2.1\nName: gw-meta\nVersion: 4.5.6\n"
        "Summary: a summary\n  folded onto a second line\n\n"
        "Name: not-this\nVersion: 0\n\nA long description.\n" * 3,
        encoding="utf-8",
    )
    refresh_installed()
    found = entrypoints.installed_plugins()
    assert "meta" in [p.name for p in found]
    by_dist = {d.metadata["Name"]: d.metadata for d in md.distributions()}
    for plugin in found:
        meta = by_dist[plugin.distribution]
        assert (plugin.version, plugin.summary) == (meta["Version"], meta.get("Summary") or "")
    meta_plugin = next(p for p in found if p.name == "meta")
    assert (meta_plugin.distribution, meta_plugin.version) == ("gw-meta", "4.5.6")
