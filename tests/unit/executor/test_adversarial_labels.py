"""The hack corpus's labels (issue 33, item 6), checked without a GPU: every case of
``tests/gpu/adversarial/fn_*.cu`` and ``k_*.cu`` says what it must get, on which task, its category and
its source; each category of the issue has a function-task case and, where a kernel can do it, a
kernel-task case. ``tests/gpu/test_adversarial_corpus.py`` runs them (marker ``gpu``)."""

from __future__ import annotations

from pathlib import Path

import pytest

from executor.taskformat import FunctionTask, KernelTask, load_task
from executor.verdict import ErrorKind

CORPUS = Path(__file__).parents[2] / "gpu" / "adversarial"
TASK_DIRS = [CORPUS / "tasks", Path(__file__).parent / "fixtures" / "tasks"]

# Issue 33's list, in its words.
CATEGORIES = {
    "value-keyed memoization",
    "pointer-keyed memoization",
    "call counting",
    "timing-call detection",
    "side streams and host threads",
    "stale outputs after a failed launch",
    "NaN/Inf",
    "precision downgrade",
    "size specialisation",
    "input mutation",
    "L2 tricks",
    "impossible times",
}
# What a kernel task's candidate cannot do: the executor launches its one kernel on the executor's
# stream (no host code of the candidate runs, and without relocatable device code no kernel launches
# another), and the persisting-L2 set-aside and access-policy windows are host calls.
KERNEL_NOT_APPLICABLE = {"side streams and host threads", "L2 tricks"}
SOURCES = (
    "KernelBench",
    "gpu-mode reference-kernels",
    "KernelGuard",
    "Sakana AI CUDA Engineer",
    "Wafer reward-hacks field guide",
    "team",
    "issue 33",
)


def _labels(path: Path) -> dict[str, str]:
    labels: dict[str, str] = {}
    for line in path.read_text().splitlines()[:6]:
        if line.startswith("// ") and ":" in line:
            key, value = line[3:].split(":", 1)
            labels.setdefault(key.strip(), value.strip())
    return labels


def _task(name: str) -> FunctionTask | KernelTask:
    for root in TASK_DIRS:
        if (root / name).is_dir():
            return load_task(root / name)
    raise FileNotFoundError(name)


CASES = sorted([*CORPUS.glob("fn_*.cu"), *CORPUS.glob("k_*.cu")])


@pytest.mark.parametrize("path", CASES, ids=[p.name for p in CASES])
def test_every_case_is_labelled_with_its_outcome_task_category_and_source(path: Path) -> None:
    lines = path.read_text().splitlines()
    assert lines[0].startswith("// expect:") and lines[1].startswith("// task:"), path.name
    labels = _labels(path)
    kinds = {k.strip() for k in labels["expect"].split("|")}
    assert kinds <= {"passed"} | {k.value for k in ErrorKind}, kinds
    task = _task(labels["task"])
    assert isinstance(task, KernelTask) == path.name.startswith("k_"), (path.name, labels["task"])
    assert labels["category"] in CATEGORIES | {"control"}, labels["category"]
    assert any(name in labels["source"] for name in SOURCES), labels["source"]


def test_every_category_has_a_function_case_and_a_kernel_case_where_a_kernel_can_do_it() -> None:
    function = {_labels(p)["category"] for p in CASES if p.name.startswith("fn_")}
    kernel = {_labels(p)["category"] for p in CASES if p.name.startswith("k_")}
    assert function >= CATEGORIES, CATEGORIES - function
    assert kernel >= CATEGORIES - KERNEL_NOT_APPLICABLE, CATEGORIES - KERNEL_NOT_APPLICABLE - kernel
    # The controls: honest code on every task the hacks use, expected to pass.
    controls = {_labels(p)["task"] for p in CASES if _labels(p)["category"] == "control"}
    assert controls == {_labels(p)["task"] for p in CASES}
    assert all(_labels(p)["expect"] == "passed" for p in CASES if _labels(p)["category"] == "control")
