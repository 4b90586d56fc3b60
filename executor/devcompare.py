"""Checking a kernel's outputs against the reference's on the device.

A kernel task's timing-size output has tens of millions of elements. Downloading it and comparing it
on the CPU took 0.05-0.1 s per output on the H100 host, twice per evaluation (the fresh timing-size
set and the last trial), which was most of what kept a kernel evaluation above its 0.25 s target.
The same element test runs here as a kernel over the output where the candidate left it, after the
reference's outputs are uploaded next to it; only the number of failing elements comes back.

Zero failing elements is a pass, decided by exactly the host's rule (:func:`executor.checking.
compare_output`): ``|got-ref| <= atol + rtol*|ref|`` in float64 with every operation rounded on its
own (no fused multiply-add, as numpy computes it), NaN never passing, integers and ``exact`` rules
compared for equality. Anything else (failing elements, a ``sorted`` rule, an output the device
cannot judge) is handed to the host comparison, which names the kind and the first failing element.

The kernels are compiled once per toolchain by the service (:func:`compare_source`, through the
candidate compiler and its cache) and loaded by each candidate worker while it prepares.
"""

from __future__ import annotations

import contextlib
import itertools
from collections.abc import Callable, Iterable, Iterator
from typing import Any, TypeVar

import numpy as np

from executor.taskformat import CompareRule, DType, is_float

THREADS = 256
# Enough blocks to fill an H100/H200 several times over; the grid-stride loop covers any size.
MAX_BLOCKS = 4096

_SOURCE = r"""
// Kernels of executor.devcompare: count the elements of an output that fail the host's rule.
extern "C" {

__device__ __forceinline__ void add_failures(unsigned int failures, unsigned long long* count) {
  for (int offset = 16; offset > 0; offset >>= 1)
    failures += __shfl_down_sync(0xffffffffu, failures, offset);
  if ((threadIdx.x & 31u) == 0u && failures != 0u) atomicAdd(count, (unsigned long long)failures);
}

#define REGRAPH_STRIDE_LOOP(i, n) \
  for (unsigned long long i = blockIdx.x * (unsigned long long)blockDim.x + threadIdx.x; i < (n); \
       i += (unsigned long long)gridDim.x * blockDim.x)

// |got - ref| <= atol + rtol * |ref| in float64, each operation rounded separately; NaN fails.
#define REGRAPH_TOLERANCE(NAME, T)                                                              \
  __global__ void NAME(const T* got, const T* ref, unsigned long long n, double atol, double rtol, \
                       unsigned long long* count) {                                             \
    unsigned int failures = 0u;                                                                 \
    REGRAPH_STRIDE_LOOP(i, n) {                                                                 \
      const double x = (double)got[i], y = (double)ref[i];                                      \
      const double limit = __dadd_rn(__dmul_rn(fabs(y), rtol), atol);                           \
      failures += !(fabs(__dsub_rn(x, y)) <= limit);                                            \
    }                                                                                           \
    add_failures(failures, count);                                                              \
  }

// Equality (NaN != NaN, so a NaN fails as on the host).
#define REGRAPH_EXACT(NAME, T)                                                                  \
  __global__ void NAME(const T* got, const T* ref, unsigned long long n, double atol, double rtol, \
                       unsigned long long* count) {                                             \
    unsigned int failures = 0u;                                                                 \
    REGRAPH_STRIDE_LOOP(i, n) { failures += !(got[i] == ref[i]); }                              \
    add_failures(failures, count);                                                              \
  }

REGRAPH_TOLERANCE(regraph_tolerance_f32, float)
REGRAPH_TOLERANCE(regraph_tolerance_f64, double)
REGRAPH_EXACT(regraph_exact_f32, float)
REGRAPH_EXACT(regraph_exact_f64, double)
REGRAPH_EXACT(regraph_exact_b1, unsigned char)
REGRAPH_EXACT(regraph_exact_b4, unsigned int)
REGRAPH_EXACT(regraph_exact_b8, unsigned long long)

// A kernel launch's spot sample (executor.worker.gpu.DeviceSpots, option kernel_spot_gather): block r
// copies run r, `run` bytes from byte offset s<r> of `src`, to dst + r * run. One launch instead of
// one copy per run.
__global__ void regraph_spot_gather(unsigned char* dst, const unsigned char* src, unsigned long long run,
                                    unsigned long long s0, unsigned long long s1, unsigned long long s2,
                                    unsigned long long s3, unsigned long long s4, unsigned long long s5,
                                    unsigned long long s6, unsigned long long s7) {
  const unsigned long long starts[8] = {s0, s1, s2, s3, s4, s5, s6, s7};
  const unsigned long long from = starts[blockIdx.x], to = blockIdx.x * run;
  for (unsigned long long i = threadIdx.x; i < run; i += blockDim.x) dst[to + i] = src[from + i];
}

}
"""

# Runs that regraph_spot_gather copies in one launch (one block each).
GATHER_RUNS = 8

# What a check of DeviceComparer.check_each is handed with its source and call (a copy's outputs).
Checked = TypeVar("Checked")


def compare_source() -> str:
    """The CUDA source of the comparison kernels (compiled to a cubin like a kernel candidate)."""
    return _SOURCE


def kernel_name(dtype: DType, mode: str) -> str | None:
    """The comparison kernel for an output of ``dtype`` under rule ``mode``; None when the rule is not
    decided on the device (``sorted``)."""
    if mode == "sorted":
        return None
    if is_float(dtype):
        width = "f32" if dtype == "float32" else "f64"
        return f"regraph_{'exact' if mode == 'exact' else 'tolerance'}_{width}"
    size = np.dtype(dtype).itemsize
    return f"regraph_exact_b{size}" if size in (1, 4, 8) else None


class DeviceComparer:
    """The comparison kernels loaded in a worker's CUDA context, with a device buffer that receives
    the reference's outputs (grown as needed, reused) and the failure counter."""

    def __init__(self, cuda: Any, product: str) -> None:
        self.cuda = cuda
        self.module = cuda.module_from_file(product)
        self.kernels: dict[str, Any] = {}
        self.counter = cuda.mem_alloc(8)
        self.scratch: Any = None
        self.scratch_bytes = 0
        # Inside reusing(): each reference array uploaded so far, by id (the array kept with it, so
        # that the id is not reused), and the device buffer holding it; None outside.
        self._kept: dict[int, tuple[np.ndarray, Any]] | None = None
        # Inside reusing(): the id of the kept array that the scratch buffer holds (None: none).
        self._in_scratch: int | None = None
        self._gather: Any = None  # regraph_spot_gather, prepared on first use

    def _kernel(self, name: str) -> Any:
        if name not in self.kernels:
            self.kernels[name] = self.module.get_function(name)
        return self.kernels[name]

    def _scratch(self, nbytes: int) -> Any:
        if nbytes > self.scratch_bytes:
            if self.scratch is not None:
                self.scratch.free()
                self.scratch, self.scratch_bytes = None, 0
            self.scratch = self.cuda.mem_alloc(nbytes)
            self.scratch_bytes = nbytes
        return self.scratch

    @contextlib.contextmanager
    def reusing(self) -> Iterator[None]:
        """Within the block, a reference array passed again (the same object) is not uploaded again:
        the first one goes to the scratch buffer, as outside the block, and each other one gets a device
        copy of its own (freed when the block ends; without device memory for one, the scratch buffer
        again, whose array is then uploaded again when it comes back). Not reentrant: a block inside
        another raises RuntimeError (its end would leave the outer block's copies unfreed).

        For one timing set's checks after a kernel's trials (:meth:`check_each`), between which no
        candidate code runs: on the H200 each upload of a timing-size reference took about 15 ms of the
        GPU turn (session 28). A block that spans several sets' checks keeps every set's reference on
        the device until it ends; :meth:`check_each` opens one per set instead."""
        if self._kept is not None:
            raise RuntimeError("DeviceComparer.reusing() is already open: its blocks do not nest")
        self._kept, self._in_scratch = {}, None
        try:
            yield
        finally:
            kept, self._kept = self._kept, None
            self._in_scratch = None
            for _, buf in kept.values():
                if buf is self.scratch:
                    continue  # the comparer's own, kept for the next check
                # After a fault the context is gone (and the process's exit frees them): that
                # failure, already raised in the block, is the verdict, not this one.
                with contextlib.suppress(self.cuda.Error):
                    buf.free()

    def check_each(
        self, checks: Iterable[tuple[int, str, Checked]], check: Callable[[int, str, Checked], None]
    ) -> None:
        """``check(source, call, outputs)`` for each of ``checks``: a kernel's last launch on every
        rotated copy (``Worker.check_timed_calls``), ``source`` the timing set its copy holds. Taken
        in the order of their sources (in their own order within one), each source's in a
        :meth:`reusing` block of its own: each set's references are uploaded once for all its copies
        and are off the device before the next set's go up, so that these checks need the device
        memory of one check (the scratch buffer; a task with several outputs, a copy of each other
        output of one set), not one reference per timing set. The first failure raised by ``check``
        ends them. The rotated copies hold set ``j % sets`` in slot ``j``: in slot order, a block over
        all of them kept every set's references at once (review of session 28: 3 MB with 2 sets and
        9 MB with 8, of 1-MB references, against 1 MB)."""
        ordered = sorted(checks, key=lambda c: c[0])  # stable: slot order within a source
        for _, group in itertools.groupby(ordered, key=lambda c: c[0]):
            with self.reusing():
                for source, call, outputs in group:
                    check(source, call, outputs)

    def _reference(self, expected: np.ndarray) -> Any:
        """A device buffer holding ``expected``: inside :meth:`reusing`, the one it was uploaded to
        before in the block (the scratch buffer for the block's first array, a copy of its own for
        another), else the scratch buffer, uploaded now; raises the driver's MemoryError when
        neither fits."""
        cuda = self.cuda
        kept = self._kept
        if kept is not None:
            entry = kept.get(id(expected))
            if entry is not None and entry[0] is expected:
                return entry[1]
            if self._in_scratch is not None:  # the scratch holds another array: a copy of its own
                try:
                    own = cuda.mem_alloc(max(expected.nbytes, 1))
                except cuda.MemoryError:
                    own = None
                if own is not None:
                    cuda.memcpy_htod(own, np.ascontiguousarray(expected))
                    kept[id(expected)] = (expected, own)
                    return own
                del kept[self._in_scratch]  # no room: the scratch takes this one instead
                self._in_scratch = None
        reference = self._scratch(expected.nbytes)
        cuda.memcpy_htod(reference, np.ascontiguousarray(expected))
        if kept is not None:
            kept[id(expected)] = (expected, reference)
            self._in_scratch = id(expected)
        return reference

    def failures(
        self, rule: CompareRule, dtype: DType, got: Any, got_elements: int, expected: np.ndarray
    ) -> int | None:
        """How many elements of the device output ``got`` (``got_elements`` of ``dtype``) fail
        ``rule`` against ``expected``; None when the device cannot decide (the host must): a rule it
        does not handle, an ``expected`` of another size or dtype, no device memory for it."""
        name = kernel_name(dtype, rule.mode)
        if name is None or expected.size != got_elements or expected.dtype != np.dtype(dtype):
            return None
        if got_elements == 0:
            return 0
        cuda = self.cuda
        try:
            reference = self._reference(expected)
        except cuda.MemoryError:  # the candidate's buffers leave no room: the host decides
            return None
        cuda.memset_d32(self.counter, 0, 2)
        blocks = min(MAX_BLOCKS, -(-got_elements // THREADS))
        self._kernel(name)(
            got,
            reference,
            np.uint64(got_elements),
            np.float64(rule.atol or 0.0),
            np.float64(rule.rtol or 0.0),
            self.counter,
            block=(THREADS, 1, 1),
            grid=(blocks, 1),
        )
        count = np.zeros(1, dtype=np.uint64)
        cuda.memcpy_dtoh(count, self.counter)  # synchronous: waits for the kernel
        return int(count[0])

    def spot_gather(self) -> Any:
        """:meth:`gather`, or None when its kernel cannot be readied in this context (the spot samples
        are then copied run by run, as without the option; a module built before the kernel existed
        lacks it)."""
        if self._gather is None:
            try:
                function = self._kernel("regraph_spot_gather")
                function.prepare("PPQ" + "Q" * GATHER_RUNS)
            except (self.cuda.Error, AttributeError):
                return None
            self._gather = function
        return self.gather

    def gather(self, dst: int, src: int, starts: list[int], run: int, stream: Any) -> None:
        """Enqueue on ``stream`` the copy of :data:`GATHER_RUNS` runs of ``run`` bytes each, from byte
        offsets ``starts`` of device address ``src``, one after the other to device address ``dst``
        (``regraph_spot_gather``: one launch where as many copies took a driver call each). Only once
        :meth:`spot_gather` has readied it."""
        if len(starts) != GATHER_RUNS:
            raise ValueError(f"a gather copies {GATHER_RUNS} runs, not {len(starts)}")
        if self._gather is None:
            raise RuntimeError("the gather kernel is not readied: call spot_gather() first")
        self._gather.prepared_async_call(
            (GATHER_RUNS, 1), (THREADS, 1, 1), stream, int(dst), int(src), int(run), *starts
        )

    def free(self) -> None:
        """Release the device buffers (the process's exit would too)."""
        for buf in (self.scratch, self.counter):
            if buf is not None:
                buf.free()
        self.scratch, self.counter, self.scratch_bytes = None, None, 0
