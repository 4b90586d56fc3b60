"""A compute-bound function task's trials hold the host memory's lock shared (executor.gpulock.
function_run_shared; issue 29), with real processes on the lock files of two GPUs of one host: they
overlap another GPU's compute-bound trials and host traffic, never a copy-bound task's trials (which hold
it alone), never their own GPU's work alone; a copy-bound request waiting behind them is not starved by
later shared holders (the lock's turnstile). Also which tasks count as compute-bound, and which locks a
worker takes for a run that the parent marked so (executor.worker.process.function_locks)."""

from __future__ import annotations

import subprocess
import time
from collections.abc import Callable
from contextlib import AbstractContextManager
from pathlib import Path

import pytest

from executor.gpulock import (
    HOST_SHARED_ENV,
    LOCK_DIR_ENV,
    LOCK_ENV,
    compute_bound,
    device_lock,
    function_checks,
    function_run,
    function_run_shared,
    gpu_exclusive,
    host_copies,
    kernel_run,
    kernel_uploads,
)
from executor.worker.messages import CandidateRun
from executor.worker.process import function_locks
from tests.support.lockholder import held, start_holder


def _holder(
    gpu: str, named: str, seconds: float, marker: Path | None = None, wait: bool = True
) -> subprocess.Popen[str]:
    """A process on GPU ``gpu`` of this host's lock directory holding what ``named`` holds."""
    return start_holder(device_lock(gpu), seconds, marker, named=named, wait=wait)


@pytest.fixture
def gpu0(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """This process is a worker on GPU 0 of a host whose locks are under tmp_path."""
    monkeypatch.setenv(LOCK_DIR_ENV, str(tmp_path / "locks"))
    monkeypatch.setenv(LOCK_ENV, str(device_lock("0")))


Use = Callable[[], AbstractContextManager[None]]


def _waits(other_gpu: str, holder: str, use: Use, hold_s: float = 0.8) -> float:
    """How long ``use`` on GPU 0 waited while a process on ``other_gpu`` held what ``holder`` holds
    (``hold_s`` from its "held"; once ``use`` has it, the holder is ended, not waited for)."""
    other = _holder(other_gpu, holder, hold_s)
    try:
        asked = time.monotonic()
        with use():
            return time.monotonic() - asked
    finally:
        other.kill()
        other.wait()


@pytest.mark.usefixtures("gpu0")
def test_another_gpus_compute_bound_trials_keep_out_only_a_copy_bound_tasks_trials() -> None:
    """While GPU 1 times a compute-bound function task, GPU 0 times its own compute-bound task, checks,
    copies and uploads beside it; only a copy-bound task's trials (the host memory alone) wait."""
    hold_s = 0.8
    for use, waits in (
        (function_run_shared, False),
        (function_checks, False),
        (host_copies, False),
        (kernel_uploads, False),
        (kernel_run, False),
        (function_run, True),
    ):
        waited = _waits("1", "function_run_shared", use, hold_s)
        assert (waited > hold_s / 2) == waits, (use.__name__, waited)


@pytest.mark.usefixtures("gpu0")
def test_compute_bound_trials_wait_for_a_copy_bound_tasks_trials_and_their_own_gpus_work() -> None:
    hold_s = 0.8
    # another GPU's copy-bound trials hold the host memory alone
    assert _waits("1", "function_run", function_run_shared, hold_s) > hold_s / 2
    # on their own GPU, the GPU and the uploads stay theirs alone: a kernel run, another function run
    for holder in ("kernel_run", "function_run_shared", "gpu_exclusive"):
        assert _waits("0", holder, function_run_shared, hold_s) > hold_s / 2, holder
    assert _waits("0", "function_run_shared", gpu_exclusive, hold_s) > hold_s / 2


@pytest.mark.usefixtures("gpu0")
def test_a_copy_bound_request_is_not_starved_by_a_stream_of_compute_bound_trials(tmp_path: Path) -> None:
    """GPU 1's compute-bound trials hold the host memory shared; GPU 0's copy-bound trials ask for it
    alone; GPU 2's compute-bound trials ask after that. GPU 2's wait behind GPU 0's instead of joining
    GPU 1's (which, with ever new shared holders, would keep GPU 0 out for good)."""
    first, copy_bound, late = tmp_path / "first", tmp_path / "copy", tmp_path / "late"
    procs = [_holder("1", "function_run_shared", 1.5, first)]
    try:
        procs.append(_holder("0", "function_run", 0.5, copy_bound, wait=False))
        time.sleep(0.3)  # GPU 0's request now waits at the host memory's lock, its turnstile held
        procs.append(_holder("2", "function_run_shared", 0.0, late, wait=False))
    finally:
        for proc in procs:
            proc.wait()
    _, first_last = held(first)
    copy_got, copy_last = held(copy_bound)
    late_got, _ = held(late)
    assert first_last <= copy_got  # the copy-bound trials were alone on the host memory
    assert copy_last <= late_got  # the later compute-bound trials waited for them


def test_which_tasks_are_compute_bound(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(HOST_SHARED_ENV, raising=False)
    mb = 1_000_000
    assert compute_bound(100 * mb, 100.0)  # 1 GB/s
    assert not compute_bound(100 * mb, 40.0)  # 2.5 GB/s
    assert not compute_bound(100 * mb, None)  # not timed yet: alone
    assert not compute_bound(0, 100.0)  # its bytes not known
    monkeypatch.setenv(HOST_SHARED_ENV, "3")
    assert compute_bound(100 * mb, 40.0)
    monkeypatch.setenv(HOST_SHARED_ENV, "0")  # off: every function task's trials alone
    assert not compute_bound(100 * mb, 1000.0)
    for bad in ("fast", "-1", "inf", "nan"):
        monkeypatch.setenv(HOST_SHARED_ENV, bad)
        with pytest.raises(ValueError, match=HOST_SHARED_ENV):
            compute_bound(100 * mb, 100.0)


def test_a_worker_holds_the_host_memory_shared_only_for_a_run_marked_compute_bound() -> None:
    for release in (True, False):
        run = CandidateRun(candidate_product="c.so", candidate_symbol="f", release_gpu=release)
        # The trials' lock, under the wrapper that moves the worker to the timing cores when on.
        assert function_locks(run).timing.__wrapped__ is function_run  # type: ignore[union-attr]
        marked = function_locks(run.model_copy(update={"host_shared": True}))
        assert marked.timing.__wrapped__ is function_run_shared  # type: ignore[union-attr]
        assert (marked.after_release is host_copies) == release


def test_a_bad_threshold_stops_the_evaluator_from_starting(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from executor.evaluate import Evaluator
    from executor.settings import ExecutorSettings

    monkeypatch.setenv(HOST_SHARED_ENV, "fast")
    with pytest.raises(ValueError, match=HOST_SHARED_ENV):
        Evaluator(ExecutorSettings(cache_dir=tmp_path, runtime="none", prewarm_workers=False))
