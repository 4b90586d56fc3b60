"""A compile whose compiler is killed (its executor process or host going away mid-build) says nothing
about the source: it must not be cached, or the next executor asking for the same build gets a failure
that never happened (a retried candidate on another replica of a fleet shares the cache)."""

from __future__ import annotations

import os
import signal
import threading
import time
from pathlib import Path

from executor.compile import Compiler
from executor.verdict import CompileResult
from tests.support.workers import processes_working_in

# A function-task library: nvcc takes seconds, long enough to be killed under way.
SOURCE = 'extern "C" void scale(int n, float a, float* x) { for (int i = 0; i < n; ++i) x[i] *= a; }\n'


def _nvcc_groups_in(directory: Path) -> list[int]:
    """Process groups of the nvcc runs whose working directory lies in ``directory``."""
    found = []
    for proc in processes_working_in(directory):
        try:
            if b"nvcc" in (proc / "cmdline").read_bytes().split(b"\0")[0]:
                found.append(os.getpgid(int(proc.name)))
        except OSError:
            continue
    return found


def test_a_killed_compile_is_reported_and_not_cached(tmp_path: Path) -> None:
    compiler = Compiler(tmp_path, choice="nvcc")
    results: list[CompileResult] = []
    building = threading.Thread(
        target=lambda: results.append(compiler.compile_source(SOURCE, "shared_library"))
    )
    building.start()
    deadline = time.monotonic() + 60
    while not (groups := _nvcc_groups_in(tmp_path)):
        assert building.is_alive(), "nvcc ended before it could be killed"
        assert time.monotonic() < deadline, "nvcc never started"
        time.sleep(0.02)
    for group in set(groups):
        os.killpg(group, signal.SIGKILL)
    building.join(60)
    killed = results[0]
    assert not killed.ok and killed.interrupted and not killed.timed_out
    assert "killed by signal 9" in killed.log
    again = compiler.compile_source(SOURCE, "shared_library")
    assert again.ok and not again.cache_hit, again.log
