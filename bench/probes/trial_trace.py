"""Where the stop rule's spread comes from: the trials' times that the verdicts keep (session 25).

Usage: python -m bench.probes.trial_trace RUN.json[.gz] [--kind function]
(a per-verdict JSON of ``bench.probes.throughput``, whose records carry ``samples_ms``, ``sets`` and
``slots``: ``executor.checking.trial_trace``; 57d0025's ``bench.throughput`` keeps none).

Per task, over its correct candidates whose record has a trace (trial ``i`` on timing set ``i % sets``
and rotated copy ``i % slots``), the mean of:

* ``first/repeat``: each copy's first visit (trials ``0 .. slots-1``) over the median of the rest:
  a cold first visit (data from memory where a repeat's come from a cache) if well above 1;
* ``set offset``: the relative difference between the sets' medians over their repeat visits (another
  set's values doing other work: data-dependent tasks);
* ``copy offset``: within each set, the relative difference between the medians of its copies'
  repeat visits (two copies of one set's values running at different speeds: their memory);
* the spread the stop rule measures over the trace (``executor.checking.within_set_cov``): every pair
  of one set's samples (the default), the repeat pairs only (``repeat_pairs``), and every pair of one
  copy's repeat visits (what a rule grouping by copy would see);
* ``2nd round/rest``: the second round over the copies (trials ``slots .. 2*slots-1``) over the median
  of the trials after it, where there are at least 2 of them (else NaN, left out of the means): well above 1, the times were still
  settling after the first round (a warm-up too short), which ``first/repeat`` alone would take for
  cold copies;
* ``lag-1``: the correlation of successive trials' residuals (each trial over its copy's median): runs
  of slow trials (the host busy with other work) if well above 0.
"""

from __future__ import annotations

import argparse
import collections
import gzip
import json
import math
import statistics
from pathlib import Path
from typing import Any

import numpy as np

from executor.checking import within_set_cov

Record = dict[str, Any]


def load(path: str) -> list[Record]:
    """The records of every run in a throughput JSON (gzipped or not)."""
    if path.endswith(".gz"):
        with gzip.open(path, "rt") as f:
            raw = f.read()
    else:
        raw = Path(path).read_text()
    data = json.loads(raw)
    return [r for run in data.get("runs", []) for r in run.get("records", [])]


def _rel(a: float, b: float) -> float:
    mid = (a + b) / 2
    return abs(a - b) / mid if mid > 0 else 0.0


def trace_figures(samples: list[float], sets: int, slots: int) -> dict[str, float] | None:
    """The figures above for one trace; None when it is too short (fewer than two rounds of copies)."""
    sets, slots = max(sets, 1), max(slots, sets, 1)
    arr = np.asarray(samples, dtype=np.float64)
    if arr.size < 2 * slots or float(np.median(arr)) <= 0:
        return None
    rest = float(np.median(arr[slots:]))
    set_medians = [
        float(np.median(arr[slots + g :: sets])) for g in range(sets) if arr[slots + g :: sets].size
    ]
    copy_offsets = []
    for g in range(sets):
        copies = [arr[slots + j :: slots] for j in range(g, slots, sets)]
        medians = [float(np.median(c)) for c in copies if c.size]
        if len(medians) >= 2:
            copy_offsets.append((max(medians) - min(medians)) / float(np.median(medians)))
    copy_median = np.asarray([float(np.median(arr[slots + i % slots :: slots])) for i in range(slots)])
    residual = arr[slots:] / copy_median[np.arange(slots, arr.size) % slots] - 1.0
    lag1 = (
        float(np.corrcoef(residual[:-1], residual[1:])[0, 1])
        if residual.size >= 3 and float(np.std(residual[:-1])) > 0 and float(np.std(residual[1:])) > 0
        else 0.0
    )
    # Every pair of one copy's repeat visits: within_set_cov over the copies, the first round left out.
    by_copy = within_set_cov(list(arr[slots:]), slots) if slots > 1 else within_set_cov(list(arr[1:]), 1)
    after = arr[2 * slots :]
    second = (
        float(np.mean(arr[slots : 2 * slots])) / float(np.median(after))
        if after.size >= 2 and float(np.median(after)) > 0
        else math.nan
    )
    return {
        "first/repeat": float(np.mean(arr[:slots])) / rest if rest > 0 else 0.0,
        "2nd round/rest": second,
        "set offset": _rel(max(set_medians), min(set_medians)) if len(set_medians) >= 2 else 0.0,
        "copy offset": statistics.fmean(copy_offsets) if copy_offsets else 0.0,
        "spread: every pair": within_set_cov(list(arr), sets),
        "spread: repeat pairs": within_set_cov(list(arr), sets, repeat_pairs=1),
        "spread: one copy's repeats": by_copy,
        "lag-1": lag1,
    }


FIGURES = [
    "first/repeat",
    "2nd round/rest",
    "set offset",
    "copy offset",
    "spread: every pair",
    "spread: repeat pairs",
    "spread: one copy's repeats",
    "lag-1",
]


def _mean(figs: list[dict[str, float]], key: str) -> str:
    """The mean of ``key`` over the traces that have it (not NaN), to 3 decimals; "-" where none has."""
    values = [v for f in figs if not math.isnan(v := f[key])]
    return f"{statistics.fmean(values):.3f}" if values else "-"


def table(records: list[Record], kind: str = "function") -> str:
    """The markdown table of the figures per task (correct candidates with a trace), and over all."""
    by_task: dict[str, list[dict[str, float]]] = collections.defaultdict(list)
    trials: dict[str, list[int]] = collections.defaultdict(list)
    for r in records:
        if r.get("task_kind") != kind or r.get("candidate") != "correct" or not r.get("samples_ms"):
            continue
        fig = trace_figures(r["samples_ms"], int(r.get("sets") or 1), int(r.get("slots") or 1))
        if fig is not None:
            by_task[r["task"]].append(fig)
            trials[r["task"]].append(int(r.get("trials") or len(r["samples_ms"])))
    lines = [
        "| task | n | trials | " + " | ".join(FIGURES) + " |",
        "|---|---|---|" + "---|" * len(FIGURES),
    ]
    everything: list[dict[str, float]] = []
    for task in sorted(by_task):
        figs = by_task[task]
        everything += figs
        cells = [_mean(figs, k) for k in FIGURES]
        lines.append(
            f"| {task} | {len(figs)} | {statistics.fmean(trials[task]):.1f} | " + " | ".join(cells) + " |"
        )
    if everything:
        cells = [f"**{_mean(everything, k)}**" for k in FIGURES]
        n_trials = statistics.fmean(t for ts in trials.values() for t in ts)
        lines.append(f"| **all** | {len(everything)} | {n_trials:.1f} | " + " | ".join(cells) + " |")
    else:
        lines.append("| (no record with a trace of two rounds of copies) |" + " |" * (len(FIGURES) + 2))
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("run")
    parser.add_argument("--kind", default="function", choices=["function", "kernel"])
    args = parser.parse_args(argv)
    print(table(load(args.run), args.kind))


if __name__ == "__main__":
    main()
