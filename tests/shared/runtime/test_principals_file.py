"""Loading the principals file: every token digest and subject names exactly one identity."""

from __future__ import annotations

import pytest

from shared.runtime.auth import PrincipalDirectory, token_digest


def _entry(identity: str, digest: str) -> dict[str, object]:
    return {"identity": identity, "roles": ["reader"], "token_sha256": digest}


def test_a_digest_listed_twice_is_refused() -> None:
    digest = token_digest("token")
    with pytest.raises(ValueError, match="listed twice"):
        PrincipalDirectory.from_document(
            {"principals": [_entry("alice", digest), _entry("bob", digest)]}
        )


def test_a_digest_listed_twice_in_different_cases_is_refused() -> None:
    # Hex digests are case-insensitive: "ABC..." and "abc..." are the same token, whichever
    # spelling comes first.
    digest = token_digest("token")
    for first, second in ((digest, digest.upper()), (digest.upper(), digest)):
        with pytest.raises(ValueError, match="listed twice"):
            PrincipalDirectory.from_document(
                {"principals": [_entry("alice", first), _entry("bob", second)]}
            )


def test_an_upper_case_digest_authenticates_its_token() -> None:
    directory = PrincipalDirectory.from_document(
        {"principals": [_entry("alice", token_digest("token").upper())]}
    )
    assert directory.authenticate("Bearer token").identity == "alice"


def test_an_mtls_subject_listed_twice_is_refused() -> None:
    with pytest.raises(ValueError, match="listed twice"):
        PrincipalDirectory.from_document(
            {
                "principals": [
                    {"identity": "a", "roles": ["reader"], "mtls_subject": "admission"},
                    {"identity": "b", "roles": ["reader"], "mtls_subject": "admission"},
                ]
            }
        )
