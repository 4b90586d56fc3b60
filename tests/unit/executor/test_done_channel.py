"""A worker's done channel (executor.sandbox): each record carries the kernel's stamp of when the worker
wrote it, which the executor's clock check takes its windows from (executor.clockcheck), however late
the executor reads; what else a worker can put on it (descriptors, an empty record) is harmless."""

from __future__ import annotations

import array
import os
import platform
import socket
import sys
import time

import pytest

from executor.sandbox import WorkerProcess, _done_channel, _sent_at

pytestmark = pytest.mark.skipif(
    sys.platform != "linux" or platform.machine() not in ("x86_64", "aarch64"),
    reason="the kernel's stamps are taken on Linux x86-64 and arm64 only (a pipe elsewhere)",
)


def _parent_end() -> tuple[WorkerProcess, int]:
    """A worker process's reading side over a fresh channel, without a worker (and the writing end)."""
    proc = object.__new__(WorkerProcess)
    proc._done_sock, proc._done, write = _done_channel()
    assert proc._done_sock is not None, "a pipe: the kernel took no stamps"
    return proc, write


def test_a_record_read_late_carries_when_it_was_written() -> None:
    proc, write = _parent_end()
    try:
        written = time.monotonic()
        os.write(write, b"end\n")
        time.sleep(0.2)  # the reading thread late (the interpreter's lock, a loaded host)
        got = proc._receive()
        assert got is not None
        data, read, sent = got
        assert data == b"end\n"
        assert read - written >= 0.2
        assert abs(sent - written) < 0.05, (sent - written, read - written)
    finally:
        os.close(write)
        proc._close_done()


def test_an_empty_record_is_not_the_channels_end_and_its_close_is() -> None:
    proc, write = _parent_end()
    os.write(write, b"")
    got = proc._receive()
    assert got is not None and got[0] == b"" and proc._done >= 0
    os.close(write)
    assert proc._receive() is None and proc._done < 0 and proc._done_sock is None


def test_descriptors_a_worker_sends_are_never_kept() -> None:
    proc, write = _parent_end()
    r, w = os.pipe()
    try:
        sender = socket.socket(fileno=os.dup(write))
        sender.sendmsg(
            [b"end\n"], [(socket.SOL_SOCKET, socket.SCM_RIGHTS, array.array("i", [r, w]).tobytes())]
        )
        sender.close()
        before = set(os.listdir("/proc/self/fd"))
        got = proc._receive()
        assert got is not None and got[0] == b"end\n"
        assert set(os.listdir("/proc/self/fd")) <= before
    finally:
        for fd in (r, w, write):
            os.close(fd)
        proc._close_done()
    # and a descriptor handed in a control message is closed where one got through: the pipe's only
    # write end, so its read end then reads the pipe's end
    r, w = os.pipe()
    try:
        rights = (socket.SOL_SOCKET, socket.SCM_RIGHTS, array.array("i", [w]).tobytes())
        assert _sent_at([rights], time.monotonic()) is None
        os.set_blocking(r, False)
        assert os.read(r, 1) == b""
    finally:
        os.close(r)
