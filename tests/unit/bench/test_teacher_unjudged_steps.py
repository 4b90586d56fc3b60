"""A verdict the executor did not judge (review 30 F1) is never a teacher step's failure: a batch stopped
by the executor's shut-down answers 200 with ``executor_stopped`` items (and an internal error or a broken
reference says as little about the step), so the teacher run stops before journalling the task, a resumed
run evaluates it again (also where an older journal recorded such steps as failed), and the seed graph
refuses such records instead of making rejected examples of them.

The executor here is a real HTTP server on loopback that speaks the executor's protocol with canned
verdicts (the real executor's shut-down in the middle of a batch is not reproducible on a host), reached
through the real `ExecutorClient`."""

from __future__ import annotations

import json
import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest
from fastapi import FastAPI

from bench.runner import BATCH_TIMEOUT_RETRIES, RunnerError, TeacherRunner, TeacherStepRecord, select_tasks
from bench.seed_graph import MeasuredSteps, SeedGraphError
from executor.client import ExecutorClient
from executor.protocol import (
    NOT_JUDGED,
    BatchRequest,
    BatchResponse,
    CompileResult,
    DeviceInfo,
    ErrorKind,
    EvaluateRequest,
    Stage,
    TimingStats,
    Verdict,
)
from regraph_cli.graph import ExecutorStepValidator
from search.errors import EvaluatorUnavailableError
from search.relabel.construction import read_trajectory_file
from tests.support.servers import serve_in_thread

REPO = Path(__file__).resolve().parents[3]
TASK = "rgb_gray_half_u8"


def _judged(task_id: str) -> Verdict:
    timing = TimingStats(trials=5, median_ms=1.0, mean_ms=1.0, min_ms=1.0, max_ms=1.0, iqr_ms=0.0, cov=0.0)
    return Verdict(
        task_id=task_id,
        stage=Stage.TIMING,
        passed=True,
        runtime_stages="run",
        compile=CompileResult(ok=True, kind="shared_library"),
        candidate_timing=timing,
        reference_timing=timing,
        speedup=1.0,
        reward=0.0,
        device="canned",
    )


class CannedExecutor:
    """The executor's device and batch routes; ``unjudged``: the error kind of the batch's last item (None:
    every item judged), in the first ``unjudged_batches`` batches (None: in every one); ``sizes``: the
    batches' sizes as they came."""

    def __init__(self) -> None:
        self.unjudged: ErrorKind | None = ErrorKind.EXECUTOR_STOPPED
        self.unjudged_batches: int | None = None
        self.batches = 0
        self.sizes: list[int] = []
        self.app = FastAPI()

        @self.app.get("/v1/device")
        def device() -> DeviceInfo:
            return DeviceInfo(arch="sm_90", runtime="gpu", runtime_checks_available=True)

        @self.app.post("/v1/evaluate/batch")
        def batch(request: BatchRequest) -> BatchResponse:
            self.batches += 1
            self.sizes.append(len(request.items))
            verdicts = [_judged(item.task.id) for item in request.items]
            if self.unjudged is not None and (
                self.unjudged_batches is None or self.batches <= self.unjudged_batches
            ):
                verdicts[-1] = Verdict(
                    task_id=request.items[-1].task.id,
                    stage=Stage.STATIC,
                    passed=False,
                    error=self.unjudged,
                    message="not judged: the executor shut down before this evaluation finished",
                )
            return BatchResponse(verdicts=verdicts)

        @self.app.post("/v1/evaluate")
        def evaluate(request: EvaluateRequest) -> Verdict:
            return batch(BatchRequest(items=[request])).verdicts[0]


@pytest.fixture
def executor() -> Iterator[tuple[CannedExecutor, str]]:
    canned = CannedExecutor()
    with serve_in_thread(canned.app) as url:
        yield canned, url


def _selection(tmp_path: Path) -> tuple[Path, object]:
    shutil.copytree(REPO / "regraph_data" / "tasks" / TASK, tmp_path / "tasks" / TASK)
    (tmp_path / "trajectories").mkdir()
    trajectory = tmp_path / "trajectories" / f"{TASK}.jsonl"
    shutil.copy(REPO / "bench" / "trajectories" / f"{TASK}.jsonl", trajectory)
    selection = select_tasks(
        [TASK],
        tasks_dir=tmp_path / "tasks",
        trajectories_dir=tmp_path / "trajectories",
        split_path=tmp_path / "none.json",
    )
    return trajectory, selection


@pytest.mark.parametrize("kind", sorted(NOT_JUDGED))
def test_an_unjudged_step_stops_the_run_and_journals_nothing(
    executor: tuple[CannedExecutor, str], tmp_path: Path, kind: ErrorKind
) -> None:
    canned, url = executor
    canned.unjudged = kind
    _, selection = _selection(tmp_path)
    out = tmp_path / "teacher"
    with ExecutorClient(url) as client:
        with pytest.raises(RunnerError, match=f"did not judge 1 of .*{kind.value}"):
            TeacherRunner(selection, client, url, out).run()  # type: ignore[arg-type]
        assert (out / "teacher_steps.jsonl").read_text() == ""  # the task is not finished
        canned.unjudged = None  # the executor is back: the resumed run evaluates the task
        result = TeacherRunner(selection, client, url, out).run()  # type: ignore[arg-type]
    # a batch_timeout item is sent again alone (BATCH_TIMEOUT_RETRIES times) before the run stops
    resent = BATCH_TIMEOUT_RETRIES if kind is ErrorKind.BATCH_TIMEOUT else 0
    assert canned.batches == 2 + resent and result.complete
    assert canned.sizes[1 : 1 + resent] == [1] * resent, canned.sizes
    steps = [json.loads(line) for line in (out / "teacher_steps.jsonl").read_text().splitlines()]
    assert steps and all(s["correct"] is True and s["error"] is None for s in steps)


def test_items_past_the_batch_limit_are_sent_again_and_merged(
    executor: tuple[CannedExecutor, str], tmp_path: Path
) -> None:
    """A batch past the executor's request limit answers its judged items and ``batch_timeout`` for the
    rest: only those are sent again, and once judged the task is journalled whole in the same run
    (review 32 F2: the run stopped, and a resume sent the whole batch again)."""
    canned, url = executor
    canned.unjudged, canned.unjudged_batches = ErrorKind.BATCH_TIMEOUT, 1
    _, selection = _selection(tmp_path)
    out = tmp_path / "teacher"
    with ExecutorClient(url) as client:
        result = TeacherRunner(selection, client, url, out).run()  # type: ignore[arg-type]
    assert result.complete
    assert canned.batches == 2 and canned.sizes[1] == 1 and canned.sizes[0] > 1, canned.sizes
    steps = [json.loads(line) for line in (out / "teacher_steps.jsonl").read_text().splitlines()]
    assert len(steps) == canned.sizes[0]
    assert all(s["correct"] is True and s["error"] is None for s in steps), steps


def test_an_older_journal_s_unjudged_steps_are_evaluated_again_and_never_seed_the_graph(
    executor: tuple[CannedExecutor, str], tmp_path: Path
) -> None:
    """A journal written before the fix recorded a stopped item as a failed step."""
    canned, url = executor
    canned.unjudged = None
    trajectory, selection = _selection(tmp_path)
    out = tmp_path / "teacher"
    with ExecutorClient(url) as client:
        TeacherRunner(selection, client, url, out).run()  # type: ignore[arg-type]
        journal = out / "teacher_steps.jsonl"
        records = [TeacherStepRecord.model_validate_json(line) for line in journal.read_text().splitlines()]
        # what the runner wrote before review 30 for a batch item stopped by the shut-down
        records[-1] = records[-1].model_copy(
            update={
                "compiled": False,
                "correct": False,
                "speedup": None,
                "error": "executor_stopped",
                "message": "not judged: the executor shut down",
                "verdict": {"passed": False, "error": "executor_stopped"},
            }
        )
        journal.write_text("".join(r.model_dump_json() + "\n" for r in records))
        old = tmp_path / "old_steps.jsonl"
        shutil.copy(journal, old)
        with pytest.raises(SeedGraphError, match="was not judged by the executor"):
            MeasuredSteps.read([old], read_trajectory_file(trajectory), set())
        result = TeacherRunner(selection, client, url, out).run()  # type: ignore[arg-type]
    assert canned.batches == 2 and result.complete  # the task evaluated again
    again = [TeacherStepRecord.model_validate_json(line) for line in journal.read_text().splitlines()]
    assert len(again) == len(records) and all(r.correct is True and r.error is None for r in again)
    measured = MeasuredSteps.read([journal], read_trajectory_file(trajectory), set())
    assert all(step.check.passed for step in measured.steps.values())


def test_the_graph_s_step_validation_never_rejects_an_unjudged_step(
    executor: tuple[CannedExecutor, str], tmp_path: Path
) -> None:
    """`regraph graph build --executor`: an unjudged verdict stops the build (kept, resumable) instead
    of rejecting the step."""
    canned, url = executor
    tasks = REPO / "regraph_data" / "tasks"
    with ExecutorClient(url) as client:
        validator = ExecutorStepValidator(client, tasks)
        with pytest.raises(EvaluatorUnavailableError, match="did not judge a step"):
            validator(TASK, "int x;")
        canned.unjudged = None
        assert validator(TASK, "int x;").passed
