"""Health that follows a service's dependencies: a process reports NOT_SERVING until every
service it calls answers SERVING on the standard health check, and again whenever one stops.

A service that is up but cannot reach the ledger is not ready: a caller sent to it would only get
UNAVAILABLE. Dependencies report their own readiness the same way, so one SERVING answer from
admission means the ledger, reconstruction and candidate answered too. The ledger's own checks
(its database answers, its schema is a revision this release serves) take part the same way.

The health name :data:`LIVENESS` answers SERVING for as long as the process serves at all, so a
liveness probe does not restart a process that is only waiting for a dependency.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping

import grpc
from grpc_health.v1 import health, health_pb2, health_pb2_grpc

from shared.runtime.periodic import Periodic

log = logging.getLogger("forge.readiness")
#: How often a dependency is asked, and how long one answer may take.
PROBE_INTERVAL_SECONDS = 1.0
PROBE_TIMEOUT_SECONDS = 2.0
SERVING = health_pb2.HealthCheckResponse.SERVING
NOT_SERVING = health_pb2.HealthCheckResponse.NOT_SERVING
#: The health name a liveness probe asks: SERVING while the process serves, whatever it waits for.
LIVENESS = "liveness"
#: A readiness check: None while ready, else what is awaited (logged on each change).
Check = Callable[[], str | None]


def answers(channel: grpc.Channel, timeout: float = PROBE_TIMEOUT_SECONDS) -> bool:
    """Whether the server behind ``channel`` reports SERVING (its overall status)."""
    try:
        reply = health_pb2_grpc.HealthStub(channel).Check(
            health_pb2.HealthCheckRequest(), timeout=timeout
        )
    except grpc.RpcError:
        return False
    return bool(reply.status == SERVING)


def dependency(name: str, target: str, channel: grpc.Channel) -> Check:
    """The check that the service ``name`` at ``target`` answers SERVING."""
    return lambda: None if answers(channel) else f"{name} at {target}"


class Readiness:
    """Sets ``names`` (and the overall status "") on ``servicer`` to SERVING exactly while every
    check passes; logs each change once."""

    def __init__(
        self,
        service: str,
        servicer: health.HealthServicer,
        names: list[str],
        checks: Mapping[str, Check],
        interval: float = PROBE_INTERVAL_SECONDS,
    ) -> None:
        self.service = service
        self._servicer = servicer
        self._names = ["", *names]
        self._checks = checks
        self._interval = interval
        self._schedule = Periodic(
            f"{service}-readiness",
            self.check_once,
            lambda: interval,
            failure=f"{service}: a readiness probe failed; probing again next round",
            log=log,
            first_now=True,
        )
        self._waiting: tuple[str, ...] | None = None

    def start(self) -> None:
        self._schedule.start()

    def stop(self) -> None:
        self._schedule.stop(timeout=PROBE_TIMEOUT_SECONDS + self._interval)

    def check_once(self) -> tuple[str, ...]:
        """Run every check now, set the status; what is still awaited."""
        waiting = tuple(
            problem for problem in (check() for check in self._checks.values()) if problem
        )
        status = NOT_SERVING if waiting else SERVING
        for name in self._names:  # ignored once a drain has begun (enter_graceful_shutdown)
            self._servicer.set(name, status)
        if waiting != self._waiting:
            if waiting:
                log.warning("%s NOT_SERVING: waiting for %s", self.service, "; ".join(waiting))
            else:
                log.info("%s SERVING: %s answer", self.service, ", ".join(self._checks) or "-")
            self._waiting = waiting
        return waiting
