"""Who may call each CandidateService RPC: the table the server's authorization enforces.

A fact of the contract, kept here and not in the candidate service, so the admission service
can report these decisions to a caller (GetCallerPermissions) from the very same table without
reaching into another service.
"""

from __future__ import annotations

from collections.abc import Mapping

from forge.continuity.v1 import candidate_pb2
from shared.continuity.recovery import WORKFLOWS
from shared.runtime.auth import Role

SERVICE = candidate_pb2.DESCRIPTOR.services_by_name["CandidateService"]

# Admission recomputes the candidate under its own service identity.
OPERATORS = frozenset({Role.EXECUTION_OPERATOR, Role.FACTORY_ADMINISTRATOR, Role.ADMISSION_SERVICE})
ADMINS = frozenset({Role.FACTORY_ADMINISTRATOR})


def method_roles() -> Mapping[str, frozenset[Role]]:
    """The table, with the candidate RPC of every registered recovery workflow."""
    return {
        "GetInvalidReadContinuityCandidate": OPERATORS,
        # Admission recomputes each recovery candidate under its service identity.
        **{
            workflow.rpcs.candidate.name: ADMINS | {Role.ADMISSION_SERVICE}
            for workflow in WORKFLOWS.values()
        },
    }
