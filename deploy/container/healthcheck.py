"""The container's health check and Kubernetes probe: GET a path of the gateway on 127.0.0.1.

    python3 -I -S healthcheck.py [PATH] [PORT]        # default /healthz 8765

Exit 0 when the gateway answers 200; 1 with one line saying why otherwise. Standard library
only and quick to start: it runs every few seconds beside the gateway.

The gateway checks the Host header of every request, /healthz too, against the names it
serves (against DNS rebinding), so this sends one of them: the first of
MCP_GATEWAY_ALLOWED_HOSTS, else of ``[gateway] allowed_hosts`` in the MCP_GATEWAY_CONFIG file
(as the gateway reads them: the variable wins unless empty), else 127.0.0.1. /readyz needs a
caller's credentials: the MCP_GATEWAY_TOKEN bearer token is sent when set (under OAuth,
``[auth]``, a probe has no access token: probe /healthz).
"""

from __future__ import annotations

import http.client
import os
import sys
import tomllib

TIMEOUT = 4.0
DEFAULT_PORT = 8765  # the image's: serve --port 8765


def _set(name: str) -> str:
    """A variable's value, empty when unset or still holding a ``${NAME}`` reference (the
    gateway counts those as unset)."""
    value = os.environ.get(name, "").strip()
    return "" if "${" in value else value


def allowed_hosts() -> list[str]:
    listed = _set("MCP_GATEWAY_ALLOWED_HOSTS")
    if listed:
        return [h.strip() for h in listed.split(",") if h.strip()]
    path = _set("MCP_GATEWAY_CONFIG")
    if path:
        try:
            with open(path, "rb") as fh:
                hosts = tomllib.load(fh).get("gateway", {}).get("allowed_hosts", [])
        except (OSError, tomllib.TOMLDecodeError):
            hosts = []  # the gateway itself says what is wrong with its file
        return [str(h) for h in hosts if isinstance(h, str) and h]
    return []


def host_header(port: int) -> str:
    """The first allowed Host pattern as a Host header: ``name:*`` becomes ``name:PORT``."""
    hosts = allowed_hosts()
    if not hosts:
        return f"127.0.0.1:{port}"
    first = hosts[0]
    return first[:-1] + str(port) if first.endswith(":*") else first


def check(path: str, port: int) -> str | None:
    """Why the gateway is not healthy, or None when it answered 200."""
    headers = {"Host": host_header(port)}
    token = _set("MCP_GATEWAY_TOKEN")
    if token:
        headers["Authorization"] = f"Bearer {token}"
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=TIMEOUT)
    try:
        conn.request("GET", path, headers=headers)
        response = conn.getresponse()
        body = response.read(300).decode("utf-8", "replace")
    except OSError as exc:
        return f"GET {path} on port {port}: {exc}"
    finally:
        conn.close()
    if response.status == 200:
        return None
    return f"GET {path}: HTTP {response.status} {' '.join(body.split())[:200]}"


def main(argv: list[str]) -> int:
    path = argv[0] if argv else "/healthz"
    port = int(argv[1]) if len(argv) > 1 else DEFAULT_PORT
    problem = check(path, port)
    if problem is None:
        return 0
    print(f"healthcheck: {problem}", file=sys.stderr)
    return 1


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
