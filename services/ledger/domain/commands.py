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
from shared.runtime.errors import ResourceExhausted


@dataclass(frozen=True)
class CommandReceipt:
    command_id: str
    command_digest: str
    sequence: int


@dataclass(frozen=True)
class RecordedCommand:
    """The answer to recording one command: where its ``command_executed`` entry is, whether this
    call charged it (False for a known id answered with its receipt), and the usage after."""

    journal_sequence: int
    charged: bool
    used: int
    limit: int


@dataclass(frozen=True)
class CommandLedger:
    receipts: dict[str, CommandReceipt]

    @classmethod
    def from_entries(cls, entries: Iterable[StoredEntry]) -> CommandLedger:
        receipts: dict[str, CommandReceipt] = {}
        for entry in entries:
            payload = parse_json(entry.payload_json)
            command_id = str(payload["command_id"])
            receipts.setdefault(
                command_id,
                CommandReceipt(command_id, str(payload.get("command_digest", "")), entry.sequence),
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
