"""An inline task's reference cannot poison another task's stored timing sets (issue 27).

Any reader can send a task inline (MCP ``evaluate_candidate`` / ``start_evaluation`` with ``task``,
``POST /v1/optimize``), so the task's reference is the caller's code. It runs in a jailed reference
worker. The task's timing sets are stored once per task (executor.timingset) and decide every later
candidate's timing check, so they must not be writable from there.

The attack: the victim task's timing sets are stored; an inline task's reference then computes its own
task right and, on the side, overwrites the victim's stored expected outputs (whose path it can work
out: the store's key is a hash of public task content) and plants a file in the store. Then an honest
candidate of the victim is judged. Before the store was written by the executor alone, the jailed
reference (uid 65534 in the namespace jail, the store bound writable and owned by that uid) rewrote
the victim's outputs and the honest candidate failed with ``wrong_output`` at ``timing``.
"""

from __future__ import annotations

import hashlib
import json
import uuid
from pathlib import Path

import pytest

from executor.jail import protection
from executor.reference import build_reference
from executor.sandbox import WorkerProcess, finish_reference, run_job, start_reference, worker_protection
from executor.taskformat import FunctionTask, KernelTask, load_task, parse_task
from executor.timingset import TimingSetSpec, load_expected, stored, timing_set_spec, variants
from executor.verdict import ErrorKind
from executor.worker.messages import CandidateRun, ReferenceJob, WorkerJob
from tests.support.hostcode import FAST, build_host_candidates

pytestmark = pytest.mark.skipif(protection() != "namespace", reason="no namespaces on this host")

OPTIONS = FAST.model_copy(update={"max_trials": 9})
TASKS_DIR = Path(__file__).parents[2] / "unit" / "executor" / "fixtures" / "tasks"
SAXPY = "for (int i = 0; i < n; ++i) y[i] = a * x[i] + y[i];"
HONEST = f'extern "C" void saxpy(int n, float a, const float* x, float* y) {{ {SAXPY} }}\n'
# Overwrites the last 64 bytes of a file wherever it can (a rewritten stored or expected output).
POISON = """
#include <cstdio>
#include <cstring>
static void poison(const char* path) {
    std::FILE* f = std::fopen(path, "r+b");
    if (f == nullptr) return;
    unsigned char junk[64];
    std::memset(junk, 0x42, sizeof junk);
    if (std::fseek(f, -64, SEEK_END) == 0) std::fwrite(junk, 1, sizeof junk, f);
    std::fclose(f);
}
"""


def small_saxpy() -> FunctionTask | KernelTask:
    """The fixture's saxpy at a small timing size (its sets take kilobytes, not megabytes)."""
    saxpy = load_task(TASKS_DIR / "saxpy")
    return parse_task({**saxpy.model_dump(mode="json"), "params": {"n": {"test": 500, "timing": 2048}}})


def reference_job(task: FunctionTask | KernelTask, library: Path, root: Path) -> ReferenceJob:
    """An evaluation's reference job for ``task``: its timing sets stored under ``root`` unless they are,
    the reference timed."""
    return ReferenceJob(
        task=task,
        reference_library=str(library),
        seeds=[11, 22, 33, 44],
        options=OPTIONS,
        out_dir="",
        time_reference=True,
        timing_set=timing_set_spec(task, library, root),
    )


def _poisoner(victim: TimingSetSpec, count: int) -> str:
    """A right reference that also overwrites the victim's stored expected outputs (every one of its
    timing sets) and plants a file in the store's root, wherever it can."""
    targets = ", ".join(json.dumps(str(Path(v.dir) / "expected-y.npy")) for v in variants(victim, count))
    planted = json.dumps(str(Path(victim.dir).parent / "planted-by-a-reference"))
    return f"""{POISON}
extern "C" void saxpy(int n, float a, const float* x, float* y) {{
    const char* targets[] = {{{targets}}};
    for (const char* t : targets) poison(t);
    if (std::FILE* f = std::fopen({planted}, "w")) {{ std::fputs("planted", f); std::fclose(f); }}
    {SAXPY}
}}
"""


def _reference_run(task: FunctionTask | KernelTask, library: Path, root: Path) -> TimingSetSpec:
    """What an evaluation's reference worker does for ``task``; the spec of its timing sets."""
    worker = WorkerProcess("reference", "none")
    try:
        job = reference_job(task, library, root)
        start_reference(worker, job, None)
        outcome = finish_reference(worker, timeout_s=120)
        assert outcome.ok, outcome.message
        assert job.timing_set is not None
        return job.timing_set
    finally:
        worker.close()


def _digests(spec: TimingSetSpec, count: int) -> dict[str, str]:
    return {
        str(path): hashlib.sha256(path.read_bytes()).hexdigest()
        for v in variants(spec, count)
        for path in sorted(Path(v.dir).iterdir())
    }


def test_an_inline_reference_cannot_rewrite_another_tasks_timing_sets(tmp_path: Path) -> None:
    assert worker_protection("none", "reference") == "namespace"
    victim = small_saxpy()
    cache = tmp_path / "cache"
    library = build_reference(victim, cache)
    spec = _reference_run(victim, library, cache / "timing-sets")  # the victim's first evaluation
    count = OPTIONS.timing_sets
    assert all(stored(v) for v in variants(spec, count))
    before = _digests(spec, count)

    inline = parse_task(
        {
            **victim.model_dump(mode="json"),
            "id": f"inline_{uuid.uuid4().hex[:6]}",
            "reference_source": _poisoner(spec, count),
        }
    )
    inline_spec = _reference_run(inline, build_reference(inline, cache), cache / "timing-sets")
    assert inline_spec.dir != spec.dir

    assert _digests(spec, count) == before, "the victim's stored timing sets were rewritten"
    assert not (Path(spec.dir).parent / "planted-by-a-reference").exists()
    assert all(load_expected(v, victim) is not None for v in variants(spec, count))

    product = build_host_candidates(tmp_path, {"honest": HONEST})["honest"]
    job = WorkerJob(
        task=victim,
        runtime="host",
        reference_library=str(library),
        seeds=[55, 66, 77],
        options=OPTIONS,
        timing_set=spec,
    )
    outcome = run_job(job, CandidateRun(candidate_product=product, candidate_symbol="saxpy"), timeout_s=120)
    assert outcome.error is not ErrorKind.WRONG_OUTPUT, outcome.message
    assert outcome.passed and outcome.stage == "timing", outcome.message
