"""Whose locks a pool's workers take (executor.gpulock.pool_lock): on a GPU, the GPU's and the uploads' are
the device's, shared by every executor of the host that uses that device and by no other, and the host
memory's is the host's (or the device's with REGRAPH_HOST_LOCK_SCOPE=device); without one, the pool's own."""

from __future__ import annotations

import fcntl
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from executor.gpulock import (
    HOST_SCOPE_ENV,
    LOCK_DIR_ENV,
    LOCK_ENV,
    device_id,
    device_lock,
    function_checks,
    function_run,
    gpu_exclusive,
    hold,
    host_copies,
    kernel_run,
    kernel_uploads,
    lock_files,
    lock_path,
)
from executor.sandbox import WorkerPool
from tests.support.hostcode import GPULOCK, gpulock_alone

ROOT = Path(__file__).resolve().parents[3]


def _free(lock: Path) -> bool:
    """Whether another holder could take ``lock`` shared now (a new open file: flock sees a rival)."""
    with lock.open("ab") as handle:
        try:
            fcntl.flock(handle, fcntl.LOCK_SH | fcntl.LOCK_NB)
        except BlockingIOError:
            return False
        fcntl.flock(handle, fcntl.LOCK_UN)
        return True


def _pool(monkeypatch: pytest.MonkeyPatch, visible: str, runtime: str = "gpu") -> WorkerPool:
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", visible)
    return WorkerPool(runtime, prewarm=False)  # type: ignore[arg-type]


def test_replicas_on_two_gpus_do_not_contend_and_two_on_one_gpu_do(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(LOCK_DIR_ENV, str(tmp_path / "locks"))
    first, same, other = _pool(monkeypatch, "1"), _pool(monkeypatch, "1"), _pool(monkeypatch, "2")
    try:
        assert first.gpu_lock == same.gpu_lock != other.gpu_lock
        assert first.gpu_lock.parent == other.gpu_lock.parent == tmp_path / "locks"
        for resource in ("gpu", "uploads"):  # the device's own locks
            mine, theirs = lock_path(first.gpu_lock, resource), lock_path(other.gpu_lock, resource)
            with hold(first.gpu_lock, "exclusive", resource):
                assert not _free(lock_path(same.gpu_lock, resource)), resource  # same GPU: waits
                assert _free(theirs), resource  # another GPU: never waits
            assert _free(mine)
        # The host memory's lock is the host's: a replica on another GPU waits for it too.
        assert lock_path(first.gpu_lock, "host") == lock_path(other.gpu_lock, "host")
        with hold(first.gpu_lock, "exclusive", "host"):
            assert not _free(lock_path(same.gpu_lock, "host"))
            assert not _free(lock_path(other.gpu_lock, "host"))
        assert _free(lock_path(other.gpu_lock, "host"))
        # ... and every worker's jail binds it (lock_files names it).
        assert lock_path(other.gpu_lock, "host") in lock_files(first.gpu_lock)
    finally:
        for pool in (first, same, other):
            pool.close()
    # A device's files outlive a pool: another executor of the device may hold them now.
    assert first.gpu_lock.exists()


def test_without_a_gpu_each_pool_has_its_own_lock_and_removes_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(LOCK_DIR_ENV, str(tmp_path / "locks"))
    one, two = _pool(monkeypatch, "1", "host"), _pool(monkeypatch, "1", "host")
    assert one.gpu_lock != two.gpu_lock and one.gpu_lock.parent != tmp_path / "locks"
    with hold(one.gpu_lock, "exclusive"):
        assert _free(two.gpu_lock)
    for pool in (one, two):
        pool.close()
        assert not [path for path in lock_files(pool.gpu_lock) if path.exists()]


def test_the_device_is_named_by_the_first_visible_gpu() -> None:
    assert device_id("3") == "3"
    assert device_id("2,3") == "2"
    assert device_id("") == "0"
    assert device_id("GPU-1a2b/../x") == "GPU-1a2b_.._x"  # a file name, never a path


def test_with_the_device_scope_each_gpu_has_its_own_host_memory_lock(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(LOCK_DIR_ENV, str(tmp_path / "locks"))
    monkeypatch.setenv(HOST_SCOPE_ENV, "device")
    mode = tmp_path.stat().st_mode
    first, same, other = _pool(monkeypatch, "1"), _pool(monkeypatch, "1"), _pool(monkeypatch, "2")
    try:
        assert first.gpu_lock == same.gpu_lock != other.gpu_lock
        assert first.gpu_lock.parent == tmp_path / "locks" / "device-1"
        assert tmp_path.stat().st_mode == mode  # only the locks' own directories are opened to all
        assert lock_path(first.gpu_lock, "host") == lock_path(same.gpu_lock, "host")
        with hold(first.gpu_lock, "exclusive", "host"):
            assert not _free(lock_path(same.gpu_lock, "host"))
            assert _free(lock_path(other.gpu_lock, "host"))
    finally:
        for pool in (first, same, other):
            pool.close()
    monkeypatch.setenv(HOST_SCOPE_ENV, "numa")
    with pytest.raises(ValueError, match=HOST_SCOPE_ENV):
        device_lock("1")


# executor/gpulock.py (argv[2]) loaded alone, not the package: the holder starts in a tenth of the time.
HOLDER = (
    gpulock_alone("sys.argv[2]")
    + """
import time
with gpulock.function_run():
    print("held", flush=True)
    time.sleep(float(sys.argv[1]))
"""
)


def test_another_gpus_function_trials_keep_out_only_the_host_memory_traffic(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """While a worker on GPU 1 times a function task (its trials hold all three locks alone), a worker
    on GPU 0 goes on with its GPU work (a kernel run, a function run's GPU lock) but waits to copy
    between host memory and its GPU: a function task's correctness calls and host copies, a kernel
    task's uploads, a function task's trials."""
    monkeypatch.setenv(LOCK_DIR_ENV, str(tmp_path / "locks"))
    monkeypatch.setenv(LOCK_ENV, str(device_lock("0")))
    env = {**os.environ, "PYTHONPATH": str(ROOT), LOCK_ENV: str(device_lock("1"))}
    hold_s = 1.0
    for use, waits in (
        (kernel_run, False),
        (gpu_exclusive, False),
        (function_checks, True),
        (host_copies, True),
        (kernel_uploads, True),
        (function_run, True),
    ):
        other = subprocess.Popen(
            [sys.executable, "-c", HOLDER, str(hold_s), str(GPULOCK)],
            stdout=subprocess.PIPE,
            text=True,
            env=env,
        )
        try:
            assert other.stdout is not None and other.stdout.readline().strip() == "held"
            asked = time.monotonic()
            with use():
                waited = time.monotonic() - asked
        finally:
            # It held the locks from before the use was asked for (its "held"): what is left of its hold
            # (all of it where the use did not wait) is not waited out.
            other.kill()
            other.wait()
        assert (waited > hold_s / 2) == waits, (use.__name__, waited)


def test_a_jailed_worker_takes_the_hosts_memory_lock(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A worker in the namespace jail is given the host memory's file (lock_files names it): its start-up
    probe takes the function checks' locks (the GPU's and the host memory's, shared) and passes."""
    from executor.jail import protection
    from executor.sandbox import WorkerProcess

    if protection() != "namespace":
        pytest.skip("no namespaces on this host")
    monkeypatch.setenv(LOCK_DIR_ENV, str(tmp_path / "locks"))
    lock = device_lock("7")
    assert lock_path(lock, "host") == tmp_path / "locks" / "host-memory.lock"
    proc = WorkerProcess("candidate", "host", gpu_lock=lock, protection="namespace", command="probe")
    try:
        proc.proc.wait(timeout=120)
        assert proc.proc.returncode == 0 and "probe ok" in proc.stderr_tail(), proc.stderr_tail()
    finally:
        proc.close()
