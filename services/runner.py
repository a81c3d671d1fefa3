"""`make run`: apply the ledger migrations, then start the ledger, reconstruction, candidate and
admission services on loopback, each in its own process, against the embedded SQLite database
under var/, and the HTTP/JSON gateway in front of them (127.0.0.1:8080).

Every port is checked first: one already taken (another `make run`, say) ends the runner with
"port N is in use" and status 1 before anything starts. The banner and one "ready" line with every
URL are printed only once all five answer SERVING; the line names each process's Prometheus
metrics URL too (fixed ports 9151-9154 and 9180 by default; --<name>-metrics-port=0 turns one
off). Every service logs to stdout and appends to var/continuity.log (one line per state
change among them).

``--certs DIR`` (`make run-mtls`) runs the same with mutual TLS: each process its certificate from
the `make certs` files in DIR, client certificates required, the gateway on HTTPS, readiness
probed as the operator (ADR 0047).

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
import socket
import ssl
import subprocess
import sys
import time
import urllib.request
from collections.abc import Mapping
from pathlib import Path

from services.gateway.config import GATEWAY
from services.ledger.database import migrate
from services.ledger.domain.signing import write_new_key
from shared.contract.channels import open_channel
from shared.runtime.auth import token_digest
from shared.runtime.config import (
    DEFAULT_DATABASE_URL,
    DEFAULT_GATEWAY_PORT,
    DEFAULT_METRICS_PORTS,
    DEFAULT_PORTS,
    DEFAULT_PRINCIPALS_FILE,
    DEFAULT_SIGNING_KEY_FILE,
    GATEWAY_PORT_VARIABLE,
    SERVICE_NAMES,
    client_tls,
    metrics_port_variable,
    port_variable,
    target_variable,
)
from shared.runtime.dev_certificates import CA, CA_DIRECTORY, CERT, KEY, write_certificates
from shared.runtime.events import LOG_FILE_VARIABLE
from shared.runtime.readiness import answers

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
VERIFIER_VARIABLE = "FORGE_RECONCILIATION_VERIFIER"
LOCAL_PROCESS_VERIFIER = "local-process"

_PR_SET_PDEATHSIG = 1
#: Where the services' log lines are appended for `make run` (beside the default database).
DEFAULT_LOG_FILE = "var/continuity.log"
EXIT_PORT_IN_USE = 1


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
    # Columns as wide as their longest entry: the longest tokens overran a fixed width.
    token_width = max(map(len, DEV_PRINCIPALS))
    identity_width = max(len(identity) for identity, _roles in DEV_PRINCIPALS.values())
    for token, (identity, roles) in DEV_PRINCIPALS.items():
        print(
            f"  {token:<{token_width}}  {identity:<{identity_width}}  {', '.join(roles)}",
            flush=True,
        )


def print_client_tls(certs: Path) -> None:
    files = _operator_files(certs)
    print(
        "mutual TLS: callers need a certificate; as the operator, in other terminals:\n"
        f"  export FORGE_TLS_CA={files['ca_file']} FORGE_TLS_CERT={files['cert_file']} "
        f"FORGE_TLS_KEY={files['key_file']}",
        flush=True,
    )


def local_credentials(principals_file: str, signing_key_file: str) -> tuple[Path, Path]:
    """The principals file and the head-signing key, each generated for local development when
    it does not exist yet (an existing one is never replaced)."""
    principals = Path(principals_file)
    if not principals.exists():
        write_dev_principals(principals)
        print(f"wrote local development principals to {principals}", flush=True)
    signing_key = Path(signing_key_file)
    if not signing_key.exists():
        write_new_key(signing_key)
        print(f"wrote a local development signing key to {signing_key}", flush=True)
    return principals, signing_key


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


def port_in_use(port: int, host: str = "127.0.0.1") -> bool:
    """Whether something already listens on ``host:port`` (binding it is refused)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        try:
            probe.bind((host, port))
        except OSError:
            return True
    return False


def tls_env(certs: Path, name: str) -> dict[str, str]:
    """The TLS settings of process ``name`` with the `make certs` files under ``certs``: its own
    certificate, the CA that verifies the others, and, for a gRPC service, client certificates
    required (mutual TLS). The gateway's HTTPS listener asks browsers for none."""
    own = certs / name
    env = {
        "FORGE_TLS_CERT": str(own / CERT),
        "FORGE_TLS_KEY": str(own / KEY),
        "FORGE_TLS_CA": str(certs / CA_DIRECTORY / CA),
    }
    if name != GATEWAY:
        env["FORGE_TLS_CLIENT_CA"] = str(certs / CA_DIRECTORY / CA)
    return env


def _http_serving(url: str, context: ssl.SSLContext | None = None) -> bool:
    try:
        # A loopback URL.
        with urllib.request.urlopen(url, timeout=2, context=context) as reply:  # noqa: S310
            return bool(reply.status == 200)
    except OSError:
        return False


def waiting_for(
    ports: Mapping[str, int], gateway_port: int, certs: Path | None = None
) -> list[str]:
    """The processes that do not answer SERVING yet (each service's own health, which waits for
    its dependencies, and the gateway's /healthz, which waits for every server it calls). With
    ``certs``, over mutual TLS as the operator."""
    waiting = []
    operator = client_tls({}, **_operator_files(certs)) if certs else None
    for name, port in ports.items():
        channel = open_channel(f"127.0.0.1:{port}", tls=operator)
        try:
            if not answers(channel, timeout=1):
                waiting.append(name)
        finally:
            channel.close()
    context = ssl.create_default_context(cafile=str(certs / CA_DIRECTORY / CA)) if certs else None
    if not _http_serving(f"{_http_scheme(certs)}://127.0.0.1:{gateway_port}/healthz", context):
        waiting.append(GATEWAY)
    return waiting


def _operator_files(certs: Path | None) -> dict[str, str]:
    if certs is None:
        return {}
    return {
        "ca_file": str(certs / CA_DIRECTORY / CA),
        "cert_file": str(certs / "operator" / CERT),
        "key_file": str(certs / "operator" / KEY),
    }


def _http_scheme(certs: Path | None) -> str:
    return "https" if certs else "http"


def ready_line(
    ports: Mapping[str, int],
    gateway_port: int,
    database_url: str,
    metrics_ports: Mapping[str, int] | None = None,
    certs: Path | None = None,
) -> str:
    grpc_scheme = "grpcs" if certs else "grpc"
    grpc_urls = ", ".join(
        f"{name} {grpc_scheme}://127.0.0.1:{port}" for name, port in ports.items()
    )
    http = f"{_http_scheme(certs)}://127.0.0.1:{gateway_port}"
    metrics = ", ".join(
        f"{name} http://127.0.0.1:{port}/metrics"
        for name, port in (metrics_ports or {}).items()
        if port
    )
    line = f"forge continuity ready: {grpc_urls}; HTTP {http}/api/v1; console {http}/console/"
    if metrics:
        line += f"; metrics {metrics}"
    return f"{line} (database {database_url}); Ctrl-C to stop"


def port_in_use_message(name: str, port: int) -> str:
    """What to do about a taken port, in the words `make run` accepts (it passes no flags): the
    environment variable that moves it and, for a service, the target other terminals need."""
    if name == GATEWAY:
        variable, after = GATEWAY_PORT_VARIABLE, "then open the console and HTTP routes there"
    elif name.endswith("-metrics"):
        variable, after = metrics_port_variable(name.removesuffix("-metrics")), "or 0 for none"
    else:
        variable = port_variable(name)
        after = (
            f"then give the other terminals (CLI, worker, demo) "
            f"{target_variable(name)}=127.0.0.1:<that port>"
        )
    return (
        f"forge continuity: port {port} is in use ({name}); is another `make run` running? "
        f"Stop it, or move this one: `{variable}=<free port> make run` ({after})"
    )


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="forge-continuity-run", description=__doc__)
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
    for name in (*SERVICE_NAMES, GATEWAY):
        parser.add_argument(
            f"--{name}-metrics-port",
            type=int,
            default=int(os.environ.get(metrics_port_variable(name)) or DEFAULT_METRICS_PORTS[name]),
            help=f"{name}'s Prometheus /metrics port (0: none; default %(default)s)",
        )
    parser.add_argument(
        "--database-url", default=os.environ.get("FORGE_DATABASE_URL") or DEFAULT_DATABASE_URL
    )
    parser.add_argument(
        "--principals-file",
        default=os.environ.get("FORGE_PRINCIPALS_FILE") or DEFAULT_PRINCIPALS_FILE,
    )
    parser.add_argument(
        "--signing-key-file",
        default=os.environ.get("FORGE_SIGNING_KEY_FILE") or DEFAULT_SIGNING_KEY_FILE,
    )
    parser.add_argument(
        "--certs",
        metavar="DIR",
        type=Path,
        help="mutual TLS with the `make certs` files in DIR (e.g. var/certs): each service its "
        "own certificate, client certificates required, the gateway on HTTPS (default: "
        "plaintext on loopback)",
    )
    parser.add_argument(
        "--log-file",
        default=os.environ.get(LOG_FILE_VARIABLE) or DEFAULT_LOG_FILE,
        help="where every service's log lines are appended (default: %(default)s)",
    )
    return parser


def main(argv: list[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    ports = {name: getattr(args, f"{name}_port") for name in SERVICE_NAMES}
    metrics_ports = {
        name: getattr(args, f"{name}_metrics_port") for name in (*SERVICE_NAMES, GATEWAY)
    }
    # Before anything is written or started: a taken port means another instance (or another
    # program) is there, and starting would only end in bind failures.
    taken = next(
        (
            (name, port)
            for name, port in [
                *ports.items(),
                (GATEWAY, args.gateway_port),
                *((f"{name}-metrics", port) for name, port in metrics_ports.items() if port),
            ]
            if port_in_use(port)
        ),
        None,
    )
    if taken is not None:
        print(port_in_use_message(*taken), file=sys.stderr, flush=True)
        return EXIT_PORT_IN_USE
    principals, signing_key = local_credentials(args.principals_file, args.signing_key_file)
    # The ledger only checks the schema revision; for local development the runner migrates.
    migrate(args.database_url)

    env = dict(os.environ)
    # Workers run on this host beside the services: the ledger can prove a lost one ceased.
    env.setdefault(VERIFIER_VARIABLE, LOCAL_PROCESS_VERIFIER)
    env["FORGE_DATABASE_URL"] = args.database_url
    env["FORGE_PRINCIPALS_FILE"] = str(principals)
    env["FORGE_SIGNING_KEY_FILE"] = str(signing_key)
    env[LOG_FILE_VARIABLE] = args.log_file
    for name, port in ports.items():
        env[port_variable(name)] = str(port)
        env[target_variable(name)] = f"127.0.0.1:{port}"
    env[GATEWAY_PORT_VARIABLE] = str(args.gateway_port)
    for name, port in metrics_ports.items():
        env[metrics_port_variable(name)] = str(port)

    children: list[subprocess.Popen[bytes]] = []
    stopping = False

    def stop(signum: int, _frame: object) -> None:
        nonlocal stopping
        stopping = True

    signal.signal(signal.SIGTERM, stop)
    signal.signal(signal.SIGINT, stop)
    certs: Path | None = args.certs
    if certs is not None:
        write_certificates(certs)  # only what is missing
    for name in (*SERVICE_NAMES, GATEWAY):
        own = service_env(env, name)
        if certs is not None:
            own.update(tls_env(certs, name))
        children.append(
            subprocess.Popen(
                [sys.executable, "-m", f"services.{name}"],
                env=own,
                preexec_fn=_die_with_parent,  # noqa: PLW1509 - runs before any thread starts
                start_new_session=True,  # Ctrl-C reaches the runner only; it stops children itself
            )
        )
    print(f"forge continuity: starting; logs also in {args.log_file}", flush=True)
    exit_code, ready = 0, False
    while not stopping:
        for child in children:
            if child.poll() is not None:
                print(f"a service exited with status {child.returncode}; stopping", flush=True)
                exit_code = 1
                stopping = True
        if not stopping and not ready and not waiting_for(ports, args.gateway_port, certs):
            # The banner, only now that everything answers.
            if principals.read_text(encoding="utf-8") == dev_principals_text():
                print_dev_tokens()
            if certs is not None:
                print_client_tls(certs)
            print(
                ready_line(ports, args.gateway_port, args.database_url, metrics_ports, certs),
                flush=True,
            )
            ready = True
        time.sleep(0.2 if ready else 0.5)
    _stop_all(children)
    print("forge continuity: stopped", flush=True)
    return exit_code


def _stop_all(children: list[subprocess.Popen[bytes]]) -> None:
    """SIGTERM each (each drains its calls), then wait; kill whichever outlasts 30 s."""
    for child in children:
        if child.poll() is None:
            child.send_signal(signal.SIGTERM)
    for child in children:
        try:
            child.wait(timeout=30)
        except subprocess.TimeoutExpired:
            child.kill()
            child.wait()


if __name__ == "__main__":
    raise SystemExit(main())
