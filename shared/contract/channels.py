"""The runtime's channels with the contract's facts: the reads a channel retries are the RPCs the
contract declares ``idempotency_level = NO_SIDE_EFFECTS`` (shared.contract.method_facts;
shared.runtime.transport knows no RPC of its own). A new RPC is not retried until its declaration
says it may be. Every program and service opens its channels here; the runtime's own channels (a
readiness probe's) retry nothing.
"""

from __future__ import annotations

import functools

import grpc

from shared.contract.method_facts import IDEMPOTENT_READS
from shared.contract.modules import SERVICES
from shared.runtime import client
from shared.runtime.config import Settings
from shared.runtime.transport import RetriedRead


def _retried_reads() -> tuple[RetriedRead, ...]:
    return tuple(
        (SERVICES[name].full_name, method)
        for name, methods in IDEMPOTENT_READS.items()
        for method in methods
    )


#: :data:`IDEMPOTENT_READS` by full service name, as the runtime's channels take them.
RETRIED_READS = _retried_reads()


#: :func:`shared.runtime.client.open_channel` retrying the contract's idempotent reads: the same
#: parameters, so a setting the runtime's channel gains is one that every caller here gets.
open_channel = functools.partial(client.open_channel, retried_reads=RETRIED_READS)


def service_channel(settings: Settings, service: str) -> grpc.Channel:
    """:func:`shared.runtime.client.service_channel` retrying the contract's idempotent reads."""
    return client.service_channel(settings, service, retried_reads=RETRIED_READS)
