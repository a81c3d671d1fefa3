"""The one submit pipeline every admission-service workflow runs.

    validate → recompute the candidate → compare digests → refuse a held candidate → commit; on
    a refusal from recompute..commit, read back: a result stored under the key is replayed
    (or is a conflict) instead of the refusal.

No read before the candidate (ADR 0024): a repeat of a stored submission is refused on its way
(its candidate moved when the first one committed, or the owner of the state replays it inside
its commit), and the read back after the refusal answers it exactly as a read first would have.

A workflow (an invalid-read continuity version, later each recovery) plugs in through
:class:`Workflow`: it knows its request, its candidate, how its result is stored and how to
commit. The driver owns the order of the steps and the idempotency rule
(``shared.continuity.idempotency.replay_or_conflict``), so every workflow answers a repeat, a
conflict and a
lost race the same way. Nothing here performs I/O itself; workflows reach other services through
their own ports.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Generic, Protocol, TypeVar

from google.protobuf.message import Message

from services.admission.domain import HoldView, compare_digests, refuse_held
from shared.continuity.idempotency import StoredAction, replay_or_conflict
from shared.continuity.timeutil import utc_now
from shared.runtime.errors import DomainError


class Submission(Protocol):
    """What the driver reads from every workflow's (validated) request."""

    @property
    def action_id(self) -> str:
        """The caller-chosen idempotency key (a request id, a recovery id)."""
        ...

    @property
    def content_digest(self) -> str:
        """What makes two submissions under one key identical (the identity is compared
        separately)."""
        ...

    @property
    def digests(self) -> Mapping[str, str]:
        """The digests the caller copied from the candidate, by name."""
        ...


class Candidate(Protocol):
    """What the driver reads from every workflow's recomputed candidate."""

    @property
    def digests(self) -> Mapping[str, str]: ...

    @property
    def eligible(self) -> bool: ...

    @property
    def holds(self) -> Sequence[HoldView]: ...

    @property
    def handoff(self) -> Message | None:
        """The candidate's handoff payload; a refusal of the held candidate carries it."""
        ...


ResultT = TypeVar("ResultT")
ResultT_co = TypeVar("ResultT_co", covariant=True)
RequestT = TypeVar("RequestT", bound=Submission)
RequestT_contra = TypeVar("RequestT_contra", bound=Submission, contravariant=True)
CandidateT = TypeVar("CandidateT", bound=Candidate)


@dataclass(frozen=True)
class Stored(Generic[ResultT_co]):
    """A result already stored under an action's key, with what the idempotency rule compares."""

    result: ResultT_co
    action: StoredAction


@dataclass(frozen=True)
class Submitted(Generic[ResultT_co]):
    """A submission's answer: the stored result, and whether this submission created it."""

    result: ResultT_co
    created: bool


class Workflow(Protocol[RequestT_contra, CandidateT, ResultT_co]):
    """One kind of submission, plugged into :func:`submit`."""

    @property
    def id_field(self) -> str:
        """The name of the idempotency key's field (``request_id``, ``recovery_id``); the
        conflict reasons are derived from it."""
        ...

    def validate(self, request: RequestT_contra) -> None:
        """INVALID_ARGUMENT for a malformed request; nothing is read before this."""
        ...

    def read_back(self, request: RequestT_contra) -> Stored[ResultT_co] | None:
        """The result stored under the request's key, or None when there is none yet (asked
        only after a refusal)."""
        ...

    def candidate(self, request: RequestT_contra) -> CandidateT:
        """Recompute the candidate the request was decided on, as it is now."""
        ...

    def commit(
        self, request: RequestT_contra, identity: str, candidate: CandidateT
    ) -> Submitted[ResultT_co]:
        """Ask the owner of the state for the one atomic write (it re-checks idempotency)."""
        ...


def _replay(
    workflow: Workflow[RequestT, CandidateT, ResultT],
    request: RequestT,
    stored: Stored[ResultT],
    identity: str,
) -> Submitted[ResultT]:
    replay_or_conflict(
        id_field=workflow.id_field,
        action_id=request.action_id,
        stored=stored.action,
        identity=identity,
        content_digest=request.content_digest,
        now=utc_now(),
    )
    return Submitted(stored.result, created=False)


def submit(
    workflow: Workflow[RequestT, CandidateT, ResultT], request: RequestT, identity: str
) -> Submitted[ResultT]:
    """Run ``request`` of ``identity`` through ``workflow``; an identical repeat returns the
    stored result with ``created=False``."""
    workflow.validate(request)
    try:
        candidate = workflow.candidate(request)
        try:
            compare_digests(request.digests, candidate.digests)
        except DomainError as stale:
            # the candidate just read says what the moved state permits (ADR 0046)
            stale.details += (candidate.handoff,) if candidate.handoff is not None else ()
            raise
        if not candidate.eligible:
            raise refuse_held(candidate.holds, candidate.handoff)
        return workflow.commit(request, identity, candidate)
    except DomainError as refused:
        # A result may be stored under the key: this is a repeat of a submission that committed
        # before it, or while it was in flight. Its candidate then moved (stale, held, head or
        # claim refused), but the right answer is the stored result for an identical request and
        # a conflict for anything else, whatever the refusal was.
        stored = workflow.read_back(request)
        if stored is None:
            raise
        try:
            return _replay(workflow, request, stored, identity)
        except DomainError as conflict:
            # the conflict answers the same state: it keeps the handoff the refusal carried
            conflict.details += refused.details
            raise
