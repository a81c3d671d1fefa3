"""Health that follows a service's dependencies: a process reports NOT_SERVING until every
service it calls answers SERVING on the standard health check, and again whenever one stops.

A service that is up but cannot reach the ledger is not ready: a caller sent to it would only get
UNAVAILABLE. Dependencies report their own readiness the same way, so one SERVING answer from
admission means the ledger, reconstruction and candidate answered too.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Mapping

import grpc
from grpc_health.v1 import health, health_pb2, health_pb2_grpc

log = logging.getLogger("forge.readiness")
#: How often a dependency is asked, and how long one answer may take.
PROBE_INTERVAL_SECONDS = 1.0
PROBE_TIMEOUT_SECONDS = 2.0
SERVING = health_pb2.HealthCheckResponse.SERVING
NOT_SERVING = health_pb2.HealthCheckResponse.NOT_SERVING


def answers(channel: grpc.Channel, timeout: float = PROBE_TIMEOUT_SECONDS) -> bool:
    """Whether the server behind ``channel`` reports SERVING (its overall status)."""
    try:
        reply = health_pb2_grpc.HealthStub(channel).Check(
            health_pb2.HealthCheckRequest(), timeout=timeout
        )
    except grpc.RpcError:
        return False
    return bool(reply.status == SERVING)


class Readiness:
    """Sets ``names`` (and the overall status "") on ``servicer`` to SERVING exactly while every
    dependency answers; logs each change once."""

    def __init__(
        self,
        service: str,
        servicer: health.HealthServicer,
        names: list[str],
        dependencies: Mapping[str, tuple[str, grpc.Channel]],
        interval: float = PROBE_INTERVAL_SECONDS,
    ) -> None:
        self.service = service
        self._servicer = servicer
        self._names = ["", *names]
        self._dependencies = dependencies
        self._interval = interval
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name=f"{service}-readiness", daemon=True)
        self._waiting: tuple[str, ...] | None = None

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(timeout=PROBE_TIMEOUT_SECONDS + self._interval)

    def check_once(self) -> tuple[str, ...]:
        """Probe every dependency now, set the status; the dependencies still awaited."""
        waiting = tuple(
            name for name, (_target, channel) in self._dependencies.items() if not answers(channel)
        )
        status = NOT_SERVING if waiting else SERVING
        for name in self._names:
            self._servicer.set(name, status)
        if waiting != self._waiting:
            if waiting:
                log.info(
                    "%s NOT_SERVING: waiting for %s",
                    self.service,
                    ", ".join(f"{n} at {self._dependencies[n][0]}" for n in waiting),
                )
            else:
                log.info(
                    "%s SERVING: %s answer", self.service, ", ".join(self._dependencies) or "-"
                )
            self._waiting = waiting
        return waiting

    def _run(self) -> None:
        while not self._stop.is_set():
            self.check_once()
            self._stop.wait(self._interval)
