"""Fixtures: real git repositories served by a Gitea-compatible HTTP server on 127.0.0.1."""

from __future__ import annotations

import uuid
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from gateway_gitea_testing import (
    OWNER,
    TOKEN,
    Builder,
    FakeGitea,
    Site,
    build_job_repo,
    build_many_commits,
    build_many_tags,
)


@pytest.fixture(scope="session")
def site(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Site]:
    """One job repository with a full history, an empty one and one with 130 commits."""
    root = tmp_path_factory.mktemp("gitea-repos")
    job, empty_job, busy_job = (str(uuid.UUID(int=n)) for n in (0xA11CE, 0xE0E0, 0xB5B5))
    repo = build_job_repo(root / "job")
    Builder(root / "empty")
    busy = build_many_commits(root / "busy", 130)
    build_many_tags(busy, 60)
    gitea = FakeGitea(
        repos={
            f"{OWNER}/job-{job}": repo.path,
            f"{OWNER}/job-{empty_job}": root / "empty",
            f"{OWNER}/job-{busy_job}": busy.path,
        },
        token=TOKEN,
        users={"reviewer": "correct horse"},
    )
    with gitea:
        yield Site(gitea, job, repo, empty_job, busy_job, busy)


@pytest.fixture
def gitea_gateway(gateway_factory: Callable[..., Any], site: Site) -> Callable[..., Any]:
    """Build a gateway with only the gitea plugin, pointed at the shared test server.

    ``env={}`` keeps the machine's GITEA_* variables out of the test."""

    def make(config: dict[str, Any] | None = None, **gateway_settings: Any) -> Any:
        return gateway_factory(
            plugins=["gitea"],
            plugin_config=config if config is not None else site.config(),
            env={},
            **gateway_settings,
        )

    return make
