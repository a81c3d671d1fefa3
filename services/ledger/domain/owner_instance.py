"""The worker process that claims a request: host boot id, pid and process start time. Recorded
on the claim's ``worker_claimed`` entry so that a later verifier can prove that exactly this
instance ceased (the pid alone can be reused; with the boot id and start time it cannot)."""

from __future__ import annotations

import re
from dataclasses import dataclass

from shared.runtime.errors import FieldViolation, InvalidArgument

BOOT_ID = re.compile(r"^[A-Za-z0-9-]{1,64}$")
MAX_COUNTER = 2**53 - 1  # every recorded integer stays exact in JSON


@dataclass(frozen=True)
class OwnerInstance:
    """One worker process on one host boot."""

    host_boot_id: str
    pid: int
    process_start_ticks: int

    def validate(self) -> None:
        violations = []
        if not BOOT_ID.match(self.host_boot_id):
            violations.append(
                FieldViolation("owner_instance.host_boot_id", "1..64 of [A-Za-z0-9-]")
            )
        for name in ("pid", "process_start_ticks"):
            if not 0 < getattr(self, name) <= MAX_COUNTER:
                violations.append(FieldViolation(f"owner_instance.{name}", "must be positive"))
        if violations:
            raise InvalidArgument(
                "FIELD_INVALID",
                "; ".join(f"{v.field}: {v.description}" for v in violations),
                metadata={"field": "owner_instance"},
                field_violations=violations,
            )

    def as_payload(self) -> dict[str, object]:
        return {
            "host_boot_id": self.host_boot_id,
            "pid": self.pid,
            "process_start_ticks": self.process_start_ticks,
        }
