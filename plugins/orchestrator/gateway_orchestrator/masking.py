"""No secrets out: what the orchestrator stores in clear text, masked before the model sees it.

The API returns datasource passwords as it stores them: inside ``connection_url``
(``postgresql://user:password@host/db``), in the JSON ``credentials`` column, and in the same
columns through the table browser. Here:

- a connection URL loses its userinfo (everything up to its last ``@``, so a password holding
  ``/``, ``?`` or ``@`` goes too), and secret-named query parameters their values;
- ``credentials`` becomes the sorted list of its keys (what is stored, never the values);
- for any other text (table cells, decoded JSON), a URL's ``user:password@`` goes and the value
  of a secret-named key (``password``, ``token``, ``api_key``, …) becomes ``***``.
"""

from __future__ import annotations

import re
from functools import lru_cache
from itertools import pairwise
from typing import Any
from urllib.parse import parse_qsl, urlencode

MASK = "***"
_SECRET_WORDS = {
    "password",
    "passwd",
    "pwd",
    "passphrase",
    "secret",
    "secrets",
    "credential",
    "credentials",
    "apikey",
}
_SECRET_PAIRS = {("api", "key"), ("access", "key"), ("private", "key"), ("secret", "key")}
_WORD = re.compile(r"[A-Z]?[a-z0-9]+|[A-Z]+(?![a-z])")
_SCHEME = re.compile(r"^([a-zA-Z][a-zA-Z0-9+.\-]*://)(.*)$", re.S)
# In free text: scheme://user:password@ (no '/' or whitespace inside the userinfo).
_USERINFO = re.compile(r"\b([a-zA-Z][a-zA-Z0-9+.\-]*://)[^\s/@'\"<>]*:[^\s/@'\"<>]*@")
# "name=value" pairs (libpq connection strings, query strings, config lines).
_PAIR = re.compile(r"([A-Za-z_][\w\-]*)(\s*=\s*)(\"[^\"]*\"|'[^']*'|[^\s,;&]+)")


@lru_cache(maxsize=4096)
def is_secret_name(name: str) -> bool:
    """``password``, ``sslpassword``, ``access_token``, ``apiKey``, ``client_secret``: yes;
    ``max_tokens``, ``token_usage``, ``primary_key``: no (counts and ids, not secrets)."""
    words = [w.lower() for w in _WORD.findall(name)]
    if not words:
        return False
    if words[-1] == "token" or any(
        w in _SECRET_WORDS or "password" in w or "passwd" in w for w in words
    ):
        return True
    return any(pair in _SECRET_PAIRS for pair in pairwise(words))


def _mask_pairs(text: str) -> str:
    def one(m: re.Match[str]) -> str:
        return f"{m.group(1)}{m.group(2)}{MASK}" if is_secret_name(m.group(1)) else m.group(0)

    return _PAIR.sub(one, text)


def mask_connection_url(url: str) -> str:
    """``postgresql://user:pw@host:5432/db?sslpassword=x`` → ``postgresql://host:5432/db?sslpassword=***``."""
    match = _SCHEME.match(url)
    if match is None:  # "host=db password=x" (libpq keywords) or anything else
        return _mask_pairs(url)
    scheme, rest = match.groups()
    # A raw password may hold '/', '?', '#' or '@'; a host never holds '@'. Cutting at the last
    # '@' can never leave a password behind (at worst an '@' in a query loses what precedes it).
    rest = rest[rest.rfind("@") + 1 :]
    end = min((i for i in (rest.find("?"), rest.find("#")) if i != -1), default=len(rest))
    head, query = rest[:end], rest[end:]
    if query.startswith("?"):
        query_text, hash_mark, fragment = query[1:].partition("#")
        pairs = parse_qsl(query_text, keep_blank_values=True)
        if any(is_secret_name(k) for k, _ in pairs):
            masked = [(k, MASK if is_secret_name(k) else v) for k, v in pairs]
            query = "?" + urlencode(masked, safe="*") + hash_mark + fragment
    return scheme + head + query


def credential_keys(value: Any) -> list[str]:
    """The names of stored credentials, never their values."""
    if isinstance(value, dict):
        return sorted(str(k) for k in value)
    return ["(unnamed secret)"] if value not in (None, "", [], {}) else []


def mask_text(text: str) -> str:
    if "@" in text and "://" in text:
        text = _USERINFO.sub(r"\1", text)
    if "=" in text:
        text = _mask_pairs(text)
    return text


def mask_value(value: Any) -> Any:
    """Decoded JSON with URL passwords removed and secret-named keys' values masked."""
    if isinstance(value, str):
        return mask_text(value)
    if isinstance(value, dict):
        return {
            k: (MASK if v not in (None, "") and is_secret_name(str(k)) else mask_value(v))
            for k, v in value.items()
        }
    if isinstance(value, list):
        return [mask_value(v) for v in value]
    return value
