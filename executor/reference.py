"""Build and run a task's serial C++ reference on the CPU.

The reference (and the optional generator.cpp) is compiled with ``g++ -O3 -shared -fPIC`` into a
content-hash-cached library and called through ctypes *in the calling process*. That is fine for the
project's own tasks; candidate code never goes through this path (see :mod:`executor.worker`).
"""

from __future__ import annotations

import ctypes
import functools
import logging
import shutil
import subprocess
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

import numpy as np

from executor.abi import bind_entry, call_entry
from executor.cache import DEFAULT_CACHE_DIR, cached_product, content_key
from executor.errors import ReferenceBuildError, ReferenceRunError, ToolchainError
from executor.expr import Number
from executor.filelock import exclusive
from executor.inputs import INT_POISON, InputSet, generate_inputs
from executor.jail import Jail, cut_log, host_toolchain_paths
from executor.taskformat import FunctionTask, KernelTask, Size, is_float

logger = logging.getLogger(__name__)

CXX_FLAGS = ("-O3", "-std=c++17", "-shared", "-fPIC")
REFERENCE_BUILD_TIMEOUT_S = 120.0
# A reference worker's job may take this many times the executor's run_timeout_s (the cap of a
# candidate's run): it runs the task's own code, not a candidate's, and does up to three runs' worth of
# work one after the other: the evaluation's own sets, the task's preparation (every timing set and the
# serial reference's repeats, at the timing size) and, on a host whose replicas share the store, the
# wait for another replica's job that holds the preparation (timingset.await_preparation). Under the
# candidate's cap alone, a slow task's preparation failed honest candidates with ``reference_error``
# (session 25's scaling run, run_timeout_s = 60 s: median3x3_u8's preparation took 57 s with one
# replica; with two, both the preparing and the waiting replica were killed at 60 s).
REFERENCE_TIMEOUT_FACTOR = 3.0

_loaded: dict[Path, ctypes.CDLL] = {}
_load_lock = threading.Lock()


@dataclass
class ReferenceRun:
    """The reference's inputs (as handed over) and its outputs, for one input set."""

    seed: int
    size: Size
    scalars: dict[str, Number]
    inputs: dict[str, np.ndarray]
    outputs: dict[str, np.ndarray]
    seconds: float


def reference_timeout_s(run_timeout_s: float) -> float:
    """The wall-clock limit of a reference worker's job where a candidate's run is capped at
    ``run_timeout_s`` (see :data:`REFERENCE_TIMEOUT_FACTOR`)."""
    return REFERENCE_TIMEOUT_FACTOR * run_timeout_s


def find_cxx() -> str:
    """The host C++ compiler (``$CXX`` semantics are left to the settings; here: g++ on PATH)."""
    cxx = shutil.which("g++")
    if cxx is None:
        raise ToolchainError("g++ not found on PATH; it is needed to build task references")
    return cxx


@functools.lru_cache(maxsize=8)
def _cxx_version(cxx: str) -> str:
    # Asked once per compiler path: every evaluation looks its reference up, and a `g++ --version`
    # process per lookup cost milliseconds on the evaluation's path.
    out = subprocess.run([cxx, "--version"], capture_output=True, text=True, check=False, timeout=30)
    return out.stdout.splitlines()[0] if out.stdout else cxx


def build_reference(
    task: FunctionTask | KernelTask, cache_dir: Path | None = None, stop: threading.Event | None = None
) -> Path:
    """Compile reference.cpp (+ generator.cpp) into a cached shared library and return its path.
    Once ``stop`` is set (the service shuts down), a build under way is killed and
    :class:`EvaluationCancelled` raised; nothing of it is cached (the product is renamed into place
    only when whole)."""
    cxx = find_cxx()
    cache = (cache_dir or DEFAULT_CACHE_DIR) / "reference"
    key = content_key(
        "reference",
        _cxx_version(cxx),
        " ".join(CXX_FLAGS),
        task.reference_source,
        task.generator_source or "",
    )

    def build(work: Path, output: Path) -> None:
        sources = [work / "reference.cpp"]
        sources[0].write_text(task.reference_source, encoding="utf-8")
        if task.generator_source:
            sources.append(work / "generator.cpp")
            sources[1].write_text(task.generator_source, encoding="utf-8")
        cmd = [cxx, *CXX_FLAGS, *(s.name for s in sources), "-o", output.name]
        # A task's sources come from outside too (an imported graph): the same jail and log cut as a
        # candidate's build.
        returncode, log = Jail(read_only=host_toolchain_paths(cxx)).run(
            cmd, work, REFERENCE_BUILD_TIMEOUT_S, stop=stop
        )
        if returncode is None:
            raise ReferenceBuildError(f"building the reference of {task.id!r} timed out")
        if returncode != 0 or not output.is_file():
            log = cut_log(log, ("reference.cpp", "generator.cpp"), work)
            raise ReferenceBuildError(f"reference of {task.id!r} does not compile:\n{log[-4000:]}")

    if (cache / f"{key}.so").exists():
        path, hit = cached_product(cache, key, ".so", build)
    else:  # built once at a time on this host: a second builder waits and finds it (executor.filelock)
        with exclusive(cache / ".locks" / f"{key}.lock"):
            path, hit = cached_product(cache, key, ".so", build)
    logger.debug("reference library %s (%s)", path, "cache hit" if hit else "built")
    return path


def load_library(path: Path) -> ctypes.CDLL:
    """Load a shared library once per process (content-hashed paths make reuse safe)."""
    with _load_lock:
        if path not in _loaded:
            try:
                _loaded[path] = ctypes.CDLL(str(path))
            except OSError as e:
                raise ReferenceRunError(f"cannot load {path}: {e}") from e
        return _loaded[path]


def check_reference_outputs(task: FunctionTask | KernelTask, outputs: dict[str, np.ndarray]) -> None:
    """A reference must write every output element with a finite value (NaN never passes, so a task
    whose reference yields NaN/inf could never be solved), and must not leave the integer sentinel."""
    for arg in task.outputs:
        out = outputs[arg.name]
        if is_float(arg.dtype):
            bad = ~np.isfinite(out)
            if bad.any():
                raise ReferenceRunError(
                    f"reference of {task.id!r} left {int(bad.sum())} non-finite elements in {arg.name!r} "
                    f"(first at {int(np.argmax(bad))})"
                )
        elif arg.intent == "out" and out.itemsize >= 4:
            # A 1-byte sentinel is an ordinary value that a correct reference may write (0xA5 is a
            # plausible pixel), so only wider integer outputs can be checked this way.
            unwritten = out == INT_POISON[arg.dtype]
            if unwritten.any():
                raise ReferenceRunError(
                    f"reference of {task.id!r} did not write {int(unwritten.sum())} elements of {arg.name!r}"
                )


def reference_on(
    task: FunctionTask | KernelTask, lib: ctypes.CDLL, inputs: InputSet
) -> tuple[dict[str, np.ndarray], float]:
    """Run the reference on a copy of an input set; return its outputs and the call's wall time."""
    fn = bind_entry(lib, task.reference_symbol, task)
    work = inputs.copy()
    start = time.perf_counter()
    call_entry(fn, task, work.scalars, work.arrays)
    seconds = time.perf_counter() - start
    outputs = {a.name: work.arrays[a.name] for a in task.outputs}
    check_reference_outputs(task, outputs)
    return outputs, seconds


def run_reference(
    task: FunctionTask | KernelTask,
    size: Literal["test", "timing"],
    seed: int,
    cache_dir: Path | None = None,
) -> ReferenceRun:
    """Build (cached) and run the task's reference on one freshly generated input set.

    Returns the inputs as handed to the reference (outputs poisoned) and the outputs it produced.
    Raises :class:`ReferenceBuildError` / :class:`ReferenceRunError` when the task itself is broken.
    """
    lib = load_library(build_reference(task, cache_dir))
    inputs = generate_inputs(task, size, seed, lib)
    outputs, seconds = reference_on(task, lib, inputs)
    return ReferenceRun(seed, size, dict(inputs.scalars), inputs.arrays, outputs, seconds)


def time_reference(
    task: FunctionTask | KernelTask,
    seed: int,
    repeats: int = 3,
    cache_dir: Path | None = None,
) -> list[float]:
    """Wall-clock seconds of the serial reference at the timing size, ``repeats`` times.

    Each repeat works on a fresh copy of the same inputs (copying is outside the timed region), so
    in-place updates of ``inout`` arrays never change the work done.
    """
    lib = load_library(build_reference(task, cache_dir))
    inputs = generate_inputs(task, "timing", seed, lib)
    times = []
    for _ in range(max(1, repeats)):
        _, seconds = reference_on(task, lib, inputs)
        times.append(seconds)
    return times
