"""The runtime's channels with the contract's facts: the reads a channel retries are the
contract's idempotent reads (shared.runtime.transport knows no RPC of its own). Every program and
service opens its channels here; the runtime's own channels (a readiness probe's) retry nothing.
"""

from __future__ import annotations

import functools
from collections.abc import Mapping

import grpc

from shared.continuity.recovery import WORKFLOWS
from shared.contract.modules import SERVICES
from shared.runtime import client
from shared.runtime.config import Settings
from shared.runtime.transport import RetriedRead

# Service name → the RPCs that change nothing, so that a second attempt is safe whatever happened
# to the first. Listed by hand on purpose: a new RPC is not retried until someone decides it may
# be. (VerifyReconciliation, despite its name, records a journal entry: it is a write.)
IDEMPOTENT_READS: Mapping[str, tuple[str, ...]] = {
    "LedgerService": (
        "GetRun",
        "ListRuns",
        "ReadJournal",
        "StreamJournal",
        "VerifyJournal",
        "ReadRunSnapshot",
        "GetRunSnapshot",
        "InspectJournal",
        "GetBlob",
        "GetAdmission",
        "GetRecovery",
        "GetSigningKeys",
        "ListSignedHeads",
        "ListHeads",
    ),
    "PolicyService": ("GetPolicy", "ListPolicyRevisions"),
    "ExecutionService": (
        "GetExecutionRequest",
        "ListExecutionRequests",
        "ListAllExecutionRequests",
        "GetCommandUsage",
    ),
    "ReconciliationService": ("InspectReconciliation", "GetReconciliation"),
    # Pure computation over the bytes in the request.
    "ReconstructionService": (
        "ReconstructInvalidRead",
        "AnalyzeConsumedResponse",
        "AnalyzeAndReconstructInvalidRead",
        "ReproducePendingRequest",
        "ReconstructReadonlyObservation",
    ),
    # The candidate only reads the ledger and computes.
    "CandidateService": (
        "GetInvalidReadContinuityCandidate",
        # each recovery workflow's candidate: its descriptor declares it a read
        *(found.rpcs.candidate.name for found in WORKFLOWS.values()),
    ),
    "AdmissionService": (
        "GetInvalidReadContinuity",
        # each recovery workflow's read-back
        *(found.rpcs.read.name for found in WORKFLOWS.values()),
        "GetCallerPermissions",
        "ListRecoveryWorkflows",
    ),
}


def _retried_reads() -> tuple[RetriedRead, ...]:
    reads = []
    for service_name, methods in IDEMPOTENT_READS.items():
        service = SERVICES[service_name]
        for method in methods:
            if method not in service.methods_by_name:
                # Fail at import: a renamed RPC must not silently lose (or gain) its retries.
                raise ValueError(f"{service.full_name} has no RPC {method}")
            reads.append((service.full_name, method))
    return tuple(reads)


#: :data:`IDEMPOTENT_READS` by full service name, as the runtime's channels take them.
RETRIED_READS = _retried_reads()


#: :func:`shared.runtime.client.open_channel` retrying the contract's idempotent reads: the same
#: parameters, so a setting the runtime's channel gains is one that every caller here gets.
open_channel = functools.partial(client.open_channel, retried_reads=RETRIED_READS)


def service_channel(settings: Settings, service: str) -> grpc.Channel:
    """:func:`shared.runtime.client.service_channel` retrying the contract's idempotent reads."""
    return client.service_channel(settings, service, retried_reads=RETRIED_READS)
