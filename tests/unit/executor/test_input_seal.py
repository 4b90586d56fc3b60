"""A set's const inputs, for a runner, in a sealed memfd: the worker writes them, nothing else can.

:class:`executor.worker.runner.SharedArrays` lays a set's ``in`` arrays out in a memfd of their own,
maps it (read-write) and then seals it (``F_SEAL_FUTURE_WRITE``, no growing, no shrinking, no more
seals). Review 39's H2 wrote its const input in a runner and had a timer restore it before the worker's
check; the runner is now handed that memfd and maps it read-only. Here, in this process (a seal is the
file's, whoever holds a descriptor of it): every way a process with the descriptor has to write is
refused, and the worker's own mapping, made before the seal, still writes (it fills the set after
the seal, and refills a run's buffers before each call). The same routes tried by a candidate inside
a runner: tests/integration/executor/test_const_input_seal.py.
"""

from __future__ import annotations

import ctypes
import errno
import fcntl
import mmap
import os
from collections.abc import Iterator

import numpy as np
import pytest

from executor.worker import runner
from executor.worker.runner import SEALED_PART, SharedArrays, input_seal, view_arrays

ARRAYS: dict[str, np.ndarray] = {
    "x": np.zeros(3000, np.float32),
    "w": np.zeros(5, np.int64),
    "y": np.zeros(3000, np.float32),
}
FALLOC_FL_KEEP_SIZE, FALLOC_FL_PUNCH_HOLE = 1, 2
MADV_REMOVE = 9


@pytest.fixture
def shared() -> Iterator[SharedArrays]:
    if input_seal() is not None:
        pytest.skip(f"no sealed const inputs on this kernel: {input_seal()}")
    made = SharedArrays.like(ARRAYS, readonly={"x", "w"})
    made.arrays["x"][:] = 1.5  # the worker fills a set after it is sealed
    made.arrays["w"][:] = 7
    try:
        yield made
    finally:
        made.close()


def _refused(call: object, *args: object) -> int:
    """The errno ``call(*args)`` fails with (the test fails where it succeeds)."""
    try:
        assert callable(call)
        call(*args)
    except OSError as e:
        return e.errno or 0
    raise AssertionError(f"{call} went through")


def test_the_const_inputs_are_in_a_sealed_memfd_of_their_own(shared: SharedArrays) -> None:
    assert len(shared.fds) == 2
    parts = {name: part for name, _, _, _, part in shared.layout}
    assert parts == {"x": SEALED_PART, "w": SEALED_PART, "y": 0}
    seals = fcntl.fcntl(shared.fds[SEALED_PART], fcntl.F_GET_SEALS)
    assert seals == runner.INPUT_SEALS, hex(seals)
    assert fcntl.fcntl(shared.fds[0], fcntl.F_GET_SEALS) == fcntl.F_SEAL_SEAL  # not sealable
    assert float(shared.arrays["x"][0]) == 1.5 and int(shared.arrays["w"][4]) == 7


def test_no_descriptor_of_the_sealed_memfd_writes(shared: SharedArrays) -> None:
    fd = shared.fds[SEALED_PART]
    size = os.fstat(fd).st_size
    assert _refused(os.pwrite, fd, b"\1", 0) == errno.EPERM
    assert _refused(os.write, fd, b"\1") == errno.EPERM
    reopened = os.open(f"/proc/self/fd/{fd}", os.O_RDWR)  # opens: the seal is on its writes
    try:
        assert _refused(os.pwrite, reopened, b"\1", 0) == errno.EPERM
        assert _refused(mmap.mmap, reopened, size, mmap.MAP_SHARED) == errno.EPERM
    finally:
        os.close(reopened)
    assert _refused(mmap.mmap, fd, size, mmap.MAP_SHARED) == errno.EPERM
    assert _refused(os.ftruncate, fd, 0) == errno.EPERM
    assert _refused(os.ftruncate, fd, size + mmap.PAGESIZE) == errno.EPERM
    libc = ctypes.CDLL(None, use_errno=True)
    punched = libc.fallocate(
        fd, FALLOC_FL_KEEP_SIZE | FALLOC_FL_PUNCH_HOLE, ctypes.c_long(0), ctypes.c_long(size)
    )
    assert punched == -1 and ctypes.get_errno() == errno.EPERM
    assert _refused(fcntl.fcntl, fd, fcntl.F_ADD_SEALS, 0) == errno.EPERM  # F_SEAL_SEAL: no seal off or on
    assert float(shared.arrays["x"][0]) == 1.5 and int(shared.arrays["w"][4]) == 7


def test_a_read_only_mapping_of_it_cannot_be_made_writable(shared: SharedArrays) -> None:
    """What a runner has (:func:`view_arrays` with the sealed part read-only): numpy's arrays are
    read-only, and neither mprotect nor ``MADV_REMOVE`` (a hole punched through the mapping) works."""
    theirs = view_arrays(shared.fds, shared.layout, (SEALED_PART,))
    assert not theirs["x"].flags.writeable and theirs["y"].flags.writeable
    assert float(theirs["x"][0]) == 1.5
    libc = ctypes.CDLL(None, use_errno=True)
    page = theirs["x"].ctypes.data // mmap.PAGESIZE * mmap.PAGESIZE
    rw = mmap.PROT_READ | mmap.PROT_WRITE
    assert libc.mprotect(ctypes.c_void_p(page), ctypes.c_size_t(mmap.PAGESIZE), rw) == -1
    assert ctypes.get_errno() == errno.EACCES
    assert libc.madvise(ctypes.c_void_p(page), ctypes.c_size_t(mmap.PAGESIZE), MADV_REMOVE) == -1
    # The worker's mapping, made before the seal, still writes; the runner's sees it.
    shared.arrays["x"][0] = 2.5
    assert float(theirs["x"][0]) == 2.5
    theirs["y"][0] = 3.0  # the outputs stay the runner's to write
    assert float(shared.arrays["y"][0]) == 3.0


@pytest.mark.parametrize("off", ["kernel", "switch"])
def test_where_there_is_no_seal_every_array_is_in_the_read_write_memfd(
    monkeypatch: pytest.MonkeyPatch, off: str
) -> None:
    """As before session 39, on a kernel older than 5.1 (its refusal stood in for here) or with
    ``REGRAPH_EXECUTOR_RUNNER_SEAL=0``: one read-write memfd, nothing sealed, and the line that says
    where a candidate runs says so."""
    if off == "kernel":
        monkeypatch.setattr(runner, "kernel_seal", lambda: "the kernel refused F_SEAL_FUTURE_WRITE (test)")
    else:
        monkeypatch.setenv(runner.SEAL_ENV, "off")
    made = SharedArrays.like(ARRAYS, readonly={"x", "w"})
    try:
        assert len(made.fds) == 1
        assert {part for *_, part in made.layout} == {0}
        said = runner.const_inputs_said()
        assert "writable there" in said
        assert ("(test)" if off == "kernel" else f"{runner.SEAL_ENV} is off") in said, said
    finally:
        made.close()


def test_a_set_with_no_const_input_has_one_memfd() -> None:
    made = SharedArrays.like({"y": np.zeros(4, np.float32)}, readonly={"x"})
    try:
        assert len(made.fds) == 1
    finally:
        made.close()
