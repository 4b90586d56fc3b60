"""The task's timing set: the timing-size inputs that every candidate of a task is timed on.

Correctness draws fresh seeds for every evaluation, at both sizes. The timed trials instead run on one
input set per task, drawn from a seed derived from the task's content. The same candidate timed twice
then sees the same data, so data-dependent kernels (graphs, histograms, sparse matrices) do not vary
with the draw, and the speedups of different candidates of one task are measured on the same inputs.

The set and the reference's outputs for it are kept on disk under the executor's cache, one directory
per task content and reference build, made once by a reference worker and written (atomically) by the
executor. A candidate worker loads the inputs while the candidate compiles and reads the outputs only
after its timed trials, to check the last trial.

What fits. The reference's outputs are always stored (they cost a run of the serial reference at the
timing size to make again), the inputs only while every stored set still fits in the limit
(``TimingSetSpec.limit_bytes``): inputs can always be drawn again from the seed, in the candidate's
worker while the candidate compiles. Nothing is removed to make room for a new set, so a queue that
mixes more tasks than fit does not cycle through evicting and rebuilding them (least-recently-used
eviction is the worst policy for such a queue: every set is evicted just before it is needed); the
sets stored first keep their inputs, the others are drawn each time. The 80 function and 22 kernel
tasks of the benchmark need 18.2 GiB with every input and 5.1 GiB of outputs alone. ``prune`` still
keeps the directory under the limit when the limit is lowered.

Who writes. A task's reference may be a caller's code (an inline task), so the reference worker never
writes the store: it draws and computes a set in its own directory (``HANDOVER``), and the executor
process adopts it (:func:`adopt`): it checks the files against the task's shapes and stores them under
the key it computed from the task's content, so one task's reference cannot reach another task's sets.
The workers see the store read-only. Every stored file's SHA-256 is in the set's manifest with the
set's key and seed, and every read checks them: a damaged file, or a set moved under another key, is
refused (logged, and drawn or computed again by the reader), never used. The manifest also names each
file's identity when it was published (inode, size, modification and change times): a file that still
has it is the file that was hashed, and is read without hashing it again (any write to it, or a file
put in its place, changes it; what no identity shows is damage below the file system).
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import hashlib
import hmac
import json
import logging
import math
import mmap
import os
import platform
import secrets
import shutil
import stat
import tempfile
import time
from collections.abc import Mapping
from pathlib import Path
from typing import IO, Literal

import numpy as np
from pydantic import BaseModel

from executor.cache import content_key
from executor.inputs import INT_POISON, InputSet, poison
from executor.taskformat import NUMPY_DTYPES, FunctionTask, KernelTask, ScalarArg, is_float
from executor.verdict import TimingStats

logger = logging.getLogger(__name__)

TIMING_SEED_VERSION = "regraph.timing-seed/v1"
MANIFEST = "manifest.json"
# The manifest's format: sets of an earlier format (no digests) are not used, and stored again.
SET_FORMAT = "regraph.timing-set/v2"
# The directory in a reference worker's own directory where it leaves the sets it made for the
# executor to adopt (one subdirectory per set, named as the set is in the store).
HANDOVER = "timing-sets"
# Beside the sets under the store's root: a lock file per set (one preparation of a task at a time on
# the host: see :func:`claim`) and the serial reference's timing on each set (shared by the replicas
# and kept across restarts, for the host's CPU that measured it).
LOCKS = ".locks"
REFERENCE_TIMINGS = ".reference-timing"


class TimingSetSpec(BaseModel):
    """Where a task's timing set lives, the seed it is drawn from, and the size the stored sets may
    reach with this one's inputs (None: inputs always stored)."""

    dir: str
    seed: int
    limit_bytes: int | None = None


# The executor's secret that the timing seeds are drawn with (timing_secret), under its cache.
SECRET_FILE = "timing-secret"  # noqa: S105 (a file name)
SECRET_BYTES = 32


def timing_secret(cache_dir: Path) -> bytes:
    """The secret of this executor's timing seeds: :data:`SECRET_BYTES` random bytes made once under
    ``cache_dir`` (mode 0600; the replicas of a host share it with the store), never given to a worker.

    Without it a task's timing sets follow from the task alone, and anyone holding the task and this
    code can draw them, run the reference on them and put the answers in a candidate's source (review
    22: 11,347x, every check passed). Made in a temporary file and linked into place, so that two
    executors starting at once agree on one."""
    path = cache_dir / SECRET_FILE
    if not path.exists():
        cache_dir.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=cache_dir, prefix=f".{SECRET_FILE}.")
        try:
            os.write(fd, secrets.token_bytes(SECRET_BYTES))
            os.close(fd)
            with contextlib.suppress(FileExistsError):
                os.link(tmp, path)
        finally:
            os.unlink(tmp)
    data = path.read_bytes()
    if len(data) != SECRET_BYTES:
        raise ValueError(f"{path} is not a timing secret ({len(data)} bytes, not {SECRET_BYTES}): remove it")
    return data


def timing_seed(task: FunctionTask | KernelTask, secret: bytes = b"") -> int:
    """The seed of the task's timing set: a keyed hash (``secret``, :func:`timing_secret`) of the
    task's id, arguments, sizes and generator; a plain hash without a secret (tools and tests only).

    Fixed for a task on one executor: every candidate and every repeat is timed on the same inputs.
    Any change to what the inputs are made from gives another seed (and another directory).
    """
    content = task.model_dump_json(include={"id", "args", "params"}) + "\0" + (task.generator_source or "")
    message = f"{TIMING_SEED_VERSION}\0{content}".encode()
    digest = (
        hmac.new(secret, message, hashlib.sha256).digest() if secret else hashlib.sha256(message).digest()
    )
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
    task: FunctionTask | KernelTask,
    reference_library: Path,
    root: Path,
    limit_bytes: int | None = None,
    secret: bytes = b"",
) -> TimingSetSpec:
    """The spec of the task's timing set under ``root``, keyed by the task's content, the reference
    build (whose content-hashed file name changes with its source and compiler) and a digest of the
    seeds' ``secret`` (:func:`timing_seed`)."""
    parts = [
        "timing-set",
        TIMING_SEED_VERSION,
        task.model_dump_json(include={"id", "args", "params"}),
        task.generator_source or "",
        reference_library.name,
    ]
    if secret:
        parts.append(hashlib.sha256(b"timing-secret\0" + secret).hexdigest())
    key = content_key(*parts)
    return TimingSetSpec(dir=str(root / key), seed=timing_seed(task, secret), limit_bytes=limit_bytes)


def lock_path(spec: TimingSetSpec) -> Path:
    """The task's preparation lock file (beside the sets, under the store's root)."""
    directory = Path(spec.dir)
    return directory.parent / LOCKS / f"{directory.name}.lock"


def make_lock(spec: TimingSetSpec) -> None:
    """Make the task's lock file (by the executor, before a reference worker that may prepare the task
    starts its job): the worker sees the store read-only and looks at the lock through a read-only
    handle."""
    path = lock_path(spec)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.touch(exist_ok=True)
    path.chmod(0o644)


def claim(spec: TimingSetSpec) -> IO[bytes] | None:
    """Claim the preparation of the task's sets for one reference job (by its executor, before the job
    starts): the handle holding the task's lock, or None when another job of the host holds it.

    The executor holds the claim until it has adopted what its worker made (:func:`release`), not only
    while the worker prepares: a worker's lock would end with the worker, before its executor stores
    the sets, and a second worker that came then would prepare the task again. A job without the
    claim waits for the holder (:func:`await_preparation`) instead of preparing."""
    make_lock(spec)
    handle = lock_path(spec).open("rb")
    try:
        fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        handle.close()
        return None
    except BaseException:
        handle.close()
        raise
    return handle


def release(handle: IO[bytes] | None) -> None:
    """Give up a claim taken with :func:`claim` (closing its handle drops the lock)."""
    if handle is not None:
        # unlocked first: a copy of the file in a process forked meanwhile would keep the lock
        with contextlib.suppress(OSError, ValueError):
            fcntl.flock(handle, fcntl.LOCK_UN)
        handle.close()


def claimed(spec: TimingSetSpec) -> bool:
    """Whether a job of the host holds the claim on the task's preparation (read by a worker, which
    sees the store read-only: a shared lock needs no write access). False without a lock file."""
    try:
        handle = lock_path(spec).open("rb")
    except OSError:
        return False
    with handle:
        try:
            fcntl.flock(handle, fcntl.LOCK_SH | fcntl.LOCK_NB)
        except BlockingIOError:
            return True
        fcntl.flock(handle, fcntl.LOCK_UN)
        return False


def prepared(spec: TimingSetSpec, count: int, time_reference: bool) -> bool:
    """Whether the task's ``count`` timing sets are stored (and the reference's timing, if wanted)."""
    return all(stored(v) for v in variants(spec, count)) and (
        not time_reference or load_reference_timing(spec) is not None
    )


def await_preparation(spec: TimingSetSpec, count: int, time_reference: bool) -> bool:
    """Wait while another job holds the claim on the task's preparation (its executor lets go once it
    has stored what its worker made, or the worker failed); whether the task is then prepared (if
    not, the caller prepares it itself). The waiting worker's own deadline bounds the wait."""
    while not prepared(spec, count, time_reference):
        if not claimed(spec):
            return prepared(spec, count, time_reference)
        time.sleep(0.05)
    return True


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


def _manifest(spec: TimingSetSpec) -> dict[str, object] | None:
    """The set's manifest when it is of this format and names this set (its key and seed), else None:
    a set moved under another key, or one written before the digests, is not this task's."""
    directory = Path(spec.dir)
    try:
        manifest = json.loads((directory / MANIFEST).read_text())
    except (OSError, ValueError):
        return None
    if (
        not isinstance(manifest, dict)
        or manifest.get("format") != SET_FORMAT
        or manifest.get("key") != directory.name
        or manifest.get("seed") != spec.seed
        or not isinstance(manifest.get("files"), dict)
    ):
        return None
    return manifest


def _digest(path: Path) -> str:
    with path.open("rb") as f:
        return hashlib.file_digest(f, "sha256").hexdigest()


# A file's identity: inode, size, modification and change times. A file checked against its digest
# and still of the same identity is the file that was checked (the store is written by the executor
# alone, and its files are only ever replaced, never rewritten in place). The change time is set by the
# kernel on any write, chmod or utime, and no call sets it back: a file written in place and given its
# old modification time again (utime) is another identity all the same. So the change time stays in
# the identity, and nothing may chmod a stored file whose mode is already right (review 31:
# sandbox._open_timing_sets did on every job hand-over, and no file kept its identity). What keeps an
# identity through a change (see docs/security.md): damage below the file system, a store through an
# existing writable shared mapping on tmpfs, a write plus utime within one tick of a 1-s file system.
StatKey = tuple[int, int, int, int]


def _stat_key(st: os.stat_result) -> StatKey:
    return (st.st_ino, st.st_size, st.st_mtime_ns, st.st_ctime_ns)


def _published(manifest: Mapping[str, object], name: str, key: StatKey) -> bool:
    """Whether the file ``name`` of a set, whose identity is now ``key``, is still the very file the
    executor hashed when it published the set: its manifest names that identity beside the digest it
    gives the file (:func:`_publish`). Such a file is not hashed again on reading: each of a task's
    candidate workers hashed every timing set's inputs and outputs (hundreds of MB at ~1.8 GB/s a core)
    that no one could have changed since (session 30). A set published before identities were kept,
    or copied (another inode), is hashed as before."""
    files, identities = manifest.get("files"), manifest.get("identities")
    if not isinstance(files, dict) or not isinstance(identities, dict):
        return False
    entry = identities.get(name)
    digest = files.get(name)
    return (
        isinstance(entry, dict)
        and digest is not None
        and entry.get("sha256") == digest
        and entry.get("stat") == list(key)
    )


def _zeroed_digest(path: Path) -> tuple[str, StatKey]:
    """The file's SHA-256 and identity, read through one buffer that is zeroed afterwards: a candidate
    worker checks its expected outputs this way before the candidate runs, and none of them stays in
    its memory (the answer is never in that process while the candidate computes it)."""
    digest = hashlib.sha256()
    buffer = bytearray(1 << 20)
    with memoryview(buffer) as view, open(path, "rb", buffering=0) as f:
        key = _stat_key(os.fstat(f.fileno()))
        while n := f.readinto(view):
            digest.update(view[:n])
    buffer[:] = bytes(len(buffer))
    return digest.hexdigest(), key


def expected_checked(spec: TimingSetSpec, task: FunctionTask | KernelTask) -> dict[str, StatKey]:
    """Check the digests of the set's stored expected outputs now, without keeping them: each checked
    file's identity, which :func:`load_expected` given it trusts instead of hashing the file again
    (empty when the set is not stored or a file fails its digest: the later read then checks and
    refuses it)."""
    manifest = _manifest(spec)
    if manifest is None:
        return {}
    files = manifest["files"]
    assert isinstance(files, dict)
    checked = {}
    for arg in task.outputs:
        path = _expected_path(Path(spec.dir), arg.name)
        try:
            key = _stat_key(path.stat())
            if _published(manifest, path.name, key):
                checked[str(path)] = key
                continue
            digest, key = _zeroed_digest(path)
        except OSError:
            return {}
        if digest != files.get(path.name):
            return {}
        checked[str(path)] = key
    return checked


def _manifest_digest(manifest: Mapping[str, object] | None, path: Path) -> str:
    """The SHA-256 that the set's ``manifest`` (:func:`_manifest`) gives ``path`` (a file of the set);
    raises ValueError for a file the manifest does not name (or no manifest)."""
    files = manifest.get("files") if manifest is not None else None
    if not isinstance(files, dict) or path.name not in files:
        raise ValueError(f"{path.name} is not in the set's manifest")
    return str(files[path.name])


def _verified(spec: TimingSetSpec, path: Path, checked: Mapping[str, StatKey] | None = None) -> Path:
    """``path`` (a file of the set) when its SHA-256 is the one in the set's manifest, or when it is
    still the file :func:`expected_checked` checked (``checked``); raises ValueError for a file the
    manifest does not name or whose content differs."""
    manifest = _manifest(spec)
    want = _manifest_digest(manifest, path)
    key = _stat_key(path.stat())
    if checked is not None and checked.get(str(path)) == key:
        return path
    if manifest is not None and _published(manifest, path.name, key):
        return path
    if _digest(path) != want:
        raise ValueError(f"{path.name} does not match its digest: damaged or replaced")
    return path


# madvise's MADV_POPULATE_READ (Linux 5.14; not named by Python's mmap module before 3.13): fault
# every page of a mapping in now, and fail (EFAULT, EIO) where touching one would raise SIGBUS.
MADV_POPULATE_READ = getattr(mmap, "MADV_POPULATE_READ", 22)
# Its errors for a page that cannot be read (a SIGBUS on access; EHWPOISON: memory found bad).
_UNREADABLE = {errno.EFAULT, errno.EIO, getattr(errno, "EHWPOISON", 133)}


def _populate(mapped: mmap.mmap) -> None:
    """Read every page of the read-only file mapping ``mapped`` in and map it now: a worker maps its
    timing inputs while it prepares, and copies them later under locks that other workers' trials
    wait on (the host copies' lock a chunk at a time, the device uploads' lock, or the trials' own lock
    when nothing was copied ahead), where a page fault per 4 KiB (or a disk read, for pages not
    cached) made each 32 MB chunk take 2-5 times as long (review 31). A page that cannot be read (a
    damaged disk block, a file cut short) raises OSError here, a refusal of the set (it is drawn
    again), instead of SIGBUS in a copy later (the worker killed, counted against the candidate).
    Where the advice is not done (a kernel before 5.14 does not know it) the pages are read ahead and
    touched one by one instead, where such a page still raises SIGBUS."""
    try:
        mapped.madvise(MADV_POPULATE_READ)
    except OSError as e:
        if e.errno in _UNREADABLE:
            raise OSError(e.errno, f"its pages could not be read in ({e.strerror})") from e
        # Else not done (EINVAL: a kernel that does not know the advice; or a sandbox that refuses it)
        mapped.madvise(mmap.MADV_WILLNEED)
        pages = np.frombuffer(mapped, dtype=np.uint8)[:: mmap.PAGESIZE]
        int(pages.max())  # one byte of every page read: every page mapped
        del pages


def _mapped_verified(spec: TimingSetSpec, path: Path) -> np.ndarray:
    """A stored ``.npy`` file of the set mapped read-only, once its SHA-256 (over the whole file,
    header and any trailing bytes) is the one in the set's manifest; raises ValueError for a file the
    manifest does not name, whose content differs, that is not a plain array or that changed while it
    was checked. Hashed and mapped through one open file, so a file renamed into its place meanwhile is
    not the one mapped; the store's files are only ever replaced or removed, never rewritten in place,
    so the mapping keeps the content that was hashed (as :func:`read_outputs` does for the outputs).
    Every page of the mapping is read in here (:func:`_populate`; OSError for one that cannot be), not
    first touched by the copies made of it under other workers' locks.

    Until session 30 each set was read into memory of the worker's own (hashed as it was read): every
    candidate worker of a task read every timing set (hundreds of MB) into private pages, then copied
    it again into its rotated copies; mapped, its copies are made straight from the page cache, which
    the host's workers share (bench/results/2026-11-30_s30/prep_cost.md)."""
    manifest = _manifest(spec)
    expected_digest = _manifest_digest(manifest, path)
    with open(path, "rb", buffering=0) as raw:
        before = _stat_key(os.fstat(raw.fileno()))
        version = np.lib.format.read_magic(raw)
        if version not in ((1, 0), (2, 0)):  # what np.save writes for plain arrays
            raise ValueError(f"{path.name}: .npy format {version} is not read here")
        read_header = (
            np.lib.format.read_array_header_1_0 if version == (1, 0) else np.lib.format.read_array_header_2_0
        )
        shape, fortran, dtype = read_header(raw)
        if dtype.hasobject:
            raise ValueError(f"{path.name} holds Python objects")
        # Before anything is mapped (review 23a: a damaged shape must be refused, not allocated).
        offset, count = raw.tell(), math.prod(shape)
        if before[1] != offset + count * dtype.itemsize:
            raise ValueError(f"{path.name}: its size is not what its header says; damaged or replaced")
        raw.seek(0)
        if not (manifest is not None and _published(manifest, path.name, before)) and (
            hashlib.file_digest(raw, "sha256").hexdigest() != expected_digest
        ):
            raise ValueError(f"{path.name} does not match its digest: damaged or replaced")
        order: Literal["C", "F"] = "F" if fortran else "C"
        array: np.ndarray
        if count:  # the whole file mapped (a mapping starts at a page), the array past its header
            mapped = mmap.mmap(raw.fileno(), before[1], access=mmap.ACCESS_READ)
            try:
                _populate(mapped)
            except OSError:
                mapped.close()
                raise
            array = np.ndarray(shape, dtype=dtype, buffer=mapped, offset=offset, order=order)
        else:  # nothing to map (mmap refuses an empty length)
            array = np.empty(shape, dtype=dtype, order=order)
        if _stat_key(os.fstat(raw.fileno())) != before:
            raise ValueError(f"{path.name} changed while it was checked")
    array.flags.writeable = False
    return array


def stored(spec: TimingSetSpec) -> bool:
    """Whether the timing set's expected outputs (and maybe its inputs) are on disk, with a manifest of
    this format for this set (the files' digests are checked when they are read)."""
    return _manifest(spec) is not None


def inputs_stored(spec: TimingSetSpec) -> bool:
    """Whether the stored set has its inputs (else they are drawn from the seed)."""
    manifest = _manifest(spec)
    return manifest is not None and bool(manifest.get("inputs"))


def load_inputs(spec: TimingSetSpec, task: FunctionTask | KernelTask) -> InputSet | None:
    """The stored timing set (outputs still poisoned, as drawn), or None when it is not (or not
    readably) stored; the caller then draws it from the seed. Its stored arrays are read-only mappings
    of the store's files (:func:`_mapped_verified`), shared with every worker of the host through the
    page cache: a worker copies them into its rotated copies, never writes them."""
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
                arrays[arg.name] = _checked(task, arg.name, _mapped_verified(spec, path))
    except (OSError, ValueError) as e:
        logger.warning("timing set %s is unreadable (%s); drawing it again", directory.name, e)
        return None
    scalars = {a.name: task.scalar_value(a, "timing") for a in task.args if isinstance(a, ScalarArg)}
    with contextlib.suppress(OSError):  # least recently used goes first when pruning
        os.utime(directory / MANIFEST)
    return InputSet(seed=spec.seed, size="timing", scalars=scalars, arrays=arrays)


def load_expected(
    spec: TimingSetSpec, task: FunctionTask | KernelTask, checked: Mapping[str, StatKey] | None = None
) -> dict[str, np.ndarray] | None:
    """The reference's outputs for the timing set, or None when they are not (readably) stored; files
    still as :func:`expected_checked` found them (``checked``) are not hashed again."""
    directory = Path(spec.dir)
    if not stored(spec):
        return None
    try:
        return {
            a.name: _checked(
                task, a.name, read_outputs(_verified(spec, _expected_path(directory, a.name), checked))
            )
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
        digests = {}
        for path, array in [
            *((_input_path(work, arg.name), array) for arg, array in (saved if keep_inputs else [])),
            *((_expected_path(work, name), array) for name, array in expected.items()),
        ]:
            np.save(path, array, allow_pickle=False)
            digests[path.name] = _digest(path)
        _publish(spec, task, work, digests, keep_inputs)
    finally:
        shutil.rmtree(work, ignore_errors=True)


def _publish(
    spec: TimingSetSpec, task: FunctionTask | KernelTask, work: Path, digests: dict[str, str], inputs: bool
) -> None:
    """Give the set written in ``work`` (files named in ``digests``) its manifest and rename it into
    place as ``spec``'s set, unless another writer was first."""
    target = Path(spec.dir)
    for name in digests:
        (work / name).chmod(0o644)  # read by the workers, written by no one
    # Each file's identity now, once nothing changes it any more (the rename below moves the directory,
    # not its files): a reader that finds the same identity reads the file that was hashed (_published).
    identities = {
        name: {"sha256": digest, "stat": list(_stat_key((work / name).stat()))}
        for name, digest in digests.items()
    }
    manifest = {
        "format": SET_FORMAT,
        "key": target.name,
        "seed": spec.seed,
        "task": task.id,
        "inputs": inputs,
        "files": digests,
        "identities": identities,
    }
    (work / MANIFEST).write_text(json.dumps(manifest))
    (work / MANIFEST).chmod(0o644)
    work.chmod(0o755)
    if stored(spec):  # another writer was first
        return
    if target.exists() or target.is_symlink():  # an earlier format's, or a damaged manifest
        _remove(target)
    try:
        os.rename(work, target)
    except OSError:  # another writer stored it first (the directory exists and is not empty)
        if not stored(spec):
            raise


def _remove(path: Path) -> None:
    """Remove a stored set (moved aside first, so no reader sees it half removed)."""
    aside = path.with_name(f".removed-{path.name}-{os.getpid()}-{time.monotonic_ns()}")
    with contextlib.suppress(OSError):
        os.rename(path, aside)
        if aside.is_symlink() or not aside.is_dir():
            aside.unlink()
        else:
            shutil.rmtree(aside, ignore_errors=True)


def handed_over(spec: TimingSetSpec, worker_dir: Path) -> TimingSetSpec:
    """Where a reference worker whose directory is ``worker_dir`` leaves the set ``spec`` for its
    executor: in its own directory, under the set's name (no size limit: the executor decides)."""
    return spec.model_copy(
        update={"dir": str(worker_dir / HANDOVER / Path(spec.dir).name), "limit_bytes": None}
    )


def _copy_digest(source: Path, target: Path) -> str:
    """Copy the plain file ``source`` (never through a link) to ``target``; the copy's SHA-256."""
    digest = hashlib.sha256()
    fd = os.open(source, os.O_RDONLY | os.O_NOFOLLOW)
    with os.fdopen(fd, "rb") as src, target.open("wb") as dst:
        if not stat.S_ISREG(os.fstat(src.fileno()).st_mode):
            raise ValueError(f"{source.name} is not a plain file")
        while chunk := src.read(1 << 22):
            digest.update(chunk)
            dst.write(chunk)
    return digest.hexdigest()


def adopt(spec: TimingSetSpec, task: FunctionTask | KernelTask, worker_dir: Path) -> bool:
    """Store the set that a reference worker made in its directory (:func:`handed_over`) as the set
    ``spec`` of ``task``: by the executor process, which computed ``spec`` from the task's content, so
    the worker (the task's reference: maybe a caller's code) only ever adds its own task's sets.

    Only the task's files are taken (its outputs, and its inputs while they fit), each a plain file
    copied (never linked or moved: the copy is the executor's, beyond the worker's reach) whose digest
    matches the handed manifest's, then checked for the task's dtype and length. Nothing is loaded
    whole into memory. Returns whether the set is stored (False: nothing handed over, or refused)."""
    if stored(spec):
        return True
    handed = handed_over(spec, worker_dir)
    directory = Path(handed.dir)
    target = Path(spec.dir)
    try:
        if not stat.S_ISDIR(directory.lstat().st_mode):
            raise ValueError("not a directory")
    except FileNotFoundError:
        return False
    except OSError as e:
        logger.warning("refused the timing set handed over for %s: %s", task.id, e)
        return False
    target.parent.mkdir(parents=True, exist_ok=True)
    work = Path(tempfile.mkdtemp(prefix=f".{target.name[:12]}-", dir=target.parent))
    try:
        for entry in directory.iterdir():
            if not stat.S_ISREG(entry.lstat().st_mode):
                raise ValueError(f"{entry.name} is not a plain file")
        manifest = _manifest(handed)
        if manifest is None:
            raise ValueError("no manifest of this set")
        files = manifest["files"]
        assert isinstance(files, dict)
        names = [_expected_path(work, a.name).name for a in task.outputs]
        inputs = [
            _input_path(work, a.name).name
            for a in task.arrays
            if _input_path(work, a.name).name in files or a.intent != "out"
        ]
        set_bytes = sum((directory / n).lstat().st_size for n in [*names, *inputs])
        keep_inputs = bool(manifest.get("inputs")) and admits_inputs(
            target.parent, spec.limit_bytes, set_bytes
        )
        digests = {}
        for name in [*names, *(inputs if keep_inputs else [])]:
            digests[name] = _copy_digest(directory / name, work / name)
            if digests[name] != files.get(name):
                raise ValueError(f"{name} does not match its digest")
            arg = name.removesuffix(".npy").partition("-")[2]
            _checked(task, arg, np.load(work / name, mmap_mode="r", allow_pickle=False))
        _publish(spec, task, work, digests, keep_inputs)
    except (OSError, ValueError) as e:
        logger.warning("refused the timing set handed over for %s: %s", task.id, e)
        return False
    finally:
        shutil.rmtree(work, ignore_errors=True)
    return stored(spec)


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
