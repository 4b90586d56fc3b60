"""Option ``host_memory: page_locked`` on the host runtime (issue 29; session 28): a function task's timed
calls get their arrays page-locked (``mlock`` here; on a GPU registered with the driver,
``tests/gpu/test_page_locked_gpu.py``), all or none; the default leaves them pageable.

The candidate sees it itself: it looks its input up in ``/proc/self/smaps`` and, at the timing size,
spins 40 ms on every call whose input is not locked. With the option its timed calls are fast (the
correctness call at the timing size, on pageable buffers, still spins, untimed); by default, or where
locking fails (the jailed worker's RLIMIT_MEMLOCK, 8 MiB unless raised), every timed call spins.
"""

from __future__ import annotations

import ctypes
import resource
import time
from collections.abc import Iterator
from concurrent.futures import Future
from pathlib import Path

import numpy as np
import pytest
from pydantic import ValidationError

from executor import baseline
from executor.basetiming import baseline_key
from executor.evaluate import Evaluator, same_host_memory
from executor.protocol import EvaluationOptions
from executor.sandbox import WorkerPool, run_job
from executor.settings import ExecutorSettings
from executor.taskformat import FunctionTask, KernelTask
from executor.verdict import host_memory_state
from executor.worker.host import (
    DEFAULT_LOCK_MAX_BYTES,
    PageLocks,
    locked_ranges,
    page_aligned_empty,
    vm_locked_bytes,
)
from executor.worker.messages import BaselineOutcome, CandidateRun, WorkerOutcome
from tests.support.hostcode import (
    FAST,
    build_host_candidates,
    one_input_task,
    run_job_showing_stderr,
    run_on_timing_sets,
    timing_set_job,
    use_worker_process,
    write_task,
)

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
# The evaluators here run no evaluation (their baseline methods are called directly), so they are made
# with prewarm_workers=False: each would start a spare candidate and reference worker, killed unused.


@pytest.fixture(autouse=True, scope="module")
def _in_the_workers_process() -> Iterator[None]:
    """In their workers' process (``REGRAPH_EXECUTOR_CANDIDATE_PROCESS=0``), whatever the suite's or
    the executor's default: a runner's shared mappings are left pageable, never locked."""
    with pytest.MonkeyPatch.context() as patch:
        use_worker_process(patch)
        yield


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
    assert outcome.seconds["host_page_locked"] == 1.0  # what the verdict says it ran on
    assert host_memory_state(outcome.seconds) == "page_locked"
    copies = 4 * 2 * 131072 * 4  # (2 rotated + warm-up + confirming) x (x, y) x 512 KiB
    assert outcome.seconds["host_locked_bytes"] == copies
    # as the kernel counts it, not the worker's own sum
    assert outcome.seconds["host_vmlck_bytes"] >= copies


# A candidate that unlocks its own timed input, as a GPU candidate's cudaHostRegister / cudaHostUnregister
# of its input per call (return codes ignored) would remove the executor's registration: every timed
# call after the first then runs on pageable memory, and spins.
UNLOCKS = (
    "#include <sys/mman.h>\n"
    + LOCKED
    + HEAD
    + "if (n > 100000) munlock((void*)x, (size_t)n * sizeof(float));\n"
    + f"if (n > 100000 && !locked(x)) spin({SPIN_MS:.0f});\n"
    + BODY
    + " }\n"
)


def _made(directory: Path) -> Path:
    directory.mkdir()
    return directory


def test_arrays_unlocked_during_the_trials_are_not_reported_locked(tmp_path: Path) -> None:
    """Review 44 F2: ``host_page_locked`` was set before the trials and never looked at again, so a
    candidate that unlocked its input was timed on pageable memory under a verdict saying 1.0 (and
    compared with an all-locked baseline). The locks are checked again after the trials."""
    _needs_rlimit_for_small()
    unlocks = build_host_candidates(_made(tmp_path / "build"), {"unlocks": UNLOCKS})["unlocks"]
    outcome = _run(SMALL, unlocks, tmp_path, LOCKED_OPTIONS)
    assert outcome.candidate_timing is not None
    assert outcome.candidate_timing.median_ms >= SPIN_MS, outcome.candidate_timing  # it ran pageable
    assert "host_lock_failed" not in outcome.seconds  # they were locked before the trials
    assert outcome.seconds["host_page_locked"] == 0.0, outcome.seconds
    assert outcome.seconds["host_locks_lost"] >= 1.0  # the rotated copies' x at least
    # told apart from arrays never locked (review 45 F9: host_page_locked is 0 for both)
    assert host_memory_state(outcome.seconds) == "locks_lost"


def test_the_locks_are_checked_again_in_this_process() -> None:
    arrays = [page_aligned_empty((3000,), np.dtype(np.float32)) for _ in range(3)]
    locks = PageLocks()
    assert locks.lock_all(arrays) and locks.lost() == 0
    libc = ctypes.CDLL(None, use_errno=True)
    libc.munlock.argtypes = [ctypes.c_void_p, ctypes.c_size_t]
    assert libc.munlock(arrays[1].ctypes.data + resource.getpagesize(), resource.getpagesize()) == 0
    assert locks.lost() == 1  # one page of the middle array is enough
    locks.fail("done")
    assert locks.lost() == 0  # nothing locked, nothing lost


def test_locks_that_smaps_cannot_check_are_not_counted_lost(tmp_path: Path) -> None:
    """Review 45 F6: where smaps cannot be read, or names no ``VmFlags`` (a kernel or sandbox that
    leaves them out), every page-locked run counted its arrays as lost: its verdict said pageable, and
    its task's baseline was turned away and timed again every 300 s, forever. Not known is not lost."""
    arrays = [page_aligned_empty((3000,), np.dtype(np.float32)) for _ in range(2)]
    locks = PageLocks()
    assert locks.lock_all(arrays) and locks.lost() == 0
    silent = tmp_path / "smaps"  # the mappings, without their flags
    silent.write_text(Path("/proc/self/maps").read_text())
    assert locked_ranges(str(silent)) is None and locked_ranges(str(tmp_path / "none")) is None
    for path in (silent, tmp_path / "none"):
        locks.smaps = str(path)
        assert locks.lost() is None
    locks.smaps = PageLocks.smaps  # the process's own: they are held
    assert locks.lost() == 0 and locked_ranges() not in (None, [])
    locks.fail("done")


def test_pageable_by_default(product: str, tmp_path: Path) -> None:
    assert EvaluationOptions().host_memory is None  # the executor's setting, pageable unless set
    outcome = _run(SMALL, product, tmp_path, OPTIONS)
    assert outcome.candidate_timing is not None
    assert outcome.candidate_timing.median_ms >= SPIN_MS, outcome.candidate_timing
    assert not {"host_locked_bytes", "host_lock_failed", "host_vmlck_bytes"} & outcome.seconds.keys()
    assert host_memory_state(outcome.seconds) is None


def test_past_the_lock_limit_none_is_locked(product: str, tmp_path: Path) -> None:
    outcome = _run(LARGE, product, tmp_path, LOCKED_OPTIONS)
    if "host_locked_bytes" in outcome.seconds:
        pytest.skip("the worker may lock 32 MiB here (privileged, or RLIMIT_MEMLOCK raised)")
    assert outcome.seconds["host_lock_failed"] == 1.0
    assert outcome.seconds["host_page_locked"] == 0.0
    assert host_memory_state(outcome.seconds) == "pageable_lock_refused"
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
    assert locks.lock_all(arrays[:2]) and locks.bytes == 2 * resource.getpagesize()  # whole pages
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
    evaluator = Evaluator(ExecutorSettings(runtime="host", prewarm_workers=False, cache_dir=tmp_path))
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


# The bytes each worker locks for SMALL: a candidate's (2 rotated + warm-up + confirming) x (x, y) x
# 512 KiB, a baseline's without the confirming call's buffers. The cap applies to the candidate's on
# both sides (a baseline counts a confirming call's set it does not lock: review 45 F1).
CANDIDATE_BYTES = 4 * 2 * 131072 * 4
BASELINE_BYTES = 3 * 2 * 131072 * 4
LOCK_TOTAL = CANDIDATE_BYTES
# Verdicts that carry a baseline speedup (baseline is not a timing field: the same baseline key).
WITH_BASELINE = LOCKED_OPTIONS.model_copy(update={"baseline": True})


def _needs_rlimit_for_small() -> None:
    limit = resource.getrlimit(resource.RLIMIT_MEMLOCK)[0]
    if limit != resource.RLIM_INFINITY and limit < (6 << 20):
        pytest.skip(f"RLIMIT_MEMLOCK {limit} bytes: an unprivileged worker may not lock 4 MiB here")


def test_the_cap_refuses_them_all_and_names_itself() -> None:
    before = vm_locked_bytes()
    arrays = [page_aligned_empty((1000,), np.dtype(np.float32)) for _ in range(3)]
    locks = PageLocks(max_bytes=6000)
    assert locks.lock_all(arrays[:1]) and vm_locked_bytes() > before
    assert not locks.lock_all(arrays[1:])  # 8000 bytes past the cap of 6000
    assert (
        locks.failure is not None and "cap of 6000" in locks.failure and "HOST_LOCK_MAX_MB" in locks.failure
    )
    assert vm_locked_bytes() == before and locks.bytes == 0  # all or none: the first unlocked too
    assert ExecutorSettings().host_lock_max_mb << 20 == DEFAULT_LOCK_MAX_BYTES == PageLocks().max_bytes


def test_a_worker_past_its_cap_stays_pageable_below_the_rlimit(product: str, tmp_path: Path) -> None:
    """SMALL's 4 MiB fit in this machine's RLIMIT_MEMLOCK (8 MiB unprivileged; the first test locks
    them): a cap of 2 MiB, not the rlimit, leaves every timed call on pageable memory."""
    _needs_rlimit_for_small()
    task = _task(tmp_path / "task", SMALL)
    job = timing_set_job(task, tmp_path, LOCKED_OPTIONS).model_copy(update={"host_lock_max_bytes": 2 << 20})
    outcome, stderr = run_job_showing_stderr(
        job, CandidateRun(candidate_product=product, candidate_symbol=task.entry), 120
    )
    assert outcome.passed and outcome.candidate_timing is not None, outcome.message
    assert outcome.seconds["host_lock_failed"] == 1.0 and outcome.seconds["host_page_locked"] == 0.0
    assert host_memory_state(outcome.seconds) == "pageable_over_cap"
    assert "host_locked_bytes" not in outcome.seconds
    assert f"past the cap of {2 << 20}" in stderr, stderr  # the worker's log says which limit
    assert min(outcome.candidate_timing.samples_ms or [0.0]) >= SPIN_MS, outcome.candidate_timing


def _measure_baseline(
    product: str, task: FunctionTask | KernelTask, tmp: Path, cap: int, memlock: int | None = None
) -> BaselineOutcome:
    """The baseline worker alone on SMALL with ``product`` as its naive build, page-locked under ``cap``;
    ``memlock``: the worker's RLIMIT_MEMLOCK (it inherits this process's), for a refusal below the cap."""
    job = timing_set_job(task, tmp, LOCKED_OPTIONS, baseline_copies=True)
    limits = resource.getrlimit(resource.RLIMIT_MEMLOCK)
    pool = WorkerPool("host", prewarm=False)
    try:
        if memlock is not None:
            resource.setrlimit(resource.RLIMIT_MEMLOCK, (memlock, limits[1]))
        outcome = baseline.measure(
            pool, job.model_copy(update={"host_lock_max_bytes": cap}), lambda: product, 120
        )
    finally:
        resource.setrlimit(resource.RLIMIT_MEMLOCK, limits)
        pool.close()
    assert outcome.ok and outcome.timing is not None, outcome.message
    return outcome


def test_a_baseline_timed_pageable_is_not_kept_for_page_locked_memory(product: str, tmp_path: Path) -> None:
    """The review's case: a baseline whose locks failed was stored under the page_locked key, and every
    later page-locked candidate's baseline speedup was taken against a pageable median. The baseline
    worker says what it ran on; the evaluator keeps it only when every array was locked (or all were
    left pageable by the cap: the next test), and measures it again (after the retry delay) when a
    lock was refused (here RLIMIT_MEMLOCK, below the cap)."""
    _needs_rlimit_for_small()
    task = _task(tmp_path / "task", SMALL).model_copy(update={"naive_source": HEAD + BODY + " }\n"})
    refused = BASELINE_BYTES // 2  # a refusal, not the cap
    pageable = _measure_baseline(product, task, tmp_path / "a", cap=LOCK_TOTAL, memlock=refused)
    assert pageable.seconds["host_page_locked"] == 0.0 and pageable.seconds["host_lock_failed"] == 1.0
    assert "host_lock_over_cap" not in pageable.seconds
    assert pageable.timing is not None and pageable.timing.median_ms >= SPIN_MS  # the naive build spun
    locked = _measure_baseline(product, task, tmp_path / "b", cap=LOCK_TOTAL)
    assert locked.seconds["host_page_locked"] == 1.0 and locked.seconds["host_locked_bytes"] == BASELINE_BYTES
    assert locked.seconds["host_lock_total_bytes"] == LOCK_TOTAL
    assert locked.timing is not None and locked.timing.median_ms < SPIN_MS / 2

    evaluator = Evaluator(
        ExecutorSettings(
            runtime="host", prewarm_workers=False, cache_dir=tmp_path / "cache", host_baseline=True
        )
    )
    try:
        store = (
            tmp_path
            / "cache"
            / "baseline-timings"
            / "host-cpu"
            / f"{baseline_key(task, LOCKED_OPTIONS)}.json"
        )
        evaluator._keep_baseline(task, LOCKED_OPTIONS, pageable)
        assert evaluator._cached_timing("baseline", task, LOCKED_OPTIONS) is None and not store.exists()
        # nor under the pageable key: its arrays were not numpy's (see docs/executor.md)
        assert evaluator._cached_timing("baseline", task, OPTIONS) is None
        # a page-locked candidate that joined that measurement is not compared with it
        seconds = {"host_page_locked": 1.0}
        joined = evaluator._baseline_timing(
            task, WITH_BASELINE, "host", (_done(pageable), False), seconds, None
        )
        assert joined == pageable.timing and seconds["baseline_host_page_locked"] == 0.0
        assert same_host_memory(joined, seconds) is None and seconds["baseline_host_memory_differs"] == 1.0
        # one whose own locks failed as well is (both pageable)
        seconds = {"host_page_locked": 0.0}
        joined = evaluator._baseline_timing(
            task, WITH_BASELINE, "host", (_done(pageable), False), seconds, None
        )
        assert same_host_memory(joined, seconds) == pageable.timing
        # tried again after the retry delay, as a failed measurement is, not kept for a day
        started = time.monotonic() - baseline.RETRY_AFTER_S - 1
        assert evaluator._due_again(_done(pageable), started)
        assert not evaluator._due_again(_done(locked), started)
        evaluator._keep_baseline(task, LOCKED_OPTIONS, locked)
        assert evaluator._cached_timing("baseline", task, LOCKED_OPTIONS) == locked.timing and store.exists()
    finally:
        evaluator.close()


def test_a_baseline_past_the_cap_is_kept_as_pageable(product: str, tmp_path: Path) -> None:
    """Review 44 F3: a task whose timed arrays pass the cap (the benchmark's largest under the default)
    had its baseline timed pageable, never kept, and timed again every 300 s, a GPU turn each time.
    The cap decides it on every measurement, so it is kept, under a key of its own (the cap's) that
    says pageable: a candidate past the same cap (pageable too) is compared with it, a locked one not."""
    _needs_rlimit_for_small()
    task = _task(tmp_path / "task", SMALL).model_copy(update={"naive_source": HEAD + BODY + " }\n"})
    cap = 2 << 20  # below BASELINE_BYTES (3 MiB), in whole MiB as the setting is
    over = _measure_baseline(product, task, tmp_path / "baseline", cap=cap)
    assert over.seconds["host_page_locked"] == 0.0 and over.seconds["host_lock_over_cap"] == 1.0
    assert over.timing is not None and over.timing.median_ms >= SPIN_MS  # it ran pageable
    candidate = run_job(
        timing_set_job(task, tmp_path / "candidate", LOCKED_OPTIONS).model_copy(
            update={"host_lock_max_bytes": cap}
        ),
        CandidateRun(candidate_product=product, candidate_symbol=task.entry),
        timeout_s=120,
    )
    assert candidate.passed, candidate.message
    assert candidate.seconds["host_page_locked"] == 0.0 and candidate.seconds["host_lock_over_cap"] == 1.0

    cache = tmp_path / "cache"
    settings = ExecutorSettings(
        runtime="host", prewarm_workers=False, cache_dir=cache, host_baseline=True, host_lock_max_mb=2
    )
    store = cache / "baseline-timings" / "host-cpu"
    evaluator = Evaluator(settings)
    try:
        evaluator._keep_baseline(task, LOCKED_OPTIONS, over)
        assert evaluator._kept_baseline(task, LOCKED_OPTIONS) == (over.timing, 0.0)
        assert (store / f"{baseline_key(task, LOCKED_OPTIONS, over_cap=cap)}.json").exists()
        assert not (store / f"{baseline_key(task, LOCKED_OPTIONS)}.json").exists()  # not as locked
        # kept until it is stale, as a locked one is: not measured again every RETRY_AFTER_S
        started = time.monotonic() - baseline.RETRY_AFTER_S - 1
        assert not evaluator._due_again(_done(over), started)
        # the candidate past the same cap is compared with it: both pageable
        seconds = dict(candidate.seconds)
        timing = evaluator._baseline_timing(task, WITH_BASELINE, "host", None, seconds, None)
        assert timing == over.timing and seconds["baseline_host_page_locked"] == 0.0
        assert same_host_memory(timing, seconds) == over.timing
        # a locked one is not
        seconds = {"host_page_locked": 1.0}
        timing = evaluator._baseline_timing(task, WITH_BASELINE, "host", None, seconds, None)
        assert same_host_memory(timing, seconds) is None and seconds["baseline_host_memory_differs"] == 1.0
    finally:
        evaluator.close()
    # another executor of the host with the same cap reads it from the store, marked pageable
    again = Evaluator(settings)
    try:
        again.device = over.device
        assert again._kept_baseline(task, LOCKED_OPTIONS) == (over.timing, 0.0)
    finally:
        again.close()
    # with another cap (the arrays might be locked under it) it is not read
    other = Evaluator(settings.model_copy(update={"host_lock_max_mb": 4}))
    try:
        other.device = over.device
        assert other._kept_baseline(task, LOCKED_OPTIONS) is None
    finally:
        other.close()


def _done(outcome: BaselineOutcome) -> Future[BaselineOutcome]:
    future: Future[BaselineOutcome] = Future()
    future.set_result(outcome)
    return future


def _candidate(
    product: str, task: FunctionTask | KernelTask, tmp: Path, cap: int, memlock: int | None = None
) -> WorkerOutcome:
    """A candidate worker's run of ``product`` on SMALL, page-locked under ``cap`` (``memlock``: its
    RLIMIT_MEMLOCK, for a refusal below the cap)."""
    run = CandidateRun(candidate_product=product, candidate_symbol=task.entry)
    job = timing_set_job(task, tmp, LOCKED_OPTIONS).model_copy(update={"host_lock_max_bytes": cap})
    limits = resource.getrlimit(resource.RLIMIT_MEMLOCK)
    try:
        if memlock is not None:
            resource.setrlimit(resource.RLIMIT_MEMLOCK, (memlock, limits[1]))
        candidate = run_job(job, run, timeout_s=120)
    finally:
        resource.setrlimit(resource.RLIMIT_MEMLOCK, limits)
    assert candidate.passed, candidate.message
    return candidate


@pytest.mark.parametrize("cap", [BASELINE_BYTES, LOCK_TOTAL - 4096, LOCK_TOTAL])
def test_a_baseline_and_its_candidates_pass_the_cap_together(product: str, tmp_path: Path, cap: int) -> None:
    """Review 45 F1: a candidate also locks its confirming call's buffers (one timing set more), a
    baseline does not; the cap was applied to each one's own bytes, so under a cap from the baseline's
    bytes (3 MiB) to the candidate's (4 MiB) the baseline was locked and kept, and every candidate was
    pageable past the cap: none got a baseline speedup. The cap now counts the same total on both sides."""
    _needs_rlimit_for_small()
    task = _task(tmp_path / "task", SMALL).model_copy(update={"naive_source": HEAD + BODY + " }\n"})
    base = _measure_baseline(product, task, tmp_path / "baseline", cap=cap)
    candidate = _candidate(product, task, tmp_path / "candidate", cap)
    locked = cap >= LOCK_TOTAL
    for seconds in (base.seconds, candidate.seconds):
        assert seconds["host_page_locked"] == float(locked), seconds
        assert seconds.get("host_lock_over_cap", 0.0) == float(not locked), seconds
        assert seconds["host_lock_total_bytes"] == LOCK_TOTAL, seconds
    settings = ExecutorSettings(
        runtime="host", prewarm_workers=False, cache_dir=tmp_path / "cache", host_baseline=True
    )
    evaluator = Evaluator(settings.model_copy(update={"host_lock_max_mb": cap >> 20}))
    try:
        evaluator._keep_baseline(task, LOCKED_OPTIONS, base)
        seconds = dict(candidate.seconds)
        timing = evaluator._baseline_timing(task, WITH_BASELINE, "host", None, seconds, None)
        assert timing == base.timing and same_host_memory(timing, seconds) == base.timing, seconds
    finally:
        evaluator.close()


def test_no_baseline_speedup_across_host_memories(product: str, tmp_path: Path) -> None:
    """A baseline locked, a candidate whose lock was refused (RLIMIT_MEMLOCK below its bytes): its
    verdict gets no baseline speedup (it would have been 1/80 of the truth here: the candidate spins
    40 ms on pageable memory, the locked baseline not) and says why; a candidate locked as its baseline
    is compared."""
    _needs_rlimit_for_small()
    task = _task(tmp_path / "task", SMALL).model_copy(update={"naive_source": HEAD + BODY + " }\n"})
    cap = LOCK_TOTAL
    kept = _measure_baseline(product, task, tmp_path / "baseline", cap=cap)
    assert kept.seconds["host_page_locked"] == 1.0
    candidate = _candidate(product, task, tmp_path / "candidate", cap, memlock=BASELINE_BYTES // 2)
    assert candidate.seconds["host_page_locked"] == 0.0  # refused
    assert "host_lock_over_cap" not in candidate.seconds

    evaluator = Evaluator(
        ExecutorSettings(
            runtime="host", prewarm_workers=False, cache_dir=tmp_path / "cache", host_baseline=True
        )
    )
    try:
        for measuring in ((_done(kept), True), None):  # measured for this verdict, or kept before it
            if measuring is None:
                evaluator._keep_baseline(task, LOCKED_OPTIONS, kept)
            seconds = dict(candidate.seconds)
            timing = evaluator._baseline_timing(task, WITH_BASELINE, "host", measuring, seconds, None)
            assert timing == kept.timing and seconds["baseline_host_page_locked"] == 1.0
            assert same_host_memory(timing, seconds) is None
            assert seconds["baseline_host_memory_differs"] == 1.0
        # a candidate on the memory its baseline had is compared
        same = {**candidate.seconds, "host_page_locked": 1.0}
        assert evaluator._baseline_timing(task, WITH_BASELINE, "host", None, same, None) == kept.timing
        assert (
            same_host_memory(kept.timing, same) == kept.timing and "baseline_host_memory_differs" not in same
        )
        # pageable asked: neither side says anything, and they are compared as before
        assert same_host_memory(kept.timing, {}) == kept.timing
    finally:
        evaluator.close()


def test_an_executor_reads_the_baseline_its_own_cap_gives(product: str, tmp_path: Path) -> None:
    """Review 45 F2: executors of one host with different caps share the baselines' store. One whose cap
    the task's arrays pass read a larger cap's locked baseline first, never timed its own (pageable
    past its cap) and none of its candidates (pageable past it too) got a baseline speedup. It reads
    the key its own candidates match: locked only within its cap, else its cap's pageable one."""
    _needs_rlimit_for_small()
    task = _task(tmp_path / "task", SMALL).model_copy(update={"naive_source": HEAD + BODY + " }\n"})
    cache = tmp_path / "cache"
    small = ExecutorSettings(
        runtime="host", prewarm_workers=False, cache_dir=cache, host_baseline=True, host_lock_max_mb=2
    )
    large = small.model_copy(update={"host_lock_max_mb": LOCK_TOTAL >> 20})
    over = _measure_baseline(product, task, tmp_path / "over", cap=small.host_lock_max_mb << 20)
    locked = _measure_baseline(product, task, tmp_path / "locked", cap=large.host_lock_max_mb << 20)
    assert over.seconds["host_lock_over_cap"] == 1.0 and locked.seconds["host_page_locked"] == 1.0
    device = locked.device
    evaluators: list[Evaluator] = []

    def executor(settings: ExecutorSettings) -> Evaluator:
        made = Evaluator(settings)
        made.device = device
        evaluators.append(made)
        return made

    try:
        executor(large)._keep_baseline(task, LOCKED_OPTIONS, locked)
        # the small cap's executor does not read the large cap's locked baseline: it has none yet, so it
        # measures its own (its measurement's first check)
        assert executor(small)._kept_baseline(task, LOCKED_OPTIONS) is None
        assert executor(small)._cached_timing("baseline", task, LOCKED_OPTIONS) is None
        executor(small)._keep_baseline(task, LOCKED_OPTIONS, over)
        reader = executor(small)
        assert reader._kept_baseline(task, LOCKED_OPTIONS) == (over.timing, 0.0)
        # and its candidates, past its cap as its baseline, are compared with it
        candidate = _candidate(product, task, tmp_path / "candidate", small.host_lock_max_mb << 20)
        seconds = dict(candidate.seconds)
        timing = reader._baseline_timing(task, WITH_BASELINE, "host", None, seconds, None)
        assert timing == over.timing and same_host_memory(timing, seconds) == over.timing, seconds
        # the large cap's executors read the locked one, and so does any whose cap holds its total
        assert executor(large)._kept_baseline(task, LOCKED_OPTIONS) == (locked.timing, 1.0)
        larger = executor(large.model_copy(update={"host_lock_max_mb": 64}))
        assert larger._kept_baseline(task, LOCKED_OPTIONS) == (locked.timing, 1.0)
        # one stored without the total its cap was applied to (before it was recorded) is not read
        stored = {k: v for k, v in locked.seconds.items() if k != "host_lock_total_bytes"}
        assert larger._baselines is not None and locked.timing is not None
        larger._baselines.save(device, baseline_key(task, LOCKED_OPTIONS), locked.timing, seconds=stored)
        assert executor(large)._kept_baseline(task, LOCKED_OPTIONS) is None
    finally:
        for each in evaluators:
            each.close()
