"""What copying a stored timing input costs under the copies' locks, mapped or read (review 31).

A candidate worker loads its timing inputs while it prepares (``timingset._mapped_verified``: a
read-only mapping of the store's file since session 30) and copies them later into its rotated
copies a chunk (``COPY_CHUNK_BYTES``, 32 MB) at a time, each chunk under the host copies' lock that
other workers' trials wait on (a kernel task's uploads: the device uploads' lock; with nothing copied
ahead, the whole copy under the trials' own lock). Whatever the copy of a chunk costs is time those
trials wait. This probe stores one input of ``--mb`` MB as the executor publishes a set (its digest and
its identity in the manifest, so it is read without hashing, as on the production path), then per
repeat loads it with the tree's own ``_mapped_verified`` and copies it chunk by chunk into fresh
memory, as ``executor.worker.host`` does; and, for comparison, the same from a private copy read with
``np.load`` (what the workers did before session 30). States: ``cached`` (the file's pages in the page
cache, as after the first worker of a task) and ``evicted`` (dropped from the page cache first with
``posix_fadvise(DONTNEED)``, as after memory pressure or a restart).

Printed per state: the load's wall seconds (outside any lock), the worst chunk's and the sum of the
chunks' milliseconds (under the lock), min and median over ``--repeats``. Runs on this tree or, with
``PYTHONPATH`` at another tree (``git archive <commit> executor``), on that tree's ``executor``:

    python bench/probes/mapped_copy_cost.py --mb 128 --repeats 7 --dir /var/tmp
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

import numpy as np

from executor import timingset
from executor.worker.host import COPY_CHUNK_BYTES


def stored_input(root: Path, mb: int) -> tuple[timingset.TimingSetSpec, Path]:
    """One stored input of ``mb`` MB, its manifest naming its digest and its identity now."""
    directory = root / "key0"
    directory.mkdir()
    path = directory / "input-x.npy"
    np.save(path, np.random.default_rng(0).random((mb << 20) // 4, dtype=np.float32), allow_pickle=False)
    path.chmod(0o644)
    digest = hashlib.sha256(path.read_bytes()).hexdigest()
    manifest = {
        "format": timingset.SET_FORMAT,
        "key": "key0",
        "seed": 7,
        "inputs": True,
        "files": {path.name: digest},
        "identities": {path.name: {"sha256": digest, "stat": list(timingset._stat_key(path.stat()))}},
    }
    (directory / timingset.MANIFEST).write_text(json.dumps(manifest))
    return timingset.TimingSetSpec(dir=str(directory), seed=7), path


def evict(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
        os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
    finally:
        os.close(fd)


def copy_in_chunks(source: np.ndarray) -> tuple[float, float]:
    """The worst chunk's and all chunks' seconds of copying ``source`` as the host copies are made."""
    flat_in = np.ascontiguousarray(source).reshape(-1).view(np.uint8)
    flat_out = np.empty_like(flat_in)
    worst = total = 0.0
    for start in range(0, flat_in.size, COPY_CHUNK_BYTES):
        part = slice(start, start + COPY_CHUNK_BYTES)
        t = time.perf_counter()
        np.copyto(flat_out[part], flat_in[part])
        took = time.perf_counter() - t
        worst, total = max(worst, took), total + took
    return worst, total


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--mb", type=int, default=128)
    parser.add_argument("--repeats", type=int, default=7)
    parser.add_argument(
        "--dir", type=Path, default=Path(tempfile.gettempdir()), help="on the store's file system"
    )
    args = parser.parse_args(argv)
    print(f"# mapped_copy_cost: {sys.modules['executor'].__file__}, {args.mb} MB, {args.repeats} repeats")
    with tempfile.TemporaryDirectory(dir=args.dir) as root:
        spec, path = stored_input(Path(root), args.mb)

        def mapped() -> np.ndarray:
            return timingset._mapped_verified(spec, path)

        def private() -> np.ndarray:
            return np.asarray(np.load(path, allow_pickle=False))

        loads: dict[str, Callable[[], np.ndarray]] = {"mapped": mapped, "private (np.load)": private}
        print("\n| source | state | load s min/med | worst chunk ms min/med | all chunks ms min/med |")
        print("|---|---|---|---|---|")
        for name, load in loads.items():
            for state in ("cached", "evicted"):
                samples: dict[str, list[float]] = {"load": [], "worst": [], "all": []}
                load()  # the page cache filled (a first worker's) before the first repeat
                for _ in range(args.repeats):
                    if state == "evicted":
                        evict(path)
                    t = time.perf_counter()
                    array = load()
                    samples["load"].append(time.perf_counter() - t)
                    worst, total = copy_in_chunks(array)
                    samples["worst"].append(worst * 1e3)
                    samples["all"].append(total * 1e3)
                    del array
                cells = [
                    f"{min(v):.{3 if k == 'load' else 1}f}/{statistics.median(v):.{3 if k == 'load' else 1}f}"
                    for k, v in samples.items()
                ]
                print(f"| {name} | {state} | " + " | ".join(cells) + " |", flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
