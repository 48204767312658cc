"""Settings, tool arguments and tool results of the gitea plugin.

The input models are the validators the core runs before any handler: a job id that is not a
UUID, a ref with characters git refuses, a path with ``..`` or control characters never reach
Gitea.
"""

from __future__ import annotations

import re
import uuid
from typing import Annotated, Any, ClassVar, Literal

from pydantic import (
    AfterValidator,
    BaseModel,
    Field,
    SecretStr,
    field_validator,
)

from gateway import Args, env_field
from gateway.rest import RestBackend, RestSettings, basic_auth, uuid_check

UNAVAILABLE = "Gitea is not available — git history tools require a running Gitea instance"

# --- settings ------------------------------------------------------------------------------

_REPO_NAME = re.compile(r"^[A-Za-z0-9._-]{1,100}$")


class Settings(RestSettings):
    """``[plugins.gitea]`` in the gateway's TOML file; each field also has an env variable
    (``GITEA_URL``, ``GITEA_TOKEN``, ``GITEA_REQUEST_TIMEOUT``, ``GITEA_MAX_CONCURRENCY``,
    ``GITEA_VERIFY_TLS``, ``GITEA_MAX_RESPONSE_BYTES``, ``GITEA_MAX_RESPONSE_VALUES`` come with
    the REST kit)."""

    env_prefix: ClassVar[str] = "GITEA"

    user: str | None = env_field(
        "GITEA_USER", default=None, description="User for basic auth (when no token is set)"
    )
    password: SecretStr | None = env_field(
        "GITEA_PASSWORD", default=None, description="Password for basic auth"
    )
    owner: str = env_field("GITEA_OWNER", default="graphrag", description="Owner of the job repos")
    repo_template: str = env_field(
        "GITEA_REPO_TEMPLATE",
        default="job-{job_id}",
        description="Name of a job's repository; {job_id} is replaced by the job UUID",
    )
    max_file_bytes: Annotated[int, Field(ge=1, le=100 * 1024 * 1024)] = env_field(
        "GITEA_MAX_FILE_BYTES",
        default=1024 * 1024,
        description="get_job_file returns at most this many bytes of a file, then a marker",
    )
    max_diff_file_bytes: Annotated[int, Field(ge=1, le=512 * 1024 * 1024)] = env_field(
        "GITEA_MAX_DIFF_FILE_BYTES",
        default=10 * 1024 * 1024,
        description="get_job_diff skips (and lists) files larger than this at either end",
    )
    max_diff_total_bytes: Annotated[int, Field(ge=1, le=4 * 1024 * 1024 * 1024)] = env_field(
        "GITEA_MAX_DIFF_TOTAL_BYTES",
        default=128 * 1024 * 1024,
        description="get_job_diff fetches at most this many bytes in all; the largest files "
        "beyond it are skipped (and listed)",
    )
    diff_engine: Literal["auto", "git", "difflib"] = env_field(
        "GITEA_DIFF_ENGINE",
        default="auto",
        description="auto: the local git binary when present (exact), else difflib",
    )

    @field_validator("url")
    @classmethod
    def _site_root(cls, value: str | None) -> str | None:
        # People paste the API root; Gitea's own convention is the site root.
        if value is not None and value.rstrip("/").endswith("/api/v1"):
            return value.rstrip("/")[: -len("/api/v1")]
        return value

    @field_validator("owner")
    @classmethod
    def _owner(cls, value: str) -> str:
        if not _REPO_NAME.fullmatch(value):
            raise ValueError("must be a Gitea user or organisation name (letters, digits, . _ -)")
        return value

    @field_validator("repo_template")
    @classmethod
    def _template(cls, value: str) -> str:
        if value.count("{job_id}") != 1:
            raise ValueError("must contain {job_id} exactly once, e.g. job-{job_id}")
        probe = value.replace("{job_id}", str(uuid.UUID(int=0)))
        if "{" in probe or "}" in probe or not _REPO_NAME.fullmatch(probe):
            raise ValueError("must give a valid repository name (letters, digits, . _ -)")
        return value

    def repo_name(self, job_id: str) -> str:
        return self.repo_template.replace("{job_id}", job_id)


def gitea_auth(settings: Settings) -> dict[str, str]:
    """Gitea's own token scheme, else basic auth with GITEA_USER and GITEA_PASSWORD."""
    if settings.token is not None:
        return {"Authorization": f"token {settings.token.get_secret_value()}"}
    if settings.user:
        secret = settings.password.get_secret_value() if settings.password else ""
        return basic_auth(settings.user, secret)
    return {}


def gitea_version(answer: Any) -> str:
    """What health reports of ``GET /version``: that it answered, with the credentials."""
    version = answer.get("version") if isinstance(answer, dict) else None
    if not isinstance(version, str):
        raise ValueError("Gitea answered /version in an unexpected shape")
    return f"Gitea {version}, credentials accepted"


GITEA = RestBackend(
    name="gitea",
    settings=Settings,
    settings_table="gitea",
    title="Gitea",
    api_prefix="/api/v1",
    health_path="/version",
    health_detail=gitea_version,
    auth=gitea_auth,
    user_agent="mcp-gateway-gitea",
    down_message=UNAVAILABLE,
    fallbacks=(
        ("get_workspace_file", "(orchestrator) reads a job's files as they are now, no history"),
    ),
)


# --- argument validators ---------------------------------------------------------------------

_CONTROL = re.compile(r"[\x00-\x1f\x7f-\x9f]")
_REF_CHARS = re.compile(r"^[A-Za-z0-9_./+-]+$")


def check_ref(value: str) -> str:
    """A branch, tag, (short) SHA or HEAD, spelt the way ``git check-ref-format`` allows.

    Stricter than git on purpose: no revision syntax (``~``, ``^``, ``@{``, ``:``), so a ref
    can never be read as an option or a range by the server's git.
    """
    bad = (
        not _REF_CHARS.fullmatch(value)
        or value.startswith(("-", "/", "."))
        or value.endswith(("/", ".", ".lock"))
        or ".." in value
        or "//" in value
        or "/." in value
    )
    if bad:
        raise ValueError(
            "must be a branch, tag or commit SHA (letters, digits and . _ / + -; no '..', "
            "no leading '-'), or HEAD; list_job_tags shows the tags"
        )
    return value


def _check_segments(value: str) -> list[str]:
    if _CONTROL.search(value):
        raise ValueError("must not contain control characters")
    if value.startswith(("/", "\\")) or re.match(r"^[A-Za-z]:[\\/]", value):
        raise ValueError("must be relative to the repository root, e.g. output/report.md")
    parts = [p for p in value.split("/") if p not in ("", ".")]
    if ".." in parts:
        raise ValueError(
            "must not contain '..' segments; paths are relative to the repository root"
        )
    return parts


def check_file_path(value: str) -> str:
    parts = _check_segments(value)
    if not parts:
        raise ValueError("must name a file, e.g. workspace.md")
    return "/".join(parts)


def check_dir_path(value: str) -> str:
    """``/``, ``.`` and empty mean the repository root; otherwise as :func:`check_file_path`."""
    if value.strip() in ("", "/", "."):
        return ""
    return "/".join(_check_segments(value))


JobId = Annotated[
    str, Field(description="Job UUID.", max_length=36), uuid_check("job", "list_jobs or get_job")
]
Ref = Annotated[str, Field(min_length=1, max_length=255), AfterValidator(check_ref)]
FilePath = Annotated[str, Field(min_length=1, max_length=1024), AfterValidator(check_file_path)]


# --- tool arguments --------------------------------------------------------------------------


class ListCommitsArgs(Args):
    job_id: JobId
    ref: Ref = Field("main", description="Branch, tag or SHA to list from.")
    since_ref: Ref | None = Field(
        None,
        description="Only commits after this ref (git log since_ref..ref).",
    )
    limit: int = Field(20, ge=1, le=100, description="Commits per page.")
    page: int = Field(1, ge=1, le=100_000, description="Page, from 1.")


class DiffArgs(Args):
    job_id: JobId
    base: Ref = Field(description="Base ref (SHA, tag, branch); job-frozen = the last freeze.")
    head: Ref = Field("HEAD", description="Head ref; HEAD = default branch.")
    file_path: FilePath | None = Field(None, description="Only this file or folder.")
    max_chars: int = Field(
        50_000,
        ge=0,
        le=10_000_000,
        description="Cut the text here; 0 = unlimited.",
    )


class FileArgs(Args):
    job_id: JobId
    file_path: FilePath = Field(description="Path in the repo, e.g. workspace.md.")
    ref: Ref = Field("HEAD", description="Branch, tag or SHA; HEAD = default branch.")


class ListFilesArgs(Args):
    job_id: JobId
    path: Annotated[str, Field(max_length=1024), AfterValidator(check_dir_path)] = Field(
        "/", description="Folder; / = root."
    )
    ref: Ref = Field("HEAD", description="Branch, tag or SHA; HEAD = default branch.")


class ListTagsArgs(Args):
    job_id: JobId


# --- tool results ----------------------------------------------------------------------------


class CommitOut(BaseModel):
    sha: str
    message: str = Field(description="Full commit message without the trailing newline.")
    timestamp: str = Field(description="Author date, ISO 8601 with offset.")
    author: str
    author_email: str
    committed_at: str = Field(description="Committer date, ISO 8601 with offset.")
    parents: list[str]


class CommitsResult(BaseModel):
    job_id: str
    repository: str
    ref: str
    ref_sha: str | None
    since_ref: str | None = None
    since_sha: str | None = None
    page: int
    limit: int
    total: int
    has_more: bool
    empty_repository: bool = False
    commits: list[CommitOut]


class ResolvedRef(BaseModel):
    ref: str
    sha: str


Status = Literal["added", "deleted", "modified", "renamed", "type_changed", "copied"]


class DiffFile(BaseModel):
    path: str
    old_path: str | None = Field(None, description="Set for renames: the path at base.")
    status: Status
    additions: int
    deletions: int
    binary: bool = False


class SkippedFile(BaseModel):
    path: str
    size: int
    reason: str


class DiffSummary(BaseModel):
    files_changed: int
    additions: int
    deletions: int
    files: list[DiffFile]
    skipped_files: list[SkippedFile] = Field(
        default_factory=list, description="Changed files left out of the diff text (too large)."
    )


class DiffResult(BaseModel):
    job_id: str
    repository: str
    base: ResolvedRef
    head: ResolvedRef
    file_path: str | None
    engine: Literal["git", "difflib"] = Field(
        description="git: text equals `git diff base head`; difflib: approximation (no git binary)."
    )
    summary: DiffSummary
    diff: str
    truncated: bool
    total_chars: int
    omitted_chars: int = 0
    omitted_lines: int = 0


class FileResult(BaseModel):
    job_id: str
    repository: str
    path: str
    ref: str
    commit: str = Field(description="The full SHA the ref resolved to; the file is read there.")
    size: int
    binary: bool
    object_type: str = Field("file", description="file or symlink (content is the link target).")
    content: str | None = Field(description="Text content; null for binary files.")
    truncated: bool
    returned_bytes: int


class FileEntry(BaseModel):
    name: str
    path: str
    type: Literal["file", "dir", "symlink", "submodule"]
    size: int
    sha: str


class FilesResult(BaseModel):
    job_id: str
    repository: str
    path: str
    ref: str
    commit: str | None
    empty_repository: bool = False
    entries: list[FileEntry]


class TagOut(BaseModel):
    name: str
    sha: str = Field(description="The commit the tag points at.")
    timestamp: str = Field(description="Tagger date (annotated) or the commit's committer date.")
    annotated: bool
    message: str | None = None


class TagsResult(BaseModel):
    job_id: str
    repository: str
    count: int
    tags: list[TagOut] = Field(description="Oldest first.")
