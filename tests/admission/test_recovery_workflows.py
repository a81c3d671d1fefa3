"""ListRecoveryWorkflows describes exactly the workflows the registry holds when the service is
built (a test-only fourth one included), from the registry and the contract's http rules."""

from __future__ import annotations

from forge.continuity.v1 import admission_pb2, common_pb2
from services.admission.servicer import Call, routes
from services.gateway.routes import contract_routes
from shared.continuity.recovery import WORKFLOWS, registered
from shared.runtime.auth import Principal, Role
from tests.recovery.test_registry_fourth_workflow import TEST_ONLY
from tests.support import admission_downstream

READER = Principal("rita", frozenset({Role.READER}))


def _table() -> dict[str, object]:
    return dict(routes(admission_downstream("127.0.0.1:1", "127.0.0.1:1")))


def _answer(table: dict[str, object], name: str, request: object) -> object:
    return table[name].answer(request, Call(name, READER))  # type: ignore[attr-defined]


def _described(table: dict[str, object]) -> admission_pb2.ListRecoveryWorkflowsResponse:
    reply = _answer(table, "ListRecoveryWorkflows", admission_pb2.ListRecoveryWorkflowsRequest())
    assert isinstance(reply, admission_pb2.ListRecoveryWorkflowsResponse)
    return reply


def test_the_answer_is_the_registry_in_its_order() -> None:
    reply = _described(_table())
    assert [w.name for w in reply.workflows] == list(WORKFLOWS)
    assert [w.workflow for w in reply.workflows] == [
        common_pb2.RECOVERY_WORKFLOW_NEVER_CLAIMED,
        common_pb2.RECOVERY_WORKFLOW_REJECTED_BOUNDARY,
        common_pb2.RECOVERY_WORKFLOW_READONLY_OBSERVATION,
    ]
    for described in reply.workflows:
        registered_as = WORKFLOWS[described.name]
        assert described.action == registered_as.action
        assert tuple(a.field for a in described.acknowledgements) == (
            registered_as.acknowledgements
        )
        assert all(a.text.endswith(".") for a in described.acknowledgements)
        assert described.title and described.review and described.applies.situation
        assert described.applies.failed_after_claim == registered_as.applies.claimed
        assert tuple(described.applies.follows) == registered_as.applies.follows
        assert {common_pb2.Role.Name(r) for r in described.roles} == {
            f"ROLE_{role.upper()}" for role in registered_as.roles
        }
        assert described.policy_switch == (registered_as.policy_switch or "")
        if described.policy_switch:  # a switch the contract's policy carries, by that name
            assert described.policy_switch in common_pb2.PolicySettings.DESCRIPTOR.fields_by_name


def test_each_route_is_the_gateways_route_of_the_rpc() -> None:
    reply = _described(_table())
    served = {
        route.grpc_path: (route.http_method, route.template.text, route.body)
        for route in contract_routes()
    }
    assert (
        reply.request_path == "/api/v1/runs/{run_id}/invalid-read-continuity/requests/{request_id}"
    )
    for described in reply.workflows:
        for call in (described.candidate, described.submit, described.read):
            assert served[call.rpc] == (call.http_method, reply.request_path + call.path, call.body)
    never_claimed, rejected, observation = reply.workflows
    assert (never_claimed.submit.path, never_claimed.read.path) == (
        "/recoveries/{recovery_id}",
        "/recovery",
    )
    assert (observation.candidate.http_method, observation.candidate.path) == (
        "GET",
        "/readonly-observation-candidate",
    )
    # the rejected boundary's candidate is computed from the reviewed rejection it is sent
    assert (rejected.candidate.http_method, rejected.candidate.body) == (
        "POST",
        "reviewed_rejection",
    )


def test_inputs_are_the_operators_typed_inputs_of_each_submission() -> None:
    reply = _described(_table())
    inputs = {w.name: [(i.field, i.kind, i.candidate) for i in w.inputs] for w in reply.workflows}
    assert inputs == {
        "never_claimed": [],
        "rejected_boundary": [
            (
                "reviewed_rejection",
                admission_pb2.RECOVERY_INPUT_KIND_REVIEWED_PROVIDER_REJECTION,
                True,
            ),
            (
                "corrective_provider",
                admission_pb2.RECOVERY_INPUT_KIND_CORRECTIVE_PROVIDER_CONFIGURATION,
                False,
            ),
        ],
        # its derived checkpoint comes from the candidate, never from the operator
        "readonly_observation": [],
    }
    [reviewed, corrective] = reply.workflows[1].inputs
    assert reviewed.message_type == "forge.continuity.v1.ReviewedProviderRejectionV1"
    assert corrective.message_type == "forge.continuity.v1.CorrectiveProviderConfigurationV1"


def test_the_rpcs_named_are_the_ones_the_permissions_read_decides() -> None:
    table = _table()
    reply = _described(table)
    permissions = _answer(
        table, "GetCallerPermissions", admission_pb2.GetCallerPermissionsRequest()
    )
    decided = {p.method for p in permissions.permissions}  # type: ignore[attr-defined]
    named = {c.rpc for w in reply.workflows for c in (w.candidate, w.submit, w.read)}
    assert len(named) == 3 * len(WORKFLOWS) and named <= decided


def test_a_registered_fourth_workflow_is_listed_while_it_is_registered() -> None:
    with registered(TEST_ONLY):
        table = _table()
    reply = _described(table)  # the answer of the table built while it was registered
    assert [w.name for w in reply.workflows] == [*WORKFLOWS, TEST_ONLY.name]
    fourth = reply.workflows[-1]
    assert fourth.workflow == TEST_ONLY.number
    assert fourth.action == "request_test_only_recovery"
    assert (
        fourth.candidate.rpc == "/forge.continuity.v1.CandidateService/GetTestOnlyRecoveryCandidate"
    )
    assert fourth.submit.rpc == "/forge.continuity.v1.AdmissionService/RequestTestOnlyRecovery"
    # outside the contract: no http rule, so no HTTP route is claimed for it
    assert (fourth.submit.http_method, fourth.submit.path) == ("", "")
    assert [a.field for a in fourth.acknowledgements] == list(TEST_ONLY.acknowledgements)
    # a table built after the block no longer lists it
    assert [w.name for w in _described(_table()).workflows] == list(WORKFLOWS)
