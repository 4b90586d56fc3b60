"""The ParEval kernel check (bench/pareval_check.py) end to end on the ParEval-shaped fixture, through the
real executor service in compile-only mode on loopback, and the converter's rules that the check's first
run on the real suite led to."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from bench.metrics import BenchError
from bench.pareval import REFUSED, Unconvertible, convert_pareval, convert_problem
from bench.pareval_check import check_kernels, empty_kernel, render_markdown, write_report
from executor.client import ExecutorClient
from executor.protocol import EvaluationOptions
from executor.taskformat import KernelTask, load_task
from tests.support.servers import compile_only_executor

FIXTURE = Path(__file__).parent / "fixtures" / "pareval_mini"
SCALE = (
    'extern "C" __global__ void scaleBy(const double *x, double factor, double *y, size_t N) {\n'
    "    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < N; i += (size_t)gridDim.x * blockDim.x)\n"
    "        y[i] = factor * x[i];\n}\n"
)


def test_check_sends_every_kernel_and_an_empty_one(tmp_path: Path) -> None:
    conversion = convert_pareval(FIXTURE, tmp_path / "tasks")
    kernels = tmp_path / "kernels"
    kernels.mkdir()
    (kernels / "pe_00_mini_scale.cu").write_text(SCALE)  # pe_01_mini_total has none: reported missing
    with compile_only_executor(tmp_path / "cache") as url, ExecutorClient(url, timeout_s=300) as client:
        report = check_kernels(tmp_path / "tasks", conversion, kernels, client, url, "the command")
    write_report(report, tmp_path)
    assert not report.runtime_checks and "runtime none" in report.device
    rows = {r.task_id: r for r in report.rows}
    assert list(rows) == ["pe_00_mini_scale", "pe_01_mini_total"]
    # Without a GPU the kernel and the empty kernel both stop after compilation and the reference run.
    scale = rows["pe_00_mini_scale"]
    assert (scale.kernel, scale.kernel_error, scale.empty, scale.empty_error) == (
        "compiled",
        "runtime_not_available",
        "compiled",
        "runtime_not_available",
    ), (scale.kernel_message, scale.empty_message)
    assert "compilation passed and the reference ran" in scale.empty_message
    total = rows["pe_01_mini_total"]
    assert total.kernel == "missing" and total.empty == "compiled"
    written = json.loads((tmp_path / "check.json").read_text())
    assert written["format"] == "regraph.pareval-check/v1" and written["command"] == "the command"
    assert [r["kernel"] for r in written["rows"]] == ["compiled", "missing"]
    assert written["summary"].startswith("compile-only executor: 1 of 2 kernels and 2 of 2 empty kernels")
    table = (tmp_path / "check.md").read_text()
    assert "| `pe_00_mini_scale` | compiled | 0 | - | compiled |" in table
    assert f"**{report.summary()}**" in table and table == render_markdown(report)


def test_empty_kernel_has_the_signature_and_writes_nothing(tmp_path: Path) -> None:
    convert_pareval(FIXTURE, tmp_path)
    task = load_task(tmp_path / "pe_01_mini_total")
    assert isinstance(task, KernelTask)
    assert empty_kernel(task) == 'extern "C" __global__ void total(const int *x, size_t N, double *sum) {}\n'


def test_the_benchmark_size_must_be_checked(tmp_path: Path) -> None:
    conversion = convert_pareval(FIXTURE, tmp_path / "tasks")
    with (
        ExecutorClient("http://127.0.0.1:9") as client,
        pytest.raises(BenchError, match="timing_size_checks"),
    ):
        check_kernels(
            tmp_path / "tasks",
            conversion,
            tmp_path,
            client,
            "x",
            "c",
            EvaluationOptions(timing_size_checks=0),
        )


def _mini(name: str) -> tuple[str, str, str]:
    directory = FIXTURE / "drivers" / "cpp" / "benchmarks" / "mini" / name
    prompts = json.loads((FIXTURE / "prompts" / "generation-prompts.json").read_text())
    prompt = next(p["prompt"] for p in prompts if p["name"] == name and p["parallelism_model"] == "cuda")
    return prompt, (directory / "gpu.cu").read_text(), (directory / "baseline.hpp").read_text()


def test_an_input_drawn_by_the_drivers_own_function_is_refused() -> None:
    # ParEval's 44 fills its in-place input with its own function; it was taken for a zeroed output.
    prompt, driver, baseline = _mini("01_mini_total")
    own = driver.replace("fillRand(ctx->h_x, -9, 9);", "fillWithZeroes(ctx->h_x);")
    with pytest.raises(Unconvertible, match=r"drawn by fillWithZeroes\(\)"):
        convert_problem("01_mini_total", "mini", prompt, own, baseline, 1000)


def test_integer_ranges_exclude_the_upper_bound_and_sort_is_stable() -> None:
    prompt, driver, baseline = _mini("01_mini_total")
    task, reference = convert_problem(
        "01_mini_total",
        "mini",
        prompt,
        driver,
        baseline.replace("double s", "std::sort(x.begin(), x.end());\ndouble s"),
        1000,
    )
    # ParEval's integer fillRand is rand() % (high - low) + low.
    assert task["args"][0]["generator"] == {"dist": "randint", "low": -9, "high": 9}
    assert "std::stable_sort(x.begin(), x.end());" in reference and "std::sort(" not in reference
    empty = driver.replace("fillRand(ctx->h_x, -9, 9);", "fillRand(ctx->h_x, 3, 3);")
    with pytest.raises(Unconvertible, match="is empty"):
        convert_problem("01_mini_total", "mini", prompt, empty, baseline, 1000)


def test_problems_with_a_broken_definition_are_refused_by_name() -> None:
    assert set(REFUSED) == {"26_reduce_product_of_inverses", "34_scan_largest_contiguous_subarray_sum"}
