"""The versioned continuity policy: settings validation and the policy digest."""

from __future__ import annotations

from dataclasses import asdict, dataclass

from shared.continuity.canonical import digest_of
from shared.contract.terms import MAX_WINDOW_SECONDS
from shared.runtime.errors import FieldViolation, InvalidArgument

DEFAULT_PER_RUN_TICKET_LIMIT = 50
DEFAULT_PENDING_TICKET_LIMIT = 500


@dataclass(frozen=True)
class PolicySettings:
    """The writable settings of a revision."""

    enabled: bool
    window_seconds: int
    per_run_ticket_limit: int
    pending_ticket_limit: int
    allow_unavailable_source_observations: bool
    allow_pre_admission_recovery: bool
    allow_readonly_observation_recovery: bool

    def normalized(self) -> PolicySettings:
        """Validate and apply defaults (0 limits mean the documented default)."""
        violations: list[FieldViolation] = []
        if not 1 <= self.window_seconds <= MAX_WINDOW_SECONDS:
            violations.append(
                FieldViolation("settings.window_seconds", f"must be in 1..{MAX_WINDOW_SECONDS}")
            )
        for name in ("per_run_ticket_limit", "pending_ticket_limit"):
            if getattr(self, name) < 0:
                violations.append(FieldViolation(f"settings.{name}", "must be positive"))
        if violations:
            raise InvalidArgument(
                "POLICY_INVALID",
                "; ".join(f"{v.field}: {v.description}" for v in violations),
                field_violations=violations,
            )
        return PolicySettings(
            enabled=self.enabled,
            window_seconds=self.window_seconds,
            per_run_ticket_limit=self.per_run_ticket_limit or DEFAULT_PER_RUN_TICKET_LIMIT,
            pending_ticket_limit=self.pending_ticket_limit or DEFAULT_PENDING_TICKET_LIMIT,
            allow_unavailable_source_observations=self.allow_unavailable_source_observations,
            allow_pre_admission_recovery=self.allow_pre_admission_recovery,
            allow_readonly_observation_recovery=self.allow_readonly_observation_recovery,
        )


@dataclass(frozen=True)
class PolicyRevision:
    """One immutable stored revision."""

    revision: int
    settings: PolicySettings
    updated_by: str
    updated_at: str
    digest: str


def policy_digest(revision: int, settings: PolicySettings) -> str:
    """Digest of the canonical revision content: {"revision", ...settings}."""
    return digest_of({"revision": revision, **asdict(settings)})
