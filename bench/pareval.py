"""ParEval's CUDA problems as ``regraph.task/v1`` kernel tasks.

`convert_pareval(pareval_dir, out_dir)` reads a ParEval checkout (github.com/parallelcodefoundry/ParEval,
MIT) and writes one kernel task directory per CUDA problem it can convert, plus ``conversion.json``
listing every problem with its outcome (converted, or the reason it was not). Nothing of ParEval is
kept in this repository: the tasks are generated into a directory of the user's choice.

What is read, per problem ``drivers/cpp/benchmarks/<type>/<NN_name>/``:

* the CUDA prompt (``prompts/generation-prompts.json``): the kernel's signature and its docstring,
  which become the task's ``kernel.signature`` and ``kernel.docstring``;
* ``gpu.cu``, the benchmark driver: ``init()`` (problem-size fields, device allocations, launch
  configuration), ``reset()`` (input distributions) and ``compute()`` (the launch: which field goes to
  which kernel parameter), and ``validate()``'s ``TEST_SIZE`` (ParEval's validation size);
* ``baseline.hpp``: the serial ``correct...`` function, wrapped into an ``extern "C"`` reference
  whose parameters are the kernel's (host pointers), via ``best()``'s call;
* ``drivers/problem-sizes.json``: ParEval's benchmark size (``cuda``).

The task's problem-size parameter (``N``, or whatever field ``init()`` sets to ``DRIVER_PROBLEM_SIZE``)
is ParEval's validation size at ``test`` and its benchmark size at ``timing``. Flaws of ParEval's own
harness that the conversion does **not** inherit, because our executor runs the tasks:

* ParEval's drivers call ``rand()`` without seeding it, so every validation draws the same inputs;
  the executor draws fresh seeds for every evaluation.
* ParEval validates only at the small size; the executor also checks at the timing (benchmark) size.
* ParEval initialises outputs to zero (``cudaMemset``/a zero copied in), so a kernel that writes
  nothing passes wherever the answer is 0, and a reduction may rely on a zeroed accumulator; here
  outputs are poisoned before every run and every element must be written. The docstring says so.

A problem is not converted, with the reason recorded, when its kernel takes a type that has no
``regraph.task/v1`` dtype (structs such as ``Point``/``COOElement``/``Book``/``Result``,
``cuDoubleComplex``, ``bool``, arrays of strings), or when its driver does not follow the regular pattern the
converter reads (a launch, allocation or input it cannot map). Those reasons are per problem in
``conversion.json``; ``docs/benchmark.md`` summarises them.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel

from bench.metrics import BenchError
from executor.errors import TaskFormatError
from executor.taskformat import KernelTask, parse_task

CONVERSION_FORMAT = "regraph.pareval-conversion/v1"
OUTPUT_NOTE = (
    "Outputs are not initialised before the launch (they hold garbage): the kernel must write every "
    "output element itself, including any accumulator it reduces into."
)

# Kernel parameter types with a regraph.task/v1 dtype: C type -> (dtype, C type in the reference).
_SCALARS = {
    "double": ("float64", "double"),
    "float": ("float32", "float"),
    "int": ("int32", "int"),
    "size_t": ("uint64", "unsigned long long"),
    "char": ("int8", "signed char"),
}
_FLOAT = {"float64", "float32"}
# Problems whose ParEval definition cannot be checked as it stands, with the reason (found by running
# correct kernels against the converted tasks, `bench.pareval_check`).
REFUSED = {
    "26_reduce_product_of_inverses": (
        "at ParEval's benchmark size the product under- or overflows (its logarithm is a random walk "
        "with a standard deviation of about sqrt(N)): the serial answer is 0 or inf, set by where the "
        "running product first leaves the double range, which no parallel order reproduces"
    ),
    "34_scan_largest_contiguous_subarray_sum": (
        "ParEval's serial baseline never resets its running sum for a new start index, so it does not "
        "compute the largest subarray sum (and overflows int at the benchmark size)"
    ),
}
SIZE = "PROBLEM_SIZE"
"""The task's one size parameter: ParEval's DRIVER_PROBLEM_SIZE (test: its validation size)."""


class ParEvalError(BenchError):
    """The checkout cannot be read at all (missing prompts, sizes or benchmarks)."""


class Unconvertible(Exception):
    """This one problem cannot be converted; the message says why (internal to the converter)."""


class ProblemOutcome(BaseModel):
    """One ParEval CUDA problem: converted (with its task id) or not (with the reason)."""

    name: str
    problem_type: str
    converted: bool
    task_id: str | None = None
    reason: str = ""
    test_size: int | None = None
    benchmark_size: int | None = None


class Conversion(BaseModel):
    """``conversion.json``."""

    format: Literal["regraph.pareval-conversion/v1"] = "regraph.pareval-conversion/v1"
    source: str
    problems: list[ProblemOutcome]

    @property
    def converted(self) -> list[ProblemOutcome]:
        """The problems that became tasks."""
        return [p for p in self.problems if p.converted]


@dataclass
class _Param:
    name: str
    ctype: str
    pointer: bool
    const: bool
    fixed_length: int | None = None  # `size_t bins[26]`


@dataclass
class _Driver:
    fields: dict[str, str] = field(default_factory=dict)  # ctx field -> expression (init)
    allocations: dict[str, str] = field(default_factory=dict)  # device field -> element count expression
    copies: dict[str, str] = field(default_factory=dict)  # device field <- host field (reset)
    zeroed: set[str] = field(default_factory=set)  # device fields set to zero in reset
    fills: dict[str, tuple[str, str]] = field(default_factory=dict)  # host field -> (low, high)
    drawn_by: dict[str, str] = field(default_factory=dict)  # host field -> other function filling it in reset
    host_types: dict[str, str] = field(default_factory=dict)  # host vector field -> element type
    launch: list[str] = field(default_factory=list)  # compute(): one expression per kernel parameter
    grid: str = ""
    block: str = ""
    best: str = ""  # best()'s body


def _strip_comments(code: str) -> str:
    return re.sub(r"//[^\n]*|/\*.*?\*/", " ", code, flags=re.DOTALL)


def _function_body(code: str, signature_re: str) -> str:
    match = re.search(signature_re, code)
    if match is None:
        raise Unconvertible(f"the driver has no {signature_re!r}")
    start = code.index("{", match.end() - 1)
    depth = 0
    for k in range(start, len(code)):
        depth += {"{": 1, "}": -1}.get(code[k], 0)
        if depth == 0:
            return code[start + 1 : k]
    raise Unconvertible("unbalanced braces in the driver")


def _int_expr(text: str) -> int:
    """ParEval's size expressions, such as ``(1<<20)`` or ``1024*1024``: integers, << * + - ( ) only."""
    cleaned = text.strip()
    if not re.fullmatch(r"[\d\s()<>*+\-]+", cleaned):
        raise Unconvertible(f"size expression {text!r} is not a plain integer expression")
    tokens = re.findall(r"\d+|<<|[()*+\-]", cleaned)
    # A tiny recursive-descent evaluator (no eval): sum of products of shifts of atoms.
    pos = 0

    def atom() -> int:
        nonlocal pos
        piece = tokens[pos]
        pos += 1
        if piece == "(":
            value = expr()
            pos += 1  # ")"
            return value
        return int(piece)

    def shift() -> int:
        nonlocal pos
        value = atom()
        while pos < len(tokens) and tokens[pos] == "<<":
            pos += 1
            value <<= atom()
        return value

    def product() -> int:
        nonlocal pos
        value = shift()
        while pos < len(tokens) and tokens[pos] == "*":
            pos += 1
            value *= shift()
        return value

    def expr() -> int:
        nonlocal pos
        value = product()
        while pos < len(tokens) and tokens[pos] in "+-":
            op = tokens[pos]
            pos += 1
            value = value + product() if op == "+" else value - product()
        return value

    return expr()


def parse_kernel_signature(prompt: str) -> tuple[str, list[_Param], str, str]:
    """(kernel name, parameters, full signature, docstring) from a ParEval CUDA prompt."""
    match = re.search(r"__global__\s+void\s+(\w+)\s*\(([^)]*)\)", prompt)
    if match is None:
        raise Unconvertible("the prompt has no __global__ kernel signature")
    name, params_text = match.group(1), match.group(2)
    params = []
    for raw in (p.strip() for p in params_text.split(",") if p.strip()):
        m = re.fullmatch(r"(const\s+)?([A-Za-z_][\w\s]*?)\s*(\*?)\s*\b(\w+)\s*(?:\[(\d+)\])?", raw)
        if m is None or "*" in raw.replace("*", "", 1):
            raise Unconvertible(f"kernel parameter {raw!r} is not a plain scalar or pointer")
        const, ctype, star, pname, length = m.groups()
        ctype = " ".join(ctype.split())
        if ctype not in _SCALARS:
            raise Unconvertible(f"kernel parameter {raw!r}: type {ctype!r} has no regraph.task/v1 dtype")
        params.append(
            _Param(pname, ctype, bool(star) or bool(length), bool(const), int(length) if length else None)
        )
    docstring = prompt[: match.start()].strip()
    return name, params, match.group(0), docstring


def _ctx(expr: str) -> str:
    return re.sub(r"ctx->", "", expr).strip()


def parse_driver(source: str) -> _Driver:
    """The parts of ParEval's CUDA benchmark driver that define the task."""
    code = _strip_comments(source)
    driver = _Driver()
    context = _function_body(code, r"struct\s+Context\s*\{") if "struct Context" in code else ""
    for element, names in re.findall(r"std::vector<\s*([\w ]+?)\s*>\s*([^;]+);", context):
        for host in names.split(","):
            driver.host_types[host.strip()] = element.strip()
    for element, length, names in re.findall(r"std::array<\s*([\w ]+?)\s*,\s*(\d+)\s*>\s*([^;]+);", context):
        for host in names.split(","):
            driver.host_types[host.strip()] = f"{element.strip()}[{length}]"
    init = _function_body(code, r"Context\s*\*\s*init\s*\(\s*\)\s*\{")
    for name, value in re.findall(r"ctx->(\w+)\s*=\s*([^;]+);", init):
        driver.fields[name] = value.strip()
    for name, size in re.findall(r"ALLOC\(\s*ctx->(\w+)\s*,\s*([^;]+?)\s*\)\s*;", init):
        count = re.sub(r"\s*\*?\s*sizeof\([^)]*\)\s*\*?\s*", " ", size).strip() or "1"
        driver.allocations[name] = _ctx(count)
    reset = _function_body(code, r"void\s+reset\s*\(\s*Context\s*\*\s*ctx\s*\)\s*\{")
    for device, host in re.findall(r"COPY_H2D\(\s*ctx->(\w+)\s*,\s*ctx->(\w+)\.data\(\)", reset):
        driver.copies[device] = host
    for device in re.findall(r"COPY_H2D\(\s*ctx->(\w+)\s*,\s*&\w+\s*,", reset):
        driver.zeroed.add(device)
    for device in re.findall(r"cudaMemset\(\s*ctx->(\w+)\s*,\s*0\s*,", reset):
        driver.zeroed.add(device)
    for host, low, high in re.findall(r"fillRand\(\s*ctx->(\w+)\s*,\s*([^,]+?)\s*,\s*([^)]+?)\s*\)", reset):
        driver.fills[host] = (low, high)
    for function, host in re.findall(r"\b(\w+)\s*\(\s*ctx->(\w+)\s*[,)]", reset):
        if function not in ("fillRand", "COPY_H2D", "cudaMemset", "ALLOC", "FREE"):
            driver.drawn_by.setdefault(host, function)
    compute = _ctx(_function_body(code, r"void\s+NO_OPTIMIZE\s+compute\s*\(\s*Context\s*\*\s*ctx\s*\)\s*\{"))
    launch = re.search(r"\w+\s*<<<\s*([^,>]+)\s*,\s*([^>]+?)\s*>>>\s*\(([^;]*)\)\s*;", compute)
    if launch is None:
        raise Unconvertible("compute() has no single kernel launch")
    driver.grid, driver.block = _ctx(launch.group(1)), _ctx(launch.group(2))
    driver.launch = [_ctx(a) for a in launch.group(3).split(",")]
    driver.best = _function_body(code, r"void\s+NO_OPTIMIZE\s+best\s*\(\s*Context\s*\*\s*ctx\s*\)\s*\{")
    return driver


def _validation_size(source: str) -> int:
    code = _strip_comments(source)
    validate = _function_body(code, r"bool\s+validate\s*\(\s*Context\s*\*\s*ctx\s*\)\s*\{")
    match = (
        re.search(r"TEST_SIZE\s*=\s*([^;]+);", validate)
        or re.search(r"size_t\s+\w+\s*=\s*(\d+)\s*;", validate)
        or re.search(r"std::vector<[^>]+>\s*\w+\s*\(\s*(\d+)\s*\)", validate)
    )
    if match is None:
        raise Unconvertible("validate() states no validation size")
    return _int_expr(match.group(1))


def _dim(expr: str, driver: _Driver) -> list[str]:
    """A dim3 field (``dim3(a, b)``) as our three launch expressions."""
    text = driver.fields.get(expr, expr)
    match = re.fullmatch(r"dim3\((.*)\)", text.strip(), flags=re.DOTALL)
    if match is None:
        raise Unconvertible(f"launch configuration {expr!r} = {text!r} is not a dim3(...)")
    parts = [p.strip() for p in match.group(1).split(",")]
    parts += ["1"] * (3 - len(parts))
    return [_expression(p, driver) for p in parts]


def _expression(expr: str, driver: _Driver, depth: int = 0) -> str:
    """A driver expression as one over the task's params (fields inlined, dim3 members resolved)."""
    if depth > 8:
        raise Unconvertible(f"expression {expr!r} refers to itself")

    def member(m: re.Match[str]) -> str:
        dims = _dim(m.group(1), driver)
        return f"({dims['xyz'.index(m.group(2))]})"

    text = re.sub(r"ctx->", "", expr)
    text = re.sub(r"\b(\w+)\.([xyz])\b", member, text)
    text = text.replace("DRIVER_PROBLEM_SIZE", SIZE)
    text = re.sub(r"\((?:size_t|int|long|unsigned)\)", "", text)

    def field_ref(m: re.Match[str]) -> str:
        name = m.group(0)
        if name not in driver.fields:
            return name
        if driver.fields[name].strip() == "DRIVER_PROBLEM_SIZE":
            return SIZE
        return f"({_expression(driver.fields[name], driver, depth + 1)})"

    text = re.sub(r"\b[A-Za-z_]\w*\b", field_ref, text)
    if not re.fullmatch(r"[\w\s()+\-*/%.]+", text):
        raise Unconvertible(f"expression {expr!r} is not arithmetic over the problem size")
    unknown = sorted(set(re.findall(r"\b[A-Za-z_]\w*\b", text)) - {SIZE, "min", "max"})
    if depth == 0 and unknown:
        raise Unconvertible(f"{expr!r} depends on {', '.join(unknown)}, which init() does not set to a size")
    return " ".join(text.split())


@dataclass
class _Arg:
    param: _Param
    kind: Literal["scalar", "array"]
    dtype: str
    field: str  # the driver field passed to this parameter
    size: str = ""
    intent: str = ""
    generator: dict[str, Any] | None = None
    value: str = ""


def _task_args(params: list[_Param], driver: _Driver) -> list[_Arg]:
    if len(driver.launch) != len(params):
        raise Unconvertible(
            f"compute() passes {len(driver.launch)} arguments to a {len(params)}-parameter kernel"
        )
    if not any(v.strip() == "DRIVER_PROBLEM_SIZE" for v in driver.fields.values()):
        raise Unconvertible("init() sets no field to DRIVER_PROBLEM_SIZE")
    args = []
    for param, passed in zip(params, driver.launch, strict=True):
        dtype = _SCALARS[param.ctype][0]
        if not param.pointer:
            value = _expression(passed, driver)
            args.append(_Arg(param, "scalar", dtype, passed, value=value))
            continue
        if not re.fullmatch(r"\w+", passed) or passed not in driver.allocations:
            raise Unconvertible(
                f"kernel parameter {param.name!r} gets {passed!r}, not an allocated device array"
            )
        size = (
            str(param.fixed_length) if param.fixed_length else _expression(driver.allocations[passed], driver)
        )
        host = driver.copies.get(passed)
        if host is not None and host in driver.drawn_by and host not in driver.fills:
            raise Unconvertible(
                f"input {param.name!r} is drawn by {driver.drawn_by[host]}(), which the converter does not "
                "translate into a generator"
            )
        if host is not None and host not in driver.fills and not param.const:
            host = None  # copied in from a vector the driver never fills: ParEval's zeroed output
        if host is not None:
            if host not in driver.fills:
                raise Unconvertible(f"input {param.name!r} is not drawn by fillRand")
            low, high = driver.fills[host]
            generator = _generator(dtype, low, high)
            intent = "in" if param.const else "inout"
        else:
            if param.const:
                raise Unconvertible(f"read-only array {param.name!r} is never filled")
            generator, intent = None, "out"
        args.append(_Arg(param, "array", dtype, passed, size=size, intent=intent, generator=generator))
    return args


def _generator(dtype: str, low: str, high: str) -> dict[str, Any]:
    try:
        lo, hi = float(low), float(high)
    except ValueError as e:
        raise Unconvertible(f"input range ({low}, {high}) is not numeric") from e
    if dtype in _FLOAT:
        return {"dist": "uniform", "low": lo, "high": hi}
    # ParEval's integer fillRand draws `rand() % (high - low) + low`: [low, high), as our randint.
    if int(hi) <= int(lo):
        raise Unconvertible(f"integer input range [{low}, {high}) is empty")
    return {"dist": "randint", "low": int(lo), "high": int(hi)}


def _reference(
    entry: str, baseline: str, args: list[_Arg], driver: _Driver, preamble: str
) -> tuple[str, str]:
    """(signature, reference.cpp): ParEval's serial function behind an ``extern "C"`` wrapper."""
    by_field = {a.field: a for a in args}
    host_of = {host: device for device, host in driver.copies.items()}
    call = re.search(
        r"(?:(\w[\w:<> ]*?)\s+(\w+)\s*=\s*)?(correct\w+)\s*\(([^;]*)\)\s*;", _strip_comments(driver.best)
    )
    if call is None:
        raise Unconvertible("best() does not call a correct...() function")
    _, result_var, function, call_args = call.groups()
    signature_params = []
    for a in args:
        ctype = _SCALARS[a.param.ctype][1]
        signature_params.append(
            f"{ctype} {a.param.name}"
            if a.kind == "scalar"
            else f"{'const ' if a.intent == 'in' else ''}{ctype}* {a.param.name}"
        )
    signature = f"void {entry}({', '.join(signature_params)})"
    lines: list[str] = []
    passed = []
    outputs = [a for a in args if a.kind == "array" and a.intent != "in"]
    written: set[str] = set()
    for raw in (c.strip() for c in call_args.split(",") if c.strip()):
        name = _ctx(raw)
        if name in by_field and by_field[name].kind == "scalar":
            passed.append(by_field[name].param.name)
            continue
        device = host_of.get(name)
        if device is None:
            # An output vector the driver never copies: the output array whose field matches by name.
            candidates = [a for a in outputs if a.field not in driver.copies and _same_stem(a.field, name)]
            if len(candidates) != 1:
                raise Unconvertible(
                    f"best() passes {raw!r}, which the converter cannot map to a kernel parameter"
                )
            device = candidates[0].field
        arg = by_field.get(device)
        if arg is None:
            raise Unconvertible(f"best() passes {raw!r}, which is not a kernel argument")
        element = driver.host_types.get(name)
        if element is None:
            raise Unconvertible(f"host vector {name!r} has no declared element type")
        local = f"v_{arg.param.name}"
        size = _c_size(arg.size, args)
        fixed = re.fullmatch(r"(.+)\[(\d+)\]", element)
        if fixed is not None:
            lines.append(f"    std::array<{fixed.group(1)}, {fixed.group(2)}> {local}{{}};")
            if arg.intent != "out":
                lines.append(f"    std::copy_n({arg.param.name}, {fixed.group(2)}, {local}.begin());")
        elif arg.intent == "out":
            lines.append(f"    std::vector<{element}> {local}({size});")
        else:
            lines.append(f"    std::vector<{element}> {local}({arg.param.name}, {arg.param.name} + {size});")
        passed.append(local)
        if arg.intent != "in":
            written.add(arg.param.name)
    result_line = f"{function}({', '.join(passed)});"
    scalar_out = [a for a in outputs if a.param.name not in written]
    if result_var:
        if len(scalar_out) != 1:
            raise Unconvertible(
                f"{function} returns a value but the kernel has {len(scalar_out)} unwritten outputs"
            )
        target = scalar_out[0]
        lines.append(
            f"    {target.param.name}[0] = static_cast<{_SCALARS[target.param.ctype][1]}>({result_line[:-1]});"
        )
        written.add(target.param.name)
    else:
        lines.append(f"    {result_line}")
    missing = [a.param.name for a in outputs if a.param.name not in written]
    if missing:
        raise Unconvertible(f"best() does not produce the output(s) {', '.join(missing)}")
    for a in outputs:
        if f"v_{a.param.name}" in "\n".join(lines):
            lines.append(f"    std::copy(v_{a.param.name}.begin(), v_{a.param.name}.end(), {a.param.name});")
    prelude = (
        "// Generated from ParEval's serial baseline (MIT License, github.com/parallelcodefoundry/ParEval).\n"
        "#include <algorithm>\n#include <array>\n#include <cmath>\n#include <complex>\n#include <cstddef>\n#include <cstdint>\n"
        "#include <limits>\n#include <numeric>\n#include <string>\n#include <vector>\n"
        "#define NO_INLINE\n"
    )
    body = re.sub(r"^\s*#pragma once\s*$", "", baseline, flags=re.MULTILINE)
    # std::sort leaves the order of equal keys unspecified, and an answer that depends on it (ranks of
    # equal values) would differ between standard libraries: equal keys keep their index order.
    body = re.sub(r"\bstd::sort\s*\(", "std::stable_sort(", body)
    # Helpers the prompt defines before the docstring (a __device__ function, a __constant__ table)
    # are used by the serial baseline too; on the host they are plain C++.
    helpers = re.sub(r"\b__(?:device|host|constant)__\s+", "", preamble)
    body = helpers + "\n" + body
    wrapper = f'\nextern "C" {signature} {{\n' + "\n".join(lines) + "\n}\n"
    return signature, prelude + body + wrapper


def _same_stem(device: str, host: str) -> bool:
    strip = re.compile(r"^(d_|h_|cpu|gpu|device|host)", re.IGNORECASE)
    return strip.sub("", device).lower() == strip.sub("", host).lower()


def _c_size(size: str, args: list[_Arg]) -> str:
    """A size expression over the problem size as C over the reference's own parameters."""
    carriers = [a.param.name for a in args if a.kind == "scalar" and a.value == SIZE]
    if SIZE in size and not carriers:
        raise Unconvertible(
            "no kernel parameter carries the problem size, so the reference cannot size its arrays"
        )
    text = re.sub(rf"\b{SIZE}\b", carriers[0], size) if carriers else size
    return f"(size_t)({text})"


def task_id_for(name: str) -> str:
    """Our task id of a ParEval problem: ``pe_`` and its name, lower case, [a-z0-9_] only."""
    return "pe_" + re.sub(r"[^a-z0-9_]", "_", name.lower())


def convert_problem(
    name: str, problem_type: str, prompt: str, driver_source: str, baseline: str, benchmark_size: int
) -> tuple[dict[str, Any], str]:
    """(task.json content, reference.cpp) of one problem; raises `Unconvertible` with the reason."""
    kernel, params, kernel_signature, docstring = parse_kernel_signature(prompt)
    driver = parse_driver(driver_source)
    test_size = _validation_size(driver_source)
    args = _task_args(params, driver)
    task_id = task_id_for(name)
    comment = docstring.find("/*")
    preamble = docstring[:comment].strip() if comment > 0 else ""
    signature, reference = _reference(kernel, baseline, args, driver, preamble)
    note = OUTPUT_NOTE
    if preamble:
        note += " Define the helpers shown above in your source too: nothing else provides them."
    task_args = []
    for a in args:
        entry: dict[str, Any] = {"name": a.param.name, "kind": a.kind, "dtype": a.dtype}
        if a.kind == "scalar":
            entry["value"] = a.value
        else:
            entry.update({"size": a.size, "intent": a.intent})
            if a.generator is not None:
                entry["generator"] = a.generator
        task_args.append(entry)
    floats = any(a.dtype in _FLOAT for a in args if a.kind == "array" and a.intent != "in")
    task = {
        "format": "regraph.task/v1",
        "kind": "kernel",
        "id": task_id,
        "domain": f"pareval_{problem_type}",
        "description": f"ParEval {name} (CUDA)",
        "entry": kernel,
        "signature": signature,
        "params": {SIZE: {"test": test_size, "timing": benchmark_size}},
        "args": task_args,
        "compare": {"rtol": 1e-6, "atol": 1e-6} if floats else {"rtol": 0.0, "atol": 0.0},
        "kernel": {
            # `size_t bins[26]` is `size_t* bins` to C; the executor reads the pointer form.
            "signature": re.sub(r"(\w+)\s*\[\d+\]", r"*\1", kernel_signature),
            "docstring": f"{docstring}\n\n{note}",
            "block": _dim(driver.block, driver),
            "grid": _dim(driver.grid, driver),
            "shared_bytes": "0",
        },
    }
    return task, reference


def _benchmarks(pareval_dir: Path) -> dict[str, tuple[str, Path]]:
    root = pareval_dir / "drivers" / "cpp" / "benchmarks"
    if not root.is_dir():
        raise ParEvalError(f"{pareval_dir} is not a ParEval checkout: no {root}")
    return {d.name: (d.parent.name, d) for d in sorted(root.glob("*/*")) if d.is_dir()}


def convert_pareval(pareval_dir: Path, out_dir: Path) -> Conversion:
    """Convert every CUDA problem of a ParEval checkout into `out_dir`; write ``conversion.json``."""
    try:
        prompts = json.loads(
            (pareval_dir / "prompts" / "generation-prompts.json").read_text(encoding="utf-8")
        )
        sizes = json.loads((pareval_dir / "drivers" / "problem-sizes.json").read_text(encoding="utf-8"))
    except (OSError, ValueError) as e:
        raise ParEvalError(f"{pareval_dir} is not a readable ParEval checkout: {e}") from e
    benchmarks = _benchmarks(pareval_dir)
    cuda = sorted((p for p in prompts if p.get("parallelism_model") == "cuda"), key=lambda p: p["name"])
    if not cuda:
        raise ParEvalError("the checkout's prompts hold no CUDA problem")
    out_dir.mkdir(parents=True, exist_ok=True)
    outcomes = []
    for prompt in cuda:
        name, problem_type = prompt["name"], prompt.get("problem_type", "")
        outcome = ProblemOutcome(name=name, problem_type=problem_type, converted=False)
        try:
            if name in REFUSED:
                raise Unconvertible(REFUSED[name])
            if name not in benchmarks:
                raise Unconvertible("no driver directory for this problem")
            directory = benchmarks[name][1]
            size_text = (sizes.get(name) or {}).get("cuda")
            if size_text is None:
                raise Unconvertible("no CUDA benchmark size in problem-sizes.json")
            benchmark_size = _int_expr(str(size_text))
            try:
                driver_source = (directory / "gpu.cu").read_text(encoding="utf-8")
                baseline = (directory / "baseline.hpp").read_text(encoding="utf-8")
            except OSError as e:
                raise Unconvertible(f"driver files missing: {e}") from e
            task, reference = convert_problem(
                name, problem_type, prompt["prompt"], driver_source, baseline, benchmark_size
            )
            try:
                parse_task({**task, "reference_source": reference})
            except TaskFormatError as e:
                raise Unconvertible(f"the executor refuses the converted task: {e}") from e
        except Unconvertible as e:
            outcome.reason = str(e)
        else:
            task_dir = out_dir / task["id"]
            task_dir.mkdir(parents=True, exist_ok=True)
            (task_dir / "task.json").write_text(json.dumps(task, indent=2) + "\n", encoding="utf-8")
            (task_dir / "reference.cpp").write_text(reference, encoding="utf-8")
            outcome.converted, outcome.task_id = True, task["id"]
            outcome.test_size = task["params"][SIZE]["test"]
            outcome.benchmark_size = task["params"][SIZE]["timing"]
        outcomes.append(outcome)
    conversion = Conversion(source=str(pareval_dir), problems=outcomes)
    (out_dir / "conversion.json").write_text(conversion.model_dump_json(indent=1) + "\n", encoding="utf-8")
    return conversion


def converted_tasks(tasks_dir: Path, conversion: Conversion) -> list[KernelTask]:
    """The converted problems' tasks, loaded from `tasks_dir` (the directory `convert_pareval` wrote)."""
    from executor.errors import ExecutorError
    from executor.taskformat import load_task

    tasks = []
    for problem in conversion.converted:
        assert problem.task_id is not None
        try:
            task = load_task(tasks_dir / problem.task_id)
        except ExecutorError as e:
            raise ParEvalError(f"converted task {problem.task_id} does not load: {e}") from e
        if not isinstance(task, KernelTask):
            raise ParEvalError(f"converted task {task.id} is not a kernel task")
        tasks.append(task)
    return tasks


def pareval_selection(tasks_dir: Path, conversion: Conversion, build_ids: list[str]) -> Any:
    """The converted tasks as a runner selection (ParEval has no tiers: every task counts as medium)."""
    from bench.runner import BenchTaskEntry, TaskSelection
    from search.policy import TaskContext

    entries = []
    for task in converted_tasks(tasks_dir, conversion):
        entries.append(
            BenchTaskEntry(
                id=task.id,
                tier="medium",
                domain=task.domain,
                task=task,
                context=TaskContext.from_task_json(task.model_dump(mode="json")),
                trajectories=[],
            )
        )
    description = (
        f"ParEval CUDA problems converted from {conversion.source} ({len(entries)} of "
        f"{len(conversion.problems)}; no tiers, all counted as medium: read the overall row)"
    )
    return TaskSelection(entries, description, None, build_ids)
