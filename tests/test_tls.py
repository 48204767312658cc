"""The outgoing clients' TLS context: built once per setting, rebuilt when the CA settings
that httpx reads from the environment change."""

from __future__ import annotations

import ssl

import certifi
import pytest

from gateway.tls import tls_context


@pytest.fixture(autouse=True)
def no_ca_overrides(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("SSL_CERT_FILE", raising=False)
    monkeypatch.delenv("SSL_CERT_DIR", raising=False)


def test_one_context_per_setting_verifying_unless_told_not_to() -> None:
    verifying, lax = tls_context(), tls_context(False)
    assert verifying is tls_context(True) and lax is tls_context(False)
    assert verifying.verify_mode is ssl.CERT_REQUIRED and verifying.check_hostname
    assert lax.verify_mode is ssl.CERT_NONE and not lax.check_hostname


def test_a_ca_file_set_in_the_environment_gives_its_own_context(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    default = tls_context()
    monkeypatch.setenv("SSL_CERT_FILE", certifi.where())
    chosen = tls_context()
    assert chosen is not default and chosen is tls_context()
    monkeypatch.delenv("SSL_CERT_FILE")
    assert tls_context() is default
