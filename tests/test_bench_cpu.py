"""The bench's CPU accounting (bench/cpu.py) attributes a window's CPU to who spent it."""

from __future__ import annotations

import subprocess
import sys
import time

from bench.cpu import BENCH, POSTGRES, CpuReading, CpuUse, client_database

# Waits for "go", burns 0.3 s of CPU, says "done", then stays alive until its stdin closes.
CHILD = """
import sys, time
sys.stdin.readline()
end = time.process_time() + 0.3
while time.process_time() < end:
    pass
print("done", flush=True)
sys.stdin.read()
"""


def _burn(seconds: float) -> None:
    end = time.process_time() + seconds
    while time.process_time() < end:
        pass


def test_a_window_attributes_cpu_to_the_named_process_and_to_the_bench() -> None:
    child = subprocess.Popen(
        [sys.executable, "-c", CHILD], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True
    )
    assert child.stdin is not None and child.stdout is not None
    try:
        before = CpuReading.now({"child": child.pid})
        child.stdin.write("go\n")
        child.stdin.flush()
        _burn(0.2)
        assert child.stdout.readline().strip() == "done"
        after = CpuReading.now({"child": child.pid})
    finally:
        child.stdin.close()
        child.wait(timeout=30)
    use = CpuUse.between(before, after)
    assert use.by["child"] >= 0.25
    assert use.by[BENCH] >= 0.15
    assert POSTGRES in use.by
    assert use.attributed >= 0.4
    assert use.per_call_ms(10)["attributed"] == round(1000 * use.attributed / 10, 3)


def test_only_the_bench_databases_client_backends_and_the_servers_own_processes_count() -> None:
    """Another database's backends (a test suite on the same server) are not the bench's CPU;
    the server's own processes (WAL writer, checkpointer) serve every database and count."""
    assert client_database("postgres: 15/main: postgres test 127.0.0.1(37760) idle") == "test"
    assert (
        client_database("postgres: forge_ledger forge_continuity_test 127.0.0.1(59412) idle")
        == "forge_continuity_test"
    )
    assert client_database("postgres: app shop [local] SELECT\0\0") == "shop"
    for own in (
        "postgres: 15/main: walwriter",
        "postgres: checkpointer",
        "postgres: 15/main: autovacuum worker test",
        "/usr/lib/postgresql/15/bin/postgres\0-D\0/var/lib/postgresql/15/main",
    ):
        assert client_database(own) is None, own
