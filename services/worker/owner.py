"""The claiming process's identity: host boot id, pid and start time (Linux ``/proc``).

A pid alone can be reused after the process ends; with the boot id and the start time in clock
ticks since boot it names exactly one process, which is what a reconciliation verifier has to
prove ceased."""

from __future__ import annotations

import os
from pathlib import Path

from forge.continuity.v1 import execution_pb2

BOOT_ID = Path("/proc/sys/kernel/random/boot_id")


def process_start_ticks(pid: int, proc: Path = Path("/proc")) -> int:
    """Field 22 (starttime) of ``/proc/<pid>/stat``; the command name (field 2) may contain
    spaces and parentheses, so the fields are counted after its closing parenthesis."""
    stat = (proc / str(pid) / "stat").read_text(encoding="utf-8")
    fields = stat[stat.rindex(")") + 2 :].split()
    return int(fields[19])  # fields[0] is field 3 (state)


def owner_instance() -> execution_pb2.OwnerInstance | None:
    """This process, or None where ``/proc`` does not describe it (the claim then records none)."""
    try:
        boot_id = BOOT_ID.read_text(encoding="utf-8").strip()
        pid = os.getpid()
        return execution_pb2.OwnerInstance(
            host_boot_id=boot_id, pid=pid, process_start_ticks=process_start_ticks(pid)
        )
    except (OSError, ValueError, IndexError):
        return None
