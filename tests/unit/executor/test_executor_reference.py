from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from executor.errors import ReferenceBuildError, ReferenceRunError
from executor.inputs import INT_POISON, generate_inputs
from executor.reference import build_reference, run_reference, time_reference
from executor.taskformat import FunctionTask, KernelTask, load_task, parse_task

TASKS_DIR = Path(__file__).parent / "fixtures" / "tasks"


def test_saxpy_reference_matches_numpy(saxpy: FunctionTask | KernelTask, build_cache: Path) -> None:
    run = run_reference(saxpy, "test", seed=11, cache_dir=build_cache)
    x, y0 = run.inputs["x"], run.inputs["y"]
    assert x.shape == (1000,) and x.dtype == np.float32
    np.testing.assert_allclose(run.outputs["y"], np.float32(2.5) * x + y0, rtol=1e-6)
    # the inputs handed back are the ones before the call (inout not overwritten)
    assert not np.array_equal(run.outputs["y"], y0)


def test_kernel_task_reference_and_normal_inputs(
    scale_kernel: FunctionTask | KernelTask, build_cache: Path
) -> None:
    run = run_reference(scale_kernel, "test", seed=3, cache_dir=build_cache)
    np.testing.assert_array_equal(run.outputs["out"], -0.75 * run.inputs["in"])
    assert 2.0 < float(np.std(run.inputs["in"])) < 4.0


def test_seeds_give_fresh_and_reproducible_inputs(
    saxpy: FunctionTask | KernelTask, build_cache: Path
) -> None:
    a = run_reference(saxpy, "test", seed=1, cache_dir=build_cache)
    b = run_reference(saxpy, "test", seed=1, cache_dir=build_cache)
    c = run_reference(saxpy, "test", seed=2, cache_dir=build_cache)
    np.testing.assert_array_equal(a.inputs["x"], b.inputs["x"])
    assert not np.array_equal(a.inputs["x"], c.inputs["x"])
    assert not np.array_equal(a.inputs["x"], a.inputs["y"])  # per-arg streams differ


def test_custom_generator_builds_a_consistent_csr(build_cache: Path) -> None:
    task = load_task(TASKS_DIR / "row_sums_csr")
    run = run_reference(task, "test", seed=99, cache_dir=build_cache)
    row_ptr, values = run.inputs["row_ptr"], run.inputs["values"]
    assert row_ptr[0] == 0 and row_ptr[-1] == values.size and np.all(np.diff(row_ptr) >= 0)
    expected = np.add.reduceat(np.append(values, 0), row_ptr[:-1]) * (np.diff(row_ptr) > 0)
    np.testing.assert_allclose(run.outputs["sums"], expected, rtol=1e-4)
    other = run_reference(task, "test", seed=100, cache_dir=build_cache)
    assert not np.array_equal(other.inputs["row_ptr"], row_ptr)


def test_out_arrays_are_poisoned_before_the_call(build_cache: Path) -> None:
    task = load_task(TASKS_DIR / "histogram")
    inputs = generate_inputs(task, "test", seed=5)
    assert np.all(inputs.arrays["bins"] == INT_POISON["uint32"])
    data = inputs.arrays["data"]
    assert data.max() < 200 and data.any()
    run = run_reference(task, "test", seed=5, cache_dir=build_cache)
    np.testing.assert_array_equal(run.outputs["bins"], np.bincount(run.inputs["data"], minlength=256))


def test_integer_generator_never_all_zero(saxpy: FunctionTask | KernelTask) -> None:
    data = saxpy.model_dump(mode="json")
    data["signature"] = "void saxpy(int n, float a, const int* x, float* y)"
    data["args"][2] = {
        "name": "x",
        "kind": "array",
        "dtype": "int32",
        "size": "1",
        "intent": "in",
        "generator": {"dist": "randint", "low": 0, "high": 2},
    }
    task = parse_task(data)
    for seed in range(20):
        assert generate_inputs(task, "test", seed).arrays["x"].any()


def test_library_is_cached_by_content(saxpy: FunctionTask | KernelTask, build_cache: Path) -> None:
    first = build_reference(saxpy, build_cache)
    assert build_reference(saxpy, build_cache) == first
    changed = saxpy.model_copy(update={"reference_source": saxpy.reference_source + "\n// v2\n"})
    assert build_reference(changed, build_cache) != first


def test_broken_reference_is_reported(saxpy: FunctionTask | KernelTask, build_cache: Path) -> None:
    broken = saxpy.model_copy(update={"reference_source": 'extern "C" void saxpy(int n) { oops }'})
    with pytest.raises(ReferenceBuildError, match="does not compile"):
        run_reference(broken, "test", seed=1, cache_dir=build_cache)
    lazy = saxpy.model_copy(
        update={
            "reference_source": 'extern "C" void saxpy(int, float, const float*, float* y)'
            "{ y[0] = 0.0f / 0.0f; }"
        }
    )
    with pytest.raises(ReferenceRunError, match="non-finite"):
        run_reference(lazy, "test", seed=1, cache_dir=build_cache)


def test_time_reference_at_timing_size(saxpy: FunctionTask | KernelTask, build_cache: Path) -> None:
    times = time_reference(saxpy, seed=4, repeats=2, cache_dir=build_cache)
    assert len(times) == 2 and all(t > 0 for t in times)
