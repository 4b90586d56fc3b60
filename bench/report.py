"""Markdown reports (with PNG plots) of benchmark results, and comparisons of several runs.

``write_report([result], out_dir)`` writes ``report.md`` and its plots for one run;
``write_report(results, out_dir)`` with several runs adds a comparison (table, pass@k plot and
``comparison.json``). Runtime metrics of a run whose runtime stages never ran are shown as "not run",
never as numbers.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel

from bench.metrics import OVERALL, TIERS, BenchError, MetricSummary, TeacherSummary
from bench.results import RUNTIME_NOT_RUN_NOTE, BenchResult

logger = logging.getLogger(__name__)

COMPARISON_FORMAT: Literal["regraph.bench-comparison/v1"] = "regraph.bench-comparison/v1"
NOT_RUN = "not run"


class ReportError(BenchError):
    """A report cannot be written (no results, unwritable directory, plotting failed)."""


def _num(value: float | None, digits: int = 2) -> str:
    return "–" if value is None else f"{value:.{digits}f}"


def _pct(value: float | None) -> str:
    return "–" if value is None else f"{100 * value:.1f}%"


def _label(result: BenchResult) -> str:
    run = result.run
    if run.kind == "teacher":
        return "teacher trajectories"
    preset = f" [preset {run.search['preset']}]" if run.search and "preset" in run.search else ""
    return f"{run.method}{preset} ({run.model})"


def _table(header: Sequence[str], rows: Sequence[Sequence[str]]) -> str:
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    lines.extend("| " + " | ".join(row) + " |" for row in rows)
    return "\n".join(lines)


def _run_table(result: BenchResult) -> str:
    run = result.run
    device = run.device.get("name") or "no GPU"
    rows = [
        ["kind", run.kind],
        ["method", run.method or "–"],
        ["model", run.model or "–"],
        ["knowledge", run.knowledge or "–"],
        ["samples per task", str(run.samples or "–")],
        ["evaluation budget per sample", str(run.evaluation_budget or "–")],
        ["token budget per sample", str(run.token_budget or "none")],
        ["search settings", _search_settings(run.search)],
        ["tasks", run.task_selection],
        ["split", f"seed {run.split['seed']}" if run.split else "–"],
        ["executor", f"{run.executor_url} ({device}, nvcc {run.device.get('nvcc') or '?'})"],
        ["verification", run.verification],
        ["created", result.created_at],
        ["complete", "yes" if result.complete else f"no, missing: {', '.join(result.missing_tasks)}"],
    ]
    return _table(["", ""], rows)


def _search_settings(search: dict[str, Any] | None) -> str:
    if not search:
        return "–"
    shown = ["rollouts", "exploration", "prior", "epsilon", "revisit_penalty", "max_rollout_depth"]
    shown += ["rollouts_in_flight", "examples_per_step", "rag_examples", "attempts", "max_path_length"]
    values = ", ".join(
        f"{k} {search[k]:.3g}" if isinstance(search[k], float) else f"{k} {search[k]}"
        for k in shown
        if k in search
    )
    preset = f"preset **{search['preset']}**: " if "preset" in search else ""
    return preset + values


def _metric_rows(metrics: dict[str, MetricSummary], ks: Sequence[int], ps: Sequence[float]) -> str:
    header = ["tier", "tasks", "samples", "compile rate"]
    header += [f"pass@{k}" for k in ks] + [f"speedup@{k} (ours)" for k in ks]
    header += [f"speedup@{k} (ParEval code)" for k in ks] + [f"fast_{p:g}" for p in ps]
    header += ["geo-mean speedup", "arith-mean speedup", "median speedup"]
    rows = []
    for tier in [*TIERS, OVERALL]:
        m = metrics.get(tier)
        if m is None:
            continue
        row = [tier, str(m.tasks), str(m.samples), _pct(m.compile_rate)]
        if not m.runtime_measured:
            row += [NOT_RUN] * (3 * len(ks) + len(ps) + 3)
        else:
            row += [_pct((m.pass_at_k or {}).get(str(k))) for k in ks]
            row += [_num((m.speedup_at_k or {}).get(str(k))) for k in ks]
            row += [_num((m.speedup_at_k_pareval or {}).get(str(k))) for k in ks]
            row += [_pct((m.fast_p or {}).get(f"{p:g}")) for p in ps]
            row += [_num(m.speedup_geometric_mean), _num(m.speedup_arithmetic_mean), _num(m.speedup_median)]
        rows.append(row)
    return _table(header, rows)


def _teacher_rows(metrics: dict[str, TeacherSummary]) -> str:
    header = [
        "tier",
        "tasks",
        "steps",
        "compile rate",
        "step pass rate",
        "final pass rate",
        "final speedup median",
        "final speedup geo-mean",
        "best speedup median",
        "best speedup geo-mean",
    ]
    rows = []
    for tier in [*TIERS, OVERALL]:
        m = metrics.get(tier)
        if m is None:
            continue
        row = [tier, str(m.tasks), str(m.steps), _pct(m.compile_rate)]
        if not m.runtime_measured:
            row += [NOT_RUN] * 6
        else:
            row += [
                _pct(m.step_pass_rate),
                _pct(m.final_pass_rate),
                _num(m.final_speedup_median),
                _num(m.final_speedup_geometric_mean),
                _num(m.best_speedup_median),
                _num(m.best_speedup_geometric_mean),
            ]
        rows.append(row)
    return _table(header, rows)


def _usable_ks(result: BenchResult) -> list[int]:
    overall = (result.metrics or {}).get(OVERALL)
    limit = overall.samples_per_task if overall else 0
    return [k for k in result.run.ks if k <= limit] or [1]


def _speedups_by_tier(result: BenchResult) -> dict[str, list[float]]:
    found: dict[str, list[float]] = {tier: [] for tier in TIERS}
    if result.run.kind == "teacher":
        finals: dict[str, Any] = {}
        for step in result.teacher_steps:
            if step.trajectory == 1 and (step.task_id not in finals or step.step > finals[step.task_id].step):
                finals[step.task_id] = step
        for step in finals.values():
            if step.correct and step.speedup:
                found[step.tier].append(step.speedup)
    else:
        for sample in result.samples:
            if sample.correct and sample.speedup:
                found[sample.tier].append(sample.speedup)
    return {tier: values for tier, values in found.items() if values}


def pyplot() -> Any:
    """matplotlib's pyplot on the Agg backend (no display needed)."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError as e:
        raise ReportError(f"matplotlib is needed for the plots: {e}") from e
    return plt


def plot_speedups(result: BenchResult, path: Path) -> bool:
    """Box plot (with the points) of the measured speedups per tier; False when there are none."""
    by_tier = _speedups_by_tier(result)
    if not result.runtime_measured or not by_tier:
        return False
    plt = pyplot()
    fig, ax = plt.subplots(figsize=(6, 4))
    tiers = list(by_tier)
    ax.boxplot([by_tier[t] for t in tiers], showfliers=False)
    ax.set_xticks(range(1, len(tiers) + 1), [f"{t}\n(n={len(by_tier[t])})" for t in tiers])
    for i, tier in enumerate(tiers, start=1):
        values = by_tier[tier]
        # A deterministic spread of the points across the box, so equal values stay visible.
        xs = [i - 0.15 + 0.3 * (j + 0.5) / len(values) for j in range(len(values))]
        ax.scatter(xs, values, s=12, alpha=0.7, color="tab:blue")
    ax.set_yscale("log")
    ax.axhline(1.0, color="grey", linewidth=0.8, linestyle="--")
    what = "final step of each trajectory" if result.run.kind == "teacher" else "correct samples"
    ax.set_ylabel("speedup over the serial reference (log)")
    ax.set_title(f"Speedup per tier: {_label(result)}\n({what})", fontsize=9)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)
    return True


def plot_pass_at_k(results: Sequence[BenchResult], path: Path) -> bool:
    """pass@k per method (overall), one line per run; False when no run has measured pass@k."""
    series = []
    for result in results:
        overall = (result.metrics or {}).get(OVERALL)
        if overall is None or overall.pass_at_k is None:
            continue
        points = sorted((int(k), v) for k, v in overall.pass_at_k.items())
        series.append((_label(result), points))
    if not series:
        return False
    plt = pyplot()
    fig, ax = plt.subplots(figsize=(6, 4))
    for label, points in series:
        ax.plot([k for k, _ in points], [100 * v for _, v in points], marker="o", label=label)
    ax.set_xlabel("k (samples)")
    ax.set_ylabel("pass@k (%)")
    ax.set_ylim(0, 100)
    ax.set_title("pass@k per method (all tiers)", fontsize=9)
    ax.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)
    return True


def _task_rows(result: BenchResult) -> str:
    if result.run.kind == "teacher":
        rows = []
        for step in result.teacher_steps:
            state = (
                "correct" if step.correct else (NOT_RUN if step.correct is None else step.error or "failed")
            )
            rows.append(
                [
                    step.task_id,
                    step.tier,
                    str(step.step),
                    step.method,
                    "yes" if step.compiled else "no",
                    state,
                    _num(step.speedup),
                    _num(step.baseline_speedup),
                ]
            )
        return _table(
            ["task", "tier", "step", "method", "compiled", "verdict", "speedup", "vs naive CUDA"], rows
        )
    by_task: dict[str, list[Any]] = {}
    for sample in result.samples:
        by_task.setdefault(sample.task_id, []).append(sample)
    rows = []
    for task_id, samples in by_task.items():
        speedups = [s.speedup for s in samples if s.correct and s.speedup is not None]
        unknown = sum(1 for s in samples if s.correct is None)
        correct = f"{sum(bool(s.correct) for s in samples)}" if not unknown else NOT_RUN
        errors = sorted({s.error for s in samples if s.error})
        rows.append(
            [
                task_id,
                samples[0].tier,
                str(len(samples)),
                str(sum(s.compiled for s in samples)),
                correct,
                _num(max(speedups) if speedups else None),
                ", ".join(errors) or "–",
            ]
        )
    return _table(["task", "tier", "samples", "compiled", "correct", "best speedup", "errors"], rows)


def render_result(result: BenchResult, out_dir: Path, prefix: str = "") -> str:
    """The markdown section of one run (plots are written next to it, named with `prefix`)."""
    parts = [f"## {_label(result)}", _run_table(result)]
    if not result.runtime_measured:
        parts.append(f"> **Runtime stages not run.** {result.note or RUNTIME_NOT_RUN_NOTE}")
    if result.run.kind == "teacher":
        parts.append("### Per tier (teacher trajectories; speedups over the serial C++ reference)")
        parts.append(_teacher_rows(result.teacher_metrics or {}))
    else:
        parts.append("### Per tier")
        parts.append(_metric_rows(result.metrics or {}, _usable_ks(result), result.run.ps))
        parts.append(
            "pass@k: unbiased estimator averaged over tasks. speedup@k (ours): expected best speedup over the "
            "serial reference among k samples, failures counting 0, averaged over all tasks. speedup@k "
            "(ParEval code): as ParEval's released analysis/metrics.py computes it, over correct samples only "
            "(a task with none left out; for k > 1 its own weighting, see docs/benchmark.md). fast_p: fraction of samples "
            "correct and more than p times faster than the serial reference, averaged over tasks. "
            "Geo-/arith-mean and median speedups are over correct samples only."
        )
    totals = result.totals
    parts.append(
        f"Spent: {totals.executor_evaluations} executor evaluations ({totals.search_evaluations} in the searches, "
        f"{totals.final_evaluations} final re-evaluations), {totals.prompt_tokens} prompt and "
        f"{totals.completion_tokens} completion tokens, {totals.seconds:.0f} s."
    )
    plot = out_dir / f"{prefix}speedup_per_tier.png"
    if plot_speedups(result, plot):
        parts.append(f"![speedup per tier]({plot.name})")
    elif result.runtime_measured:
        parts.append("No correct sample, so no speedup plot.")
    else:
        parts.append(f"No speedup plot: the runtime stages were {NOT_RUN}.")
    parts.append("### Per task")
    parts.append(_task_rows(result))
    return "\n\n".join(parts)


class ComparisonRow(BaseModel):
    """One run in a comparison."""

    label: str
    kind: str
    method: str | None
    model: str | None
    runtime_measured: bool
    complete: bool
    overall: MetricSummary | None
    teacher_overall: TeacherSummary | None
    executor_evaluations: int
    tokens: int


class Comparison(BaseModel):
    """``comparison.json``: the overall numbers of several runs side by side."""

    format: Literal["regraph.bench-comparison/v1"] = COMPARISON_FORMAT
    runs: list[ComparisonRow]


def _comparison(results: Sequence[BenchResult]) -> Comparison:
    return Comparison(
        runs=[
            ComparisonRow(
                label=_label(r),
                kind=r.run.kind,
                method=r.run.method,
                model=r.run.model,
                runtime_measured=r.runtime_measured,
                complete=r.complete,
                overall=(r.metrics or {}).get(OVERALL),
                teacher_overall=(r.teacher_metrics or {}).get(OVERALL),
                executor_evaluations=r.totals.executor_evaluations,
                tokens=r.totals.prompt_tokens + r.totals.completion_tokens,
            )
            for r in results
        ]
    )


def _comparison_table(comparison: Comparison) -> str:
    rows = []
    for run in comparison.runs:
        m = run.overall
        measured = m is not None and m.runtime_measured
        rows.append(
            [
                run.label,
                _pct(
                    m.compile_rate
                    if m
                    else (run.teacher_overall.compile_rate if run.teacher_overall else None)
                ),
                _pct((m.pass_at_k or {}).get("1")) if measured and m else NOT_RUN,
                _num((m.speedup_at_k or {}).get("1")) if measured and m else NOT_RUN,
                _num((m.speedup_at_k_pareval or {}).get("1")) if measured and m else NOT_RUN,
                _pct((m.fast_p or {}).get("1")) if measured and m else NOT_RUN,
                _num(m.speedup_geometric_mean) if measured and m else NOT_RUN,
                str(run.executor_evaluations),
                str(run.tokens),
            ]
        )
    return _table(
        [
            "run",
            "compile rate",
            "pass@1",
            "speedup@1 (ours)",
            "speedup@1 (ParEval code)",
            "fast_1",
            "geo-mean speedup",
            "evaluations",
            "tokens",
        ],
        rows,
    )


def write_report(results: Sequence[BenchResult], out_dir: Path) -> Path:
    """Write ``report.md`` (and plots; with several runs also ``comparison.json``); returns its path."""
    if not results:
        raise ReportError("no results to report")
    try:
        out_dir.mkdir(parents=True, exist_ok=True)
        parts = ["# ReGraph benchmark report"]
        if len(results) > 1:
            comparison = _comparison(results)
            (out_dir / "comparison.json").write_text(
                comparison.model_dump_json(indent=1) + "\n", encoding="utf-8"
            )
            parts.append("## Comparison (all tiers)")
            parts.append(_comparison_table(comparison))
            if plot_pass_at_k(results, out_dir / "pass_at_k.png"):
                parts.append("![pass@k per method](pass_at_k.png)")
            else:
                parts.append(f"No pass@k plot: no run measured correctness (runtime stages {NOT_RUN}).")
        for number, result in enumerate(results, start=1):
            prefix = f"run{number}_" if len(results) > 1 else ""
            parts.append(render_result(result, out_dir, prefix))
        path = out_dir / "report.md"
        path.write_text("\n\n".join(parts) + "\n", encoding="utf-8")
    except OSError as e:
        raise ReportError(f"cannot write the report into {out_dir}: {e}") from e
    logger.info("wrote %s", path)
    return path
