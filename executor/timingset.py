"""The task's timing set: the timing-size inputs that every candidate of a task is timed on.

Correctness draws fresh seeds for every evaluation, at both sizes. The timed trials instead run on one
input set per task, drawn from a seed derived from the task's content. The same candidate timed twice
then sees the same data, so data-dependent kernels (graphs, histograms, sparse matrices) do not vary
with the draw, and the speedups of different candidates of one task are measured on the same inputs.

The set and the reference's outputs for it are kept on disk under the executor's cache, one directory
per task content and reference build, written once (atomically) by a reference worker. A candidate
worker loads the inputs while the candidate compiles and reads the outputs only after its timed trials,
to check the last trial.

What fits. The reference's outputs are always stored (they cost a run of the serial reference at the
timing size to make again), the inputs only while every stored set still fits in the limit
(``TimingSetSpec.limit_bytes``): inputs can always be drawn again from the seed, in the candidate's
worker while the candidate compiles. Nothing is removed to make room for a new set, so a queue that
mixes more tasks than fit does not cycle through evicting and rebuilding them (least-recently-used
eviction is the worst policy for such a queue: every set is evicted just before it is needed); the
sets stored first keep their inputs, the others are drawn each time. The 80 function and 22 kernel
tasks of the benchmark need 18.2 GiB with every input and 5.1 GiB of outputs alone. ``prune`` still
keeps the directory under the limit when the limit is lowered.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import logging
import os
import platform
import shutil
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

import numpy as np
from pydantic import BaseModel

from executor.cache import content_key
from executor.filelock import exclusive
from executor.inputs import INT_POISON, InputSet, poison
from executor.taskformat import NUMPY_DTYPES, FunctionTask, KernelTask, ScalarArg, is_float
from executor.verdict import TimingStats

logger = logging.getLogger(__name__)

TIMING_SEED_VERSION = "regraph.timing-seed/v1"
MANIFEST = "manifest.json"
# Beside the sets under the store's root: a lock file per set (one preparation of a task at a time on
# the host) and the serial reference's timing on each set (shared by the replicas and kept across
# restarts, for the host's CPU that measured it).
LOCKS = ".locks"
REFERENCE_TIMINGS = ".reference-timing"


class TimingSetSpec(BaseModel):
    """Where a task's timing set lives, the seed it is drawn from, and the size the stored sets may
    reach with this one's inputs (None: inputs always stored)."""

    dir: str
    seed: int
    limit_bytes: int | None = None


def timing_seed(task: FunctionTask | KernelTask) -> int:
    """The seed of the task's timing set: a hash of the task's id, arguments, sizes and generator.

    Fixed for a task: every candidate and every repeat is timed on the same inputs. Any change to
    what the inputs are made from gives another seed (and another directory).
    """
    content = task.model_dump_json(include={"id", "args", "params"}) + "\0" + (task.generator_source or "")
    digest = hashlib.sha256(f"{TIMING_SEED_VERSION}\0{content}".encode()).digest()
    return int.from_bytes(digest[:8], "little") >> 2  # 62 bits, like the fresh seeds


def variant_seed(seed: int, k: int) -> int:
    """The seed of the ``k``-th timing set of a task whose first set has ``seed`` (k=0: ``seed``)."""
    if k == 0:
        return seed
    digest = hashlib.sha256(f"{TIMING_SEED_VERSION}\0variant\0{seed}\0{k}".encode()).digest()
    return int.from_bytes(digest[:8], "little") >> 2


def variants(spec: TimingSetSpec, count: int) -> list[TimingSetSpec]:
    """The task's ``count`` timing sets, each stored like the first (``spec``, which is the one stored
    before there were several) in a directory of its own beside it, drawn from its own seed: the
    trials rotate through them, so that no two successive timed calls see the same values (a
    candidate that remembers its last answer by a sample of the input values then recomputes)."""
    return [
        spec
        if k == 0
        else spec.model_copy(update={"dir": f"{spec.dir}.{k}", "seed": variant_seed(spec.seed, k)})
        for k in range(max(count, 1))
    ]


def timing_set_spec(
    task: FunctionTask | KernelTask, reference_library: Path, root: Path, limit_bytes: int | None = None
) -> TimingSetSpec:
    """The spec of the task's timing set under ``root``, keyed by the task's content and the reference
    build (whose content-hashed file name changes with its source and compiler)."""
    key = content_key(
        "timing-set",
        TIMING_SEED_VERSION,
        task.model_dump_json(include={"id", "args", "params"}),
        task.generator_source or "",
        reference_library.name,
    )
    return TimingSetSpec(dir=str(root / key), seed=timing_seed(task), limit_bytes=limit_bytes)


@contextlib.contextmanager
def preparing(spec: TimingSetSpec) -> Iterator[None]:
    """Hold the task's preparation lock (one per set under the store's root, for every process of the
    host): who stores the set or times the reference on it does so under it, after looking again
    whether another did it meanwhile, so two replicas never prepare one task at once."""
    directory = Path(spec.dir)
    with exclusive(directory.parent / LOCKS / f"{directory.name}.lock"):
        yield


def _cpu_model() -> str:
    with contextlib.suppress(OSError):
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.partition(":")[2].strip()
    return platform.processor() or platform.machine()


def reference_timing_path(spec: TimingSetSpec) -> Path:
    """Where the serial reference's timing on the set is kept, keyed by the host's CPU model too (a
    cache moved to another machine times the reference again)."""
    directory = Path(spec.dir)
    cpu = hashlib.sha256(_cpu_model().encode()).hexdigest()[:12]
    return directory.parent / REFERENCE_TIMINGS / f"{directory.name}-{cpu}.json"


def load_reference_timing(spec: TimingSetSpec) -> TimingStats | None:
    """The serial reference's timing on the set, measured by any executor of this host, or None."""
    try:
        return TimingStats.model_validate_json(reference_timing_path(spec).read_text())
    except (OSError, ValueError):
        return None


def save_reference_timing(spec: TimingSetSpec, stats: TimingStats) -> None:
    """Keep the serial reference's timing on the set (written whole, by a rename)."""
    path = reference_timing_path(spec)
    path.parent.mkdir(parents=True, exist_ok=True)
    work = path.with_name(f".{path.name}.{os.getpid()}")
    work.write_text(stats.model_dump_json())
    os.replace(work, path)


def _input_path(directory: Path, name: str) -> Path:
    return directory / f"input-{name}.npy"


def _expected_path(directory: Path, name: str) -> Path:
    return directory / f"expected-{name}.npy"


def _expected_shapes(task: FunctionTask | KernelTask) -> dict[str, tuple[str, int]]:
    return {a.name: (a.dtype, task.array_length(a, "timing")) for a in task.arrays}


def read_outputs(path: Path) -> np.ndarray:
    """An array of expected outputs, mapped read-only from its ``.npy`` file instead of copied into
    memory: it is only compared against (on the host, or uploaded for the device comparison), and a
    timing-size output is hundreds of MB read on the critical path. Files are only ever replaced or
    removed, never rewritten in place, so a mapping stays valid."""
    array: np.ndarray = np.load(path, allow_pickle=False, mmap_mode="r")
    return array


def _checked(task: FunctionTask | KernelTask, name: str, array: np.ndarray) -> np.ndarray:
    dtype, length = _expected_shapes(task)[name]
    if array.dtype != np.dtype(NUMPY_DTYPES[dtype]) or array.shape != (length,):
        raise ValueError(f"{name}: {array.dtype}{array.shape}, expected {dtype}[{length}]")
    return array


def stored(spec: TimingSetSpec) -> bool:
    """Whether the timing set's expected outputs (and maybe its inputs) are on disk."""
    return (Path(spec.dir) / MANIFEST).is_file()


def inputs_stored(spec: TimingSetSpec) -> bool:
    """Whether the stored set has its inputs (else they are drawn from the seed)."""
    try:
        manifest = json.loads((Path(spec.dir) / MANIFEST).read_text())
    except (OSError, ValueError):
        return False
    return bool(manifest.get("inputs", True))  # sets stored before the flag always had them


def load_inputs(spec: TimingSetSpec, task: FunctionTask | KernelTask) -> InputSet | None:
    """The stored timing set (outputs still poisoned, as drawn), or None when it is not (or not
    readably) stored; the caller then draws it from the seed."""
    directory = Path(spec.dir)
    if not inputs_stored(spec):
        return None
    try:
        arrays = {}
        for arg in task.arrays:
            path = _input_path(directory, arg.name)
            if arg.intent == "out" and not path.exists():  # stored as "all poison"
                array = np.empty(task.array_length(arg, "timing"), dtype=NUMPY_DTYPES[arg.dtype])
                poison(array, arg.dtype)
                arrays[arg.name] = array
            else:
                arrays[arg.name] = _checked(task, arg.name, np.load(path, allow_pickle=False))
    except (OSError, ValueError) as e:
        logger.warning("timing set %s is unreadable (%s); drawing it again", directory.name, e)
        return None
    scalars = {a.name: task.scalar_value(a, "timing") for a in task.args if isinstance(a, ScalarArg)}
    with contextlib.suppress(OSError):  # least recently used goes first when pruning
        os.utime(directory / MANIFEST)
    return InputSet(seed=spec.seed, size="timing", scalars=scalars, arrays=arrays)


def load_expected(spec: TimingSetSpec, task: FunctionTask | KernelTask) -> dict[str, np.ndarray] | None:
    """The reference's outputs for the timing set, or None when they are not (readably) stored."""
    directory = Path(spec.dir)
    if not stored(spec):
        return None
    try:
        return {
            a.name: _checked(task, a.name, read_outputs(_expected_path(directory, a.name)))
            for a in task.outputs
        }
    except (OSError, ValueError) as e:
        logger.warning("expected outputs of timing set %s are unreadable: %s", directory.name, e)
        return None


def store(
    spec: TimingSetSpec,
    task: FunctionTask | KernelTask,
    inputs: InputSet,
    expected: dict[str, np.ndarray],
) -> None:
    """Write the timing set and the reference's outputs for it, unless another writer was first.

    Everything goes into a private directory that is renamed into place, so a reader sees all of
    it or nothing. The inputs are left out when they would take the stored sets past
    ``spec.limit_bytes`` (see the module's docstring).
    """
    target = Path(spec.dir)
    if stored(spec):
        return
    target.parent.mkdir(parents=True, exist_ok=True)
    saved = [
        (arg, inputs.arrays[arg.name])
        for arg in task.arrays
        # An output buffer as it is before every run is drawn again on loading.
        if not (arg.intent == "out" and _all_poison(inputs.arrays[arg.name], arg.dtype))
    ]
    keep_inputs = admits_inputs(
        target.parent,
        spec.limit_bytes,
        sum(a.nbytes for _, a in saved) + sum(a.nbytes for a in expected.values()),
    )
    work = Path(tempfile.mkdtemp(prefix=f".{target.name[:12]}-", dir=target.parent))
    try:
        for arg, array in saved if keep_inputs else []:
            np.save(_input_path(work, arg.name), array, allow_pickle=False)
        for name, array in expected.items():
            np.save(_expected_path(work, name), array, allow_pickle=False)
        manifest = {"seed": spec.seed, "task": task.id, "inputs": keep_inputs}
        (work / MANIFEST).write_text(json.dumps(manifest))
        try:
            os.rename(work, target)
        except OSError:  # another worker stored it first (the directory exists and is not empty)
            if not stored(spec):
                raise
    finally:
        shutil.rmtree(work, ignore_errors=True)


def admits_inputs(root: Path, limit_bytes: int | None, set_bytes: int) -> bool:
    """Whether a new set of ``set_bytes`` (inputs and outputs) fits beside the sets stored under
    ``root`` within ``limit_bytes``; a set that does not is stored without its inputs."""
    if limit_bytes is None:
        return True
    return stored_bytes(root) + set_bytes <= limit_bytes


def stored_bytes(root: Path) -> int:
    """The size of every stored timing set under ``root``."""
    if not root.is_dir():
        return 0
    return sum(_size_bytes(d) for d in root.iterdir() if d.is_dir() and (d / MANIFEST).is_file())


def _all_poison(array: np.ndarray, dtype: str) -> bool:
    if is_float(dtype):
        return bool(np.isnan(array).all())
    return bool((array == INT_POISON[dtype]).all())


def _size_bytes(directory: Path) -> int:
    total = 0
    for entry in directory.iterdir():
        with contextlib.suppress(OSError):
            total += entry.stat().st_size
    return total


def prune(root: Path, limit_bytes: int, keep: set[str]) -> list[str]:
    """Remove the least recently used timing sets under ``root`` until the rest fit in
    ``limit_bytes``; never those named in ``keep``. Returns the names removed."""
    if not root.is_dir():
        return []
    entries: list[tuple[float, int, Path]] = []
    for directory in root.iterdir():
        manifest = directory / MANIFEST
        if not directory.is_dir() or directory.name in (LOCKS, REFERENCE_TIMINGS):
            continue
        try:
            used = manifest.stat().st_mtime
        except OSError:
            # An unfinished write: left alone for an hour, then it is debris.
            if directory.name.startswith(".") and time.time() - directory.stat().st_mtime > 3600:
                shutil.rmtree(directory, ignore_errors=True)
            continue
        entries.append((used, _size_bytes(directory), directory))
    total = sum(size for _, size, _ in entries)
    removed: list[str] = []
    for _, size, directory in sorted(entries, key=lambda e: e[0]):
        if total <= limit_bytes:
            break
        if directory.name in keep:
            continue
        shutil.rmtree(directory, ignore_errors=True)
        total -= size
        removed.append(directory.name)
    if removed:
        logger.info("pruned %d timing sets to stay under %d bytes", len(removed), limit_bytes)
    return removed
