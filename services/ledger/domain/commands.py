"""The command ledger: usage is counted from the run's retained native command_executed rows.

Each distinct command_id is charged once, whoever recorded it (the original worker before the
hold, or a continuation worker under its lease). Reading or re-recording a command charges
nothing; the command that would exceed the limit is refused before it runs.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from services.ledger.domain.journal import StoredEntry
from shared.continuity.canonical import parse_json
from shared.runtime.errors import FailedPrecondition, ResourceExhausted


@dataclass(frozen=True)
class CommandReceipt:
    command_id: str
    command_digest: str
    sequence: int
    #: The execution request and lease generation it was charged under ("" and -1 for a
    #: native command recorded outside any continuity lease).
    execution_request_id: str = ""
    lease_generation: int = -1

    def check_satisfies(self, execution_request_id: str, generation: int) -> None:
        """A receipt charged under a continuity lease satisfies only that same request and
        generation: a fenced generation's command may or may not have run, so its receipt never
        lets a later worker run the command uncharged (COMMAND_RECEIPT_FENCED; choose a new
        command id, which is charged anew)."""
        if self.execution_request_id and (
            self.execution_request_id != execution_request_id or self.lease_generation != generation
        ):
            raise FailedPrecondition(
                "COMMAND_RECEIPT_FENCED",
                f"command {self.command_id} was charged under {self.execution_request_id} "
                f"generation {self.lease_generation}, which is not the caller's lease; "
                "record the command under a new command id",
                metadata={
                    "command_id": self.command_id,
                    "execution_request_id": self.execution_request_id,
                    "lease_generation": str(self.lease_generation),
                },
            )


@dataclass(frozen=True)
class RecordedCommand:
    """The answer to recording one command: where its ``command_executed`` entry is, whether this
    call charged it (False for a known id answered with its receipt), and the usage after."""

    journal_sequence: int
    charged: bool
    used: int
    limit: int
    #: The receipt entry's hash after a charging call (the new head); "" for a known id.
    journal_hash: str = ""


@dataclass(frozen=True)
class CommandLedger:
    receipts: dict[str, CommandReceipt]

    @classmethod
    def from_entries(cls, entries: Iterable[StoredEntry]) -> CommandLedger:
        receipts: dict[str, CommandReceipt] = {}
        for entry in entries:
            payload = parse_json(entry.payload_json)
            command_id = str(payload["command_id"])
            generation = payload.get("lease_generation")
            receipts.setdefault(
                command_id,
                CommandReceipt(
                    command_id,
                    str(payload.get("command_digest", "")),
                    entry.sequence,
                    str(payload.get("execution_request_id", "")),
                    generation if isinstance(generation, int) else -1,
                ),
            )
        return cls(receipts)

    @property
    def used(self) -> int:
        return len(self.receipts)

    def receipt(self, command_id: str) -> CommandReceipt | None:
        return self.receipts.get(command_id)

    def check_room(self, limit: int) -> None:
        if self.used >= limit:
            raise ResourceExhausted(
                "COMMAND_LIMIT_REACHED",
                f"{self.used} of {limit} commands are used; the command is refused before it runs",
                metadata={"used": str(self.used), "limit": str(limit)},
            )
