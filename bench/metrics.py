"""Benchmark metrics: pass@k, speedup@k, fast_p, compile rate and speedup means, per tier and overall.

Definitions (also in ``docs/benchmark.md``):

* **pass@k** (ParEval, after Chen et al.): for a task with ``n`` samples of which ``c`` are correct,
  the unbiased estimate ``1 - C(n-c, k) / C(n, k)`` of the chance that at least one of ``k`` samples
  drawn without replacement is correct; averaged over tasks.
* **speedup@k**, two conventions, both reported:

  - ``speedup_at_k`` (**ours**, the expected best of k): the expected *best* speedup over the serial
    reference among ``k`` samples drawn without replacement from the task's ``n``; a failed sample
    counts as speedup 0, so a task with no correct sample scores 0. With the speedups sorted ascending
    ``s_1 <= ... <= s_n`` it is ``sum_{i=k..n} C(i-1, k-1) / C(n, k) * s_i``. Averaged
    (arithmetically) over all tasks. Only ``k <= n``.
  - ``speedup_at_k_pareval`` (**ParEval's released code**, ``analysis/metrics.py`` ``speedupk``):
    failed samples are dropped first, so a task's ``m`` correct samples alone enter, and a task with
    none is left out of the mean over tasks. With the correct samples' runtimes sorted ascending
    (speedups descending, ``t_1 >= ... >= t_m``) it is ``sum_{j=1..m} C'(j-1, k-1) / C'(m, k) * t_j``,
    where ``C'(a, b)`` is ``C(a, b)`` but **1 when a < b** (its ``nCr``). For ``k = 1`` this is the mean
    speedup of the correct samples; for ``k > 1`` it weights the *slowest* of each draw (an expected
    minimum), and the ``C' = 1`` rule adds every ``j < k`` term with weight ``1 / C'(m, k)``; with
    ``m < k`` it is the *sum* of the correct speedups. Reproduced as released, quirks included, so
    that our numbers can be set beside ParEval's; ours is the one we read as "best of k".

  Example: A = [fail, 4x], B = [2x, 2x] give speedup@1 = 2.0 ours, 3.0 ParEval's.
* **fast_p** (KernelBench): the fraction of samples that are correct *and* faster than ``p`` times the
  baseline (``speedup > p``, strictly), computed per task and averaged over tasks (with one sample per
  task this is exactly KernelBench's fraction of tasks). Reported against the serial C++ reference
  (``fast_p``) and against the task's naive CUDA version (``fast_p_naive``) when that was timed.
  ``fast_0`` is the correctness rate.
* **compile rate**: the fraction of samples whose evaluated code compiled.
* **speedup means**: the arithmetic and the geometric mean, and the median, of the speedups of the
  *correct* samples only (a geometric mean cannot include the 0 of a failure).

A sample whose code compiled but whose runtime stages did not run (an executor without a GPU) has
unknown correctness. Any such sample in a group makes every runtime metric of the group ``None``: they
are never estimated from partial data, and the group reports ``runtime_measured = False``.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Iterable, Sequence
from typing import Literal

from pydantic import BaseModel, Field

Tier = Literal["easy", "medium", "hard"]
TIERS: tuple[Tier, ...] = ("easy", "medium", "hard")
OVERALL = "overall"

DEFAULT_FAST_P: tuple[float, ...] = (0.0, 1.0, 2.0, 5.0, 10.0)


class BenchError(Exception):
    """Root of every exception raised by the benchmark code (`bench.metrics`, `split`, `runner`, `report`)."""


class MetricsError(BenchError):
    """A metric was asked for something it is not defined on (k > n, c > n, a negative speedup...)."""


def tier_for_steps(steps: int) -> Tier:
    """The difficulty tier of a task from its teacher trajectory length: 1-2 easy, 3-5 medium, >5 hard."""
    if steps < 1:
        raise MetricsError(f"a trajectory needs at least one step, got {steps}")
    if steps <= 2:
        return "easy"
    if steps <= 5:
        return "medium"
    return "hard"


def pass_at_k(n: int, c: int, k: int) -> float:
    """Unbiased pass@k for one task: ``1 - C(n-c, k) / C(n, k)``."""
    if not 0 <= c <= n or not 1 <= k <= n:
        raise MetricsError(f"pass@k needs 0 <= c <= n and 1 <= k <= n, got n={n} c={c} k={k}")
    # comb(n - c, k) is 0 when fewer than k samples failed: some draw must then hold a correct one.
    return 1.0 - math.comb(n - c, k) / math.comb(n, k)


def expected_best_of_k(values: Sequence[float], k: int) -> float:
    """The expected maximum of `k` values drawn without replacement from `values` (our speedup@k)."""
    n = len(values)
    if not 1 <= k <= n:
        raise MetricsError(f"best-of-k needs 1 <= k <= n, got n={n} k={k}")
    if any(v < 0 or math.isnan(v) for v in values):
        raise MetricsError(f"speedups must be non-negative numbers, got {list(values)}")
    ordered = sorted(values)
    total = math.comb(n, k)
    # The i-th smallest (1-based) is the maximum of exactly C(i-1, k-1) of the C(n, k) draws.
    return sum(math.comb(i - 1, k - 1) * ordered[i - 1] for i in range(k, n + 1)) / total


def _pareval_comb(n: int, r: int) -> int:
    # ParEval's nCr: 1 (not 0) when n < r.
    return 1 if n < r else math.comb(n, r)


def pareval_speedup_at_k(correct_speedups: Sequence[float], k: int) -> float | None:
    """speedup@k of one task as ParEval's released ``analysis/metrics.py`` computes it.

    Only the task's correct samples are given; None when there are none (ParEval leaves such a task
    out of the mean). See the module docstring for the formula and its quirks (``k > 1``, ``m < k``).
    """
    if k < 1:
        raise MetricsError(f"speedup@k needs k >= 1, got {k}")
    if any(v <= 0 or math.isnan(v) for v in correct_speedups):
        raise MetricsError(
            f"correct samples' speedups must be positive numbers, got {list(correct_speedups)}"
        )
    m = len(correct_speedups)
    if m == 0:
        return None
    # Runtimes ascending is speedups descending: t_1 is the fastest sample.
    ordered = sorted(correct_speedups, reverse=True)
    total = _pareval_comb(m, k)
    return sum(_pareval_comb(j - 1, k - 1) * ordered[j - 1] for j in range(1, m + 1)) / total


def geometric_mean(values: Sequence[float]) -> float | None:
    """Geometric mean of positive values; None for none."""
    if not values:
        return None
    if any(v <= 0 for v in values):
        raise MetricsError(f"a geometric mean needs positive values, got {list(values)}")
    return math.exp(sum(math.log(v) for v in values) / len(values))


def arithmetic_mean(values: Sequence[float]) -> float | None:
    """Arithmetic mean; None for no values."""
    return sum(values) / len(values) if values else None


def median(values: Sequence[float]) -> float | None:
    """Median; None for no values."""
    return float(statistics.median(values)) if values else None


class SampleOutcome(BaseModel):
    """What the metrics need to know about one evaluated sample (one search run's final code)."""

    task_id: str
    tier: Tier
    compiled: bool
    correct: bool | None = Field(description="None: compiled, but the runtime stages did not run")
    speedup: float | None = Field(default=None, description="serial reference time / candidate time")
    baseline_speedup: float | None = Field(default=None, description="naive CUDA time / candidate time")

    def measured_speedup(self) -> float:
        """The speedup of a correct sample; 0 for a failed one (the speedup@k convention)."""
        if not self.correct:
            return 0.0
        if self.speedup is None:
            raise MetricsError(f"a correct sample of {self.task_id!r} has no measured speedup")
        return self.speedup


class MetricSummary(BaseModel):
    """The metrics of one group of samples (a tier, or all of them)."""

    tasks: int
    samples: int
    samples_per_task: int = Field(description="the smallest number of samples of any task in the group")
    compile_rate: float | None
    runtime_measured: bool = Field(description="False: some compiled sample was never run; no runtime metric")
    unmeasured_samples: int = Field(description="compiled samples whose correctness and speed are unknown")
    pass_at_k: dict[str, float] | None = None
    speedup_at_k: dict[str, float] | None = Field(
        default=None, description="ours: expected best of k samples, a failure counting 0, over all tasks"
    )
    speedup_at_k_pareval: dict[str, float] | None = Field(
        default=None,
        description="ParEval's released analysis/metrics.py: correct samples only, tasks with none left "
        "out, its nCr (1 when n < r); None when no task has a correct sample",
    )
    fast_p: dict[str, float] | None = Field(default=None, description="over the serial C++ reference")
    fast_p_naive: dict[str, float] | None = Field(default=None, description="over the naive CUDA version")
    correct_rate: float | None = Field(default=None, description="fraction of samples that are correct")
    speedup_arithmetic_mean: float | None = Field(default=None, description="over correct samples only")
    speedup_geometric_mean: float | None = Field(default=None, description="over correct samples only")
    speedup_median: float | None = Field(default=None, description="over correct samples only")


def _mean(values: Sequence[float]) -> float:
    # Only called on groups known to be non-empty.
    return sum(values) / len(values)


def _key(value: float) -> str:
    # JSON object keys: "1" for 1.0, "1.5" for 1.5.
    return f"{value:g}"


def summarize(
    outcomes: Iterable[SampleOutcome],
    ks: Sequence[int] = (1,),
    ps: Sequence[float] = DEFAULT_FAST_P,
) -> MetricSummary:
    """Metrics of one group of samples; a `k` above some task's sample count is left out."""
    by_task: dict[str, list[SampleOutcome]] = {}
    for outcome in outcomes:
        by_task.setdefault(outcome.task_id, []).append(outcome)
    samples = [o for group in by_task.values() for o in group]
    if not samples:
        return MetricSummary(
            tasks=0,
            samples=0,
            samples_per_task=0,
            compile_rate=None,
            runtime_measured=False,
            unmeasured_samples=0,
        )
    n_min = min(len(group) for group in by_task.values())
    unmeasured = sum(1 for o in samples if o.correct is None)
    summary = MetricSummary(
        tasks=len(by_task),
        samples=len(samples),
        samples_per_task=n_min,
        compile_rate=sum(o.compiled for o in samples) / len(samples),
        runtime_measured=unmeasured == 0,
        unmeasured_samples=unmeasured,
    )
    if unmeasured:
        return summary
    usable_ks = sorted({k for k in ks if 1 <= k <= n_min})
    groups = list(by_task.values())
    summary.pass_at_k = {
        str(k): _mean([pass_at_k(len(g), sum(bool(o.correct) for o in g), k) for g in groups])
        for k in usable_ks
    }
    summary.speedup_at_k = {
        str(k): _mean([expected_best_of_k([o.measured_speedup() for o in g], k) for g in groups])
        for k in usable_ks
    }
    pareval = {
        str(k): [
            v
            for g in groups
            if (v := pareval_speedup_at_k([o.measured_speedup() for o in g if o.correct], k)) is not None
        ]
        for k in usable_ks
    }
    if all(pareval.values()):
        summary.speedup_at_k_pareval = {k: _mean(values) for k, values in pareval.items()}
    summary.fast_p = {
        _key(p): _mean([sum(1 for o in g if o.correct and o.measured_speedup() > p) / len(g) for g in groups])
        for p in ps
    }
    correct = [o for o in samples if o.correct]
    if all(o.baseline_speedup is not None for o in correct):
        summary.fast_p_naive = {
            _key(p): _mean(
                [sum(1 for o in g if o.correct and (o.baseline_speedup or 0.0) > p) / len(g) for g in groups]
            )
            for p in ps
        }
    speedups = [o.measured_speedup() for o in correct]
    summary.correct_rate = len(correct) / len(samples)
    summary.speedup_arithmetic_mean = arithmetic_mean(speedups)
    summary.speedup_geometric_mean = geometric_mean(speedups)
    summary.speedup_median = median(speedups)
    return summary


def summarize_by_tier(
    outcomes: Iterable[SampleOutcome],
    ks: Sequence[int] = (1,),
    ps: Sequence[float] = DEFAULT_FAST_P,
) -> dict[str, MetricSummary]:
    """`summarize` for each tier that has samples, and for all of them under ``"overall"``."""
    items = list(outcomes)
    result: dict[str, MetricSummary] = {
        tier: summarize([o for o in items if o.tier == tier], ks, ps)
        for tier in TIERS
        if any(o.tier == tier for o in items)
    }
    result[OVERALL] = summarize(items, ks, ps)
    return result


class TeacherStepOutcome(BaseModel):
    """One step of a teacher trajectory, as the executor judged it."""

    task_id: str
    tier: Tier
    step: int = Field(ge=1)
    method: str
    compiled: bool
    correct: bool | None
    speedup: float | None = None
    baseline_speedup: float | None = None


class TeacherSummary(BaseModel):
    """How good the teacher trajectories of one group of tasks are."""

    tasks: int
    steps: int
    compile_rate: float | None = Field(description="fraction of steps that compiled")
    runtime_measured: bool
    unmeasured_steps: int
    step_pass_rate: float | None = Field(default=None, description="fraction of all steps that are correct")
    final_pass_rate: float | None = Field(
        default=None, description="fraction of tasks whose last step is correct"
    )
    final_speedup_median: float | None = Field(default=None, description="last step, correct ones only")
    final_speedup_geometric_mean: float | None = Field(
        default=None, description="last step, correct ones only"
    )
    final_speedup_arithmetic_mean: float | None = Field(
        default=None, description="last step, correct ones only"
    )
    best_speedup_median: float | None = Field(default=None, description="best correct step of each task")
    best_speedup_geometric_mean: float | None = Field(
        default=None, description="best correct step of each task"
    )


def summarize_teacher(steps: Iterable[TeacherStepOutcome]) -> TeacherSummary:
    """Pass rates and speedups (median, geometric mean) of teacher trajectories."""
    by_task: dict[str, list[TeacherStepOutcome]] = {}
    for step in steps:
        by_task.setdefault(step.task_id, []).append(step)
    items = [s for group in by_task.values() for s in group]
    unmeasured = sum(1 for s in items if s.correct is None)
    summary = TeacherSummary(
        tasks=len(by_task),
        steps=len(items),
        compile_rate=sum(s.compiled for s in items) / len(items) if items else None,
        runtime_measured=bool(items) and unmeasured == 0,
        unmeasured_steps=unmeasured,
    )
    if not items or unmeasured:
        return summary
    finals = [max(group, key=lambda s: s.step) for group in by_task.values()]
    final_speedups = [s.speedup for s in finals if s.correct and s.speedup is not None]
    best_speedups = [
        max(s.speedup for s in group if s.correct and s.speedup is not None)
        for group in by_task.values()
        if any(s.correct and s.speedup is not None for s in group)
    ]
    summary.step_pass_rate = sum(bool(s.correct) for s in items) / len(items)
    summary.final_pass_rate = sum(bool(s.correct) for s in finals) / len(finals)
    summary.final_speedup_median = median(final_speedups)
    summary.final_speedup_geometric_mean = geometric_mean(final_speedups)
    summary.final_speedup_arithmetic_mean = arithmetic_mean(final_speedups)
    summary.best_speedup_median = median(best_speedups)
    summary.best_speedup_geometric_mean = geometric_mean(best_speedups)
    return summary


def summarize_teacher_by_tier(steps: Iterable[TeacherStepOutcome]) -> dict[str, TeacherSummary]:
    """`summarize_teacher` per tier that has tasks, and ``"overall"``."""
    items = list(steps)
    result: dict[str, TeacherSummary] = {
        tier: summarize_teacher([s for s in items if s.tier == tier])
        for tier in TIERS
        if any(s.tier == tier for s in items)
    }
    result[OVERALL] = summarize_teacher(items)
    return result
