"""How executor verdicts become search evaluations, and when the evaluator refuses to judge."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from executor.client import ExecutorClient
from executor.taskformat import load_task
from executor.verdict import NOT_JUDGED, CompileResult, ErrorKind, Stage, TimingStats, Verdict
from graphdb.embedded import free_port
from search.errors import EvaluatorUnavailableError
from search.evaluation import NOT_VERIFIED, ExecutorEvaluator, evaluation_from_verdict

TASK_DIR = Path(__file__).resolve().parents[3] / "regraph_data" / "tasks" / "mandelbrot_q28_i32"
COMPILED = CompileResult(ok=True, kind="shared_library", product="/tmp/x.so")


def _timing(ms: float) -> TimingStats:
    return TimingStats(trials=10, median_ms=ms, mean_ms=ms, min_ms=ms, max_ms=ms, iqr_ms=0.0, cov=0.0)


def _passed(speedup: float) -> Verdict:
    return Verdict(
        task_id="t",
        stage=Stage.TIMING,
        passed=True,
        runtime_stages="run",
        compile=COMPILED,
        candidate_timing=_timing(10.0 / speedup),
        reference_timing=_timing(10.0),
        speedup=speedup,
        reward=speedup if speedup >= 1 else speedup - 1,
        device="H100",
    )


@pytest.mark.parametrize(("speedup", "reward"), [(4.0, 4.0), (1.0, 1.0), (0.25, -0.75)])
def test_a_pass_gets_the_hierarchical_reward(speedup: float, reward: float) -> None:
    evaluation = evaluation_from_verdict(_passed(speedup), "verified")
    assert evaluation.passed is True
    assert evaluation.speedup == speedup
    assert evaluation.reward == pytest.approx(reward)
    assert evaluation.raw["device"] == "H100"


@pytest.mark.parametrize("error", [ErrorKind.COMPILE_ERROR, ErrorKind.WRONG_OUTPUT, ErrorKind.TIMEOUT])
def test_a_failure_costs_minus_one_in_either_mode(error: ErrorKind) -> None:
    verdict = Verdict(
        task_id="t",
        stage=Stage.CORRECTNESS,
        passed=False,
        error=error,
        message="boom",
        runtime_stages="run" if error is not ErrorKind.COMPILE_ERROR else "not_run",
        reward=-1.0,
    )
    for mode in ("verified", "compile-only"):
        evaluation = evaluation_from_verdict(verdict, mode)
        assert (evaluation.passed, evaluation.reward, evaluation.speedup) == (False, -1.0, None)
        assert evaluation.error_kind == error.value
        assert evaluation.message == "boom"


def _not_run() -> Verdict:
    return Verdict(
        task_id="t",
        stage=Stage.COMPILE,
        passed=False,
        error=ErrorKind.RUNTIME_NOT_AVAILABLE,
        runtime_stages="not_run",
        compile=COMPILED,
        message="no GPU runtime",
    )


def test_compiled_but_not_run_is_never_a_pass() -> None:
    evaluation = evaluation_from_verdict(_not_run(), "compile-only")
    assert evaluation.passed is False
    assert evaluation.speedup is None
    assert evaluation.error_kind == NOT_VERIFIED
    assert "not measured" in evaluation.message


def test_verified_mode_refuses_an_executor_without_gpu() -> None:
    with pytest.raises(EvaluatorUnavailableError, match="no GPU runtime"):
        evaluation_from_verdict(_not_run(), "verified")


@pytest.mark.parametrize("error", sorted(NOT_JUDGED))
def test_task_or_executor_faults_are_not_candidate_failures(error: ErrorKind) -> None:
    verdict = Verdict(task_id="t", stage=Stage.CORRECTNESS, passed=False, error=error, message="ref broke")
    with pytest.raises(EvaluatorUnavailableError, match="ref broke"):
        evaluation_from_verdict(verdict, "compile-only")


def test_a_pass_without_timing_cannot_be_scored() -> None:
    verdict = Verdict(
        task_id="t", stage=Stage.CORRECTNESS, passed=True, runtime_stages="run", compile=COMPILED
    )
    with pytest.raises(EvaluatorUnavailableError, match="without timing"):
        evaluation_from_verdict(verdict, "verified")


def test_an_unreachable_executor_raises() -> None:
    # Nothing listens on this port: the client retries transport errors, then the evaluator gives up.
    with ExecutorClient(f"http://127.0.0.1:{free_port()}", timeout_s=2) as client:
        evaluator = ExecutorEvaluator(client, load_task(TASK_DIR), mode="compile-only")

        async def evaluate_once() -> None:
            async with evaluator:
                await evaluator.evaluate("int main() {}")

        with pytest.raises(EvaluatorUnavailableError, match="could not be reached"):
            asyncio.run(evaluate_once())
