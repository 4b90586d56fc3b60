"""The executor's locks are let go even when a process forked meanwhile holds a copy of their files.

A ``flock`` belongs to the open file, and a process forked while the file is open holds a copy of it
(until its exec closes it, or for its whole life after a fork without exec). A lock let go only by
closing the file stays held by that copy: a turnstile passed through while another thread started a
worker kept the next ``hold_now`` out (``test_the_evaluators_hold_never_waits_for_an_exclusive_holder``
failed once when run after other tests' files). Every lock is unlocked before its file is closed."""

from __future__ import annotations

import fcntl
import os
import signal
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from executor.gpulock import LOCK_ENV, hold, hold_now, lock_path, reserve, turnstile_path


def _turnstile_taken(lock: Path) -> bool:
    with turnstile_path(lock_path(lock, "gpu")).open("ab") as handle:
        try:
            fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            return True
        fcntl.flock(handle, fcntl.LOCK_UN)
        return False


def _fork_sleeper() -> int:
    """A child with a copy of every file this process has open, alive until it is killed."""
    pid = os.fork()
    if pid == 0:  # pragma: no cover - the child
        try:
            time.sleep(60)
        finally:
            os._exit(0)
    return pid


@pytest.fixture
def lock(tmp_path: Path) -> Iterator[Path]:
    path = tmp_path / "gpu.lock"
    path.touch()
    yield path


def _end(pid: int) -> None:
    os.kill(pid, signal.SIGKILL)
    os.waitpid(pid, 0)


def test_a_forked_copy_of_a_turnstile_passed_in_hold_keeps_nothing(lock: Path) -> None:
    inside, leave = threading.Event(), threading.Event()

    def exclusive() -> None:
        with hold(lock, "exclusive"):
            inside.set()
            leave.wait(10)

    child = None
    worker = threading.Thread(target=exclusive)
    try:
        with hold(lock, "shared"):  # the exclusive request waits for it, keeping the turnstile
            worker.start()
            deadline = time.monotonic() + 10
            while not _turnstile_taken(lock):
                assert time.monotonic() < deadline, "the exclusive request never reached the turnstile"
                time.sleep(0.005)
            child = _fork_sleeper()  # its copy of the turnstile's file
        assert inside.wait(10)
        leave.set()
        worker.join(10)
        held = hold_now(lock, ("gpu",))
        assert held is not None, "the turnstile is still held by the forked copy of its file"
        held.close()
    finally:
        leave.set()
        worker.join(10)
        if child is not None:
            _end(child)


def test_a_forked_copy_of_a_reserved_turnstile_keeps_nothing(
    lock: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(LOCK_ENV, str(lock))
    with reserve("gpu"):
        child = _fork_sleeper()
    try:
        held = hold_now(lock, ("gpu",))
        assert held is not None, "the reserved turnstile is still held by the forked copy of its file"
        held.close()
    finally:
        _end(child)
