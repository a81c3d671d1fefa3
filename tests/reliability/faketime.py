"""A process whose wall clock is skewed, under libfaketime (Debian package ``faketime``, which
``make faketime`` installs): ``faketime_environment("+1h")`` is the environment to launch it with
(``ServiceProcess(env=...)``), ``FAKETIME_AVAILABLE`` whether the library is there.

Only the wall clock (CLOCK_REALTIME) is skewed, as on a host whose clock is wrong: libfaketime's
default also shifts CLOCK_MONOTONIC, by one constant (which cancels in every difference the
ledger's clock takes), but Python 3.11 waits with ``sem_clockwait`` on that clock, which
libfaketime 0.9.10 does not intercept, so every timed wait (``Event.wait``, a lock's timeout)
would wait for decades. ``FAKETIME_DONT_FAKE_MONOTONIC=1`` keeps the monotonic clock real, and
``faketime_site/sitecustomize.py`` mends ``time.sleep``, which that mode breaks.

A skewed process checks TLS certificates on its skewed clock: one made minutes ago is not yet
valid for a clock behind, so the skewed scenarios run without TLS."""

from __future__ import annotations

import os
from pathlib import Path

from tests.polyglot.process import _child_environment

#: Where Debian's libfaketime package puts the library; FORGE_LIBFAKETIME names another.
LIBFAKETIME_PATHS = (
    "/usr/lib/x86_64-linux-gnu/faketime/libfaketime.so.1",
    "/usr/lib/aarch64-linux-gnu/faketime/libfaketime.so.1",
    "/usr/lib/faketime/libfaketime.so.1",
)
SITE = Path(__file__).parent / "faketime_site"


def libfaketime() -> str | None:
    """The libfaketime library to preload, or None when it is not installed."""
    named = os.environ.get("FORGE_LIBFAKETIME", "")
    for path in (named,) if named else LIBFAKETIME_PATHS:
        if Path(path).is_file():
            return path
    return None


FAKETIME_AVAILABLE = libfaketime() is not None


def faketime_environment(offset: str) -> dict[str, str]:
    """The variables that launch a Python service with its wall clock ``offset`` from the host's
    (libfaketime's relative form: "+1h", "-20m", "+90s"). Requires ``FAKETIME_AVAILABLE``."""
    library = libfaketime()
    if library is None:
        raise RuntimeError("libfaketime is not installed (make faketime)")
    path = os.pathsep.join([str(SITE), _child_environment()["PYTHONPATH"]])
    return {
        "LD_PRELOAD": library,
        "FAKETIME": offset,
        "FAKETIME_DONT_FAKE_MONOTONIC": "1",
        "PYTHONPATH": path,
    }
