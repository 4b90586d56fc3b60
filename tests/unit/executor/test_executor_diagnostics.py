"""The parts of the GPU diagnostics (`executor.diagnostics`) that run anywhere: their tables, windows
and the load_inline launcher's source. The GPU parts run on a GPU host (see the package docstring)."""

from __future__ import annotations

from pathlib import Path

from executor.diagnostics.clock_ramp import table
from executor.diagnostics.load_inline import launcher_source
from executor.diagnostics.warmup_trace import WINDOW, windows
from executor.taskformat import load_task

TASKS_DIR = Path(__file__).parent / "fixtures" / "tasks"


def test_clock_table_keeps_the_first_sample_of_every_step_of_each_phase() -> None:
    samples = [
        {"t_ms": -40.0, "phase": "idle", "sm_mhz": 1000},
        {"t_ms": -30.0, "phase": "idle", "sm_mhz": 1005},  # within 20 ms of the last row: dropped
        {"t_ms": 0.0, "phase": "busy", "sm_mhz": 1200},  # a new phase starts its own steps
        {"t_ms": 5.0, "phase": "busy", "sm_mhz": 1300},
        {"t_ms": 20.0, "phase": "busy", "sm_mhz": 1700},
        {"t_ms": 400.0, "phase": "after", "sm_mhz": 1650},
    ]
    assert table(samples, step_ms=20.0).splitlines() == [
        "| phase | t ms | SM MHz |",
        "| --- | --- | --- |",
        "| idle | -40.0 | 1000 |",
        "| busy | 0.0 | 1200 |",
        "| busy | 20.0 | 1700 |",
        "| after | 400.0 | 1650 |",
    ]


def test_trial_windows_are_medians_of_consecutive_windows() -> None:
    assert WINDOW == 25
    times = [1.0] * 24 + [9.0] + [2.0, 4.0, 3.0]  # a full window, then a short last one
    assert windows(times) == [1.0, 3.0]


def test_the_load_inline_launcher_calls_a_function_tasks_entry() -> None:
    definition, declaration = launcher_source(load_task(TASKS_DIR / "saxpy"))
    assert declaration == "void bench_launch(long long n, double a, torch::Tensor x, torch::Tensor y);"
    assert definition == (
        "void bench_launch(long long n, double a, torch::Tensor x, torch::Tensor y) {\n"
        "  saxpy((int)n, (float)a, static_cast<const float*>(x.data_ptr()), "
        "static_cast<float*>(y.data_ptr()));\n}\n"
    )


def test_the_load_inline_launcher_launches_a_kernel_with_the_given_geometry() -> None:
    definition, declaration = launcher_source(load_task(TASKS_DIR / "scale_kernel"))
    grid = (
        "long long gx, long long gy, long long gz, long long bx, long long by, long long bz, long long smem"
    )
    assert (
        declaration
        == f"void bench_launch({grid}, long long count, double s, torch::Tensor in, torch::Tensor out);"
    )
    body = definition.splitlines()[1:]
    assert body == [
        "  scale_kernel<<<dim3(gx, gy, gz), dim3(bx, by, bz), smem>>>((long long)count, (double)s, "
        "static_cast<const double*>(in.data_ptr()), static_cast<double*>(out.data_ptr()));",
        "  cudaError_t err = cudaDeviceSynchronize();",
        "  TORCH_CHECK(err == cudaSuccess, cudaGetErrorString(err));",
        "}",
    ]
