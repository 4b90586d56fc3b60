"""A stored timing input is hashed and mapped read-only through one open file (timingset._mapped_verified,
session 30; a single read-and-hash pass into private memory since session 23): the same array as
``np.load``, never private memory or writable, and the same refusals as a digest pass before it (issue
33's cost)."""

from __future__ import annotations

import hashlib
import json
import mmap
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest

from executor import timingset


def _set(root: Path, arrays: dict[str, np.ndarray]) -> tuple[timingset.TimingSetSpec, Path]:
    """A set directory with ``arrays`` saved as .npy files and a manifest naming their digests."""
    directory = root / "key0"
    directory.mkdir()
    files = {}
    for name, array in arrays.items():
        path = directory / f"input-{name}.npy"
        np.save(path, array, allow_pickle=False)
        files[path.name] = hashlib.sha256(path.read_bytes()).hexdigest()
    manifest = {"format": timingset.SET_FORMAT, "key": "key0", "seed": 7, "files": files, "inputs": True}
    (directory / timingset.MANIFEST).write_text(json.dumps(manifest))
    return timingset.TimingSetSpec(dir=str(directory), seed=7), directory


@pytest.mark.parametrize(
    "array",
    [
        np.arange(100_003, dtype=np.float32),
        np.arange(12, dtype=np.int64).reshape(3, 4),
        np.asfortranarray(np.arange(12, dtype=np.float64).reshape(3, 4)),
        np.array([np.nan, -0.0, np.inf], dtype=np.float32),
        np.zeros(0, dtype=np.uint8),
    ],
)
def test_the_single_pass_reads_what_np_load_reads(tmp_path: Path, array: np.ndarray) -> None:
    spec, directory = _set(tmp_path, {"x": array})
    path = directory / "input-x.npy"
    got = timingset._mapped_verified(spec, path)
    want = np.load(path, allow_pickle=False)
    assert got.dtype == want.dtype and got.shape == want.shape
    assert got.tobytes(order="A") == want.tobytes(order="A")
    assert got.flags.f_contiguous == want.flags.f_contiguous
    assert not got.flags.writeable
    if array.size:  # a mapping of the stored file, not a copy in the worker's own memory
        assert isinstance(got.base, mmap.mmap) and _mapped_bytes(path) > 0


def _mapped_bytes(path: Path) -> int:
    """The bytes of ``path`` this process has mapped and in its page tables (/proc/self/smaps' Rss of
    every mapping of it; 0 when none)."""
    total, ours = 0, False
    for line in Path("/proc/self/smaps").read_text().splitlines():
        first = line.split(maxsplit=1)[0]
        if "-" in first and not first.endswith(":"):  # a mapping's own line: address range ... path
            ours = line.endswith(" " + str(path))
        elif ours and first == "Rss:":
            total += int(line.split()[1]) * 1024
    return total


def test_a_mapped_input_is_read_in_before_it_is_copied(tmp_path: Path) -> None:
    """Review 31: the copies made of a mapped input run under locks other workers' trials wait on
    (the host copies' and device uploads' locks a chunk at a time, the trials' own lock when nothing
    was copied ahead), so its pages are read in and mapped when it is loaded, not faulted in there."""
    spec, directory = _set(tmp_path, {"x": np.arange(4 << 20, dtype=np.float32)})  # 16 MiB
    path = directory / "input-x.npy"
    got = timingset._mapped_verified(spec, path)
    assert isinstance(got.base, mmap.mmap)
    assert _mapped_bytes(path) >= path.stat().st_size - mmap.PAGESIZE


def test_a_page_that_cannot_be_read_is_refused_when_loaded_not_a_sigbus_later(tmp_path: Path) -> None:
    """Review 31: a page of a mapped input that cannot be read (a damaged disk block; here, a file
    cut short under its mapping) raised SIGBUS in the copy that touched it first, killing the worker
    during the candidate's turn; it is an OSError when the input is loaded (the set is drawn again). In
    a child process: a SIGBUS there would kill this one."""
    path = tmp_path / "input-x.npy"
    path.write_bytes(bytes(1 << 20))
    child = textwrap.dedent(
        f"""
        import mmap, os
        from executor import timingset
        with open({str(path)!r}, "rb") as f:
            mapped = mmap.mmap(f.fileno(), 1 << 20, access=mmap.ACCESS_READ)
        timingset._populate(mapped)
        os.truncate({str(path)!r}, mmap.PAGESIZE)
        try:
            timingset._populate(mapped)
        except OSError as e:
            print("refused:", e)
        """
    )
    root = str(Path(__file__).resolve().parents[3])  # the tree whose executor is tested
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [root, os.environ.get("PYTHONPATH")]))}
    done = subprocess.run(
        [sys.executable, "-c", child], capture_output=True, text=True, timeout=60, env=env, cwd=root
    )
    assert done.returncode == 0, (done.returncode, done.stderr)
    assert "refused: " in done.stdout and "could not be read in" in done.stdout


def test_a_changed_byte_a_trailing_byte_or_a_short_file_is_refused(tmp_path: Path) -> None:
    spec, directory = _set(tmp_path, {"x": np.arange(10_000, dtype=np.float32)})
    path = directory / "input-x.npy"
    intact = path.read_bytes()
    assert timingset._mapped_verified(spec, path).size == 10_000
    for damaged in (
        intact[:5000] + bytes([intact[5000] ^ 1]) + intact[5001:],  # a bit in the middle of the data
        intact + b"\0",  # a byte more after the data
        intact[:-4],  # the last value cut off
    ):
        path.write_bytes(damaged)
        with pytest.raises(ValueError, match=r"digest|header says"):
            timingset._mapped_verified(spec, path)
    path.write_bytes(intact)
    other = directory / "input-y.npy"
    other.write_bytes(intact)
    with pytest.raises(ValueError, match="not in the set's manifest"):
        timingset._mapped_verified(spec, other)


def test_a_damaged_shape_is_refused_before_anything_is_allocated(tmp_path: Path) -> None:
    # Review 23a: a header whose shape reads (4000000000000,) made the read allocate 14.6 TiB
    # (MemoryError: every candidate of the task OUT_OF_MEMORY) instead of refusing the file, which
    # draws the set again.
    spec, directory = _set(tmp_path, {"x": np.arange(1000, dtype=np.float32)})
    path = directory / "input-x.npy"
    intact = path.read_bytes()
    for shape in (b"(4000000000000,)", b"(2000,)", b"(999,)"):
        header = intact[:128].replace(b"(1000,)", shape)
        header = header[:127].rstrip(b"\n").ljust(127)[:127] + b"\n"  # the header's length kept
        path.write_bytes(header + intact[128:])
        with pytest.raises(ValueError, match="header says"):
            timingset._mapped_verified(spec, path)
