"""Bounded journal followers, fed by one shared poller per ledger process.

A follower first reads the entries it asked for up to the head itself (pages, as a plain stream
does), then waits on the poller's feed of its run. The poller reads the new entries of every
followed run in one statement per tick (``entries_after``) and fans them out to the waiting
followers, so a hundred followers of a run cost what one does. No LISTEN/NOTIFY: PgBouncer in
transaction mode does not carry it.

A stream yields what it has ready at once (a page of the catch-up, what one poll found), cut into
batches of at most the caller's number of entries and about ``MESSAGE_PAYLOAD_BYTES`` of payloads:
a caller that sends a batch a message sends one message a poll to a follower of a busy run.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager

from services.ledger.domain.journal import StoredEntry
from services.ledger.repository import journal_reads
from services.ledger.transactions.base import LedgerContext, check_not_negative
from services.ledger.transactions.journal import batches, pages_from
from services.ledger.transactions.stream_slots import CallerSlots, Refusals
from shared.runtime.errors import Unavailable
from shared.runtime.limits import StreamBounds

FOLLOW_POLL_SECONDS = 0.2
# Rows one poll reads at most; a full page is followed by the next poll at once.
POLL_PAGE = 1000
# The newest entries a feed keeps for followers still delivering earlier ones; a follower that
# falls further behind reads its missing entries itself.
FEED_BUFFER = 1000
# A batch holds at most this many entries (a larger request is read as this many), and its
# payloads at most about journal.MESSAGE_PAYLOAD_BYTES.
MAX_BATCH_ENTRIES = 1000

_LOG = logging.getLogger("forge.ledger")


class _Feed:
    """What the poller has read of one followed run: the contiguous entries up to ``cursor``
    (the newest ``FEED_BUFFER`` or more of them), and how many followers wait on it."""

    def __init__(self, cursor: int) -> None:
        self.cursor = cursor
        self.entries: list[StoredEntry] = []
        self.followers = 0

    def since(self, next_sequence: int) -> list[StoredEntry] | None:
        """The entries from ``next_sequence`` up to the cursor ([] when there are none yet);
        None when the feed no longer holds ``next_sequence``."""
        if next_sequence > self.cursor:
            return []
        if not self.entries or self.entries[0].sequence > next_sequence:
            return None
        return self.entries[next_sequence - self.entries[0].sequence :]

    def extend(self, entry: StoredEntry) -> None:
        self.entries.append(entry)
        self.cursor = entry.sequence
        if len(self.entries) > 2 * FEED_BUFFER:
            del self.entries[: len(self.entries) - FEED_BUFFER]


_FOLLOWER_REFUSALS = Refusals(
    "journal followers", "JOURNAL_FOLLOWERS_EXHAUSTED", "JOURNAL_FOLLOWERS_PER_CALLER_EXHAUSTED"
)
_STREAM_REFUSALS = Refusals(
    "journal streams", "JOURNAL_STREAMS_EXHAUSTED", "JOURNAL_STREAMS_PER_CALLER_EXHAUSTED"
)


class JournalFollowers:
    """The follower slots and the poller that feeds them, and the slots of the streams that do
    not follow (a whole-journal stream, a streamed snapshot). Each such call holds a server
    thread while it runs, and the server's thread pool is bounded; beyond a bound, in all or for
    one caller, a call is refused at once, so these calls can never occupy the threads that
    admissions, claims and commands need. No stream runs longer than ``max_stream_seconds``."""

    def __init__(self, bounds: StreamBounds, context: LedgerContext) -> None:
        self._context = context
        self.slots = CallerSlots(bounds.followers, bounds.followers_per_caller, _FOLLOWER_REFUSALS)
        # A caller holds at most half the streams (at least one).
        self.streams = CallerSlots(bounds.streams, max(1, bounds.streams // 2), _STREAM_REFUSALS)
        self.max_stream_seconds = bounds.max_stream_seconds
        # Guards the feeds and the poller; followers wait on it for the poller's next tick.
        self._changed = threading.Condition()
        self._feeds: dict[str, _Feed] = {}
        self._poller: threading.Thread | None = None
        # Polls made, and polls that failed (a follower then reads itself, raising the error).
        self.polls = 0
        self.failures = 0

    @property
    def limit(self) -> int:
        return self.slots.limit

    @property
    def in_use(self) -> int:
        """Followers open now (the metrics gauge beside the limit)."""
        return self.slots.in_use

    def wake(self) -> None:
        """Wake every waiting follower (a call ended: its follower stops without waiting out
        the tick)."""
        with self._changed:
            self._changed.notify_all()

    # --- feeds --------------------------------------------------------------------------------

    @contextmanager
    def _subscribed(self, run_id: str, next_sequence: int) -> Iterator[_Feed]:
        with self._changed:
            feed = self._feeds.get(run_id)
            if feed is None:
                feed = self._feeds[run_id] = _Feed(next_sequence - 1)
            elif feed.since(next_sequence) is None:
                # Behind what the feed holds: the feed restarts from here (followers further on
                # skip what they already delivered), so no follower polls on its own.
                feed.cursor, feed.entries = next_sequence - 1, []
            feed.followers += 1
            if self._poller is None:
                self._poller = threading.Thread(
                    target=self._poll, name="ledger-journal-poller", daemon=True
                )
                self._poller.start()
        try:
            yield feed
        finally:
            with self._changed:
                feed.followers -= 1
                if feed.followers == 0 and self._feeds.get(run_id) is feed:
                    del self._feeds[run_id]

    def _poll(self) -> None:
        idle = threading.Event()  # never set: a sleep between ticks
        while True:
            with self._changed:
                if not self._feeds:
                    self._poller = None
                    return
                cursors = {run_id: feed.cursor for run_id, feed in self._feeds.items()}
            try:
                with self._context.read() as connection:
                    entries = journal_reads.entries_after(connection, cursors, POLL_PAGE)
            except Exception:  # noqa: BLE001 - every follower re-reads itself and sees the error
                _LOG.warning("the journal followers' poll failed", exc_info=True)
                entries = None
            with self._changed:
                self.polls += 1
                if entries is None:
                    self.failures += 1
                for entry in entries or ():
                    feed = self._feeds.get(entry.run_id)
                    # A feed restarted or dropped since the cursors were taken skips the rows.
                    if feed is not None and entry.sequence == feed.cursor + 1:
                        feed.extend(entry)
                self._changed.notify_all()
            if entries is None or len(entries) < POLL_PAGE:
                idle.wait(FOLLOW_POLL_SECONDS)

    def follow(
        self, run_id: str, next_sequence: int, is_active: Callable[[], bool]
    ) -> Iterator[list[StoredEntry]]:
        """Entries of ``run_id`` from ``next_sequence`` on, as the poller reads them, while the
        caller is active (the caller has read up to the head already): each list what was
        ready at once, never empty."""
        with self._subscribed(run_id, next_sequence) as feed:
            while is_active():
                with self._changed:
                    failures = self.failures
                    batch = feed.since(next_sequence)
                    if batch == []:
                        self._changed.wait(FOLLOW_POLL_SECONDS)
                        batch = feed.since(next_sequence)
                    failed = self.failures != failures
                ready: Iterable[list[StoredEntry]] = [batch] if batch else ()
                if batch is None or failed:
                    # Fell behind the feed, or a poll failed: read directly (raising if the
                    # database still fails), then continue from the feed.
                    ready = pages_from(self._context, run_id, next_sequence)
                for entries in ready:
                    if not is_active():
                        return
                    yield entries
                    next_sequence = entries[-1].sequence + 1


def stream(
    context: LedgerContext,
    followers: JournalFollowers,
    run_id: str,
    from_sequence: int,
    *,
    caller: str,
    follow: bool,
    is_active: Callable[[], bool],
    batch_entries: int = 0,
) -> Iterator[list[StoredEntry]]:
    """Entries from ``from_sequence``; with ``follow``, then the new ones as they are appended,
    while the caller is active (a cancelled or expired follower stops within one tick, at once
    when its call's end wakes the followers). They come in batches, consecutive and in order,
    each of what was ready at once and at most ``batch_entries`` (0: ``MAX_BATCH_ENTRIES``).
    The call holds a follower slot or a stream slot of ``caller``'s; past the stream time limit
    it ends UNAVAILABLE ``STREAM_TIME_LIMIT`` naming the sequence to resume from."""
    check_not_negative(max_entries_per_message=batch_entries)
    limit = min(batch_entries or MAX_BATCH_ENTRIES, MAX_BATCH_ENTRIES)
    clock = _StreamClock(followers.max_stream_seconds, is_active)
    slots = followers.slots if follow else followers.streams
    with slots.hold(caller):
        next_sequence = max(from_sequence, 1)
        for page in pages_from(context, run_id, next_sequence):
            for batch in batches(page, limit):
                clock.check(batch[0].sequence)
                yield batch
            next_sequence = page[-1].sequence + 1
        if not follow:
            return
        for ready in followers.follow(run_id, next_sequence, clock.active):
            for batch in batches(ready, limit):
                yield batch
            next_sequence = ready[-1].sequence + 1
        clock.check(next_sequence)


class _StreamClock:
    """When a stream started, and whether its time is up: the follower's wait stops at the time
    limit as it does when the caller goes away, and the stream then ends with the cursor."""

    def __init__(self, max_seconds: float, is_active: Callable[[], bool]) -> None:
        self._max_seconds = max_seconds
        self._ends = time.monotonic() + max_seconds
        self._is_active = is_active

    def active(self) -> bool:
        return self._is_active() and time.monotonic() < self._ends

    def check(self, next_sequence: int) -> None:
        """UNAVAILABLE STREAM_TIME_LIMIT once the limit has passed (``next_sequence``: the first
        entry the stream did not deliver)."""
        if time.monotonic() >= self._ends:
            raise Unavailable(
                "STREAM_TIME_LIMIT",
                f"the stream reached the ledger's {self._max_seconds:g} s limit; resume it from "
                f"sequence {next_sequence}",
                metadata={
                    "max_seconds": f"{self._max_seconds:g}",
                    "next_sequence": str(next_sequence),
                },
            )
