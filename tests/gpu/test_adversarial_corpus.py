"""The hack corpus (issue 33): every ``tests/gpu/adversarial/*.cu`` whose first line is ``// expect:
KIND[|KIND...]`` (``passed``, or the verdict's error kinds that are acceptable) and second line ``//
task: NAME`` is evaluated once and must get its label. The tasks are the unit fixtures' and the corpus's
own (``adversarial/tasks/``: function tasks timed at sizes larger than any host cache, so that the
physical floor of a function task has bytes to bound). With ``REGRAPH_ADVERSARIAL_OUT`` set, each
verdict is also appended there as a JSON line (``bench/device/run_adversarial.sh`` prints the table).

Also here: a persisting-L2 set-aside left in the context is undone before the trials
(``GpuContext.reset_timing_state``), and a value-keyed memo is timed like the honest code.
"""

from __future__ import annotations

import importlib.util
import json
import os
import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest

from executor.evaluate import Evaluator
from executor.protocol import CandidateSource, EvaluationOptions
from executor.settings import ExecutorSettings
from executor.taskformat import FunctionTask, KernelTask, load_task
from executor.verdict import Verdict

pytestmark = pytest.mark.gpu

HERE = Path(__file__).parent
CORPUS = HERE / "adversarial"
TASK_DIRS = [CORPUS / "tasks", HERE.parent / "unit" / "executor" / "fixtures" / "tasks"]

if importlib.util.find_spec("pycuda") is None or shutil.which("nvidia-smi") is None:
    pytest.skip("needs pycuda and an NVIDIA GPU", allow_module_level=True)

QUICK = EvaluationOptions(min_trials=5, max_trials=20, min_timing_ms=20, reference_repeats=1)


def labelled() -> list[tuple[str, str, set[str]]]:
    """(file, task, acceptable outcomes) of every labelled case of the corpus."""
    cases = []
    for path in sorted(CORPUS.glob("*.cu")):
        lines = path.read_text().splitlines()
        if len(lines) > 1 and lines[0].startswith("// expect:") and lines[1].startswith("// task:"):
            kinds = {k.strip() for k in lines[0].split(":", 1)[1].split("|")}
            cases.append((path.name, lines[1].split(":", 1)[1].strip(), kinds))
    return cases


def _task(name: str) -> FunctionTask | KernelTask:
    for root in TASK_DIRS:
        if (root / name).is_dir():
            return load_task(root / name)
    raise FileNotFoundError(name)


@pytest.fixture(scope="module")
def evaluator(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Evaluator]:
    settings = ExecutorSettings(
        cache_dir=tmp_path_factory.mktemp("corpus-cache"), runtime="gpu", run_timeout_s=120
    )
    built = Evaluator(settings)
    yield built
    built.close()


def _record(file: str, expected: set[str], verdict: Verdict) -> None:
    out = os.environ.get("REGRAPH_ADVERSARIAL_OUT")
    if not out:
        return
    timing = verdict.candidate_timing
    row = {
        "file": file,
        "expect": "|".join(sorted(expected)),
        "got": "passed" if verdict.passed else str(verdict.error),
        "stage": str(verdict.stage),
        "median_ms": timing.median_ms if timing else None,
        "speedup": verdict.speedup,
        "floor_ms": verdict.floor.floor_ms if verdict.floor else None,
        "floor_path": verdict.floor.path if verdict.floor else None,
        "message": verdict.message[:300],
    }
    with open(out, "a") as f:
        f.write(json.dumps(row) + "\n")


@pytest.mark.parametrize(("file", "task", "expected"), labelled(), ids=[c[0] for c in labelled()])
def test_every_corpus_case_gets_its_label(
    evaluator: Evaluator, file: str, task: str, expected: set[str]
) -> None:
    source = (CORPUS / file).read_text()
    verdict = evaluator.evaluate(_task(task), CandidateSource(source=source), QUICK)
    _record(file, expected, verdict)
    got = "passed" if verdict.passed else str(verdict.error)
    assert got in expected, f"{file}: {got} at {verdict.stage}: {verdict.message}"
    if not verdict.passed:
        assert verdict.reward == -1.0
    if got == "implausible":
        assert verdict.floor is not None and verdict.floor.floor_ms is not None
        assert "below the physical floor" in verdict.message


def test_calls_skimmed_between_the_checked_ones_fail_a_spot_check(evaluator: Evaluator) -> None:
    """A function candidate that skips the work on every timed call but the first and the last of each
    rotated copy, when it can count on the trial count: before spot checks (session 21) only the last
    calls were checked, and it passed. Now a sample of every timed call's outputs is checked."""
    options = QUICK.model_copy(
        update={"min_trials": 150, "max_trials": 150, "max_timing_s": 120.0, "physical_floor": False}
    )
    source = (CORPUS / "skim_between_checks.cu").read_text()
    verdict = evaluator.evaluate(_task("big_saxpy"), CandidateSource(source=source), options)
    assert not verdict.passed and str(verdict.error) == "wrong_output", (verdict.stage, verdict.message)
    assert "spot check" in verdict.message, verdict.message


# The skimming kernel's options: four slots, which it counts on (see its comments), pinned rather than the
# defaults', and enough timed launches for the spot checks to draw among.
SKIM_SPOTS = QUICK.model_copy(
    update={
        "min_trials": 150,
        "max_trials": 150,
        "max_timing_s": 120.0,
        "physical_floor": False,
        "rotate_buffers": 3,
        "timing_sets": 2,
    }
)


def _skimming_fails_honest_passes(
    evaluator: Evaluator, spots: EvaluationOptions, skim: CandidateSource, honest: CandidateSource
) -> Verdict:
    """With ``spots`` the skimming kernel fails a spot check at the timing stage, as wrong or unwritten
    outputs, and the honest kernel passes (its verdict returned)."""
    verdict = evaluator.evaluate(_task("block_sum"), skim, spots)
    assert not verdict.passed and str(verdict.error) in ("wrong_output", "unwritten_output"), (
        verdict.stage,
        verdict.message,
    )
    assert verdict.stage == "timing" and "spot check" in verdict.message, verdict.message
    control = evaluator.evaluate(_task("block_sum"), honest, spots)
    assert control.passed, (control.stage, control.message)
    return control


def test_kernel_launches_skimmed_between_the_checked_ones_fail_a_spot_check(evaluator: Evaluator) -> None:
    """The same for a kernel task (option ``kernel_spot_checks``, on by default since session 23):
    without it the skimming kernel passes (only the last launch on each copy is checked); with it, a
    sample of every timed launch's outputs, copied on the device, is checked, and the honest kernel
    still passes. A skipped launch leaves the poison its outputs were restored to, so the failure may
    read as unwritten (seen on an H200, session 23) as well as wrong."""
    spots = SKIM_SPOTS
    options = spots.model_copy(update={"kernel_spot_checks": False})
    skim = CandidateSource(source=(CORPUS / "skim_launches_between_checks.cu").read_text())
    honest = CandidateSource(source=(CORPUS / "k_honest.cu").read_text())
    before = evaluator.evaluate(_task("block_sum"), skim, options)
    assert before.passed, (before.stage, before.message)
    _skimming_fails_honest_passes(evaluator, spots, skim, honest)


def test_kernel_launches_skimmed_between_the_checked_ones_fail_the_gathered_spot_check(
    evaluator: Evaluator,
) -> None:
    """The same with option ``kernel_spot_gather`` (a launch's sample copied by one gather launch
    instead of one copy per run, session 28): the skimming kernel fails a spot check, the honest one
    passes."""
    spots = SKIM_SPOTS.model_copy(update={"kernel_spot_gather": True})
    skim = CandidateSource(source=(CORPUS / "skim_launches_between_checks.cu").read_text())
    honest = CandidateSource(source=(CORPUS / "k_honest.cu").read_text())
    control = _skimming_fails_honest_passes(evaluator, spots, skim, honest)
    # The gather ran (review 44: a fallback to the run-by-run copies would pass this test silently).
    assert control.seconds.get("spot_gather") == 1.0, control.seconds


def test_a_value_keyed_memo_is_timed_like_the_honest_code(evaluator: Evaluator) -> None:
    task = _task("big_saxpy")
    honest = evaluator.evaluate(task, CandidateSource(source=(CORPUS / "fn_honest.cu").read_text()), QUICK)
    memo = evaluator.evaluate(
        task, CandidateSource(source=(CORPUS / "fn_value_memo_last.cu").read_text()), QUICK
    )
    assert honest.passed and memo.passed, (honest.message, memo.message)
    assert honest.candidate_timing is not None and memo.candidate_timing is not None
    assert memo.candidate_timing.median_ms > honest.candidate_timing.median_ms / 2


def test_a_persisting_l2_set_aside_is_undone_before_the_trials() -> None:
    """What fn_l2_persist.cu sets in its process's context (the set-aside; its stream's window goes
    with the stream) is undone by the reset every candidate's trials start with."""
    from executor.worker.gpu import GpuContext, _libcuda

    gpu = GpuContext()
    try:
        import ctypes

        status = _libcuda().cuCtxSetLimit(ctypes.c_int(0x06), ctypes.c_size_t(16 << 20))
        if status != 0:
            pytest.skip(f"this device has no persisting L2 (cuCtxSetLimit: {status})")
        assert gpu.persisting_l2_limit() > 0
        gpu.reset_timing_state()
        assert gpu.persisting_l2_limit() == 0
    finally:
        gpu.close()
