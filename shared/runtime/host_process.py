"""What Linux ``/proc`` says about processes on this host: the boot id, a process's start time
and state, and pid namespaces. Shared by the worker (which records its own identity at claim) and
the ledger's local process verifier (which proves that identity ceased).

A pid alone can be reused once its process ends; the boot id and the start time in clock ticks
since boot name exactly one process, and the pid namespace says which process table the pid is a
number in.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

PROC = Path("/proc")
BOOT_ID = PROC / "sys" / "kernel" / "random" / "boot_id"
#: Process states of a process that runs no more code: zombie (exited, not yet reaped), dead.
ENDED_STATES = frozenset({"Z", "X", "x"})


@dataclass(frozen=True)
class ProcessStat:
    """Fields 3 (state) and 22 (starttime) of ``/proc/<pid>/stat``."""

    state: str
    start_ticks: int

    @property
    def ended(self) -> bool:
        return self.state in ENDED_STATES


def boot_id(path: Path = BOOT_ID) -> str:
    return path.read_text(encoding="utf-8").strip()


def process_stat(pid: int, proc: Path = PROC) -> ProcessStat | None:
    """The state and start time of ``pid``; None when no such process exists. The command name
    (field 2) may contain spaces and parentheses, so fields are counted after its last ``)``."""
    try:
        stat = (proc / str(pid) / "stat").read_text(encoding="utf-8")
    except (FileNotFoundError, ProcessLookupError, NotADirectoryError):
        return None
    fields = stat[stat.rindex(")") + 2 :].split()
    return ProcessStat(state=fields[0], start_ticks=int(fields[19]))  # fields[0] is field 3


def process_start_ticks(pid: int, proc: Path = PROC) -> int:
    """Field 22 (starttime) of ``/proc/<pid>/stat``; FileNotFoundError when there is none."""
    stat = process_stat(pid, proc)
    if stat is None:
        raise FileNotFoundError(f"no process {pid}")
    return stat.start_ticks


def hides_processes(proc: Path = PROC) -> bool:
    """Whether ``proc`` is mounted so that it may hide other users' processes (``hidepid`` other
    than 0/off, or ``subset=pid``): then a pid missing from it proves nothing. Unknown: True."""
    try:
        lines = (proc / "self" / "mountinfo").read_text(encoding="utf-8").splitlines()
    except OSError:
        return True
    for line in lines:
        mount, _, filesystem = line.partition(" - ")
        fields, described = mount.split(), filesystem.split()
        if len(fields) < 5 or fields[4] != str(proc) or len(described) < 3:
            continue
        if described[0] != "proc":
            continue
        settings = dict(option.partition("=")[::2] for option in described[2].split(","))
        return settings.get("hidepid", "0") not in ("0", "off") or "subset" in settings
    return True


def pid_namespace(pid: int | str = "self", proc: Path = PROC) -> int:
    """The inode of the pid namespace of ``pid`` (default: this process); 0 when unknown."""
    try:
        return (proc / str(pid) / "ns" / "pid").stat().st_ino
    except OSError:
        return 0
