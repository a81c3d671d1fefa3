"""The LedgerService servicer of the ledger process (protobuf ↔ domain, nothing else) and
``bindings``: the four services the process hosts with their role tables. The other servicers live
beside it (``policy_servicer``, ``execution_servicer``, ``reconciliation_servicer``)."""

from __future__ import annotations

from collections.abc import Iterator
from functools import partial

import grpc

from forge.continuity.v1 import (
    audit_pb2,
    common_pb2,
    inspection_pb2,
    ledger_pb2,
    ledger_pb2_grpc,
)
from services.ledger.audit_proto import (
    head_feed_to_proto,
    signed_head_to_proto,
    signing_keys_to_proto,
)
from services.ledger.domain.execution import ExecutionRequestRecord
from services.ledger.domain.journal import EntryKind
from services.ledger.domain.runs import Run, RunSpec
from services.ledger.domain.tickets import StoredTicket
from services.ledger.execution_servicer import ExecutionServicer
from services.ledger.inspection_proto import inspection_to_proto
from services.ledger.policy_servicer import PolicyServicer
from services.ledger.proto_convert import (
    add_entries,
    entry_to_proto,
    execution_request_to_proto,
    lease_bounds_to_proto,
    policy_to_proto,
)
from services.ledger.reconciliation_servicer import ReconciliationServicer
from services.ledger.recovery_proto import recovery_input, recovery_to_proto, workflow_name
from services.ledger.repository.listing import RunRow
from services.ledger.service import Ledger
from services.ledger.transactions.admission import Admission
from services.ledger.transactions.snapshot import SnapshotBlob, SnapshotHeader
from shared.continuity.journal_chain import Verification
from shared.continuity.timeutil import timestamp_field, to_text, to_timestamp
from shared.contract.commit_admission_proto import commit_admission_from_proto
from shared.contract.method_facts import service_binding
from shared.contract.modules import SERVICES
from shared.contract.terms import enum_number, enum_short_name
from shared.runtime.auth import Role, current_principal
from shared.runtime.errors import FieldViolation, InvalidArgument
from shared.runtime.server import ServiceBinding


def kind_from_proto(value: int) -> EntryKind:
    try:
        return EntryKind(enum_short_name(common_pb2.JournalEntryKind, value).lower())
    except ValueError:
        raise InvalidArgument(
            "JOURNAL_ENTRY_KIND_UNKNOWN",
            f"unknown journal entry kind {value}",
            metadata={"kind": str(value)},
            field_violations=[FieldViolation("kind", "must be a known JournalEntryKind")],
        ) from None


def head_to_proto(head: tuple[int, str]) -> common_pb2.JournalHead:
    return common_pb2.JournalHead(sequence=head[0], hash=head[1])


def verification_to_proto(result: Verification) -> ledger_pb2.VerifyJournalResponse:
    return ledger_pb2.VerifyJournalResponse(
        valid=result.valid,
        first_broken_sequence=result.first_broken_sequence,
        entries_checked=result.entries_checked,
        head=head_to_proto((result.head_sequence, result.head_hash)),
        problem=result.problem,
    )


def run_to_proto(run: Run) -> ledger_pb2.Run:
    spec = run.spec
    return ledger_pb2.Run(
        run_id=spec.run_id,
        task_id=spec.task_id,
        attempt_id=spec.attempt_id,
        source_revision=spec.source_revision,
        configuration_digest=spec.configuration_digest,
        provider_timeout_seconds=spec.provider_timeout_seconds,
        active_deadline=to_timestamp(spec.active_deadline),
        command_limit=spec.command_limit,
        time_budget_protocol=spec.time_budget_protocol,
        source_profile=spec.source_profile,
        created_by=run.created_by,
        created_at=to_timestamp(run.created_at),
        run_digest=run.run_digest,
        completed_rounds=run.completed_rounds,
    )


def run_summary_to_proto(row: RunRow) -> ledger_pb2.RunSummary:
    return ledger_pb2.RunSummary(
        run=run_to_proto(row.run),
        continuity_state=enum_number(ledger_pb2.RunContinuityState, row.continuity_state.name),
        updated_at=to_timestamp(row.updated_at),
        current_execution_request_id=row.current_execution_request_id,
    )


def ticket_to_proto(
    ticket: StoredTicket,
    record: ExecutionRequestRecord,
    current: ExecutionRequestRecord | None = None,
) -> ledger_pb2.AdmissionTicket:
    """The saved ticket, field by field, with its execution request as it is now and the current
    member of its request chain (``record`` itself unless a reconciliation queued a retry)."""
    return ledger_pb2.AdmissionTicket(
        run_id=ticket.run_id,
        request_id=ticket.request_id,
        operator_identity=ticket.operator_identity,
        execution_request=execution_request_to_proto(record),
        settlement_sequence=ticket.settlement_sequence,
        claim_sequence=ticket.claim_sequence,
        digests=common_pb2.ContinuityDigests(
            candidate_digest=ticket.digests["candidate_digest"],
            run_digest=ticket.digests["run_digest"],
            journal_digest=ticket.digests["journal_digest"],
            policy_digest=ticket.digests["policy_digest"],
        ),
        policy_revision=ticket.policy_revision,
        version=ticket.version,
        derived_checkpoint_digest=ticket.derived_checkpoint_digest,
        request_content_digest=ticket.request_content_digest,
        created_at=to_timestamp(ticket.created_at),
        current_execution_request=execution_request_to_proto(current or record),
        lease_bounds=lease_bounds_to_proto(ticket.lease_bounds),
    )


def admission_to_proto(admission: Admission) -> ledger_pb2.AdmissionTicket:
    return ticket_to_proto(admission.ticket, admission.execution_request, admission.current)


def _snapshot_header(header: SnapshotHeader) -> ledger_pb2.RunSnapshotHeader:
    return ledger_pb2.RunSnapshotHeader(
        run=run_to_proto(header.run),
        head=head_to_proto(header.head),
        policy=policy_to_proto(header.policy),
        execution_requests=[execution_request_to_proto(r) for r in header.execution_requests],
    )


def _snapshot_blob(blob: SnapshotBlob) -> ledger_pb2.RunSnapshotBlob:
    return ledger_pb2.RunSnapshotBlob(
        digest=blob.digest, content=blob.content, media_type=blob.media_type
    )


class LedgerServicer(ledger_pb2_grpc.LedgerServiceServicer):
    def __init__(self, ledger: Ledger) -> None:
        self._ledger = ledger

    def CreateRun(
        self, request: ledger_pb2.CreateRunRequest, context: grpc.ServicerContext
    ) -> ledger_pb2.CreateRunResponse:
        spec = RunSpec(
            run_id=request.run_id,
            task_id=request.task_id,
            attempt_id=request.attempt_id,
            source_revision=request.source_revision,
            configuration_digest=request.configuration_digest,
            provider_timeout_seconds=request.provider_timeout_seconds,
            active_deadline=(
                to_text(timestamp_field("active_deadline", request.active_deadline))
                if request.HasField("active_deadline")
                else None
            ),
            command_limit=request.command_limit,
            time_budget_protocol=request.time_budget_protocol,
            source_profile=request.source_profile,
        )
        run, created = self._ledger.create_run(spec, current_principal().identity)
        return ledger_pb2.CreateRunResponse(run=run_to_proto(run), created=created)

    def GetRun(
        self, request: ledger_pb2.GetRunRequest, context: grpc.ServicerContext
    ) -> ledger_pb2.GetRunResponse:
        reading = self._ledger.get_run(request.run_id)
        return ledger_pb2.GetRunResponse(
            run=run_to_proto(reading.run),
            head=head_to_proto(reading.head),
            grantable_lease_seconds=reading.grantable_lease_seconds,
        )

    def ListRuns(
        self, request: ledger_pb2.ListRunsRequest, context: grpc.ServicerContext
    ) -> ledger_pb2.ListRunsResponse:
        page = self._ledger.list_runs(request.page_size, request.page_token, request.filter)
        return ledger_pb2.ListRunsResponse(
            runs=[run_summary_to_proto(row) for row in page.runs],
            next_page_token=page.next_page_token,
        )

    def AppendJournalEntry(
        self, request: ledger_pb2.AppendJournalEntryRequest, context: grpc.ServicerContext
    ) -> ledger_pb2.AppendJournalEntryResponse:
        principal = current_principal()
        entry = self._ledger.append(
            request.run_id,
            request.expected_head_hash,
            kind_from_proto(request.kind),
            request.payload_json,
            principal.identity,
            # a worker's appends are fenced by the lease it holds; a platform writer's only when
            # they are a worker record naming a continuity request (then only the holder may)
            worker=Role.PLATFORM_WRITER not in principal.roles,
        )
        return ledger_pb2.AppendJournalEntryResponse(entry=entry_to_proto(entry))

    def ReadJournal(
        self, request: ledger_pb2.ReadJournalRequest, context: grpc.ServicerContext
    ) -> ledger_pb2.ReadJournalResponse:
        page = self._ledger.read_journal(request.run_id, request.from_sequence, request.page_size)
        response = ledger_pb2.ReadJournalResponse(
            head=head_to_proto(page.head), next_sequence=page.next_sequence
        )
        add_entries(response.entries, page.entries)
        return response

    def StreamJournal(
        self, request: ledger_pb2.StreamJournalRequest, context: grpc.ServicerContext
    ) -> Iterator[ledger_pb2.StreamJournalResponse]:
        context.add_callback(self._ledger.wake_followers)  # a waiting follower stops at once
        batched = request.max_entries_per_message != 0
        for batch in self._ledger.stream_journal(
            request.run_id,
            request.from_sequence,
            caller=current_principal().identity,
            follow=request.follow,
            is_active=context.is_active,
            batch_entries=request.max_entries_per_message,
        ):
            if batched:
                response = ledger_pb2.StreamJournalResponse()
                add_entries(response.entries, batch)
                yield response
            else:
                for entry in batch:
                    yield ledger_pb2.StreamJournalResponse(entry=entry_to_proto(entry))

    def ReadRunSnapshot(
        self, request: ledger_pb2.ReadRunSnapshotRequest, context: grpc.ServicerContext
    ) -> Iterator[ledger_pb2.ReadRunSnapshotResponse]:
        for part in self._ledger.read_snapshot(
            request.run_id,
            caller=current_principal().identity,
            closure_blobs=request.include_closure_blobs,
        ):
            if isinstance(part, SnapshotHeader):
                yield ledger_pb2.ReadRunSnapshotResponse(header=_snapshot_header(part))
            elif isinstance(part, list):
                response = ledger_pb2.ReadRunSnapshotResponse()
                response.entries.SetInParent()  # the part is entries even if a batch were empty
                add_entries(response.entries.entries, part)
                yield response
            elif isinstance(part, SnapshotBlob):
                yield ledger_pb2.ReadRunSnapshotResponse(blob=_snapshot_blob(part))
            else:
                yield ledger_pb2.ReadRunSnapshotResponse(verification=verification_to_proto(part))

    def GetRunSnapshot(
        self, request: ledger_pb2.GetRunSnapshotRequest, context: grpc.ServicerContext
    ) -> ledger_pb2.GetRunSnapshotResponse:
        known = request.known_head if request.HasField("known_head") else None
        whole = self._ledger.read_whole_snapshot(
            request.run_id,
            closure_blobs=request.include_closure_blobs,
            known_head=(known.sequence, known.hash) if known is not None else None,
        )
        header = _snapshot_header(whole.header)
        if whole.verification is None:
            return ledger_pb2.GetRunSnapshotResponse(header=header, journal_unchanged=True)
        response = ledger_pb2.GetRunSnapshotResponse(
            header=header,
            blobs=[_snapshot_blob(blob) for blob in whole.blobs],
            verification=verification_to_proto(whole.verification),
        )
        add_entries(response.entries, whole.entries)
        return response

    def VerifyJournal(
        self, request: ledger_pb2.VerifyJournalRequest, context: grpc.ServicerContext
    ) -> ledger_pb2.VerifyJournalResponse:
        return verification_to_proto(self._ledger.verify(request.run_id))

    def InspectJournal(
        self, request: inspection_pb2.InspectJournalRequest, context: grpc.ServicerContext
    ) -> inspection_pb2.InspectJournalResponse:
        return inspection_to_proto(self._ledger.inspect_journal(request.run_id))

    def PutBlob(
        self, request: ledger_pb2.PutBlobRequest, context: grpc.ServicerContext
    ) -> ledger_pb2.PutBlobResponse:
        digest, created = self._ledger.put_blob(
            request.content, request.media_type, request.expected_digest
        )
        return ledger_pb2.PutBlobResponse(digest=digest, size=len(request.content), created=created)

    def GetBlob(
        self, request: ledger_pb2.GetBlobRequest, context: grpc.ServicerContext
    ) -> ledger_pb2.GetBlobResponse:
        content, media_type = self._ledger.get_blob(request.digest)
        return ledger_pb2.GetBlobResponse(
            content=content, media_type=media_type, digest=request.digest
        )

    def CommitAdmission(
        self, request: ledger_pb2.CommitAdmissionRequest, context: grpc.ServicerContext
    ) -> ledger_pb2.CommitAdmissionResponse:
        admission = commit_admission_from_proto(request)
        committed = self._ledger.commit_admission(admission)
        return ledger_pb2.CommitAdmissionResponse(
            ticket=admission_to_proto(committed), created=committed.created
        )

    def GetAdmission(
        self, request: ledger_pb2.GetAdmissionRequest, context: grpc.ServicerContext
    ) -> ledger_pb2.GetAdmissionResponse:
        found = self._ledger.get_admission(request.run_id, request.request_id)
        return ledger_pb2.GetAdmissionResponse(ticket=admission_to_proto(found))

    def CommitRecovery(
        self, request: ledger_pb2.CommitRecoveryRequest, context: grpc.ServicerContext
    ) -> ledger_pb2.CommitRecoveryResponse:
        committed = self._ledger.commit_recovery(recovery_input(request))
        return ledger_pb2.CommitRecoveryResponse(
            recovery=recovery_to_proto(committed, execution_request_to_proto),
            created=committed.created,
        )

    def GetRecovery(
        self, request: ledger_pb2.GetRecoveryRequest, context: grpc.ServicerContext
    ) -> ledger_pb2.GetRecoveryResponse:
        found = self._ledger.get_recovery(
            request.run_id, request.request_id, workflow_name(request.workflow)
        )
        return ledger_pb2.GetRecoveryResponse(
            recovery=recovery_to_proto(found, execution_request_to_proto)
        )

    def GetSigningKeys(
        self, request: audit_pb2.GetSigningKeysRequest, context: grpc.ServicerContext
    ) -> audit_pb2.GetSigningKeysResponse:
        return signing_keys_to_proto(self._ledger.signing_keys())

    def ListSignedHeads(
        self, request: audit_pb2.ListSignedHeadsRequest, context: grpc.ServicerContext
    ) -> audit_pb2.ListSignedHeadsResponse:
        page = self._ledger.read_signed_heads(
            request.run_id, request.from_sequence, request.page_size
        )
        return audit_pb2.ListSignedHeadsResponse(
            signed_heads=[signed_head_to_proto(head) for head in page.signed_heads],
            next_sequence=page.next_sequence,
        )

    def ListHeads(
        self, request: audit_pb2.ListHeadsRequest, context: grpc.ServicerContext
    ) -> audit_pb2.ListHeadsResponse:
        return head_feed_to_proto(self._ledger.head_feed(request.cursor, request.page_size))


def bindings(ledger: Ledger) -> list[ServiceBinding]:
    """The four services the ledger process hosts, each RPC with the roles its declaration in
    the contract allows."""
    ledger_servicer = LedgerServicer(ledger)
    policy_servicer = PolicyServicer(ledger)
    execution_servicer = ExecutionServicer(ledger)
    reconciliation_servicer = ReconciliationServicer(ledger, execution_request_to_proto)
    return [
        service_binding(SERVICES["LedgerService"], partial(getattr, ledger_servicer)),
        service_binding(SERVICES["PolicyService"], partial(getattr, policy_servicer)),
        service_binding(SERVICES["ExecutionService"], partial(getattr, execution_servicer)),
        service_binding(
            SERVICES["ReconciliationService"], partial(getattr, reconciliation_servicer)
        ),
    ]
