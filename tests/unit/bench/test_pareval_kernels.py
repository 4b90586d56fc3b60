"""Our ParEval kernels (bench/pareval_kernels) against the converted references, on the CPU emulation of
CUDA (regraph_data/kernel_tasks/cuda_on_cpu.h, as in test_kernel_tasks.py): two seeded input sets at ParEval's
validation size, the warps of each block run first to last and last to first.

ParEval is not part of this repository: the tests run when a checkout is at ``$REGRAPH_PAREVAL_DIR`` or
``.pareval/`` in the repository root, and are skipped otherwise. The GPU verdicts come from
``regraph bench pareval --check-kernels`` (docs/benchmark.md)."""

from __future__ import annotations

import multiprocessing
import os
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

import pytest

from bench.pareval import Conversion, convert_pareval, converted_tasks
from executor.reference import build_reference
from executor.taskformat import KernelTask
from tests.unit.bench.test_kernel_tasks import build_emulation, emulate

REPO_ROOT = Path(__file__).resolve().parents[3]
KERNELS = REPO_ROOT / "bench" / "pareval_kernels"
CHECKOUT = Path(os.environ.get("REGRAPH_PAREVAL_DIR", REPO_ROOT / ".pareval"))
# What the emulation lacks and our kernels use; size_t is the executor's unsigned long long.
SHIMS = """#define size_t unsigned long long
inline unsigned long long atomicAdd(unsigned long long* p, unsigned long long v) { auto o = *p; *p += v; return o; }
inline double __ddiv_rn(double a, double b) { return a / b; }
inline double __dsub_rn(double a, double b) { return a - b; }
inline double __dmul_rn(double a, double b) { return a * b; }
"""

pytestmark = pytest.mark.skipif(
    not (CHECKOUT / "prompts").is_dir(), reason=f"no ParEval checkout at {CHECKOUT} (REGRAPH_PAREVAL_DIR)"
)


@pytest.fixture(scope="module")
def converted(tmp_path_factory: pytest.TempPathFactory) -> tuple[Conversion, Path]:
    out = tmp_path_factory.mktemp("pareval")
    return convert_pareval(CHECKOUT, out / "tasks"), out


def test_every_converted_task_has_a_kernel(converted: tuple[Conversion, Path]) -> None:
    conversion, _ = converted
    ids = {p.task_id for p in conversion.converted}
    assert ids == {p.stem for p in KERNELS.glob("*.cu")}


def _emulated(task: KernelTask, work: Path) -> str:
    source = SHIMS + (KERNELS / f"{task.id}.cu").read_text()
    library = build_emulation(task, source, work)
    # Not "fork": a fork of this process, whose earlier tests leave threads behind, can inherit a lock
    # that one of them held and wait on it forever (seen once after the executor tests).
    context = multiprocessing.get_context("forkserver")
    with ProcessPoolExecutor(max_workers=1, mp_context=context) as pool:
        job = pool.submit(
            emulate,
            task.model_dump(mode="json"),
            task.size_values("test"),
            str(library),
            str(build_reference(task, work)),
        )
        return job.result(timeout=600)


@pytest.mark.parametrize("task_id", sorted(p.stem for p in KERNELS.glob("*.cu")))
def test_kernel_matches_the_converted_reference(task_id: str, converted: tuple[Conversion, Path]) -> None:
    conversion, out = converted
    task = next((t for t in converted_tasks(out / "tasks", conversion) if t.id == task_id), None)
    assert task is not None, f"{task_id} was not converted"
    assert _emulated(task, out) == ""
