"""The common `main` of every service process: settings, logging, principals, serve, drain."""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence

from shared.continuity.qualification import RegistryError, load_at_startup
from shared.runtime.auth import PrincipalDirectory
from shared.runtime.client import service_channel
from shared.runtime.config import Settings, load_settings, server_threads
from shared.runtime.events import configure_logging
from shared.runtime.metrics import serve_metrics
from shared.runtime.readiness import Readiness
from shared.runtime.server import ServiceBinding, serve_until_signalled, start_server

# What a service's build step returns: its bindings and a cleanup to run after the drain.
BuildResult = tuple[Sequence[ServiceBinding], Callable[[], None]]
Build = Callable[[Settings], BuildResult]


def run_service(service: str, argv: list[str], build: Build, depends_on: Sequence[str] = ()) -> int:
    """Start ``service`` with the bindings ``build`` returns; block until SIGTERM/SIGINT; then
    drain in-flight calls and run the cleanup ``build`` returned. Health is NOT_SERVING until
    every service in ``depends_on`` answers SERVING (shared.runtime.readiness)."""
    settings = load_settings(service, argv)
    configure_logging(settings.log_level)
    directory = PrincipalDirectory.load(settings.principals_file)
    # The installed profile digest is computed and the profile registry read before serving
    # (ADR 0023): a malformed registry stops the service here, not at its first admission.
    try:
        profile = load_at_startup()
    except RegistryError as refused:
        logging.getLogger("forge.server").error("refusing to serve: %s", refused)
        return 2
    logging.getLogger("forge.server").info(
        "%s installed profile digest %s", service, profile.digest
    )
    service_bindings, cleanup = build(settings)
    metrics = serve_metrics(settings.host, settings.metrics_port)
    running = start_server(
        settings,
        service_bindings,
        directory,
        max_workers=server_threads(),
        serving=not depends_on,
    )
    probes = {
        name: (settings.targets[name], service_channel(settings, name)) for name in depends_on
    }
    readiness = Readiness(service, running.health, running.names, probes)
    if depends_on:
        readiness.start()
    try:
        serve_until_signalled(running, settings.grace_seconds)
    finally:
        if depends_on:
            readiness.stop()
        for _target, channel in probes.values():
            channel.close()
        cleanup()
        if metrics is not None:
            metrics.stop()
    logging.getLogger("forge.server").info("%s stopped", service)
    return 0
