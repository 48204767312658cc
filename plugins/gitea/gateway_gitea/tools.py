"""The five read tools. Each resolves its refs to full SHAs once, then uses only those.

Each tool is a :class:`~gateway.rest.RestTool` of the ``GITEA`` backend with a ``run`` function:
Gitea's paging and quirks live in :class:`~gateway_gitea.client.GiteaClient`, one per plugin,
over the kit's shared client.
"""

from __future__ import annotations

import codecs
from datetime import datetime
from typing import TYPE_CHECKING, Any, Literal

from gateway import ErrorCode, GatewayError, Resource, Tier
from gateway.rest import RestContext, RestTool, truncation_marker

from .models import (
    GITEA,
    CommitOut,
    CommitsResult,
    DiffArgs,
    DiffResult,
    DiffSummary,
    FileArgs,
    FileEntry,
    FileResult,
    FilesResult,
    ListCommitsArgs,
    ListFilesArgs,
    ListTagsArgs,
    ResolvedRef,
    Settings,
    TagOut,
    TagsResult,
)

if TYPE_CHECKING:
    from .client import Commit, GiteaClient, TreeEntry


#: The plugin's Gitea client: it keeps what it learns of the server's page sizes.
GITEA_CLIENT: Resource[GiteaClient] = Resource("gitea")


def client_of(ctx: RestContext[Settings]) -> GiteaClient:
    """The Gitea client over the kit's shared connection pool (opened on the first call)."""
    from .client import GiteaClient

    rest = ctx.client
    client = ctx.plugin.get(GITEA_CLIENT)
    if client is None or client.rest is not rest:
        client = ctx.plugin.put(GITEA_CLIENT, GiteaClient(rest, ctx.settings))
    return client


def iso(value: str) -> str:
    """Gitea's RFC 3339 (``Z`` for UTC) as ISO 8601 with an explicit offset, like git's %aI."""
    try:
        return datetime.fromisoformat(value.replace("Z", "+00:00")).isoformat()
    except ValueError:
        return value


def _commit_out(c: Commit) -> CommitOut:
    return CommitOut(
        sha=c.sha,
        message=c.message.rstrip("\n"),
        timestamp=iso(c.author_date),
        author=c.author_name,
        author_email=c.author_email,
        committed_at=iso(c.committer_date),
        parents=list(c.parents),
    )


async def list_job_commits(args: ListCommitsArgs, ctx: RestContext[Settings]) -> CommitsResult:
    from .client import EmptyRepository

    client = client_of(ctx)
    name = client.full_name(args.job_id)
    result = CommitsResult(
        job_id=args.job_id,
        repository=name,
        ref=args.ref,
        ref_sha=None,
        since_ref=args.since_ref,
        page=args.page,
        limit=args.limit,
        total=0,
        has_more=False,
        commits=[],
    )
    offset = (args.page - 1) * args.limit
    try:
        head = await client.resolve(args.job_id, args.ref)
        since = await client.resolve(args.job_id, args.since_ref) if args.since_ref else None
        commits, total = await client.commits(
            args.job_id, head.sha, since.sha if since else None, offset, args.limit
        )
    except EmptyRepository:
        result.empty_repository = True
        return result
    result.ref_sha = head.sha
    result.since_sha = since.sha if since else None
    result.total = total
    result.has_more = offset + len(commits) < total
    result.commits = [_commit_out(c) for c in commits]
    return result


async def get_job_diff(args: DiffArgs, ctx: RestContext[Settings]) -> DiffResult:
    from . import diff
    from .client import EmptyRepository

    client = client_of(ctx)
    settings = ctx.settings
    name = client.full_name(args.job_id)
    engine = settings.diff_engine
    git = diff.git_binary() if engine != "difflib" else None
    if engine == "git" and git is None:
        raise GatewayError(
            ErrorCode.BACKEND_UNAVAILABLE,
            "diff_engine is 'git' but no git binary is on the gateway's PATH; install git or "
            "set GITEA_DIFF_ENGINE=auto",
            retryable=False,
        )

    async def progress(done: int, total: int) -> None:
        await ctx.progress(done, total, f"fetched {done} of {total} changed files")

    try:
        base = await client.resolve(args.job_id, args.base)
        head = await client.resolve(args.job_id, args.head)
        walk = await diff.walk_trees(
            client,
            args.job_id,
            (base.sha, base.tree),
            (head.sha, head.tree),
            args.file_path,
            settings.max_diff_file_bytes,
        )
        diff.enforce_budget(walk, settings.max_diff_total_bytes)
        blobs = await diff.fetch_blobs(
            client, args.job_id, walk.blobs, settings.max_diff_file_bytes, progress
        )
    except EmptyRepository:
        raise EmptyRepository(name) from None
    hint = "call again with a larger max_chars (0 = unlimited) or one file_path"
    limit = diff.TextLimit(args.max_chars)
    files = None
    used: Literal["git", "difflib"] = "difflib"
    if git is not None:
        files = await ctx.run_sync(
            diff.git_diff, git, walk, blobs, (base.tree, head.tree), args.file_path, limit
        )
        if files is None:
            limit = diff.TextLimit(args.max_chars)
        else:
            used = "git"
    if files is None:
        files = await ctx.run_sync(diff.difflib_diff, walk, blobs, limit)
    summary = DiffSummary(
        files_changed=len(files) + len(walk.skipped),
        additions=sum(f.additions for f in files),
        deletions=sum(f.deletions for f in files),
        files=files,
        skipped_files=walk.skipped,
    )
    return DiffResult(
        job_id=args.job_id,
        repository=name,
        base=ResolvedRef(ref=args.base, sha=base.sha),
        head=ResolvedRef(ref=args.head, sha=head.sha),
        file_path=args.file_path,
        engine=used,
        summary=summary,
        diff=limit.text(hint),
        truncated=limit.over,
        total_chars=limit.total_chars,
        omitted_chars=limit.omitted_chars,
        omitted_lines=limit.omitted_lines,
    )


def _decode_prefix(data: bytes, complete: bool) -> str:
    """UTF-8 with replacement; a character cut in half at a truncation point is dropped."""
    decoder = codecs.getincrementaldecoder("utf-8")("replace")
    return decoder.decode(data, final=complete)


async def get_job_file(args: FileArgs, ctx: RestContext[Settings]) -> FileResult:
    from .client import EmptyRepository

    client = client_of(ctx)
    name = client.full_name(args.job_id)
    cap = ctx.settings.max_file_bytes
    try:
        commit = await client.resolve(args.job_id, args.ref)
        raw = await client.raw(args.job_id, args.file_path, commit.sha, limit=cap, use_range=True)
    except EmptyRepository:
        raise EmptyRepository(name) from None
    binary = b"\0" in raw.data[:8000]
    content = None
    if not binary:
        content = _decode_prefix(raw.data, raw.complete)
        if not raw.complete:
            omitted = raw.size - len(raw.data)
            marker = truncation_marker(omitted, raw.size, unit="bytes", hint="raise max_file_bytes")
            content += f"\n{marker}\n"
    return FileResult(
        job_id=args.job_id,
        repository=name,
        path=args.file_path,
        ref=args.ref,
        commit=commit.sha,
        size=raw.size,
        binary=binary,
        object_type=raw.object_type,
        content=content,
        truncated=not raw.complete,
        returned_bytes=0 if binary else len(raw.data),
    )


EntryType = Literal["file", "dir", "symlink", "submodule"]
_TYPES: dict[str, EntryType] = {"tree": "dir", "commit": "submodule"}


def _entry_type(e: TreeEntry) -> EntryType:
    if e.type == "blob":
        return "symlink" if e.mode == "120000" else "file"
    return _TYPES[e.type]


async def list_job_files(args: ListFilesArgs, ctx: RestContext[Settings]) -> FilesResult:
    from .client import EmptyRepository

    client = client_of(ctx)
    name = client.full_name(args.job_id)
    shown = args.path or "/"
    result = FilesResult(
        job_id=args.job_id, repository=name, path=shown, ref=args.ref, commit=None, entries=[]
    )
    try:
        commit = await client.resolve(args.job_id, args.ref)
        result.entries = await _folder(client, args, commit, name)
    except EmptyRepository:
        result.empty_repository = True
        result.entries = []
        return result
    result.commit = commit.sha
    return result


async def _folder(
    client: GiteaClient, args: ListFilesArgs, commit: Commit, name: str
) -> list[FileEntry]:
    """The entries of ``args.path`` at ``commit``, walking one tree per path segment."""
    tree = commit.tree
    walked = ""
    for part in [p for p in args.path.split("/") if p]:
        walked = f"{walked}/{part}" if walked else part
        entry = next((e for e in await client.tree(args.job_id, tree) if e.name == part), None)
        if entry is None:
            raise GatewayError(
                ErrorCode.NOT_FOUND,
                f"no directory {walked!r} at {args.ref} ({commit.sha[:12]}) in {name}; "
                "list the parent directory to see what exists",
            )
        if entry.type != "tree":
            what = "a submodule" if entry.type == "commit" else "a file"
            raise GatewayError(
                ErrorCode.NOT_FOUND,
                f"{walked!r} is {what} at {args.ref} ({commit.sha[:12]}), not a directory; "
                "read a file with get_job_file",
            )
        tree = entry.sha
    prefix = f"{args.path}/" if args.path else ""
    return [
        FileEntry(
            name=e.name,
            path=prefix + e.name,
            type=_entry_type(e),
            size=e.size if e.type == "blob" else 0,
            sha=e.sha,
        )
        for e in await client.tree(args.job_id, tree)
    ]


async def list_job_tags(args: ListTagsArgs, ctx: RestContext[Settings]) -> TagsResult:
    client = client_of(ctx)
    tags = await client.tags(args.job_id)

    def when(created: str) -> datetime | str:
        try:
            return datetime.fromisoformat(created.replace("Z", "+00:00"))
        except ValueError:
            return created

    def key(t: Any) -> tuple[Any, ...]:
        moment = when(t.created)
        return (isinstance(moment, str), moment if not isinstance(moment, str) else 0, t.name)

    ordered = sorted(tags, key=key)
    return TagsResult(
        job_id=args.job_id,
        repository=client.full_name(args.job_id),
        count=len(ordered),
        tags=[
            TagOut(
                name=t.name,
                sha=t.commit,
                timestamp=iso(t.created),
                annotated=t.id != t.commit,
                message=t.message.rstrip("\n") if t.id != t.commit else None,
            )
            for t in ordered
        ],
    )


TOOLS = (
    RestTool(
        name="list_job_commits",
        title="List a job's commits",
        description="A job's git commits, newest first (sha, message, author, times). "
        "since_ref=phase_2_end: only what came after that tag. has_more: ask for the next page.",
        input_model=ListCommitsArgs,
        output_model=CommitsResult,
        tier=Tier.READ,
        backend=GITEA,
        run=list_job_commits,
    ),
    RestTool(
        name="get_job_diff",
        title="Diff a job between two refs",
        description="Unified diff of a job's repo, exactly `git diff base head`, with per-file "
        "stats. base=job-frozen: changes since the last freeze. Text cut at max_chars on a line "
        "boundary, marked [truncated] with how much was left out.",
        input_model=DiffArgs,
        output_model=DiffResult,
        tier=Tier.READ,
        backend=GITEA,
        run=get_job_diff,
        max_result_chars=500_000,
    ),
    RestTool(
        name="get_job_file",
        title="Read a file of a job",
        description="One file of a job's repo at a ref: text, size and the commit read. Binary "
        "files are not dumped; large ones are cut, marked [truncated].",
        input_model=FileArgs,
        output_model=FileResult,
        tier=Tier.READ,
        backend=GITEA,
        run=get_job_file,
        max_result_chars=200_000,
    ),
    RestTool(
        name="list_job_files",
        title="List a job's files",
        description="One folder of a job's repo at a ref: name, path, type (file, dir, symlink, "
        "submodule) and size per entry.",
        input_model=ListFilesArgs,
        output_model=FilesResult,
        tier=Tier.READ,
        backend=GITEA,
        run=list_job_files,
    ),
    RestTool(
        name="list_job_tags",
        title="List a job's tags",
        description="A job's repo tags, oldest first (name, sha, time): phase_N_start, "
        "phase_N_end, and job-frozen when frozen for review.",
        input_model=ListTagsArgs,
        output_model=TagsResult,
        tier=Tier.READ,
        backend=GITEA,
        run=list_job_tags,
    ),
)
