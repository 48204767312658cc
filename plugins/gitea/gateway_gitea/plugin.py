"""The gitea plugin: a job's git history in Gitea — commits, range diffs, files, tags.

Agent jobs deliver their work into ``{owner}/job-{job_id}``, with phase tags
(``phase_2_end``) and ``job-frozen`` when the job was frozen for review. Five read tools let
the model review what a job produced. Connection, settings, health check and breaker come from
the core's REST kit (``GITEA``); httpx is imported by the first call, not at start-up.
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel

from gateway import ToolSpec, hookimpl
from gateway.rest import backend_tool

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
    return backend_tool(GITEA, **kwargs)


@hookimpl
def register_tools(register: Any) -> None:
    register(
        _spec(
            name="list_job_commits",
            title="List a job's commits",
            description=(
                "A job's git commits, newest first (sha, message, author, times). "
                "since_ref=phase_2_end: only what came after that tag. has_more: ask for the "
                "next page."
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
                "Unified diff of a job's repo, exactly `git diff base head`, with per-file "
                "stats. base=job-frozen: changes since the last freeze. Text cut at max_chars on "
                "a line boundary, marked [truncated] with how much was left out."
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
                "One file of a job's repo at a ref: text, size and the commit read. Binary "
                "files are not dumped; large ones are cut, marked [truncated]."
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
                "One folder of a job's repo at a ref: name, path, type (file, dir, symlink, "
                "submodule) and size per entry."
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
                "A job's repo tags, oldest first (name, sha, time): phase_N_start, "
                "phase_N_end, and job-frozen when frozen for review."
            ),
            input_model=ListTagsArgs,
            output_model=TagsResult,
            handler=tools.list_job_tags,
        )
    )
