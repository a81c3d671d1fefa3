"""Who may call each CandidateService RPC: the table the server's authorization enforces.

A module of its own so the admission service can report these decisions to a caller
(GetCallerPermissions) from the very same table, without loading the candidate evaluator.
"""

from __future__ import annotations

from collections.abc import Mapping

from forge.continuity.v1 import candidate_pb2
from shared.runtime.auth import Role

SERVICE = candidate_pb2.DESCRIPTOR.services_by_name["CandidateService"]

# Admission recomputes the candidate under its own service identity.
OPERATORS = frozenset(
    {Role.EXECUTION_OPERATOR, Role.FACTORY_ADMINISTRATOR, Role.CONTINUITY_SERVICE}
)
ADMINS = frozenset({Role.FACTORY_ADMINISTRATOR})

METHOD_ROLES: Mapping[str, frozenset[Role]] = {
    "GetInvalidReadContinuityCandidate": OPERATORS,
    # Admission recomputes the recovery candidate under its service identity.
    "GetInvalidReadRecoveryCandidate": ADMINS | {Role.CONTINUITY_SERVICE},
    "GetRejectedBoundaryCandidate": ADMINS | {Role.CONTINUITY_SERVICE},
    "GetReadonlyObservationCandidate": ADMINS | {Role.CONTINUITY_SERVICE},
}
