"""The one CommitAdmission translates to CommitAdmissionRequest and back unchanged, every field."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from shared.continuity.commit_admission import CommitAdmission
from shared.contract.commit_admission_proto import (
    commit_admission_from_proto,
    commit_admission_to_proto,
)
from shared.contract.terms import DIGEST_NAMES

_text = st.text(max_size=16)
_admissions = st.builds(
    CommitAdmission,
    run_id=_text,
    request_id=_text,
    operator_identity=_text,
    request_content_digest=_text,
    expected_head_hash=_text,
    policy_revision=st.integers(-(2**63), 2**63 - 1),
    digests=st.fixed_dictionaries(dict.fromkeys(DIGEST_NAMES, _text)),
    version=st.integers(-(2**31), 2**31 - 1),
    valid_for_seconds=st.integers(-(2**63), 2**63 - 1),
    derived_checkpoint_digest=_text,
    consumed_response_digest=_text,
    witness_digest=_text,
    derived_checkpoint=st.binary(max_size=16),
)


@given(_admissions)
def test_an_admission_survives_the_wire(admission: CommitAdmission) -> None:
    request = commit_admission_to_proto(admission)
    again = type(request).FromString(request.SerializeToString())
    assert commit_admission_from_proto(again) == admission
