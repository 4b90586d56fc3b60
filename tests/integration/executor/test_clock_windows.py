"""The executor's windows around a function task's timed calls (executor.clockcheck) hold each call
however late the executor reads the worker's announcements: they are the kernel's stamps of the
worker's writes (executor.sandbox's done channel), not when the executor's reading thread got to them.
Stamped on reading, a thread late by a switch interval of the interpreter's lock or a scheduler's slice
read a call's start and its end at once (a window of 0: blind to a changed clock) or its end alone late
(session 32 refused an honest 1.11 ms saxpy so: every window above 7.3 ms).

Host runtime, the fixture saxpy built with the host compiler, the executor's reading made late by 30 ms
at each of its waits."""

from __future__ import annotations

import os
import time
from pathlib import Path

import pytest

from executor.runlimit import CallLimit
from executor.sandbox import WorkerProcess, _done_channel, run_job
from executor.worker.messages import CandidateRun
from tests.support.hostcode import FAST, SAXPY_HEAD, build_host_candidates, saxpy_timed_at, timing_set_job

HONEST = SAXPY_HEAD + "for (int i = 0; i < n; ++i) y[i] = a * x[i] + y[i]; }\n"
# As the evaluator sets one: every call announced to the executor.
LIMIT = CallLimit(seconds=30.0, floor_s=20.0, factor=10.0, basis="reference", basis_ms=1000.0)
OPTIONS = FAST.model_copy(update={"min_trials": 8, "max_trials": 8})
LATE_S = 0.03


def test_each_window_holds_its_call_when_the_executor_reads_late(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    sock, read, write = _done_channel()
    if sock is None:  # the windows are read times there, as before session 33: what this test refutes
        os.close(read)
        os.close(write)
        pytest.skip("the done channel is a pipe here: the kernel takes no stamps")
    sock.close()
    os.close(write)
    sleep_until_done = WorkerProcess._sleep_until_done
    handed = WorkerProcess.hand_untrusted
    workers: list[WorkerProcess] = []

    def late(self: WorkerProcess, timeout_s: float) -> None:
        time.sleep(LATE_S)
        sleep_until_done(self, timeout_s)

    def watched(self: WorkerProcess) -> None:
        workers.append(self)
        handed(self)

    monkeypatch.setattr(WorkerProcess, "_sleep_until_done", late)
    monkeypatch.setattr(WorkerProcess, "hand_untrusted", watched)
    task = saxpy_timed_at(1 << 18)  # calls well below the lateness
    product = build_host_candidates(tmp_path, {"honest": HONEST})["honest"]
    run = CandidateRun(candidate_product=product, candidate_symbol=task.entry, call_limit=LIMIT)
    outcome = run_job(timing_set_job(task, tmp_path / "job", OPTIONS), run, timeout_s=120)
    assert outcome.passed, outcome.message
    timing = outcome.candidate_timing
    assert timing is not None and timing.samples_ms is not None
    # every window known (the kernel's stamps, each end's above its start's)
    windows_ms = [w * 1e3 for w in workers[-1].timed_windows if w is not None]
    assert len(windows_ms) == timing.trials == len(timing.samples_ms), (windows_ms, timing.samples_ms)
    # Each window is the time between the worker's writes around its call: never shorter than the call
    # (its own clock's reading, to 4 significant digits).
    for window, call in zip(windows_ms, timing.samples_ms, strict=True):
        assert window >= call * 0.999 - 0.01, (windows_ms, timing.samples_ms)


def test_lines_not_read_before_the_result_appeared_are_read_after_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The worker writes its result after its last call's end; the executor's wait ends when the result
    is there, maybe before it read that end. It reads the channel once more after it stopped the worker,
    so that an honest run has a window for each timed call (with a call limit, fewer are refused:
    executor.clockcheck, review 34). Here the executor reads nothing before the result."""
    handed = WorkerProcess.hand_untrusted
    workers: list[WorkerProcess] = []

    def unread(self: WorkerProcess, timeout_s: float) -> None:
        time.sleep(min(timeout_s, 0.05))

    def watched(self: WorkerProcess) -> None:
        workers.append(self)
        handed(self)

    monkeypatch.setattr(WorkerProcess, "_sleep_until_done", unread)
    monkeypatch.setattr(WorkerProcess, "hand_untrusted", watched)
    task = saxpy_timed_at(1 << 18)
    product = build_host_candidates(tmp_path, {"honest": HONEST})["honest"]
    run = CandidateRun(candidate_product=product, candidate_symbol=task.entry, call_limit=LIMIT)
    outcome = run_job(timing_set_job(task, tmp_path / "job", OPTIONS), run, timeout_s=120)
    assert outcome.passed, outcome.message
    timing = outcome.candidate_timing
    assert timing is not None
    assert len([w for w in workers[-1].timed_windows if w is not None]) == timing.trials
