"""Versioned policy and content-addressed blobs through the real ledger service."""

from __future__ import annotations

import threading

import grpc
import pytest
from sqlalchemy import Engine, text

from forge.continuity.v1 import common_pb2, ledger_pb2, policy_pb2
from shared.continuity.canonical import sha256_digest
from tests.errors import expect_error
from tests.ledger.conftest import LedgerClients


def settings(**overrides: object) -> common_pb2.PolicySettings:
    fields: dict[str, object] = {"enabled": True, "window_seconds": 3600}
    fields.update(overrides)
    return common_pb2.PolicySettings(**fields)  # type: ignore[arg-type]


def test_default_policy_is_disabled_with_documented_bounds(ledger_server: LedgerClients) -> None:
    policy = ledger_server.policy("reader-token").GetPolicy(policy_pb2.GetPolicyRequest()).policy
    assert policy.revision == 1 and not policy.enabled
    assert (policy.per_run_ticket_limit, policy.pending_ticket_limit) == (50, 500)
    assert not (
        policy.allow_unavailable_source_observations
        or policy.allow_pre_admission_recovery
        or policy.allow_readonly_observation_recovery
    )
    assert policy.updated_by == "system" and policy.digest.startswith("sha256:")


def test_put_policy_writes_a_new_revision_and_keeps_every_old_one(
    ledger_server: LedgerClients,
) -> None:
    admin = ledger_server.policy()
    second = admin.PutPolicy(
        policy_pb2.PutPolicyRequest(expected_revision=1, settings=settings())
    ).policy
    assert (second.revision, second.enabled, second.window_seconds) == (2, True, 3600)
    assert (second.per_run_ticket_limit, second.pending_ticket_limit) == (50, 500)
    assert second.updated_by == "alice-admin"
    third = admin.PutPolicy(
        policy_pb2.PutPolicyRequest(
            expected_revision=2, settings=settings(enabled=False, per_run_ticket_limit=80)
        )
    ).policy
    assert third.revision == 3 and third.per_run_ticket_limit == 80
    reader = ledger_server.policy("reader-token")
    assert reader.GetPolicy(policy_pb2.GetPolicyRequest()).policy == third
    assert reader.GetPolicy(policy_pb2.GetPolicyRequest(revision=2)).policy == second
    listed = reader.ListPolicyRevisions(policy_pb2.ListPolicyRevisionsRequest()).policies
    assert [p.revision for p in listed] == [3, 2, 1]
    assert len({p.digest for p in listed}) == 3


def test_stale_policy_revision_is_aborted_and_writes_nothing(ledger_server: LedgerClients) -> None:
    admin = ledger_server.policy()
    admin.PutPolicy(policy_pb2.PutPolicyRequest(expected_revision=1, settings=settings()))
    error = expect_error(
        grpc.StatusCode.ABORTED,
        "POLICY_REVISION_STALE",
        lambda: admin.PutPolicy(
            policy_pb2.PutPolicyRequest(expected_revision=1, settings=settings(window_seconds=60))
        ),
    )
    assert error.metadata["current_revision"] == "2"
    assert admin.GetPolicy(policy_pb2.GetPolicyRequest()).policy.window_seconds == 3600


def test_concurrent_policy_writers_at_one_revision_produce_one_new_revision(
    ledger_server: LedgerClients,
) -> None:
    outcomes: list[grpc.StatusCode] = []
    lock = threading.Lock()
    barrier = threading.Barrier(8)

    def put(window: int) -> None:
        barrier.wait()
        try:
            ledger_server.policy().PutPolicy(
                policy_pb2.PutPolicyRequest(
                    expected_revision=1, settings=settings(window_seconds=window)
                )
            )
            code = grpc.StatusCode.OK
        except grpc.RpcError as error:
            code = error.code()  # type: ignore[attr-defined]
        with lock:
            outcomes.append(code)

    threads = [threading.Thread(target=put, args=(100 + i,)) for i in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert sorted(outcomes, key=str).count(grpc.StatusCode.OK) == 1
    assert set(outcomes) == {grpc.StatusCode.OK, grpc.StatusCode.ABORTED}
    listed = (
        ledger_server.policy("reader-token")
        .ListPolicyRevisions(policy_pb2.ListPolicyRevisionsRequest())
        .policies
    )
    assert [p.revision for p in listed] == [2, 1]


@pytest.mark.parametrize(
    ("overrides", "field"),
    [
        ({"window_seconds": 0}, "settings.window_seconds"),
        ({"window_seconds": 7201}, "settings.window_seconds"),
        ({"per_run_ticket_limit": -1}, "settings.per_run_ticket_limit"),
        ({"pending_ticket_limit": -5}, "settings.pending_ticket_limit"),
    ],
)
def test_invalid_policy_settings_are_refused(
    ledger_server: LedgerClients, overrides: dict[str, int], field: str
) -> None:
    admin = ledger_server.policy()
    error = expect_error(
        grpc.StatusCode.INVALID_ARGUMENT,
        "POLICY_INVALID",
        lambda: admin.PutPolicy(
            policy_pb2.PutPolicyRequest(expected_revision=1, settings=settings(**overrides))
        ),
    )
    assert [v.field for v in error.field_violations] == [field]
    assert admin.GetPolicy(policy_pb2.GetPolicyRequest()).policy.revision == 1


def test_only_factory_administrators_may_put_policy(ledger_server: LedgerClients) -> None:
    for token in (
        "operator-token",
        "reader-token",
        "writer-token",
        "worker-token",
        "service-token",
    ):
        expect_error(
            grpc.StatusCode.PERMISSION_DENIED,
            "ROLE_REQUIRED",
            lambda token=token: ledger_server.policy(token).PutPolicy(
                policy_pb2.PutPolicyRequest(expected_revision=1, settings=settings())
            ),
        )
    assert ledger_server.policy().GetPolicy(policy_pb2.GetPolicyRequest()).policy.revision == 1


def test_unknown_policy_revision_is_not_found(ledger_server: LedgerClients) -> None:
    expect_error(
        grpc.StatusCode.NOT_FOUND,
        "POLICY_REVISION_NOT_FOUND",
        lambda: ledger_server.policy("reader-token").GetPolicy(
            policy_pb2.GetPolicyRequest(revision=9)
        ),
    )


def test_blob_put_is_idempotent_and_content_addressed(
    ledger_server: LedgerClients, engine: Engine
) -> None:
    writer = ledger_server.ledger()
    content = b'{"checkpoint": 1}'
    first = writer.PutBlob(
        ledger_pb2.PutBlobRequest(content=content, media_type="application/json")
    )
    again = writer.PutBlob(ledger_pb2.PutBlobRequest(content=content, media_type="text/plain"))
    assert first.digest == again.digest == sha256_digest(content)
    assert first.created and not again.created and first.size == len(content)
    fetched = ledger_server.ledger("reader-token").GetBlob(
        ledger_pb2.GetBlobRequest(digest=first.digest)
    )
    # The first put's bytes and media type stand; a repeat never changes them.
    assert (fetched.content, fetched.media_type) == (content, "application/json")
    with engine.connect() as connection:
        assert connection.execute(text("SELECT count(*) FROM blobs")).scalar_one() == 1


def test_blob_refusals(ledger_server: LedgerClients, engine: Engine) -> None:
    writer = ledger_server.ledger()
    expect_error(
        grpc.StatusCode.INVALID_ARGUMENT,
        "BLOB_DIGEST_MISMATCH",
        lambda: writer.PutBlob(
            ledger_pb2.PutBlobRequest(content=b"abc", expected_digest="sha256:" + "0" * 64)
        ),
    )
    expect_error(
        grpc.StatusCode.NOT_FOUND,
        "BLOB_NOT_FOUND",
        lambda: writer.GetBlob(ledger_pb2.GetBlobRequest(digest="sha256:" + "1" * 64)),
    )
    expect_error(
        grpc.StatusCode.INVALID_ARGUMENT,
        "FIELD_INVALID",
        lambda: writer.GetBlob(ledger_pb2.GetBlobRequest(digest="md5:abc")),
    )
    expect_error(
        grpc.StatusCode.PERMISSION_DENIED,
        "ROLE_REQUIRED",
        lambda: ledger_server.ledger("reader-token").PutBlob(
            ledger_pb2.PutBlobRequest(content=b"x")
        ),
    )
    with engine.connect() as connection:
        assert connection.execute(text("SELECT count(*) FROM blobs")).scalar_one() == 0


@pytest.mark.parametrize(
    ("request_fields", "fields"),
    [
        ({"page_size": -1}, ["page_size"]),
        ({"before_revision": -2}, ["before_revision"]),
        ({"page_size": -5, "before_revision": -1}, ["before_revision", "page_size"]),
    ],
)
def test_negative_policy_paging_is_an_invalid_argument(
    ledger_server: LedgerClients, request_fields: dict[str, int], fields: list[str]
) -> None:
    """A negative page size once became ``LIMIT -n`` (INTERNAL on PostgreSQL)."""
    error = expect_error(
        grpc.StatusCode.INVALID_ARGUMENT,
        "FIELD_INVALID",
        lambda: ledger_server.policy("reader-token").ListPolicyRevisions(
            policy_pb2.ListPolicyRevisionsRequest(**request_fields)  # type: ignore[arg-type]
        ),
    )
    assert [v.field for v in error.field_violations] == fields


def test_policy_revisions_page_newest_first(ledger_server: LedgerClients) -> None:
    admin = ledger_server.policy()
    for revision in (1, 2, 3):
        admin.PutPolicy(
            policy_pb2.PutPolicyRequest(expected_revision=revision, settings=settings())
        )
    reader = ledger_server.policy("reader-token")
    first = reader.ListPolicyRevisions(policy_pb2.ListPolicyRevisionsRequest(page_size=2))
    assert [p.revision for p in first.policies] == [4, 3]
    rest = reader.ListPolicyRevisions(policy_pb2.ListPolicyRevisionsRequest(before_revision=3))
    assert [p.revision for p in rest.policies] == [2, 1]
