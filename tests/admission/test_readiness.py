"""Admission waits for what it calls, and only for that (shared.runtime.readiness): it never calls
reconstruction (the candidate brings the derived checkpoint its reconstruction produced), so it
answers SERVING while reconstruction is down as long as its ledger and candidate answer, and
NOT_SERVING again once the candidate stops. A real admission process (``python -m
services.admission``); the ledger and a candidate served in-process on loopback, the candidate's
reconstruction an address where nothing listens."""

from __future__ import annotations

import time
from contextlib import ExitStack
from pathlib import Path

from services.candidate.downstream import GrpcCandidateSources
from services.candidate.servicer import bindings as candidate_bindings
from services.ledger.service import Ledger
from services.ledger.servicer import bindings as ledger_bindings
from shared.contract.channels import open_channel
from tests.polyglot.process import _free_port
from tests.reliability.processes import ServiceProcess
from tests.support import serve

#: A liveness bound for the readiness probe (every half second) to see the candidate go.
NOTICE_SECONDS = 30.0


def test_admission_serves_while_reconstruction_is_down(ledger: Ledger, tmp_path: Path) -> None:
    nowhere = f"127.0.0.1:{_free_port()}"  # reconstruction: nothing listens there
    with serve("ledger", ledger_bindings(ledger)) as ledger_served:
        sources = GrpcCandidateSources(
            open_channel(ledger_served.target, "service-token"),
            open_channel(nowhere, "service-token"),
        )
        candidate = ExitStack()
        candidate_served = candidate.enter_context(serve("candidate", candidate_bindings(sources)))
        admission = ServiceProcess(
            "admission",
            tmp_path,
            env={
                "FORGE_LEDGER_TARGET": ledger_served.target,
                "FORGE_CANDIDATE_TARGET": candidate_served.target,
                "FORGE_RECONSTRUCTION_TARGET": nowhere,
                "FORGE_SERVICE_TOKEN": "service-token",
            },
        )
        try:
            admission.start()  # returns once admission answers SERVING
            assert admission.serving()
            # What it does call still counts: without its candidate it is NOT_SERVING again.
            candidate.close()
            deadline = time.monotonic() + NOTICE_SECONDS
            while admission.serving() and time.monotonic() < deadline:
                time.sleep(0.2)
            assert not admission.serving(), admission.log()
            assert "NOT_SERVING: waiting for candidate at" in admission.log(), admission.log()
        finally:
            admission.stop()
            candidate.close()
