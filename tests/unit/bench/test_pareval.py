"""The ParEval converter on a fixture written for it in ParEval's layout (tests/unit/bench/fixtures)."""

from __future__ import annotations

import ctypes
import json
import shutil
import subprocess
from pathlib import Path

import pytest

from bench.pareval import OUTPUT_NOTE, SIZE, Conversion, ParEvalError, convert_pareval, pareval_selection
from executor.evaluate import Evaluator
from executor.protocol import CandidateSource
from executor.settings import ExecutorSettings
from executor.taskformat import load_task

FIXTURE = Path(__file__).parent / "fixtures" / "pareval_mini"


@pytest.fixture(scope="module")
def converted(tmp_path_factory: pytest.TempPathFactory) -> tuple[Conversion, Path]:
    out = tmp_path_factory.mktemp("pareval-tasks")
    return convert_pareval(FIXTURE, out), out


def test_convertible_problems_become_tasks_and_the_rest_say_why(converted: tuple[Conversion, Path]) -> None:
    conversion, out = converted
    by_name = {p.name: p for p in conversion.problems}
    assert set(by_name) == {"00_mini_scale", "01_mini_total", "02_mini_points"}  # CUDA prompts only
    assert [p.task_id for p in conversion.converted] == ["pe_00_mini_scale", "pe_01_mini_total"]
    refused = by_name["02_mini_points"]
    assert not refused.converted and "'Pt'" in refused.reason and "no regraph.task/v1 dtype" in refused.reason
    written = json.loads((out / "conversion.json").read_text())
    assert [p["converted"] for p in written["problems"]] == [True, True, False]
    # ParEval's validation size is the test size, its benchmark size the timing size.
    assert (by_name["00_mini_scale"].test_size, by_name["00_mini_scale"].benchmark_size) == (512, 1 << 20)
    assert (by_name["01_mini_total"].test_size, by_name["01_mini_total"].benchmark_size) == (300, 1_000_000)


def test_task_fields_follow_the_driver(converted: tuple[Conversion, Path]) -> None:
    _, out = converted
    scale = json.loads((out / "pe_00_mini_scale" / "task.json").read_text())
    assert scale["kind"] == "kernel" and scale["entry"] == "scaleBy"
    assert scale["params"] == {SIZE: {"test": 512, "timing": 1 << 20}}
    assert scale["args"] == [
        {
            "name": "x",
            "kind": "array",
            "dtype": "float64",
            "size": SIZE,
            "intent": "in",
            "generator": {"dist": "uniform", "low": -4.0, "high": 4.0},
        },
        {"name": "factor", "kind": "scalar", "dtype": "float64", "value": "(3.0)"},
        {"name": "y", "kind": "array", "dtype": "float64", "size": SIZE, "intent": "out"},
        {"name": "N", "kind": "scalar", "dtype": "uint64", "value": SIZE},
    ]
    assert scale["kernel"]["block"] == ["256", "1", "1"]
    assert scale["kernel"]["grid"] == [f"({SIZE} + (256) - 1) / (256)", "1", "1"]
    assert scale["kernel"]["docstring"].startswith("/* Multiply every value of x by factor")
    total = json.loads((out / "pe_01_mini_total" / "task.json").read_text())
    x, _, out_sum = total["args"]
    # ParEval's integer fillRand (rand() % (high - low) + low) excludes its upper bound, as our randint.
    assert x["generator"] == {"dist": "randint", "low": -9, "high": 9}
    # The driver zeroes the sum before each run; here it is an output like any other (poisoned), and
    # the kernel is told so.
    assert out_sum == {"name": "sum", "kind": "array", "dtype": "float64", "size": "1", "intent": "out"}
    assert OUTPUT_NOTE in total["kernel"]["docstring"]
    for task_id in ("pe_00_mini_scale", "pe_01_mini_total"):
        load_task(out / task_id)  # the executor accepts it


@pytest.mark.skipif(shutil.which("g++") is None, reason="needs g++")
def test_references_compute_the_serial_baseline(converted: tuple[Conversion, Path], tmp_path: Path) -> None:
    _, out = converted
    libraries = {}
    for task_id in ("pe_00_mini_scale", "pe_01_mini_total"):
        library = tmp_path / f"{task_id}.so"
        subprocess.run(
            ["g++", "-std=c++17", "-O1", "-shared", "-fPIC", "-o", library, out / task_id / "reference.cpp"],
            check=True,
        )
        libraries[task_id] = ctypes.CDLL(str(library))
    x = (ctypes.c_double * 3)(1.0, -2.0, 0.5)
    y = (ctypes.c_double * 3)()
    libraries["pe_00_mini_scale"].scaleBy(x, ctypes.c_double(3.0), y, ctypes.c_ulonglong(3))
    assert list(y) == [3.0, -6.0, 1.5]
    ints = (ctypes.c_int * 4)(4, 5, 6, -9)
    result = (ctypes.c_double * 1)(float("nan"))
    libraries["pe_01_mini_total"].total(ints, ctypes.c_ulonglong(4), result)
    assert result[0] == 6.0


def test_a_converted_task_runs_through_the_executor(
    converted: tuple[Conversion, Path], tmp_path: Path
) -> None:
    # On this machine the executor is compile-only: the candidate is statically checked and compiled
    # and the converted reference runs on the CPU; the verdict says the runtime stages did not run.
    conversion, out = converted
    selection = pareval_selection(out, conversion, ["some_task"])
    assert [t.id for t in selection.tasks] == ["pe_00_mini_scale", "pe_01_mini_total"]
    assert selection.build_ids == ["some_task"] and "no tiers" in selection.description
    kernel = (
        'extern "C" __global__ void scaleBy(const double *x, double factor, double *y, size_t N) {\n'
        "    size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x;\n"
        "    if (i < N) y[i] = factor * x[i];\n}\n"
    )
    evaluator = Evaluator(ExecutorSettings(cache_dir=tmp_path / "cache"))
    try:
        verdict = evaluator.evaluate(selection.tasks[0].task, CandidateSource(source=kernel))
    finally:
        evaluator.close()
    assert verdict.error is not None and verdict.error.value == "runtime_not_available", verdict.message
    assert "compilation passed and the reference ran" in verdict.message


def test_not_a_checkout(tmp_path: Path) -> None:
    with pytest.raises(ParEvalError):
        convert_pareval(tmp_path, tmp_path / "out")
