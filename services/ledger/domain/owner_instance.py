"""The worker process that claims a request: host boot id, pid, process start time and pid
namespace. Recorded on the claim's ``worker_claimed`` entry so that a later verifier can prove
that exactly this instance ceased (the pid alone can be reused; with the boot id and start time it
cannot, and the namespace says which process table the pid is a number in)."""

from __future__ import annotations

import re
from dataclasses import dataclass

from shared.runtime.errors import FieldViolation, InvalidArgument

BOOT_ID = re.compile(r"\A[A-Za-z0-9-]{1,64}\Z")  # \Z: "$" would let a final newline through
MAX_COUNTER = 2**53 - 1  # every recorded integer stays exact in JSON


@dataclass(frozen=True)
class OwnerInstance:
    """One worker process on one host boot."""

    host_boot_id: str
    pid: int
    process_start_ticks: int
    #: The inode of the process's pid namespace; 0: not recorded.
    pid_namespace: int = 0

    def validate(self) -> None:
        violations = []
        if not BOOT_ID.fullmatch(self.host_boot_id):
            violations.append(
                FieldViolation("owner_instance.host_boot_id", "1..64 of [A-Za-z0-9-]")
            )
        for name in ("pid", "process_start_ticks"):
            if not 0 < getattr(self, name) <= MAX_COUNTER:
                violations.append(FieldViolation(f"owner_instance.{name}", "must be positive"))
        if not 0 <= self.pid_namespace <= MAX_COUNTER:
            violations.append(
                FieldViolation("owner_instance.pid_namespace", "0 (unknown) or positive")
            )
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
            **({"pid_namespace": self.pid_namespace} if self.pid_namespace else {}),
        }

    @classmethod
    def from_payload(cls, value: object) -> OwnerInstance | None:
        """The owner instance a ``worker_claimed`` payload recorded; None when absent or not
        readable (a verifier then proves nothing about it)."""
        if not isinstance(value, dict):
            return None
        fields = ("host_boot_id", "pid", "process_start_ticks", "pid_namespace")
        boot, pid, ticks, namespace = (value.get(name, 0) for name in fields)
        if not isinstance(boot, str) or not all(
            isinstance(n, int) and not isinstance(n, bool) for n in (pid, ticks, namespace)
        ):
            return None
        owner = cls(boot, pid, ticks, namespace)
        try:
            owner.validate()
        except InvalidArgument:
            return None
        return owner
