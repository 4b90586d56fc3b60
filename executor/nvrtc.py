"""Compiling kernel-task candidates in process with NVRTC (libnvrtc through ctypes).

nvcc spends most of a kernel compile starting processes and preprocessing host headers; NVRTC runs
the same front end, NVVM and ptxas in this process and returns a CUBIN in tens of milliseconds.
Kernel-task candidates are device code only, so NVRTC fits them; function tasks (with host code) keep
nvcc. Where NVRTC cannot build a source that nvcc can (host-only headers, host functions that are not
valid device code) :mod:`executor.compile` falls back to nvcc.

NVRTC has no C++ standard library and no host runtime headers. A handful of headers that kernels
commonly include (``<cstdint>``, ``<cuda_runtime.h>``, ``<cfloat>`` ...) are served from small
built-in replacements (:data:`BUILTIN_HEADERS`); any other include is looked up in the toolkit's
include directory next to the library (``cuda_fp16.h``, ``cooperative_groups.h``, ...).
"""

from __future__ import annotations

import ctypes
import importlib.util
import logging
import os
import threading
from dataclasses import dataclass
from pathlib import Path

from executor.errors import ToolchainError

logger = logging.getLogger(__name__)

NVRTC_SUCCESS = 0

_FLOAT_LIMITS = """#pragma once
#define FLT_MAX 3.402823466e+38F
#define FLT_MIN 1.175494351e-38F
#define FLT_EPSILON 1.192092896e-07F
#define DBL_MAX 1.7976931348623158e+308
#define DBL_MIN 2.2250738585072014e-308
#define DBL_EPSILON 2.2204460492503131e-16
"""

_INT_LIMITS = """#pragma once
#define CHAR_BIT 8
#define SCHAR_MIN (-128)
#define SCHAR_MAX 127
#define UCHAR_MAX 255
#define SHRT_MIN (-32768)
#define SHRT_MAX 32767
#define USHRT_MAX 65535
#define INT_MAX 2147483647
#define INT_MIN (-INT_MAX - 1)
#define UINT_MAX 4294967295U
#define LONG_MAX 9223372036854775807L
#define LONG_MIN (-LONG_MAX - 1L)
#define ULONG_MAX 18446744073709551615UL
#define LLONG_MAX 9223372036854775807LL
#define LLONG_MIN (-LLONG_MAX - 1LL)
#define ULLONG_MAX 18446744073709551615ULL
"""

_STDINT = """#pragma once
typedef signed char int8_t;
typedef unsigned char uint8_t;
typedef short int16_t;
typedef unsigned short uint16_t;
typedef int int32_t;
typedef unsigned int uint32_t;
typedef long long int64_t;
typedef unsigned long long uint64_t;
typedef long long intptr_t;
typedef unsigned long long uintptr_t;
#define INT32_MAX 2147483647
#define INT32_MIN (-INT32_MAX - 1)
#define UINT32_MAX 4294967295U
#define INT64_MAX 9223372036854775807LL
#define INT64_MIN (-INT64_MAX - 1)
#define UINT64_MAX 18446744073709551615ULL
"""

_CSTDINT = (
    _STDINT
    + """namespace std {
using ::int8_t; using ::uint8_t; using ::int16_t; using ::uint16_t; using ::int32_t; using ::uint32_t;
using ::int64_t; using ::uint64_t; using ::intptr_t; using ::uintptr_t;
}
"""
)

_MATH = """#pragma once
#ifndef INFINITY
#define INFINITY __int_as_float(0x7f800000)
#endif
#ifndef NAN
#define NAN __int_as_float(0x7fffffff)
#endif
"""

# NVRTC defines the CUDA built-ins (threadIdx, __syncthreads, atomics, math functions) itself; these
# runtime headers only matter to host code, so for device-only candidates they can be empty.
_EMPTY = "#pragma once\n"

BUILTIN_HEADERS: dict[str, str] = {
    "cuda_runtime.h": _EMPTY,
    "cuda_runtime_api.h": _EMPTY,
    "cuda.h": _EMPTY,
    "device_launch_parameters.h": _EMPTY,
    "stdint.h": _STDINT,
    "cstdint": _CSTDINT,
    "stddef.h": _EMPTY,  # NVRTC defines size_t itself
    "cstddef": "#pragma once\nnamespace std { using ::size_t; }\n",
    "float.h": _FLOAT_LIMITS,
    "cfloat": _FLOAT_LIMITS,
    "limits.h": _INT_LIMITS,
    "climits": _INT_LIMITS,
    "math.h": _MATH,
    "cmath": _MATH,
}


@dataclass(frozen=True)
class NvrtcOutput:
    """The result of one NVRTC compile: the CUBIN on success, the program log either way."""

    ok: bool
    log: str
    cubin: bytes = b""


class Nvrtc:
    """A loaded libnvrtc. ``compile`` is thread-safe (NVRTC programs are independent)."""

    def __init__(self, library: Path) -> None:
        try:
            self.lib = ctypes.CDLL(str(library))
        except OSError as e:
            raise ToolchainError(f"cannot load NVRTC from {library}: {e}") from e
        self.path = library
        major, minor = ctypes.c_int(), ctypes.c_int()
        if self.lib.nvrtcVersion(ctypes.byref(major), ctypes.byref(minor)) != NVRTC_SUCCESS:
            raise ToolchainError(f"nvrtcVersion failed for {library}")
        self.release = f"{major.value}.{minor.value}"
        # ``--minimal`` (fewer implicit declarations, a faster front end) exists from 12.4 on.
        self.has_minimal = (major.value, minor.value) >= (12, 4)
        self.lib.nvrtcGetErrorString.restype = ctypes.c_char_p
        self.lib.nvrtcCreateProgram.argtypes = [
            ctypes.POINTER(ctypes.c_void_p),
            ctypes.c_char_p,
            ctypes.c_char_p,
            ctypes.c_int,
            ctypes.POINTER(ctypes.c_char_p),
            ctypes.POINTER(ctypes.c_char_p),
        ]
        self.lib.nvrtcCompileProgram.argtypes = [
            ctypes.c_void_p,
            ctypes.c_int,
            ctypes.POINTER(ctypes.c_char_p),
        ]
        for name in ("nvrtcGetProgramLogSize", "nvrtcGetCUBINSize"):
            getattr(self.lib, name).argtypes = [ctypes.c_void_p, ctypes.POINTER(ctypes.c_size_t)]
        for name in ("nvrtcGetProgramLog", "nvrtcGetCUBIN"):
            getattr(self.lib, name).argtypes = [ctypes.c_void_p, ctypes.c_char_p]
        self.lib.nvrtcDestroyProgram.argtypes = [ctypes.POINTER(ctypes.c_void_p)]
        include = library.parent.parent / "include"
        self.include_dir: Path | None = include if (include / "cuda_fp16.h").is_file() else None

    def _error(self, code: int) -> str:
        text: bytes | None = self.lib.nvrtcGetErrorString(code)
        return text.decode() if text else f"NVRTC error {code}"

    def compile(self, source: str, options: list[str], name: str = "candidate.cu") -> NvrtcOutput:
        """Compile one translation unit with ``options``; a compile error is an output, not an exception."""
        names = list(BUILTIN_HEADERS)
        header_names = (ctypes.c_char_p * len(names))(*(n.encode() for n in names))
        header_sources = (ctypes.c_char_p * len(names))(*(BUILTIN_HEADERS[n].encode() for n in names))
        program = ctypes.c_void_p()
        code = self.lib.nvrtcCreateProgram(
            ctypes.byref(program),
            source.encode("utf-8"),
            name.encode(),
            len(names),
            header_sources,
            header_names,
        )
        if code != NVRTC_SUCCESS:
            raise ToolchainError(f"nvrtcCreateProgram failed: {self._error(code)}")
        try:
            encoded = [o.encode() for o in options]
            argv = (ctypes.c_char_p * len(encoded))(*encoded)
            code = self.lib.nvrtcCompileProgram(program, len(encoded), argv)
            size = ctypes.c_size_t()
            self.lib.nvrtcGetProgramLogSize(program, ctypes.byref(size))
            buffer = ctypes.create_string_buffer(size.value)
            self.lib.nvrtcGetProgramLog(program, buffer)
            log = buffer.value.decode("utf-8", "replace")
            if code != NVRTC_SUCCESS:
                return NvrtcOutput(ok=False, log=log or self._error(code))
            self.lib.nvrtcGetCUBINSize(program, ctypes.byref(size))
            if size.value == 0:  # a virtual architecture gives PTX only; the caller asked for a cubin
                return NvrtcOutput(ok=False, log=log + "\nNVRTC produced no CUBIN (is the arch real?)")
            cubin = ctypes.create_string_buffer(size.value)
            self.lib.nvrtcGetCUBIN(program, cubin)
            return NvrtcOutput(ok=True, log=log, cubin=cubin.raw)
        finally:
            self.lib.nvrtcDestroyProgram(ctypes.byref(program))


def _wheel_library_dirs() -> list[Path]:
    spec = importlib.util.find_spec("nvidia")
    if spec is None or not spec.submodule_search_locations:
        return []
    dirs = []
    for base in spec.submodule_search_locations:
        for sub in ("cu13", "cuda_nvrtc", "cu12"):
            dirs.append(Path(base) / sub / "lib")
    return dirs


def candidate_libraries(explicit: str | None = None) -> list[Path]:
    """Where libnvrtc is looked for, in order: an explicit path (file or directory), the PyPI wheel
    (``nvidia/cu13/lib`` or ``nvidia/cuda_nvrtc/lib``), ``$CUDA_HOME/lib64``, ``/usr/local/cuda/lib64``."""
    if explicit:
        path = Path(explicit)
        dirs = [path] if path.is_dir() else []
        if not dirs:
            return [path]
    else:
        dirs = _wheel_library_dirs()
        for env in ("CUDA_HOME", "CUDA_PATH"):
            if os.environ.get(env):
                dirs.append(Path(os.environ[env]) / "lib64")
        dirs.append(Path("/usr/local/cuda/lib64"))
    found: list[Path] = []
    for d in dirs:
        if not d.is_dir():
            continue
        # Any of libnvrtc.so -> libnvrtc.so.13 -> libnvrtc.so.13.0.88 will do; take the shortest name.
        names = sorted(
            (p for p in d.glob("libnvrtc.so*") if "builtins" not in p.name),
            key=lambda p: (len(p.name), p.name),
        )
        found.extend(names[:1])
    return found


_loaded: dict[str, Nvrtc | None] = {}
_lock = threading.Lock()


def find_nvrtc(explicit: str | None = None) -> Nvrtc | None:
    """The first usable libnvrtc (see :func:`candidate_libraries`), or None; the answer is cached."""
    key = explicit or ""
    with _lock:
        if key in _loaded:
            return _loaded[key]
        result: Nvrtc | None = None
        for library in candidate_libraries(explicit):
            try:
                result = Nvrtc(library)
            except ToolchainError as e:
                logger.warning("%s", e)
                continue
            logger.info("using NVRTC %s at %s", result.release, library)
            break
        _loaded[key] = result
        return result
