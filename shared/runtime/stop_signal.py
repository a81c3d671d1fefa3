"""The main thread's wait for a stop signal (SIGTERM, SIGINT), for the services and the bench's
bare baseline server alike. Standard library only, so the baseline stays bare.

The kernel may deliver a process-directed signal to any thread (gRPC's and the pool's included);
Python then runs the handler only when the main thread next runs bytecode. A main thread blocked
without a timeout (``Event.wait()``) would never do so, and the process would ignore the signal;
so the main thread wakes every :data:`SIGNAL_POLL_SECONDS`. The handler only records the signal:
it takes no lock (logging's, an Event's) the interrupted main thread could be holding.
"""

from __future__ import annotations

import signal
import time
from collections.abc import Sequence
from typing import Final

#: How long a stop signal can wait for the main thread at most.
SIGNAL_POLL_SECONDS: Final = 0.2
STOP_SIGNALS: Final = (signal.SIGTERM, signal.SIGINT)


def wait_for_stop_signal(signals: Sequence[signal.Signals] = STOP_SIGNALS) -> int:
    """Handle ``signals`` from now on and block the main thread until one arrives; its number."""
    received: list[int] = []

    def on_signal(signum: int, _frame: object) -> None:
        received.append(signum)

    for each in signals:
        signal.signal(each, on_signal)
    while not received:
        time.sleep(SIGNAL_POLL_SECONDS)
    return received[0]
