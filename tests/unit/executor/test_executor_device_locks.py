"""Whose locks a pool's workers take (executor.gpulock.pool_lock): on a GPU, the device's, shared by every
executor of the host that uses that device and by no other; without one, the pool's own."""

from __future__ import annotations

import fcntl
from pathlib import Path

import pytest

from executor.gpulock import LOCK_DIR_ENV, RESOURCES, device_id, hold, lock_files, lock_path
from executor.sandbox import WorkerPool


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
        for resource in RESOURCES:  # every lock of the device: the GPU's, the uploads', the host's
            mine, theirs = lock_path(first.gpu_lock, resource), lock_path(other.gpu_lock, resource)
            with hold(first.gpu_lock, "exclusive", resource):
                assert not _free(lock_path(same.gpu_lock, resource)), resource  # same GPU: waits
                assert _free(theirs), resource  # another GPU: never waits
            assert _free(mine)
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
