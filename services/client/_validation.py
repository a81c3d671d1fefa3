"""The client's local checks: a submission that cannot be admitted is refused before any call.

A local refusal is an ``InvalidArgument`` (reason ``VERSION_UNSUPPORTED``,
``ACKNOWLEDGEMENT_REQUIRED`` or ``FIELD_INVALID``) whose metadata carries ``origin=client``, so a
caller can tell that nothing left the process. The bounds and field lists come from
``shared.contract.terms``.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import NoReturn

from forge.continuity.v1 import candidate_pb2, common_pb2
from shared.contract.recovery_proto import corrective_provider as corrective
from shared.contract.recovery_proto import reviewed_rejection as reviewed
from shared.contract.terms import DIGEST_NAMES, MAX_WINDOW_SECONDS, SUPPORTED_VERSIONS, VERSIONS
from shared.runtime.errors import FieldViolation, InvalidArgument

#: Metadata of every refusal raised here: nothing was sent.
ORIGIN = {"origin": "client"}

#: The acknowledgement version 2 adds to version 1's (derived from the two request messages).
(V2_ACKNOWLEDGEMENT,) = (
    name for name in VERSIONS[2].acknowledgements if name not in VERSIONS[1].acknowledgements
)

Digests = common_pb2.ContinuityDigests | candidate_pb2.InvalidReadContinuityCandidate


def _refuse(
    reason: str, message: str, violations: Sequence[FieldViolation], **metadata: str
) -> NoReturn:
    raise InvalidArgument(
        reason, message, metadata={**ORIGIN, **metadata}, field_violations=violations
    )


def refuse_field(field: str, description: str) -> NoReturn:
    """FIELD_INVALID (origin=client) naming one field; nothing is sent."""
    _refuse(
        "FIELD_INVALID",
        f"{field}: {description}",
        [FieldViolation(field, description)],
        field=field,
    )


def check_identifiers(**identifiers: object) -> None:
    bad = [name for name, value in identifiers.items() if not isinstance(value, str) or not value]
    if bad:
        _refuse(
            "FIELD_INVALID",
            "identifiers must be non-empty strings: " + ", ".join(bad),
            [FieldViolation(name, "required: a non-empty string") for name in bad],
            field=",".join(bad),
        )


def check_acknowledgements(acknowledgements: Mapping[str, object]) -> None:
    """Each acknowledgement must be exactly the Boolean ``True`` (not merely truthy)."""
    missing = [name for name, given in acknowledgements.items() if given is not True]
    if missing:
        _refuse(
            "ACKNOWLEDGEMENT_REQUIRED",
            "every acknowledgement must be exactly true: " + ", ".join(missing),
            [FieldViolation(name, "must be exactly true") for name in missing],
            missing=",".join(missing),
        )


def in_contract_order(expected: Sequence[str], given: Mapping[str, object]) -> dict[str, object]:
    """``given`` ordered as the contract lists its acknowledgements; the names must match (a
    mismatch is a client bug after a contract change, not an operator's mistake)."""
    if set(given) != set(expected):
        raise TypeError(f"acknowledgements {sorted(given)} do not match the contract's {expected}")
    return {name: given[name] for name in expected}


def check_window(valid_for_seconds: object) -> None:
    if (
        not isinstance(valid_for_seconds, int)
        or isinstance(valid_for_seconds, bool)
        or not 1 <= valid_for_seconds <= MAX_WINDOW_SECONDS
    ):
        _refuse(
            "FIELD_INVALID",
            f"valid_for_seconds must be an integer in 1..{MAX_WINDOW_SECONDS}",
            [FieldViolation("valid_for_seconds", f"must be in 1..{MAX_WINDOW_SECONDS}")],
            field="valid_for_seconds",
        )


def check_version(version: object, acknowledge_observations: object = None) -> None:
    if (
        not isinstance(version, int)
        or isinstance(version, bool)
        or version not in SUPPORTED_VERSIONS
    ):
        supported = " or ".join(str(number) for number in SUPPORTED_VERSIONS)
        _refuse(
            "VERSION_UNSUPPORTED",
            f"version must be {supported}, got {version!r}",
            [FieldViolation("version", f"must be {supported}")],
            field="version",
            supported=",".join(str(number) for number in SUPPORTED_VERSIONS),
        )
    if V2_ACKNOWLEDGEMENT not in VERSIONS[version].acknowledgements and (
        acknowledge_observations not in (None, False)
    ):
        _refuse(
            "FIELD_INVALID",
            f"{V2_ACKNOWLEDGEMENT} belongs to version 2; a version-{version} request cannot "
            "admit a version-2 proof",
            [FieldViolation(V2_ACKNOWLEDGEMENT, "only version 2 takes this acknowledgement")],
            field=V2_ACKNOWLEDGEMENT,
        )


def continuity_digests(digests: object) -> common_pb2.ContinuityDigests:
    """The four digests, exactly as read from the candidate (all required)."""
    if isinstance(digests, candidate_pb2.InvalidReadContinuityCandidate):
        digests = digests.digests
    if not isinstance(digests, common_pb2.ContinuityDigests):
        _refuse(
            "FIELD_INVALID",
            "digests must be the ContinuityDigests (or the candidate) read from the candidate",
            [FieldViolation("digests", "a ContinuityDigests or InvalidReadContinuityCandidate")],
            field="digests",
        )
    missing = [name for name in DIGEST_NAMES if not getattr(digests, name)]
    if missing:
        _refuse(
            "FIELD_INVALID",
            "every digest is required, copied exactly from the candidate: " + ", ".join(missing),
            [FieldViolation(f"digests.{name}", "required") for name in missing],
            field=",".join(f"digests.{name}" for name in missing),
        )
    return digests


def recovery_candidate_digest(candidate_digest: object) -> str:
    if isinstance(candidate_digest, candidate_pb2.RecoveryCandidate):
        candidate_digest = candidate_digest.candidate_digest
    if not isinstance(candidate_digest, str) or not candidate_digest:
        _refuse(
            "FIELD_INVALID",
            "candidate_digest is required, copied exactly from the recovery candidate",
            [FieldViolation("candidate_digest", "required")],
            field="candidate_digest",
        )
    return candidate_digest


def check_reviewed_rejection(reviewed_rejection: object) -> None:
    if not isinstance(reviewed_rejection, common_pb2.ReviewedProviderRejectionV1):
        _refuse(
            "FIELD_INVALID",
            "reviewed_rejection must be a ReviewedProviderRejectionV1",
            [FieldViolation("reviewed_rejection", "a ReviewedProviderRejectionV1")],
            field="reviewed_rejection",
        )


def check_corrective_provider(
    corrective_provider: object, reviewed_rejection: common_pb2.ReviewedProviderRejectionV1
) -> None:
    """The corrective provider configuration, locally as admission judges it: present, well
    formed, and not the rejected epoch again (the stored document is checked at commit)."""
    if not isinstance(corrective_provider, common_pb2.CorrectiveProviderConfigurationV1):
        _refuse(
            "CORRECTIVE_PROVIDER_INVALID",
            "corrective_provider must be a CorrectiveProviderConfigurationV1",
            [FieldViolation("corrective_provider", "a CorrectiveProviderConfigurationV1")],
            field="corrective_provider",
        )
    try:
        corrective(corrective_provider).validate(reviewed(reviewed_rejection))
    except InvalidArgument as error:
        _refuse(
            error.reason,
            error.message,
            error.field_violations,
            field="corrective_provider",
        )


def validate_continuity_request(
    run_id: str,
    request_id: str,
    *,
    version: int,
    valid_for_seconds: int,
    acknowledge_no_new_grant: bool,
    acknowledge_original_consumption: bool,
    acknowledge_renewed_same_attempt_lease: bool,
    acknowledge_unavailable_source_observations: bool | None = None,
) -> None:
    """Every local check of a continuity submission except the digests, in the order the
    admission service applies them; raises ``InvalidArgument`` without any network call."""
    check_identifiers(run_id=run_id, request_id=request_id)
    check_version(version, acknowledge_unavailable_source_observations)
    given: dict[str, object] = {
        "acknowledge_no_new_grant": acknowledge_no_new_grant,
        "acknowledge_original_consumption": acknowledge_original_consumption,
        "acknowledge_renewed_same_attempt_lease": acknowledge_renewed_same_attempt_lease,
        V2_ACKNOWLEDGEMENT: acknowledge_unavailable_source_observations,
    }
    check_acknowledgements({name: given[name] for name in VERSIONS[version].acknowledgements})
    check_window(valid_for_seconds)


def check_recovery(
    run_id: str,
    request_id: str,
    recovery_id: str,
    candidate_digest: object,
    valid_for_seconds: int,
    acknowledgements: Mapping[str, object],
) -> str:
    """The local checks of a recovery submission; returns the candidate digest to send."""
    check_identifiers(run_id=run_id, request_id=request_id, recovery_id=recovery_id)
    check_acknowledgements(acknowledgements)
    check_window(valid_for_seconds)
    return recovery_candidate_digest(candidate_digest)
