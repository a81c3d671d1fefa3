"""The common `main` of every service process: settings, logging, principals, serve, drain."""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence

from shared.runtime.auth import PrincipalDirectory
from shared.runtime.config import Settings, load_settings
from shared.runtime.server import ServiceBinding, serve_until_signalled, start_server

# What a service's build step returns: its bindings and a cleanup to run after the drain.
BuildResult = tuple[Sequence[ServiceBinding], Callable[[], None]]
Build = Callable[[Settings], BuildResult]


def configure_logging(level: str) -> None:
    logging.basicConfig(
        level=getattr(logging, level.upper(), logging.INFO),
        format="%(asctime)s %(levelname)s %(name)s %(message)s",
    )
    # The SDK's HTTP client logs every request it "sends"; inside reconstruction those requests
    # only ever reach the sealed in-process transport, and the provider URL in the log misleads.
    for noisy in ("httpx", "httpx2", "openai"):
        logging.getLogger(noisy).setLevel(logging.WARNING)


def run_service(service: str, argv: list[str], build: Build) -> int:
    """Start ``service`` with the bindings ``build`` returns; block until SIGTERM/SIGINT; then
    drain in-flight calls and run the cleanup ``build`` returned."""
    settings = load_settings(service, argv)
    configure_logging(settings.log_level)
    directory = PrincipalDirectory.load(settings.principals_file)
    service_bindings, cleanup = build(settings)
    running = start_server(settings, service_bindings, directory)
    try:
        serve_until_signalled(running, settings.grace_seconds)
    finally:
        cleanup()
    logging.getLogger("forge.server").info("%s stopped", service)
    return 0
