"""Three replicas behind HAProxy, sharing Redis (the limits) and PostgreSQL (the audit), as
real processes on 127.0.0.1: the limit holds across the three, and when one is killed with
SIGKILL under load the others keep serving, nothing is retried that may have run, and the
audit table holds every mutation exactly once, with the replica that ran it."""

from __future__ import annotations

import threading
import time
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import psycopg
import pytest
from conftest import gateway_env
from replicas import Answer, Deployment, call, redis_time, within_one_window
from services import postgres_server, redis_server

pytestmark = pytest.mark.e2e

LIMIT = 40  # calls per minute per caller
THREADS = 4
REQUESTS = 30  # per load thread: under LIMIT, so the load itself is never limited


@pytest.fixture(scope="module")
def three(tmp_path_factory) -> Iterator[tuple[Deployment, str, str]]:
    root: Path = tmp_path_factory.mktemp("replicas")
    with redis_server() as redis, postgres_server() as pg:
        env = gateway_env(
            MCP_GATEWAY_AUDIT_SINKS="stderr,postgres",
            MCP_GATEWAY_AUDIT_DATABASE_URL=pg.dsn,
            MCP_GATEWAY_LIMIT_CALLS_PER_MINUTE=str(LIMIT),
            MCP_GATEWAY_LIMIT_REDIS_URL=redis.url,
        )
        with Deployment(root, env) as deployment:
            deployment.start(3)
            yield deployment, redis.url, pg.dsn


def _client(source: str) -> httpx.Client:
    """A client whose requests come from ``source`` (a caller of its own, by address)."""
    return httpx.Client(transport=httpx.HTTPTransport(local_address=source))


def test_three_replicas_keep_one_limit_and_survive_one_killed(three):
    deployment, redis_url, dsn = three
    with deployment.balanced() as lb:
        # -- one limit across the three, within one window (of Redis's clock) ----------------
        within_one_window(redis_time(redis_url))
        with _client("127.0.0.3") as client:
            answers = [
                call(client, lb.url, "tally_get", {}, modern=i % 2 == 0) for i in range(LIMIT + 20)
            ]
        served = [a for a in answers if a.ok]
        assert len(served) == LIMIT, Counter((a.status, a.error) for a in answers)
        by_replica = Counter(a.result["replica"] for a in served if a.result)
        assert set(by_replica) == {"r0", "r1", "r2"}  # each served some, none all of them
        refused = [a for a in answers if not a.ok]
        # Modern requests name the tool in their headers: 429 from the transport; the
        # others: the tool's RATE_LIMITED error result.
        assert {(a.status, a.error) for a in refused} == {
            (429, "RATE_LIMITED"),
            (200, "RATE_LIMITED"),
        }
        assert all(
            a.retry_after and 1 <= int(a.retry_after) <= 60 for a in refused if a.status == 429
        )

        # -- bounded load, one replica killed half-way ---------------------------------------
        results: list[list[tuple[str, Answer]]] = [[] for _ in range(THREADS)]
        done = threading.Semaphore(0)

        def load(n: int) -> None:
            with _client(f"127.0.0.{10 + n}") as client:
                for i in range(REQUESTS):
                    key = f"t{n}-{i}"
                    if i % 2:
                        answer = call(client, lb.url, "tally_get", {"hold_ms": 20}, modern=True)
                    else:
                        arguments = {"key": key, "hold_ms": 60}
                        answer = call(client, lb.url, "tally_add", arguments, modern=i % 4 == 0)
                    results[n].append((key if i % 2 == 0 else "", answer))
                    done.release()

        threads = [threading.Thread(target=load, args=(n,)) for n in range(THREADS)]
        for t in threads:
            t.start()
        for _ in range(THREADS * REQUESTS // 3):  # a third of the load through three replicas
            done.acquire(timeout=60)
        victim = deployment.replicas[1]
        victim.proc.kill()
        killed_at = time.monotonic()
        for t in threads:
            t.join(timeout=120)
        assert victim.proc.wait(timeout=10) == -9
        # The balancer and the others still serve, after the kill as before.
        with _client("127.0.0.4") as client:
            after = [call(client, lb.url, "tally_get", {}, modern=True) for _ in range(6)]
        assert all(a.ok for a in after)
        assert {a.result["replica"] for a in after if a.result} == {"r0", "r2"}

    answers = [a for thread in results for _, a in thread]
    failed = [a for a in answers if not a.ok]
    # Only calls the killed replica had taken when it died fail (one in flight per thread at
    # most): the balancer answers 502, or drops the client's connection, and retries
    # connection failures only, never a request a replica may have run.
    assert len(failed) <= THREADS, Counter((a.status, a.error) for a in failed)
    assert all(a.status in (0, 502, 503, 504) for a in failed), failed
    assert all(a.ok for thread in results for _, a in thread[-3:])  # the end of each: served
    assert time.monotonic() - killed_at < 120

    # -- every mutation exactly once -------------------------------------------------------
    effects = deployment.effects()
    ran = Counter(e["key"] for e in effects)
    assert max(ran.values()) == 1  # no mutation ran twice (nothing was retried that ran)
    with psycopg.connect(dsn) as conn:
        rows = conn.execute(
            "SELECT correlation_id, replica, outcome, tool FROM mcp_gateway_audit"
        ).fetchall()
    audit: dict[str, list[tuple[Any, ...]]] = {}
    for row in rows:
        audit.setdefault(row[0], []).append(row)
    assert all(len(v) == 1 for v in audit.values())  # one row per mutation
    mutations = [(key, a) for thread in results for key, a in thread if key]
    for key, answer in mutations:
        if answer.ok:
            assert answer.result is not None and ran[key] == 1
            ((_, replica, outcome, tool),) = audit[answer.result["correlation_id"]]
            assert (replica, outcome, tool) == (answer.result["replica"], "OK", "tally_add")
        else:
            assert ran[key] <= 1  # killed before, during or after its run: never twice
    for effect in effects:  # everything that ran is audited, by the replica that ran it
        ((_, replica, outcome, _),) = audit[effect["correlation_id"]]
        assert replica == effect["replica"]
        assert outcome == "OK" or replica == victim.name
    unfinished = [r for r in rows if r[2] != "OK"]
    assert all(r[1] == victim.name and r[2] == "STARTED" for r in unfinished)
    # Rows without an effect: calls the killed replica began but did not get to run.
    assert len(rows) - len(effects) <= THREADS
    # Rows of calls whose answer the client never got: the killed replica's, one per thread
    # at most. Every other row is a mutation the client was told ran (the limit phase called
    # only the read tool).
    answered = {a.result["correlation_id"] for _, a in mutations if a.ok and a.result}
    unanswered = [r for r in rows if r[0] not in answered]
    assert len(unanswered) <= THREADS and all(r[1] == victim.name for r in unanswered)
