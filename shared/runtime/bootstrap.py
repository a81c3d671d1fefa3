"""The common `main` of every service process: settings, logging, principals, serve, drain."""

from __future__ import annotations

import faulthandler
import logging
import os
import signal
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field

from shared.runtime.auth import PrincipalsFile
from shared.runtime.client import service_channel
from shared.runtime.collector import tune_for_service
from shared.runtime.config import Settings, load_settings
from shared.runtime.development import development_credentials_problem
from shared.runtime.events import configure_logging
from shared.runtime.limits import server_threads
from shared.runtime.metrics import serve_metrics
from shared.runtime.readiness import Check, Readiness, dependency
from shared.runtime.server import ServiceBinding, serve_until_signalled, start_server


@dataclass(frozen=True)
class BuildResult:
    """What a service's build step returns: its bindings, a cleanup to run after the drain, and
    its own readiness checks (the ledger's database and schema) beside its dependencies'."""

    bindings: Sequence[ServiceBinding]
    cleanup: Callable[[], None]
    checks: Mapping[str, Check] = field(default_factory=dict)


#: The signal that writes every thread's Python stack to stderr (the service's log) and changes
#: nothing else: what an operator (or a test) sends a process that does not answer or stop.
STACKS_SIGNAL = signal.SIGUSR1


def write_stacks_on_signal() -> None:
    """On :data:`STACKS_SIGNAL`, every thread's stack to stderr. Written in C, without the GIL
    or any lock, so it answers even when the interpreter is stuck."""
    faulthandler.register(STACKS_SIGNAL, all_threads=True)


class RefusedToServe(Exception):
    """Raised by a :data:`Preflight`: the service must not serve, for the reason given."""


#: A check run once, before the service builds or serves, by what composes the service (the
#: qualified profile registry, ADR 0023): the line to log, or :class:`RefusedToServe`.
Preflight = Callable[[], str]


#: A service's build step: its settings and the principals file the process follows (the one
#: source of roles for authentication and, in the ledger, for recovery authority).
Build = Callable[[Settings, PrincipalsFile], BuildResult]


def run_service(
    service: str,
    argv: list[str],
    build: Build,
    depends_on: Sequence[str] = (),
    *,
    preflight: Preflight,
) -> int:
    """Start ``service`` with the bindings ``build`` returns; block until SIGTERM/SIGINT; then
    drain in-flight calls and run the cleanup ``build`` returned. Health is NOT_SERVING until
    every service in ``depends_on`` answers SERVING and every check ``build`` returned passes,
    and again whenever one stops (shared.runtime.readiness). ``preflight`` runs before the build:
    its refusal stops the process (exit 2) before it serves."""
    settings = load_settings(service, argv)
    configure_logging(settings.log_level)
    write_stacks_on_signal()
    principals = PrincipalsFile(settings.principals_file, settings.principals_reload_seconds)
    problem = development_credentials_problem(
        settings.host,
        principals.current().token_digests(),
        os.environ.get("FORGE_SIGNING_KEY_FILE", ""),
    )
    if problem:
        logging.getLogger("forge.server").error("refusing to serve: %s", problem)
        return 2
    try:
        prepared = preflight()
    except RefusedToServe as refused:
        logging.getLogger("forge.server").error("refusing to serve: %s", refused)
        return 2
    logging.getLogger("forge.server").info("%s %s", service, prepared)
    built = build(settings, principals)
    metrics = serve_metrics(settings.metrics_host, settings.metrics_port)
    channels = {name: service_channel(settings, name) for name in depends_on}
    checks: dict[str, Check] = {
        name: dependency(name, settings.targets[name], channel)
        for name, channel in channels.items()
    }
    checks.update(built.checks)
    running = start_server(
        settings, built.bindings, principals, max_workers=server_threads(), serving=not checks
    )
    readiness = Readiness(service, running.health, running.names, checks)
    if checks:
        readiness.start()
    tune_for_service()
    try:
        serve_until_signalled(running, settings.grace_seconds)
    finally:
        if checks:
            readiness.stop()
        for channel in channels.values():
            channel.close()
        built.cleanup()
        if metrics is not None:
            metrics.stop()
    logging.getLogger("forge.server").info("%s stopped", service)
    return 0
