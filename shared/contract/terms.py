"""One source of the contract facts that every service, the client and the CLI share.

Whatever the `.proto` files already say (acknowledgement fields, enum names) is derived from the
generated descriptors here, so a contract change cannot leave a second hand-written copy behind.
Facts the protos cannot express (the spec's 7200 s maximum, the supported time-budget protocol)
are stated once, here. Nothing in this module performs I/O.
"""

from __future__ import annotations

import functools
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Final, Protocol, TypeVar, cast

from google.protobuf.descriptor import Descriptor, EnumDescriptor

from forge.continuity.v1 import admission_pb2, reconstruction_pb2

# --- digests --------------------------------------------------------------------------------

#: The four digests an operator copies from a candidate and submits unchanged.
DIGEST_NAMES: Final = ("candidate_digest", "run_digest", "journal_digest", "policy_digest")

# --- windows and leases ---------------------------------------------------------------------

#: The spec's hard maximum for a policy window, a requested lease window and a granted lease.
MAX_WINDOW_SECONDS: Final = 7200

# --- time budgets ---------------------------------------------------------------------------

#: The only time-budget protocol whose lease arithmetic is defined (frozen provider timeout plus
#: the remaining active deadline).
PROVIDER_TIMEOUT_V1: Final = "provider-timeout-v1"
SUPPORTED_TIME_BUDGET_PROTOCOLS: Final = frozenset({PROVIDER_TIMEOUT_V1})

# --- execution requests ---------------------------------------------------------------------

#: Execution-request states that still hold the run (a claim is outstanding while in either).
PENDING_STATE_NAMES: Final = ("queued", "claimed")


# --- enums ----------------------------------------------------------------------------------


_Number = TypeVar("_Number", bound=int)


class _EnumWrapper(Protocol[_Number]):
    """What protobuf's generated enum wrappers offer (``common_pb2.HoldReason`` and friends).

    Generic in the value type: mypy-protobuf types each enum's values as its own ``ValueType``
    (a NewType of int), which message constructors require.
    """

    DESCRIPTOR: EnumDescriptor

    def Name(self, number: _Number, /) -> str: ...

    def Value(self, name: str, /) -> _Number: ...


def enum_prefix(enum: _EnumWrapper[Any]) -> str:
    """``HOLD_REASON_`` for ``HoldReason``: the buf-style prefix every value carries."""
    return _prefix_of(enum.DESCRIPTOR)


@functools.cache  # asked for every enum name converted (a hold, an entry kind, a state)
def _prefix_of(descriptor: EnumDescriptor) -> str:
    unspecified = descriptor.values_by_number[0].name
    if not unspecified.endswith("_UNSPECIFIED"):
        raise ValueError(f"{descriptor.full_name} has no *_UNSPECIFIED zero value")
    return unspecified.removesuffix("UNSPECIFIED")


def enum_short_name(enum: _EnumWrapper[_Number], number: int) -> str:
    """``POLICY_DISABLED`` for ``HOLD_REASON_POLICY_DISABLED`` (ValueError for an unknown one)."""
    short = _short_names_of(enum.DESCRIPTOR).get(number)
    if short is None:
        # protobuf words the refusal (and answers an alias this table has not seen)
        return enum.Name(cast(_Number, number)).removeprefix(enum_prefix(enum))
    return short


def enum_number(enum: _EnumWrapper[_Number], short_name: str) -> _Number:
    """The inverse of :func:`enum_short_name`; case-insensitive (``queued`` → 1)."""
    number = _numbers_of(enum.DESCRIPTOR).get(short_name.upper())
    if number is None:
        return enum.Value(enum_prefix(enum) + short_name.upper())
    return cast(_Number, number)


# Both tables are built once per enum: a candidate converts every hold and every entry kind of a
# long journal, and protobuf's own Name / Value are Python calls with a prefix to add or strip.
@functools.cache
def _short_names_of(descriptor: EnumDescriptor) -> dict[int, str]:
    prefix = _prefix_of(descriptor)
    names: dict[int, str] = {}
    for value in descriptor.values:  # the first name of a number wins, as in protobuf's Name
        names.setdefault(value.number, value.name.removeprefix(prefix))
    return names


@functools.cache
def _numbers_of(descriptor: EnumDescriptor) -> dict[str, int]:
    prefix = _prefix_of(descriptor)
    return {
        value.name.removeprefix(prefix): value.number
        for value in descriptor.values
        if value.name.startswith(prefix)
    }


# --- acknowledgements -----------------------------------------------------------------------

ACKNOWLEDGEMENT_PREFIX: Final = "acknowledge_"


def acknowledgement_fields(message: Descriptor) -> tuple[str, ...]:
    """The message's ``acknowledge_*`` fields in field-number order (each must be ``true``)."""
    return tuple(
        field.name
        for field in sorted(message.fields, key=lambda field: field.number)
        if field.name.startswith(ACKNOWLEDGEMENT_PREFIX)
    )


# --- continuity versions --------------------------------------------------------------------


@dataclass(frozen=True)
class ContinuityVersion:
    """One invalid-read continuity version: its route's request, acknowledgements and the
    reconstruction it needs."""

    number: int
    request: Descriptor
    acknowledgements: tuple[str, ...]
    reconstruction_version: int


def _version(number: int, request: Descriptor, reconstruction_version: int) -> ContinuityVersion:
    return ContinuityVersion(
        number, request, acknowledgement_fields(request), reconstruction_version
    )


VERSIONS: Final[Mapping[int, ContinuityVersion]] = {
    1: _version(
        1,
        admission_pb2.RequestInvalidReadContinuityRequest.DESCRIPTOR,
        reconstruction_pb2.RECONSTRUCTION_VERSION_V1,
    ),
    2: _version(
        2,
        admission_pb2.RequestInvalidReadContinuityV2Request.DESCRIPTOR,
        reconstruction_pb2.RECONSTRUCTION_VERSION_V2,
    ),
}
SUPPORTED_VERSIONS: Final = tuple(sorted(VERSIONS))
#: An unset (0) version on a read selects this one.
DEFAULT_VERSION: Final = 1
#: Reconstruction's protobuf enum → the domain's version number.
VERSION_BY_RECONSTRUCTION_ENUM: Final[Mapping[int, int]] = {
    version.reconstruction_version: number for number, version in VERSIONS.items()
}
