"""GetCallerPermissions reports the role tables the server's authorization is built from."""

from __future__ import annotations

import pytest

from forge.continuity.v1 import admission_pb2, common_pb2
from services.admission.servicer import Call, binding, routes
from services.candidate.servicer import bindings as candidate_bindings
from shared.runtime.auth import Principal, Role
from tests.support import admission_downstream


def _answer(principal: Principal) -> admission_pb2.GetCallerPermissionsResponse:
    table = routes(admission_downstream("127.0.0.1:1", "127.0.0.1:1"))
    reply = table["GetCallerPermissions"].answer(
        admission_pb2.GetCallerPermissionsRequest(), Call("GetCallerPermissions", principal)
    )
    assert isinstance(reply, admission_pb2.GetCallerPermissionsResponse)
    return reply


def _role(number: int) -> Role:
    return Role[common_pb2.Role.Name(number).removeprefix("ROLE_")]  # type: ignore[arg-type]


@pytest.mark.parametrize("role", list(Role))
def test_the_report_is_the_table_the_interceptor_is_given(role: Role) -> None:
    table = routes(admission_downstream("127.0.0.1:1", "127.0.0.1:1"))
    [candidate] = candidate_bindings()
    # Exactly what start_server hands to CallPolicy for these two services.
    enforced = {**binding(table).full_method_roles(), **candidate.full_method_roles()}
    reply = _answer(Principal("someone", frozenset({role})))
    assert reply.identity == "someone"
    assert [_role(r) for r in reply.roles] == [role]
    reported = {
        p.method: (p.permitted, frozenset(_role(r) for r in p.required_roles))
        for p in reply.permissions
    }
    assert reported == {method: (role in roles, roles) for method, roles in enforced.items()}
    submissions = {m for m in enforced if m.rsplit("/", 1)[1].startswith("Request")}
    assert len(submissions) == 5 and submissions <= set(reported)


def test_roles_are_listed_in_enum_order_and_methods_sorted() -> None:
    reply = _answer(Principal("ada", frozenset({Role.READER, Role.FACTORY_ADMINISTRATOR})))
    assert list(reply.roles) == [common_pb2.ROLE_FACTORY_ADMINISTRATOR, common_pb2.ROLE_READER]
    methods = [p.method for p in reply.permissions]
    assert methods == sorted(methods)
    for permission in reply.permissions:
        assert list(permission.required_roles) == sorted(permission.required_roles)
