"""A worker's done channel (executor.sandbox): each record carries the kernel's stamp of when the worker
wrote it, which the executor's clock check takes its windows from (executor.clockcheck), however late
the executor reads; what else a worker can put on it (descriptors, an empty record, a flood) is
harmless."""

from __future__ import annotations

import array
import fcntl
import os
import platform
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from executor import sandbox
from executor.sandbox import BEAT_BUDGET, WorkerProcess, _done_channel, _stamp_ns
from executor.worker.messages import CALL_ENDED, CLOCK_CONFIRM_CALL, TIMED_CALL, call_started

pytestmark = pytest.mark.skipif(
    sys.platform != "linux" or platform.machine() not in ("x86_64", "aarch64"),
    reason="the kernel's stamps are taken on Linux x86-64 and arm64 only (a pipe elsewhere)",
)


def _parent_end() -> tuple[WorkerProcess, int]:
    """A worker process's reading side over a fresh channel, without a worker (and the writing end)."""
    proc = object.__new__(WorkerProcess)
    proc._done_lock = threading.Lock()
    proc._done_sock, proc._done, write = _done_channel()
    if proc._done_sock is None:
        os.close(write)
        pytest.skip("a pipe: the kernel took no stamps here")
    proc._stamped, proc._beats, proc.open_call, proc.released_at = True, b"", None, None
    proc.timed_windows, proc.read_windows, proc.unmatched_ends, proc._timed_since = [], [], 0, None
    proc.confirm_windows, proc.stray_starts, proc._confirming_seen = [], 0, False
    return proc, write


def test_a_record_read_late_carries_when_it_was_written() -> None:
    proc, write = _parent_end()
    try:
        written, written_ns = time.monotonic(), time.time_ns()
        os.write(write, b"end\n")
        time.sleep(0.2)  # the reading thread late (the interpreter's lock, a loaded host)
        got = proc._receive()
        assert got is not None
        data, read, sent = got
        assert data == b"end\n" and sent is not None
        assert read - written >= 0.2
        assert abs(sent - written_ns) < 50_000_000, (sent - written_ns, read - written)
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
        try:
            sender.sendmsg(
                [b"end\n"], [(socket.SOL_SOCKET, socket.SCM_RIGHTS, array.array("i", [r, w]).tobytes())]
            )
        except PermissionError:  # SO_PASSRIGHTS (Linux >= 6.16): refused at the send, nothing queued
            sender.send(b"end\n")
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
        assert _stamp_ns([rights]) is None
        os.set_blocking(r, False)
        assert os.read(r, 1) == b""
    finally:
        os.close(r)


def _announced(proc: WorkerProcess, write: int, calls: list[str | None]) -> None:
    """Each of ``calls`` written as a worker writes it (a start with what it is, or None: an end), one
    record each, and read."""
    for what in calls:
        os.write(write, CALL_ENDED if what is None else call_started(30.0, 1, 1000.0, what))
        while proc._read_beats():
            pass


def test_starts_the_worker_did_not_write_are_counted() -> None:
    """Review 36c's M1: the worker never starts a call with one open, and makes its clock-confirming
    calls after its timed calls; a start that breaks either is counted (executor.clockcheck refuses)."""
    confirming = f"{CLOCK_CONFIRM_CALL}1 on a fresh set after the trials"
    proc, write = _parent_end()
    try:
        _announced(proc, write, [f"{TIMED_CALL}1", None, f"{TIMED_CALL}2", None, confirming, None])
        assert proc.stray_starts == 0 and len(proc.timed_windows) == 2 and len(proc.confirm_windows) == 1
        _announced(proc, write, [f"{TIMED_CALL}3", None])  # a timed call after a confirming one
        assert proc.stray_starts == 1
        _announced(proc, write, [confirming, confirming, None])  # a start with a call open
        assert proc.stray_starts == 2 and len(proc.confirm_windows) == 2
    finally:
        os.close(write)
        proc._close_done()


def test_a_flooded_channel_is_read_a_bounded_amount_at_a_time() -> None:
    """A worker that floods its channel with records of newlines holds one read of the parent for as
    long as those take to go through: at most BEAT_BUDGET bytes a read, as of the pipe (review 34: 256
    records of 4 KiB a read held it 0.9 s)."""
    proc, write = _parent_end()
    try:
        os.set_blocking(write, False)
        queued = 0
        while True:  # the queue filled to what the kernel takes
            try:
                os.write(write, b"\n" * 4096)
            except BlockingIOError:
                break
            queued += 4096
        assert queued > BEAT_BUDGET, queued  # more than one read's worth, or nothing is shown
        taken: list[int] = []
        receive = proc._receive

        def counted() -> tuple[bytes, float, int | None] | None:
            got = receive()
            taken.append(len(got[0]) if got is not None else 0)
            return got

        proc._receive = counted  # type: ignore[method-assign]
        more = proc._read_beats()
        assert 0 < sum(taken) <= BEAT_BUDGET, (sum(taken), len(taken))
        assert more  # stopped at its bound: the rest waits for the next read
    finally:
        os.close(write)
        proc._close_done()


def test_a_channel_whose_probe_comes_back_unstamped_is_a_pipe(monkeypatch: pytest.MonkeyPatch) -> None:
    """A kernel that takes the option and stamps nothing (gVisor), or a stamp of another size (a 32-bit
    interpreter's): the channel falls back to a pipe, read-time stamped, instead of windows unknown."""
    sock, read, write = _done_channel()
    if sock is None:
        os.close(read)
        os.close(write)
        pytest.skip("a pipe already: the kernel took no stamps here")
    sock.close()
    os.close(write)
    monkeypatch.setattr(sandbox, "_stamp_ns", lambda ancillary: None)
    sandbox._kernel_stamps.cache_clear()  # asked once per process: ask again with the stamps gone
    try:
        sock, read, write = _done_channel()
    finally:
        sandbox._kernel_stamps.cache_clear()  # the next test asks the real kernel
    try:
        assert sock is None
        os.write(write, b"x")
        assert os.read(read, 1) == b"x"
    finally:
        os.close(read)
        os.close(write)


def _kernel_takes_passrights() -> bool:
    ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
    try:
        ours.setsockopt(socket.SOL_SOCKET, 83, 0)  # SO_PASSRIGHTS, Linux >= 6.16
    except OSError:
        return False
    finally:
        ours.close()
        theirs.close()
    return True


@pytest.mark.parametrize("passrights", ["kernel", "refused"])
def test_a_descriptor_parked_in_the_channel_goes_before_the_worker_is_reported_gone(
    passrights: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A worker sends a descriptor of a file it holds a flock on in a record the parent has not read,
    and exits: the queued record held the file open, and the lock, after kill() said the worker was
    gone (on a GPU: a /dev/nvidia* descriptor, so its context; review 34). Where the kernel takes
    SO_PASSRIGHTS (Linux >= 6.16) the send is refused; where it refuses the option ("refused": an
    older kernel) the parent's end is closed before kill() reports the worker gone."""
    if passrights == "refused":
        monkeypatch.setattr(sandbox, "_SO_PASSRIGHTS", 0x7EAD)  # no such option: refused as on Linux < 6.16
    proc, write = _parent_end()
    lock = tmp_path / "parked.lock"
    lock.touch()
    child = (
        "import array, fcntl, os, socket, sys\n"
        "fd, path = int(sys.argv[1]), sys.argv[2]\n"
        "held = os.open(path, os.O_RDONLY)\n"
        "fcntl.flock(held, fcntl.LOCK_EX)\n"
        "s = socket.socket(fileno=fd)\n"
        "rights = [(socket.SOL_SOCKET, socket.SCM_RIGHTS, array.array('i', [held]).tobytes())]\n"
        "try:\n"
        "    s.sendmsg([b'parked\\n'], rights)\n"
        "except PermissionError:\n"
        "    print('refused', flush=True)\n"
        "print('sent', flush=True)\n"
        "os._exit(0)\n"
    )
    proc.proc = subprocess.Popen(
        [sys.executable, "-c", child, str(write), str(lock)],
        pass_fds=(write,),
        start_new_session=True,  # stop() kills the worker's process group
        stdout=subprocess.PIPE,
    )
    os.close(write)
    proc.protection, proc._pid = "none", None
    try:
        out = proc.proc.communicate(timeout=30)[0].decode()
        assert "sent" in out, out
        if passrights == "refused":
            assert "refused" not in out, out  # the descriptor is queued
        elif _kernel_takes_passrights():
            assert "refused" in out, out  # never queued
        held = os.open(lock, os.O_RDONLY)
        try:
            assert proc.kill(timeout_s=10)
            fcntl.flock(held, fcntl.LOCK_EX | fcntl.LOCK_NB)  # BlockingIOError: still held
        finally:
            os.close(held)
    finally:
        proc._close_done()


def test_the_kernel_is_asked_for_stamps_once_per_process(monkeypatch: pytest.MonkeyPatch) -> None:
    """The probe record is the kernel's question, not a channel's: two channels, one probe (a warning
    per worker where the kernel stamps nothing, say gVisor, before session 33's second read)."""
    pairs = []
    real = socket.socketpair

    def counted(*args: object) -> tuple[socket.socket, socket.socket]:
        pair = real(*args)  # type: ignore[arg-type]
        pairs.append(pair)
        return pair

    monkeypatch.setattr(socket, "socketpair", counted)
    sandbox._kernel_stamps.cache_clear()
    try:
        channels = [_done_channel(), _done_channel()]
    finally:
        sandbox._kernel_stamps.cache_clear()
    for sock, read, write in channels:
        if sock is not None:
            sock.close()
        else:
            os.close(read)
        os.close(write)
    if channels[0][0] is None:
        pytest.skip("a pipe here: the kernel took no stamps")
    assert len(pairs) == 3, len(pairs)  # the probe's pair, then one per channel
