"""The Python client of the invalid-read continuity services.

One :class:`ContinuityClient` talks to the three processes an operator needs: the ledger (policy,
journal, command usage), the candidate service and the admission service. Method names follow the
specification's client names. The class is a facade: each workflow's methods live in their own
module (``ledger``, ``invalid_read``, ``recoveries``, ``reconciliation``) and are composed here.

Return values, one rule for every method: a response that carries a single message is unwrapped
to that message (``get_policy`` returns the ``Policy``, ``invalid_read_continuity`` the
``AdmissionTicket``, ``command_usage`` the ``CommandUsage``); a response that carries more than
one field is returned whole (every ``request_*`` submission returns its response with ``ticket`` /
``outcome`` *and* ``created``, and ``verify_journal`` returns the whole verification). Paged reads
(``policy_revisions``, ``journal``) fetch every page and return a list.

Every refusal surfaces as the typed ``shared.runtime.errors`` exception the service raised
(``InvalidArgument``, ``FailedPrecondition``, ``Aborted``, ``Conflict``, ``NotFound``,
``PermissionDenied``, ``Unauthenticated``, ``ResourceExhausted``, ``Unimplemented``,
``Unavailable`` …) with its ``reason``, ``metadata``, ``field_violations`` and
``precondition_violations``.

Submissions are validated here before anything is sent: the version must be supported by the
chosen route, every acknowledgement must be exactly the Boolean ``True`` (not merely truthy), the
lease window must be 1..7200 seconds, and identifiers and digests must be present. A local
refusal is an ``InvalidArgument`` (reason ``VERSION_UNSUPPORTED``, ``ACKNOWLEDGEMENT_REQUIRED`` or
``FIELD_INVALID``, metadata ``origin=client``) and no call is made.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from types import TracebackType
from typing import Self

from services.client._base import TOKEN_VARIABLE, default_target
from services.client._validation import validate_continuity_request
from services.client.audit import AuditCalls
from services.client.caller import CallerCalls
from services.client.heads import HeadCalls
from services.client.invalid_read import ContinuityResponse, InvalidReadCalls
from services.client.ledger import LedgerCalls
from services.client.reconciliation import ReconciliationCalls
from services.client.recoveries import (
    NeverClaimedRecoveryCalls,
    ReadonlyObservationRecoveryCalls,
    RejectedBoundaryRecoveryCalls,
)
from shared.runtime.config import client_tls

__all__ = [
    "TOKEN_VARIABLE",
    "ContinuityClient",
    "ContinuityResponse",
    "default_target",
    "validate_continuity_request",
]


class ContinuityClient(
    LedgerCalls,
    AuditCalls,
    HeadCalls,
    InvalidReadCalls,
    NeverClaimedRecoveryCalls,
    RejectedBoundaryRecoveryCalls,
    ReadonlyObservationRecoveryCalls,
    ReconciliationCalls,
    CallerCalls,
):
    """Typed access to the ledger, candidate and admission services for one bearer token.

    Use it as a context manager (or call :meth:`close`) so its channels are closed.
    """

    @classmethod
    def from_environment(
        cls, env: Mapping[str, str] | None = None, *, timeout: float = 30.0
    ) -> ContinuityClient:
        """A client for ``FORGE_TOKEN`` and the ``FORGE_LEDGER_TARGET`` /
        ``FORGE_CANDIDATE_TARGET`` / ``FORGE_ADMISSION_TARGET`` targets (default: the services'
        default ports on 127.0.0.1), over TLS when ``FORGE_TLS_CA`` / ``FORGE_TLS_CERT`` /
        ``FORGE_TLS_KEY`` say so."""
        env = os.environ if env is None else env
        return cls(
            env.get(TOKEN_VARIABLE, ""),
            ledger_target=default_target("ledger", env),
            candidate_target=default_target("candidate", env),
            admission_target=default_target("admission", env),
            timeout=timeout,
            tls=client_tls(env),
        )

    def __enter__(self) -> Self:
        return self

    def __exit__(
        self,
        kind: type[BaseException] | None,
        error: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        self.close()
