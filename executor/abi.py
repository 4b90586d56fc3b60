"""Calling task-shaped C functions through ctypes (reference, generator, CPU-loadable candidates)."""

from __future__ import annotations

import ctypes
from collections.abc import Callable, Mapping
from typing import Any

import numpy as np

from executor.errors import ReferenceRunError
from executor.expr import Number
from executor.taskformat import ArrayArg, FunctionTask, KernelTask, ScalarArg

CTYPES: dict[str, Any] = {
    "int8": ctypes.c_int8,
    "uint8": ctypes.c_uint8,
    "int32": ctypes.c_int32,
    "uint32": ctypes.c_uint32,
    "int64": ctypes.c_int64,
    "uint64": ctypes.c_uint64,
    "float32": ctypes.c_float,
    "float64": ctypes.c_double,
}

CFunction = Callable[..., None]


def _argtypes(task: FunctionTask | KernelTask) -> list[Any]:
    return [
        ctypes.POINTER(CTYPES[a.dtype]) if isinstance(a, ArrayArg) else CTYPES[a.dtype] for a in task.args
    ]


def bind_entry(lib: ctypes.CDLL, symbol: str, task: FunctionTask | KernelTask) -> CFunction:
    """Look up ``symbol`` in a loaded library and declare its parameter types from the task."""
    try:
        fn: Any = getattr(lib, symbol)
    except AttributeError as e:
        raise ReferenceRunError(f"symbol {symbol!r} not found in {lib._name}") from e
    fn.argtypes = _argtypes(task)
    fn.restype = None
    bound: CFunction = fn
    return bound


def bind_generator(lib: ctypes.CDLL, task: FunctionTask | KernelTask) -> CFunction:
    """Look up ``regraph_generate`` (seed first, then the entry's parameters)."""
    try:
        fn = lib.regraph_generate
    except AttributeError as e:
        raise ReferenceRunError('generator.cpp does not define extern "C" regraph_generate') from e
    fn.argtypes = [ctypes.c_ulonglong, *_argtypes(task)]
    fn.restype = None
    return fn


def call_arguments(
    task: FunctionTask | KernelTask, scalars: Mapping[str, Number], arrays: Mapping[str, np.ndarray]
) -> list[Any]:
    """The ctypes argument list for one call, in signature order (arrays by pointer, no copies)."""
    values: list[Any] = []
    for arg in task.args:
        if isinstance(arg, ScalarArg):
            values.append(CTYPES[arg.dtype](scalars[arg.name]))
        else:
            array = arrays[arg.name]
            if not array.flags.c_contiguous:
                raise ReferenceRunError(f"array {arg.name!r} is not contiguous")
            values.append(array.ctypes.data_as(ctypes.POINTER(CTYPES[arg.dtype])))
    return values


def call_entry(
    fn: CFunction,
    task: FunctionTask | KernelTask,
    scalars: Mapping[str, Number],
    arrays: Mapping[str, np.ndarray],
) -> None:
    """Call a bound entry function on host arrays (which it reads and writes in place)."""
    fn(*call_arguments(task, scalars, arrays))


def call_generator(
    fn: CFunction,
    task: FunctionTask | KernelTask,
    seed: int,
    scalars: Mapping[str, Number],
    arrays: Mapping[str, np.ndarray],
) -> None:
    """Call ``regraph_generate(seed, ...)`` on host arrays."""
    fn(ctypes.c_ulonglong(seed), *call_arguments(task, scalars, arrays))
