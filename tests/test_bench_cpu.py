"""The bench's CPU accounting (bench/cpu.py) attributes a window's CPU to who spent it."""

from __future__ import annotations

import subprocess
import sys
import time

from bench.cpu import BENCH, POSTGRES, CpuReading, CpuUse

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
