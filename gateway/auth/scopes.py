"""Tiers as scopes: which OAuth scope each tool needs, and whether a caller holds it.

A pure function of the caller and the tool (tier, plugin, name), so ``tools/list`` filtering,
the pipeline's ``PERMISSION_DENIED`` and the transport's early 403 cannot disagree.
Precedence: ``tool_scopes[name]``, then ``plugin_scopes[plugin]`` for the tool's tier, then
the global name of the tier. Each tool needs exactly one scope; a token that should both
read and change things carries both (the tiers do not imply each other).
"""

from __future__ import annotations

import functools
from collections.abc import Mapping
from dataclasses import dataclass, field

from ..spec import Tier
from .identity import Identity
from .settings import AuthConfig, PluginScopes, ScopeNames


@dataclass(frozen=True)
class ScopePolicy:
    names: ScopeNames = field(default_factory=ScopeNames)
    plugins: Mapping[str, PluginScopes] = field(default_factory=dict)
    tools: Mapping[str, str] = field(default_factory=dict)

    @classmethod
    def from_config(cls, config: AuthConfig) -> ScopePolicy:
        return cls(config.scopes, dict(config.plugin_scopes), dict(config.tool_scopes))

    def required(self, *, tier: Tier, plugin: str, name: str) -> str:
        """The one scope a call of this tool needs."""
        if name in self.tools:
            return self.tools[name]
        own = self.plugins.get(plugin)
        if tier is Tier.MUTATION:
            return (own.mutate if own else None) or self.names.mutate
        return (own.read if own else None) or self.names.read

    def missing(self, identity: Identity, *, tier: Tier, plugin: str, name: str) -> str | None:
        """``None`` when the caller may use the tool, else the scope it lacks."""
        if identity.scopes is None:
            return None
        need = self.required(tier=tier, plugin=plugin, name=name)
        return None if need in identity.scopes else need

    def supported(self) -> list[str]:
        """Every scope some tool may need, for the protected-resource metadata."""
        found = [self.names.read, self.names.mutate]
        for own in self.plugins.values():
            found += [s for s in (own.read, own.mutate) if s]
        found += list(self.tools.values())
        return list(dict.fromkeys(found))

    def to_request(self) -> list[str]:
        """What a client should ask for by default: the global read and mutate scopes."""
        return list(dict.fromkeys([self.names.read, self.names.mutate]))

    def grants_anything(self, identity: Identity) -> bool:
        """Does the caller hold any scope that unlocks a tool (else the transport says 403)?"""
        if identity.scopes is None:
            return True
        return not identity.scopes.isdisjoint(self._unlocking)

    @functools.cached_property
    def _unlocking(self) -> frozenset[str]:  # asked on every request
        return frozenset(self.supported())
