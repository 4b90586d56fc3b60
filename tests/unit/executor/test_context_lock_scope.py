"""What a worker's CUDA start-up holds (executor.gpulock.context_creation): the GPU's lock shared, and with
REGRAPH_CONTEXT_LOCK_SCOPE=host the host memory's too, so that no function task's trials on another GPU
of the host (which hold the host's lock alone) overlap another replica's context creation (issue 29's
A/B)."""

from __future__ import annotations

from pathlib import Path

import pytest

from executor.gpulock import (
    CONTEXT_SCOPE_ENV,
    LOCK_DIR_ENV,
    LOCK_ENV,
    context_creation,
    context_lock_covers_init,
    device_lock,
    held_elsewhere,
)


@pytest.fixture
def lock(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv(LOCK_DIR_ENV, str(tmp_path / "locks"))
    path = device_lock("0")
    monkeypatch.setenv(LOCK_ENV, str(path))
    return path


def test_by_default_a_context_holds_the_gpu_only(lock: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(CONTEXT_SCOPE_ENV, raising=False)
    assert not context_lock_covers_init()
    with context_creation():
        assert held_elsewhere(lock, "gpu") and not held_elsewhere(lock, "host")


def test_with_the_host_scope_a_context_holds_the_host_memory_too(
    lock: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(CONTEXT_SCOPE_ENV, "host")
    assert context_lock_covers_init()
    with context_creation():
        assert held_elsewhere(lock, "gpu") and held_elsewhere(lock, "host")
    assert not held_elsewhere(lock, "gpu") and not held_elsewhere(lock, "host")


def test_an_unknown_scope_is_a_clear_error(lock: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(CONTEXT_SCOPE_ENV, "gpu")
    with pytest.raises(ValueError, match=CONTEXT_SCOPE_ENV), context_creation():
        pass
