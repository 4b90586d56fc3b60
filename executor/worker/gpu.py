"""The GPU runtimes: pycuda with the device's primary context (:class:`GpuContext`).

Function-task candidates are ``.so`` files called through ctypes on host pointers and timed one call
at a time on the host clock, after an L2 flush and with a device-wide synchronisation
(:class:`GpuFunctionRuntime`); kernel-task candidates are cubins launched here and timed with CUDA
events, in batches of trials enqueued on a stream with one wait per batch (:class:`GpuKernelRuntime`),
on rotated device copies of their inputs (:class:`DeviceSlots`). pycuda is imported only when a
context is made, so this module imports on machines without it. With
``REGRAPH_EXECUTOR_CANDIDATE_PROCESS`` on, a function candidate runs in a process of its own instead
(:mod:`executor.worker.runner`, :class:`executor.worker.host.RunnerFunctionRuntime`; not yet run on a GPU).
"""

from __future__ import annotations

import contextlib
import ctypes
import dataclasses
import functools
import logging
import secrets
import time
from collections.abc import Callable
from contextlib import AbstractContextManager, nullcontext
from typing import Any

import numpy as np

from executor.checking import measure_batched, timing_stats
from executor.devcompare import GATHER_RUNS
from executor.errors import ExecutorError
from executor.inputs import InputSet
from executor.protocol import EvaluationOptions
from executor.taskformat import NUMPY_DTYPES, FunctionTask, KernelTask, ScalarArg, Size
from executor.verdict import DevicePeak, ErrorKind, TimingStats
from executor.worker.host import (
    DEFAULT_LOCK_MAX_BYTES,
    SPOT_CALLS,
    SPOT_ELEMENTS,
    CallSamples,
    FunctionRuntime,
    HostSlots,
    PageLocks,
    SpotSample,
    copy_chunks,
    host_cache_bytes,
    measure_host_gbps,
)
from executor.worker.runner import const_inputs
from executor.worker.runtime import CandidateFailed, Runtime

logger = logging.getLogger(__name__)


# Trials enqueued on the stream before the host waits: 6 stream operations each stay well inside the
# driver's launch queue, and the stopping rule is applied between batches.
MAX_BATCH = 64
# Trials behind one stream wait of a LaunchGate: the stream holds at most two such chunks queued and
# not run (up to 8 x 31 operations each, a task with three large outputs and its spot copies), well
# inside the driver's queue, which must never fill while the stream waits for the host.
GATE_TRIALS = 8
# CU_STREAM_WAIT_VALUE_GEQ: a stream wait passes once the 32-bit word holds at least the value.
_WAIT_VALUE_GEQ = 0x0


@functools.cache
def _libcuda() -> ctypes.CDLL:
    """The driver library the context lives in (pycuda wraps no persisting-L2 calls)."""
    return ctypes.CDLL("libcuda.so.1")


# cuMemHostRegister's flag: the pages count as pinned in every context (the candidate's runtime uses the
# device's primary context, which is this worker's too; portable whatever it uses).
_MEMHOSTREGISTER_PORTABLE = 0x01


# cuPointerGetAttribute's CU_POINTER_ATTRIBUTE_MEMORY_TYPE, and its answer for host memory that is
# registered with the driver (or allocated by it) in a context with unified addressing.
_POINTER_ATTRIBUTE_MEMORY_TYPE = 2
_MEMORYTYPE_HOST = 0x01


class RegisteredPages(PageLocks):
    """:class:`~executor.worker.host.PageLocks` on a GPU: each array registered with the driver
    (``cuMemHostRegister``, portable) in this process's current context, so that the candidate's
    ``cudaMemcpy`` of it is a DMA from its pages instead of a copy staged through the driver's pinned
    buffers. The context must be current on the calling thread (the worker's main thread)."""

    what = "cuMemHostRegister"

    def __init__(self, max_bytes: int = DEFAULT_LOCK_MAX_BYTES) -> None:
        super().__init__(max_bytes)
        libcuda = _libcuda()
        self._register = libcuda.cuMemHostRegister_v2
        self._register.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_uint]
        self._register.restype = ctypes.c_int
        self._unregister = libcuda.cuMemHostUnregister
        self._unregister.argtypes = [ctypes.c_void_p]
        self._unregister.restype = ctypes.c_int

    def _lock(self, array: np.ndarray) -> None:
        rc = self._register(array.ctypes.data, array.nbytes, _MEMHOSTREGISTER_PORTABLE)
        if rc != 0:
            raise OSError(f"CUresult {rc} ({_error_name(rc)})")

    def _unlock(self, array: np.ndarray) -> None:
        self._unregister(array.ctypes.data)

    def _held(self, arrays: list[np.ndarray]) -> list[bool]:
        """Whether each of ``arrays`` is still registered: the driver names its first and its last byte
        registered host memory (``cuPointerGetAttribute``, ``CU_POINTER_ATTRIBUTE_MEMORY_TYPE``:
        ``CU_MEMORYTYPE_HOST``; an address of pageable memory is refused, ``CUDA_ERROR_INVALID_VALUE``).
        Written for review 44 (a candidate's ``cudaHostUnregister`` of its input removes the executor's
        registration); not yet run on a GPU."""
        attribute = _libcuda().cuPointerGetAttribute
        attribute.argtypes = [ctypes.c_void_p, ctypes.c_int, ctypes.c_uint64]
        attribute.restype = ctypes.c_int

        def host_registered(address: int) -> bool:
            kind = ctypes.c_uint(0)
            rc = attribute(ctypes.byref(kind), _POINTER_ATTRIBUTE_MEMORY_TYPE, address)
            return rc == 0 and kind.value == _MEMORYTYPE_HOST

        return [
            host_registered(a.ctypes.data) and host_registered(a.ctypes.data + a.nbytes - 1) for a in arrays
        ]


def _error_name(rc: int) -> str:
    """The driver's name of a ``CUresult`` (``CUDA_ERROR_...``), or ``?``."""
    name = ctypes.c_char_p()
    try:
        if _libcuda().cuGetErrorName(ctypes.c_int(rc), ctypes.byref(name)) == 0 and name.value:
            return name.value.decode()
    except (OSError, AttributeError):
        pass
    return "?"


class LaunchGate:
    """Holds a kernel's trials on their stream until the host has enqueued them (option
    ``launch_gate``): a stream wait on a word of pinned host memory (``cuStreamWaitValue32``) ahead of
    every :data:`GATE_TRIALS` trials, released by the host once the last of them is enqueued.

    Why: each trial is ``restore, flush, start event, launch, end event``, and the events time whatever
    the stream does between them. When the GPU runs ahead of the host (the first trials of a batch, a
    host slowed by other work or by another thread of this process holding the interpreter), the start
    event is recorded before the host has submitted the launch, and the wait for the submission is timed
    as the kernel's. On the H200 (session 26, ``bench/device/run_s26_trials.sh``) a kernel's first timed
    trial took 1.38-1.49 times its median (0.07-0.11 ms more, whatever the kernel's own time: 0.1 to
    0.4 ms), the second 1.19-1.25, the fourth 1.00; and one evaluation of a 0.08-ms kernel timed 26 %
    slow on the whole (the GPU test ``test_repeated_timing_on_the_timing_set_agrees``). Behind a gate
    every operation of a trial is queued before the stream reaches its start event."""

    def __init__(self, gpu: GpuContext) -> None:
        cuda = gpu.cuda
        self.word = cuda.pagelocked_zeros((1,), np.uint32, mem_flags=cuda.host_alloc_flags.DEVICEMAP)
        self.addr = int(self.word.base.get_device_pointer())
        self.wait = _libcuda().cuStreamWaitValue32_v2
        self.wait.argtypes = [ctypes.c_void_p, ctypes.c_uint64, ctypes.c_uint32, ctypes.c_uint]
        self.wait.restype = ctypes.c_int
        self.closed = 0  # the value of the last wait enqueued (the word holds the last one released)
        self.batches = 0

    @staticmethod
    def create_or_none(gpu: GpuContext) -> tuple[LaunchGate | None, str | None]:
        """A gate, or None and why not (pinned memory or the driver's stream waits unavailable)."""
        try:
            return LaunchGate(gpu), None
        except (gpu.cuda.Error, AttributeError, OSError) as e:
            return None, f"no launch gate: {e}"

    def close(self, stream: Any) -> None:
        """Enqueue a wait that holds ``stream`` until the next :meth:`release`."""
        self.closed += 1
        rc = self.wait(ctypes.c_void_p(stream.handle), self.addr, self.closed, _WAIT_VALUE_GEQ)
        if rc != 0:
            self.closed -= 1
            raise OSError(f"cuStreamWaitValue32 returned {rc}")

    def release(self) -> None:
        """Let the stream pass every wait enqueued so far (also after a failure, so that nothing the
        stream holds stays queued behind a wait no one will release)."""
        self.word[0] = self.closed


class GpuContext:
    """The device's primary context through pycuda, shared with the CUDA runtime inside candidates."""

    def __init__(
        self, lock: Callable[[], AbstractContextManager[None]] = nullcontext, lock_init: bool = False
    ) -> None:
        """Load the driver and query the device, then make the context under ``lock`` (what other
        processes' host-timed trials see: :mod:`executor.gpulock`); with ``lock_init``, the driver's
        loading under it too. ``seconds``: how long each part took (``context_init``,
        ``context_lock_wait``, ``context_create``)."""
        if not lock_init:
            self._make(lock)
            return
        asked = time.perf_counter()
        with lock():
            waited = time.perf_counter() - asked
            self._make(nullcontext)
        self.seconds["context_lock_wait"] += waited

    def _make(self, lock: Callable[[], AbstractContextManager[None]]) -> None:
        began = time.perf_counter()
        import pycuda.driver as cuda  # lazily: only the GPU path needs pycuda

        cuda.init()
        self.cuda = cuda
        self.dev = cuda.Device(0)
        major, minor = self.dev.compute_capability()
        self.device = f"{self.dev.name()} (sm_{major}{minor})"
        l2 = int(self.dev.get_attribute(cuda.device_attribute.L2_CACHE_SIZE))
        # Writing more than the L2 holds between trials evicts whatever the last trial left there.
        self.flush_bytes = max(4 * l2, 64 << 20)
        asked = time.perf_counter()
        with lock():
            held = time.perf_counter()
            self.ctx = self.dev.retain_primary_context()
            self.ctx.push()
            self.flush_buffer = cuda.mem_alloc(self.flush_bytes)
        self.seconds = {
            "context_init": asked - began,
            "context_lock_wait": held - asked,
            "context_create": time.perf_counter() - held,
        }

    @staticmethod
    def create_or_none(
        lock: Callable[[], AbstractContextManager[None]] = nullcontext, lock_init: bool = False
    ) -> GpuContext | None:
        """A context made ahead of the job (a pre-warmed worker), under ``lock`` (see ``__init__``);
        None when that fails, in which case the job makes it again and the failure shows in its verdict."""
        try:
            import pycuda.driver as cuda
        except ImportError:
            return None
        try:
            return GpuContext(lock, lock_init)
        except cuda.Error as e:
            logger.warning("no CUDA context ahead of the job: %s", e)
            return None

    def measure_peak(self, nbytes: int = 256 << 20) -> DevicePeak:
        """This device's figures for :mod:`executor.floor`: its memory bandwidth (a device-to-device
        copy, read and write counted), the host link's (pinned copies each way), the shortest
        event-timed operation (a 4-byte memset: the launch latency) and the host's memory bandwidth.
        The best of a few repeats of each."""
        cuda = self.cuda
        nbytes = min(nbytes, self.flush_bytes)
        stream = cuda.Stream()
        start, end = cuda.Event(), cuda.Event()

        def best_ms(op: Callable[[], None], repeats: int) -> float:
            times = []
            for _ in range(repeats):
                start.record(stream)
                op()
                end.record(stream)
                end.synchronize()
                times.append(start.time_till(end))
            return float(min(times))

        a, b = cuda.mem_alloc(nbytes), cuda.mem_alloc(nbytes)
        pinned = cuda.pagelocked_empty(nbytes // 4, np.float32)
        try:
            copy_ms = best_ms(lambda: cuda.memcpy_dtod_async(b, a, nbytes, stream), 5)
            h2d_ms = best_ms(lambda: cuda.memcpy_htod_async(a, pinned, stream), 3)
            d2h_ms = best_ms(lambda: cuda.memcpy_dtoh_async(pinned, a, stream), 3)
            latency_ms = best_ms(lambda: cuda.memset_d32_async(a, 0, 1, stream), 50)
        finally:
            a.free()
            b.free()
        return DevicePeak(
            name=self.dev.name(),
            dram_gbps=2 * nbytes / (copy_ms / 1e3) / 1e9,
            launch_us=latency_ms * 1e3,
            h2d_gbps=nbytes / (h2d_ms / 1e3) / 1e9,
            d2h_gbps=nbytes / (d2h_ms / 1e3) / 1e9,
            host_gbps=measure_host_gbps(),
            l2_bytes=int(self.dev.get_attribute(cuda.device_attribute.L2_CACHE_SIZE)),
            host_cache_bytes=host_cache_bytes(),
            model=self.device,
        )

    def reset_timing_state(self) -> None:
        """Undo what a candidate may have set that changes later timings (best effort; each worker
        serves one candidate, but the device outlives it): the persisting-L2 set-aside and any lines
        marked persisting (``cudaDeviceSetLimit(cudaLimitPersistingL2CacheSize)``, access-policy
        windows on a stream or a launch), and the context's cache and shared-memory preferences.
        Called before the trials of every candidate, and of the naive baseline."""
        for reset in (self._reset_persisting_l2, self._reset_preferences):
            try:
                reset()
            except Exception as e:  # a device without the feature has nothing to reset
                logger.debug("timing state reset: %s", e)

    def _reset_persisting_l2(self) -> None:
        libcuda = _libcuda()
        # cuCtxResetPersistingL2Cache: every persisting line becomes normal again.
        libcuda.cuCtxResetPersistingL2Cache()
        # CU_LIMIT_PERSISTING_L2_CACHE_SIZE (0x06): no set-aside.
        libcuda.cuCtxSetLimit(ctypes.c_int(0x06), ctypes.c_size_t(0))

    def _reset_preferences(self) -> None:
        cuda = self.cuda
        cuda.Context.set_cache_config(cuda.func_cache.PREFER_NONE)

    def persisting_l2_limit(self) -> int:
        """The context's persisting-L2 set-aside in bytes (0: none), for the tests."""
        value = ctypes.c_size_t(0)
        _libcuda().cuCtxGetLimit(ctypes.byref(value), ctypes.c_int(0x06))
        return int(value.value)

    def flush_l2(self) -> None:
        """Overwrite a buffer larger than L2 and wait for it."""
        self.cuda.memset_d32(self.flush_buffer, 0x5A5A5A5A, self.flush_bytes // 4)
        self.cuda.Context.synchronize()

    def flush_l2_async(self, stream: Any) -> None:
        """Enqueue the same overwrite on ``stream`` (ordered before whatever is enqueued after it)."""
        self.cuda.memset_d32_async(self.flush_buffer, 0x5A5A5A5A, self.flush_bytes // 4, stream)

    def synchronize(self) -> None:
        """Wait for all work on the device; a sticky error surfaces here as a CUDA error."""
        try:
            self.cuda.Context.synchronize()
        except self.cuda.Error as e:
            raise CandidateFailed(ErrorKind.CUDA_ERROR, f"CUDA error after the call: {e}") from e

    def upload(
        self,
        inputs: InputSet,
        names: list[str] | None = None,
        lock: Callable[[], AbstractContextManager[None]] = nullcontext,
    ) -> dict[str, Any]:
        """Device copies of the arrays of ``inputs`` (all, or those in ``names``), each copied
        :data:`~executor.worker.host.COPY_CHUNK_BYTES` at a time under its own hold of ``lock``."""
        buffers = {}
        for name, array in inputs.arrays.items():
            if names is not None and name not in names:
                continue
            buf = self.cuda.mem_alloc(max(array.nbytes, 1))
            buffers[name] = buf
            # outputs carry their poison, inout their initial values
            flat = np.ascontiguousarray(array).reshape(-1).view(np.uint8)
            for part in copy_chunks(flat.size):
                with lock():
                    self.cuda.memcpy_htod(int(buf) + part.start, flat[part])
        return buffers

    def copy(
        self,
        buffers: dict[str, Any],
        inputs: InputSet,
        lock: Callable[[], AbstractContextManager[None]] = nullcontext,
    ) -> dict[str, Any]:
        """New device copies of ``buffers``, the device copies of the arrays of ``inputs`` that
        :meth:`upload` made (a copy on the device, waited for, under one hold of ``lock``)."""
        copies = {}
        with lock():
            for name, buf in buffers.items():
                nbytes = max(inputs.arrays[name].nbytes, 1)
                copies[name] = self.cuda.mem_alloc(nbytes)
                self.cuda.memcpy_dtod(copies[name], buf, nbytes)
            self.cuda.Context.synchronize()
        return copies

    def close(self) -> None:
        """Release the context (best effort: a broken context cannot be popped cleanly)."""
        try:
            self.flush_buffer.free()
            self.ctx.pop()
        except self.cuda.Error as e:
            logger.warning("could not release the CUDA context: %s", e)


# A kernel launch's spot sample (kernel_spot_checks): SPOT_ELEMENTS elements of each output, copied on
# the device in this many runs of consecutive elements, each at its own random place.
SPOT_RUNS = 8
# DeviceSpots' one-launch copy of a sample's runs: (dst, src, byte offsets of the runs, run bytes, stream).
SpotGather = Callable[[int, int, list[int], int, Any], None]


def spot_positions(size: int, rng: np.random.Generator) -> np.ndarray | None:
    """The flat positions a kernel launch's spot sample copies from an output of ``size`` elements:
    :data:`SPOT_RUNS` runs of ``SPOT_ELEMENTS // SPOT_RUNS`` consecutive elements, each starting at a
    place drawn by ``rng`` (runs may overlap); None for an output no larger than
    :data:`SPOT_ELEMENTS`, which is copied whole."""
    starts = spot_starts(size, rng)
    return None if starts is None else runs_positions(starts)


def spot_starts(size: int, rng: np.random.Generator) -> np.ndarray | None:
    """Where :func:`spot_positions`' runs start (:data:`SPOT_RUNS` places drawn by ``rng``), or None
    for an output no larger than :data:`SPOT_ELEMENTS`."""
    if size <= SPOT_ELEMENTS:
        return None
    return rng.integers(0, size - SPOT_ELEMENTS // SPOT_RUNS + 1, SPOT_RUNS)


def runs_positions(starts: np.ndarray) -> np.ndarray:
    """The flat positions of the runs of ``SPOT_ELEMENTS // SPOT_RUNS`` elements that start at
    ``starts``, run after run."""
    return (starts[:, None] + np.arange(SPOT_ELEMENTS // SPOT_RUNS)).reshape(-1)


class DeviceSpots:
    """Spot samples of a kernel's timed launches, copied on the device (option ``kernel_spot_checks``).

    A kernel's trials are enqueued in batches, so its outputs cannot be read between launches from the
    host. After a launch's end event (outside its timed region), the launch's sample of every output is
    copied, device to device, into a buffer of :data:`SPOT_CALLS` samples: :func:`spot_positions`' runs
    (or the whole output when it is small). Which launches are kept is a uniform draw over all of them
    (:class:`CallSamples`, a later launch overwriting a dropped one's place in stream order), the runs'
    places are drawn per launch, both from ``seed`` (the executor's). :meth:`collect` reads the
    buffer once after the trials, as the function tasks' samples (``spot_checks``) for
    ``Worker.check_spot``. A larger output compared ``sorted`` is not sampled (a sample of a sorted
    comparison means nothing): the last launch on every slot is still checked whole.
    """

    def __init__(
        self,
        gpu: GpuContext,
        task: FunctionTask | KernelTask,
        shapes: dict[str, np.ndarray],
        gather: SpotGather | None = None,
        seed: int | None = None,
    ) -> None:
        """``shapes``: an array shaped like each output at the timing size (a source's). ``gather``
        (option ``kernel_spot_gather``; :meth:`executor.devcompare.DeviceComparer.gather`): a launch's
        runs of an output copied by one kernel launch instead of one driver call each; on the H200 a
        driver call from this process took some 40-50 us of the host's side of a trial under the
        ``long`` queue's load (session 28), and the copies made trials host-bound."""
        # ``seed``: the executor's (Runtime.spot_seed); None: this process's own entropy.
        self.gpu, self.rng = gpu, np.random.default_rng(seed if seed is not None else secrets.randbits(128))
        self.gather = gather if SPOT_RUNS == GATHER_RUNS else None
        self.calls: CallSamples[tuple[int, str, dict[str, np.ndarray | None]]] = CallSamples(
            self.rng, SPOT_CALLS
        )
        self.outputs: dict[str, tuple[int, np.dtype[Any]]] = {}
        for arg in task.outputs:
            size, dtype = shapes[arg.name].size, shapes[arg.name].dtype
            if size == 0 or (size > SPOT_ELEMENTS and task.compare_rule(arg).mode == "sorted"):
                continue
            self.outputs[arg.name] = (size, dtype)
        self.buffers: dict[str, Any] = {}
        try:
            for name, (size, dtype) in self.outputs.items():
                self.buffers[name] = gpu.cuda.mem_alloc(
                    SPOT_CALLS * min(size, SPOT_ELEMENTS) * dtype.itemsize
                )
        except gpu.cuda.MemoryError as e:
            self.free()
            raise CandidateFailed(ErrorKind.OUT_OF_MEMORY, f"spot-check buffers do not fit: {e}") from e

    def after_launch(self, buffers: dict[str, Any], source: int, call: str, stream: Any) -> None:
        """Enqueue the sample of the launch just enqueued on ``stream`` (its outputs in ``buffers``),
        if the draw keeps it."""
        at = self.calls.draw()
        if at is None or not self.outputs:
            return
        copy = self.gpu.cuda.memcpy_dtod_async
        # Only the runs' starts are kept here (their positions are spelled out by collect(), after the
        # trials): this runs between launches, on the host's side of a trial.
        kept: dict[str, np.ndarray | None] = {}
        for name, (size, dtype) in self.outputs.items():
            item, base = dtype.itemsize, int(buffers[name])
            dst = int(self.buffers[name]) + at * min(size, SPOT_ELEMENTS) * item
            starts = kept[name] = spot_starts(size, self.rng)
            if starts is None:
                copy(dst, base, size * item, stream)
                continue
            step = SPOT_ELEMENTS // SPOT_RUNS * item
            if self.gather is not None:
                self.gather(dst, base, [start * item for start in starts.tolist()], step, stream)
                continue
            for r, start in enumerate(starts.tolist()):
                copy(dst + r * step, base + start * item, step, stream)
        self.calls.put(at, (source, call, kept))

    def collect(self) -> list[tuple[int, str, dict[str, SpotSample]]]:
        """The kept launches' samples, read from the device (after the trials' last wait)."""
        count = len(self.calls.kept)
        host = {}
        for name, (size, dtype) in self.outputs.items():
            host[name] = np.empty((count, min(size, SPOT_ELEMENTS)), dtype)
            if count:
                self.gpu.cuda.memcpy_dtoh(host[name], self.buffers[name])

        def positions(starts: np.ndarray | None) -> np.ndarray | None:
            return None if starts is None else runs_positions(starts)

        return [
            (
                source,
                call,
                {name: SpotSample(positions(starts[name]), host[name][at]) for name in self.outputs},
            )
            for at, (source, call, starts) in enumerate(self.calls.kept)
        ]

    def free(self) -> None:
        """Free the sample buffers (after a launch's fault the context is gone, and the process's exit
        frees them: that failure, not this one, is the verdict)."""
        for buf in self.buffers.values():
            with contextlib.suppress(self.gpu.cuda.Error):
                buf.free()
        self.buffers = {}


class DeviceSlots:
    """Rotated device copies of the timing sources (kernel tasks), so that no trial finds its data
    already in L2, and one pristine device copy of each source's outputs to restore them from before
    every trial (a device-to-device copy: a host upload of a large output would dominate each trial).

    Made before the candidate arrives: nothing in it depends on the candidate. ``lock`` is held
    around each chunk uploaded and each copy on the device (:meth:`GpuContext.upload`).
    """

    def __init__(
        self,
        gpu: GpuContext,
        task: FunctionTask | KernelTask,
        sources: list[InputSet],
        rotate: int,
        lock: Callable[[], AbstractContextManager[None]] = nullcontext,
        warm: InputSet | None = None,
    ):
        self.gpu = gpu
        # The warm-up's set, never timed, is the last source; the timed ones come first.
        self.timed = len(sources)
        self.sources = sources + ([warm] if warm is not None else [])
        self.outputs = [a.name for a in task.outputs]
        self.nbytes = [{name: max(s.arrays[name].nbytes, 1) for name in self.outputs} for s in self.sources]
        self.rotated: list[dict[str, Any]] = []
        self.pristine: list[dict[str, Any]] = []
        # The warm-up's slot and its source: not the same index when the timed slots are more than
        # the timed sources (two sets and three rotated copies make four slots, whole rounds).
        self.warm: int | None = None
        self.warm_source: int | None = None
        try:
            self.pristine.extend(gpu.upload(s, self.outputs, lock) for s in self.sources)
            # Each source crosses from the host once; its further rotated copies are copied on the
            # device (a host upload is pageable and far slower, and is held under the GPU lock).
            # Slot j holds timed source j % len(sources): successive trials see different values.
            # A whole number of rounds through the sets: the last slot and the first differ too.
            for j in range(-(-max(rotate, len(sources)) // len(sources)) * len(sources)):
                k = j % len(sources)
                self.rotated.append(
                    gpu.upload(sources[k], lock=lock)
                    if j < len(sources)
                    else gpu.copy(self.rotated[k], sources[k], lock)
                )
            if warm is not None:
                self.warm, self.warm_source = len(self.rotated), len(sources)
                self.rotated.append(gpu.upload(warm, lock=lock))
        except gpu.cuda.MemoryError as e:
            self.free()
            raise CandidateFailed(ErrorKind.OUT_OF_MEMORY, f"rotated timing buffers do not fit: {e}") from e

    def enqueue_restore(self, slot: int, source: int, stream: Any) -> None:
        """Restore inout / re-poison out of rotation slot ``slot`` from source ``source`` (untimed)."""
        for name in self.outputs:
            self.gpu.cuda.memcpy_dtod_async(
                self.rotated[slot][name], self.pristine[source][name], self.nbytes[source][name], stream
            )

    def free(self) -> None:
        """Free every buffer (the process's exit would too)."""
        for buffers in self.rotated + self.pristine:
            for buf in buffers.values():
                buf.free()
        self.rotated, self.pristine = [], []


def make_slots(
    task: FunctionTask | KernelTask,
    gpu: GpuContext | None,
    sources: list[InputSet],
    options: EvaluationOptions,
    lock: Callable[[], AbstractContextManager[None]] = nullcontext,
    warm: InputSet | None = None,
    shared: bool = False,
    page_locks: PageLocks | None = None,
) -> HostSlots | DeviceSlots:
    """The rotated copies that a runtime's trials run on: on the device for kernel tasks (``gpu`` is
    required), in host memory for function tasks (``options.rotated_copies``); each chunk copied under
    ``lock``. ``warm``: the set the warm-up runs on, never timed; ``shared``: function tasks' copies
    in shared mappings, for a candidate's own process (:mod:`executor.worker.runner`), the task's
    ``in`` arrays read-only there; ``page_locks``: function tasks' copies page-locked (option
    ``host_memory``)."""
    rotate = options.rotated_copies(kernel=isinstance(task, KernelTask))
    if isinstance(task, KernelTask):
        if gpu is None:
            raise ExecutorError("a kernel task's timing buffers need a CUDA context")
        return DeviceSlots(gpu, task, sources, rotate, lock, warm)
    return HostSlots(
        sources,
        rotate,
        lock=lock,
        warm=warm,
        shared=shared,
        page_locks=page_locks,
        readonly=const_inputs(task),
    )


class GpuFunctionRuntime(FunctionRuntime):
    """A function-task .so (host pointers in, host pointers out) timed on the GPU host.

    The call allocates, copies and launches by itself, possibly on other streams, so the timed region
    is the call plus a device-wide synchronisation, measured with the host clock.
    """

    def __init__(self, gpu: GpuContext, task: FunctionTask | KernelTask, product: str, symbol: str) -> None:
        super().__init__(task, product, symbol)
        self.gpu = gpu
        self.device = gpu.device

    def before_trial(self) -> None:
        self.gpu.flush_l2()

    def after_call(self) -> None:
        self.gpu.synchronize()


class GpuKernelRuntime(Runtime):
    """A kernel-task cubin: device buffers allocated here, inputs copied, outputs poisoned, launched
    with the task's grid/block; timed with CUDA events on a stream of its own."""

    def __init__(self, gpu: GpuContext, task: KernelTask, product: str, symbol: str) -> None:
        self.gpu = gpu
        self.device = gpu.device
        self.task = task
        self.module = gpu.cuda.module_from_file(product)
        self.kernel = self.module.get_function(symbol)

    def _launch(self, inputs: InputSet, buffers: dict[str, Any], size: Size, stream: Any = None) -> None:
        grid, block, shared = self.task.launch_config(size)
        args: list[Any] = []
        for arg in self.task.args:
            if isinstance(arg, ScalarArg):
                args.append(NUMPY_DTYPES[arg.dtype](inputs.scalars[arg.name]))
            else:
                args.append(buffers[arg.name])
        try:
            self.kernel(*args, block=block, grid=grid, shared=shared, stream=stream)
        except self.gpu.cuda.Error as e:
            raise CandidateFailed(ErrorKind.CUDA_ERROR, f"kernel launch failed: {e}") from e

    def download(self, inputs: InputSet, buffers: dict[str, Any]) -> dict[str, np.ndarray]:
        """Host copies of the outputs in ``buffers`` (shaped like those of ``inputs``)."""
        outputs = {}
        for arg in self.task.outputs:
            host = np.empty_like(inputs.arrays[arg.name])
            self.gpu.cuda.memcpy_dtoh(host, buffers[arg.name])
            outputs[arg.name] = host
        return outputs

    @staticmethod
    def free(buffers: dict[str, Any]) -> None:
        """Free device buffers."""
        for buf in buffers.values():
            buf.free()

    def run_on_device(
        self, inputs: InputSet, uploaded: dict[str, Any] | None = None, call: str = "a call"
    ) -> dict[str, Any]:
        """Launch on ``inputs`` (uploaded now unless ``uploaded``) and wait; the outputs' device buffers
        are returned and the caller frees them, the other buffers are freed here. The launch and the
        wait are announced as the call named ``call`` (the upload is not part of it)."""
        buffers = uploaded
        if buffers is None:
            try:
                buffers = self.gpu.upload(inputs)
            except self.gpu.cuda.MemoryError as e:
                raise CandidateFailed(ErrorKind.OUT_OF_MEMORY, f"task buffers do not fit: {e}") from e
        try:
            with self.watch.call(call):
                self._launch(inputs, buffers, inputs.size)
                self.gpu.synchronize()
        except BaseException:
            self.free(buffers)
            raise
        outputs = {arg.name: buffers.pop(arg.name) for arg in self.task.outputs}
        self.free(buffers)
        return outputs

    def run(
        self, inputs: InputSet, uploaded: dict[str, Any] | None = None, call: str = "a call"
    ) -> dict[str, np.ndarray]:
        outputs = self.run_on_device(inputs, uploaded, call)
        try:
            return self.download(inputs, outputs)
        finally:
            self.free(outputs)

    # The comparison module's gather (executor.devcompare.DeviceComparer.gather), set by the worker
    # where it has one; used by the spot samples with option kernel_spot_gather.
    spot_gather: SpotGather | None = None
    gate: LaunchGate | None = None
    gate_off: str | None = None  # why the trials ran without a gate (None: gated, or not asked for)

    def _gate_before(self, n: int, stream: Any) -> None:
        """Before a batch's trial ``n`` is enqueued on ``stream``: with a :class:`LaunchGate`, a wait
        ahead of every :data:`GATE_TRIALS` trials, and the one before it released (its chunk is queued
        whole). The batch's last wait is released by :meth:`_gate_release`, before the host waits."""
        gate = self.gate
        if gate is None or n % GATE_TRIALS:
            return
        if n == 0:
            gate.batches += 1
        try:
            gate.close(stream)
        except OSError as e:  # the driver refused the wait: the rest is timed as without a gate
            self.gate, self.gate_off = None, f"no launch gate: {e}"
            gate.release()
            return
        if n:
            gate.word[0] = gate.closed - 1

    def _gate_release(self) -> None:
        """Release every wait enqueued (the batch is queued, or its enqueueing failed)."""
        if self.gate is not None:
            self.gate.release()

    def time(self, slots: Any, options: EvaluationOptions) -> tuple[TimingStats, dict[str, Any]]:
        """Trials enqueued in batches on one stream, each ``restore outputs -> flush L2 -> start event ->
        launch -> end event``, with one wait per batch: a sample is still one launch after a flush,
        timed by its own pair of events, without a host round trip per trial. Behind a
        :class:`LaunchGate` (option ``launch_gate``), so that no start event runs ahead of its launch."""
        assert isinstance(slots, DeviceSlots)
        cuda = self.gpu.cuda
        stream = cuda.Stream()
        events: list[tuple[Any, Any]] = []  # reused by every batch
        last: dict[str, Any] = {}
        # The slowest wall time per launch of the batches so far (restores and flushes included): a
        # batch's limit is derived from it when it is below the limit's own time per call.
        slowest_ms = [0.0]  # 0: none yet

        def run_batch(indices: list[int]) -> list[float]:
            try:
                while len(events) < len(indices):
                    events.append((cuda.Event(), cuda.Event()))
                what = f"{'warm-up' if indices[0] < 0 else 'timed'} batch of {len(indices)} launches"
                began = time.perf_counter()
                # One announcement per batch: the launches are timed on the device, between events.
                with self.watch.call(what, len(indices), slowest_ms[0] or None):
                    try:
                        for n, ((start, end), i) in enumerate(zip(events, indices, strict=False)):
                            self._gate_before(n, stream)
                            if i < 0 and slots.warm is not None and slots.warm_source is not None:  # warm-up
                                j, k = slots.warm, slots.warm_source
                            else:
                                j = i % timed_slots
                                k = j % slots.timed
                                last.update(set=k, slot=j)
                                checks[j] = (k, f"timed launch {i + 1}")
                            slots.enqueue_restore(j, k, stream)
                            self.gpu.flush_l2_async(stream)
                            start.record(stream)
                            self._launch(slots.sources[k], slots.rotated[j], slots.sources[k].size, stream)
                            end.record(stream)
                            if spots is not None and i >= 0:  # after the end event: untimed
                                spots.after_launch(slots.rotated[j], k, f"timed launch {i + 1}", stream)
                    finally:
                        self._gate_release()  # before any wait: the stream holds the batch until then
                    events[len(indices) - 1][1].synchronize()
                    # A fault in any launch of the batch is sticky: it surfaces here, if not before.
                    cuda.Context.synchronize()
                slowest_ms[0] = max(slowest_ms[0], (time.perf_counter() - began) * 1e3 / len(indices))
                return [float(start.time_till(end)) for start, end in events[: len(indices)]]
            except cuda.Error as e:
                raise CandidateFailed(ErrorKind.CUDA_ERROR, f"CUDA error while timing: {e}") from e

        timed_slots = len(slots.rotated) - (slots.warm is not None)
        checks: dict[int, tuple[int, str]] = {}  # slot: (source, its last timed launch)
        warmup: dict[str, Any] = {}
        self.gate, self.gate_off = (
            LaunchGate.create_or_none(self.gpu) if options.launch_gate else (None, None)
        )
        # Trial i runs on timed source i % slots.timed (the timed slots are a multiple of them). The
        # warm-up's set, the last source, is never timed: counting it (review 22b) grouped the samples
        # by 4 where the trials rotate over 3, so the stop rule's within-set spread mixed the sets.
        policy = dataclasses.replace(options.trial_policy(device_timed=True), groups=slots.timed)
        gather = self.spot_gather if options.kernel_spot_gather else None
        spots = (
            DeviceSpots(self.gpu, self.task, slots.sources[0].arrays, gather, self.spot_seed)
            if options.kernel_spot_checks
            else None
        )
        try:
            samples, stop = measure_batched(run_batch, policy, MAX_BATCH, warmup)
            if spots is not None:
                last["spot_checks"] = spots.collect()
        finally:
            if spots is not None:
                spots.free()
        last["warmup"] = warmup  # calls, seconds, batches
        # How the batches were held (LaunchGate): gated or not, and why not.
        last["gate"] = {"gated": self.gate is not None and self.gate.batches > 0, "off": self.gate_off}
        last["samples_ms"] = samples  # for executor.diagnostics.warmup_trace
        # The last trial's outputs stay where it wrote them: the worker checks them there, and those
        # of the last timed launch on every other slot.
        last["device_outputs"] = {a.name: slots.rotated[last["slot"]][a.name] for a in self.task.outputs}
        last["device_checks"] = [
            (k, call, {a.name: slots.rotated[j][a.name] for a in self.task.outputs})
            for j, (k, call) in sorted(checks.items())
        ]
        return timing_stats(samples, stop, warmup["calls"], sets=slots.timed, slots=timed_slots), last
