"""The development credentials cannot start a deployment other machines can reach.

`make run` writes well-known tokens (services/runner.py), compose mounts their digests
(deploy/principals.dev.json) and the development signing key (deploy/signing-key.dev.pem). All
are public. A service bound beyond loopback refuses to start with any of them unless
``FORGE_DEVELOPMENT_MACHINE=1`` says this is a development machine (compose sets it)."""

from __future__ import annotations

import hashlib
import ipaddress
import os
from collections.abc import Iterable, Mapping

from shared.runtime.auth import token_digest

DEVELOPMENT_MACHINE = "FORGE_DEVELOPMENT_MACHINE"
#: The well-known development tokens (services/runner.py, deploy/principals.dev.json).
DEVELOPMENT_TOKENS = (
    "dev-admin-token",
    "dev-operator-token",
    "dev-admin-operator-token",
    "dev-worker-token",
    "dev-writer-token",
    "dev-reader-token",
    "dev-candidate-service-token",
    "dev-admission-service-token",
)
DEVELOPMENT_TOKEN_DIGESTS = frozenset(token_digest(token) for token in DEVELOPMENT_TOKENS)
#: SHA-256 of deploy/signing-key.dev.pem, whose private key is in the repository.
DEVELOPMENT_SIGNING_KEY_SHA256 = "46359566be7db5f5ddd68c9f73b80ed84e7fd22a3abe8f9da6a8cf9ff4768823"


def loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def development_credentials_problem(
    host: str,
    token_digests: Iterable[str],
    signing_key_file: str = "",
    env: Mapping[str, str] | None = None,
) -> str | None:
    """Why a service bound to ``host`` must not start with these credentials, or None."""
    env = os.environ if env is None else env
    if loopback(host) or env.get(DEVELOPMENT_MACHINE, "").strip() == "1":
        return None
    found = []
    if DEVELOPMENT_TOKEN_DIGESTS & set(token_digests):
        found.append("the principals file accepts a well-known development token")
    if signing_key_file:
        with open(signing_key_file, "rb") as key:
            if hashlib.sha256(key.read()).hexdigest() == DEVELOPMENT_SIGNING_KEY_SHA256:
                found.append("FORGE_SIGNING_KEY_FILE is the development signing key")
    if not found:
        return None
    return (
        f"bound to {host}, beyond loopback, with development credentials: {'; '.join(found)}. "
        f"Use your own, or set {DEVELOPMENT_MACHINE}=1 on a development machine"
    )
