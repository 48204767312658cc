"""Test support for the gitea plugin, a distribution of its own (never installed in a deployment).

- :class:`FakeGitea`: a Gitea-compatible HTTP server on 127.0.0.1 backed by real git
  repositories, with Gitea's documented quirks and fault switches.
- :class:`Builder`, :func:`build_job_repo`, :func:`build_many_commits`, :func:`build_many_tags`:
  real repositories shaped like an agent job's delivery (phase tags, ``job-frozen``, renames,
  binaries, …); :func:`git_out` runs git with only its defaults.
- :class:`Site`: a served set of job repositories and the ``[plugins.gitea]`` table pointing at it.

Other plugins' tests use these too (the orchestrator's frozen-job review reads a job's history
here). Nothing here is imported by the plugin itself.
"""

from __future__ import annotations

from .fake import FakeGitea
from .repos import Builder, build_job_repo, build_many_commits, build_many_tags, git_out, lines
from .site import OWNER, TOKEN, Site

__all__ = [
    "OWNER",
    "TOKEN",
    "Builder",
    "FakeGitea",
    "Site",
    "build_job_repo",
    "build_many_commits",
    "build_many_tags",
    "git_out",
    "lines",
]
