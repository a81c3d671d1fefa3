"""Scenario 8: every RPC (unary and streaming) × {no credentials, unknown token, each role},
against the documented table of tests/shared/runtime/test_auth_matrix.py (reused, not copied).

Invariant: 0 mismatches with the table, and exactly one audit record per denial.
"""

from __future__ import annotations

import logging

import grpc
import pytest

from tests.reliability.scale import FULL, report
from tests.shared.runtime.test_auth_matrix import EXPECTED, METHODS, _call, servers
from tests.support import ROLE_TOKENS, Served

__all__ = ["servers"]
DENIED = (grpc.StatusCode.UNAUTHENTICATED, grpc.StatusCode.PERMISSION_DENIED)
# The fast slice takes every third method; the full run takes them all.
SELECTED = sorted(EXPECTED) if FULL else sorted(EXPECTED)[::3]


def test_every_rpc_against_every_caller_matches_the_table(
    servers: dict[str, Served], caplog: pytest.LogCaptureFixture
) -> None:
    callers: dict[str, list[tuple[str, str]]] = {
        "no-credentials": [],
        "unknown-token": [("authorization", "Bearer not-a-token")],
    }
    callers.update(
        {role: [("authorization", f"Bearer {token}")] for role, token in ROLE_TOKENS.items()}
    )
    mismatches: list[tuple[str, str, str]] = []
    denials = 0
    with caplog.at_level(logging.WARNING, logger="forge.audit"):
        for method in SELECTED:
            served = servers[METHODS[method][0]]
            for caller, metadata in callers.items():
                code, _reason = _call(served, method, metadata)
                allowed = caller in EXPECTED[method]
                if code in DENIED:
                    denials += 1
                if allowed == (code in DENIED):
                    mismatches.append((method, caller, code.name))
    audited = [r for r in caplog.records if r.name == "forge.audit"]
    report(
        "authorization_matrix",
        methods=len(SELECTED),
        callers=len(callers),
        calls=len(SELECTED) * len(callers),
        denials=denials,
        audit_records=len(audited),
        mismatches=len(mismatches),
    )
    assert mismatches == []
    assert len(audited) == denials
