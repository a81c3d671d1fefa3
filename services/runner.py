"""`make run`: apply the ledger migrations, then start the ledger, reconstruction, candidate and
admission services on loopback, each in its own process, against the embedded SQLite database
under var/, and the HTTP/JSON gateway in front of them (127.0.0.1:8080).

Ctrl-C or SIGTERM stops all five: each drains its in-flight calls, and children are tied to this
process (they receive SIGTERM if it dies), so no orphan is left behind.
"""

from __future__ import annotations

import argparse
import contextlib
import ctypes
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

from services.gateway.config import DEFAULT_GATEWAY_PORT, GATEWAY, GATEWAY_PORT_VARIABLE
from services.ledger.database import migrate
from shared.runtime.auth import token_digest
from shared.runtime.config import (
    DEFAULT_DATABASE_URL,
    DEFAULT_PORTS,
    DEFAULT_PRINCIPALS_FILE,
    SERVICE_NAMES,
    port_variable,
    target_variable,
)

# Local development credentials, written only when no principals file exists yet. They are
# printed at start-up and used by the README's grpcurl examples; never use them elsewhere.
DEV_PRINCIPALS = {
    "dev-admin-token": ("dev-admin", ["factory_administrator", "reader"]),
    "dev-operator-token": ("dev-operator", ["execution_operator", "reader"]),
    # An operator who is also a factory administrator: may recover the tickets it submitted.
    "dev-admin-operator-token": (
        "dev-admin-operator",
        ["execution_operator", "factory_administrator", "reader"],
    ),
    "dev-worker-token": ("dev-worker", ["worker"]),
    "dev-writer-token": ("dev-writer", ["platform_writer"]),
    "dev-reader-token": ("dev-reader", ["reader"]),
    # Each service that calls another presents its own identity (FORGE_SERVICE_TOKEN).
    "dev-candidate-service-token": ("candidate", ["candidate_service"]),
    "dev-admission-service-token": ("admission", ["admission_service"]),
}
#: The token each calling service presents, by service name.
DEV_SERVICE_TOKENS = {
    "candidate": "dev-candidate-service-token",
    "admission": "dev-admission-service-token",
}
_PR_SET_PDEATHSIG = 1


def dev_principals_text() -> str:
    document = {
        "principals": [
            {"identity": identity, "roles": roles, "token_sha256": token_digest(token)}
            for token, (identity, roles) in DEV_PRINCIPALS.items()
        ]
    }
    return json.dumps(document, indent=2) + "\n"


def write_dev_principals(path: Path) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(dev_principals_text(), encoding="utf-8")


def print_dev_tokens() -> None:
    print("local development tokens (use as 'authorization: Bearer <token>'):", flush=True)
    for token, (identity, roles) in DEV_PRINCIPALS.items():
        print(f"  {token:<20} {identity:<20} {', '.join(roles)}", flush=True)


def service_env(env: dict[str, str], name: str) -> dict[str, str]:
    """``env`` for service ``name``: a calling service gets its own development token unless
    one is set; a service that calls none gets none."""
    own = dict(env)
    if name in DEV_SERVICE_TOKENS:
        own.setdefault("FORGE_SERVICE_TOKEN", DEV_SERVICE_TOKENS[name])
    else:
        own.pop("FORGE_SERVICE_TOKEN", None)
    return own


def _die_with_parent() -> None:
    # Linux: deliver SIGTERM to the child if the runner dies, so no service outlives it.
    with contextlib.suppress(OSError):
        ctypes.CDLL("libc.so.6", use_errno=True).prctl(_PR_SET_PDEATHSIG, signal.SIGTERM)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m services.runner", description=__doc__)
    for name in SERVICE_NAMES:
        parser.add_argument(
            f"--{name}-port",
            type=int,
            default=int(os.environ.get(port_variable(name)) or DEFAULT_PORTS[name]),
        )
    parser.add_argument(
        "--gateway-port",
        type=int,
        default=int(os.environ.get(GATEWAY_PORT_VARIABLE) or DEFAULT_GATEWAY_PORT),
    )
    parser.add_argument(
        "--database-url", default=os.environ.get("FORGE_DATABASE_URL") or DEFAULT_DATABASE_URL
    )
    parser.add_argument(
        "--principals-file",
        default=os.environ.get("FORGE_PRINCIPALS_FILE") or DEFAULT_PRINCIPALS_FILE,
    )
    args = parser.parse_args(argv)
    principals = Path(args.principals_file)
    if not principals.exists():
        write_dev_principals(principals)
        print(f"wrote local development principals to {principals}", flush=True)
    if principals.read_text(encoding="utf-8") == dev_principals_text():
        print_dev_tokens()
    # The ledger only checks the schema revision; for local development the runner migrates.
    migrate(args.database_url)

    ports = {name: getattr(args, f"{name}_port") for name in SERVICE_NAMES}
    env = dict(os.environ)
    env["FORGE_DATABASE_URL"] = args.database_url
    env["FORGE_PRINCIPALS_FILE"] = str(principals)
    for name, port in ports.items():
        env[port_variable(name)] = str(port)
        env[target_variable(name)] = f"127.0.0.1:{port}"
    env[GATEWAY_PORT_VARIABLE] = str(args.gateway_port)

    children: list[subprocess.Popen[bytes]] = []
    stopping = False

    def stop(signum: int, _frame: object) -> None:
        nonlocal stopping
        stopping = True

    signal.signal(signal.SIGTERM, stop)
    signal.signal(signal.SIGINT, stop)
    for name in (*SERVICE_NAMES, GATEWAY):
        children.append(
            subprocess.Popen(
                [sys.executable, "-m", f"services.{name}"],
                env=service_env(env, name),
                preexec_fn=_die_with_parent,  # noqa: PLW1509 - runs before any thread starts
                start_new_session=True,  # Ctrl-C reaches the runner only; it stops children itself
            )
        )
    print(
        "forge continuity: "
        + ", ".join(f"{name} 127.0.0.1:{port}" for name, port in ports.items())
        + f", {GATEWAY} http://127.0.0.1:{args.gateway_port}"
        + f" (database {args.database_url}); Ctrl-C to stop",
        flush=True,
    )
    exit_code = 0
    while not stopping:
        for child in children:
            if child.poll() is not None:
                print(f"a service exited with status {child.returncode}; stopping", flush=True)
                exit_code = 1
                stopping = True
        time.sleep(0.2)
    for child in children:
        if child.poll() is None:
            child.send_signal(signal.SIGTERM)
    for child in children:
        try:
            child.wait(timeout=30)
        except subprocess.TimeoutExpired:
            child.kill()
            child.wait()
    print("forge continuity: stopped", flush=True)
    return exit_code


if __name__ == "__main__":
    raise SystemExit(main())
