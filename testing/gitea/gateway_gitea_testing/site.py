"""What tests share: the served job repositories and how to point a gateway at them."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from .fake import FakeGitea
from .repos import Builder

OWNER = "graphrag"
TOKEN = "gitea-test-token-7f3e9a1c"


@dataclass
class Site:
    gitea: FakeGitea
    job: str  # the main job's id
    repo: Builder
    empty_job: str
    busy_job: str
    busy: Builder

    def config(self, **extra: Any) -> dict[str, dict[str, Any]]:
        return {"gitea": {"url": self.gitea.url, "token": TOKEN, **extra}}
