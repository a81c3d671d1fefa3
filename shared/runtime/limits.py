"""The limits a service process runs under, read from the environment: message and request
sizes, the busy server's queue and retry delay, the stop grace and downstream timeout, the ledger's
expiry sweep, server threads and stream bounds, and reconstruction's worker processes. Each
variable is declared, with its meaning, in shared.runtime.environment. Also the parsers every
setting of a number shares (``seconds``, ``seconds_setting``, ``bounded_integer``)."""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass


def env_text(env: Mapping[str, str], name: str, default: str) -> str:
    """The variable ``name``; unset or empty, ``default``."""
    value = env.get(name, "")
    return value if value != "" else default


def seconds(env: Mapping[str, str], name: str, default: float) -> float:
    """The variable ``name`` as a number of seconds (any number ``float`` reads, unchecked), else
    ``default``; a ValueError naming the variable when it is not a number."""
    text = env_text(env, name, str(default))
    try:
        return float(text)
    except ValueError:
        raise ValueError(f"{name} must be a number, not {text!r}") from None


def seconds_setting(env: Mapping[str, str], name: str, default: float, ceiling: float) -> float:
    """The variable ``name`` as a number of seconds in (0, ``ceiling``], else ``default``."""
    value = seconds(env, name, default)
    if not 0 < value <= ceiling:
        raise ValueError(f"{name} must be in (0, {ceiling:g}], not {value}")
    return value


def bounded_integer(env: Mapping[str, str], name: str, default: int, ceiling: int) -> int:
    """The variable ``name`` as an integer in 1..``ceiling``, else ``default``."""
    text = env_text(env, name, str(default))
    try:
        value = int(text)
    except ValueError:
        raise ValueError(f"{name} must be an integer, not {text!r}") from None
    if not 1 <= value <= ceiling:
        raise ValueError(f"{name} must be in 1..{ceiling}, not {value}")
    return value


# --- sizes, the busy server, stopping and downstream calls (Settings, the gateway, clients) -----

DEFAULT_MAX_MESSAGE_BYTES = 32 * 1024 * 1024
#: Requests of a method that uploads no bytes (no blob, checkpoint or raw response) are smaller:
#: a journal payload is at most 256 KiB (shared.runtime.gate).
DEFAULT_MAX_REQUEST_BYTES = 1024 * 1024
#: Calls a server queues beyond its busy threads before it answers SERVER_BUSY.
DEFAULT_MAX_QUEUED_CALLS = 32
#: The delay a SERVER_BUSY refusal asks the caller to wait before retrying.
DEFAULT_RETRY_AFTER_MS = 250
DEFAULT_GRACE_SECONDS = 10.0
DEFAULT_DOWNSTREAM_TIMEOUT_SECONDS = 30.0


# --- the ledger's scheduled expiry sweep -------------------------------------------------------

#: Seconds between the ledger's sweeps of queued requests past their lease (ADR 0039): how long an
#: expired request may still hold its place in the caps and its never-claimed recovery. Reads
#: show it expired at once whatever the interval.
DEFAULT_EXPIRY_SWEEP_SECONDS = 5.0


def expiry_sweep_seconds(env: Mapping[str, str] | None = None) -> float:
    """FORGE_EXPIRY_SWEEP_SECONDS, in (0, 3600]."""
    env = os.environ if env is None else env
    return seconds_setting(env, "FORGE_EXPIRY_SWEEP_SECONDS", DEFAULT_EXPIRY_SWEEP_SECONDS, 3600)


# --- server threads and journal followers ---------------------------------------------------

#: Threads of each service's gRPC server pool (shared.runtime.server.start_server).
DEFAULT_SERVER_THREADS = 32
#: Journal followers poll while they wait, each on a pool thread; at most this many at a time,
#: so the rest of the pool stays free for admissions, claims and commands.
DEFAULT_MAX_JOURNAL_FOLLOWERS = 8
#: The bound may be raised to at most half the pool (FORGE_SERVER_THREADS sets the pool).
MAX_JOURNAL_FOLLOWERS_CEILING = DEFAULT_SERVER_THREADS // 2


def server_threads(env: Mapping[str, str] | None = None) -> int:
    """FORGE_SERVER_THREADS: the gRPC server pool of a service (a ledger serving many followers
    needs more, each follower holds a pool thread)."""
    env = os.environ if env is None else env
    text = env_text(env, "FORGE_SERVER_THREADS", str(DEFAULT_SERVER_THREADS))
    try:
        threads = int(text)
    except ValueError:
        raise ValueError(f"FORGE_SERVER_THREADS must be an integer, not {text!r}") from None
    if threads < 2:
        raise ValueError(f"FORGE_SERVER_THREADS must be at least 2, not {threads}")
    return threads


def journal_follower_limit(env: Mapping[str, str] | None = None) -> int:
    """FORGE_MAX_JOURNAL_FOLLOWERS, checked to be in 1..half the server's thread pool."""
    env = os.environ if env is None else env
    text = env_text(env, "FORGE_MAX_JOURNAL_FOLLOWERS", str(DEFAULT_MAX_JOURNAL_FOLLOWERS))
    try:
        limit = int(text)
    except ValueError:
        raise ValueError(f"FORGE_MAX_JOURNAL_FOLLOWERS must be an integer, not {text!r}") from None
    threads = server_threads(env)
    if not 1 <= limit <= threads // 2:
        raise ValueError(
            f"FORGE_MAX_JOURNAL_FOLLOWERS must be in 1..{threads // 2} "
            f"(half of the {threads} server threads), not {limit}"
        )
    return limit


#: One caller (a principal) holds at most this many followers, so no single token takes every
#: slot (issue 45 §2); at most the follower limit.
DEFAULT_MAX_FOLLOWERS_PER_CALLER = 4
#: Concurrent streams that do not follow (a whole-journal StreamJournal, a streamed
#: ReadRunSnapshot): each holds a pool thread while its reader reads.
DEFAULT_MAX_JOURNAL_STREAMS = 8
#: A StreamJournal ends UNAVAILABLE STREAM_TIME_LIMIT after this long (the caller resumes from
#: the next_sequence it names), so no stream holds a pool thread for ever.
DEFAULT_MAX_STREAM_SECONDS = 900.0


@dataclass(frozen=True)
class StreamBounds:
    """What the ledger's streams may hold at once, and for how long (ADR 0033, issue 45 §2)."""

    followers: int = DEFAULT_MAX_JOURNAL_FOLLOWERS
    followers_per_caller: int = DEFAULT_MAX_FOLLOWERS_PER_CALLER
    streams: int = DEFAULT_MAX_JOURNAL_STREAMS
    max_stream_seconds: float = DEFAULT_MAX_STREAM_SECONDS

    def __post_init__(self) -> None:
        if min(self.followers, self.followers_per_caller, self.streams) < 1:
            raise ValueError("stream bounds must be at least 1")
        if self.max_stream_seconds <= 0:
            raise ValueError("the stream time limit must be positive")


def stream_bounds(env: Mapping[str, str] | None = None) -> StreamBounds:
    """FORGE_MAX_JOURNAL_FOLLOWERS, FORGE_MAX_FOLLOWERS_PER_CALLER (at most the first),
    FORGE_MAX_JOURNAL_STREAMS (at most half the server's threads) and FORGE_MAX_STREAM_SECONDS
    (in (0, 86400])."""
    env = os.environ if env is None else env
    followers = journal_follower_limit(env)
    per_caller_default = min(DEFAULT_MAX_FOLLOWERS_PER_CALLER, followers)
    return StreamBounds(
        followers=followers,
        followers_per_caller=bounded_integer(
            env, "FORGE_MAX_FOLLOWERS_PER_CALLER", per_caller_default, followers
        ),
        streams=bounded_integer(
            env, "FORGE_MAX_JOURNAL_STREAMS", DEFAULT_MAX_JOURNAL_STREAMS, server_threads(env) // 2
        ),
        max_stream_seconds=seconds_setting(
            env, "FORGE_MAX_STREAM_SECONDS", DEFAULT_MAX_STREAM_SECONDS, 86400
        ),
    )


# --- reconstruction's worker processes (ADR 0048) ----------------------------------------------

#: Worker processes that run the pinned SDK on callers' bytes, one computation each at a time.
DEFAULT_RECONSTRUCTION_WORKERS = 2
#: A computation stopped after this many seconds (wall time, and CPU time in the worker).
DEFAULT_RECONSTRUCTION_SECONDS = 10.0


@dataclass(frozen=True)
class ReconstructionBounds:
    workers: int = DEFAULT_RECONSTRUCTION_WORKERS
    max_seconds: float = DEFAULT_RECONSTRUCTION_SECONDS


def reconstruction_bounds(env: Mapping[str, str] | None = None) -> ReconstructionBounds:
    """FORGE_RECONSTRUCTION_WORKERS (1..64) and FORGE_RECONSTRUCTION_SECONDS (in (0, 600])."""
    env = os.environ if env is None else env
    return ReconstructionBounds(
        workers=bounded_integer(
            env, "FORGE_RECONSTRUCTION_WORKERS", DEFAULT_RECONSTRUCTION_WORKERS, 64
        ),
        max_seconds=seconds_setting(
            env, "FORGE_RECONSTRUCTION_SECONDS", DEFAULT_RECONSTRUCTION_SECONDS, 600
        ),
    )
