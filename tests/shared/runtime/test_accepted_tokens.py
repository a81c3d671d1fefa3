"""Each accepted bearer token is hashed once per principals directory, not twice per call (the
gate and the call policy each authenticate every call; issue 50 §2): the directory keeps the
tokens it accepted, and only those, for as long as it is in force. A changed file loads a new
directory, so a revoked token is refused at once, as before."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from shared.runtime import auth
from shared.runtime.auth import PrincipalDirectory, PrincipalsFile, Role, token_digest
from shared.runtime.errors import DomainError

TOKEN = "a-bearer-token"


def _document(*tokens: str) -> dict[str, object]:
    return {
        "principals": [
            {"identity": f"p{n}", "roles": ["reader"], "token_sha256": token_digest(token)}
            for n, token in enumerate(tokens)
        ]
    }


@pytest.fixture
def hashed(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    seen: list[str] = []

    def counting(token: str) -> str:
        seen.append(token)
        return token_digest(token)

    monkeypatch.setattr(auth, "token_digest", counting)
    return seen


def test_an_accepted_token_is_hashed_once_for_every_call(hashed: list[str]) -> None:
    directory = PrincipalDirectory.from_document(_document(TOKEN, "another"))
    for _ in range(4):  # two calls, each authenticated by the gate and the call policy
        principal = directory.authenticate(f"Bearer {TOKEN}")
        assert (principal.identity, principal.roles) == ("p0", frozenset({Role.READER}))
    assert hashed == [TOKEN]


def test_an_unknown_token_is_hashed_each_time_and_never_kept(hashed: list[str]) -> None:
    directory = PrincipalDirectory.from_document(_document(TOKEN))
    for _ in range(3):
        with pytest.raises(DomainError) as refused:
            directory.authenticate("Bearer not-a-token")
        assert refused.value.reason == "CREDENTIALS_UNKNOWN"
    assert hashed == ["not-a-token"] * 3
    assert directory._accepted == {}


def test_a_malformed_header_is_refused_before_any_lookup(hashed: list[str]) -> None:
    directory = PrincipalDirectory.from_document(_document(TOKEN))
    directory.authenticate(f"Bearer {TOKEN}")
    for header in (f"Basic {TOKEN}", "Bearer  ", "Bearer"):
        with pytest.raises(DomainError) as refused:
            directory.authenticate(header)
        assert refused.value.reason == "CREDENTIALS_MALFORMED"
    # surrounding spaces are the same token, as before
    assert directory.authenticate(f"Bearer  {TOKEN} ").identity == "p0"
    assert hashed == [TOKEN]


def test_a_token_revoked_by_a_changed_file_is_refused_at_once(tmp_path: Path) -> None:
    path = tmp_path / "principals.json"
    path.write_text(json.dumps(_document(TOKEN)))
    now = [0.0]
    followed = PrincipalsFile(path, interval=1.0, clock=lambda: now[0])
    assert followed.authenticate(f"Bearer {TOKEN}").identity == "p0"
    path.write_text(json.dumps(_document("a-new-token", "and-another")))
    now[0] = 2.0
    with pytest.raises(DomainError) as refused:
        followed.authenticate(f"Bearer {TOKEN}")
    assert refused.value.reason == "CREDENTIALS_UNKNOWN"
