"""The recovery-workflow registry agrees with the contract: each descriptor's number is its
``RecoveryWorkflow`` value, its acknowledgements are its submission's, its RPCs are declared, and
the names it requires of the policy are settings of the policy."""

from __future__ import annotations

import pytest

from forge.continuity.v1 import admission_pb2, candidate_pb2, common_pb2
from shared.continuity.recovery import WORKFLOWS, Workflow, by_number, workflow
from shared.contract.terms import acknowledgement_fields
from shared.runtime.errors import InvalidArgument

ADMISSION = admission_pb2.DESCRIPTOR.services_by_name["AdmissionService"]
CANDIDATE = candidate_pb2.DESCRIPTOR.services_by_name["CandidateService"]


@pytest.mark.parametrize("found", list(WORKFLOWS.values()), ids=lambda w: w.name)
def test_each_descriptor_is_its_contract(found: Workflow) -> None:
    assert common_pb2.RecoveryWorkflow.Name(found.number) == (  # type: ignore[arg-type]
        "RECOVERY_WORKFLOW_" + found.name.upper()
    )
    submit = ADMISSION.methods_by_name[found.rpcs.submit.name]
    assert acknowledgement_fields(submit.input_type) == found.acknowledgements
    assert found.rpcs.read.name in ADMISSION.methods_by_name
    assert found.rpcs.candidate.name in CANDIDATE.methods_by_name
    if found.policy_switch is not None:
        assert found.policy_switch in common_pb2.PolicySettings.DESCRIPTOR.fields_by_name


def test_every_contract_workflow_is_registered() -> None:
    numbers = [v.number for v in common_pb2.RecoveryWorkflow.DESCRIPTOR.values if v.number]
    assert sorted(w.number for w in WORKFLOWS.values()) == numbers


@pytest.mark.parametrize("lookup", [lambda: workflow("unknown"), lambda: by_number(0)])
def test_an_unknown_workflow_is_an_invalid_argument(lookup: object) -> None:
    with pytest.raises(InvalidArgument) as refused:
        lookup()  # type: ignore[operator]
    assert refused.value.reason == "FIELD_INVALID"
