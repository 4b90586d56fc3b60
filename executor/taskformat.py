"""Pydantic models of the task format `regraph.task/v1` (see docs/task-format.md), plus disk I/O.

These models are the single source of truth for the format: the HTTP API accepts them, the benchmark
tasks on disk are loaded into them, and every consumer (reference runner, worker, service) reads sizes,
scalars and array lengths through the helpers defined here.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from pathlib import Path
from typing import Annotated, Any, Literal

import numpy as np
from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

from executor.errors import ExpressionError, TaskFormatError
from executor.expr import Number, evaluate, expression_names

FORMAT: Literal["regraph.task/v1"] = "regraph.task/v1"

DType = Literal["int8", "uint8", "int32", "uint32", "int64", "uint64", "float32", "float64"]
Size = Literal["test", "timing"]

NUMPY_DTYPES: dict[str, type[np.generic]] = {
    "int8": np.int8,
    "uint8": np.uint8,
    "int32": np.int32,
    "uint32": np.uint32,
    "int64": np.int64,
    "uint64": np.uint64,
    "float32": np.float32,
    "float64": np.float64,
}

# C spellings accepted in signatures, normalised (single spaces) -> dtype.
C_TYPES: dict[str, str] = {
    "char": "int8",
    "signed char": "int8",
    "int8_t": "int8",
    "unsigned char": "uint8",
    "uint8_t": "uint8",
    "int": "int32",
    "signed int": "int32",
    "int32_t": "int32",
    "unsigned": "uint32",
    "unsigned int": "uint32",
    "uint32_t": "uint32",
    "long long": "int64",
    "long long int": "int64",
    "long": "int64",
    "int64_t": "int64",
    "unsigned long long": "uint64",
    "unsigned long long int": "uint64",
    "unsigned long": "uint64",
    "uint64_t": "uint64",
    "size_t": "uint64",
    "float": "float32",
    "double": "float64",
}

# Canonical C spelling of each dtype, used when the executor writes C code (wrappers, launchers).
C_SPELLING: dict[str, str] = {
    "int8": "signed char",
    "uint8": "unsigned char",
    "int32": "int",
    "uint32": "unsigned int",
    "int64": "long long",
    "uint64": "unsigned long long",
    "float32": "float",
    "float64": "double",
}


def is_float(dtype: str) -> bool:
    """Whether a dtype is a floating type (compared with tolerances rather than exactly)."""
    return dtype.startswith("float")


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


# --- generators -------------------------------------------------------------------------------------


class UniformGenerator(_Strict):
    """Independent uniform draws in ``[low, high)``."""

    dist: Literal["uniform"]
    low: float
    high: float


class NormalGenerator(_Strict):
    """Independent normal draws."""

    dist: Literal["normal"]
    mean: float = 0.0
    std: float = 1.0


class RandintGenerator(_Strict):
    """Independent integers in ``[low, high)`` (inclusive low, exclusive high)."""

    dist: Literal["randint"]
    low: int
    high: int


class SortedUniformGenerator(_Strict):
    """Uniform draws in ``[low, high)``, sorted ascending."""

    dist: Literal["sorted_uniform"]
    low: float
    high: float


class PermutationGenerator(_Strict):
    """A random permutation of ``0 .. size-1``."""

    dist: Literal["permutation"]


class CustomGenerator(_Strict):
    """Filled by the task's ``generator.cpp`` (``regraph_generate``)."""

    dist: Literal["custom"]


Generator = Annotated[
    UniformGenerator
    | NormalGenerator
    | RandintGenerator
    | SortedUniformGenerator
    | PermutationGenerator
    | CustomGenerator,
    Field(discriminator="dist"),
]


class CompareRule(_Strict):
    """How an output is compared with the reference.

    ``mode`` ``tolerance`` (the default) checks ``|out-ref| <= atol + rtol*|ref|`` for floats and
    equality for integers; ``exact`` requires equality; ``sorted`` compares sorted copies (outputs
    whose order is unspecified) with the same element rule.
    """

    mode: Literal["tolerance", "exact", "sorted"] = "tolerance"
    rtol: float | None = Field(default=None, ge=0)
    atol: float | None = Field(default=None, ge=0)


# --- args -------------------------------------------------------------------------------------------


def _expression_text(value: Any) -> Any:
    # Task authors sometimes write a plain JSON number; the format says "expression", so accept it as text.
    if isinstance(value, bool):
        return value
    if isinstance(value, int | float):
        return repr(value)
    return value


class ScalarArg(_Strict):
    """A by-value parameter of the entry function; ``value`` is an expression over the params."""

    name: str
    kind: Literal["scalar"]
    dtype: DType
    value: str

    _text = field_validator("value", mode="before")(_expression_text)


class ArrayArg(_Strict):
    """A pointer parameter: ``size`` elements of ``dtype``, read (in), written (out) or both (inout)."""

    name: str
    kind: Literal["array"]
    dtype: DType
    size: str
    intent: Literal["in", "out", "inout"]
    generator: Generator | None = None
    compare: CompareRule | None = None

    _text = field_validator("size", mode="before")(_expression_text)

    @model_validator(mode="after")
    def _generator_matches_intent(self) -> ArrayArg:
        if self.intent in ("in", "inout") and self.generator is None:
            raise ValueError(f"array {self.name!r} has intent {self.intent!r} but no generator")
        if self.intent == "out" and self.generator is not None:
            raise ValueError(f"array {self.name!r} is an output only; it must not have a generator")
        if self.intent == "in" and self.compare is not None:
            raise ValueError(f"array {self.name!r} is input only; a compare rule makes no sense")
        if isinstance(self.generator, PermutationGenerator) and is_float(self.dtype):
            raise ValueError(f"array {self.name!r}: a permutation needs an integer dtype")
        if isinstance(self.generator, UniformGenerator | SortedUniformGenerator | RandintGenerator) and (
            self.generator.high <= self.generator.low
        ):
            raise ValueError(f"array {self.name!r}: generator needs low < high")
        return self

    @property
    def is_output(self) -> bool:
        """Whether the candidate writes this array (it is then compared)."""
        return self.intent in ("out", "inout")


Arg = Annotated[ScalarArg | ArrayArg, Field(discriminator="kind")]


class SizeParam(_Strict):
    """A problem-size parameter with its value for the correctness check and for timing."""

    test: int = Field(gt=0)
    timing: int = Field(gt=0)


class KernelLaunch(_Strict):
    """Kernel tasks: the kernel's signature and the launch configuration as expressions over the params."""

    signature: str
    docstring: str = ""
    block: tuple[str, str, str]
    grid: tuple[str, str, str]
    shared_bytes: str = "0"

    _block = field_validator("block", "grid", mode="before")(
        lambda v: [_expression_text(x) for x in v] if isinstance(v, list | tuple) else v
    )
    _shared = field_validator("shared_bytes", mode="before")(_expression_text)


# --- signatures -------------------------------------------------------------------------------------


class SignatureParam(_Strict):
    """One parameter of a parsed C signature."""

    name: str
    dtype: str
    pointer: bool
    const: bool


_SIGNATURE = re.compile(
    r"^\s*(?P<qual>(?:__global__|extern\s+\"C\"|static|inline|\s)*)\s*void\s+(?P<name>[A-Za-z_]\w*)\s*"
    r"\((?P<params>.*)\)\s*;?\s*$",
    re.S,
)
_PARAM = re.compile(
    r"^(?P<type>[A-Za-z_][\w\s]*?)\s*(?P<stars>\*?)\s*(?:__restrict__|__restrict|restrict)?\s*"
    r"(?P<name>[A-Za-z_]\w*)$"
)


def parse_signature(signature: str) -> tuple[str, list[SignatureParam]]:
    """Parse ``void name(T a, const U* b, ...)`` into the function name and its parameters.

    Only what the format needs is understood: ``void`` return, scalar parameters of the supported C
    types, and single pointers to them, optionally ``const`` and ``__restrict__``.
    """
    m = _SIGNATURE.match(signature)
    if m is None:
        raise TaskFormatError(f"cannot parse signature {signature!r}: expected 'void name(params)'")
    params: list[SignatureParam] = []
    text = m["params"].strip()
    if text and text != "void":
        for raw in text.split(","):
            piece = " ".join(raw.replace("*", " * ").split())
            const = False
            words = piece.split(" ")
            if "const" in words:
                const = True
                words = [w for w in words if w != "const"]
            pm = _PARAM.match(" ".join(words).replace(" * ", "* ").replace(" *", "*"))
            if pm is None:
                raise TaskFormatError(f"cannot parse parameter {raw.strip()!r} of signature {signature!r}")
            ctype = " ".join(pm["type"].split())
            if ctype not in C_TYPES:
                raise TaskFormatError(f"unsupported C type {ctype!r} in signature {signature!r}")
            if pm["stars"].count("*") > 1:
                raise TaskFormatError(f"only single pointers are supported: {raw.strip()!r}")
            params.append(
                SignatureParam(name=pm["name"], dtype=C_TYPES[ctype], pointer=bool(pm["stars"]), const=const)
            )
    return m["name"], params


def _check_args_against_signature(
    args: list[ScalarArg | ArrayArg], signature: str, what: str
) -> tuple[str, list[SignatureParam]]:
    name, params = parse_signature(signature)
    if [p.name for p in params] != [a.name for a in args]:
        raise ValueError(
            f"args {[a.name for a in args]} do not match the parameters {[p.name for p in params]} "
            f"of the {what} {signature!r} (same names, same order)"
        )
    for arg, param in zip(args, params, strict=True):
        if arg.dtype != param.dtype:
            raise ValueError(f"arg {arg.name!r} has dtype {arg.dtype} but the {what} says {param.dtype}")
        if isinstance(arg, ScalarArg) and param.pointer:
            raise ValueError(f"arg {arg.name!r} is a scalar but is a pointer in the {what}")
        if isinstance(arg, ArrayArg):
            if not param.pointer:
                raise ValueError(f"arg {arg.name!r} is an array but is not a pointer in the {what}")
            if arg.intent == "in" and not param.const:
                raise ValueError(f"array {arg.name!r} has intent 'in' and must be 'const' in the {what}")
            if arg.intent != "in" and param.const:
                raise ValueError(f"array {arg.name!r} has intent {arg.intent!r} but is 'const' in the {what}")
    return name, params


# --- tasks ------------------------------------------------------------------------------------------

_DEFAULT_COMPARE = CompareRule(rtol=1e-4, atol=1e-5)


class _TaskBase(_Strict):
    format: Literal["regraph.task/v1"] = FORMAT
    id: str = Field(pattern=r"^[a-z0-9_]+$", max_length=100)
    domain: str = ""
    description: str = ""
    entry: str = Field(pattern=r"^[A-Za-z_]\w*$")
    signature: str
    params: dict[str, SizeParam] = Field(default_factory=dict)
    args: list[Arg]
    compare: CompareRule = _DEFAULT_COMPARE
    tier_hint: Literal["easy", "medium", "hard"] | None = None
    reference_source: str = ""
    generator_source: str | None = None
    # Optional extension: the task's naive.cu, used for the baseline CUDA speedup when present.
    naive_source: str | None = None

    @property
    def reference_symbol(self) -> str:
        """Name of the ``extern "C"`` function that reference.cpp defines (from ``signature``)."""
        return parse_signature(self.signature)[0]

    def size_values(self, size: Size) -> dict[str, int]:
        """The parameter values at the ``test`` or ``timing`` size."""
        return {name: getattr(p, size) for name, p in self.params.items()}

    def array_length(self, arg: ArrayArg, size: Size) -> int:
        """Element count of an array argument at a size."""
        value = evaluate(arg.size, self.size_values(size))
        if not isinstance(value, int) or value <= 0:
            raise ExpressionError(
                f"size of array {arg.name!r} ({arg.size!r}) is {value!r}, not a positive int"
            )
        return value

    def scalar_value(self, arg: ScalarArg, size: Size) -> Number:
        """The value of a scalar argument at a size, converted to its dtype's Python type."""
        value = evaluate(arg.value, self.size_values(size))
        if is_float(arg.dtype):
            return float(value)
        if isinstance(value, float) and not value.is_integer():
            raise ExpressionError(f"integer scalar {arg.name!r} ({arg.value!r}) evaluates to {value}")
        info = np.iinfo(np.dtype(NUMPY_DTYPES[arg.dtype]))
        ivalue = int(value)
        if not info.min <= ivalue <= info.max:
            raise ExpressionError(f"scalar {arg.name!r} = {ivalue} does not fit {arg.dtype}")
        return ivalue

    @property
    def arrays(self) -> list[ArrayArg]:
        """The array arguments, in signature order."""
        return [a for a in self.args if isinstance(a, ArrayArg)]

    @property
    def outputs(self) -> list[ArrayArg]:
        """The arrays the candidate writes (intent out or inout)."""
        return [a for a in self.arrays if a.is_output]

    def compare_rule(self, arg: ArrayArg) -> CompareRule:
        """The effective compare rule of an output: per-arg override merged over the task default."""
        rule = arg.compare or self.compare
        return CompareRule(
            mode=rule.mode,
            rtol=rule.rtol if rule.rtol is not None else (self.compare.rtol or 0.0),
            atol=rule.atol if rule.atol is not None else (self.compare.atol or 0.0),
        )

    def _validate_common(self) -> None:
        names = [a.name for a in self.args]
        if len(set(names)) != len(names):
            raise ValueError(f"duplicate arg names in {names}")
        if not self.outputs:
            raise ValueError("the task has no output array (intent 'out' or 'inout')")
        known = set(self.params)
        for arg in self.args:
            text = arg.value if isinstance(arg, ScalarArg) else arg.size
            unknown = expression_names(text) - known
            if unknown:
                raise ValueError(
                    f"arg {arg.name!r}: expression {text!r} uses unknown params {sorted(unknown)}"
                )
        for size in ("test", "timing"):
            for arg in self.args:
                if isinstance(arg, ScalarArg):
                    self.scalar_value(arg, size)
                else:
                    self.array_length(arg, size)
        if any(isinstance(a.generator, CustomGenerator) for a in self.arrays) and not self.generator_source:
            raise ValueError("an array uses the 'custom' generator but generator_source is empty")


class FunctionTask(_TaskBase):
    """CUDAEval style: the candidate defines ``extern "C" void <entry>(...)`` taking host pointers."""

    kind: Literal["function"]
    kernel: None = None

    @model_validator(mode="after")
    def _validate(self) -> FunctionTask:
        try:
            name, _ = _check_args_against_signature(list(self.args), self.signature, "signature")
            if name != self.entry:
                raise ValueError(f"signature names {name!r} but entry is {self.entry!r}")
            self._validate_common()
        except (TaskFormatError, ExpressionError) as e:
            raise ValueError(str(e)) from e
        return self


class KernelTask(_TaskBase):
    """ParEval style: the candidate is a ``__global__`` kernel launched by the executor."""

    kind: Literal["kernel"]
    kernel: KernelLaunch

    @model_validator(mode="after")
    def _validate(self) -> KernelTask:
        try:
            _check_args_against_signature(list(self.args), self.signature, "signature")
            kname, _ = _check_args_against_signature(
                list(self.args), self.kernel.signature, "kernel signature"
            )
            if kname != self.entry:
                raise ValueError(f"kernel signature names {kname!r} but entry is {self.entry!r}")
            if "__global__" not in self.kernel.signature:
                raise ValueError("kernel signature must be a __global__ function")
            self._validate_common()
            for size in ("test", "timing"):
                self.launch_config(size)
        except (TaskFormatError, ExpressionError) as e:
            raise ValueError(str(e)) from e
        return self

    def launch_config(self, size: Size) -> tuple[tuple[int, int, int], tuple[int, int, int], int]:
        """``(grid, block, shared_bytes)`` at a size, checked against CUDA's launch limits."""
        values = self.size_values(size)

        def dims(exprs: tuple[str, str, str], what: str) -> tuple[int, int, int]:
            out = []
            for e in exprs:
                v = evaluate(e, values)
                if not isinstance(v, int) or v <= 0:
                    raise ExpressionError(f"{what} dimension {e!r} is {v!r}, not a positive int")
                out.append(v)
            return out[0], out[1], out[2]

        grid, block = dims(self.kernel.grid, "grid"), dims(self.kernel.block, "block")
        if block[0] * block[1] * block[2] > 1024:
            raise ExpressionError(f"block {block} has more than 1024 threads")
        if grid[1] > 65535 or grid[2] > 65535 or grid[0] > 2**31 - 1:
            raise ExpressionError(f"grid {grid} exceeds CUDA limits")
        shared = evaluate(self.kernel.shared_bytes, values)
        if not isinstance(shared, int) or shared < 0:
            raise ExpressionError(f"shared_bytes {self.kernel.shared_bytes!r} is {shared!r}")
        return grid, block, shared


Task = Annotated[FunctionTask | KernelTask, Field(discriminator="kind")]


class _TaskEnvelope(BaseModel):
    task: Task


def parse_task(data: Mapping[str, Any]) -> FunctionTask | KernelTask:
    """Validate a task given as a JSON-like mapping, raising :class:`TaskFormatError` with all problems."""
    try:
        return _TaskEnvelope.model_validate({"task": dict(data)}).task
    except ValidationError as e:
        problems = "; ".join(
            f"{'.'.join(str(p) for p in err['loc'][1:]) or '<task>'}: {err['msg']}" for err in e.errors()
        )
        raise TaskFormatError(f"invalid task {data.get('id', '?')!r}: {problems}") from e


_SOURCE_FILES = {
    "reference_source": "reference.cpp",
    "generator_source": "generator.cpp",
    "naive_source": "naive.cu",
}


def load_task(path: Path) -> FunctionTask | KernelTask:
    """Read a task directory (task.json, reference.cpp, optional generator.cpp and naive.cu)."""
    path = Path(path)
    try:
        data = json.loads((path / "task.json").read_text(encoding="utf-8"))
    except FileNotFoundError as e:
        raise TaskFormatError(f"{path}: no task.json") from e
    except json.JSONDecodeError as e:
        raise TaskFormatError(f"{path / 'task.json'}: invalid JSON: {e}") from e
    if not isinstance(data, dict):
        raise TaskFormatError(f"{path / 'task.json'}: expected a JSON object")
    for field, filename in _SOURCE_FILES.items():
        if field in data:
            raise TaskFormatError(f"{path / 'task.json'}: {field!r} belongs in {filename}, not in task.json")
        source = path / filename
        if source.is_file():
            data[field] = source.read_text(encoding="utf-8")
        elif field == "reference_source":
            raise TaskFormatError(f"{path}: no reference.cpp")
    task = parse_task(data)
    if task.id != path.name:
        raise TaskFormatError(f"{path}: task id {task.id!r} differs from the directory name")
    return task


def dump_task(task: FunctionTask | KernelTask, path: Path) -> None:
    """Write a task as a directory that :func:`load_task` reads back to an equal model."""
    path = Path(path)
    path.mkdir(parents=True, exist_ok=True)
    data = task.model_dump(mode="json", exclude=set(_SOURCE_FILES), exclude_defaults=False)
    (path / "task.json").write_text(json.dumps(data, indent=2) + "\n", encoding="utf-8")
    for field, filename in _SOURCE_FILES.items():
        source = getattr(task, field)
        target = path / filename
        if source is not None and (field == "reference_source" or source):
            target.write_text(source, encoding="utf-8")
        elif target.exists():
            target.unlink()
