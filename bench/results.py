"""The benchmark's result file (``result.json``, `BenchResult`) and its records: what the runner
writes and the report reads (neither imports the other for it)."""

from __future__ import annotations

from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, Field, ValidationError

from bench.metrics import (
    DEFAULT_FAST_P,
    BenchError,
    MetricSummary,
    SampleOutcome,
    TeacherStepOutcome,
    TeacherSummary,
    Tier,
)
from search.evaluation import VerificationMode

RESULT_FORMAT: Literal["regraph.bench-result/v1"] = "regraph.bench-result/v1"
DEFAULT_KS: tuple[int, ...] = (1, 5, 10)

RUNTIME_NOT_RUN_NOTE = (
    "The executor had no GPU runtime: candidates were statically checked and compiled, but never run. "
    "Correctness and speed were NOT measured, so no pass@k, speedup or fast_p is reported; only compile "
    "rates are."
)


class RunnerError(BenchError):
    """The benchmark cannot run (bad selection, unreadable inputs, executor or model unavailable)."""


# ---- records ------------------------------------------------------------------------------------


class SampleRecord(BaseModel):
    """One sample of one task: the search that produced it and the verdict on its answer."""

    task_id: str
    tier: Tier
    domain: str
    sample: int = Field(ge=0)
    seed: int
    method: str
    answer: Literal["best", "compiled", "last", "none"] = Field(
        description="best: the search's verified best; compiled/last: nothing passed, the latest candidate "
        "that compiled / that had code; none: no code at all"
    )
    compiled: bool
    correct: bool | None = Field(description="None: compiled, but the runtime stages did not run")
    runtime_stages: Literal["run", "not_run"] | None = None
    speedup: float | None = None
    baseline_speedup: float | None = None
    error: str | None = None
    message: str = ""
    search_speedup: float | None = Field(
        default=None, description="the best's speedup as timed in the search"
    )
    best_path: list[str] | None = None
    code_sha256: str | None = None
    candidates: int = 0
    candidates_with_code: int = 0
    candidates_compiled: int = 0
    failures: dict[str, int] = Field(
        default_factory=dict,
        description="why candidates failed, counted: proposal failures and verdict errors",
    )
    search_evaluations: int = 0
    final_evaluations: int = 0
    prompt_tokens: int = 0
    completion_tokens: int = 0
    stop_reason: str | None = None
    backends: list[str] = Field(default_factory=list)
    seconds: float = 0.0
    generation_seconds: float = Field(default=0.0, description="the model's seconds over the candidates")
    evaluation_seconds: float = Field(default=0.0, description="the executor's seconds over the candidates")
    verdict: dict[str, Any] | None = Field(default=None, description="the executor's verdict on the answer")

    def outcome(self) -> SampleOutcome:
        """What the metrics need."""
        return SampleOutcome(
            task_id=self.task_id,
            tier=self.tier,
            compiled=self.compiled,
            correct=self.correct,
            speedup=self.speedup if self.correct else None,
            baseline_speedup=self.baseline_speedup if self.correct else None,
        )


class TeacherStepRecord(BaseModel):
    """One teacher trajectory step and the executor's verdict on it."""

    task_id: str
    tier: Tier
    domain: str
    trajectory: int = Field(ge=1)
    step: int = Field(ge=1)
    method: str
    compiled: bool
    correct: bool | None
    runtime_stages: Literal["run", "not_run"]
    speedup: float | None = None
    baseline_speedup: float | None = None
    error: str | None = None
    message: str = ""
    verdict: dict[str, Any]

    def outcome(self) -> TeacherStepOutcome:
        """What the teacher metrics need."""
        return TeacherStepOutcome(
            task_id=self.task_id,
            tier=self.tier,
            step=self.step,
            method=self.method,
            compiled=self.compiled,
            correct=self.correct,
            speedup=self.speedup if self.correct else None,
            baseline_speedup=self.baseline_speedup if self.correct else None,
        )


class RunInfo(BaseModel):
    """What was run, on what, and how; also the identity a resumed run must match."""

    kind: Literal["search", "teacher"]
    method: str | None = None
    model: str | None = None
    knowledge: str | None = None
    samples: int | None = None
    evaluation_budget: int | None = None
    token_budget: int | None = None
    seed: int = 0
    final_evaluation: bool = True
    tasks: list[str]
    task_selection: str
    split: dict[str, Any] | None = Field(default=None, description="seed and task-set hash of the split used")
    executor_url: str
    device: dict[str, Any] = Field(default_factory=dict)
    verification: VerificationMode
    evaluation_options: dict[str, Any] | None = Field(
        default=None, description="None: the executor's defaults"
    )
    ks: list[int] = Field(default_factory=lambda: list(DEFAULT_KS))
    ps: list[float] = Field(default_factory=lambda: list(DEFAULT_FAST_P))
    search: dict[str, Any] | None = Field(
        default=None,
        description="the resolved search settings (MCGS: its preset too); seed and budgets are above",
    )

    def identity(self) -> dict[str, Any]:
        """The settings that make two runs comparable sample by sample (for resuming)."""
        return self.model_dump(
            include={
                "kind",
                "method",
                "model",
                "knowledge",
                "samples",
                "evaluation_budget",
                "token_budget",
                "seed",
                "final_evaluation",
                "verification",
                "evaluation_options",
                "search",
            }
        )


class Totals(BaseModel):
    """What the run spent."""

    executor_evaluations: int = Field(description="search evaluations plus final evaluations")
    search_evaluations: int = 0
    final_evaluations: int = 0
    prompt_tokens: int = 0
    completion_tokens: int = 0
    seconds: float = Field(
        default=0.0,
        description="search runs: time spent on the recorded samples (summed over resumed invocations); "
        "teacher runs: the executor's stage times of the recorded steps",
    )


class BenchResult(BaseModel):
    """The result file (``result.json``): schema-versioned, the input of `bench.report`."""

    format: Literal["regraph.bench-result/v1"] = RESULT_FORMAT
    created_at: str
    run: RunInfo
    complete: bool = Field(description="False: stopped early; `missing_tasks` were not (fully) run")
    missing_tasks: list[str] = Field(default_factory=list)
    runtime_measured: bool = Field(description="False: the runtime stages never ran; no pass/speed numbers")
    note: str = ""
    totals: Totals
    metrics: dict[str, MetricSummary] | None = None
    teacher_metrics: dict[str, TeacherSummary] | None = None
    samples: list[SampleRecord] = Field(default_factory=list)
    teacher_steps: list[TeacherStepRecord] = Field(default_factory=list)


def read_result(path: Path) -> BenchResult:
    """Read a result file."""
    try:
        return BenchResult.model_validate_json(path.read_text(encoding="utf-8"))
    except OSError as e:
        raise RunnerError(f"cannot read the result {path}: {e}") from e
    except ValidationError as e:
        raise RunnerError(f"{path} is not a {RESULT_FORMAT} result: {e}") from e
