"""Credential screening of stored JSON text: report credential-shaped values by location and kind,
never by value.

The rules are patterns for the common credential shapes that established secret scanners
(gitleaks, detect-secrets, GitHub secret scanning) agree on: provider key prefixes with their
fixed alphabets and lengths, private-key armour, JSON Web Tokens, bearer headers, passwords in
URLs, and credential-named members holding a string. Every rule is listed here, in one place, and
the set is versioned (``RULES_VERSION``): a finding names the rule's kind, never the match.

Screening runs on the parsed JSON (each string value and member name, located by its JSON Pointer)
and on the original text itself, so a value hidden behind JSON escapes is still caught (it is
reported as ``text@<offset>``). ``redact`` returns the same JSON with each matched span replaced by
``[REDACTED:<kind>]``: every member and item is kept, only credential characters are removed.

Any reader may ask for an inspection, so its cost is bounded by the input, never by its shape
(ADR 0041): the rules run on RE2, whose time is linear in the text (Python's backtracking engine
took seconds on 64 KiB of ``a-a-a-…``); a string longer than ``MAX_SCREENED_CHARS`` is not
screened but reported and redacted whole (``too_long_to_screen``); the original text is screened
in overlapping windows of that size; and the loops give up when the call is gone
(shared.runtime.deadline.abandon_if_gone).
"""

from __future__ import annotations

import bisect
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Any, Final

import re2

from shared.runtime.deadline import abandon_if_gone

# /2: RE2 (ASCII \b and \s), and the too_long_to_screen finding.
RULES_VERSION: Final = "forge.credential-rules/2"
#: A string longer than this is reported and redacted whole instead of screened.
MAX_SCREENED_CHARS: Final = 256 * 1024
#: The original text is screened in windows of MAX_SCREENED_CHARS overlapping by this much, so a
#: credential shorter than the overlap is never cut in two.
WINDOW_OVERLAP: Final = 4 * 1024
TOO_LONG: Final = "too_long_to_screen"


@dataclass(frozen=True)
class Rule:
    """One credential shape."""

    kind: str
    pattern: re2._Regexp[str]
    #: Every match contains one of these: a text with none is not searched (most strings, and
    #: the regex engine's per-call cost is most of a short string's screening).
    literals: tuple[str, ...]


def _rule(kind: str, pattern: str, *literals: str) -> Rule:
    return Rule(kind, re2.compile(pattern), literals)


# Ordered: the first rule that matches a span names its kind.
RULES: Final[tuple[Rule, ...]] = (
    _rule("private_key", r"-----BEGIN (?:[A-Z0-9]+ )*PRIVATE KEY(?: BLOCK)?-----", "-----BEGIN "),
    _rule(
        "aws_access_key_id",
        r"\b(?:AKIA|ASIA|ABIA|ACCA)[0-9A-Z]{16}\b",
        *("AKIA", "ASIA", "ABIA", "ACCA"),
    ),
    _rule(
        "github_token",
        r"\b(?:gh[pousr]_[A-Za-z0-9]{36,255}|github_pat_[A-Za-z0-9_]{22,255})\b",
        *("ghp_", "gho_", "ghu_", "ghs_", "ghr_", "github_pat_"),
    ),
    _rule("gitlab_token", r"\bglpat-[A-Za-z0-9_-]{20,}\b", "glpat-"),
    _rule("anthropic_api_key", r"\bsk-ant-[A-Za-z0-9_-]{20,}", "sk-ant-"),
    _rule("openai_api_key", r"\bsk-(?:proj-|svcacct-|admin-)?[A-Za-z0-9_-]{20,}", "sk-"),
    _rule(
        "stripe_secret_key",
        r"\b(?:sk|rk)_(?:live|test)_[A-Za-z0-9]{16,}\b",
        *("_live_", "_test_"),
    ),
    _rule("slack_token", r"\bxox[abposr]-[A-Za-z0-9-]{10,}\b", "xox"),
    _rule("google_api_key", r"\bAIza[0-9A-Za-z_-]{35}\b", "AIza"),
    _rule(
        "json_web_token",
        r"\beyJ[A-Za-z0-9_-]{8,}\.eyJ[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]{8,}",
        ".eyJ",
    ),
    _rule("bearer_token", r"\b[Bb]earer\s+[A-Za-z0-9._~+/-]{20,}=*", "earer"),
    _rule("url_password", r"\b[a-z][a-z0-9+.-]*://[^/\s:@\"]+:[^/\s@\"]+@", "://"),
)

#: Any rule's literal: a long text without one is done after one search.
_ANY_LITERAL: Final = re2.compile("|".join(re2.escape(lit) for r in RULES for lit in r.literals))
_SHORT: Final = 1024

# A member whose name says it holds a credential, with a string value of this length or more, is
# reported even when the value has no known shape.
CREDENTIAL_MEMBER: Final = re2.compile(
    r"(?i)^(?:.*[_-])?(?:api[_-]?key|secret|secret[_-]?key|password|passwd|access[_-]?token|"
    r"refresh[_-]?token|auth[_-]?token|authorization|private[_-]?key|client[_-]?secret|"
    r"credentials?)$"
)
MIN_MEMBER_VALUE = 8


@dataclass(frozen=True)
class Finding:
    """One credential-shaped value: where it is and what kind. Never the value."""

    location: str
    kind: str


def _pointer(parts: tuple[str, ...]) -> str:
    return "".join("/" + p.replace("~", "~0").replace("/", "~1") for p in parts)


def _member_names(value: dict[str, Any]) -> list[str]:
    """Each member's redacted name; a name equal to an earlier one gets a ``~<n>`` suffix, so
    redaction never merges two members."""
    names: list[str] = []
    for key in value:
        name = base = _redact_text(key, None)
        n = 1
        while name in names:
            name, n = f"{base}~{n}", n + 1
        names.append(name)
    return names


def _strings(value: Any, path: tuple[str, ...] = ()) -> Iterator[tuple[str, str, str | None]]:
    """(location, text, member name) of every string value and member name. Pointer segments
    are the redacted member names, so a location never carries a credential either."""
    if isinstance(value, dict):
        for name, (key, item) in zip(_member_names(value), value.items(), strict=True):
            segment = (*path, name)
            yield _pointer(segment) + "#key", key, None
            if isinstance(item, str):
                yield _pointer(segment), item, key
            else:
                yield from _strings(item, segment)
    elif isinstance(value, list):
        for index, item in enumerate(value):
            if isinstance(item, str):
                yield _pointer((*path, str(index))), item, None
            else:
                yield from _strings(item, (*path, str(index)))


Span = tuple[int, int, str]


def _spans(text: str, offset: int = 0, found: Sequence[Span] = ()) -> list[Span]:
    """Non-overlapping (start, end, kind) spans of every rule match, sorted, first rule winning
    (``found`` before any), shifted by ``offset``."""
    spans: list[Span] = sorted(found)
    if len(text) > _SHORT and not _ANY_LITERAL.search(text):
        return spans  # one linear pass instead of a substring search per literal
    for rule in RULES:
        if not any(literal in text for literal in rule.literals):
            continue
        for match in rule.pattern.finditer(text):
            start, end = match.span()
            span = (start + offset, end + offset, rule.kind)
            # Kept sorted, so only the neighbours can overlap (not every span found so far).
            at = bisect.bisect_left(spans, span)
            if (at == 0 or spans[at - 1][1] <= span[0]) and (
                at == len(spans) or spans[at][0] >= span[1]
            ):
                spans.insert(at, span)
    return spans


def _text_spans(text: str) -> list[Span]:
    """The spans of ``text`` of any length, window by window."""
    spans: list[Span] = []
    step = MAX_SCREENED_CHARS - WINDOW_OVERLAP
    for start in range(0, max(len(text) - WINDOW_OVERLAP, 1), step):
        abandon_if_gone()
        spans = _spans(text[start : start + MAX_SCREENED_CHARS], start, spans)
    return spans


def screen(document: Any, original_text: str) -> list[Finding]:
    """Every finding in the parsed ``document`` and in its ``original_text``."""
    findings: list[Finding] = []
    matched: set[str] = set()
    for location, text, member in _strings(document):
        abandon_if_gone()
        if len(text) > MAX_SCREENED_CHARS:
            findings.append(Finding(location, TOO_LONG))
            matched.add(text)
            continue
        spans = _spans(text)
        for start, end, kind in spans:
            findings.append(Finding(location, kind))
            matched.add(text[start:end])
        if (
            not spans
            and member is not None
            and CREDENTIAL_MEMBER.match(member)
            and len(text) >= MIN_MEMBER_VALUE
        ):
            findings.append(Finding(location, "credential_member"))
            matched.add(text)
    for start, end, kind in _text_spans(original_text):
        if original_text[start:end] not in matched:
            findings.append(Finding(f"text@{start}", kind))
    return findings


def _redact_text(text: str, member: str | None) -> str:
    if len(text) > MAX_SCREENED_CHARS:
        return f"[REDACTED:{TOO_LONG}]"
    spans = _spans(text)
    if not spans:
        if member is not None and CREDENTIAL_MEMBER.match(member) and len(text) >= MIN_MEMBER_VALUE:
            return "[REDACTED:credential_member]"
        return text
    out, last = [], 0
    for start, end, kind in spans:
        out.append(text[last:start])
        out.append(f"[REDACTED:{kind}]")
        last = end
    out.append(text[last:])
    return "".join(out)


def redact(value: Any, member: str | None = None) -> Any:
    """The same JSON value with every credential span replaced; keys and structure unchanged
    (a member name that is itself credential-shaped is redacted in place, keeping the member)."""
    if isinstance(value, dict):
        return {
            name: redact(item, key)
            for name, (key, item) in zip(_member_names(value), value.items(), strict=True)
        }
    if isinstance(value, list):
        return [redact(item) for item in value]
    if isinstance(value, str):
        return _redact_text(value, member)
    return value


def field_count(value: Any) -> int:
    """Members and items, recursively: what ``redact`` keeps one for one."""
    if isinstance(value, dict):
        return sum(1 + field_count(item) for item in value.values())
    if isinstance(value, list):
        return sum(1 + field_count(item) for item in value)
    return 0
