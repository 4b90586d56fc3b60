from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from executor.errors import TaskFormatError
from executor.taskformat import (
    FunctionTask,
    KernelTask,
    dump_task,
    load_task,
    parse_signature,
    parse_task,
)

TASKS_DIR = Path(__file__).parent / "fixtures" / "tasks"


def _saxpy_dict() -> dict[str, Any]:
    data: dict[str, Any] = json.loads((TASKS_DIR / "saxpy" / "task.json").read_text())
    data["reference_source"] = (TASKS_DIR / "saxpy" / "reference.cpp").read_text()
    return data


def test_loads_every_fixture_task() -> None:
    tasks = [load_task(p) for p in sorted(TASKS_DIR.iterdir())]
    assert {t.id for t in tasks} == {"saxpy", "scale_kernel", "row_sums_csr", "histogram", "block_sum"}
    csr = next(t for t in tasks if t.id == "row_sums_csr")
    assert csr.generator_source is not None and "regraph_generate" in csr.generator_source


def test_function_task_fields(saxpy: FunctionTask | KernelTask) -> None:
    assert isinstance(saxpy, FunctionTask)
    assert saxpy.reference_symbol == "saxpy"
    assert [a.name for a in saxpy.outputs] == ["y"]
    assert saxpy.size_values("timing") == {"n": 4194304}
    assert saxpy.naive_source is not None and "cudaMalloc" in saxpy.naive_source


def test_kernel_task_launch_config(scale_kernel: FunctionTask | KernelTask) -> None:
    assert isinstance(scale_kernel, KernelTask)
    assert scale_kernel.reference_symbol == "scale"
    grid, block, shared = scale_kernel.launch_config("test")
    assert block == (256, 1, 1)
    assert grid == ((100 * 37 + 255) // 256, 1, 1)
    assert shared == 0


def test_dump_then_load_round_trips(tmp_path: Path) -> None:
    for source in sorted(TASKS_DIR.iterdir()):
        task = load_task(source)
        dump_task(task, tmp_path / task.id)
        assert load_task(tmp_path / task.id) == task
        assert "reference_source" not in json.loads((tmp_path / task.id / "task.json").read_text())


def test_wire_json_round_trips(saxpy: FunctionTask | KernelTask) -> None:
    assert parse_task(json.loads(saxpy.model_dump_json())) == saxpy


@pytest.mark.parametrize(
    ("change", "message"),
    [
        (lambda d: d.update(signature="void saxpy(int n, float a, float* x, float* y)"), "must be 'const'"),
        (
            lambda d: d.update(signature="void saxpy(int n, float a, const float* y, const float* x)"),
            "same names, same order",
        ),
        (lambda d: d["args"][3].update(size="n*k"), "unknown params"),
        (lambda d: d["args"][0].update(dtype="int64"), "dtype int64"),
        (lambda d: d.update(entry="daxpy"), "entry is 'daxpy'"),
        (lambda d: d["args"][2].pop("generator"), "no generator"),
        (lambda d: d["args"][3].update(intent="out"), "must not have a generator"),
        (lambda d: d.update(format="regraph.task/v2"), "format"),
        (lambda d: d.update(id="Saxpy-1"), "id"),
        (lambda d: d.update(kind="shader"), "kind"),
        (lambda d: d["params"]["n"].update(test=0), "greater than 0"),
        (lambda d: d["args"][1].update(value="__import__('os')"), "unsupported construct"),
        (lambda d: d.update(surprise=1), "surprise"),
        (lambda d: d["args"][2].update(generator={"dist": "permutation"}), "integer dtype"),
        (lambda d: d["args"][2].update(generator={"dist": "custom"}), "generator_source"),
        (lambda d: d["args"].pop(), "same names"),
    ],
)
def test_invalid_tasks_are_rejected_with_a_clear_reason(change: Any, message: str) -> None:
    data = _saxpy_dict()
    change(data)
    with pytest.raises(TaskFormatError, match=message):
        parse_task(data)


def test_kernel_task_needs_matching_kernel_signature(scale_kernel: FunctionTask | KernelTask) -> None:
    data = scale_kernel.model_dump(mode="json")
    data["kernel"]["signature"] = (
        "__global__ void scale_kernel(long long count, double s, double* in, double* out)"
    )
    with pytest.raises(TaskFormatError, match="const"):
        parse_task(data)
    data = scale_kernel.model_dump(mode="json")
    data["kernel"]["block"] = ["2048", "1", "1"]
    with pytest.raises(TaskFormatError, match="1024"):
        parse_task(data)


def test_signature_parser_understands_qualifiers() -> None:
    name, params = parse_signature(
        "__global__ void k(unsigned long long n, const double *__restrict__ a, float * out, size_t m)"
    )
    assert name == "k"
    assert [(p.name, p.dtype, p.pointer, p.const) for p in params] == [
        ("n", "uint64", False, False),
        ("a", "float64", True, True),
        ("out", "float32", True, False),
        ("m", "uint64", False, False),
    ]


def test_load_task_errors(tmp_path: Path) -> None:
    with pytest.raises(TaskFormatError, match=r"no task\.json"):
        load_task(tmp_path)
    (tmp_path / "task.json").write_text("{not json")
    with pytest.raises(TaskFormatError, match="invalid JSON"):
        load_task(tmp_path)
    data = _saxpy_dict()
    data.pop("reference_source")
    (tmp_path / "task.json").write_text(json.dumps(data))
    with pytest.raises(TaskFormatError, match=r"no reference\.cpp"):
        load_task(tmp_path)
