"""Runs and their original task attempt: validation and the canonical run digest."""

from __future__ import annotations

from dataclasses import asdict, dataclass
from datetime import datetime

from shared.continuity.canonical import digest_of, is_digest
from shared.continuity.identifiers import IDENTIFIER, check_identifier
from shared.continuity.timeutil import from_text
from shared.contract.terms import SUPPORTED_TIME_BUDGET_PROTOCOLS
from shared.runtime.errors import FieldViolation, InvalidArgument

__all__ = ["IDENTIFIER", "SUPPORTED_TIME_BUDGET_PROTOCOLS", "Run", "RunSpec", "check_identifier"]


#: The longest value of each free-text field, the width of the column that stores it: a longer
#: value is refused, never stored cut (PostgreSQL refuses it on insert, SQLite would keep it).
TEXT_WIDTHS = {"source_revision": 256, "time_budget_protocol": 64, "source_profile": 256}


@dataclass(frozen=True)
class RunSpec:
    """What a platform writer registers for a run."""

    run_id: str
    task_id: str
    attempt_id: str
    source_revision: str
    configuration_digest: str
    provider_timeout_seconds: int
    active_deadline: str | None
    command_limit: int
    time_budget_protocol: str
    source_profile: str

    def validate(self) -> None:
        violations: list[FieldViolation] = []
        for name in ("run_id", "task_id", "attempt_id"):
            if not IDENTIFIER.match(getattr(self, name)):
                violations.append(FieldViolation(name, "1..128 characters of [A-Za-z0-9._:-]"))
        for name, longest in TEXT_WIDTHS.items():
            value = getattr(self, name)
            if not value or len(value) > longest:
                violations.append(FieldViolation(name, f"required, at most {longest} characters"))
        if not is_digest(self.configuration_digest):
            violations.append(FieldViolation("configuration_digest", "must be sha256:<64 hex>"))
        if self.provider_timeout_seconds <= 0:
            violations.append(FieldViolation("provider_timeout_seconds", "must be positive"))
        if self.command_limit <= 0:
            violations.append(FieldViolation("command_limit", "must be positive"))
        if violations:
            raise InvalidArgument(
                "RUN_INVALID",
                "; ".join(f"{v.field}: {v.description}" for v in violations),
                field_violations=violations,
            )

    @property
    def digest(self) -> str:
        return digest_of(asdict(self))

    @property
    def active_deadline_at(self) -> datetime | None:
        """The stored active deadline as a moment (None when the run has none)."""
        return None if self.active_deadline is None else from_text(self.active_deadline)


@dataclass(frozen=True)
class Run:
    """A stored run. ``completed_rounds`` is progress, not part of the registered record (nor of
    ``run_digest``): admission preserves it, a certified worker completion advances it."""

    spec: RunSpec
    created_by: str
    created_at: str
    run_digest: str
    completed_rounds: int = 0


@dataclass(frozen=True)
class RunReading:
    """A run as read now: the run, its journal head, and the lease a grant made now may carry
    under the current policy (``execution.grantable_lease``)."""

    run: Run
    head: tuple[int, str]
    grantable_lease_seconds: int
