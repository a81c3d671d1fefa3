"""`python -m services.gateway`: serve the annotated HTTP routes on FORGE_GATEWAY_PORT (8080).

uvicorn runs the ASGI app; SIGTERM / SIGINT stop accepting connections and give in-flight
requests FORGE_GRACE_SECONDS to finish. SIGUSR1 writes every thread's stack to the log.
"""

from __future__ import annotations

import sys

import uvicorn

from services.gateway.app import create_app
from services.gateway.config import load_gateway_settings
from shared.runtime.bootstrap import write_stacks_on_signal
from shared.runtime.events import configure_logging
from shared.runtime.metrics import serve_metrics


def main(argv: list[str] | None = None) -> int:
    settings = load_gateway_settings(argv if argv is not None else sys.argv[1:])
    configure_logging(settings.log_level)
    write_stacks_on_signal()
    metrics = serve_metrics(settings.metrics_host, settings.metrics_port)
    config = uvicorn.Config(
        create_app(settings),
        host=settings.host,
        port=settings.port,
        log_level=settings.log_level.lower(),
        timeout_graceful_shutdown=max(1, int(settings.grace_seconds)),
        server_header=False,
        access_log=settings.access_log,
        # uvicorn's lines go through the root handlers configure_logging set (text or JSON).
        log_config=None,
        # HTTPS when the gateway has a certificate (FORGE_TLS_CERT / FORGE_TLS_KEY).
        **settings.uvicorn_tls(),  # type: ignore[arg-type]
    )
    server = uvicorn.Server(config)
    try:
        server.run()
    finally:
        if metrics is not None:
            metrics.stop()
    return 0 if server.started else 1


if __name__ == "__main__":
    raise SystemExit(main())
