"""The gitea plugin: a job's git history in Gitea — commits, range diffs, files, tags.

Agent jobs deliver their work into ``{owner}/job-{job_id}``, with phase tags
(``phase_2_end``) and ``job-frozen`` when the job was frozen for review. Five read tools let
the model review what a job produced. Connection, settings, health check and breaker come from
the core's REST kit (``GITEA``); httpx is imported by the first call, not at start-up.
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel

from gateway import Tier, ToolSpec, hookimpl

from . import tools
from .models import (
    GITEA,
    CommitsResult,
    DiffArgs,
    DiffResult,
    FileArgs,
    FileResult,
    FilesResult,
    ListCommitsArgs,
    ListFilesArgs,
    ListTagsArgs,
    Settings,
    TagsResult,
)


@hookimpl
def plugin_settings() -> type[BaseModel]:
    return Settings


def _spec(**kwargs: Any) -> ToolSpec:
    return ToolSpec(tier=Tier.READ, backend=GITEA, open_world=True, **kwargs)


@hookimpl
def register_tools(register: Any) -> None:
    register(
        _spec(
            name="list_job_commits",
            title="List a job's commits",
            description=(
                "List the git commits of a job's Gitea repository, newest first: sha, message, "
                "timestamp, author. since_ref='phase_2_end' lists only what came after that "
                "tag (what did the agent do in phase 3?). Pages with limit/page; has_more says "
                "when to ask for the next page."
            ),
            input_model=ListCommitsArgs,
            output_model=CommitsResult,
            handler=tools.list_job_commits,
        )
    )
    register(
        _spec(
            name="get_job_diff",
            title="Diff a job between two refs",
            description=(
                "Unified diff of a job's repository from base to head (default HEAD), the same "
                "text as `git diff base head`, with a summary per file (status, additions, "
                "deletions). base='job-frozen' shows what changed since the last freeze; "
                "phase tags work too. file_path limits it to one file. The text is cut at "
                "max_chars (default 50000, 0 = unlimited) at a line boundary with a "
                "[truncated] marker that says how much was left out."
            ),
            input_model=DiffArgs,
            output_model=DiffResult,
            handler=tools.get_job_diff,
            max_result_chars=500_000,
        )
    )
    register(
        _spec(
            name="get_job_file",
            title="Read a file of a job",
            description=(
                "Read one file of a job's repository at any ref (branch, tag such as "
                "phase_2_end, commit SHA; default HEAD): text content, size and the commit it "
                "was read at. Binary files are reported as binary, not dumped; large files are "
                "cut with a [truncated] marker."
            ),
            input_model=FileArgs,
            output_model=FileResult,
            handler=tools.get_job_file,
            max_result_chars=200_000,
        )
    )
    register(
        _spec(
            name="list_job_files",
            title="List a job's files",
            description=(
                "List one directory of a job's repository at any ref (default HEAD): name, "
                "path, type (file, dir, symlink, submodule) and size of each entry. path='/' "
                "is the root; pass a directory such as 'output' to go deeper."
            ),
            input_model=ListFilesArgs,
            output_model=FilesResult,
            handler=tools.list_job_files,
        )
    )
    register(
        _spec(
            name="list_job_tags",
            title="List a job's tags",
            description=(
                "List the tags of a job's repository oldest first (name, commit sha, "
                "timestamp): the phase history (phase_1_start, phase_1_end, ...) and job-frozen "
                "when the job was frozen for review."
            ),
            input_model=ListTagsArgs,
            output_model=TagsResult,
            handler=tools.list_job_tags,
        )
    )
