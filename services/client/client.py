"""The Python client of the invalid-read continuity services.

One :class:`ContinuityClient` talks to the three processes an operator needs: the ledger (policy,
journal, command usage), the candidate service and the admission service. Method names follow the
specification's client names.

Return values, one rule for every method: a response that carries a single message is unwrapped
to that message (``get_policy`` returns the ``Policy``, ``invalid_read_continuity`` the
``AdmissionTicket``, ``command_usage`` the ``CommandUsage``); a response that carries more than
one field is returned whole (every ``request_*`` submission returns its response with ``ticket`` /
``outcome`` *and* ``created``, and ``verify_journal`` returns the whole verification). Paged reads
(``policy_revisions``, ``journal``) fetch every page and return a list.

Every refusal surfaces as the typed ``shared.errors`` exception the service raised
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
from collections.abc import Mapping, Sequence
from types import TracebackType
from typing import Final, NoReturn, Self, TypeVar

import grpc

from forge.continuity.v1 import (
    admission_pb2,
    admission_pb2_grpc,
    candidate_pb2,
    candidate_pb2_grpc,
    common_pb2,
    execution_pb2,
    execution_pb2_grpc,
    ledger_pb2,
    ledger_pb2_grpc,
    policy_pb2,
    policy_pb2_grpc,
)
from shared.client import call, open_channel
from shared.config import DEFAULT_PORTS
from shared.errors import FieldViolation, InvalidArgument

MAX_VALID_FOR_SECONDS: Final = 7200
SUPPORTED_VERSIONS: Final = (1, 2)
TOKEN_VARIABLE: Final = "FORGE_TOKEN"  # noqa: S105 - the variable name, not a token
TARGET_VARIABLES: Final[Mapping[str, str]] = {
    "ledger": "FORGE_LEDGER_TARGET",
    "candidate": "FORGE_CANDIDATE_TARGET",
    "admission": "FORGE_ADMISSION_TARGET",
}
DIGEST_NAMES: Final = ("candidate_digest", "run_digest", "journal_digest", "policy_digest")
V1_ACKNOWLEDGEMENTS: Final = (
    "acknowledge_no_new_grant",
    "acknowledge_original_consumption",
    "acknowledge_renewed_same_attempt_lease",
)
V2_ACKNOWLEDGEMENT: Final = "acknowledge_unavailable_source_observations"
_JOURNAL_PAGE = 500
_POLICY_PAGE = 500
_ORIGIN = {"origin": "client"}

_Req = TypeVar("_Req")
_Resp = TypeVar("_Resp")

Digests = common_pb2.ContinuityDigests | candidate_pb2.InvalidReadContinuityCandidate
ContinuityResponse = (
    admission_pb2.RequestInvalidReadContinuityResponse
    | admission_pb2.RequestInvalidReadContinuityV2Response
)


def default_target(service: str, env: Mapping[str, str] | None = None) -> str:
    """``FORGE_<SERVICE>_TARGET`` when set, else the service's default port on 127.0.0.1."""
    env = os.environ if env is None else env
    return env.get(TARGET_VARIABLES[service], "") or f"127.0.0.1:{DEFAULT_PORTS[service]}"


def _invoke(method: grpc.UnaryUnaryMultiCallable[_Req, _Resp], request: _Req) -> _Resp:
    response: _Resp = call(method, request)
    return response


# --- local validation --------------------------------------------------------------------------


def _refuse(
    reason: str, message: str, violations: Sequence[FieldViolation], **metadata: str
) -> NoReturn:
    raise InvalidArgument(
        reason, message, metadata={**_ORIGIN, **metadata}, field_violations=violations
    )


def _check_identifiers(**identifiers: object) -> None:
    bad = [name for name, value in identifiers.items() if not isinstance(value, str) or not value]
    if bad:
        _refuse(
            "FIELD_INVALID",
            "identifiers must be non-empty strings: " + ", ".join(bad),
            [FieldViolation(name, "required: a non-empty string") for name in bad],
            field=",".join(bad),
        )


def _check_acknowledgements(acknowledgements: Mapping[str, object]) -> None:
    missing = [name for name, given in acknowledgements.items() if given is not True]
    if missing:
        _refuse(
            "ACKNOWLEDGEMENT_REQUIRED",
            "every acknowledgement must be exactly true: " + ", ".join(missing),
            [FieldViolation(name, "must be exactly true") for name in missing],
            missing=",".join(missing),
        )


def _check_window(valid_for_seconds: object) -> None:
    if (
        not isinstance(valid_for_seconds, int)
        or isinstance(valid_for_seconds, bool)
        or not 1 <= valid_for_seconds <= MAX_VALID_FOR_SECONDS
    ):
        _refuse(
            "FIELD_INVALID",
            f"valid_for_seconds must be an integer in 1..{MAX_VALID_FOR_SECONDS}",
            [FieldViolation("valid_for_seconds", f"must be in 1..{MAX_VALID_FOR_SECONDS}")],
            field="valid_for_seconds",
        )


def _check_version(version: object, acknowledge_observations: object = None) -> None:
    if (
        not isinstance(version, int)
        or isinstance(version, bool)
        or version not in SUPPORTED_VERSIONS
    ):
        _refuse(
            "VERSION_UNSUPPORTED",
            f"version must be 1 or 2, got {version!r}",
            [FieldViolation("version", "must be 1 or 2")],
            field="version",
            supported="1,2",
        )
    if version == 1 and acknowledge_observations not in (None, False):
        _refuse(
            "FIELD_INVALID",
            f"{V2_ACKNOWLEDGEMENT} belongs to version 2; a version-1 request cannot admit a "
            "version-2 proof",
            [FieldViolation(V2_ACKNOWLEDGEMENT, "only version 2 takes this acknowledgement")],
            field=V2_ACKNOWLEDGEMENT,
        )


def _continuity_digests(digests: object) -> common_pb2.ContinuityDigests:
    if isinstance(digests, candidate_pb2.InvalidReadContinuityCandidate):
        digests = digests.digests
    if not isinstance(digests, common_pb2.ContinuityDigests):
        _refuse(
            "FIELD_INVALID",
            "digests must be the ContinuityDigests (or the candidate) read from the candidate",
            [FieldViolation("digests", "a ContinuityDigests or InvalidReadContinuityCandidate")],
            field="digests",
        )
    missing = [name for name in DIGEST_NAMES if not getattr(digests, name)]
    if missing:
        _refuse(
            "FIELD_INVALID",
            "every digest is required, copied exactly from the candidate: " + ", ".join(missing),
            [FieldViolation(f"digests.{name}", "required") for name in missing],
            field=",".join(f"digests.{name}" for name in missing),
        )
    return digests


def _candidate_digest(candidate_digest: object) -> str:
    if isinstance(candidate_digest, candidate_pb2.RecoveryCandidate):
        candidate_digest = candidate_digest.candidate_digest
    if not isinstance(candidate_digest, str) or not candidate_digest:
        _refuse(
            "FIELD_INVALID",
            "candidate_digest is required, copied exactly from the recovery candidate",
            [FieldViolation("candidate_digest", "required")],
            field="candidate_digest",
        )
    return candidate_digest


def _check_reviewed_rejection(reviewed_rejection: object) -> None:
    if not isinstance(reviewed_rejection, candidate_pb2.ReviewedProviderRejectionV1):
        _refuse(
            "FIELD_INVALID",
            "reviewed_rejection must be a ReviewedProviderRejectionV1",
            [FieldViolation("reviewed_rejection", "a ReviewedProviderRejectionV1")],
            field="reviewed_rejection",
        )


def validate_continuity_request(
    run_id: str,
    request_id: str,
    *,
    version: int,
    valid_for_seconds: int,
    acknowledge_no_new_grant: bool,
    acknowledge_original_consumption: bool,
    acknowledge_renewed_same_attempt_lease: bool,
    acknowledge_unavailable_source_observations: bool | None = None,
) -> None:
    """Every local check of a continuity submission except the digests, in the order the
    admission service applies them; raises ``InvalidArgument`` without any network call."""
    _check_identifiers(run_id=run_id, request_id=request_id)
    _check_version(version, acknowledge_unavailable_source_observations)
    acknowledgements: dict[str, object] = {
        "acknowledge_no_new_grant": acknowledge_no_new_grant,
        "acknowledge_original_consumption": acknowledge_original_consumption,
        "acknowledge_renewed_same_attempt_lease": acknowledge_renewed_same_attempt_lease,
    }
    if version == 2:
        acknowledgements[V2_ACKNOWLEDGEMENT] = acknowledge_unavailable_source_observations
    _check_acknowledgements(acknowledgements)
    _check_window(valid_for_seconds)


def _check_recovery(
    run_id: str,
    request_id: str,
    recovery_id: str,
    candidate_digest: object,
    valid_for_seconds: int,
    acknowledgements: Mapping[str, object],
) -> str:
    _check_identifiers(run_id=run_id, request_id=request_id, recovery_id=recovery_id)
    _check_acknowledgements(acknowledgements)
    _check_window(valid_for_seconds)
    return _candidate_digest(candidate_digest)


# --- the client --------------------------------------------------------------------------------


class ContinuityClient:
    """Typed access to the ledger, candidate and admission services for one bearer token.

    Use it as a context manager (or call :meth:`close`) so its channels are closed.
    """

    def __init__(
        self,
        token: str,
        *,
        ledger_target: str,
        candidate_target: str,
        admission_target: str,
        timeout: float = 30.0,
        root_certificates: bytes | None = None,
    ) -> None:
        self.targets = {
            "ledger": ledger_target,
            "candidate": candidate_target,
            "admission": admission_target,
        }

        def channel(target: str) -> grpc.Channel:
            return open_channel(
                target, token, root_certificates=root_certificates, default_timeout=timeout
            )

        self._channels = [channel(ledger_target), channel(candidate_target)]
        self._channels.append(channel(admission_target))
        ledger, candidate, admission = self._channels
        self._ledger = ledger_pb2_grpc.LedgerServiceStub(ledger)
        self._policy = policy_pb2_grpc.PolicyServiceStub(ledger)
        self._execution = execution_pb2_grpc.ExecutionServiceStub(ledger)
        self._candidate = candidate_pb2_grpc.CandidateServiceStub(candidate)
        self._admission = admission_pb2_grpc.AdmissionServiceStub(admission)

    @classmethod
    def from_environment(
        cls, env: Mapping[str, str] | None = None, *, timeout: float = 30.0
    ) -> ContinuityClient:
        """A client for ``FORGE_TOKEN`` and the ``FORGE_LEDGER_TARGET`` /
        ``FORGE_CANDIDATE_TARGET`` / ``FORGE_ADMISSION_TARGET`` targets (default: the services'
        default ports on 127.0.0.1)."""
        env = os.environ if env is None else env
        return cls(
            env.get(TOKEN_VARIABLE, ""),
            ledger_target=default_target("ledger", env),
            candidate_target=default_target("candidate", env),
            admission_target=default_target("admission", env),
            timeout=timeout,
        )

    def close(self) -> None:
        for channel in self._channels:
            channel.close()

    def __enter__(self) -> Self:
        return self

    def __exit__(
        self,
        kind: type[BaseException] | None,
        error: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        self.close()

    # --- policy (ledger process) ---------------------------------------------------------------

    def get_policy(self, revision: int = 0) -> common_pb2.Policy:
        """The current policy, or one revision when ``revision`` > 0."""
        return _invoke(
            self._policy.GetPolicy, policy_pb2.GetPolicyRequest(revision=revision)
        ).policy

    def put_policy(
        self,
        expected_revision: int,
        *,
        enabled: bool,
        window_seconds: int,
        per_run_ticket_limit: int = 0,
        pending_ticket_limit: int = 0,
        allow_unavailable_source_observations: bool = False,
        allow_pre_admission_recovery: bool = False,
        allow_readonly_observation_recovery: bool = False,
    ) -> common_pb2.Policy:
        """Write the next revision; every setting is replaced (limits of 0 keep the defaults of
        50 per run and 500 pending). ``expected_revision`` is the revision you read: a stale one
        is ``Aborted`` (POLICY_REVISION_STALE). Factory administrators only."""
        settings = common_pb2.PolicySettings(
            enabled=enabled,
            window_seconds=window_seconds,
            per_run_ticket_limit=per_run_ticket_limit,
            pending_ticket_limit=pending_ticket_limit,
            allow_unavailable_source_observations=allow_unavailable_source_observations,
            allow_pre_admission_recovery=allow_pre_admission_recovery,
            allow_readonly_observation_recovery=allow_readonly_observation_recovery,
        )
        request = policy_pb2.PutPolicyRequest(
            expected_revision=expected_revision, settings=settings
        )
        return _invoke(self._policy.PutPolicy, request).policy

    def policy_revisions(self) -> list[common_pb2.Policy]:
        """Every policy revision, newest first."""
        revisions: list[common_pb2.Policy] = []
        before = 0
        while True:
            page = _invoke(
                self._policy.ListPolicyRevisions,
                policy_pb2.ListPolicyRevisionsRequest(
                    page_size=_POLICY_PAGE, before_revision=before
                ),
            ).policies
            revisions.extend(page)
            if len(page) < _POLICY_PAGE or page[-1].revision <= 1:
                return revisions
            before = page[-1].revision

    # --- candidate and admission ---------------------------------------------------------------

    def invalid_read_continuity_candidate(
        self, run_id: str, version: int = 1
    ) -> candidate_pb2.InvalidReadContinuityCandidate:
        """The read-only candidate of a held run under continuity ``version`` (1 or 2); it
        creates no claim and writes nothing."""
        _check_identifiers(run_id=run_id)
        _check_version(version)
        request = candidate_pb2.GetInvalidReadContinuityCandidateRequest(
            run_id=run_id, version=version
        )
        return _invoke(self._candidate.GetInvalidReadContinuityCandidate, request).candidate

    def request_invalid_read_continuity(
        self,
        run_id: str,
        request_id: str,
        *,
        digests: Digests,
        version: int,
        valid_for_seconds: int,
        acknowledge_no_new_grant: bool,
        acknowledge_original_consumption: bool,
        acknowledge_renewed_same_attempt_lease: bool,
        acknowledge_unavailable_source_observations: bool | None = None,
    ) -> ContinuityResponse:
        """Submit the admission (version 1, or version 2 through the V2 route, which also needs
        ``acknowledge_unavailable_source_observations=True``). Keep ``request_id`` before
        calling; after a lost response read it back with :meth:`invalid_read_continuity`.
        An identical repeat returns the stored ticket with ``created`` false."""
        validate_continuity_request(
            run_id,
            request_id,
            version=version,
            valid_for_seconds=valid_for_seconds,
            acknowledge_no_new_grant=acknowledge_no_new_grant,
            acknowledge_original_consumption=acknowledge_original_consumption,
            acknowledge_renewed_same_attempt_lease=acknowledge_renewed_same_attempt_lease,
            acknowledge_unavailable_source_observations=acknowledge_unavailable_source_observations,
        )
        exact = _continuity_digests(digests)
        if version == 2:
            return _invoke(
                self._admission.RequestInvalidReadContinuityV2,
                admission_pb2.RequestInvalidReadContinuityV2Request(
                    run_id=run_id,
                    request_id=request_id,
                    digests=exact,
                    version=2,
                    valid_for_seconds=valid_for_seconds,
                    acknowledge_no_new_grant=True,
                    acknowledge_original_consumption=True,
                    acknowledge_renewed_same_attempt_lease=True,
                    acknowledge_unavailable_source_observations=True,
                ),
            )
        return _invoke(
            self._admission.RequestInvalidReadContinuity,
            admission_pb2.RequestInvalidReadContinuityRequest(
                run_id=run_id,
                request_id=request_id,
                digests=exact,
                version=1,
                valid_for_seconds=valid_for_seconds,
                acknowledge_no_new_grant=True,
                acknowledge_original_consumption=True,
                acknowledge_renewed_same_attempt_lease=True,
            ),
        )

    def invalid_read_continuity(self, run_id: str, request_id: str) -> ledger_pb2.AdmissionTicket:
        """The saved ticket of a request (either version); use it after a lost response."""
        _check_identifiers(run_id=run_id, request_id=request_id)
        request = admission_pb2.GetInvalidReadContinuityRequest(
            run_id=run_id, request_id=request_id
        )
        return _invoke(self._admission.GetInvalidReadContinuity, request).ticket

    # --- recovery workflows (thin wrappers) ----------------------------------------------------

    def invalid_read_recovery_candidate(
        self, run_id: str, request_id: str
    ) -> candidate_pb2.RecoveryCandidate:
        """The never-claimed failed-request recovery candidate (factory administrator)."""
        _check_identifiers(run_id=run_id, request_id=request_id)
        request = candidate_pb2.GetInvalidReadRecoveryCandidateRequest(
            run_id=run_id, request_id=request_id
        )
        return _invoke(self._candidate.GetInvalidReadRecoveryCandidate, request).candidate

    def request_invalid_read_recovery(
        self,
        run_id: str,
        request_id: str,
        recovery_id: str,
        *,
        candidate_digest: str | candidate_pb2.RecoveryCandidate,
        valid_for_seconds: int,
        acknowledge_never_claimed: bool,
        acknowledge_same_request_and_attempt: bool,
        acknowledge_budgets_charged: bool,
        acknowledge_same_attempt_lease: bool,
    ) -> admission_pb2.RequestInvalidReadRecoveryResponse:
        """Submit the never-claimed recovery once; keep ``recovery_id`` and read it back with
        :meth:`invalid_read_recovery` after a lost response."""
        digest = _check_recovery(
            run_id,
            request_id,
            recovery_id,
            candidate_digest,
            valid_for_seconds,
            {
                "acknowledge_never_claimed": acknowledge_never_claimed,
                "acknowledge_same_request_and_attempt": acknowledge_same_request_and_attempt,
                "acknowledge_budgets_charged": acknowledge_budgets_charged,
                "acknowledge_same_attempt_lease": acknowledge_same_attempt_lease,
            },
        )
        return _invoke(
            self._admission.RequestInvalidReadRecovery,
            admission_pb2.RequestInvalidReadRecoveryRequest(
                run_id=run_id,
                request_id=request_id,
                recovery_id=recovery_id,
                candidate_digest=digest,
                valid_for_seconds=valid_for_seconds,
                acknowledge_never_claimed=True,
                acknowledge_same_request_and_attempt=True,
                acknowledge_budgets_charged=True,
                acknowledge_same_attempt_lease=True,
            ),
        )

    def invalid_read_recovery(self, run_id: str, request_id: str) -> admission_pb2.RecoveryOutcome:
        """The saved never-claimed recovery of a request."""
        _check_identifiers(run_id=run_id, request_id=request_id)
        request = admission_pb2.GetInvalidReadRecoveryRequest(run_id=run_id, request_id=request_id)
        return _invoke(self._admission.GetInvalidReadRecovery, request).outcome

    def rejected_boundary_recovery_candidate(
        self,
        run_id: str,
        request_id: str,
        reviewed_rejection: candidate_pb2.ReviewedProviderRejectionV1,
    ) -> candidate_pb2.RecoveryCandidate:
        """The provider-refusal candidate computed from an administrator-reviewed rejection."""
        _check_identifiers(run_id=run_id, request_id=request_id)
        _check_reviewed_rejection(reviewed_rejection)
        request = candidate_pb2.GetRejectedBoundaryCandidateRequest(
            run_id=run_id, request_id=request_id, reviewed_rejection=reviewed_rejection
        )
        return _invoke(self._candidate.GetRejectedBoundaryCandidate, request).candidate

    def request_rejected_boundary_recovery(
        self,
        run_id: str,
        request_id: str,
        recovery_id: str,
        *,
        candidate_digest: str | candidate_pb2.RecoveryCandidate,
        reviewed_rejection: candidate_pb2.ReviewedProviderRejectionV1,
        valid_for_seconds: int,
        acknowledge_reviewed_provider_epoch: bool,
        acknowledge_no_response_or_tool_replay: bool,
        acknowledge_same_request_and_budgets: bool,
        acknowledge_finite_ownership_lease: bool,
    ) -> admission_pb2.RequestRejectedBoundaryRecoveryResponse:
        """Submit the reviewed provider-refusal recovery once (RejectedBoundaryRecoveryInputV1)."""
        digest = _check_recovery(
            run_id,
            request_id,
            recovery_id,
            candidate_digest,
            valid_for_seconds,
            {
                "acknowledge_reviewed_provider_epoch": acknowledge_reviewed_provider_epoch,
                "acknowledge_no_response_or_tool_replay": acknowledge_no_response_or_tool_replay,
                "acknowledge_same_request_and_budgets": acknowledge_same_request_and_budgets,
                "acknowledge_finite_ownership_lease": acknowledge_finite_ownership_lease,
            },
        )
        _check_reviewed_rejection(reviewed_rejection)
        return _invoke(
            self._admission.RequestRejectedBoundaryRecovery,
            admission_pb2.RequestRejectedBoundaryRecoveryRequest(
                run_id=run_id,
                request_id=request_id,
                recovery_id=recovery_id,
                candidate_digest=digest,
                reviewed_rejection=reviewed_rejection,
                valid_for_seconds=valid_for_seconds,
                acknowledge_reviewed_provider_epoch=True,
                acknowledge_no_response_or_tool_replay=True,
                acknowledge_same_request_and_budgets=True,
                acknowledge_finite_ownership_lease=True,
            ),
        )

    def rejected_boundary_recovery(
        self, run_id: str, request_id: str
    ) -> admission_pb2.RecoveryOutcome:
        """The saved provider-refusal recovery of a request."""
        _check_identifiers(run_id=run_id, request_id=request_id)
        request = admission_pb2.GetRejectedBoundaryRecoveryRequest(
            run_id=run_id, request_id=request_id
        )
        return _invoke(self._admission.GetRejectedBoundaryRecovery, request).outcome

    def readonly_observation_recovery_candidate(
        self, run_id: str, request_id: str
    ) -> candidate_pb2.RecoveryCandidate:
        """The read-only observation recovery candidate (factory administrator)."""
        _check_identifiers(run_id=run_id, request_id=request_id)
        request = candidate_pb2.GetReadonlyObservationCandidateRequest(
            run_id=run_id, request_id=request_id
        )
        return _invoke(self._candidate.GetReadonlyObservationCandidate, request).candidate

    def request_readonly_observation_recovery(
        self,
        run_id: str,
        request_id: str,
        recovery_id: str,
        *,
        candidate_digest: str | candidate_pb2.RecoveryCandidate,
        valid_for_seconds: int,
        acknowledge_unavailable_observation: bool,
        acknowledge_no_original_callback_replay: bool,
        acknowledge_same_request_attempt_and_budgets: bool,
        acknowledge_finite_ownership_lease: bool,
    ) -> admission_pb2.RequestReadonlyObservationRecoveryResponse:
        """Submit the read-only observation recovery once (ReadonlyObservationRecoveryInputV1)."""
        digest = _check_recovery(
            run_id,
            request_id,
            recovery_id,
            candidate_digest,
            valid_for_seconds,
            {
                "acknowledge_unavailable_observation": acknowledge_unavailable_observation,
                "acknowledge_no_original_callback_replay": (
                    acknowledge_no_original_callback_replay
                ),
                "acknowledge_same_request_attempt_and_budgets": (
                    acknowledge_same_request_attempt_and_budgets
                ),
                "acknowledge_finite_ownership_lease": acknowledge_finite_ownership_lease,
            },
        )
        return _invoke(
            self._admission.RequestReadonlyObservationRecovery,
            admission_pb2.RequestReadonlyObservationRecoveryRequest(
                run_id=run_id,
                request_id=request_id,
                recovery_id=recovery_id,
                candidate_digest=digest,
                valid_for_seconds=valid_for_seconds,
                acknowledge_unavailable_observation=True,
                acknowledge_no_original_callback_replay=True,
                acknowledge_same_request_attempt_and_budgets=True,
                acknowledge_finite_ownership_lease=True,
            ),
        )

    def readonly_observation_recovery(
        self, run_id: str, request_id: str
    ) -> admission_pb2.RecoveryOutcome:
        """The saved read-only observation recovery of a request."""
        _check_identifiers(run_id=run_id, request_id=request_id)
        request = admission_pb2.GetReadonlyObservationRecoveryRequest(
            run_id=run_id, request_id=request_id
        )
        return _invoke(self._admission.GetReadonlyObservationRecovery, request).outcome

    # --- journal and commands (ledger process) -------------------------------------------------

    def journal(self, run_id: str, from_sequence: int = 1) -> list[common_pb2.JournalEntry]:
        """Every journal entry from ``from_sequence`` on, in sequence order (all pages)."""
        _check_identifiers(run_id=run_id)
        entries: list[common_pb2.JournalEntry] = []
        sequence = from_sequence
        while True:
            page = _invoke(
                self._ledger.ReadJournal,
                ledger_pb2.ReadJournalRequest(
                    run_id=run_id, from_sequence=sequence, page_size=_JOURNAL_PAGE
                ),
            )
            entries.extend(page.entries)
            if not page.entries or page.next_sequence <= sequence:
                return entries
            sequence = page.next_sequence

    def verify_journal(self, run_id: str) -> ledger_pb2.VerifyJournalResponse:
        """The ledger's recomputation of the run's whole hash chain."""
        _check_identifiers(run_id=run_id)
        return _invoke(self._ledger.VerifyJournal, ledger_pb2.VerifyJournalRequest(run_id=run_id))

    def command_usage(self, run_id: str) -> execution_pb2.CommandUsage:
        """Commands charged to the run (from retained native rows) and its original limit."""
        _check_identifiers(run_id=run_id)
        request = execution_pb2.GetCommandUsageRequest(run_id=run_id)
        return _invoke(self._execution.GetCommandUsage, request).usage
