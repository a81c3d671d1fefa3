"""The services under measurement, each in its own process on loopback (as ``make run`` starts
them), over a dedicated PostgreSQL schema; and the bare baseline server beside them."""

from __future__ import annotations

import atexit
import functools
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

import grpc
from sqlalchemy import Connection, create_engine, text

from bench.cpu import POSTGRES_URL
from services.ledger.database import migrate
from services.ledger.domain.signing import HeadSigner, write_new_key
from services.runner import dev_principals_text, service_env
from shared.runtime.config import (
    SERVICE_NAMES,
    metrics_port_variable,
    port_variable,
    target_variable,
)

READY_SECONDS = 60.0


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
        return port


@functools.cache
def bench_signing_key() -> tuple[Path, HeadSigner]:
    """The one signing key of this bench process (a file, removed at exit): every benched ledger
    signs its heads with it, as a deployed one does (ADR 0059), and the bulk seeding of long
    journals (bench/seed.py), which writes around the ledger, signs the head it leaves with it
    too, or the ledger would rightly refuse to sign over an unsigned head."""
    scratch = Path(tempfile.mkdtemp(prefix="forge-bench-key-"))
    atexit.register(shutil.rmtree, scratch, True)
    path = scratch / "signing-key.pem"
    return path, write_new_key(path)


@contextmanager
def bench_schema() -> Iterator[str]:
    """A fresh, migrated schema of its own; the database URL that selects it. Dropped after."""
    schema = f"bench_{uuid.uuid4().hex[:12]}"
    admin = create_engine(POSTGRES_URL)
    with admin.begin() as connection:
        connection.execute(text(f'CREATE SCHEMA "{schema}"'))
    separator = "&" if "?" in POSTGRES_URL else "?"
    url = f"{POSTGRES_URL}{separator}options=-csearch_path%3D{schema}"
    migrate(url)
    try:
        yield url
    finally:
        with admin.begin() as connection:
            connection.execute(text(f'DROP SCHEMA "{schema}" CASCADE'))
        admin.dispose()


@contextmanager
def autocommit_connection(url: str) -> Iterator[Connection]:
    """A connection to ``url`` whose statements run outside any transaction (VACUUM and
    CHECKPOINT run in none); its engine is disposed after."""
    engine = create_engine(url, isolation_level="AUTOCOMMIT")
    try:
        with engine.connect() as connection:
            yield connection
    finally:
        engine.dispose()


def vacuum_schema(url: str) -> dict[str, float]:
    """Vacuum and analyze every table of the schema ``url`` selects, as autovacuum would on a
    deployed database between one burst of writes and the next (a server may run without it, as
    the CI machine's does). Returns the dead rows the tables held before and the seconds it took.
    """
    with autocommit_connection(url) as connection:
        tables = connection.execute(
            text(
                "SELECT relname, n_dead_tup FROM pg_stat_user_tables"
                " WHERE schemaname = current_schema() ORDER BY relname"
            )
        ).all()
        started = time.perf_counter()
        for name, _dead in tables:
            connection.execute(text(f'VACUUM (ANALYZE) "{name}"'))
        seconds = time.perf_counter() - started
    return {"dead_rows": float(sum(dead for _name, dead in tables)), "seconds": round(seconds, 3)}


def _wait_ready(target: str, process: subprocess.Popen[bytes]) -> None:
    channel = grpc.insecure_channel(target)
    try:
        grpc.channel_ready_future(channel).result(timeout=READY_SECONDS)
    except grpc.FutureTimeoutError:
        process.kill()
        raise RuntimeError(f"{target} did not start within {READY_SECONDS}s") from None
    finally:
        channel.close()
    if process.poll() is not None:
        raise RuntimeError(f"the process serving {target} exited with {process.returncode}")


def _stop(processes: list[subprocess.Popen[bytes]]) -> None:
    for process in processes:
        if process.poll() is None:
            process.terminate()
    for process in processes:
        try:
            process.wait(timeout=20)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()


@dataclass(frozen=True)
class Services:
    """The four services' targets and process ids; the ledgers' metrics endpoints (host:port,
    by target name) when asked for."""

    targets: Mapping[str, str]
    pids: Mapping[str, int]
    metrics: Mapping[str, str] = field(default_factory=dict)


@contextmanager
def services(
    database_url: str,
    *,
    ledger_replicas: int = 1,
    env_extra: Mapping[str, str] | None = None,
    ledger_metrics: bool = False,
    command: Callable[[str], list[str]] | None = None,
) -> Iterator[Services]:
    """Start ledger, reconstruction, candidate and admission on free ports (``command(name)``
    instead of ``python -m services.<name>`` where given: a floor standing in for them); with
    ``ledger_replicas`` > 1 further ledger processes on the same database, the same way (targets
    ``ledger-2``, ``ledger-3``, …; the other services call the first); with ``ledger_metrics``
    each ledger serves /metrics on a port of its own (``Services.metrics``)."""
    with tempfile.TemporaryDirectory(prefix="forge-bench-") as scratch:
        principals = Path(scratch) / "principals.json"
        principals.write_text(dev_principals_text(), encoding="utf-8")
        # Every ledger signs its heads, as a deployed one does (the first rounds of round 5
        # benched a ledger that signed nothing: about 0.1 ms of an admission's CPU left out).
        signing_key, _ = bench_signing_key()
        ports = {name: free_port() for name in SERVICE_NAMES}
        env = dict(os.environ)
        env.update(
            {
                "FORGE_DATABASE_URL": database_url,
                "FORGE_PRINCIPALS_FILE": str(principals),
                "FORGE_SIGNING_KEY_FILE": str(signing_key),
                "FORGE_LOG_LEVEL": "WARNING",
            }
        )
        env.update(env_extra or {})
        env.pop("OTEL_EXPORTER_OTLP_ENDPOINT", None)
        for name, port in ports.items():
            env[port_variable(name)] = str(port)
            env[target_variable(name)] = f"127.0.0.1:{port}"
        metrics: dict[str, str] = {}

        def own_metrics(target: str) -> dict[str, str]:
            if not ledger_metrics:
                return {}
            metrics[target] = f"127.0.0.1:{free_port()}"
            return {metrics_port_variable("ledger"): metrics[target].rpartition(":")[2]}

        processes: list[subprocess.Popen[bytes]] = []
        targets: dict[str, str] = {}
        try:
            # All started at once, then each awaited: a service opens its channels to the others
            # lazily, and interpreters started one after another cost seconds per set of services.
            for name in SERVICE_NAMES:
                extra = own_metrics(name) if name == "ledger" else {}
                process = subprocess.Popen(
                    command(name) if command else [sys.executable, "-m", f"services.{name}"],
                    env=service_env({**env, **extra}, name),
                )
                processes.append(process)
                targets[name] = f"127.0.0.1:{ports[name]}"
            for replica in range(2, ledger_replicas + 1):
                port = free_port()
                own = service_env(
                    {**env, port_variable("ledger"): str(port), **own_metrics(f"ledger-{replica}")},
                    "ledger",
                )
                processes.append(
                    subprocess.Popen([sys.executable, "-m", "services.ledger"], env=own)
                )
                targets[f"ledger-{replica}"] = f"127.0.0.1:{port}"
            for target, process in zip(targets.values(), processes, strict=True):
                _wait_ready(target, process)
            pids = {name: p.pid for name, p in zip(targets, processes, strict=True)}
            yield Services(targets, pids, metrics)
        finally:
            _stop(processes)


@dataclass(frozen=True)
class Baseline:
    """A bare baseline's entry target and the process ids behind it, by role."""

    target: str
    pids: Mapping[str, int]


def _bare_process(*arguments: str) -> tuple[str, subprocess.Popen[bytes]]:
    port = free_port()
    process = subprocess.Popen(
        [sys.executable, "-m", "bench.baseline", "--port", str(port), *arguments]
    )
    _wait_ready(f"127.0.0.1:{port}", process)
    return f"127.0.0.1:{port}", process


@contextmanager
def baseline_server(database_url: str, statements: int = 1) -> Iterator[Baseline]:
    """The bare baseline server (bench.baseline) in its own process; with ``statements`` > 1 its
    transaction runs that many single-row inserts instead of one 3-row insert (a statement
    floor)."""
    target, process = _bare_process("--database-url", database_url, "--statements", str(statements))
    try:
        yield Baseline(target, {"baseline": process.pid})
    finally:
        _stop([process])


@contextmanager
def hop_floor(baseline: Baseline, hops: int) -> Iterator[Baseline]:
    """The ``hops``-hop floor: a bare front process relaying to ``baseline`` (bench.baseline)."""
    target, process = _bare_process("--downstream", baseline.target, "--hops", str(hops))
    try:
        yield Baseline(target, {**baseline.pids, "hop_front": process.pid})
    finally:
        _stop([process])


def memory_kib(pid: int) -> dict[str, int]:
    """The process's current (VmRSS) and peak (VmHWM) resident set, in KiB."""
    fields: dict[str, int] = {}
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        name, _, value = line.partition(":")
        if name in {"VmRSS", "VmHWM"}:
            fields[name] = int(value.split()[0])
    return fields
