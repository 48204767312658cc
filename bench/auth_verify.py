"""What checking an OAuth access token costs per call, with the issuer's keys cached.

An identity provider on 127.0.0.1 (a real HTTP server in a thread) publishes a 2048-bit RSA
and a P-256 EC key made here; tokens are signed with pyjwt as the provider would. After the
first call fetched the JWKS, every call is measured, in blocks that alternate (A B B A …):

* ``jwt.decode``: pyjwt alone with the key already prepared: the floor any verifier pays
  (signature, ``iss``, ``exp``) — the baseline;
* ``authenticate``: :meth:`gateway.auth.OAuthVerifier.authenticate` (header and algorithm
  checks, key lookup, decode, RFC 8707 audience, the identity);
* ``guard``: :class:`gateway.auth.OAuthGuard` around a trivial ASGI app, called directly with
  an HTTP scope (header parsing, the above, scope check, the caller set), minus the same app
  called without the guard.

Target (issue 25): ``authenticate`` median ≤ 0.3 ms per call.

Rerun: .venv/bin/python bench/auth_verify.py --calls 5000 --write
Prints the table; ``--write`` also writes bench/results/auth.md.
"""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import anyio
import jwt
from cryptography.hazmat.primitives.asymmetric import ec, rsa
from jwt.algorithms import ECAlgorithm, RSAAlgorithm

sys.path.insert(0, str(Path(__file__).resolve().parent))
import core_common as c

from gateway.auth import (
    OAuthGuard,
    OAuthVerifier,
    ResourceMetadata,
    ScopePolicy,
    load_auth_config,
)
from gateway.testing.backends import FakeBackend, ReceivedRequest, Reply

RESULTS = c.BENCH / "results" / "auth.md"
RESOURCE = "http://127.0.0.1:8765/mcp"
TARGET_MS = 0.3
BLOCK = 100
X = "\N{MULTIPLICATION SIGN}"


class Issuer(FakeBackend):
    def __init__(self) -> None:
        super().__init__()
        self.keys = {
            "RS256": ("rsa-1", rsa.generate_private_key(public_exponent=65537, key_size=2048)),
            "ES256": ("ec-1", ec.generate_private_key(ec.SECP256R1())),
        }

    def respond(self, request: ReceivedRequest) -> Reply:
        if request.path == "/keys":
            out = []
            for alg, (kid, key) in self.keys.items():
                family = RSAAlgorithm if alg == "RS256" else ECAlgorithm
                jwk = dict(family.to_jwk(key.public_key(), as_dict=True))
                out.append({**jwk, "kid": kid, "alg": alg, "use": "sig"})
            return Reply.json({"keys": out})
        return Reply.json({"detail": "Not Found"}, 404)

    def tokens(self, alg: str, n: int) -> list[str]:
        kid, key = self.keys[alg]
        now = int(time.time())
        return [
            jwt.encode(
                {
                    "iss": self.url,
                    "aud": RESOURCE,
                    "sub": f"user-{i}",
                    "client_id": "claude-code",
                    "scope": "gateway:read gateway:mutate",
                    "iat": now,
                    "exp": now + 3600,
                },
                key,
                algorithm=alg,
                headers={"kid": kid},
            )
            for i in range(n)
        ]


async def _ok_app(scope: Any, receive: Any, send: Any) -> None:
    await send({"type": "http.response.start", "status": 200, "headers": []})
    await send({"type": "http.response.body", "body": b"{}"})


async def _send(message: Any) -> None:
    return None


async def _receive() -> Any:
    return {"type": "http.request", "body": b"", "more_body": False}


def _scope(token: str) -> dict[str, Any]:
    return {
        "type": "http",
        "method": "POST",
        "path": "/mcp",
        "headers": [(b"authorization", f"Bearer {token}".encode())],
    }


async def _timed(
    step: Callable[[str], Awaitable[Any]], tokens: list[str]
) -> tuple[list[float], list[float]]:
    """Wall-clock and CPU time (this thread's: what other processes take does not count)."""
    wall, cpu = [], []
    for token in tokens:
        c0, t0 = time.thread_time_ns(), time.perf_counter_ns()
        await step(token)
        wall.append(float(time.perf_counter_ns() - t0))
        cpu.append(float(time.thread_time_ns() - c0))
    return wall, cpu


async def measure(calls: int) -> dict[str, dict[str, list[float]]]:
    results: dict[str, dict[str, list[float]]] = {}
    with Issuer() as idp:
        config = load_auth_config({"issuer": idp.url, "jwks_url": f"{idp.url}/keys"}, {})
        assert config is not None
        verifier = OAuthVerifier(config, resource=RESOURCE)
        policy = ScopePolicy.from_config(config)
        metadata = ResourceMetadata(RESOURCE, config.issuer, policy.supported())
        guard = OAuthGuard(_ok_app, verifier, metadata, policy)
        try:
            for alg in ("RS256", "ES256"):
                tokens = idp.tokens(alg, BLOCK)
                await verifier.authenticate(tokens[0])  # fetch and cache the JWKS
                key = await verifier.keys.key(idp.keys[alg][0], alg)
                assert key is not None

                async def bare(token: str, key: Any = key, alg: str = alg) -> Any:
                    return jwt.decode(
                        token,
                        key=key,
                        algorithms=[alg],
                        issuer=idp.url,
                        options={"verify_aud": False},
                    )

                async def app_alone(token: str) -> None:
                    await _ok_app(_scope(token), _receive, _send)

                async def guarded(token: str) -> None:
                    await guard(_scope(token), _receive, _send)

                steps = {
                    "jwt.decode": bare,
                    "authenticate": verifier.authenticate,
                    "app alone": app_alone,
                    "guard": guarded,
                }
                got: dict[str, list[float]] = {}
                for name, step in steps.items():  # warm-up
                    await _timed(step, tokens)
                    got[name], got[f"{name} cpu"] = [], []
                order = list(steps)
                for i in range(max(1, calls // BLOCK)):
                    for name in order if i % 2 == 0 else reversed(order):
                        wall, cpu = await _timed(steps[name], tokens)
                        got[name] += wall
                        got[f"{name} cpu"] += cpu
                results[alg] = got
            assert idp.requests and all(r.path == "/keys" for r in idp.requests)
            fetches = len(idp.requests)
        finally:
            await verifier.aclose()
    results["_meta"] = {"fetches": [float(fetches)]}
    return results


def report(results: dict[str, dict[str, list[float]]], calls: int, machine: c.Machine) -> str:
    lines = [
        "# OAuth access-token check: per-call cost with the issuer's keys cached",
        "",
        "Written by `bench/auth_verify.py`. An identity provider on 127.0.0.1 publishes a 2048-bit "
        "RSA and a P-256 EC key; after the first call fetched them, every call is measured "
        f"({calls} per path and algorithm, blocks of {BLOCK} alternating A B B A). `jwt.decode` "
        "is pyjwt alone with the key prepared (the baseline); `authenticate` is the gateway's "
        "verifier; `guard` is the pure-ASGI guard around a trivial app, called directly, minus "
        "that app alone. The CPU columns count this thread's CPU time only, so they hold when "
        "other processes load the machine.",
        "",
        c.facts_line(f".venv/bin/python bench/auth_verify.py --calls {calls} --write", machine)
        + f"- pyjwt {c.package_version('PyJWT')}, cryptography {c.package_version('cryptography')}",
        "",
        "| alg | path | median µs | p95 µs | vs `jwt.decode` | CPU median µs | CPU vs `jwt.decode` |",
        "|---|---|---|---|---|---|---|",
    ]
    verdicts = []
    for alg in ("RS256", "ES256"):
        got = results[alg]
        base = c.median(got["jwt.decode"])
        base_cpu = c.median(got["jwt.decode cpu"])

        def minus_app(kind: str, got: dict[str, list[float]] = got) -> list[float]:
            pairs = zip(got[f"guard{kind}"], got[f"app alone{kind}"], strict=True)
            return [g - a for g, a in pairs]

        rows = {
            "`jwt.decode` (baseline)": (got["jwt.decode"], got["jwt.decode cpu"]),
            "`authenticate`": (got["authenticate"], got["authenticate cpu"]),
            "`guard` (added to a request)": (minus_app(""), minus_app(" cpu")),
        }
        for name, (wall, cpu) in rows.items():
            med, med_cpu = c.median(wall), c.median(cpu)
            lines.append(
                f"| {alg} | {name} | {med / 1000:.1f} | {c.percentile(wall, 95) / 1000:.1f} "
                f"| {c.ratio(med, base):.2f} {X} | {med_cpu / 1000:.1f} "
                f"| {c.ratio(med_cpu, base_cpu):.2f} {X} |"
            )
        ms = c.median(got["authenticate"]) / 1e6
        cpu_ms = c.median(got["authenticate cpu"]) / 1e6
        ok = c.verdict(ms <= TARGET_MS)
        verdicts.append(f"{alg} {ms:.3f} ms (CPU {cpu_ms:.3f} ms) → **{ok}**")
    fetches = int(results["_meta"]["fetches"][0])
    lines += [
        "",
        f"Target: `authenticate` median ≤ {TARGET_MS} ms per call: " + "; ".join(verdicts) + ".",
        f"The JWKS was fetched {fetches} time(s) in the whole run (cached, as intended).",
        "",
    ]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--calls", type=int, default=5000)
    parser.add_argument("--write", action="store_true", help=f"write {RESULTS.name}")
    args = parser.parse_args(argv)
    machine = c.Machine()
    results = anyio.run(measure, args.calls)
    text = report(results, args.calls, machine)
    print(text)
    if args.write:
        RESULTS.write_text(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
