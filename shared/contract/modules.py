"""The generated modules of the contract files that declare services, and those services by
full name: the one list the gateway's routes and the channels' retry policy are read from."""

from __future__ import annotations

from types import ModuleType

from google.protobuf.descriptor import ServiceDescriptor

from forge.continuity.v1 import (
    admission_pb2,
    candidate_pb2,
    execution_pb2,
    ledger_pb2,
    policy_pb2,
    reconciliation_pb2,
    reconstruction_pb2,
)

#: In the order the gateway lists their routes.
CONTRACT_MODULES: tuple[ModuleType, ...] = (
    ledger_pb2,
    policy_pb2,
    execution_pb2,
    reconciliation_pb2,
    reconstruction_pb2,
    candidate_pb2,
    admission_pb2,
)

#: Every service of the contract by name (``LedgerService``, ...; all in one package).
SERVICES: dict[str, ServiceDescriptor] = {
    name: service
    for module in CONTRACT_MODULES
    for name, service in module.DESCRIPTOR.services_by_name.items()
}
