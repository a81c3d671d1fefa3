"""Admissions: the policy records an entry's revision cites (N17), a migration settlement and
the ownership claim that must follow it (N14), and the admission ticket compared with them
(N19)."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import TYPE_CHECKING

from vectors.drafts import Draft, Record
from vectors.vector import broken, valid

if TYPE_CHECKING:
    from vectors.generate import Suite


def citing_sequence(draft: Draft) -> int:
    """The first sequence citing a policy revision (N17: an integer top-level member)."""
    for entry in draft.all("entry"):
        revision = json.loads(entry["payload_json"]).get("policy_revision")
        if isinstance(revision, int) and not isinstance(revision, bool):
            return int(entry["sequence"])
    raise ValueError("no entry cites a policy revision")


def policies(suite: Suite) -> None:
    a, s = suite.admitted, suite.small
    citing = citing_sequence(a)
    d = a.copy()
    d.remove(d.first("policy"))
    suite.case(
        "policy-missing-dropped", d,
        broken("policy_missing", citing, d.line(d.first("admission"))),
        ["table", "N17", "N2"], "the policy record removed",
        f"the cited revision has no policy record: named at its first citing sequence, "
        f"{citing}, found at the end of the policy section (N2: the admission's line)",
    )  # fmt: skip
    d = a.copy()
    d.first("policy")["revision"] = 3
    d.reforge()
    suite.case(
        "policy-missing-wrong-revision", d,
        broken("policy_missing", citing, d.line(d.first("policy"))), ["table", "N17"],
        "the policy record is revision 3 (digest recomputed); revision 2 is cited",
        "the first policy line must be the first cited revision; it is named at that "
        "revision's first citing sequence",
    )  # fmt: skip
    d = a.copy()
    d.first("policy")["settings"]["window_seconds"] = 60
    suite.case(
        "policy-digest-mismatch", d,
        broken("policy_digest_mismatch", citing, d.line(d.first("policy"))), ["table"],
        "a setting of the policy record changed, its digest kept",
        "digest_of({revision, ...settings}) != digest: named at the first citing sequence",
    )  # fmt: skip
    policy = a.first("policy")

    def with_policy(revision: int) -> Record:
        record: Record = json.loads(json.dumps(policy))
        record["revision"] = revision
        return record

    d = s.copy()
    extra = d.insert_before(d.first("blob_absent"), with_policy(7))
    d.reforge()
    suite.case(
        "policy-unexpected", d, broken("policy_unexpected", 0, d.line(extra)), ["table"],
        "a policy record in a bundle whose entries cite no revision",
        "more policy records than cited revisions: the extra record is about no cited "
        "revision, so no entry: named at 0",
    )  # fmt: skip
    d = s.copy()
    d.set_payload(d.entry(3), {**d.payload(d.entry(3)), "policy_revision": 9})
    d.set_payload(d.entry(5), {**d.payload(d.entry(5)), "policy_revision": 7})
    seven = d.insert_before(d.first("blob_absent"), with_policy(7))
    d.insert_after(seven, with_policy(9))
    d.reforge()
    suite.case(
        "valid-policy-revisions-cited", d, valid(), ["N17", "File layout"],
        "entry 3 cites revision 9 and entry 5 revision 7; policy records 7 then 9",
        "one policy record per cited revision, ascending (not in citing order)",
    )  # fmt: skip
    d = s.copy()
    d.set_payload(d.entry(3), {**d.payload(d.entry(3)), "policy_revision": 9})
    d.set_payload(d.entry(5), {**d.payload(d.entry(5)), "policy_revision": 7})
    nine = d.insert_before(d.first("blob_absent"), with_policy(9))
    d.insert_after(nine, with_policy(7))
    d.reforge()
    suite.case(
        "policy-missing-not-ascending", d, broken("policy_missing", 5, d.line(nine)),
        ["N17", "File layout"],
        "entry 3 cites revision 9 and entry 5 revision 7; policy records 9 then 7",
        "the first policy line must be the lowest cited revision, 7; it is named at 7's "
        "first citing sequence, 5 (N17)",
    )  # fmt: skip
    d = s.copy()
    d.set_payload(d.entry(3), {**d.payload(d.entry(3)), "policy_revision": True})
    d.set_payload(d.entry(4), {**d.payload(d.entry(4)), "policy_revision": "7"})
    d.set_payload(d.entry(5), {**d.payload(d.entry(5)), "nested": {"policy_revision": 7}})
    d.reforge()
    suite.case(
        "valid-policy-revision-not-cited", d, valid(), ["N17", "N5"],
        "entries cite policy_revision true, \"7\" and (nested) 7",
        "N17: only an integer top-level policy_revision is cited (true is not an integer): "
        "no policy record is expected",
    )  # fmt: skip


def admissions(suite: Suite) -> None:
    a = suite.admitted
    settlement = a.entry_where("migration_settlement")
    at = int(settlement["sequence"])
    d = a.copy()
    cut = d.index(d.entry(at)) + 1
    del d.records[cut : d.after_journal() - 1]
    d.reforge()
    suite.case(
        "settlement-without-claim-at-end", d,
        broken("settlement_without_claim", at, d.after_journal()), ["N14", "N15", "table"],
        "the journal cut after the migration settlement (the manifest's head is the "
        "settlement)",
        f"N14/N15: a settlement ending the journal is settlement_without_claim, named at "
        f"{at}, found at the end of the journal, before head_unsigned (the settlement has "
        f"no signature of its own either)",
    )  # fmt: skip
    d = a.copy()
    cut = d.index(d.entry(at)) + 1
    head = json.loads(json.dumps(d.first("manifest")["head"]))
    del d.records[cut : d.after_journal() - 1]
    d.reforge()
    d.first("manifest")["head"] = head
    suite.case(
        "order-head-mismatch-before-settlement-without-claim", d,
        broken("head_mismatch", head["sequence"], d.after_journal()), ["N15"],
        "the journal cut after the settlement; the manifest's head still the original one",
        f"N15: head_mismatch (named at the larger sequence, {head['sequence']}) is found "
        f"before settlement_without_claim",
    )  # fmt: skip
    d = a.copy()
    settled = d.entry(at)
    own = json.loads(json.dumps(d.head(at + 1)))
    own["sequence"] = at
    d.insert_after(settled, own)
    claim = d.entry(at + 1)
    d.set_payload(claim, {**d.payload(claim), "request_id": "req-2"})
    d.reforge()
    suite.case(
        "settlement-without-claim-other-request", d,
        broken("settlement_without_claim", at, d.line(claim)), ["N14", "table"],
        "the settlement carries its own signed head; the ownership claim after it names "
        "request req-2 (reforged)",
        f"N14: the claim after the settlement is for another request_id: named at the "
        f"settlement, {at}, found when the next entry arrives (its line)",
    )  # fmt: skip
    d = a.copy()
    settled = d.entry(at)
    own = json.loads(json.dumps(d.head(at + 1)))
    own["sequence"] = at
    d.insert_after(settled, own)
    d.set_payload(settled, {**d.payload(settled), "request_id": None})
    claim = d.entry(at + 1)
    payload = d.payload(claim)
    del payload["request_id"]
    d.set_payload(claim, payload)
    d.reforge()
    suite.case(
        "settlement-without-claim-request-id-null", d,
        broken("settlement_without_claim", at, d.line(claim)), ["N14"],
        "the settlement (with its own signed head) has request_id null; the claim after it "
        "has no request_id (reforged)",
        "N14: request_ids are compared as JSON values; null is a value, absent is not, so "
        "they differ (only both absent count as equal)",
    )  # fmt: skip
    d = a.copy()
    for entry in (d.entry(at), d.entry(at + 1)):
        payload = d.payload(entry)
        del payload["request_id"]
        d.set_payload(entry, payload)
    d.reforge()
    suite.case(
        "admission-mismatch-request-ids-absent", d,
        broken("admission_mismatch", at, d.line(d.first("admission"))), ["N14", "table"],
        "neither the settlement nor its claim has a request_id (reforged); the ticket says "
        "req-1",
        "N14: both absent count as equal, so the claim follows its settlement; the ticket's "
        "request_id then differs from the settlement's: admission_mismatch at the "
        "settlement",
    )  # fmt: skip


def tickets(suite: Suite) -> None:
    a, s = suite.admitted, suite.small
    at = int(a.entry_where("migration_settlement")["sequence"])
    settlement = a.entry_where("migration_settlement")
    d = a.copy()
    absent = {"type": "admission_absent", "request_id": d.first("admission")["request_id"]}
    d.records[d.index(d.first("admission"))] = absent
    suite.case(
        "admission-missing-absent-record", d, broken("admission_missing", at, d.line(absent)),
        ["N19"], "the ticket record replaced by admission_absent",
        "N19: admission_absent is a break, admission_missing at its settlement's sequence",
    )  # fmt: skip
    d = a.copy()
    d.remove(d.first("admission"))
    suite.case(
        "admission-missing-dropped", d,
        broken("admission_missing", at, d.line(d.first("blob_absent"))), ["N19", "N2"],
        "the ticket record removed",
        "N19: a settlement with no admission record is admission_missing, found at the end "
        "of the admission section (N2: the first blob line)",
    )  # fmt: skip
    d = s.copy()
    extra = d.insert_before(d.first("blob_absent"), json.loads(json.dumps(a.first("admission"))))
    suite.case(
        "admission-unexpected", d, broken("admission_unexpected", 0, d.line(extra)),
        ["table"], "a ticket record in a bundle with no settlement",
        "more admission records than settlements: the extra record is about no settlement, "
        "so no entry: named at 0",
    )  # fmt: skip
    mismatches: list[tuple[str, Callable[[Record], None], str, str]] = [
        ("operator", lambda r: r.update(operator_identity="mallory"),
         "the ticket's operator_identity is mallory", "operator_identity is the "
         "settlement's actor"),
        ("journal-digest", lambda r: r["digests"].update(journal_digest=settlement["hash"]),
         "the ticket's journal_digest is the settlement's own hash",
         "journal_digest is the settlement's prev_hash (the head the candidate was "
         "computed at)"),
        ("execution-request", lambda r: r.update(execution_request_id="exr_0"),
         "the ticket's execution_request_id is another one",
         "execution_request_id is the claim's"),
    ]  # fmt: skip
    for label, change, what, rule in mismatches:
        d = a.copy()
        change(d.first("admission"))
        suite.case(
            f"admission-mismatch-{label}", d,
            broken("admission_mismatch", at, d.line(d.first("admission"))), ["table"], what,
            f"{rule}: admission_mismatch at the settlement, {at}",
        )  # fmt: skip
    d = a.copy()
    settled = d.entry(at)
    d.set_payload(settled, {**d.payload(settled), "version": True})
    d.reforge()
    suite.case(
        "admission-mismatch-version-true", d,
        broken("admission_mismatch", at, d.line(d.first("admission"))), ["N19"],
        "the settlement's version is true (reforged); the ticket's is the integer",
        f"N19: compared as JSON values, true is not 1: admission_mismatch at {at}",
    )  # fmt: skip
    d = a.copy()
    del d.first("admission")["digests"]["candidate_digest"]
    suite.case(
        "record-invalid-ticket-digest-absent", d,
        broken("record_invalid", at, d.line(d.first("admission"))), ["N19", "N5"],
        "the ticket's digests lack candidate_digest",
        f"N19: every member of an admission record is required (N5): record_invalid, named "
        f"at its settlement, {at}",
    )  # fmt: skip
    d = a.copy()
    claim = d.entry(at + 1)
    claim["kind"] = "startup_recovery_annotation"
    d.reforge()
    suite.case(
        "settlement-without-claim-not-a-claim", d,
        broken("settlement_without_claim", at, d.line(claim)), ["N13", "N14"],
        "the entry after the settlement (which has no signed head of its own) is no "
        "ownership claim (reforged)",
        f"N13: the entry after a settlement covers it, so no head_unsigned; N14: it is not "
        f"the claim: settlement_without_claim at {at}, on that entry's line",
    )  # fmt: skip
