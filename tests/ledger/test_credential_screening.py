"""Credential screening: every rule finds its shape, locations are JSON Pointers, escaped values
are still found, redaction keeps every field, and no finding carries the value."""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest

from services.ledger.domain.credential_screening import (
    MAX_SCREENED_CHARS,
    RULES,
    field_count,
    redact,
    screen,
)
from shared.runtime.deadline import (
    reset_inbound_activity,
    reset_inbound_deadline,
    set_inbound_activity,
    set_inbound_deadline,
)
from shared.runtime.errors import Cancelled, DeadlineExceeded

FIXTURES = Path(__file__).resolve().parents[1] / "data" / "fixtures"

# One made-up value of each shape (none is a real credential).
SAMPLES = {
    "private_key": "-----BEGIN RSA PRIVATE KEY-----",
    "aws_access_key_id": "AKIA" + "ZX3Q7TESTVALUE42",
    "github_token": "ghp_" + "a1B2c3D4e5" * 4,
    "gitlab_token": "glpat-" + "x1Y2z3" * 4,
    "anthropic_api_key": "sk-ant-" + "api03-" + "q" * 24,
    "openai_api_key": "sk-" + "proj-" + "t3st" * 8,
    "stripe_secret_key": "sk_live_" + "4eC39HqLyjWDarjtT1zdp7dc",
    "slack_token": "xoxb-" + "1234567890-abcdefghij",
    "google_api_key": "AIza" + "SyA1b2C3d4E5f6G7h8I9j0K1l2M3n4O5p6Q",
    "json_web_token": "eyJhbGciOiJIUzI1NiJ9"
    + ".eyJzdWIiOiIxMjM0NTY3ODkwIn0"
    + ".dozjgNryP4J3jVmNHl0w5N",
    "bearer_token": "Bearer " + "abcdefghijklmnopqrstuvwxyz012345",
    "url_password": "postgres://admin:" + "hunter2hunter2" + "@db.internal/app",
}


def test_every_rule_has_a_sample() -> None:
    assert {rule.kind for rule in RULES} == set(SAMPLES)


@pytest.mark.parametrize(("kind", "value"), sorted(SAMPLES.items()))
def test_each_shape_is_found_where_it_is(kind: str, value: str) -> None:
    document = {"messages": [{"content": f"see {value} here"}]}
    found = screen(document, json.dumps(document))
    assert [(f.location, f.kind) for f in found] == [("/messages/0/content", kind)]
    redacted = redact(document)
    assert value not in json.dumps(redacted)
    assert f"[REDACTED:{kind}]" in redacted["messages"][0]["content"]
    assert field_count(redacted) == field_count(document)
    assert all(value not in repr(f) for f in found)


def test_a_credential_named_member_and_a_member_name_are_located() -> None:
    document = {"client_secret": "plain-looking-value", "a/b": {SAMPLES["github_token"]: 1}}
    found = {(f.location, f.kind) for f in screen(document, json.dumps(document))}
    assert ("/client_secret", "credential_member") in found
    # The location of a credential-shaped member name names it redacted, never as it is.
    assert ("/a~1b/[REDACTED:github_token]#key", "github_token") in found
    assert all(SAMPLES["github_token"] not in location for location, _ in found)
    assert field_count(redact(document)) == field_count(document)


def test_an_escaped_value_is_found_in_the_original_text() -> None:
    value = SAMPLES["aws_access_key_id"]
    text = '{"note": "' + value[:4] + "\\u005a" + value[5:] + '"}'  # "Z" as an escape
    raw = '{"raw": "' + value + '"}'
    assert [f.kind for f in screen(json.loads(raw), raw)] == ["aws_access_key_id"]
    document = json.loads(text)
    # Parsed, the escape is the same characters: found at its pointer, not twice.
    assert [(f.location, f.kind) for f in screen(document, text)] == [
        ("/note", "aws_access_key_id")
    ]
    # A match only the text shows (here: text the parsed document does not hold) is located
    # by its offset.
    assert [(f.location, f.kind) for f in screen({}, raw)] == [
        (f"text@{raw.index(value)}", "aws_access_key_id")
    ]


@pytest.mark.parametrize("case", sorted(p.name for p in FIXTURES.iterdir() if p.is_dir()))
def test_the_real_historical_records_have_no_findings(case: str) -> None:
    records = sorted((FIXTURES / case).glob("*.json"))
    assert any(path.name == "raw_response.json" for path in records), case
    for path in records:
        text = path.read_text(encoding="utf-8")
        assert screen(json.loads(text), text) == [], (case, path.name)


def test_redaction_never_merges_two_members() -> None:
    first, second = SAMPLES["github_token"], "ghp_" + "z9Y8x7W6v5" * 4
    document = {first: 1, second: 2}
    redacted = redact(document)
    assert len(redacted) == 2 and field_count(redacted) == field_count(document)
    assert sorted(redacted.values()) == [1, 2]


# 64 KiB on which Python's backtracking engine spent seconds (url_password and json_web_token
# rescan the rest of the run from every word start): quadratic in the run's length.
PATHOLOGICAL = ("a-" * 16384, "eyJa-" * 6554)


@pytest.mark.parametrize("hostile", PATHOLOGICAL, ids=["word-starts", "jwt-starts"])
def test_a_pathological_string_costs_time_linear_in_its_length(hostile: str) -> None:
    document = {"note": hostile}
    started = time.monotonic()
    assert screen(document, json.dumps(document)) == []
    # A liveness bound with a wide margin: the backtracking engine took over 5 s per copy.
    assert time.monotonic() - started < 1.0


def test_a_string_too_long_to_screen_is_a_finding_and_redacted_whole() -> None:
    long = "x" * MAX_SCREENED_CHARS + " " + SAMPLES["aws_access_key_id"]
    document = {"note": long, "short": "fine"}
    text = json.dumps(document)
    findings = screen(document, text)
    # The string is not screened but named; the text windows still find the key inside it.
    assert [(f.location, f.kind) for f in findings] == [
        ("/note", "too_long_to_screen"),
        (f"text@{text.index('AKIA')}", "aws_access_key_id"),
    ]
    assert redact(document) == {"note": "[REDACTED:too_long_to_screen]", "short": "fine"}


def test_a_credential_across_a_window_boundary_of_the_text_is_found() -> None:
    key = SAMPLES["github_token"]
    # The key starts a few characters before the first window ends.
    padding = "y " * ((MAX_SCREENED_CHARS - 10) // 2)
    text = json.dumps([padding + key + " " + padding])
    findings = screen(None, text)
    assert [f.kind for f in findings] == ["github_token"]
    assert findings[0].location == f"text@{text.index(key)}"


def test_screening_stops_when_the_call_deadline_has_passed() -> None:
    token = set_inbound_deadline(0.0)
    try:
        with pytest.raises(DeadlineExceeded) as stopped:
            screen({"a": "b"}, '{"a": "b"}')
    finally:
        reset_inbound_deadline(token)
    assert stopped.value.reason == "CALL_DEADLINE_PASSED"


def test_screening_stops_when_the_caller_is_gone() -> None:
    token = set_inbound_activity(lambda: False)
    try:
        with pytest.raises(Cancelled) as stopped:
            screen(None, "x" * (3 * MAX_SCREENED_CHARS))
    finally:
        reset_inbound_activity(token)
    assert stopped.value.reason == "CALL_ABANDONED"
