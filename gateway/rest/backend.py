"""A REST backend as plugins declare it: plain data, cheap to build at import.

A :class:`RestBackend` is the backend's identity: its name, its settings and where they come
from, how to check its health, how to authenticate. Tools name it (see
:class:`gateway.rest.RestTool`); the core then builds its settings once, registers one health
check, keeps one circuit breaker and opens one keep-alive client for it, however many plugins
use it (:class:`gateway.backends.BackendHub`, which knows it through the
:class:`gateway.spec.Backend` protocol): two plugins that talk to the same API (declaring
backends with the same ``name``) share all of that when installed together, and each still
works alone.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from ..config import unexpanded_problem
from ..errors import Sanitizer
from ..spec import HealthCheck
from .settings import RestSettings, bearer_auth, header_secrets

if TYPE_CHECKING:
    from .client import RestClient


@dataclass(frozen=True)
class RestBackend:
    """One REST API. ``name`` is its identity (one breaker, health check and client per name).

    ``settings``: a :class:`RestSettings` subclass (its ``env_prefix`` names the variables).
    ``settings_table``: the ``[plugins.<table>]`` that configures it; every plugin declaring the
    backend reads the same table. ``title`` names it in messages ("the orchestrator API").
    ``health_path``: a GET that answers 2xx when the API is up; ``health_detail`` turns its
    decoded answer into the short detail health reports (raising ``ValueError`` when the
    answer is not what this API sends). ``api_prefix`` is put before every path ("/api/v1").
    ``auth`` turns the settings into request headers (default: bearer token).
    ``down_message``: what tools answer when the backend refuses or drops connections (default:
    a sentence naming ``title`` and its URL). ``fallbacks``: tools, of any plugin, that give
    part of what this API gives, each with what it gives ("reads …"): while the API is
    unconfigured or down, its tools' errors name those the deployment offers.
    """

    name: str
    settings: type[RestSettings]
    settings_table: str
    title: str
    health_path: str | None = None
    health_detail: Callable[[Any], str] | None = field(default=None, compare=False)
    api_prefix: str = ""
    auth: Callable[[Any], Mapping[str, str]] = field(default=bearer_auth, compare=False)
    user_agent: str = "mcp-gateway"
    down_message: str | None = None
    fallbacks: tuple[tuple[str, str], ...] = ()

    @classmethod
    def define(
        cls,
        name: str,
        *,
        env_prefix: str,
        settings_table: str,
        title: str,
        health_path: str | None = None,
        api_prefix: str = "",
    ) -> RestBackend:
        """A backend with the standard settings only, in one statement: what two plugins that
        share an API both write (they then share it, see the module docstring)."""
        settings = type(
            f"{env_prefix.title().replace('_', '')}Settings",
            (RestSettings,),
            {"env_prefix": env_prefix, "__module__": __name__},
        )
        return cls(
            name=name,
            settings=settings,
            settings_table=settings_table,
            title=title,
            health_path=health_path,
            api_prefix=api_prefix,
        )

    def secret_values(self, settings: RestSettings) -> list[str]:
        """Every secret of this backend for the sanitizer: those of its settings, and the
        credentials its ``auth`` puts into headers (a basic-auth pair encoded, too)."""
        out = settings.secret_values()
        if settings.configured:
            try:
                headers = self.auth(settings)
            except Exception:  # a broken auth function fails the first call, not start-up
                return out
            out.extend(header_secrets(headers))
        return out

    def not_configured(self, settings: RestSettings, unexpanded: Mapping[str, str]) -> str | None:
        """Why the backend is not configured (``None`` when it is): its URL is unset, or holds
        a reference to a variable the client did not have (then that variable is named)."""
        if settings.configured:
            return None
        variable = settings.env_name("URL")
        reference = unexpanded.get(variable)
        if reference is not None:
            return f"{self.title} is not configured: {unexpanded_problem(variable, reference)}"
        env = self.settings.env_prefix
        where = f"{env}_URL" if env else "url"
        return (
            f"{self.title} is not configured: set {where} (or url in "
            f"[plugins.{self.settings_table}]) to enable these tools"
        )

    def enabled_by(self) -> str:
        prefix = self.settings.env_prefix
        return f"{prefix}_URL" if prefix else f"[plugins.{self.settings_table}] url"

    def open_client(self, settings: RestSettings, sanitizer: Sanitizer) -> RestClient:
        from .client import RestClient  # httpx is imported here, on first use

        return RestClient(
            settings,
            sanitizer,
            name=self.name,
            title=self.title,
            headers={"User-Agent": self.user_agent, **self.auth(settings)},
            api_prefix=self.api_prefix,
            down_message=self.down_message,
        )

    def health_check(
        self,
        settings: RestSettings,
        client: Callable[[], RestClient],
        not_configured: str | None,
    ) -> HealthCheck:
        """A GET of ``health_path`` (when set) through the shared client."""

        async def check() -> str | None:
            answering = client()
            if self.health_path is not None:
                answer = await answering.answer(
                    "GET", self.health_path, path_params={}, what="its health check"
                )
                if self.health_detail is not None:
                    return self.health_detail(answer.data)
            return f"{self.title} answered at {settings.url}"

        return HealthCheck(
            name=f"{self.name}_api",
            check=check,
            backend=self.name,
            timeout=min(5.0, settings.request_timeout),
            not_configured=not_configured,
            shared=True,
        )

    def same_identity(self, other: RestBackend) -> bool:
        """Two declarations of one backend (e.g. in two plugins that share it)."""
        return (
            self.name == other.name
            and self.settings_table == other.settings_table
            and self.api_prefix == other.api_prefix
            and self.health_path == other.health_path
            and self.settings.env_prefix == other.settings.env_prefix
            and set(self.settings.model_fields) == set(other.settings.model_fields)
        )
