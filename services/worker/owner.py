"""The claiming process's identity: host boot id, pid, start time and pid namespace (Linux
``/proc``, read by :mod:`shared.runtime.host_process`).

A pid alone can be reused after the process ends; with the boot id and the start time in clock
ticks since boot it names exactly one process, which is what a reconciliation verifier has to
prove ceased. The pid namespace says which process table the pid is a number in: a verifier in
another namespace (another container) cannot look the process up, so it must not try."""

from __future__ import annotations

import os

from forge.continuity.v1 import execution_pb2
from shared.runtime.host_process import boot_id, pid_namespace, process_start_ticks

__all__ = ["owner_instance", "process_start_ticks"]


def owner_instance() -> execution_pb2.OwnerInstance | None:
    """This process, or None where ``/proc`` does not describe it (the claim then records none)."""
    try:
        pid = os.getpid()
        return execution_pb2.OwnerInstance(
            host_boot_id=boot_id(),
            pid=pid,
            process_start_ticks=process_start_ticks(pid),
            pid_namespace=pid_namespace(),
        )
    except (OSError, ValueError, IndexError):
        return None
