"""Invalid-read continuity (versions 1 and 2): the candidate, the submission, the read-back."""

from __future__ import annotations

from forge.continuity.v1 import admission_pb2, candidate_pb2, ledger_pb2
from services.client._base import ClientBase, invoke
from services.client._validation import (
    Digests,
    check_identifiers,
    check_version,
    continuity_digests,
    validate_continuity_request,
)
from shared.contract.terms import VERSIONS

ContinuityResponse = (
    admission_pb2.RequestInvalidReadContinuityResponse
    | admission_pb2.RequestInvalidReadContinuityV2Response
)


class InvalidReadCalls(ClientBase):
    """The operator flow of one held run: read the candidate, submit it, read the ticket back."""

    def invalid_read_continuity_candidate(
        self, run_id: str, version: int = 1
    ) -> candidate_pb2.InvalidReadContinuityCandidate:
        """The read-only candidate of a held run under continuity ``version`` (1 or 2); it
        creates no claim and writes nothing."""
        check_identifiers(run_id=run_id)
        check_version(version)
        request = candidate_pb2.GetInvalidReadContinuityCandidateRequest(
            run_id=run_id, version=version
        )
        return invoke(self._candidate.GetInvalidReadContinuityCandidate, request).candidate

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
        exact = continuity_digests(digests)
        # Validation above refused any acknowledgement that is not exactly True.
        acknowledged = dict.fromkeys(VERSIONS[version].acknowledgements, True)
        if version == 2:
            return invoke(
                self._admission.RequestInvalidReadContinuityV2,
                admission_pb2.RequestInvalidReadContinuityV2Request(
                    run_id=run_id,
                    request_id=request_id,
                    digests=exact,
                    version=2,
                    valid_for_seconds=valid_for_seconds,
                    **acknowledged,
                ),
            )
        return invoke(
            self._admission.RequestInvalidReadContinuity,
            admission_pb2.RequestInvalidReadContinuityRequest(
                run_id=run_id,
                request_id=request_id,
                digests=exact,
                version=1,
                valid_for_seconds=valid_for_seconds,
                **acknowledged,
            ),
        )

    def invalid_read_continuity(self, run_id: str, request_id: str) -> ledger_pb2.AdmissionTicket:
        """The saved ticket of a request (either version); use it after a lost response."""
        check_identifiers(run_id=run_id, request_id=request_id)
        request = admission_pb2.GetInvalidReadContinuityRequest(
            run_id=run_id, request_id=request_id
        )
        return invoke(self._admission.GetInvalidReadContinuity, request).ticket
