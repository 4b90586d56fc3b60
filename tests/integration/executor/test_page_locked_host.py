"""Option ``host_memory: page_locked`` on the host runtime (issue 29; session 28): a function task's timed
calls get their arrays page-locked (``mlock`` here; on a GPU registered with the driver,
``tests/gpu/test_page_locked_gpu.py``), all or none; the default leaves them pageable.

The candidate sees it itself: it looks its input up in ``/proc/self/smaps`` and, at the timing size,
spins 40 ms on every call whose input is not locked. With the option its timed calls are fast (the
correctness call at the timing size, on pageable buffers, still spins, untimed); by default, or where
locking fails (the jailed worker's RLIMIT_MEMLOCK, 8 MiB unless raised), every timed call spins.
"""

from __future__ import annotations

import resource
from pathlib import Path

import numpy as np
import pytest
from pydantic import ValidationError

from executor.evaluate import Evaluator
from executor.protocol import EvaluationOptions
from executor.settings import ExecutorSettings
from executor.taskformat import FunctionTask, KernelTask
from executor.worker.host import PageLocks, page_aligned_empty, vm_locked_bytes
from executor.worker.messages import WorkerOutcome
from tests.support.hostcode import FAST, build_host_candidates, one_input_task, run_on_timing_sets, write_task

HEAD = 'extern "C" void scaled_copy(int n, const float* x, float* y) {\n'
BODY = "for (int i = 0; i < n; ++i) y[i] = 2.0f * x[i];"
SPIN_MS = 40.0
# Whether the mapping that holds p has locked pages (its smaps' "Locked:" line), and the spin.
LOCKED = (
    "#include <chrono>\n#include <cstdio>\n"
    "static bool locked(const void* p) {\n"
    '    FILE* f = std::fopen("/proc/self/smaps", "r");\n'
    "    if (!f) return false;\n"
    "    char line[512]; bool inside = false, found = false;\n"
    "    unsigned long at = (unsigned long)p, lo, hi, kb;\n"
    "    while (std::fgets(line, sizeof line, f)) {\n"
    '        if (std::sscanf(line, "%lx-%lx", &lo, &hi) == 2) { inside = lo <= at && at < hi; continue; }\n'
    '        if (inside && std::sscanf(line, "Locked: %lu kB", &kb) == 1) { found = kb > 0; break; }\n'
    "    }\n"
    "    std::fclose(f);\n"
    "    return found;\n}\n"
    "static void spin(int ms) {\n"
    "    auto until = std::chrono::steady_clock::now() + std::chrono::milliseconds(ms);\n"
    "    while (std::chrono::steady_clock::now() < until) {}\n}\n"
)
SLOW_WHEN_PAGEABLE = LOCKED + HEAD + f"if (n > 100000 && !locked(x)) spin({SPIN_MS:.0f});\n" + BODY + " }\n"
# 128 Ki floats: 512 KiB per array, x and y; two rotated copies, the warm-up's and the confirming
# call's: 4 MiB locked, inside an unprivileged worker's default 8 MiB.
SMALL = one_input_task("scaled_copy", domain="elementwise", description="y[i] = 2 x[i]", timing=131072)
# 1 Mi floats: 8 MiB per copy, 32 MiB in all: past that limit.
LARGE = one_input_task("scaled_copy", domain="elementwise", description="y[i] = 2 x[i]", timing=1 << 20)
OPTIONS = FAST.model_copy(update={"min_trials": 5, "max_trials": 7})
LOCKED_OPTIONS = OPTIONS.model_copy(update={"host_memory": "page_locked"})


@pytest.fixture(scope="module")
def product(tmp_path_factory: pytest.TempPathFactory) -> str:
    built = build_host_candidates(tmp_path_factory.mktemp("page-locked"), {"slow": SLOW_WHEN_PAGEABLE})
    return built["slow"]


def _task(tmp: Path, spec: dict[str, object]) -> FunctionTask | KernelTask:
    return write_task(tmp, spec, HEAD + BODY + " }\n")


def _run(spec: dict[str, object], product: str, tmp: Path, options: EvaluationOptions) -> WorkerOutcome:
    outcome = run_on_timing_sets(_task(tmp / "task", spec), product, tmp, options)
    assert outcome.passed, outcome.message
    assert outcome.candidate_timing is not None
    return outcome


def test_the_timed_calls_arrays_are_locked_with_the_option(product: str, tmp_path: Path) -> None:
    limit = resource.getrlimit(resource.RLIMIT_MEMLOCK)[0]
    if limit != resource.RLIM_INFINITY and limit < (6 << 20):
        pytest.skip(f"RLIMIT_MEMLOCK {limit} bytes: an unprivileged worker may not lock 4 MiB here")
    outcome = _run(SMALL, product, tmp_path, LOCKED_OPTIONS)
    assert outcome.candidate_timing is not None
    # the candidate found every timed call's input locked (a pageable one spins 40 ms)
    assert outcome.candidate_timing.median_ms < SPIN_MS / 2, outcome.candidate_timing
    assert "host_lock_failed" not in outcome.seconds
    copies = 4 * 2 * 131072 * 4  # (2 rotated + warm-up + confirming) x (x, y) x 512 KiB
    assert outcome.seconds["host_locked_bytes"] == copies
    # as the kernel counts it, not the worker's own sum
    assert outcome.seconds["host_vmlck_bytes"] >= copies


def test_pageable_by_default(product: str, tmp_path: Path) -> None:
    assert EvaluationOptions().host_memory is None  # the executor's setting, pageable unless set
    outcome = _run(SMALL, product, tmp_path, OPTIONS)
    assert outcome.candidate_timing is not None
    assert outcome.candidate_timing.median_ms >= SPIN_MS, outcome.candidate_timing
    assert not {"host_locked_bytes", "host_lock_failed", "host_vmlck_bytes"} & outcome.seconds.keys()


def test_past_the_lock_limit_none_is_locked(product: str, tmp_path: Path) -> None:
    outcome = _run(LARGE, product, tmp_path, LOCKED_OPTIONS)
    if "host_locked_bytes" in outcome.seconds:
        pytest.skip("the worker may lock 32 MiB here (privileged, or RLIMIT_MEMLOCK raised)")
    assert outcome.seconds["host_lock_failed"] == 1.0
    assert outcome.candidate_timing is not None
    # all or none: the copies locked before the limit was reached were unlocked, so every timed call spun
    assert min(outcome.candidate_timing.samples_ms or [0.0]) >= SPIN_MS, outcome.candidate_timing


def test_the_option_is_checked() -> None:
    with pytest.raises(ValidationError):
        EvaluationOptions.model_validate({"host_memory": "pinned"})


def test_page_locks_are_all_or_none() -> None:
    before = vm_locked_bytes()
    arrays = [page_aligned_empty((1000,), np.dtype(np.float32)) for _ in range(3)]
    assert all(a.ctypes.data % resource.getpagesize() == 0 for a in arrays)
    locks = PageLocks()
    assert locks.lock_all(arrays[:2]) and locks.bytes == 8000
    assert vm_locked_bytes() - before == 2 * resource.getpagesize()  # each in pages of its own
    locks.fail("the next one failed")
    assert vm_locked_bytes() == before and locks.bytes == 0 and locks.locked == []
    assert not locks.lock_all(arrays[2:])  # none after a failure
    assert vm_locked_bytes() == before


def test_the_setting_decides_where_the_request_leaves_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    assert ExecutorSettings().host_memory == "pageable"
    monkeypatch.setenv("REGRAPH_EXECUTOR_HOST_MEMORY", "page_locked")
    evaluator = Evaluator(ExecutorSettings(runtime="host", cache_dir=tmp_path))
    try:
        assert evaluator.settings.host_memory == "page_locked"
        assert evaluator.with_settings(None).host_memory == "page_locked"
        # as a request arrives through the service, every field written out (a client's, the fleet's router's)
        sent = EvaluationOptions.model_validate_json(EvaluationOptions(min_trials=7).model_dump_json())
        assert evaluator.with_settings(sent).host_memory == "page_locked"
        assert evaluator.with_settings(sent).min_trials == 7
        # a request that says stands, either way
        assert evaluator.with_settings(EvaluationOptions(host_memory="pageable")).host_memory == "pageable"
    finally:
        evaluator.close()
