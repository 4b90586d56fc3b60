"""The executor's GPU lock between worker processes (executor.gpulock), with real processes."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from executor.gpulock import LOCK_ENV, gpu_exclusive

ROOT = Path(__file__).resolve().parents[3]

HOLDER = """
import sys, time
from pathlib import Path
from executor.gpulock import gpu_exclusive
with gpu_exclusive():
    print("held", flush=True)
    time.sleep(float(sys.argv[1]))
    if len(sys.argv) > 2:
        Path(sys.argv[2]).write_text(repr(time.time()))  # the last thing done while holding it
"""


def _holder(lock: Path, seconds: float, marker: Path | None = None) -> subprocess.Popen[str]:
    env = dict(os.environ, PYTHONPATH=str(ROOT), **{LOCK_ENV: str(lock)})
    args = [sys.executable, "-c", HOLDER, str(seconds)] + ([str(marker)] if marker else [])
    proc = subprocess.Popen(args, stdout=subprocess.PIPE, text=True, env=env)
    assert proc.stdout is not None and proc.stdout.readline().strip() == "held"
    return proc


def test_a_second_holder_waits_for_the_first(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    lock = tmp_path / "gpu.lock"
    monkeypatch.setenv(LOCK_ENV, str(lock))
    marker = tmp_path / "released"
    proc = _holder(lock, 1.0, marker)
    try:
        t0 = time.monotonic()
        with gpu_exclusive():
            waited = time.monotonic() - t0
            got_it = time.time()
            # The holder's last act under the lock happened before this process got it.
            assert marker.exists() and float(marker.read_text()) <= got_it
    finally:
        proc.wait()
    assert waited >= 0.5


def test_a_killed_holder_releases_the_lock(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    lock = tmp_path / "gpu.lock"
    monkeypatch.setenv(LOCK_ENV, str(lock))
    proc = _holder(lock, 60.0)
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    t0 = time.monotonic()
    with gpu_exclusive():
        pass
    assert time.monotonic() - t0 < 5.0


def test_the_lock_is_reentrant_and_a_no_op_without_the_variable(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    lock = tmp_path / "gpu.lock"
    monkeypatch.setenv(LOCK_ENV, str(lock))
    with gpu_exclusive(), gpu_exclusive():  # a nested use in one thread must not deadlock
        assert lock.exists()
    monkeypatch.delenv(LOCK_ENV)
    other = _holder(lock, 0.0)  # still locks through the variable it was given
    other.wait()
    with gpu_exclusive():
        pass
