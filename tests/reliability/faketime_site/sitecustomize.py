"""Imported at start-up by a Python process launched with ``faketime_environment``
(tests/reliability/faketime.py), and by no other: that directory is on its import path only.

libfaketime 0.9.10 (Debian's) with ``FAKETIME_DONT_FAKE_MONOTONIC=1`` still moves the absolute
CLOCK_MONOTONIC deadline of ``clock_nanosleep``, on which ``time.sleep`` waits, by the fake
offset: EINVAL for an offset ahead, the offset's length added for one behind. ``time.sleep``
waits on an event instead (``sem_clockwait``, which libfaketime leaves alone)."""

from __future__ import annotations

import operator
import threading
import time
from typing import SupportsIndex


def _sleep(seconds: float | SupportsIndex) -> None:
    length = seconds if isinstance(seconds, float) else operator.index(seconds)
    if length < 0:
        raise ValueError("sleep length must be non-negative")
    threading.Event().wait(length)


time.sleep = _sleep
