"""The evaluator's GPU turns (executor.gputurns): one run at a time, and who goes next, with real threads;
and the probe of the device's lock it asks (gpulock.held_elsewhere), with a real process holding it."""

from __future__ import annotations

import os
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from executor.errors import EvaluationCancelled
from executor.gpulock import LOCK_ENV, held_elsewhere
from executor.gputurns import GpuTurns, Kind

ROOT = Path(__file__).resolve().parents[3]


def _order(
    turns: GpuTurns,
    kinds: list[Kind],
    marks: dict[str, tuple[int, bool]] | None = None,
    urgent: frozenset[int] = frozenset(),
) -> list[str]:
    """Hold the turn, queue one run per kind (in that arrival order; those numbered in ``urgent`` as
    urgent runs), let go, and return the order in which the runs got their turns (``kernel1``,
    ``function0``...). Also checks that no two runs held the turn at once."""
    got: list[str] = []
    inside = threading.Semaphore(1)
    overlapped: list[str] = []

    def run(name: str, kind: Kind, n: int) -> None:
        with turns.turn(kind, urgent=n in urgent) as mine:
            if not inside.acquire(blocking=False):
                overlapped.append(name)
            got.append(name)
            if marks is not None:
                marks[name] = (mine.skipped, mine.ahead)
            time.sleep(0.01)
            inside.release()

    threads = []
    with turns.turn("function"):
        for n, kind in enumerate(kinds):
            thread = threading.Thread(target=run, args=(f"{kind}{n}", kind, n), daemon=True)
            thread.start()
            threads.append(thread)
            deadline = time.monotonic() + 5
            while len(turns.waiting()) < n + 1:  # each waits before the next arrives
                assert time.monotonic() < deadline
                time.sleep(0.001)
    for thread in threads:
        thread.join(timeout=10)
    assert not overlapped, f"two runs held the GPU at once: {overlapped}"
    return got


@pytest.mark.parametrize("kernel_first", [False, True])
def test_an_urgent_run_goes_before_every_run_that_came_earlier(kernel_first: bool) -> None:
    """A task's naive baseline waits as an urgent run: the verdicts of its first candidates wait for it,
    so it goes before the runs that came earlier (urgent ones among themselves in arrival order), with
    or without ``kernel_first`` and whatever the device is doing."""
    turns = GpuTurns(kernel_first=kernel_first, busy=lambda: True)
    got = _order(turns, ["function", "kernel", "function", "kernel", "function"], urgent=frozenset({2, 4}))
    assert got[:2] == ["function2", "function4"]
    assert sorted(got[2:]) == ["function0", "kernel1", "kernel3"]


def test_by_default_runs_go_in_arrival_order_even_while_the_device_is_busy() -> None:
    turns = GpuTurns(busy=lambda: True)
    assert _order(turns, ["function", "kernel", "function", "kernel"]) == [
        "function0",
        "kernel1",
        "function2",
        "kernel3",
    ]
    assert turns.kernel_turns_ahead == 0


def test_kernel_first_lets_a_kernel_run_pass_function_runs_while_the_device_is_busy() -> None:
    turns = GpuTurns(kernel_first=True, max_skips=5, busy=lambda: True)
    assert _order(turns, ["function", "function", "kernel", "kernel"]) == [
        "kernel2",
        "kernel3",
        "function0",
        "function1",
    ]
    assert turns.kernel_turns_ahead == 2


def test_kernel_first_keeps_arrival_order_while_the_device_is_free() -> None:
    turns = GpuTurns(kernel_first=True, max_skips=5, busy=lambda: False)
    assert _order(turns, ["function", "kernel", "function", "kernel"]) == [
        "function0",
        "kernel1",
        "function2",
        "kernel3",
    ]


def test_a_function_run_is_passed_over_at_most_max_skips_times() -> None:
    turns = GpuTurns(kernel_first=True, max_skips=2, busy=lambda: True)
    marks: dict[str, tuple[int, bool]] = {}
    assert _order(turns, ["function", "kernel", "kernel", "kernel", "kernel"], marks) == [
        "kernel1",
        "kernel2",
        "function0",
        "kernel3",
        "kernel4",
    ]
    # what each run's Turn says (the verdict's turn_skipped / turn_ahead)
    assert marks == {
        "kernel1": (0, True),
        "kernel2": (0, True),
        "function0": (2, False),
        "kernel3": (0, False),
        "kernel4": (0, False),
    }


def test_a_run_cancelled_while_waiting_gives_up_and_the_next_one_goes() -> None:
    turns = GpuTurns(kernel_first=True, busy=lambda: True)
    cancelled = threading.Event()
    outcome: list[str] = []

    def waiter(kind: Kind, event: threading.Event | None, name: str) -> None:
        try:
            with turns.turn(kind, event):
                outcome.append(name)
        except EvaluationCancelled:
            outcome.append(f"{name} cancelled")

    with turns.turn("function"):
        first = threading.Thread(target=waiter, args=("kernel", cancelled, "kernel"))
        first.start()
        while turns.waiting() != ["kernel"]:
            time.sleep(0.001)
        second = threading.Thread(target=waiter, args=("function", None, "function"))
        second.start()
        while len(turns.waiting()) < 2:
            time.sleep(0.001)
        cancelled.set()
        first.join(timeout=5)
        assert outcome == ["kernel cancelled"] and turns.waiting() == ["function"]
    second.join(timeout=5)
    assert outcome == ["kernel cancelled", "function"]
    assert not turns.locked()


def test_a_failing_probe_means_arrival_order_and_never_stops_the_turns() -> None:
    def broken() -> bool:
        raise OSError("the lock file is gone")

    turns = GpuTurns(kernel_first=True, busy=broken)
    assert _order(turns, ["function", "kernel"]) == ["function0", "kernel1"]
    assert not turns.locked() and turns.waiting() == []


HOLD_SHARED = """
import sys, time
from executor.gpulock import gpu_lock
with gpu_lock("shared"):
    print("held", flush=True)
    sys.stdin.readline()
"""


def test_held_elsewhere_sees_another_process_holding_the_gpu_lock_shared(tmp_path: Path) -> None:
    lock = tmp_path / "gpu.lock"
    lock.touch()
    assert not held_elsewhere(lock)
    env = dict(os.environ, **{LOCK_ENV: str(lock)}, PYTHONPATH=str(ROOT))
    holder = subprocess.Popen(
        [sys.executable, "-c", HOLD_SHARED], env=env, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True
    )
    try:
        assert holder.stdout is not None and holder.stdout.readline().strip() == "held"
        assert held_elsewhere(lock)
        assert not held_elsewhere(lock, "uploads")  # another resource's lock is free
    finally:
        assert holder.stdin is not None
        holder.stdin.write("\n")
        holder.stdin.close()
        holder.wait(timeout=10)
    assert not held_elsewhere(lock)  # and the probe itself left nothing held


@pytest.mark.parametrize("kernel_first", [False, True])
def test_the_turn_is_one_at_a_time_under_load(kernel_first: bool) -> None:
    turns = GpuTurns(kernel_first=kernel_first, max_skips=1, busy=lambda: True)
    inside = 0
    worst = 0
    guard = threading.Lock()

    def run(kind: Kind) -> None:
        nonlocal inside, worst
        for _ in range(20):
            with turns.turn(kind):
                with guard:
                    inside += 1
                    worst = max(worst, inside)
                time.sleep(0.0005)
                with guard:
                    inside -= 1

    threads = [threading.Thread(target=run, args=("kernel" if n % 2 else "function",)) for n in range(6)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=30)
    assert worst == 1 and not turns.locked() and turns.waiting() == []


def test_usage_says_whose_runs_held_the_turns_and_for_how_long() -> None:
    turns = GpuTurns()
    with turns.turn("kernel"):
        pass
    with turns.turn("function", holder="baseline"):
        time.sleep(0.05)
        during = turns.usage()  # a turn held now counts up to now
    after = turns.usage()
    assert during["turns"] == {"candidate": 1, "baseline": 1}
    assert during["held_s"]["baseline"] >= 0.04  # type: ignore[index]
    assert after["held_s"]["baseline"] >= during["held_s"]["baseline"]  # type: ignore[index]
    assert after["waiting"] == 0 and after["seconds"] >= 0.05  # type: ignore[operator]


def test_an_unknown_holder_is_refused_before_it_takes_a_turn() -> None:
    turns = GpuTurns()
    with pytest.raises(ValueError, match="unknown holder"), turns.turn("function", holder="someone"):  # type: ignore[arg-type]
        pass
    with turns.turn("kernel"):  # the turns still go round
        pass
    assert not turns.locked() and turns.usage()["turns"] == {"candidate": 1, "baseline": 0}
