"""The invalid-read continuity workflow over an in-memory port, and the servicer's route table."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field, replace

import pytest

from services.admission.driver import Stored, Submitted, submit
from services.admission.servicer import binding, routes
from services.admission.workflows.invalid_read import (
    AdmissionKey,
    CandidateProof,
    ContinuityRequest,
    InvalidReadCandidate,
    InvalidReadContinuity,
)
from shared.continuity.canonical import sha256_digest
from shared.continuity.commit_admission import CommitAdmission
from shared.continuity.derived_checkpoint import DerivedCheckpoint
from shared.continuity.idempotency import StoredAction
from shared.contract.terms import DIGEST_NAMES, VERSIONS
from shared.runtime.errors import FailedPrecondition, InvalidArgument, NotFound
from tests.support import admission_downstream

DIGESTS = {name: "sha256:" + str(index) * 64 for index, name in enumerate(DIGEST_NAMES)}
DERIVED = sha256_digest(b"derived")
WITNESS = "sha256:" + "f" * 64


def candidate(version: int = 1, derived: str = DERIVED) -> InvalidReadCandidate:
    return InvalidReadCandidate(
        run_id="run-1",
        eligible=True,
        version=version,
        digests=DIGESTS,
        holds=(),
        policy_revision=3,
        journal_head_hash="sha256:" + "e" * 64,
        proof=CandidateProof("sha256:response", derived, WITNESS),
        derived=DerivedCheckpoint(b"derived", DERIVED, WITNESS),
    )


@dataclass
class FakePort:
    found: InvalidReadCandidate = field(default_factory=candidate)
    lookup_refusal: NotFound | None = None
    asked: list[tuple[str, int]] = field(default_factory=list)
    committed: list[CommitAdmission] = field(default_factory=list)

    def stored_ticket(self, key: AdmissionKey) -> Stored[str]:
        if self.lookup_refusal is not None:
            raise self.lookup_refusal
        if not self.committed:
            raise NotFound("ADMISSION_NOT_FOUND", "no such admission")
        first = self.committed[0]
        return Stored("ticket", StoredAction(first.operator_identity, first.request_content_digest))

    def invalid_read_candidate(self, run_id: str, version: int) -> InvalidReadCandidate:
        self.asked.append((run_id, version))
        return self.found

    def commit(self, admission: CommitAdmission) -> Submitted[str]:
        if self.committed:  # the ledger replays an identical repeat inside its commit (9.2)
            return Submitted("ticket", created=False)
        self.committed.append(admission)
        return Submitted("ticket", created=True)


def request(version: int = 1, **overrides: object) -> ContinuityRequest:
    fields: dict[str, object] = {
        "run_id": "run-1",
        "request_id": "req-1",
        "version": version,
        "valid_for_seconds": 1800,
        "digests": DIGESTS,
        "acknowledgements": dict.fromkeys(VERSIONS[version].acknowledgements, True),
    }
    fields.update(overrides)
    return ContinuityRequest(**fields)  # type: ignore[arg-type]


@pytest.mark.parametrize("version", sorted(VERSIONS))
def test_each_version_commits_the_derived_checkpoint_its_candidate_proved(version: int) -> None:
    port = FakePort(found=candidate(version))
    workflow = InvalidReadContinuity(VERSIONS[version], port)
    assert submit(workflow, request(version), "olga") == Submitted("ticket", created=True)
    assert port.asked == [("run-1", version)]
    [commit] = port.committed
    assert (commit.version, commit.operator_identity) == (version, "olga")
    assert commit.request_content_digest == request(version).content_digest
    assert commit.derived_checkpoint == b"derived"
    assert (commit.derived_checkpoint_digest, commit.witness_digest) == (DERIVED, WITNESS)
    assert commit.consumed_response_digest == "sha256:response"
    # The identical repeat gets the stored ticket; nothing is committed again.
    assert submit(workflow, request(version), "olga") == Submitted("ticket", created=False)
    assert len(port.committed) == 1


def test_each_route_requires_exactly_its_versions_acknowledgements() -> None:
    v2_only = "acknowledge_unavailable_source_observations"
    workflow = InvalidReadContinuity(VERSIONS[2], FakePort(found=candidate(2)))
    acknowledgements = {**request(2).acknowledgements, v2_only: False}
    with pytest.raises(InvalidArgument) as refused:
        workflow.validate(request(2, acknowledgements=acknowledgements))
    assert refused.value.reason == "ACKNOWLEDGEMENT_REQUIRED"
    assert refused.value.metadata == {"missing": v2_only}
    assert v2_only not in VERSIONS[1].acknowledgements


@pytest.mark.parametrize(
    ("version", "digest"),
    [
        (1, "sha256:30e7cf4c634646de7cd8aa982beee01772a4ff01b4e9cde9e6ef5bb28c4585e7"),
        (2, "sha256:ac38966b6251224bf0c97082dac6e7c9f663b9d9762356e87d9e4179f4a55482"),
    ],
)
def test_the_content_digest_keeps_its_stored_value(version: int, digest: str) -> None:
    # Stored tickets carry this digest: an identical request must keep producing it.
    assert request(version).content_digest == digest


def test_a_candidate_proving_another_version_is_refused() -> None:
    port = FakePort(found=candidate(version=2))
    with pytest.raises(FailedPrecondition) as refused:
        submit(InvalidReadContinuity(VERSIONS[1], port), request(), "olga")
    assert refused.value.reason == "CANDIDATE_VERSION_MISMATCH"
    assert refused.value.metadata == {"candidate_version": "2"}
    assert port.committed == []


def test_a_reconstruction_other_than_the_proved_one_is_refused() -> None:
    port = FakePort(
        found=replace(
            candidate(), proof=replace(candidate().proof, derived_checkpoint_digest="sha256:other")
        )
    )
    with pytest.raises(FailedPrecondition) as refused:
        submit(InvalidReadContinuity(VERSIONS[1], port), request(), "olga")
    assert refused.value.reason == "RECONSTRUCTION_MISMATCH"
    assert refused.value.metadata == {"candidate": "sha256:other", "reconstructed": DERIVED}
    assert port.committed == []


@pytest.mark.parametrize(
    "sent",
    [
        # bytes that do not hash to the digest sent with them and proved
        DerivedCheckpoint(b"altered", DERIVED, WITNESS),
        # a witness other than the proved one
        DerivedCheckpoint(b"derived", DERIVED, "sha256:" + "0" * 64),
    ],
)
def test_a_derived_checkpoint_other_than_the_proved_one_is_refused(
    sent: DerivedCheckpoint,
) -> None:
    port = FakePort(found=replace(candidate(), derived=sent))
    with pytest.raises(FailedPrecondition) as refused:
        submit(InvalidReadContinuity(VERSIONS[1], port), request(), "olga")
    assert refused.value.reason == "RECONSTRUCTION_MISMATCH"
    assert refused.value.metadata == {
        "candidate": DERIVED,
        "reconstructed": sha256_digest(sent.content),
    }
    assert port.committed == []


def test_an_eligible_candidate_without_its_derived_checkpoint_is_refused() -> None:
    port = FakePort(found=replace(candidate(), derived=None))
    with pytest.raises(FailedPrecondition) as refused:
        submit(InvalidReadContinuity(VERSIONS[1], port), request(), "olga")
    assert refused.value.reason == "DERIVED_CHECKPOINT_MISSING"
    assert refused.value.metadata == {"digest": DERIVED}
    assert port.committed == []


def test_only_admission_not_found_means_nothing_is_stored() -> None:
    other = NotFound("RUN_NOT_FOUND", "no such run")
    workflow = InvalidReadContinuity(VERSIONS[1], FakePort(lookup_refusal=other))
    with pytest.raises(NotFound) as refused:
        workflow.read_back(request())
    assert refused.value is other
    assert InvalidReadContinuity(VERSIONS[1], FakePort()).read_back(request()) is None


def test_the_route_table_serves_exactly_the_services_rpcs() -> None:
    table = routes(admission_downstream("127.0.0.1:1", "127.0.0.1:1"))
    served = binding(table)
    assert set(served.method_roles) == set(table)
    without: Mapping[str, object] = {
        k: v for k, v in table.items() if k != "GetInvalidReadRecovery"
    }
    with pytest.raises(ValueError, match="GetInvalidReadRecovery"):
        binding(without)  # type: ignore[arg-type]
