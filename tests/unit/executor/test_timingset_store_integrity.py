"""The store of timing sets trusts nothing it did not write (issue 27): every read checks the files'
digests and the set's key and seed in its manifest, and the executor adopts a set a reference worker
hands over only as plain files of the task's shapes, under the key it computed itself."""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import threading
import time
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from executor import jail, sandbox, timingset
from executor.inputs import generate_inputs
from executor.taskformat import FunctionTask, KernelTask


def _stored(task: FunctionTask | KernelTask, root: Path, name: str = "ref.so") -> timingset.TimingSetSpec:
    spec = timingset.timing_set_spec(task, Path(name), root)
    drawn = generate_inputs(task, "timing", spec.seed)
    timingset.store(spec, task, drawn, {"y": drawn.arrays["y"] * np.float32(2)})
    return spec


def _flip_last_byte(path: Path) -> None:
    data = bytearray(path.read_bytes())
    data[-1] ^= 0x01  # one bit of the last value: the header, dtype and length stay right
    path.write_bytes(bytes(data))


def test_a_changed_byte_in_a_stored_file_is_refused_on_read(
    saxpy: FunctionTask | KernelTask, tmp_path: Path
) -> None:
    spec = _stored(saxpy, tmp_path)
    assert timingset.load_expected(spec, saxpy) is not None and timingset.load_inputs(spec, saxpy) is not None
    _flip_last_byte(Path(spec.dir) / "expected-y.npy")
    assert timingset.load_expected(spec, saxpy) is None
    assert timingset.load_inputs(spec, saxpy) is not None  # the inputs are still intact
    _flip_last_byte(Path(spec.dir) / "input-x.npy")
    assert timingset.load_inputs(spec, saxpy) is None


def test_a_set_under_another_key_or_without_digests_is_not_stored(
    saxpy: FunctionTask | KernelTask, tmp_path: Path
) -> None:
    ours = _stored(saxpy, tmp_path, "a.so")
    other = timingset.timing_set_spec(saxpy, Path("b.so"), tmp_path)
    shutil.copytree(ours.dir, other.dir)  # a foreign set, moved under the other task's key
    assert not timingset.stored(other)
    assert timingset.load_expected(other, saxpy) is None and timingset.load_inputs(other, saxpy) is None
    # A set written before the digests (the earlier manifest) is not used, and is replaced when stored.
    manifest = Path(ours.dir) / timingset.MANIFEST
    manifest.write_text(json.dumps({"seed": ours.seed, "task": saxpy.id, "inputs": True}))
    assert not timingset.stored(ours) and timingset.load_expected(ours, saxpy) is None
    drawn = generate_inputs(saxpy, "timing", ours.seed)
    timingset.store(ours, saxpy, drawn, {"y": drawn.arrays["y"]})
    again = timingset.load_expected(ours, saxpy)
    assert again is not None and np.array_equal(again["y"], drawn.arrays["y"])


def test_the_executor_adopts_a_handed_set_under_its_own_key_and_refuses_links(
    saxpy: FunctionTask | KernelTask, tmp_path: Path
) -> None:
    store, worker = tmp_path / "store", tmp_path / "worker"
    spec = timingset.timing_set_spec(saxpy, Path("ref.so"), store)
    assert not timingset.adopt(spec, saxpy, worker)  # nothing handed over
    handed = timingset.handed_over(spec, worker)
    drawn = generate_inputs(saxpy, "timing", spec.seed)
    timingset.store(handed, saxpy, drawn, {"y": drawn.arrays["y"] + np.float32(1)})
    # A link in the handed set is refused, even to a file of the right content (the executor reads,
    # as its own user, only what the worker wrote).
    expected = Path(handed.dir) / "expected-y.npy"
    os.rename(expected, tmp_path / "elsewhere.npy")
    expected.symlink_to(tmp_path / "elsewhere.npy")
    assert not timingset.adopt(spec, saxpy, worker) and not timingset.stored(spec)
    expected.unlink()
    os.rename(tmp_path / "elsewhere.npy", expected)
    assert timingset.adopt(spec, saxpy, worker) and timingset.stored(spec)
    adopted = timingset.load_expected(spec, saxpy)
    assert adopted is not None and np.array_equal(adopted["y"], drawn.arrays["y"] + np.float32(1))
    for path in Path(spec.dir).iterdir():
        assert path.stat().st_mode & 0o777 == 0o644, path  # read by the workers, written by no one
    assert Path(spec.dir).stat().st_mode & 0o777 == 0o755


def test_a_handed_set_of_the_wrong_shape_is_refused(saxpy: FunctionTask | KernelTask, tmp_path: Path) -> None:
    spec = timingset.timing_set_spec(saxpy, Path("ref.so"), tmp_path / "store")
    handed = timingset.handed_over(spec, tmp_path / "worker")
    drawn = generate_inputs(saxpy, "timing", spec.seed)
    timingset.store(handed, saxpy, drawn, {"y": drawn.arrays["y"][:-1]})  # one value short
    assert not timingset.adopt(spec, saxpy, tmp_path / "worker")
    assert not timingset.stored(spec)


def test_a_claim_is_held_until_released_and_a_worker_sees_it_read_only(
    saxpy: FunctionTask | KernelTask, tmp_path: Path
) -> None:
    """The executor's claim on a task's preparation: one holder at a time on the host; a worker, which
    opens the lock file read-only, sees it held and waits; once released, the waiting side goes on
    (here the task is not prepared, so it would prepare it itself)."""
    spec = timingset.timing_set_spec(saxpy, Path("ref.so"), tmp_path)
    assert not timingset.claimed(spec)  # no lock file made: nothing held
    first = timingset.claim(spec)
    assert first is not None
    timingset.lock_path(spec).chmod(0o444)  # as a worker sees it
    assert timingset.claimed(spec)
    assert timingset.claim(spec) is None  # a second job of the host does not get it
    timingset.release(first)
    assert not timingset.claimed(spec)
    assert timingset.await_preparation(spec, 2, False) is False
    second = timingset.claim(spec)
    assert second is not None
    timingset.release(second)


def test_a_waiting_job_goes_on_once_the_holder_has_stored_the_sets(
    saxpy: FunctionTask | KernelTask, tmp_path: Path
) -> None:
    """A job without the claim waits while the holder prepares and adopts, then finds the task prepared
    (the holder lets go only after storing, so the waiter never prepares it a second time)."""
    spec = timingset.timing_set_spec(saxpy, Path("ref.so"), tmp_path / "store")
    holder = timingset.claim(spec)
    assert holder is not None

    def store_then_release() -> None:
        time.sleep(0.3)
        for variant in timingset.variants(spec, 2):
            drawn = generate_inputs(saxpy, "timing", variant.seed)
            handed = timingset.handed_over(variant, tmp_path / "worker")
            timingset.store(handed, saxpy, drawn, {"y": drawn.arrays["y"]})
            assert timingset.adopt(variant, saxpy, tmp_path / "worker")
        timingset.release(holder)

    thread = threading.Thread(target=store_then_release)
    thread.start()
    try:
        assert timingset.await_preparation(spec, 2, False) is True
    finally:
        thread.join()


@pytest.mark.parametrize("count", [2, 3])
def test_prepared_needs_every_set_and_the_timing(
    saxpy: FunctionTask | KernelTask, tmp_path: Path, count: int
) -> None:
    spec = _stored(saxpy, tmp_path)
    assert not timingset.prepared(spec, count, False)  # only the first of the sets
    for variant in timingset.variants(spec, count)[1:]:
        drawn = generate_inputs(saxpy, "timing", variant.seed)
        timingset.store(variant, saxpy, drawn, {"y": drawn.arrays["y"]})
    assert timingset.prepared(spec, count, False) and not timingset.prepared(spec, count, True)


def test_outputs_checked_before_the_run_are_read_after_it_without_hashing_again(
    saxpy: FunctionTask | KernelTask, tmp_path: Path
) -> None:
    """A candidate worker checks its expected outputs' digests while the candidate compiles and reads
    them after the trials without hashing them under the GPU lock: shown by a manifest digest that no
    longer matches, which a full read refuses and the checked read does not look at."""
    spec = _stored(saxpy, tmp_path)
    checked = timingset.expected_checked(spec, saxpy)
    assert list(checked) == [str(Path(spec.dir) / "expected-y.npy")]
    manifest_path = Path(spec.dir) / timingset.MANIFEST
    manifest = json.loads(manifest_path.read_text())
    manifest["files"]["expected-y.npy"] = "0" * 64
    manifest_path.write_text(json.dumps(manifest))
    assert timingset.load_expected(spec, saxpy) is None
    read = timingset.load_expected(spec, saxpy, checked)
    assert read is not None and np.array_equal(read["y"], np.load(Path(spec.dir) / "expected-y.npy"))


def test_an_output_replaced_after_its_check_is_hashed_again_and_refused(
    saxpy: FunctionTask | KernelTask, tmp_path: Path
) -> None:
    spec = _stored(saxpy, tmp_path)
    checked = timingset.expected_checked(spec, saxpy)
    path = Path(spec.dir) / "expected-y.npy"
    replacement = tmp_path / "replacement.npy"
    shutil.copyfile(path, replacement)
    _flip_last_byte(replacement)
    os.replace(replacement, path)  # another file (inode) of the same size in its place
    assert timingset.load_expected(spec, saxpy, checked) is None
    # A file that fails its digest before the run is not trusted after it either.
    spec2 = _stored(saxpy, tmp_path, "other.so")
    _flip_last_byte(Path(spec2.dir) / "expected-y.npy")
    assert timingset.expected_checked(spec2, saxpy) == {}
    assert timingset.load_expected(spec2, saxpy, {}) is None


def _bytes_read() -> int:
    """The bytes this process has read through read calls so far (/proc/self/io's ``rchar``)."""
    for line in Path("/proc/self/io").read_text().splitlines():
        if line.startswith("rchar:"):
            return int(line.split()[1])
    raise AssertionError("no rchar in /proc/self/io")


def _read_while(action: object) -> int:
    before = _bytes_read()
    assert callable(action)
    action()
    return _bytes_read() - before


def test_a_set_still_as_published_is_read_without_hashing_and_a_replaced_file_is_hashed(
    saxpy: FunctionTask | KernelTask, tmp_path: Path
) -> None:
    """Session 30: every candidate worker hashed every timing set's files again. A file whose identity
    is the one the manifest recorded when the set was published is read as mapped (no byte read but
    its header); one put in its place, even with equal content, is hashed as before."""
    spec = _stored(saxpy, tmp_path)
    size = (Path(spec.dir) / "input-x.npy").stat().st_size
    assert size > 8 << 20
    loaded: list[object] = []
    assert _read_while(lambda: loaded.append(timingset.load_inputs(spec, saxpy))) < size // 100
    assert loaded[0] is not None
    checked: list[dict[str, timingset.StatKey]] = []
    assert _read_while(lambda: checked.append(timingset.expected_checked(spec, saxpy))) < size // 100
    assert list(checked[0]) == [str(Path(spec.dir) / "expected-y.npy")]
    assert _read_while(lambda: loaded.append(timingset.load_expected(spec, saxpy))) < size // 100
    read = loaded[1]
    assert isinstance(read, dict) and np.array_equal(read["y"], np.load(Path(spec.dir) / "expected-y.npy"))
    # The same bytes in another file (another inode) put in its place: hashed, and still right.
    for name in ("input-x.npy", "expected-y.npy"):
        path = Path(spec.dir) / name
        shutil.copyfile(path, tmp_path / name)
        os.replace(tmp_path / name, path)
    assert _read_while(lambda: loaded.append(timingset.load_inputs(spec, saxpy))) >= size
    assert _read_while(lambda: loaded.append(timingset.expected_checked(spec, saxpy))) >= size
    again = timingset.load_inputs(spec, saxpy)
    assert again is not None and np.array_equal(again.arrays["x"], np.load(Path(spec.dir) / "input-x.npy"))


def test_a_file_written_in_place_with_its_old_times_put_back_is_refused(
    saxpy: FunctionTask | KernelTask, tmp_path: Path
) -> None:
    """Its inode, size and modification time are those the manifest recorded; its change time is not
    (the kernel sets it on every write and utime), so it is hashed, and refused."""
    spec = _stored(saxpy, tmp_path)
    for name in ("input-x.npy", "expected-y.npy"):
        path = Path(spec.dir) / name
        st = path.stat()
        _past_change_time(st, tmp_path)  # else the write's change time could be the same tick's
        with path.open("r+b") as f:
            f.seek(-1, os.SEEK_END)
            last = f.read(1)
            f.seek(-1, os.SEEK_END)
            f.write(bytes([last[0] ^ 1]))
        os.utime(path, ns=(st.st_atime_ns, st.st_mtime_ns))
        now = path.stat()
        assert (now.st_ino, now.st_size, now.st_mtime_ns) == (st.st_ino, st.st_size, st.st_mtime_ns)
        assert now.st_ctime_ns != st.st_ctime_ns
    assert timingset.load_inputs(spec, saxpy) is None
    assert timingset.expected_checked(spec, saxpy) == {}
    assert timingset.load_expected(spec, saxpy) is None


def _past_change_time(st: os.stat_result, scratch: Path) -> None:
    """Wait until a file changed now gets a later change time than ``st``'s at its file system's own
    timestamp resolution (a few ms on most, 1 s on some): shown by a scratch file on the same file
    system, changed until its change time is later (at most 5 s)."""
    probe = scratch / ".ctime-probe"
    deadline = time.monotonic() + 5
    while True:
        probe.write_bytes(b"x")
        if probe.stat().st_ctime_ns > st.st_ctime_ns:
            return
        assert time.monotonic() < deadline, "the file system's change times did not move in 5 s"
        time.sleep(0.005)


def test_the_executor_opening_a_published_set_to_the_jail_keeps_its_identity(
    saxpy: FunctionTask | KernelTask, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Review 31: the executor (as root, its workers jailed) opens a task's stored sets to the jail's
    uid on every job hand-over and admission (sandbox._open_timing_sets). It chmodded every file again
    though its mode already let the jail read it, and a chmod sets the change time: no file kept the
    identity it was published with (every worker hashed every set again), the outputs checked ahead of
    the trials were hashed again after them under the GPU lock, and a worker hashing a file meanwhile
    refused the whole set. A published set is left as it is; a file or directory the jail cannot read
    is still opened to it."""
    if not jail.is_root():  # what it does as root, on files of this test's own user
        monkeypatch.setattr(sandbox, "is_root", lambda: True)
    spec = _stored(saxpy, tmp_path)
    directory = Path(spec.dir)
    manifest = json.loads((directory / timingset.MANIFEST).read_text())
    names = ["input-x.npy", "input-y.npy", "expected-y.npy"]
    assert sorted(manifest["files"]) == sorted(names)
    checked = timingset.expected_checked(spec, saxpy)
    _past_change_time((directory / names[0]).stat(), tmp_path)  # a chmod now would show
    sandbox._open_timing_sets(spec.dir)
    for name in names:
        assert timingset._published(manifest, name, timingset._stat_key((directory / name).stat())), name
    expected = directory / "expected-y.npy"
    assert checked[str(expected)] == timingset._stat_key(expected.stat())
    size = (directory / "input-x.npy").stat().st_size
    assert _read_while(lambda: timingset.load_inputs(spec, saxpy)) < size // 100  # not hashed again
    # What the jail cannot read is still opened to it.
    (directory / "input-x.npy").chmod(0o600)
    directory.chmod(0o700)
    sandbox._open_timing_sets(spec.dir)
    assert (directory / "input-x.npy").stat().st_mode & 0o777 == 0o604
    assert directory.stat().st_mode & 0o777 == 0o705


def test_a_file_changed_while_it_is_hashed_is_refused(
    saxpy: FunctionTask | KernelTask, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A stored input that is not as published is hashed and mapped through one open file; when its
    identity changed meanwhile (here its modification time, set while it is hashed), what was hashed
    may not be what is mapped: refused, and the set drawn again."""
    spec = _stored(saxpy, tmp_path)
    path = Path(spec.dir) / "input-x.npy"
    shutil.copyfile(path, tmp_path / "copy.npy")
    os.replace(tmp_path / "copy.npy", path)  # the same bytes, another inode: hashed when read
    real = hashlib.file_digest

    def changing_while_hashed(f: Any, digest: Any) -> Any:
        done = real(f, digest)
        st = path.stat()
        os.utime(path, ns=(st.st_atime_ns, st.st_mtime_ns - 10**9))
        return done

    monkeypatch.setattr(hashlib, "file_digest", changing_while_hashed)
    with pytest.raises(ValueError, match="changed while it was checked"):
        timingset._mapped_verified(spec, path)
    assert timingset.load_inputs(spec, saxpy) is None
    monkeypatch.setattr(hashlib, "file_digest", real)
    assert timingset.load_inputs(spec, saxpy) is not None  # unchanged while hashed: read
