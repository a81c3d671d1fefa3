"""The per-RPC facts come from the contract's declarations: every RPC declares who may call it,
every service where it is hosted, and an RPC without its roles cannot be served."""

from __future__ import annotations

from collections.abc import Callable

import pytest
from google.api import annotations_pb2
from google.protobuf import descriptor_pb2, descriptor_pool
from google.protobuf.descriptor import ServiceDescriptor

from forge.continuity.v1 import common_pb2, options_pb2
from services.admission.servicer import bindings as admission_bindings
from services.candidate.servicer import bindings as candidate_bindings
from services.ledger.servicer import bindings as ledger_bindings
from services.reconstruction.isolation import InProcessRunner
from services.reconstruction.servicer import ReconstructionServicer
from services.reconstruction.servicer import bindings as reconstruction_bindings
from shared.continuity.recovery import WORKFLOWS
from shared.contract.method_facts import (
    HOSTS,
    IDEMPOTENT_READS,
    MissingFact,
    allowed_roles,
    hosted_by,
    method_roles,
    service_binding,
)
from shared.contract.modules import SERVICES
from shared.runtime.auth import ANY_ROLE, Role
from shared.runtime.config import SERVICE_NAMES
from shared.runtime.server import ServiceBinding
from tests.deploy.test_manifests import CALLS, SERVICE_ROLES
from tests.support import admission_downstream


def test_every_rpc_of_the_contract_declares_its_roles_and_every_service_its_host() -> None:
    for service in SERVICES.values():
        assert hosted_by(service) in SERVICE_NAMES, service.full_name
        for method in service.methods:
            assert allowed_roles(method), method.full_name


Declare = Callable[[descriptor_pb2.MethodOptions], None]


def _service(name: str, *methods: Declare) -> ServiceDescriptor:
    """A service outside the contract, added to the default pool so that its options are read
    with the contract's extensions: one RPC per ``methods`` entry, whose options it sets."""
    file = descriptor_pb2.FileDescriptorProto(
        name=f"tests/method_facts/{name}.proto",
        package=f"forge.continuity.tests.{name.lower()}",
        syntax="proto3",
        dependency=["forge/continuity/v1/options.proto"],
    )
    file.message_type.add(name="Nothing")
    service = file.service.add(name=name)
    service.options.Extensions[options_pb2.hosted_by] = "ledger"
    for index, declare in enumerate(methods):
        method = service.method.add(
            name=f"Call{index}",
            input_type=f".{file.package}.Nothing",
            output_type=f".{file.package}.Nothing",
        )
        declare(method.options)
    pool = descriptor_pool.Default()
    pool.Add(file)
    return pool.FindServiceByName(f"{file.package}.{name}")


def _readers(options: descriptor_pb2.MethodOptions) -> None:
    options.Extensions[options_pb2.allowed_roles].append(common_pb2.ROLE_READER)


def _anyone(options: descriptor_pb2.MethodOptions) -> None:
    options.Extensions[options_pb2.any_role] = True


def _nothing(options: descriptor_pb2.MethodOptions) -> None:
    pass


def _unspecified(options: descriptor_pb2.MethodOptions) -> None:
    options.Extensions[options_pb2.allowed_roles].append(common_pb2.ROLE_UNSPECIFIED)


def _both(options: descriptor_pb2.MethodOptions) -> None:
    _readers(options)
    _anyone(options)


def _serve(service: ServiceDescriptor) -> ServiceBinding:
    return service_binding(service, lambda name: lambda request, context: request)


def test_a_service_whose_rpcs_declare_their_roles_is_bound_with_them() -> None:
    bound = _serve(_service("Declared", _readers, _anyone))
    assert bound.method_roles == {"Call0": frozenset({Role.READER}), "Call1": ANY_ROLE}


@pytest.mark.parametrize(
    ("name", "declare", "refusal"),
    [
        ("Undeclared", _nothing, "declares no allowed_roles"),
        ("Unspecified", _unspecified, "ROLE_UNSPECIFIED is not a role"),
        ("Both", _both, "declares both any_role and allowed_roles"),
    ],
)
def test_an_rpc_without_its_roles_cannot_be_served(
    name: str, declare: Declare, refusal: str
) -> None:
    service = _service(name, _readers, declare)
    with pytest.raises(MissingFact, match=f"{name}.Call1: {refusal}"):
        _serve(service)


def test_a_service_without_a_host_is_refused() -> None:
    file = descriptor_pb2.FileDescriptorProto(
        name="tests/method_facts/Homeless.proto", package="forge.continuity.tests"
    )
    file.service.add(name="Homeless")
    descriptor_pool.Default().Add(file)
    service = descriptor_pool.Default().FindServiceByName("forge.continuity.tests.Homeless")
    with pytest.raises(MissingFact, match="Homeless: declares no hosted_by server"):
        hosted_by(service)


def test_an_undeclared_rpc_is_served_only_as_a_registered_workflow_rpc() -> None:
    candidate = SERVICES["CandidateService"]
    with pytest.raises(ValueError, match=r"no RPC and no workflow RPC for \['GetNothing'\]"):
        method_roles(candidate, ["GetNothing"])


def test_the_declared_workflows_give_their_rpcs_the_roles_the_contract_declares() -> None:
    for workflow in WORKFLOWS.values():
        rpcs = workflow.rpcs
        declared = {
            **method_roles(SERVICES["CandidateService"]),
            **method_roles(SERVICES["AdmissionService"]),
        }
        for rpc in (rpcs.candidate, rpcs.submit, rpcs.read):
            assert rpcs.roles()[rpc.name] == declared[rpc.name], (workflow.name, rpc.name)


def test_every_http_get_is_an_idempotent_read() -> None:
    reads = {(name, method) for name, methods in IDEMPOTENT_READS.items() for method in methods}
    gets = {
        (service.name, method.name)
        for service in SERVICES.values()
        for method in service.methods
        if method.GetOptions().Extensions[annotations_pb2.http].get
    }
    assert gets and gets <= reads


def test_each_server_hosts_exactly_the_services_the_contract_names_it_for() -> None:
    served = {
        "ledger": ledger_bindings(None),  # type: ignore[arg-type]  # nothing is called
        "reconstruction": reconstruction_bindings(ReconstructionServicer(runner=InProcessRunner())),
        "candidate": candidate_bindings(),
        "admission": admission_bindings(admission_downstream("127.0.0.1:1", "127.0.0.1:1")),
    }
    for server, bindings in served.items():
        hosted = {binding.descriptor.full_name for binding in bindings}
        assert hosted == {service for service, host in HOSTS.items() if host == server}, server


def test_a_service_identity_may_call_only_the_servers_its_service_calls() -> None:
    """A calling service's own role is allowed (by name, not as any role) only on the services
    of the servers it calls: admission, which never calls reconstruction, is not allowed there."""
    for caller, role in SERVICE_ROLES.items():
        for service in SERVICES.values():
            named = {
                method.name
                for method in service.methods
                if role in allowed_roles(method) and allowed_roles(method) != ANY_ROLE
            }
            if named:
                assert hosted_by(service) in CALLS[caller], (caller, service.name, named)
