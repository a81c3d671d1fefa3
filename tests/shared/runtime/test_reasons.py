"""The reason catalogue covers every reason the code raises, and the documentation is generated
from it."""

from __future__ import annotations

import grpc
import pytest

from shared.continuity.idempotency import StoredAction, replay_or_conflict
from shared.continuity.reasons_doc import (
    ARCHITECTURE_DOC,
    ERRORS_DOC,
    architecture_with_table,
    errors_markdown,
)
from shared.continuity.refused_actions import REFUSAL_CLASSES
from shared.runtime.errors import (
    STATE_REFUSALS,
    Conflict,
    DomainError,
    ErrorKind,
    bare_status_error,
)
from shared.runtime.reasons import CATALOGUE, CODE_USES
from tests.shared.runtime.raised_reasons import raise_sites, sites_in

SITES = list(raise_sites())


SAMPLE = """
from shared.runtime.errors import FailedPrecondition, InvalidArgument, NotFound

_ORIGIN = {"origin": "client"}


def _refuse(reason, message, **metadata):
    raise InvalidArgument(reason, message, metadata={**_ORIGIN, **metadata})


def _held(reason, field):
    return FailedPrecondition(reason, "held", metadata={"field": field})


def check(value, found):
    if not found:
        raise NotFound("RUN_NOT_FOUND", "no run", metadata={"run_id": value})
    _refuse("FIELD_INVALID", "bad", field="x")
    raise _held("MIGRATION_FIELD_REFUSED", "/state")
    raise InvalidArgument("FIELD_INVALID" if value else "FIELD_REQUIRED", "bad")
    holds = [Hold("SIBLING_CALL_REFUSED", "call_1", "refused")]
"""


def test_the_scan_finds_every_form_of_raise_site() -> None:
    # Guards the scanner itself: a direct raise, a helper taking **metadata (keys followed
    # through **NAME), a helper with fixed metadata, a conditional reason, an indirect constructor.
    found = {(site.reason, site.kind, site.metadata_keys) for site in sites_in(SAMPLE, "sample.py")}
    assert found == {
        ("RUN_NOT_FOUND", ErrorKind.NOT_FOUND, frozenset({"run_id"})),
        ("FIELD_INVALID", ErrorKind.INVALID_ARGUMENT, frozenset({"origin", "field"})),
        ("MIGRATION_FIELD_REFUSED", ErrorKind.FAILED_PRECONDITION, frozenset({"field"})),
        ("FIELD_INVALID", ErrorKind.INVALID_ARGUMENT, frozenset()),
        ("FIELD_REQUIRED", ErrorKind.INVALID_ARGUMENT, frozenset()),
        ("SIBLING_CALL_REFUSED", ErrorKind.FAILED_PRECONDITION, frozenset({"element"})),
    }
    assert len(SITES) > 100, "the scan of services/ and shared/ found almost nothing"


def test_every_raised_reason_is_catalogued_under_the_code_of_its_class() -> None:
    missing = [str(site) for site in SITES if site.reason not in CATALOGUE]
    assert missing == [], (
        "uncatalogued reasons (add them to shared/runtime/reasons.py):\n" + "\n".join(missing)
    )
    wrong = [
        f"{site} (catalogued as {CATALOGUE[site.reason].code.name})"
        for site in SITES
        if CATALOGUE[site.reason].code is not site.kind
    ]
    assert wrong == [], "raised under another code than catalogued:\n" + "\n".join(wrong)


def test_every_raised_metadata_key_is_catalogued() -> None:
    extra = [
        f"{site}: {sorted(site.metadata_keys - set(CATALOGUE[site.reason].metadata_keys))}"
        for site in SITES
        if site.reason in CATALOGUE
        and not site.metadata_keys <= set(CATALOGUE[site.reason].metadata_keys)
    ]
    assert extra == [], "metadata keys missing from the catalogue:\n" + "\n".join(extra)


@pytest.mark.parametrize("id_field", ["request_id", "recovery_id"])
def test_the_idempotency_reasons_are_catalogued(id_field: str) -> None:
    stored = StoredAction(identity="alice", content_digest="a" * 64)
    for identity, digest in (("bob", "a" * 64), ("alice", "b" * 64)):
        with pytest.raises(Conflict) as conflict:
            replay_or_conflict(
                id_field=id_field,
                action_id="id-1",
                stored=stored,
                identity=identity,
                content_digest=digest,
            )
        reason = CATALOGUE.get(conflict.value.reason)
        assert reason is not None, f"{conflict.value.reason} is not catalogued"
        assert reason.code is ErrorKind.ALREADY_EXISTS
        assert set(conflict.value.metadata) <= set(reason.metadata_keys)


@pytest.mark.parametrize("id_field", ["recovery_id", "reconciliation_id"])
def test_conflicts_of_global_ids_say_that_they_are_global(id_field: str) -> None:
    """Recovery and reconciliation ids are unique across every run (the routes nest them under
    a run and request, so the answer must say so)."""
    stored = StoredAction(identity="alice", content_digest="a" * 64)
    for identity, digest in (("bob", "a" * 64), ("alice", "b" * 64)):
        with pytest.raises(Conflict) as conflict:
            replay_or_conflict(
                id_field=id_field,
                action_id="id-1",
                stored=stored,
                identity=identity,
                content_digest=digest,
            )
        assert "global: unique across every run" in conflict.value.message
        assert "global" in CATALOGUE[conflict.value.reason].meaning


def test_a_spent_recovery_is_its_own_catalogued_reason_naming_both_ids() -> None:
    """A recovery found by its request under another id: the request's one action is spent;
    the submitted id was never used, so nothing says it was "already submitted"."""
    stored = StoredAction("alice", "a" * 64, action_id="rec-1", spends="request req-1's one x")
    with pytest.raises(Conflict) as conflict:
        replay_or_conflict(
            id_field="recovery_id",
            action_id="rec-2",
            stored=stored,
            identity="bob",
            content_digest="b" * 64,
        )
    error = conflict.value
    assert error.reason == "RECOVERY_ALREADY_SPENT"
    assert error.metadata == {"recovery_id": "rec-2", "spent_by_recovery_id": "rec-1"}
    assert "already submitted" not in error.message and "never submitted" in error.message
    reason = CATALOGUE[error.reason]
    assert reason.code is ErrorKind.ALREADY_EXISTS
    assert set(error.metadata) <= set(reason.metadata_keys)


@pytest.mark.parametrize("code", [c for c in grpc.StatusCode if c is not grpc.StatusCode.OK])
def test_every_bare_status_reason_is_catalogued(code: grpc.StatusCode) -> None:
    error = bare_status_error(code)
    reason = CATALOGUE.get(error.reason)
    assert reason is not None, f"{error.reason} is not catalogued"
    assert reason.bare_status
    assert reason.code is error.kind


def test_the_catalogue_is_well_formed() -> None:
    for name, reason in CATALOGUE.items():
        assert name == reason.name
        assert reason.code in CODE_USES, f"{name}: {reason.code.name} has no documented use"
        assert reason.meaning and not reason.meaning.endswith("."), name
        assert list(reason.metadata_keys) == sorted(set(reason.metadata_keys)), name
        DomainError(name, reason.meaning)  # raises unless the name is UPPER_SNAKE


def test_the_documentation_is_generated_from_the_catalogue() -> None:
    hint = "run `python -m shared.continuity.reasons_doc --write` and commit the result"
    assert ERRORS_DOC.read_text(encoding="utf-8") == errors_markdown(), hint
    architecture = ARCHITECTURE_DOC.read_text(encoding="utf-8")
    assert architecture == architecture_with_table(architecture), hint


def test_every_classified_refusal_of_a_continuation_action_is_catalogued() -> None:
    """The reasons the handoff of a refused action classifies (ADR 0046) are reasons a caller
    can receive, each of a code whose refusals carry the handoff."""
    for reason in REFUSAL_CLASSES:
        assert reason in CATALOGUE, reason
        assert CATALOGUE[reason].code in STATE_REFUSALS, reason
