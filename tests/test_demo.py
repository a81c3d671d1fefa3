"""`make demo` is the main job shown: it must run the whole v1 story and exit 0, print no
traceback, and print console links only where they work (``--keep`` keeps its own services
serving them until Ctrl-C)."""

from __future__ import annotations

import io
import os
import re
import signal
import socket
import struct
import subprocess
import sys
import threading
from pathlib import Path

import httpx2
import pytest

from services.demo.__main__ import Running, print_console_links
from services.demo.loopback import LoopbackProvider

ROOT = Path(__file__).resolve().parents[1]
DEMO_SECONDS = 300
KEEPING = "press Ctrl-C to stop them"


def test_the_demo_tells_the_whole_v1_story(tmp_path: Path) -> None:
    env = {
        **os.environ,
        "PYTHONPATH": f"{ROOT}:{ROOT / 'shared' / 'gen'}",
        # Never reuse services a developer may have running: the demo starts its own.
        "FORGE_LEDGER_TARGET": "127.0.0.1:1",
    }
    errors = tmp_path / "stderr.txt"
    with errors.open("w") as stderr:
        demo = subprocess.Popen(
            [sys.executable, "-u", "-m", "services.demo", "--run-id", "demo-test", "--keep"],
            cwd=tmp_path,
            env=env,
            stdout=subprocess.PIPE,
            stderr=stderr,
            text=True,
        )
    assert demo.stdout is not None
    printed = io.StringIO()
    keeping = threading.Event()

    def read(stream: io.TextIOBase) -> None:
        for line in stream:
            printed.write(line)
            if KEEPING in line:
                keeping.set()

    reader = threading.Thread(target=read, args=(demo.stdout,), daemon=True)
    reader.start()
    try:
        assert keeping.wait(DEMO_SECONDS), printed.getvalue() + errors.read_text()
        # Every link printed works while the demo keeps serving: the page and the run behind it.
        links = re.findall(r"(http://127\.0\.0\.1:\d+)/console/runs/(\S+)\n", printed.getvalue())
        assert len(links) == 5, printed.getvalue()
        for base, run_id in links:
            with httpx2.Client(
                base_url=base, headers={"authorization": "Bearer dev-reader-token"}
            ) as client:
                assert client.get(f"/console/runs/{run_id}").status_code == 200
                assert client.get(f"/api/v1/runs/{run_id}").status_code == 200, run_id
        demo.send_signal(signal.SIGINT)
        assert demo.wait(timeout=120) == 0
    finally:
        if demo.poll() is None:
            demo.kill()
            demo.wait()
    reader.join(timeout=10)
    stdout, stderr_text = printed.getvalue(), errors.read_text()
    # A green run prints no traceback anywhere (a provider's client hanging up is ordinary).
    assert "Traceback" not in stdout + stderr_text, stdout + stderr_text
    for line in (
        "ok  the candidate is eligible (no holds)",
        "ok  idempotent: no second ticket",
        "ok  command ledger still at 11 of 22 after admission",
        "ok  the worker completed the request",
        "ok  six provider requests, each with the consumed response once in its history",
        "completion records both verdicts apart",
        "ok  the run's completed-round count advanced to 1",
        "ok  command ledger at 13 of 22, the old eleven receipts unchanged",
        "ok  the 23rd command is refused before it runs",
        "ok  hash chain verifies",
        "The v1 story behaved as the spec says.",
        "ok  eligible: the native history proves no worker ever claimed it",
        "ok  the same request and attempt are queued again",
        "ok  idempotent: no second witness",
        "ok  another recovery id cannot replace the witness",
        "The never-claimed recovery story behaved as the spec says.",
        "ok  eligible: the sealed reproduction gives the bytes the provider refused, as retained",
        "ok  a refusal settlement is recorded and the same request is queued again",
        "ok  idempotent: no second settlement",
        "ok  a second refusal stays held",
        "ok  no retry loop: the one action is spent",
        "The rejected-boundary recovery story behaved as the spec says.",
        "ok  the request stays claimed: a claimed ticket is never requeued automatically",
        "ok  a timeout or a missing result proves nothing: the retry is held until verified",
        "is alive: refused",
        "ok  cessation of exactly that process is proven; every intended effect has its outcome",
        "ok  the old claim is released and fenced; a new execution request, same attempt",
        "ok  nothing refunded: 12 stays charged, the retry makes 14",
        "ok  late Complete under generation 1: LEASE_FENCED_BY_RECONCILIATION",
        "The reconciliation story behaved as the spec says.",
        "ok  eligible: exact read custody; the sealed SDK reconstructs the consumed turn",
        "ok  the same request is queued again from a separate derived checkpoint",
        "ok  the evidence observation is explicitly unavailable; the listing is reused exactly",
        "ok  no command is charged",
        "ok  idempotent: no second witness",
        "The read-only observation recovery story behaved as the spec says.",
        "ok  one flipped byte in entry 3 is named: hash_mismatch at sequence 3",
        "The offline audit behaved as the spec says.",
        # the demo turned the policy and two recovery switches on: it puts revision 1 back
        "Restored the policy flags of revision 1 as revision",
    ):
        assert line in stdout, stdout
    # One console link per run it created, on the gateway of the services it started.
    for suffix in ("", "-recovery", "-refusal", "-reconcile", "-observation"):
        assert re.search(rf"http://127\.0\.0\.1:\d+/console/runs/demo-test{suffix}\n", stdout)
    assert "Stopping the demo's services." in stdout


def test_without_keep_its_own_services_links_are_not_printed(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """Links to services that stop as the demo ends would be dead a second later."""
    own = Running({}, "http://127.0.0.1:1/console", stays=False)
    print_console_links(own, ["run-a"], keep=False)
    print_console_links(Running({}, "http://127.0.0.1:8080/console", stays=True), ["run-b"], False)
    printed = capsys.readouterr().out
    assert "/console/runs/run-a" not in printed
    assert "DEMO_ARGS=--keep" in printed
    assert "http://127.0.0.1:8080/console/runs/run-b" in printed


class _SlowAnswer(LoopbackProvider):
    """Answers after the client has already hung up, with more than a socket buffer holds."""

    def __init__(self) -> None:
        self.asked = threading.Event()
        self.hung_up = threading.Event()
        super().__init__()

    def answer(self, path: str, body: bytes) -> tuple[int, bytes]:
        self.asked.set()
        self.hung_up.wait(10)
        return 200, b"[" + b"0," * 4_000_000 + b"0]"


def test_a_client_hanging_up_prints_no_traceback(capfd: pytest.CaptureFixture[str]) -> None:
    with _SlowAnswer() as provider:
        port = int(provider.base_url.split(":")[2].split("/")[0])
        client = socket.create_connection(("127.0.0.1", port))
        client.sendall(b"POST /v1/chat/completions HTTP/1.1\r\ncontent-length: 2\r\n\r\n{}")
        assert provider.asked.wait(10)
        # Close with a reset (SO_LINGER 0), as a client giving up does: the answer's write fails.
        client.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
        client.close()
        provider.hung_up.set()
    captured = capfd.readouterr()
    assert "Traceback" not in captured.err + captured.out, captured.err
