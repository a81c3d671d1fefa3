"""The per-RPC facts the contract declares, read from the generated descriptors: who may call each
RPC (``allowed_roles`` / ``any_role``, protos/forge/continuity/v1/options.proto), which RPCs are
idempotent reads (protobuf's ``idempotency_level = NO_SIDE_EFFECTS``) and which server hosts each
service (``hosted_by``). Nothing here is listed by hand: an RPC is retried, authorized or routed
as its declaration says, and one that declares no roles cannot be served (:func:`service_binding`
refuses to build its binding).

The one exception is an RPC a registered recovery workflow adds outside the contract (a test-only
workflow): its roles are the ones the workflow's descriptor gives it (``Rpcs.roles``); for the
declared workflows a test keeps those equal to the contract's.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from typing import Any

from google.protobuf import descriptor_pb2
from google.protobuf.descriptor import MethodDescriptor, ServiceDescriptor

from forge.continuity.v1 import common_pb2, options_pb2
from shared.continuity.recovery import WORKFLOWS
from shared.contract.modules import SERVICES
from shared.runtime import server
from shared.runtime.auth import ANY_ROLE, Role


class MissingFact(ValueError):
    """A service or RPC of the contract that does not declare a fact the servers need."""


def allowed_roles(method: MethodDescriptor) -> frozenset[Role]:
    """The roles allowed to call ``method``, as its options declare them; :class:`MissingFact`
    when it declares none (or both ``any_role`` and roles, or ROLE_UNSPECIFIED)."""
    options = method.GetOptions()
    any_role = options.Extensions[options_pb2.any_role]
    declared = list(options.Extensions[options_pb2.allowed_roles])
    if any_role and declared:
        raise MissingFact(f"{method.full_name}: declares both any_role and allowed_roles")
    if any_role:
        return ANY_ROLE
    if not declared:
        # Fail closed: an RPC nobody decided on must not become callable by accident.
        raise MissingFact(f"{method.full_name}: declares no allowed_roles")
    if common_pb2.ROLE_UNSPECIFIED in declared:
        raise MissingFact(f"{method.full_name}: ROLE_UNSPECIFIED is not a role")
    return frozenset(Role[common_pb2.Role.Name(role).removeprefix("ROLE_")] for role in declared)


def is_idempotent_read(method: MethodDescriptor) -> bool:
    """Whether ``method`` changes nothing, so a second attempt is safe whatever happened to the
    first (the only RPCs a channel retries)."""
    level = method.GetOptions().idempotency_level
    return bool(level == descriptor_pb2.MethodOptions.NO_SIDE_EFFECTS)


def hosted_by(service: ServiceDescriptor) -> str:
    """The server (runtime settings name) that hosts ``service``; :class:`MissingFact` if the
    service names none."""
    host = str(service.GetOptions().Extensions[options_pb2.hosted_by])
    if not host:
        raise MissingFact(f"{service.full_name}: declares no hosted_by server")
    return host


def _workflow_roles() -> dict[str, frozenset[Role]]:
    """Every registered recovery workflow's RPCs → the roles its descriptor gives them."""
    return {name: roles for w in WORKFLOWS.values() for name, roles in w.rpcs.roles().items()}


def method_roles(
    service: ServiceDescriptor, added: Iterable[str] = ()
) -> dict[str, frozenset[Role]]:
    """RPC name → allowed roles, for every RPC ``service`` declares and for each name of
    ``added`` it does not: an RPC a registered recovery workflow adds (a ValueError for any
    other name)."""
    roles = {method.name: allowed_roles(method) for method in service.methods}
    undeclared = [name for name in added if name not in roles]
    if undeclared:
        workflows = _workflow_roles()
        unknown = sorted(name for name in undeclared if name not in workflows)
        if unknown:
            raise ValueError(f"{service.full_name}: no RPC and no workflow RPC for {unknown}")
        roles.update({name: workflows[name] for name in undeclared})
    return roles


def service_binding(
    service: ServiceDescriptor,
    behaviour_of: Callable[[str], server.Behaviour],
    registered: Mapping[str, tuple[Any, Any]] | None = None,
) -> server.ServiceBinding:
    """The runtime's :func:`shared.runtime.server.service_binding` with the roles the contract
    declares: every servicer's one way to be hosted. ``registered`` as there (a registered
    recovery workflow's RPCs, with their message classes). Raises at start-up, before anything
    is served, if an RPC of ``service`` declares no roles."""
    roles = method_roles(service, registered or {})
    return server.service_binding(service, roles, behaviour_of, registered)


#: Service name (``LedgerService``, ...) → its idempotent reads, in declaration order.
IDEMPOTENT_READS: Mapping[str, tuple[str, ...]] = {
    name: tuple(method.name for method in service.methods if is_idempotent_read(method))
    for name, service in SERVICES.items()
}

#: Full service name → the server that hosts it.
HOSTS: Mapping[str, str] = {service.full_name: hosted_by(service) for service in SERVICES.values()}
