"""The well-known development tokens and signing key cannot start a service bound beyond
loopback, unless the machine says it is a development machine (issue 45 §3)."""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
from pathlib import Path

from services.runner import DEV_PRINCIPALS
from shared.runtime.auth import token_digest
from shared.runtime.development import (
    DEVELOPMENT_SIGNING_KEY_SHA256,
    DEVELOPMENT_TOKEN_DIGESTS,
    DEVELOPMENT_TOKENS,
    development_credentials_problem,
)

ROOT = Path(__file__).resolve().parents[3]
DEV_KEY = ROOT / "deploy" / "signing-key.dev.pem"
DEV_PRINCIPALS_FILE = ROOT / "deploy" / "principals.dev.json"
EVERY_ADDRESS = "0.0.0.0"  # noqa: S104 - a setting checked; the refused service binds nothing
DEV_DIGEST = token_digest("dev-admin-token")


def test_the_lists_name_every_development_credential_the_project_ships() -> None:
    assert set(DEV_PRINCIPALS) <= set(DEVELOPMENT_TOKENS)
    shipped = json.loads(DEV_PRINCIPALS_FILE.read_text(encoding="utf-8"))["principals"]
    assert {p["token_sha256"] for p in shipped if "token_sha256" in p} <= DEVELOPMENT_TOKEN_DIGESTS
    assert hashlib.sha256(DEV_KEY.read_bytes()).hexdigest() == DEVELOPMENT_SIGNING_KEY_SHA256


def test_development_credentials_are_refused_beyond_loopback_only() -> None:
    refused = development_credentials_problem(EVERY_ADDRESS, {DEV_DIGEST}, env={})
    assert refused and "development token" in refused
    key = development_credentials_problem(EVERY_ADDRESS, set(), str(DEV_KEY), env={})
    assert key and "signing key" in key
    assert development_credentials_problem("127.0.0.1", {DEV_DIGEST}, str(DEV_KEY), env={}) is None
    assert development_credentials_problem("::1", {DEV_DIGEST}, env={}) is None
    told = {"FORGE_DEVELOPMENT_MACHINE": "1"}
    assert development_credentials_problem(EVERY_ADDRESS, {DEV_DIGEST}, str(DEV_KEY), told) is None
    own = token_digest("a-token-of-our-own")
    assert development_credentials_problem(EVERY_ADDRESS, {own}, env={}) is None


def test_a_service_with_development_tokens_on_every_address_refuses_to_start() -> None:
    env = {
        key: value
        for key, value in os.environ.items()
        if not key.startswith("FORGE_") or key == "FORGE_DATABASE_URL"
    }
    env.update(
        {
            "FORGE_HOST": EVERY_ADDRESS,
            "FORGE_RECONSTRUCTION_PORT": "0",
            "FORGE_PRINCIPALS_FILE": str(DEV_PRINCIPALS_FILE),
            "PYTHONPATH": f"{ROOT}:{ROOT / 'shared' / 'gen'}",
        }
    )
    done = subprocess.run(
        [sys.executable, "-m", "services.reconstruction"],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    log = done.stdout + done.stderr  # the service logs to stdout
    assert done.returncode == 2, log[-2000:]
    assert "development credentials" in log
