"""Input sets for a task: seeded numpy draws from the built-in generators, poisoned output buffers.

The same code builds inputs for the reference (in process) and for the isolated worker, so that the
candidate and the reference always see identical host data.
"""

from __future__ import annotations

import ctypes
from dataclasses import dataclass, field

import numpy as np

from executor.abi import bind_generator, call_generator
from executor.errors import ReferenceRunError
from executor.expr import Number
from executor.taskformat import (
    NUMPY_DTYPES,
    ArrayArg,
    CustomGenerator,
    FunctionTask,
    KernelTask,
    NormalGenerator,
    PermutationGenerator,
    RandintGenerator,
    ScalarArg,
    Size,
    SortedUniformGenerator,
    UniformGenerator,
    is_float,
)

# Attempts to redraw an array that came out all zeros (e.g. randint over a tiny range at a tiny size).
_MAX_REDRAWS = 8
# Sentinel written into integer outputs before a run; any element still equal to it was not written
# (or was written with exactly this value, which is why the reference is checked against it too).
INT_POISON = {
    "int8": -0x5B,
    "uint8": 0xA5,
    "int32": -0x5A5A5A5B,
    "uint32": 0xA5A5A5A5,
    "int64": -0x5A5A5A5A5A5A5A5B,
    "uint64": 0xA5A5A5A5A5A5A5A5,
}


@dataclass
class InputSet:
    """One set of arguments: scalar values and host arrays (outputs already poisoned)."""

    seed: int
    size: Size
    scalars: dict[str, Number] = field(default_factory=dict)
    arrays: dict[str, np.ndarray] = field(default_factory=dict)

    def copy(self) -> InputSet:
        """A deep copy, so that one call's writes never leak into another's inputs."""
        return InputSet(
            self.seed, self.size, dict(self.scalars), {k: v.copy() for k, v in self.arrays.items()}
        )


def poison(array: np.ndarray, dtype: str) -> None:
    """Fill an output buffer with NaN (floats) or a sentinel (integers), in place."""
    if is_float(dtype):
        array.fill(np.nan)
    else:
        array.fill(INT_POISON[dtype])


def _draw(arg: ArrayArg, n: int, rng: np.random.Generator) -> np.ndarray:
    dtype = NUMPY_DTYPES[arg.dtype]
    gen = arg.generator
    if isinstance(gen, UniformGenerator | SortedUniformGenerator):
        if arg.dtype == "float32":
            values = _uniform_float32(rng, gen.low, gen.high, n)
        elif is_float(arg.dtype):
            values = rng.uniform(gen.low, gen.high, n)
        else:
            values = _integers(rng, int(np.ceil(gen.low)), int(np.floor(gen.high)) + 1, n, dtype)
        if isinstance(gen, SortedUniformGenerator):
            values.sort()
        return values.astype(dtype, copy=False)
    if isinstance(gen, NormalGenerator):
        if arg.dtype == "float32":
            values = rng.standard_normal(n, dtype=np.float32)
            values *= np.float32(gen.std)
            values += np.float32(gen.mean)
            return values
        values = rng.normal(gen.mean, gen.std, n)
        return (values if is_float(arg.dtype) else np.rint(values)).astype(dtype)
    if isinstance(gen, RandintGenerator):
        return _integers(rng, gen.low, gen.high, n, dtype)
    if isinstance(gen, PermutationGenerator):
        return rng.permutation(n).astype(dtype)
    raise AssertionError(f"no built-in draw for {gen!r}")  # custom is handled by the caller


def _integers(rng: np.random.Generator, low: int, high: int, n: int, dtype: type[np.generic]) -> np.ndarray:
    """Integers in ``[low, high)``, drawn directly in the target type when the range fits it (timing
    sizes reach 2^28 elements: an int64 intermediate would cost eight times the memory and time)."""
    info = np.iinfo(np.dtype(dtype))
    if info.min <= low and high - 1 <= info.max:
        return rng.integers(low, high - 1, n, dtype=dtype, endpoint=True)
    return rng.integers(low, high, n).astype(dtype)


def _uniform_float32(rng: np.random.Generator, low: float, high: float, n: int) -> np.ndarray:
    """Uniform float32 draws in ``[low, high)`` without a float64 intermediate."""
    values = rng.random(n, dtype=np.float32)
    values *= np.float32(high - low)
    values += np.float32(low)
    # Rounding to float32 can land on ``high`` itself; keep the interval half-open.
    np.minimum(values, np.nextafter(np.float32(high), np.float32(low)), out=values)
    return values


def generate_inputs(
    task: FunctionTask | KernelTask,
    size: Size,
    seed: int,
    generator_lib: ctypes.CDLL | None = None,
) -> InputSet:
    """Build one input set: draw ``in``/``inout`` arrays, poison ``out`` arrays, run ``generator.cpp``.

    ``generator_lib`` is the reference library (which contains ``regraph_generate`` when the task has a
    generator.cpp); it is required only for tasks with ``custom`` generators.
    """
    seq = np.random.SeedSequence(seed)
    children = seq.spawn(len(task.args))
    inputs = InputSet(seed=seed, size=size)
    for arg, child in zip(task.args, children, strict=True):
        if isinstance(arg, ScalarArg):
            inputs.scalars[arg.name] = task.scalar_value(arg, size)
            continue
        n = task.array_length(arg, size)
        if arg.generator is None or isinstance(arg.generator, CustomGenerator):
            array = np.empty(n, dtype=NUMPY_DTYPES[arg.dtype])
            poison(array, arg.dtype)
        else:
            rng = np.random.default_rng(child)
            array = _draw(arg, n, rng)
            for _ in range(_MAX_REDRAWS):
                if array.any():
                    break
                array = _draw(arg, n, rng)
            else:
                raise ReferenceRunError(f"generator of {arg.name!r} keeps producing all zeros")
        inputs.arrays[arg.name] = array
    if any(isinstance(a.generator, CustomGenerator) for a in task.arrays):
        if generator_lib is None:
            raise ReferenceRunError(
                f"task {task.id!r} needs generator.cpp but no generator library was given"
            )
        fn = bind_generator(generator_lib, task)
        # The custom generator gets its own seed derived from the run's seed, never the raw one twice.
        gen_seed = int(np.random.SeedSequence(seed).generate_state(1, np.uint64)[0])
        call_generator(fn, task, gen_seed, inputs.scalars, inputs.arrays)
        for arg in task.arrays:
            if isinstance(arg.generator, CustomGenerator):
                _check_custom_filled(arg, inputs.arrays[arg.name])
    return inputs


def _check_custom_filled(arg: ArrayArg, array: np.ndarray) -> None:
    if not array.any():
        raise ReferenceRunError(f"generator.cpp left {arg.name!r} all zeros")
    # Byte-sized sentinels are ordinary values, so only wider types can be checked for unwritten slots.
    unfilled = (
        np.isnan(array)
        if is_float(arg.dtype)
        else (array == INT_POISON[arg.dtype] if array.itemsize >= 4 else np.zeros(1, dtype=bool))
    )
    if unfilled.any():
        raise ReferenceRunError(f"generator.cpp did not fill {int(unfilled.sum())} elements of {arg.name!r}")
