"""The package-owned compatibility catalog of checkpoint-mode policy epochs.

A worker adopts its checkpoint mode when a run starts and records the adoption natively in the
``run_started`` payload as ``checkpoint_mode: {selection, mode, acknowledgement}``. Runs held by
the older required-checkpoint worker carry the tuple of an older policy epoch; the current policy
would refuse it. Those records stay immutable. This module is the one reviewed place that says
which historical tuple is still recognized, and where:

- ``prepare_mode`` is the ordinary, strict path (mode preparation and restore outside
  continuity): only the current epoch's tuple passes, a historical one is refused
  (``POLICY_EPOCH_NOT_CURRENT``).
- ``recognize`` accepts the current tuple or a reviewed historical one, and only inside a
  ``ContinuityEpochContext``, whose namespace is one of the continuity preparation or execution
  contexts and which carries the current qualified source profile and an enabled finite-lease
  policy (``POLICY_EPOCH_UNRECOGNIZED`` otherwise).

Recognition grants nothing: it carries no permission to replay a consumed response or to restore
an expired claim; every current check (identity, actor, configuration, source, commands,
unknown-effect custody, scope, lease bounds) still runs. The catalog is data reviewed with the
code: ``CATALOG_VERSION`` changes with any entry, and ``catalog_digest()`` binds a receipt to the
exact catalog it was recognized under (see ADR 0011).
"""

from __future__ import annotations

import enum
from collections.abc import Mapping
from dataclasses import dataclass
from types import MappingProxyType
from typing import Any, Final

from shared.continuity.canonical import digest_of
from shared.runtime.errors import (
    FailedPrecondition,
    PreconditionViolation,
    field_required,
)

CATALOG_VERSION: Final = 1
MODE_FIELD: Final = "checkpoint_mode"
TUPLE_KEYS: Final = ("selection", "mode", "acknowledgement")


@dataclass(frozen=True)
class ModeTuple:
    """The selection/mode/acknowledgement a worker adopted its checkpoint mode with."""

    selection: str
    mode: str
    acknowledgement: str

    def as_dict(self) -> dict[str, str]:
        return {
            "selection": self.selection,
            "mode": self.mode,
            "acknowledgement": self.acknowledgement,
        }


@dataclass(frozen=True)
class PolicyEpoch:
    """One checkpoint-mode policy epoch and the tuple it adopted with."""

    epoch_id: str
    tuple: ModeTuple
    review: str

    def as_dict(self) -> dict[str, Any]:
        return {"epoch_id": self.epoch_id, **self.tuple.as_dict(), "review": self.review}


# The epoch the current policy prepares modes under.
CURRENT_EPOCH: Final = PolicyEpoch(
    epoch_id="checkpoint-mode/2",
    tuple=ModeTuple(
        selection="explicit",
        mode="required-checkpoint/2",
        acknowledgement="acknowledge_required_checkpoint_v2",
    ),
    review="current policy",
)

# Reviewed historical epochs, keyed by their exact tuple. Only the older checkpoint-mode adoption
# of the Firefly Agentic 26.10.1 required-checkpoint worker (original-selection readmission) is
# reviewed; adding an entry is a reviewed change that bumps CATALOG_VERSION.
HISTORICAL_EPOCHS: Final[Mapping[ModeTuple, PolicyEpoch]] = MappingProxyType(
    {
        ModeTuple(
            selection="original",
            mode="required-checkpoint/1",
            acknowledgement="acknowledge_checkpoint_mode",
        ): PolicyEpoch(
            epoch_id="checkpoint-mode/1",
            tuple=ModeTuple(
                selection="original",
                mode="required-checkpoint/1",
                acknowledgement="acknowledge_checkpoint_mode",
            ),
            review="ADR 0011: firefly-agentic 26.10.1 required-checkpoint adoption",
        )
    }
)


class ContinuityNamespace(enum.Enum):
    """The only contexts in which a historical epoch can be recognized."""

    PREPARATION = "invalid-read-continuity/preparation"
    EXECUTION = "invalid-read-continuity/execution"


@dataclass(frozen=True)
class ContinuityEpochContext:
    """The namespaced continuity context recognition runs in, with the current conditions."""

    namespace: ContinuityNamespace
    source_profile: str
    profile_qualified: bool
    policy_enabled: bool
    lease_window_seconds: int
    lease_policy_revision: int


def catalog_document() -> dict[str, Any]:
    """The catalog as data: what ``catalog_digest`` covers."""
    return {
        "catalog_version": CATALOG_VERSION,
        "current": CURRENT_EPOCH.as_dict(),
        "historical": [epoch.as_dict() for epoch in HISTORICAL_EPOCHS.values()],
    }


def catalog_digest() -> str:
    return digest_of(catalog_document())


def mode_tuple_of(run_started: Mapping[str, Any]) -> ModeTuple | None:
    """The adopted tuple of a ``run_started`` payload; None when the run recorded no adoption.
    A malformed adoption is refused, never guessed at."""
    if MODE_FIELD not in run_started:
        return None
    adoption = run_started[MODE_FIELD]
    if (
        not isinstance(adoption, dict)
        or set(adoption) != set(TUPLE_KEYS)
        or not all(isinstance(adoption[key], str) and adoption[key] for key in TUPLE_KEYS)
    ):
        raise FailedPrecondition(
            "POLICY_EPOCH_UNRECOGNIZED",
            "the run's checkpoint_mode adoption is not a selection/mode/acknowledgement tuple",
            metadata={"field": "run_started/" + MODE_FIELD, "epoch": ""},
        )
    return ModeTuple(adoption["selection"], adoption["mode"], adoption["acknowledgement"])


def prepare_mode(adopted: ModeTuple) -> PolicyEpoch:
    """Ordinary mode preparation and restore: strict current policy, no historical epoch."""
    if adopted == CURRENT_EPOCH.tuple:
        return CURRENT_EPOCH
    historical = HISTORICAL_EPOCHS.get(adopted)
    raise FailedPrecondition(
        "POLICY_EPOCH_NOT_CURRENT",
        "ordinary mode preparation accepts only the current checkpoint-mode policy epoch",
        metadata={
            "epoch": historical.epoch_id if historical else "",
            "current_epoch": CURRENT_EPOCH.epoch_id,
        },
        precondition_violations=[
            PreconditionViolation(
                "POLICY_EPOCH", MODE_FIELD, f"current epoch is {CURRENT_EPOCH.epoch_id}"
            )
        ],
    )


def recognize(adopted: ModeTuple, context: object) -> PolicyEpoch:
    """The epoch of ``adopted`` inside a continuity context; refused anywhere else."""
    problems: list[PreconditionViolation] = []
    if not isinstance(context, ContinuityEpochContext):
        problems.append(PreconditionViolation("CONTEXT", "namespace", "not a continuity context"))
    else:
        if not context.profile_qualified:
            problems.append(
                PreconditionViolation(
                    "PROFILE", "source_profile", f"{context.source_profile} is not qualified"
                )
            )
        if not context.policy_enabled or context.lease_window_seconds <= 0:
            problems.append(
                PreconditionViolation(
                    "POLICY", "policy", "the finite-lease policy is not enabled with a window"
                )
            )
    epoch = CURRENT_EPOCH if adopted == CURRENT_EPOCH.tuple else HISTORICAL_EPOCHS.get(adopted)
    if epoch is None:
        problems.append(
            PreconditionViolation("POLICY_EPOCH", MODE_FIELD, "tuple is not in the catalog")
        )
    if problems:
        raise FailedPrecondition(
            "POLICY_EPOCH_UNRECOGNIZED",
            "the adopted checkpoint-mode policy epoch is not recognized here: "
            + "; ".join(p.description for p in problems),
            metadata={
                "field": "run_started/" + MODE_FIELD,
                "epoch": epoch.epoch_id if epoch else "",
            },
            precondition_violations=problems,
        )
    assert epoch is not None  # problems is empty
    return epoch


@dataclass(frozen=True)
class NativeReference:
    """One native journal row a receipt binds: its sequence and stored hash."""

    kind: str
    sequence: int
    hash: str

    def as_dict(self) -> dict[str, Any]:
        return {"kind": self.kind, "sequence": self.sequence, "hash": self.hash}


def epoch_receipt(
    adopted: ModeTuple | None,
    context: ContinuityEpochContext,
    *,
    native_references: list[NativeReference],
    checkpoint_digest: str,
) -> dict[str, Any]:
    """The ``policy_epochs`` block of a migration receipt: the epoch the run adopted (None when
    it recorded no adoption) and the current one, bound to the exact old native references, the
    current source profile and the current lease-policy revision."""
    if not native_references:
        raise field_required("native_references", "a receipt binds native references")
    adopted_epoch = recognize(adopted, context) if adopted is not None else None
    body: dict[str, Any] = {
        "catalog_version": CATALOG_VERSION,
        "catalog_digest": catalog_digest(),
        "namespace": context.namespace.value,
        "adopted_epoch": adopted_epoch.as_dict() if adopted_epoch is not None else None,
        "current_epoch": CURRENT_EPOCH.as_dict(),
        "native_references": [ref.as_dict() for ref in native_references],
        "checkpoint_digest": checkpoint_digest,
        "source_profile": context.source_profile,
        "lease_policy_revision": context.lease_policy_revision,
    }
    return {**body, "binding_digest": digest_of(body)}


def catalogued(adopted: ModeTuple) -> PolicyEpoch | None:
    """The catalog's epoch for a tuple (current or reviewed historical), without recognizing it
    anywhere: a candidate reports an uncatalogued adoption before anything is submitted."""
    if adopted == CURRENT_EPOCH.tuple:
        return CURRENT_EPOCH
    return HISTORICAL_EPOCHS.get(adopted)
