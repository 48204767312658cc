"""The TLS context of the gateway's outgoing HTTP clients, built once per setting.

Building one (loading the CA bundle) costs ~30 ms of CPU, which ``httpx`` pays again for every
client it creates; a gateway makes a client per backend, and more when it starts again in the
same process. A context is safe to share between clients; it is keyed on the environment
variables ``httpx`` reads for it, so setting ``SSL_CERT_FILE``/``SSL_CERT_DIR`` still counts.
"""

from __future__ import annotations

import functools
import os
import ssl

import httpx


def tls_context(verify: bool = True) -> ssl.SSLContext:
    """What ``httpx.AsyncClient(verify=verify)`` would build, shared."""
    return _context(verify, os.environ.get("SSL_CERT_FILE"), os.environ.get("SSL_CERT_DIR"))


@functools.lru_cache(maxsize=8)
def _context(verify: bool, cert_file: str | None, cert_dir: str | None) -> ssl.SSLContext:
    return httpx.create_ssl_context(verify=verify)
