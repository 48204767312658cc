"""Real git repositories shaped like an agent job's delivery, built with the ``git`` command.

``build_job_repo`` makes a history across phases with phase tags and ``job-frozen``, renames
(pure and with edits), deletions, a mode change, a binary file, a large file, a symlink, names
that git quotes, a file without a final newline, CRLF lines and a side branch with a ``/``.
``git_out`` runs git with only git's defaults, so ``git diff`` here is the reference text.
"""

from __future__ import annotations

import os
import subprocess
from dataclasses import dataclass, field
from pathlib import Path

GIT_ENV = {
    **{k: v for k, v in os.environ.items() if not k.startswith("GIT_")},
    "GIT_CONFIG_GLOBAL": os.devnull,
    "GIT_CONFIG_NOSYSTEM": "1",
    "LC_ALL": "C",
}


def git_out(
    repo: Path, *args: str, env: dict[str, str] | None = None, input: bytes | None = None
) -> bytes:
    done = subprocess.run(
        ["git", "-C", str(repo), *args],
        env={**GIT_ENV, **(env or {})},
        input=input,
        capture_output=True,
        check=False,
    )
    if done.returncode != 0:
        raise RuntimeError(f"git {args[0]} failed: {done.stderr.decode(errors='replace')}")
    return done.stdout


@dataclass
class Builder:
    path: Path
    object_format: str = "sha1"
    commits: dict[str, str] = field(default_factory=dict)

    def __post_init__(self) -> None:
        self.path.mkdir(parents=True, exist_ok=True)
        git_out(
            self.path.parent,
            "init",
            "-q",
            "-b",
            "main",
            f"--object-format={self.object_format}",
            str(self.path),
        )

    def write(self, rel: str, content: bytes | str) -> None:
        target = self.path / rel
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_bytes(content.encode() if isinstance(content, str) else content)

    def git(self, *args: str, date: str | None = None) -> str:
        env = {}
        if date:
            env = {
                "GIT_AUTHOR_DATE": date,
                "GIT_COMMITTER_DATE": date,
                "GIT_AUTHOR_NAME": "Agent Smith",
                "GIT_AUTHOR_EMAIL": "agent@jobs.example",
                "GIT_COMMITTER_NAME": "Orchestrator",
                "GIT_COMMITTER_EMAIL": "orchestrator@jobs.example",
            }
        return git_out(self.path, *args, env=env).decode()

    def commit(self, label: str, message: str, date: str) -> str:
        self.git("add", "-A")
        self.git(
            "-c",
            "user.name=Agent Smith",
            "-c",
            "user.email=agent@jobs.example",
            "commit",
            "-q",
            "--allow-empty",
            "-m",
            message,
            date=date,
        )
        sha = self.git("rev-parse", "HEAD").strip()
        self.commits[label] = sha
        return sha

    def tag(self, name: str, date: str, message: str | None = None) -> None:
        ident = ["-c", "user.name=Reviewer", "-c", "user.email=review@jobs.example"]
        if message is None:
            self.git(*ident, "tag", name, date=date)
        else:
            self.git(*ident, "tag", "-a", name, "-m", message, date=date)


def lines(prefix: str, n: int, start: int = 1) -> str:
    return "".join(f"{prefix} line {i}: the agent wrote this\n" for i in range(start, start + n))


def build_job_repo(path: Path, *, big_lines: int = 6000) -> Builder:
    b = Builder(path)
    # phase 1 --------------------------------------------------------------------------------
    b.write("README.md", "# Job\n\nDeliverables of the research job.\n")
    b.write("plan.md", lines("plan", 20))
    b.write("workspace.md", lines("memory", 40))
    b.write("src/app.py", "".join(f"def step_{i}():\n    return {i}\n\n" for i in range(30)))
    b.write("src/util/helpers.py", lines("# helper", 30))
    b.write("data/table.csv", "id,value\n" + "".join(f"{i},{i * i}\n" for i in range(50)))
    b.write("notes.md", lines("note", 25))
    b.write("assets/logo.png", bytes(range(256)) * 8 + b"\x00PNG-ish")
    b.write("docs/spaces in name.md", "a file whose name has spaces\n")
    b.write("donn\u00e9es/r\u00e9sum\u00e9.md", "caf\u00e9 au lait\nna\u00efve\n")
    b.write("scripts/run.sh", "#!/bin/sh\necho run\n")
    b.write("nonl.txt", "first\nsecond\nlast line without newline")
    b.commit(
        "c1", "phase 1: plan the work\n\nFirst commit of the agent.", "2024-03-01T09:00:00+01:00"
    )
    b.tag("phase_1_start", "2024-03-01T09:00:00+01:00")
    # phase 1 work ---------------------------------------------------------------------------
    ws = lines("memory", 40).splitlines(keepends=True)
    ws[10] = "memory line 11: REVISED by the agent\n"
    ws.insert(30, "memory line 30b: an insight\n")
    b.write("workspace.md", "".join(ws))
    app = (b.path / "src/app.py").read_text().splitlines(keepends=True)
    app[4] = "    return 'one'\n"
    app[70] = "    return 'twenty-three'\n"
    b.write("src/app.py", "".join(app))
    b.write("output/report.md", "# Report\n\n" + lines("finding", 15))
    b.commit("c2", "phase 1: gather findings", "2024-03-02T10:30:00+01:00")
    b.tag("phase_1_end", "2024-03-02T11:00:00+00:00", "end of phase 1")
    b.tag("phase_2_start", "2024-03-02T11:00:00+00:00")
    # phase 2: restructure ---------------------------------------------------------------------
    b.git("mv", "notes.md", "docs/notes.md")
    helpers = lines("# helper", 30).splitlines(keepends=True)
    helpers[3] = "# helper line 4: renamed and touched\n"
    (b.path / "src/util/helpers.py").unlink()
    b.write("src/helpers.py", "".join(helpers))
    (b.path / "data/table.csv").unlink()
    (b.path / "scripts/run.sh").chmod(0o755)
    b.write("assets/logo.png", bytes(range(256)) * 8 + b"\x00PNG-ish v2")
    b.write("output/big.log", lines("log", big_lines))
    os.symlink("output/report.md", b.path / "latest")
    b.commit("c3", "phase 2: restructure the deliverables", "2024-03-04T08:15:00-05:00")
    b.tag("phase_2_end", "2024-03-04T14:00:00+00:00", "end of phase 2")
    b.tag("job-frozen", "2024-03-04T15:00:00+00:00", "frozen for review")
    # after the freeze -------------------------------------------------------------------------
    ws = (b.path / "workspace.md").read_text().splitlines(keepends=True)
    ws[0] = "memory line 1: reviewed\n"
    ws.append("memory line 42: after review\n")
    b.write("workspace.md", "".join(ws))
    b.write("output/report.md", "# Report v2\n\n" + lines("finding", 10) + lines("conclusion", 5))
    (b.path / "docs/spaces in name.md").unlink()
    b.write("output/empty.txt", "")
    b.write("nonl.txt", "first\nsecond\nlast line changed, still no newline")
    b.write("windows.txt", "crlf one\r\ncrlf two\r\n")
    big = (b.path / "output/big.log").read_text().splitlines(keepends=True)
    big[big_lines // 2] = "log line: edited in the middle\n"
    b.write("output/big.log", "".join(big))
    b.commit("c4", "phase 3: address the review", "2024-03-05T12:00:00+02:00")
    b.tag("phase_3_start", "2024-03-05T12:00:00+02:00")
    # a side branch with a slash in its name ---------------------------------------------------
    b.git("checkout", "-q", "-b", "feature/extra")
    b.write("extra/idea.md", "an idea on a branch\n")
    b.commit("side", "side branch: an idea", "2024-03-05T13:00:00+02:00")
    b.git("checkout", "-q", "main")
    # last commit on main ----------------------------------------------------------------------
    b.write("plan.md", lines("plan", 20).replace("plan line 7:", "plan line 7 (done):"))
    b.commit(
        "c5",
        "phase 3: tick the plan\n\n- step 7 done\n- more to come\n",
        "2024-03-06T07:45:00+00:00",
    )
    return b


def build_many_commits(path: Path, count: int) -> Builder:
    """``count`` small commits in one ``git fast-import`` run (fast enough for pagination)."""
    b = Builder(path)
    stream = []
    for i in range(count):
        stamp = 1_700_000_000 + i * 60
        body = f"counter {i}\n".encode()
        msg = f"commit number {i}\n".encode()
        stream.append(b"commit refs/heads/main\n")
        stream.append(f"author Bot <bot@example.com> {stamp} +0000\n".encode())
        stream.append(f"committer Bot <bot@example.com> {stamp} +0000\n".encode())
        stream.append(f"data {len(msg)}\n".encode() + msg)
        stream.append(f"M 100644 inline counter.txt\ndata {len(body)}\n".encode() + body + b"\n")
    git_out(b.path, "fast-import", "--quiet", input=b"".join(stream))
    git_out(b.path, "reset", "-q", "--hard", "main")
    return b


def build_many_tags(b: Builder, count: int) -> None:
    """Lightweight tags t000.. on the first ``count`` commits of ``b`` (for tag pagination)."""
    shas = git_out(b.path, "rev-list", "--reverse", "main").decode().split()
    refs = "".join(f"create refs/tags/t{i:03d} {sha}\n" for i, sha in enumerate(shas[:count]))
    git_out(b.path, "update-ref", "--stdin", input=refs.encode())
