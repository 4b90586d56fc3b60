"""The host runtime: function-task ``.so`` files called through ctypes on host pointers.

:class:`FunctionRuntime` is the call and its host-clock timing, shared with the GPU function runtime
(:mod:`executor.worker.gpu`), which adds an L2 flush and a device synchronisation. The plain
:class:`HostFunctionRuntime` involves no CUDA at all: it exists to exercise the isolation and checking
machinery on machines without a GPU, and never passes a candidate in the service unless enabled.
"""

from __future__ import annotations

import ctypes
import dataclasses
import functools
import mmap
import os
import secrets
import select
import time
from collections.abc import Callable, Collection, Iterable, Iterator
from contextlib import AbstractContextManager, nullcontext
from pathlib import Path
from typing import Any, Generic, TypeVar

import numpy as np

from executor.abi import bind_entry, call_entry
from executor.checking import measure, same_bits, timing_stats
from executor.inputs import InputSet
from executor.protocol import EvaluationOptions
from executor.taskformat import FunctionTask, KernelTask
from executor.verdict import DevicePeak, ErrorKind, TimingStats
from executor.worker.messages import TIMED_CALL
from executor.worker.runner import ROUNDTRIP_SLACK_S, ROUNDTRIP_SLOWER, Runner, SharedArrays, const_inputs
from executor.worker.runtime import CandidateFailed, Runtime

# When the host's last-level cache size cannot be read: a common size of one socket's L3.
DEFAULT_HOST_CACHE_BYTES = 32 << 20
# Elements of each output kept from every timed call (all of them when there are fewer).
SPOT_ELEMENTS = 4096
# Timed calls whose samples are kept: all of them up to this many; past it, this many drawn uniformly
# from all (a reservoir), so that a run of thousands of fast calls keeps at most ~8 MB per float64
# output. Skimming half the calls or more (what it takes to move the median) then escapes with
# probability 2**-256.
SPOT_CALLS = 256

T = TypeVar("T")


@dataclasses.dataclass(frozen=True)
class SpotSample:
    """Values one timed call left in an output: ``values`` at the flat ``positions`` (None: the
    whole output, flattened)."""

    positions: np.ndarray | None
    values: np.ndarray


class CallSamples(Generic[T]):
    """Up to ``limit`` items out of all that are offered, each equally likely to be kept (a reservoir:
    every one while fewer than ``limit`` came, then the n-th replaces a kept one with probability
    ``limit / n``). An item is made (``take()``) only when it is kept; None keeps nothing."""

    def __init__(self, rng: np.random.Generator, limit: int) -> None:
        self.rng, self.limit = rng, limit
        self.kept: list[T] = []
        self.offered = 0

    def offer(self, take: Callable[[], T | None]) -> None:
        at = self.draw()
        if at is None:
            return
        item = take()
        if item is not None:
            self.put(at, item)

    def draw(self) -> int | None:
        """Count one more item offered; the place it goes to if it is kept, else None. (In two steps
        for a caller whose item must be made at that place: a device buffer of samples.)"""
        self.offered += 1
        at = len(self.kept) if len(self.kept) < self.limit else int(self.rng.integers(self.offered))
        return at if at < self.limit else None

    def put(self, at: int, item: T) -> None:
        """Keep ``item`` at the place :meth:`draw` gave (the next free one, or a kept item's)."""
        if at == len(self.kept):
            self.kept.append(item)
        else:
            self.kept[at] = item


class FirstAndDrawn(Generic[T]):
    """Each slot's first timed call's item (calls ``0 .. slots - 1``), always, and up to ``limit`` of the
    later calls' drawn uniformly (:class:`CallSamples`): a memo answers the repeats at once, and the first
    visits are what it must do or leave to later, so the reservoir must not drop their samples."""

    def __init__(self, rng: np.random.Generator, limit: int, slots: int) -> None:
        self.slots = slots
        self.first: list[T] = []
        self.drawn: CallSamples[T] = CallSamples(rng, limit)

    def offer(self, i: int, take: Callable[[], T | None]) -> None:
        """Timed call ``i``'s item (made by ``take()`` only when it is kept; None keeps nothing)."""
        if i < self.slots:
            item = take()
            if item is not None:
                self.first.append(item)
        else:
            self.drawn.offer(take)

    @property
    def kept(self) -> list[T]:
        return self.first + self.drawn.kept


def spot_sample(
    task: FunctionTask | KernelTask,
    arrays: dict[str, np.ndarray],
    rng: np.random.Generator,
    whole_sorted: bool,
) -> dict[str, SpotSample]:
    """What a spot check keeps of a call's outputs, in two disjoint parts. Without ``whole_sorted``:
    :data:`SPOT_ELEMENTS` elements of each output, at positions drawn by ``rng``, or the whole output
    where it is not larger. With it: the larger outputs whose rule compares them sorted (a sample of
    a sorted comparison means nothing), whole."""
    kept = {}
    for arg in task.outputs:
        flat = arrays[arg.name].reshape(-1)
        large_sorted = flat.size > SPOT_ELEMENTS and task.compare_rule(arg).mode == "sorted"
        if large_sorted != whole_sorted:
            continue
        if flat.size <= SPOT_ELEMENTS or large_sorted:
            kept[arg.name] = SpotSample(None, flat.copy())
        else:
            positions = rng.integers(0, flat.size, SPOT_ELEMENTS)
            kept[arg.name] = SpotSample(positions, flat[positions])
    return kept


def position_sample(arrays: dict[str, np.ndarray], rng: np.random.Generator) -> dict[str, SpotSample]:
    """:data:`SPOT_ELEMENTS` elements of each of ``arrays`` at positions drawn by ``rng``, or the whole
    array (flattened) where it is not larger, whatever its comparison rule: to tell later whether
    anything wrote to the arrays in between (:func:`changed_since`)."""
    kept = {}
    for name, array in arrays.items():
        flat = array.reshape(-1)
        if flat.size <= SPOT_ELEMENTS:
            kept[name] = SpotSample(None, flat.copy())
        else:
            positions = rng.integers(0, flat.size, SPOT_ELEMENTS)
            kept[name] = SpotSample(positions, flat[positions])
    return kept


def changed_since(
    arrays: dict[str, np.ndarray], sample: dict[str, SpotSample]
) -> tuple[str, int, int] | None:
    """The first array of ``sample`` whose sampled elements in ``arrays`` no longer hold the sample's
    bits (NaN payloads and -0.0 count), with how many of how many differ; None when none does."""
    for name, kept in sample.items():
        flat = arrays[name].reshape(-1)
        now = np.ascontiguousarray(flat if kept.positions is None else flat[kept.positions])
        was = np.ascontiguousarray(kept.values)
        width = was.dtype.itemsize  # each element's bytes as one row (a sample: 4,096 elements at most)
        rows = now.view(np.uint8).reshape(-1, width) != was.view(np.uint8).reshape(-1, width)
        differ = int(np.count_nonzero(rows.any(axis=1)))
        if differ:
            return name, differ, was.size
    return None


def check_left(
    call: str,
    arrays: dict[str, np.ndarray],
    sample: dict[str, SpotSample],
    kind: str = "output",
    changed_when: str = "after its end was announced",
) -> None:
    """Raise :class:`CandidateFailed` (``wrong_output``) when a timed call's outputs (``arrays``) no
    longer hold what ``sample`` (:func:`position_sample`, taken when the call returned, before its end
    was announced) held: something wrote to them after the call's end (``call`` names it and its set).
    ``kind`` and ``changed_when`` word the message for other arrays and moments (a confirming runner's
    arrays, sampled at its call's acknowledgement and copied once it was killed)."""
    changed = changed_since(arrays, sample)
    if changed is not None:
        name, differ, count = changed
        raise CandidateFailed(
            ErrorKind.WRONG_OUTPUT,
            f"{call}: {differ} of {count} elements of its {kind} {name!r}, sampled when it returned, changed "
            f"{changed_when}: its work was not done when it returned",
        )


@functools.cache
def host_cache_bytes() -> int:
    """The largest CPU cache of this host (its last-level cache), from sysfs; a default of
    :data:`DEFAULT_HOST_CACHE_BYTES` where sysfs does not say."""
    sizes = []
    for entry in Path("/sys/devices/system/cpu/cpu0/cache").glob("index*/size"):
        text = entry.read_text().strip().upper()
        scale = {"K": 1 << 10, "M": 1 << 20, "G": 1 << 30}.get(text[-1:], 1)
        digits = text.rstrip("KMG")
        if digits.isdigit():
            sizes.append(int(digits) * scale)
    return max(sizes, default=DEFAULT_HOST_CACHE_BYTES)


def host_copy_count(sources: list[InputSet], rotate: int, cache_bytes: int) -> int:
    """How many host copies the trials rotate through: ``rotate`` (at least one per source), unless a
    source is larger than the host's last-level cache (``cache_bytes``), in which case one per source.
    Rotation is there so that
    no trial finds its inputs in the CPU caches; a set larger than the cache has left it by the time
    its next trial starts reading it (that trial's own copies and the previous trial's outputs went
    through the cache since), so further copies would only cost host-memory traffic under the GPU
    lock (up to 1.8 GB per evaluation for the benchmark's largest sets)."""
    largest = max((sum(a.nbytes for a in s.arrays.values()) for s in sources), default=0)
    sets = max(len(sources), 1)
    # A whole number of rounds through the sets, so that the last slot and the first hold different
    # sets too (no two successive calls share values).
    return -(-max(rotate, sets) // sets) * sets if largest <= cache_bytes else sets


def measure_host_gbps(nbytes: int = 256 << 20, repeats: int = 3) -> float:
    """This host's memory bandwidth in GB/s, read and write counted: the best of ``repeats`` copies of
    ``nbytes`` by one thread (numpy's copy is the C library's ``memcpy``), after one untimed copy that
    faults the destination's pages in.

    Each copy is timed by the thread's CPU time (``CLOCK_THREAD_CPUTIME_ID``, nanoseconds on Linux),
    the wall clock only where that is not less: a copy descheduled by other processes on its core
    takes longer by the wall clock, but that time is the scheduler's, not the memory's. While the
    thread runs, the CPU clock counts what the copy costs, stalls on memory and page faults included.
    By the wall clock alone the rate fell from 24.3-24.8 GB/s to 9.8 with three busy loops on the 2
    cores of the CI machine, and to 3.6-10.3 with a busy loop and two copying processes, while the
    CPU-time rate stayed at 23.5-24.9 (``bench/results/2026-12-01_s36/copy_allowance_allow37.md``).
    The executor measures once per process and keeps the figure, and the load at that moment can be
    other candidates' workers: a rate that fell with it raised the floor of every later candidate
    (``executor.floor``) and widened the repeat-visit rule's cache allowance. What the CPU clock
    still counts: contention for the memory itself by copies on other cores, and a busy sibling of
    the same physical core, which slow the copy while it runs."""
    src = np.ones(nbytes, np.uint8)
    dst = np.empty_like(src)
    np.copyto(dst, src)  # untimed: the first write to each page faults it in
    best = float("inf")
    for _ in range(repeats):
        wall, cpu = time.perf_counter(), time.thread_time()
        np.copyto(dst, src)
        cpu, wall = time.thread_time() - cpu, time.perf_counter() - wall
        best = min(best, cpu if 0 < cpu < wall else wall)
    return 2 * nbytes / best / 1e9


def host_peak() -> DevicePeak:
    """The figures of the host runtime (no GPU): its memory bandwidth and last-level cache."""
    gbps = measure_host_gbps(64 << 20)
    return DevicePeak(
        name="host",
        dram_gbps=gbps,
        launch_us=0.0,
        h2d_gbps=gbps,
        d2h_gbps=gbps,
        host_gbps=gbps,
        host_cache_bytes=host_cache_bytes(),
        model=Runtime.device,
    )


# A prepared host copy is made this many bytes at a time, each chunk under its own hold of the lock it
# is given: a few milliseconds of copying, which is what a function task's trials wait for at most.
COPY_CHUNK_BYTES = 32 << 20


def copy_chunks(count: int, itemsize: int = 1) -> Iterator[slice]:
    """The parts, of at most :data:`COPY_CHUNK_BYTES` each (one item at least), in which a flat array of
    ``count`` items of ``itemsize`` bytes is copied; none for an empty array."""
    step = max(COPY_CHUNK_BYTES // max(itemsize, 1), 1)
    for start in range(0, count, step):
        yield slice(start, min(start + step, count))


def page_aligned_empty(shape: tuple[int, ...], dtype: np.dtype[Any]) -> np.ndarray:
    """An uninitialised array in pages of its own (an anonymous mapping: page-aligned, no other data in
    its pages), so that locking it (:class:`PageLocks`) locks nothing else, and the driver never sees
    two registrations share a page."""
    nbytes = int(np.prod(shape, dtype=np.int64)) * np.dtype(dtype).itemsize
    buffer = mmap.mmap(-1, max(nbytes, 1))
    return np.frombuffer(buffer, dtype=dtype, count=nbytes // np.dtype(dtype).itemsize).reshape(shape)


def vm_locked_bytes() -> int:
    """This process's locked memory as the kernel counts it (``VmLck`` of /proc/self/status); 0 where
    it does not say."""
    try:
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith("VmLck:"):
                return int(line.split()[1]) << 10
    except (OSError, ValueError, IndexError):
        pass
    return 0


def locked_ranges(path: str = "/proc/self/smaps") -> list[tuple[int, int]] | None:
    """The address ranges of this process's mappings that are locked (``mlock``: ``lo`` among their
    ``VmFlags`` in /proc/self/smaps, or ``path``), in address order; None when smaps does not say (it
    cannot be read, or it names no ``VmFlags``: a kernel or sandbox that leaves them out)."""
    ranges: list[tuple[int, int]] = []
    current: tuple[int, int] | None = None
    flags = False
    try:
        with open(path) as smaps:
            for line in smaps:
                if line.startswith("VmFlags:"):
                    flags = True
                    if current is not None and "lo" in line.split()[1:]:
                        ranges.append(current)
                    current = None
                elif "-" in line and not line.split(maxsplit=1)[0].endswith(":"):
                    low, _, high = line.split(maxsplit=1)[0].partition("-")
                    try:
                        current = (int(low, 16), int(high, 16))
                    except ValueError:
                        current = None
    except OSError:
        return None
    return sorted(ranges) if flags else None


def _covered(ranges: list[tuple[int, int]], start: int, end: int) -> bool:
    """Whether ``ranges`` (sorted, not overlapping) cover ``[start, end)`` without a gap."""
    at = start
    for low, high in ranges:
        if low <= at < high:
            at = high
        if at >= end:
            return True
    return at >= end


@functools.cache
def _libc() -> ctypes.CDLL:
    libc = ctypes.CDLL(None, use_errno=True)
    for name in ("mlock", "munlock"):
        getattr(libc, name).argtypes = [ctypes.c_void_p, ctypes.c_size_t]
        getattr(libc, name).restype = ctypes.c_int
    return libc


def locked_size(nbytes: int) -> int:
    """The bytes that locking an array of ``nbytes`` in pages of its own (:func:`page_aligned_empty`)
    locks: whole pages, as RLIMIT_MEMLOCK counts them (:class:`PageLocks` counts so against its cap)."""
    page = mmap.PAGESIZE
    return -(-nbytes // page) * page


# The page-locked bytes of one worker's timed arrays when its job names no cap (the executor's
# setting host_lock_max_mb, REGRAPH_EXECUTOR_HOST_LOCK_MAX_MB, names it in every job it sends).
DEFAULT_LOCK_MAX_BYTES = 2048 << 20


class PageLocks:
    """The arrays of the timed calls page-locked in this process (option ``host_memory:
    page_locked``), all or none: on the host runtime with ``mlock(2)`` (subject to RLIMIT_MEMLOCK:
    8 MiB for an unprivileged worker by default); on a GPU registered with the driver
    (:class:`executor.worker.gpu.RegisteredPages`), which no rlimit bounds. So ``max_bytes`` caps
    them either way: an array that would take the locked bytes past it fails them all, as a refusal
    does (the executor's setting ``host_lock_max_mb``). The cap counts ``reserved`` bytes too: one
    timing set's, for a candidate's confirming call (:meth:`lock_all` with ``reserved``), counted by
    every worker whether or not that call is made, so that a task's baseline and its candidates are
    over the cap or under it together (review 45 F1: a baseline under it, every candidate over).
    Arrays made by :func:`page_aligned_empty`, so that no two share a page. Locked pages stay resident
    and are unlocked when the process ends; a worker serves one candidate."""

    what = "mlock"

    def __init__(self, max_bytes: int = DEFAULT_LOCK_MAX_BYTES) -> None:
        self.max_bytes = max_bytes
        self.locked: list[np.ndarray] = []
        self.bytes = 0
        self.seconds = 0.0
        self.failure: str | None = None  # why the arrays are pageable after all (None: locked, or none asked)
        # whether the cap was that reason (deterministic for a task, its options and the cap; a refusal
        # by the kernel or the driver may not be)
        self.over_cap = False
        # bytes counted against the cap before they are locked (a confirming call's set), and the
        # total that the cap was last applied to (what is locked, what is reserved, what was asked)
        self.reserved = 0
        self.total = 0

    def _lock(self, array: np.ndarray) -> None:
        if _libc().mlock(array.ctypes.data, array.nbytes) != 0:
            err = ctypes.get_errno()
            raise OSError(err, os.strerror(err))

    def _unlock(self, array: np.ndarray) -> None:
        """Unlock ``array``; never raises."""
        _libc().munlock(array.ctypes.data, array.nbytes)

    def lock_all(self, arrays: Iterable[np.ndarray], reserved: bool = False) -> bool:
        """Lock every one of ``arrays`` (``reserved``: the set that :attr:`reserved` kept room for, which
        it then no longer counts); on the first failure, unlock every array locked so far (these and
        those of earlier calls: the timed calls see one kind of memory), keep why in ``failure`` and
        return False. False at once after a failure. The cap is checked first, on everything locked,
        reserved and asked here (:attr:`total`)."""
        if self.failure is not None:
            return False
        began = time.perf_counter()
        arrays = [a for a in arrays if a.nbytes]
        asked = sum(locked_size(a.nbytes) for a in arrays)
        left = max(self.reserved - asked, 0) if reserved else self.reserved
        self.total = self.bytes + left + asked
        try:
            if self.total > self.max_bytes:
                self.over_cap = True
                self.fail(
                    f"{self.total} bytes to lock ({left} of them kept for a confirming call), past the cap "
                    f"of {self.max_bytes} (the executor's host_lock_max_mb, REGRAPH_EXECUTOR_HOST_LOCK_MAX_MB)"
                )
                return False
            self.reserved = left
            for array in arrays:
                self._lock(array)
                self.locked.append(array)
                self.bytes += locked_size(array.nbytes)
        except OSError as e:
            self.fail(f"{self.what} of {array.nbytes} bytes ({self.bytes} locked before): {e}")
            return False
        finally:
            self.seconds += time.perf_counter() - began
        return True

    # Where _held reads the process's locked mappings (a test names a file that says nothing).
    smaps = "/proc/self/smaps"

    def lost(self) -> int | None:
        """How many of the arrays locked here are no longer locked (wholly): the candidate shares this
        process and may unlock them itself (``munlock`` here; on a GPU ``cudaHostUnregister``, which a
        "register for this call, unregister after" pattern does to the executor's registration). 0 when
        none is locked (none asked, or a failure); None when it cannot be told (smaps does not say:
        review 45 F6, every run had counted as lost, and its baseline was timed again every 300 s)."""
        if not self.locked:
            return 0
        held = self._held(self.locked)
        return None if held is None else sum(not each for each in held)

    def _held(self, arrays: list[np.ndarray]) -> list[bool] | None:
        """Whether each of ``arrays`` is still locked: every page of it in a mapping that the kernel
        marks locked (``lo`` in its ``VmFlags``, :attr:`smaps`); None when smaps does not say."""
        ranges = locked_ranges(self.smaps)
        if ranges is None:
            return None
        return [_covered(ranges, a.ctypes.data, a.ctypes.data + a.nbytes) for a in arrays]

    def fail(self, why: str) -> None:
        """Give up: every array unlocked, ``why`` kept."""
        self.failure = why
        for array in self.locked:
            self._unlock(array)  # best effort (what it leaves locked, the process's end unlocks)
        self.locked, self.bytes = [], 0


class HostSlots:
    """Rotated host copies of the timing sources (function tasks), made before the candidate arrives.

    Distinct copies per rotation slot, so that no trial finds its inputs in the CPU caches; how many
    is :func:`host_copy_count`. Slot ``j`` holds source ``j % len(sources)``, and the trials go through
    the slots in turn, so that successive timed calls see different sources (different values) when
    there are several. ``warm``: a copy of a set that is never timed, for the warm-up calls (None:
    they rotate through the slots too). ``lock`` (e.g. :func:`executor.gpulock.host_copies`) is held
    around each chunk of :data:`COPY_CHUNK_BYTES` copied. ``page_locks`` (option ``host_memory:
    page_locked``): every copy made in pages of its own and locked by it once made (all or none).
    ``shared``: each copy in shared mappings for a runner, the arrays named in ``readonly`` (the task's
    ``in`` arrays) in a sealed one that the runner can only read (:class:`SharedArrays`).
    """

    def __init__(
        self,
        sources: list[InputSet],
        rotate: int,
        cache_bytes: int | None = None,
        lock: Callable[[], AbstractContextManager[None]] = nullcontext,
        warm: InputSet | None = None,
        shared: bool = False,
        page_locks: PageLocks | None = None,
        readonly: Collection[str] = (),
    ) -> None:
        self.sources = sources
        self.readonly = readonly
        # Each copy's mapping, by id() of its arrays (only with ``shared``: for a runner).
        self.shared: dict[int, SharedArrays] | None = {} if shared else None
        self.page_locks = None if shared else page_locks  # a runner's mappings are its to lock
        count = host_copy_count(sources, rotate, host_cache_bytes() if cache_bytes is None else cache_bytes)
        self.rotated = [self._copy(sources[j % len(sources)], lock) for j in range(count)]
        self.warm_source = warm
        self.warm = None if warm is None else self._copy(warm, lock)
        if self.page_locks is not None:
            copies = self.rotated + ([self.warm] if self.warm is not None else [])
            self.page_locks.lock_all(a for copy in copies for a in copy.arrays.values())

    def _copy(self, source: InputSet, lock: Callable[[], AbstractContextManager[None]]) -> InputSet:
        # In a shared mapping for a runner: a candidate's process (executor.worker.runner) is handed a
        # copy with its first timed call, never before.
        shared = None if self.shared is None else SharedArrays.like(source.arrays, self.readonly)
        arrays = {}
        for name, array in source.arrays.items():
            # C order: reshape(-1) below is a view of it
            if shared is not None:
                copy = shared.arrays[name]
            elif self.page_locks is not None:
                copy = page_aligned_empty(array.shape, array.dtype)
            else:
                copy = np.empty(array.shape, array.dtype)
            flat_in, flat_out = np.ascontiguousarray(array).reshape(-1), copy.reshape(-1)
            for part in copy_chunks(flat_in.size, array.itemsize):
                with lock():
                    np.copyto(flat_out[part], flat_in[part])
            arrays[name] = copy
        if shared is not None and self.shared is not None:
            self.shared[id(arrays)] = shared
        return InputSet(source.seed, source.size, dict(source.scalars), arrays)


class FunctionRuntime(Runtime):
    """A function-task .so called on host pointers; the GPU and host variants differ in two hooks."""

    # Taken off every timed call: what calling costs beyond the call itself (a runner's round trip).
    call_overhead_ms = 0.0
    # Tests only (CandidateRun.first_visit_delay_ms): seconds each timing set's first timed call waits
    # inside its announced window, before its timed region.
    first_visit_delay_s = 0.0

    def __init__(self, task: FunctionTask | KernelTask, product: str, symbol: str) -> None:
        self.task = task
        self._kept: dict[str, np.ndarray] = {}  # run()'s buffers, by argument name
        self.load(product, symbol)

    def load(self, product: str, symbol: str) -> None:
        """Load the library and bind its entry (here, in this process)."""
        self.fn = bind_entry(ctypes.CDLL(product), symbol, self.task)

    def buffers(self, like: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
        """New buffers of the shapes and types of ``like`` for :meth:`run`'s calls."""
        return {name: np.empty(a.shape, a.dtype) for name, a in like.items()}

    def invoke(self, work: InputSet) -> None:
        """One call on ``work`` and the wait for its work to finish: what a timed call times."""
        call_entry(self.fn, self.task, work.scalars, work.arrays)
        self.after_call()

    def calls_done(self) -> None:
        """After the last call, before what the calls left is checked: nothing here."""

    def _refill(self, inputs: InputSet) -> InputSet:
        """``inputs`` copied into the buffers of the previous call when every array has the same shape
        and type as there (new ones otherwise, kept for the next call). Successive calls at one size
        therefore see the same addresses holding other values: a candidate that keys remembered
        answers on its pointers answers a set with another set's outputs and is caught on the next
        set, not only when the allocator happens to hand the freed address back."""
        kept = self._kept
        if kept.keys() != inputs.arrays.keys() or any(
            kept[name].shape != a.shape or kept[name].dtype != a.dtype for name, a in inputs.arrays.items()
        ):
            kept = self._kept = self.buffers(inputs.arrays)
        for name, a in inputs.arrays.items():
            np.copyto(kept[name], a)
        return InputSet(inputs.seed, inputs.size, dict(inputs.scalars), kept)

    def check_inputs(self, given: InputSet, after: InputSet, call: str) -> None:
        """Raise :class:`CandidateFailed` when the call changed an ``in`` array (declared ``const``):
        review 22b's sort of its input in place gave right outputs and timed every later call on the
        same copy on sorted data, and a tag written into the input could key a memo. Bit for bit."""
        for arg in self.task.arrays:
            if arg.intent != "in":
                continue
            # Bit for bit (NaN payloads, -0.0), in place, block by block and on several threads for
            # large arrays (review 22c: a boolean temporary took 214 ms and 256 MiB on 256 MiB).
            if not same_bits(given.arrays[arg.name], after.arrays[arg.name]):
                raise CandidateFailed(
                    ErrorKind.WRONG_OUTPUT,
                    f"{call} changed its input {arg.name!r}, which the task declares read-only (const): "
                    "a later call on the same data would not see what the task gives it",
                )

    def check_copies(self, last: dict[str, Any]) -> None:
        """The input check (:meth:`check_inputs`) of every copy that :meth:`time` called on, as it left
        them in ``last["input_checks"]``: host arrays only, nothing of the candidate's runs."""
        for given, after, call in last.pop("input_checks", []):
            self.check_inputs(given, after, call)

    def before_trial(self) -> None:
        """Untimed preparation of the device before a timed call."""

    def after_call(self) -> None:
        """Wait for the call's work to finish (part of the timed region)."""

    def run(
        self, inputs: InputSet, uploaded: dict[str, Any] | None = None, call: str = "a call"
    ) -> dict[str, np.ndarray]:
        work = self._refill(inputs)
        with self.watch.call(call):
            self.invoke(work)
        self.check_inputs(inputs, work, call)
        return {a.name: work.arrays[a.name].copy() for a in self.task.outputs}  # the next call reuses them

    # Whether :meth:`first_visit` can call again after :meth:`time` (a runner is stopped by then).
    confirms = True

    def first_visit(
        self, inputs: InputSet, call: str, buffers: dict[str, np.ndarray] | None = None
    ) -> tuple[float, InputSet]:
        """One call on ``inputs`` copied into ``buffers`` (made before the candidate ran, so that their
        addresses are none it has seen, as a timing set's first visit finds a rotated copy; new ones
        when None), prepared as a timed call is (the L2 flush) and timed as one; its milliseconds and
        what the call had left when it returned (its outputs and ``in`` arrays, copied before its end
        is announced: the caller checks them after the trials' own checks, and what a thread of the
        candidate writes after the call is not in them, review 37's H1). After the trials, for the
        repeat-visit rule's confirmation and the clock check's (executor.worker.candidate)."""
        arrays = {}
        for name, a in inputs.arrays.items():
            arrays[name] = buffers[name] if buffers is not None else np.empty(a.shape, a.dtype)
            np.copyto(arrays[name], a)
        work = InputSet(inputs.seed, inputs.size, dict(inputs.scalars), arrays)
        # What the call leaves is copied into these, their pages touched now (outside the window): a
        # copy into fresh memory faults every page, at about 4 GB/s against 10 here (256 MB, 2 cores).
        kept = {name: np.empty_like(a) for name, a in arrays.items()}
        for a in kept.values():
            a.fill(0)
        with self.watch.call(call):
            self.before_trial()
            start = time.perf_counter()
            self.invoke(work)
            end = time.perf_counter()
            # Copied before the call's end is announced (review 36c's H2: a candidate that leaves its
            # work to a clock read of the worker's after the call, whose own clock says the call was
            # fast, must do it inside the executor's window), so a confirming call's window holds this
            # copy too: about 25 ms per 256 MB of the task's arrays here (docs/executor.md).
            for name, a in work.arrays.items():
                np.copyto(kept[name], a)
        left = InputSet(work.seed, work.size, dict(work.scalars), kept)
        return max((end - start) * 1e3 - self.call_overhead_ms, 0.0), left

    def time(self, slots: Any, options: EvaluationOptions) -> tuple[TimingStats, dict[str, Any]]:
        assert isinstance(slots, HostSlots)
        sources, rotated = slots.sources, slots.rotated
        outputs = [a.name for a in self.task.outputs]
        last: dict[str, Any] = {}
        # The slowest wall time of the calls so far (the flush included): a call's limit is derived
        # from it when it is below the limit's own time per call.
        slowest_ms = [0.0]  # 0: none yet
        # Spot checks. Only the last timed call on each slot is checked whole, and a candidate that
        # can tell which call is which (its slots' addresses do not change) and make the trials run to
        # a count it knows (max_trials, the time cap) could skim every other call. So every timed call
        # keeps a sample of its outputs at random positions (past SPOT_CALLS calls, a uniform draw of
        # SPOT_CALLS of them), which the worker checks against the reference too. A larger output
        # compared sorted is kept whole instead, from the first call on each slot and one drawn
        # uniformly from the slot's later calls. The positions and the draws come from the executor's
        # seed (spot_seed): this process's entropy is the candidate's to change (libc's getrandom
        # patched to a constant made them known ahead, session 35). What this process has drawn is
        # not hidden from a candidate loaded in it: the static rules and executor.linkcheck keep it
        # from the interpreter's API, not from libc, and review 37 (H1) hooked libc's malloc, saw the
        # positions array numpy allocates for each sample and wrote the right answer at exactly those
        # positions (tests/integration/executor/test_malloc_hook_attack.py, xfail). Only the runner
        # (the candidate in its own process, executor.worker.runner) keeps these draws from it.
        rng = np.random.default_rng(self.spot_seed if self.spot_seed is not None else secrets.randbits(128))
        Spot = tuple[int, str, dict[str, SpotSample]]
        # Each slot's first timed call's (each timing set's first visit among them), kept whatever the
        # reservoir draws, and SPOT_CALLS drawn from the later calls.
        spots: FirstAndDrawn[Spot] = FirstAndDrawn(rng, SPOT_CALLS, len(rotated))
        whole_sorted: dict[int, CallSamples[Spot]] = {}  # per slot: one call's larger sorted outputs
        # Outputs a sample of the elements of which means nothing to the reference's (compared sorted).
        unsampled = {
            a.name
            for a in self.task.outputs
            if self.task.compare_rule(a).mode == "sorted"
            and int(np.prod(sources[0].arrays[a.name].shape)) > SPOT_ELEMENTS
        }

        def spot(source: int, what: str, arrays: dict[str, np.ndarray], whole: bool) -> Spot | None:
            sample = spot_sample(self.task, arrays, rng, whole_sorted=whole)
            return (source, what, sample) if sample else None

        # What a timed call left is sampled inside its announced window, after its clock read and
        # before its end's write (review 36c's H2; narrowed, not closed: a candidate in this process
        # that hooks libc can learn where the samples fall, review 37's H1, above): a candidate that
        # shares this process can hook any function this thread calls (clock_gettime: numpy's draw of
        # the positions reads it, through the generator's lock; libc's write) and do the call's work
        # there, or have a thread of its own do it. Work done before the sample is inside the
        # executor's window for the call (its clock check sees it); work after it is not in the sample,
        # which then holds what the call left (the poison, the restored inout): its spot check fails,
        # and so does check_left when the work changes a sampled element (unless the candidate wrote
        # the right values at the sampled elements: H1). The same for the call's outputs as they were before it:
        # sampled after the start's write, so that work written into them before the start (after
        # the worker restored them) is seen. Only the samples are taken inside the window; they are
        # compared outside it.
        def keep(i: int, j: int, what: str, sample: dict[str, SpotSample]) -> None:
            part = {name: values for name, values in sample.items() if name not in unsampled}
            if not part:
                return
            item = (j % len(sources), what, part)
            spots.offer(i, lambda: item)

        # Each slot's last timed call: its name and the sample of its outputs taken when it returned,
        # checked unchanged (check_left) before the slot's next call restores them and, for the last
        # calls, by the worker after their whole check; so work written to a call's outputs after its
        # end is refused however the reservoir drew, for an output compared sorted too.
        left: dict[int, tuple[str, dict[str, SpotSample]]] = {}
        # The values each slot's outputs are restored to, flat (a view where the source is contiguous).
        restored = [
            {name: np.ascontiguousarray(s.arrays[name]).reshape(-1) for name in outputs} for s in sources
        ]

        def named(j: int, what: str) -> str:
            return f"{what} (on timing set {j % len(sources) + 1} of {len(sources)})"

        def trial(i: int) -> float:
            j = i % len(rotated)
            work, source = rotated[j], sources[j % len(sources)]
            if i < 0 and slots.warm is not None and slots.warm_source is not None:
                work, source = slots.warm, slots.warm_source  # the warm-up: on a set never timed
            if i >= 0 and j in left:  # before the restore overwrites what the slot's last call left
                earlier, sample = left.pop(j)
                check_left(named(j, earlier), work.arrays, sample)
            for name in outputs:  # restore inout and re-poison out (untimed)
                np.copyto(work.arrays[name], source.arrays[name])
            # Announced before the L2 flush (which evicts whatever the announcement touched) and
            # after the clock is read: neither is in the timed region.
            what = f"warm-up call {-i}" if i < 0 else f"{TIMED_CALL}{i + 1}"
            called = {name: work.arrays[name] for name in outputs}
            before: dict[str, SpotSample] = {}
            after: dict[str, SpotSample] = {}
            with self.watch.call(what, 1, slowest_ms[0] or None):
                if 0 <= i < len(sources) and self.first_visit_delay_s:
                    # A relative timeout: time.sleep's deadline is read on the monotonic clock, which a
                    # candidate that changes it (tests/integration/executor/test_clock_attack.py) moves.
                    select.select([], [], [], self.first_visit_delay_s)
                if i >= 0:  # untimed, before the L2 flush (4096 elements of each output touched)
                    before = position_sample(called, rng)
                began = time.perf_counter()
                self.before_trial()
                start = time.perf_counter()
                self.invoke(work)
                end = time.perf_counter()
                if i >= 0:  # untimed (the clock was read), and before the end's write: see above
                    after = position_sample(called, rng)
            if i >= 0:
                changed = changed_since(restored[j % len(sources)], before)
                if changed is not None:
                    name, differ, count = changed
                    raise CandidateFailed(
                        ErrorKind.WRONG_OUTPUT,
                        f"{named(j, what)}: {differ} of {count} sampled elements of its output {name!r} were "
                        "written after the worker prepared them and before the call started: work for the "
                        "call outside its announced window",
                    )
                keep(i, j, what, after)
                left[j] = (what, after)
            elapsed = max((end - start) * 1e3 - self.call_overhead_ms, 0.0)
            slowest_ms[0] = max(slowest_ms[0], (end - began) * 1e3)
            if i >= 0:
                windows.append(self.watch.window_s)
            if i >= 0 or slots.warm is None:
                last.update(set=j % len(sources), outputs={name: work.arrays[name] for name in outputs})
                # What each slot's buffers hold now: the outputs of its last call.
                checks[j] = (j % len(sources), what, last["outputs"])
            # A larger output compared sorted: whole, after the end's write (check_left sees work written
            # into it since the call returned), from the first timed call on each slot (as spots.first:
            # a candidate that left a first visit undone and answered the repeats from work done
            # outside the windows passed unless that call happened to be drawn) and one drawn from
            # the slot's later calls.
            if i >= 0 and unsampled and i < len(rotated):  # a first call: FirstAndDrawn keeps it
                spots.offer(i, lambda: spot(j % len(sources), what, work.arrays, True))
            elif i >= 0 and unsampled:
                whole_sorted.setdefault(j, CallSamples(rng, 1)).offer(
                    lambda: spot(j % len(sources), what, work.arrays, True)
                )
            return elapsed

        checks: dict[int, tuple[int, str, dict[str, np.ndarray]]] = {}
        windows: list[float | None] = []  # each timed call's by this process's clock (CallWatch.window_s)
        # One call at a time: each is timed on the host clock around the call and its synchronisation.
        # Trial i runs on source i % len(sources) (the slots are a multiple of the sources).
        policy = dataclasses.replace(options.trial_policy(), groups=len(sources))
        try:
            samples, stop = measure(trial, policy)
        finally:  # a runner killed whatever ended the trials (review 39's L2: none outlives a failure)
            self.calls_done()
        # Every copy's inputs as they were made (the warm-up's too): a change persists in its copy.
        # Checked by check_copies, after the trials: host work only, which the worker may do once the
        # GPU's turn is over (executor.worker.candidate).
        last["input_checks"] = [
            (sources[j % len(sources)], work, f"a timed call on timing set {j % len(sources) + 1}")
            for j, work in enumerate(rotated)
        ]
        if slots.warm is not None and slots.warm_source is not None:
            last["input_checks"].append((slots.warm_source, slots.warm, "a warm-up call"))
        # The last timed call on every slot, each checked by the worker (executor.worker.candidate),
        # and a sample of every timed call's outputs (spot_checks).
        last["checks"] = [checks[j] for j in sorted(checks)]
        last["samples_ms"] = samples  # in trial order: trial i ran on source i % len(sources)
        last["windows_s"] = windows  # in the same order (executor.worker.candidate.confirm_clock)
        # The last call on each slot: checked unchanged by the worker after their whole check (a check
        # here would miss work done between it and that one).
        last["left"] = [
            (named(j, what), {name: rotated[j].arrays[name] for name in outputs}, sample)
            for j, (what, sample) in sorted(left.items())
        ]
        last["spot_checks"] = spots.kept + [
            kept for j in sorted(whole_sorted) for kept in whole_sorted[j].kept
        ]
        return timing_stats(samples, stop, sets=len(sources), slots=len(rotated)), last


class HostFunctionRuntime(FunctionRuntime):
    """A function-task .so called on host memory (no GPU)."""


class RunnerFunctionRuntime(FunctionRuntime):
    """A function-task .so loaded and called in a candidate process of its own (a runner,
    :mod:`executor.worker.runner`), on host or GPU: every call's inputs are handed over in a shared
    mapping, its outputs read back here, and it is timed here, on this process's clock around the
    request and its acknowledgement. ``device``: what the verdict names (this worker's device)."""

    # Killed after the trials (calls_done): no call after them in the same runner. The repeat-visit
    # rule's confirming call is made in a fresh one (confirming_runtime).
    confirms = False

    def __init__(
        self, runner: Runner, task: FunctionTask | KernelTask, product: str, symbol: str, device: str
    ):
        self.runner = runner
        self.device = device
        self.product, self.symbol = product, symbol
        self._mapped: dict[int, SharedArrays] = {}  # by id() of the arrays the worker calls on
        self._run_buffers: SharedArrays | None = None
        self._timing = False  # in time(): on a GPU, each call flushes L2 first (inside the request)
        # Before the library is loaded, none of the candidate's code answers: the fastest round trip
        # then (with the L2 flush on a GPU, which a timed call's request includes) comes off each
        # timed call, and no more.
        ping_s = runner.roundtrip_s("ping")
        self.roundtrip_s = runner.roundtrip_s("flush") if runner.runtime == "gpu" else ping_s
        super().__init__(task, product, symbol)
        after_s = runner.roundtrip_s("ping")
        if after_s > ROUNDTRIP_SLOWER * ping_s + ROUNDTRIP_SLACK_S:
            raise CandidateFailed(
                ErrorKind.IMPLAUSIBLE,
                f"the empty round trip to the candidate's process took {after_s * 1e3:.3g} ms once its library "
                f"was loaded, {ping_s * 1e3:.3g} ms before (more than {ROUNDTRIP_SLOWER:g} times that plus "
                f"{ROUNDTRIP_SLACK_S * 1e3:g} ms): the candidate's code slowed what is taken off its timed calls",
            )
        self.call_overhead_ms = self.roundtrip_s * 1e3

    def load(self, product: str, symbol: str) -> None:
        self.runner.load(self.task, product, symbol)

    def buffers(self, like: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
        old = self._run_buffers
        if old is not None:  # run()'s earlier buffers (another size): no longer called on
            self.runner.drop(old)
            self._mapped.pop(id(old.arrays), None)
            old.close()
        # mapped with its first call, the const inputs read-only (refilled before each call through
        # this process's mapping, which the seal leaves writable)
        shared = self._run_buffers = SharedArrays.like(like, const_inputs(self.task))
        self._mapped[id(shared.arrays)] = shared
        return shared.arrays

    def invoke(self, work: InputSet) -> None:
        flush = self._timing and self.runner.runtime == "gpu"
        self.runner.call(self._mapped[id(work.arrays)], work.scalars, flush=flush)

    def time(self, slots: Any, options: EvaluationOptions) -> tuple[TimingStats, dict[str, Any]]:
        # The rotated copies are handed over each with its first timed call (Runner.call): nothing
        # the runner does on a new mapping is outside the timing.
        assert isinstance(slots, HostSlots) and slots.shared is not None
        self._mapped.update(slots.shared)
        self._timing = True
        return super().time(slots, options)

    def reset_timing_state(self) -> None:
        if self.runner.runtime == "gpu":
            self.runner.request("reset")

    def calls_done(self) -> None:
        self.runner.stop()

    def confirming_runtime(self, warm: InputSet, warmups: int) -> RunnerFunctionRuntime:
        """A fresh runner for the repeat-visit rule's confirming call (review 38's M1, mended after
        review 39): started now, the library loaded in it as in this one (its round trips measured
        before and after the load, as here), and ``warmups`` untimed calls on ``warm`` (a set at the
        timing size that is not the confirming set) so that the confirming call is not among its
        process's first (an autotuner's first calls at a size are slower: review 39b's L1). Raises
        :class:`CandidateFailed` where it cannot be started, loaded or warmed up (its runner killed and
        its warm-up's buffers let go then): the caller makes no confirming call, and the rule's
        refusal stands. A runner that dies or exits once its load was asked for ends this worker as
        it ended (:meth:`~executor.worker.runner.Runner.mirror_fate`: ``crash``), as the trials' does.
        The caller calls :meth:`close` when done with it (:meth:`first_visit` kills its runner)."""
        runner = Runner(self.runner.runtime)
        fresh: RunnerFunctionRuntime | None = None
        try:
            fresh = RunnerFunctionRuntime(runner, self.task, self.product, self.symbol, self.device)
            fresh.watch = self.watch
            for k in range(warmups):
                fresh.run(warm, call=f"the confirming process's warm-up call {k + 1}")
            fresh.reset_timing_state()
            fresh._timing = True  # the confirming call is timed as a timed call is (the L2 flush on a GPU)
        except BaseException:
            if fresh is not None:
                fresh.close()
            runner.stop()
            raise
        return fresh

    def close(self) -> None:
        """Kill the runner (if it still runs) and let go of every mapping this runtime made for it
        (:meth:`run`'s buffers, a warm-up's): none outlives the confirming call, none is held during
        the checks that follow."""
        self.runner.stop()
        for shared in self._mapped.values():
            shared.close()
        self._mapped.clear()
        self._run_buffers = None

    def first_visit(
        self, inputs: InputSet, call: str, buffers: dict[str, np.ndarray] | None = None
    ) -> tuple[float, InputSet]:
        """The confirming call in this runner (:meth:`confirming_runtime`'s: the trials' is killed),
        and its last: on a shared mapping made now and handed over with the call's request, inside
        its timing (``buffers`` is for a candidate in the worker's process). Right after the call's
        acknowledgement, still inside its announced window: the runner killed (``SIGKILL``: no thread
        of the candidate's, and no timer of its, runs after it), a sample of every array of the call
        at positions drawn here, the runner reaped, then what the call left copied. A sample that no
        longer holds is ``wrong_output``: something of the candidate's wrote to the call's arrays
        after its acknowledgement, before its process ended (review 39's H1 had a timer thread write a
        memo's answer ~20 ms after a call that returned at once)."""
        shared = SharedArrays.like(inputs.arrays, const_inputs(self.task))
        self._mapped[id(shared.arrays)] = shared
        rng = np.random.default_rng(secrets.randbits(128))  # this process's memory: not the runner's to read
        try:
            work = InputSet(inputs.seed, inputs.size, dict(inputs.scalars), shared.arrays)
            for name, a in inputs.arrays.items():
                np.copyto(work.arrays[name], a)
            kept = {name: np.zeros_like(a) for name, a in work.arrays.items()}  # pages touched now
            with self.watch.call(call):
                self.before_trial()
                start = time.perf_counter()
                self.invoke(work)
                end = time.perf_counter()
                # Killed at once (review 39b's L2: nothing untimed between the acknowledgement and
                # the kill), sampled, reaped, copied: a write that lands between the kill and the
                # process's end is told by the sample no longer holding.
                self.runner.proc.kill()
                at_end = position_sample(work.arrays, rng)
                self.runner.stop()
                for name, a in work.arrays.items():
                    np.copyto(kept[name], a)
        finally:  # its last call: the runner killed, and every mapping let go, on every path (review 39b's L3)
            self.close()
        check_left(call, kept, at_end, kind="array", changed_when="before its process was killed")
        left = InputSet(work.seed, work.size, dict(work.scalars), kept)
        return max((end - start) * 1e3 - self.call_overhead_ms, 0.0), left
