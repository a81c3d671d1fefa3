"""gRPC servicer of the candidate service: translates protobuf ↔ domain, nothing else."""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime
from typing import Any

import grpc
from google.protobuf.message import Message

from forge.continuity.v1 import candidate_pb2, common_pb2
from services.candidate.domain import (
    Candidate,
    CandidateEvaluator,
    CandidateSources,
    EvaluationMemory,
    Reconstruction,
)
from services.candidate.domain.recovery import Caller, recovery_candidate
from services.candidate.hold_proto import add_holds
from services.candidate.recovery_proto import write_recovery_candidate
from shared.continuity.recovery import WORKFLOWS, Workflow
from shared.continuity.timeutil import utc_now
from shared.contract.handoff_proto import handoff_to_proto
from shared.contract.method_facts import service_binding
from shared.contract.recovery_proto import declared_inputs, inputs_from_proto, message_classes
from shared.contract.terms import DEFAULT_VERSION
from shared.runtime.auth import Role, current_principal
from shared.runtime.errors import Unavailable, field_required
from shared.runtime.server import ServiceBinding

SERVICE = candidate_pb2.DESCRIPTOR.services_by_name["CandidateService"]


def write_candidate(
    into: candidate_pb2.InvalidReadContinuityCandidate, candidate: Candidate
) -> None:
    """The candidate written into the response's own message (a long journal's candidate can
    carry a hold per entry; building it apart and handing it over would copy every one)."""
    into.MergeFrom(_candidate_without_holds(candidate))
    add_holds(into.holds, candidate.holds)


def _candidate_without_holds(candidate: Candidate) -> candidate_pb2.InvalidReadContinuityCandidate:
    proof, digests = candidate.proof, candidate.digests
    return candidate_pb2.InvalidReadContinuityCandidate(
        run_id=candidate.run_id,
        attempt_id=candidate.attempt_id,
        eligible=candidate.eligible,
        version=candidate.version,
        digests=common_pb2.ContinuityDigests(
            candidate_digest=digests.candidate_digest,
            run_digest=digests.run_digest,
            journal_digest=digests.journal_digest,
            policy_digest=digests.policy_digest,
        ),
        proof=candidate_pb2.CandidateProof(
            checkpoint_digest=proof.checkpoint_digest,
            consumed_response_digest=proof.consumed_response_digest,
            call_id=proof.call_id,
            query_json=proof.query_json,
            accepted_by_advertised_schema=proof.accepted_by_advertised_schema,
            rejected_by_pinned_validator=proof.rejected_by_pinned_validator,
            validator_error=proof.validator_error,
            runtime_identity=proof.runtime_identity,
            validator_identity=proof.validator_identity,
            derived_checkpoint_digest=proof.derived_checkpoint_digest,
            witness_digest=proof.witness_digest,
            consume_sequence=proof.consume_sequence,
        ),
        qualification=candidate_pb2.Qualification(
            source_profile=candidate.qualification.source_profile,
            qualified=candidate.qualification.qualified,
        ),
        policy_revision=candidate.policy_revision,
        source_digest=candidate.source_digest,
        custody_digest=candidate.custody_digest,
        handoff=handoff_to_proto(candidate.handoff),
        journal_head=common_pb2.JournalHead(
            sequence=candidate.journal_head.sequence, hash=candidate.journal_head.hash
        ),
    )


def admission_inputs_to_proto(
    reconstruction: Reconstruction,
) -> candidate_pb2.CommitInputs:
    return candidate_pb2.CommitInputs(
        derived_checkpoint=reconstruction.derived_checkpoint,
        derived_checkpoint_digest=reconstruction.derived_checkpoint_digest,
        witness_digest=reconstruction.witness_digest,
    )


class CandidateServicer:
    """The candidate RPCs' behaviour; served by :func:`_behaviour_of`."""

    def __init__(
        self,
        evaluator: CandidateEvaluator | None,
        sources: CandidateSources | None = None,
        clock: Callable[[], datetime] = utc_now,
    ) -> None:
        self._evaluator = evaluator
        self._sources = sources
        self._clock = clock

    def GetInvalidReadContinuityCandidate(
        self,
        request: candidate_pb2.GetInvalidReadContinuityCandidateRequest,
        context: grpc.ServicerContext,
    ) -> candidate_pb2.GetInvalidReadContinuityCandidateResponse:
        if not request.run_id:
            raise field_required("run_id")
        if self._evaluator is None:
            raise Unavailable(
                "CANDIDATE_SOURCES_UNCONFIGURED",
                "this candidate server has no ledger or reconstruction connection",
            )
        # Unset (0) selects the default continuity version.
        version = request.version or DEFAULT_VERSION
        if not request.include_admission_inputs:
            candidate = self._evaluator.invalid_read_continuity(request.run_id, version)
            response = candidate_pb2.GetInvalidReadContinuityCandidateResponse()
            write_candidate(response.candidate, candidate)
            return response
        candidate, inputs = self._evaluator.invalid_read_continuity_for_admission(
            request.run_id, version
        )
        response = candidate_pb2.GetInvalidReadContinuityCandidateResponse(
            admission_inputs=admission_inputs_to_proto(inputs) if inputs is not None else None,
        )
        write_candidate(response.candidate, candidate)
        return response

    def _require_sources(self) -> CandidateSources:
        if self._sources is None:
            raise Unavailable(
                "CANDIDATE_SOURCES_UNCONFIGURED",
                "this candidate server has no ledger or reconstruction connection",
            )
        return self._sources

    def recovery(self, workflow: Workflow, request: Any) -> Message:
        """The candidate of one registered recovery workflow, answered in its own response."""
        for name in ("run_id", "request_id"):
            if not getattr(request, name):
                raise field_required(name)
        for name in declared_inputs(request.DESCRIPTOR, workflow):
            if not request.HasField(name):
                raise field_required(name)
        candidate = recovery_candidate(
            workflow.name,
            self._require_sources(),
            request.run_id,
            request.request_id,
            _caller(),
            inputs_from_proto(request, present_only=True),
            clock=self._clock,
        )
        _, response_class = message_classes(SERVICE, workflow.rpcs.candidate)
        response: Message = response_class()
        write_recovery_candidate(
            response.candidate,  # type: ignore[attr-defined]
            candidate,
            include_commit_inputs=request.include_commit_inputs,
        )
        return response


def _behaviour_of(servicer: CandidateServicer) -> Callable[[str], Any]:
    """The invalid-read candidate, and each registered recovery workflow's candidate RPC: the
    workflow, not a hand-written method, answers it."""
    by_rpc = {workflow.rpcs.candidate.name: workflow for workflow in WORKFLOWS.values()}

    def behaviour_of(name: str) -> Any:
        workflow = by_rpc.get(name)
        if workflow is None:
            return getattr(servicer, name)
        return lambda request, context: servicer.recovery(workflow, request)

    return behaviour_of


def _caller() -> Caller:
    """Who asks: an administrator, or admission recomputing under its service identity."""
    principal = current_principal()
    return Caller(
        identity=principal.identity,
        roles=frozenset(role.value for role in principal.roles),
        recomputing=principal.roles == frozenset({Role.ADMISSION_SERVICE}),
    )


def bindings(
    sources: CandidateSources | None = None,
    *,
    clock: Callable[[], datetime] = utc_now,
    evaluations: EvaluationMemory | None = None,
) -> list[ServiceBinding]:
    """The candidate service over ``sources`` (None: every evaluation is UNAVAILABLE), with the
    eligible candidates operators read remembered for their admissions in ``evaluations``
    (ADR 0066; None: a memory of its own)."""
    evaluator = (
        CandidateEvaluator(sources, clock=clock, evaluations=evaluations)
        if sources is not None
        else None
    )
    servicer = CandidateServicer(evaluator, sources, clock)
    registered = {
        workflow.rpcs.candidate.name: message_classes(SERVICE, workflow.rpcs.candidate)
        for workflow in WORKFLOWS.values()
    }
    return [service_binding(SERVICE, _behaviour_of(servicer), registered)]
