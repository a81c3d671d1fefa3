"""The PolicyService servicer of the ledger process: protobuf ↔ domain, nothing else."""

from __future__ import annotations

from dataclasses import fields

import grpc

from forge.continuity.v1 import policy_pb2, policy_pb2_grpc
from services.ledger.domain.policy import PolicySettings
from services.ledger.proto_convert import policy_to_proto
from services.ledger.service import Ledger
from shared.runtime.auth import current_principal
from shared.runtime.errors import field_required


class PolicyServicer(policy_pb2_grpc.PolicyServiceServicer):
    def __init__(self, ledger: Ledger) -> None:
        self._ledger = ledger

    def GetPolicy(
        self, request: policy_pb2.GetPolicyRequest, context: grpc.ServicerContext
    ) -> policy_pb2.GetPolicyResponse:
        return policy_pb2.GetPolicyResponse(
            policy=policy_to_proto(self._ledger.get_policy(request.revision))
        )

    def PutPolicy(
        self, request: policy_pb2.PutPolicyRequest, context: grpc.ServicerContext
    ) -> policy_pb2.PutPolicyResponse:
        if not request.HasField("settings"):
            raise field_required("settings")
        given = request.settings
        settings = PolicySettings(
            **{f.name: getattr(given, f.name) for f in fields(PolicySettings)}
        )
        stored = self._ledger.put_policy(
            request.expected_revision, settings, current_principal().identity
        )
        return policy_pb2.PutPolicyResponse(policy=policy_to_proto(stored))

    def ListPolicyRevisions(
        self, request: policy_pb2.ListPolicyRevisionsRequest, context: grpc.ServicerContext
    ) -> policy_pb2.ListPolicyRevisionsResponse:
        revisions = self._ledger.list_policies(request.before_revision, request.page_size)
        return policy_pb2.ListPolicyRevisionsResponse(
            policies=[policy_to_proto(p) for p in revisions]
        )
