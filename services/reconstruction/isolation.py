"""The pinned SDK's work on a caller's bytes, run in worker processes with a time and CPU bound
(ADR 0048).

Reconstruction parses and replays caller-supplied bytes through the pinned SDK; some inputs cost
far more than they are worth (20,000 tool calls in one 2.3 MiB response took 14.6 s of analysis,
quadratic in the calls). So every computation runs in one of a few long-lived worker processes:

- the caller's deadline is honoured *during* the work: the service waits for the answer only
  while the caller does, then kills the worker: ``DEADLINE_EXCEEDED CALL_DEADLINE_PASSED`` or
  ``CANCELLED CALL_ABANDONED``;
- no computation runs longer than ``max_seconds`` of wall time (``RESOURCE_EXHAUSTED
  RECONSTRUCTION_TIME_LIMIT``, the worker killed), and the kernel ends a worker that used more
  than ``max_seconds`` of CPU on one computation (``RLIMIT_CPU``, raised before each one), so a
  computation that spins is stopped whoever waits for it;
- a stopped worker is replaced in the background; the other workers serve the other callers
  meanwhile, and a caller waits for a free worker only as long as its deadline allows.

Workers are spawned (not forked: the server process runs gRPC's threads) and import the
reconstruction library before they report ready. A computation crosses to a worker and its result
back pickled over the worker's own pipe (both ends are this service's code; the caller's bytes
travel as ``bytes``); a domain refusal crosses as itself (``DomainError`` pickles its reason,
message and details). The workers bound time and CPU; they are not a security sandbox.
"""

from __future__ import annotations

import copyreg
import io
import logging
import math
import multiprocessing
import pickle
import queue
import resource
import signal
import threading
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass
from multiprocessing.connection import Connection
from multiprocessing.process import BaseProcess
from types import MappingProxyType
from typing import Any, Protocol, TypeVar, cast

from shared.runtime.deadline import abandon_if_gone
from shared.runtime.errors import DomainError, ResourceExhausted

T = TypeVar("T")

_LOG = logging.getLogger("forge.reconstruction")
#: How often a waiting call asks whether its caller still waits.
_POLL_SECONDS = 0.05
#: A worker that has not imported the library in this long is replaced (a broken install).
_READY_SECONDS = 120.0


def _dumps(value: object) -> bytes:
    """Pickle ``value``; the library's results hold read-only mappings (MappingProxyType), which
    pickle as the dictionaries they show."""
    buffer = io.BytesIO()
    pickler = pickle.Pickler(buffer, protocol=pickle.HIGHEST_PROTOCOL)
    pickler.dispatch_table = copyreg.dispatch_table.copy()
    pickler.dispatch_table[MappingProxyType] = lambda proxy: (_read_only, (dict(proxy),))
    pickler.dump(value)
    return buffer.getvalue()


def _read_only(members: dict[str, Any]) -> MappingProxyType[str, Any]:
    return MappingProxyType(members)


def _serve(connection: Connection) -> None:
    """A worker process: import the library, say ready, then run computations one at a time,
    each under a CPU limit of ``cpu_seconds`` more than the worker has used so far."""
    import services.reconstruction.domain  # noqa: F401 - the import is the warm-up

    connection.send_bytes(_dumps("ready"))
    _, hard = resource.getrlimit(resource.RLIMIT_CPU)
    while True:
        try:
            function, args, cpu_seconds = pickle.loads(connection.recv_bytes())  # noqa: S301 - ours
        except EOFError:
            return
        usage = resource.getrusage(resource.RUSAGE_SELF)
        soft = math.ceil(usage.ru_utime + usage.ru_stime + cpu_seconds)
        if hard != resource.RLIM_INFINITY:
            soft = min(soft, hard)
        resource.setrlimit(resource.RLIMIT_CPU, (soft, hard))
        try:
            outcome: tuple[str, object] = ("answer", function(*args))
        except DomainError as refusal:
            outcome = ("refusal", refusal)
        except Exception as failure:  # noqa: BLE001 - reported to the service, which logs it
            outcome = ("failure", f"{type(failure).__name__}: {failure}")
        try:
            answer = _dumps(outcome)
        except Exception as failure:  # noqa: BLE001 - a result that cannot cross is a bug
            answer = _dumps(("failure", f"the answer cannot be sent: {failure}"))
        connection.send_bytes(answer)


class Runner(Protocol):
    """Where the library's computations run."""

    def run(self, function: Callable[..., T], *args: Any) -> T: ...


class InProcessRunner:
    """The computation in the calling thread, the deadline checked only before it starts (no
    bound during it): for tests that patch the library in their own process, which a worker
    process would not see."""

    def run(self, function: Callable[..., T], *args: Any) -> T:
        abandon_if_gone()
        return function(*args)


@dataclass
class _Worker:
    process: BaseProcess
    connection: Connection

    def stop(self) -> None:
        if self.process.is_alive():
            self.process.kill()
        self.process.join(timeout=5)
        self.connection.close()


class WorkerFailed(RuntimeError):
    """A worker died or failed in a way that is not the caller's bound (a bug: INTERNAL)."""


def time_limit_reached(max_seconds: float, bound: str) -> ResourceExhausted:
    return ResourceExhausted(
        "RECONSTRUCTION_TIME_LIMIT",
        f"the computation on these bytes reached the service's {max_seconds:g} s {bound} limit "
        "and was stopped; the same bytes will be stopped again",
        metadata={"max_seconds": f"{max_seconds:g}", "bound": bound},
    )


class IsolatedRunner:
    """``workers`` processes, each running one computation at a time within ``max_seconds``."""

    def __init__(self, workers: int, max_seconds: float, cpu_seconds: float | None = None) -> None:
        """``cpu_seconds``: the CPU limit of one computation (default ``max_seconds``)."""
        if workers < 1 or max_seconds <= 0 or (cpu_seconds is not None and cpu_seconds <= 0):
            raise ValueError("at least one worker and positive limits")
        self.workers = workers
        self.max_seconds = max_seconds
        self.cpu_seconds = max_seconds if cpu_seconds is None else cpu_seconds
        self._context = multiprocessing.get_context("spawn")
        self._idle: queue.Queue[_Worker] = queue.Queue()
        self._lock = threading.Lock()
        self._closed = False
        # Computations stopped (their workers replaced), by the reason the caller was given
        # (WORKER_FAILED for a worker that died or a fault on the pipe).
        self.stopped_by: Counter[str] = Counter()
        # Computations running now.
        self.running = 0
        for _ in range(workers):
            self._start_worker()

    def _start_worker(self) -> None:
        """Spawn a worker and make it idle once it is ready (on a thread: a stopped call answers
        at once, and the spawn's import takes a second or two)."""

        def start() -> None:
            try:
                worker = self._spawn()
            except Exception:  # noqa: BLE001 - logged; a worker is started again
                _LOG.exception("a reconstruction worker could not be spawned")
                worker = None
            with self._lock:
                closed = self._closed
            if worker is not None and not closed:
                self._idle.put(worker)
                return
            if worker is not None:
                worker.stop()
            if not closed:
                _LOG.error("a reconstruction worker did not start; starting another")
                time.sleep(1.0)  # a broken install does not spin
                self._start_worker()

        threading.Thread(target=start, name="reconstruction-worker-start", daemon=True).start()

    def _spawn(self) -> _Worker | None:
        """A new worker once it reports ready, or None (stopped) if it does not."""
        receiver, sender = self._context.Pipe(duplex=True)
        process = self._context.Process(
            target=_serve, args=(sender,), name="reconstruction-worker", daemon=True
        )
        process.start()
        sender.close()
        worker = _Worker(process, receiver)
        try:
            ready = receiver.poll(_READY_SECONDS) and pickle.loads(receiver.recv_bytes())  # noqa: S301
        except EOFError:
            ready = False
        if ready == "ready":
            return worker
        worker.stop()
        return None

    @property
    def idle(self) -> int:
        """Workers started and free now."""
        return self._idle.qsize()

    def run(self, function: Callable[..., T], *args: Any) -> T:
        """``function(*args)`` in a worker (``function`` a module-level function, ``args``
        picklable): its answer, or its DomainError raised here; stopped at the caller's deadline
        or cancellation, or at ``max_seconds``."""
        worker = self._take()
        with self._lock:
            self.running += 1
        try:
            worker.connection.send_bytes(_dumps((function, args, self.cpu_seconds)))
            kind, value = self._wait(worker)
        except BaseException as stopped:
            self._replace(worker, stopped)
            raise
        finally:
            with self._lock:
                self.running -= 1
        self._idle.put(worker)
        if kind == "answer":
            return cast(T, value)
        if kind == "refusal":
            raise cast(DomainError, value)
        raise WorkerFailed(f"the reconstruction worker failed: {value}")

    def _take(self) -> _Worker:
        """A free worker, waited for while the caller waits."""
        while True:
            abandon_if_gone()
            try:
                return self._idle.get(timeout=_POLL_SECONDS)
            except queue.Empty:
                continue

    def _wait(self, worker: _Worker) -> tuple[str, object]:
        ends = time.monotonic() + self.max_seconds
        while not worker.connection.poll(_POLL_SECONDS):
            abandon_if_gone()
            if time.monotonic() >= ends:
                raise time_limit_reached(self.max_seconds, "time")
        try:
            return cast(tuple[str, object], pickle.loads(worker.connection.recv_bytes()))  # noqa: S301
        except EOFError:
            worker.process.join(timeout=5)
            if worker.process.exitcode == -signal.SIGXCPU:
                raise time_limit_reached(self.cpu_seconds, "CPU") from None
            raise WorkerFailed(
                f"the reconstruction worker exited ({worker.process.exitcode})"
            ) from None

    @property
    def stopped(self) -> int:
        """Computations stopped, whatever the reason (each worker replaced)."""
        with self._lock:
            return sum(self.stopped_by.values())

    def _replace(self, worker: _Worker, stopped: BaseException) -> None:
        reason = stopped.reason if isinstance(stopped, DomainError) else "WORKER_FAILED"
        with self._lock:
            self.stopped_by[reason] += 1
        worker.stop()
        self._start_worker()

    def close(self) -> None:
        """Stop every idle worker (busy ones stop with their calls)."""
        with self._lock:
            self._closed = True
        while True:
            try:
                self._idle.get_nowait().stop()
            except queue.Empty:
                return
