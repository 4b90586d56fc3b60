"""Budget and rollout sensitivity: the same benchmark run over a grid of budgets and rollout counts.

``regraph bench sweep`` runs the CUDAEval runner once per (evaluation budget, rollouts) pair, each in
its own directory (resumable like any run), then writes ``sweep.json`` (``regraph.sweep/v1``),
``sweep.md`` and two plots: pass@k and speedup@k against the budget, one line per rollout count, with
error bars.

Error bars: see `ERROR_BARS`. Both speedup@k conventions are computed (ours, and ParEval's code);
the plot shows ours.
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, Field

from bench.metrics import BenchError, SampleOutcome, expected_best_of_k, pareval_speedup_at_k, pass_at_k
from bench.report import pyplot
from bench.runner import BenchResult

SWEEP_FORMAT = "regraph.sweep/v1"
ERROR_BARS = (
    "the standard error of the mean over tasks: each task's pass@k (or speedup@k) is estimated from "
    "its n samples (seeds) with the usual estimators, and the bar is std(per-task values, ddof=1) / "
    "sqrt(tasks). It says how much the mean would move with another draw of tasks like these; it is "
    "not the spread between seeds."
)


class SweepError(BenchError):
    """A sweep was asked for something it cannot do (an empty grid, a run that failed)."""


class MeanWithError(BaseModel):
    """A mean over tasks with its standard error (None with fewer than two tasks)."""

    mean: float
    stderr: float | None
    tasks: int


class SweepPoint(BaseModel):
    """One (budget, rollouts) run of the sweep, reduced to its curves' points."""

    budget: int
    rollouts: int
    run_dir: str
    complete: bool
    runtime_measured: bool
    compile_rate: float | None
    samples_per_task: int
    pass_at_k: dict[str, MeanWithError] | None = None
    speedup_at_k: dict[str, MeanWithError] | None = Field(default=None, description="ours")
    speedup_at_k_pareval: dict[str, MeanWithError] | None = Field(
        default=None, description="ParEval's released code (tasks without a correct sample left out)"
    )
    evaluations: int
    tokens: int


class Sweep(BaseModel):
    """``sweep.json``."""

    format: Literal["regraph.sweep/v1"] = "regraph.sweep/v1"
    method: str
    model: str
    budgets: list[int]
    rollouts: list[int]
    points: list[SweepPoint]
    note: str


def mean_with_error(values: Sequence[float]) -> MeanWithError:
    """Mean and standard error of the mean of per-task values."""
    if not values:
        raise SweepError("no task has a value")
    mean = sum(values) / len(values)
    if len(values) < 2:
        return MeanWithError(mean=mean, stderr=None, tasks=len(values))
    variance = sum((v - mean) ** 2 for v in values) / (len(values) - 1)
    return MeanWithError(mean=mean, stderr=math.sqrt(variance / len(values)), tasks=len(values))


def _per_task(result: BenchResult) -> dict[str, list[SampleOutcome]]:
    by_task: dict[str, list[SampleOutcome]] = {}
    for sample in result.samples:
        by_task.setdefault(sample.task_id, []).append(sample.outcome())
    return by_task


def point_from_result(
    result: BenchResult, budget: int, rollouts: int, run_dir: Path, ks: Sequence[int]
) -> SweepPoint:
    """The curves' points of one finished run (runtime metrics only when the runtime stages ran)."""
    by_task = _per_task(result)
    n = min((len(g) for g in by_task.values()), default=0)
    overall = (result.metrics or {}).get("overall")
    point = SweepPoint(
        budget=budget,
        rollouts=rollouts,
        run_dir=str(run_dir),
        complete=result.complete,
        runtime_measured=result.runtime_measured,
        compile_rate=overall.compile_rate if overall else None,
        samples_per_task=n,
        evaluations=result.totals.executor_evaluations,
        tokens=result.totals.prompt_tokens + result.totals.completion_tokens,
    )
    if not result.runtime_measured or not by_task:
        return point
    usable = [k for k in ks if 1 <= k <= n]
    groups = list(by_task.values())
    point.pass_at_k = {
        str(k): mean_with_error([pass_at_k(len(g), sum(bool(o.correct) for o in g), k) for g in groups])
        for k in usable
    }
    point.speedup_at_k = {
        str(k): mean_with_error([expected_best_of_k([o.measured_speedup() for o in g], k) for g in groups])
        for k in usable
    }
    pareval: dict[str, MeanWithError] = {}
    for k in usable:
        values = [pareval_speedup_at_k([o.measured_speedup() for o in g if o.correct], k) for g in groups]
        kept = [v for v in values if v is not None]
        if kept:
            pareval[str(k)] = mean_with_error(kept)
    point.speedup_at_k_pareval = pareval or None
    return point


RunOne = Callable[[int, int, Path], BenchResult]
"""Runs (or resumes) the benchmark with one budget and rollout count into a directory."""


def run_sweep(
    run_one: RunOne,
    budgets: Sequence[int],
    rollouts: Sequence[int],
    out_dir: Path,
    *,
    method: str,
    model: str,
    ks: Sequence[int] = (1,),
) -> Sweep:
    """Run every (budget, rollouts) pair, then write ``sweep.json``, ``sweep.md`` and the plots."""
    if not budgets or not rollouts:
        raise SweepError("a sweep needs at least one budget and one rollout count")
    points = []
    for r in rollouts:
        for b in budgets:
            run_dir = out_dir / f"budget{b}_rollouts{r}"
            points.append(point_from_result(run_one(b, r, run_dir), b, r, run_dir, ks))
    sweep = Sweep(
        method=method,
        model=model,
        budgets=list(budgets),
        rollouts=list(rollouts),
        points=points,
        note=f"Error bars: {ERROR_BARS}",
    )
    write_sweep(sweep, out_dir)
    return sweep


def _cell(value: MeanWithError | None, percent: bool) -> str:
    if value is None:
        return "–"
    if percent:
        error = f" ± {100 * value.stderr:.1f}%" if value.stderr is not None else ""
        return f"{100 * value.mean:.1f}%{error}"
    error = f" ± {value.stderr:.2f}" if value.stderr is not None else ""
    return f"{value.mean:.2f}{error}"


def _plot(sweep: Sweep, metric: str, k: str, path: Path, ylabel: str) -> bool:
    series = []
    for r in sweep.rollouts:
        xs, ys, es = [], [], []
        for p in sweep.points:
            curve = getattr(p, metric)
            if p.rollouts == r and curve and k in curve:
                xs.append(p.budget)
                ys.append(curve[k].mean)
                es.append(curve[k].stderr or 0.0)
        if xs:
            series.append((r, xs, ys, es))
    if not series:
        return False
    plt = pyplot()
    fig, ax = plt.subplots(figsize=(6, 4))
    for r, xs, ys, es in series:
        ax.errorbar(xs, ys, yerr=es, marker="o", capsize=3, label=f"{r} rollouts")
    ax.set_xscale("log", base=2)
    ax.set_xlabel("evaluation budget per search")
    ax.set_ylabel(ylabel)
    ax.set_title(f"{sweep.method}: {ylabel} vs budget (mean over tasks ± s.e.)", fontsize=9)
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)
    return True


def write_sweep(sweep: Sweep, out_dir: Path) -> Path:
    """Write ``sweep.json``, ``sweep.md`` and (when anything was measured) the two plots."""
    out_dir.mkdir(parents=True, exist_ok=True)
    (out_dir / "sweep.json").write_text(sweep.model_dump_json(indent=1) + "\n", encoding="utf-8")
    lines = [
        f"# Budget and rollout sweep: {sweep.method} ({sweep.model})",
        "",
        "| budget | rollouts | complete | compile rate | pass@1 | speedup@1 (ours) | speedup@1 (ParEval code) "
        "| evaluations | tokens | run |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    for p in sweep.points:
        measured = p.runtime_measured
        lines.append(
            f"| {p.budget} | {p.rollouts} | {'yes' if p.complete else 'no'} | "
            f"{'–' if p.compile_rate is None else f'{100 * p.compile_rate:.1f}%'} | "
            f"{_cell((p.pass_at_k or {}).get('1'), True) if measured else 'not run'} | "
            f"{_cell((p.speedup_at_k or {}).get('1'), False) if measured else 'not run'} | "
            f"{_cell((p.speedup_at_k_pareval or {}).get('1'), False) if measured else 'not run'} | "
            f"{p.evaluations} | {p.tokens} | {Path(p.run_dir).name} |"
        )
    lines += ["", sweep.note, ""]
    plots = [
        ("pass_at_k", "pass@1", "sweep_pass_at_1.png"),
        ("speedup_at_k", "speedup@1 (ours)", "sweep_speedup_at_1.png"),
    ]
    for metric, label, name in plots:
        if _plot(sweep, metric, "1", out_dir / name, label):
            lines.append(f"![{label}]({name})")
        else:
            lines.append(f"No {label} plot: no run measured correctness (runtime stages not run).")
    path = out_dir / "sweep.md"
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


def read_sweep(path: Path) -> Sweep:
    """Read a ``sweep.json``."""
    return Sweep.model_validate(json.loads(path.read_text(encoding="utf-8")))
