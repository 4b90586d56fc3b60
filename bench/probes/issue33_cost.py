"""Where issue 33's cost goes: the `long` queue's verdicts of two trees, stage by stage (session 23).

Usage: python -m bench.probes.issue33_cost NEW.json[.gz] BASE.json[.gz] [--steady-after 40]
(the per-verdict JSONs of ``bench.probes.throughput`` / 57d0025's ``bench.throughput``, as
``bench/device/run_s18_ab.sh`` writes them; session 23's are in bench/results/2026-11-29_s23/cost33/).

Prints markdown tables:
1. the runs: rate after the cutoff, the share of the window that verdicts finished after it held the
   GPU lock, the naive baselines' turns (in no verdict's ``gpu_held``), tasks first seen after the cutoff;
2. per kind, correct candidates finished after the cutoff: mean seconds per stage, before the GPU turn
   and under it, both trees and the difference;
3. per function task: trials, stop reasons, median, the trials' wall time split into the timed calls
   (trials x median) and the rest (warm-up, restores, L2 flushes, spot samples, the inputs' check after
   the trials), and that rest's fixed part and part per trial (a least-squares line over the task's
   candidates, where their trial counts differ).
"""

from __future__ import annotations

import argparse
import collections
import gzip
import json
import statistics
from pathlib import Path
from typing import Any

Record = dict[str, Any]

# Stages a correct candidate spends before its GPU turn (the evaluator's waits, then the worker's
# preparation, which overlaps the compile) and under it (gpu_held and its parts; compare is part of
# correctness and last_check, reap_wait runs beside the checks in a thread).
BEFORE = [
    "compile",
    "task_prepare_wait",
    "reference_wait",
    "prepare_wait",
    "gpu_wait",
    "inputs",
    "timing_inputs",
    "expected_check",
    "prepare_lock_wait",
    "context_lock_wait",
    "context_create",
]
UNDER = [
    "gpu_held",
    "load",
    "correctness",
    "compare",
    "timing_lock_wait",
    "timing_trials",
    "last_check",
    "spot_check",
    "expected_load",
    "baseline_timing",
    "reap_wait",
]


def load(path: Path) -> dict[str, Any]:
    """A probe's JSON (gzipped when its name ends in .gz)."""
    raw = gzip.decompress(path.read_bytes()) if path.suffix == ".gz" else path.read_bytes()
    data: dict[str, Any] = json.loads(raw)
    return data


def run_of(data: dict[str, Any]) -> dict[str, Any]:
    run: dict[str, Any] = data["runs"][0]
    return run


def mean(values: list[float]) -> float:
    return statistics.fmean(values) if values else 0.0


def correct(records: list[Record], kind: str, after: float) -> list[Record]:
    """Correct candidates of ``kind`` that finished after ``after`` s and were timed."""
    return [
        r
        for r in records
        if r["task_kind"] == kind
        and r["candidate"] == "correct"
        and r.get("trials")
        and r["finished_s"] >= after
    ]


def steady_lock_share(records: list[Record], after: float, end: float) -> float:
    """The GPU lock time of the verdicts finished after ``after`` over the window ``after..end``: near 1
    when the lock, not what comes before it, limits the rate."""
    held = sum(float(r["seconds"].get("gpu_held", 0.0)) for r in records if r["finished_s"] >= after)
    return held / max(end - after, 1e-9)


def first_seen(records: list[Record]) -> dict[str, float]:
    """When each task's first verdict came (s into the run)."""
    first: dict[str, float] = {}
    for r in sorted(records, key=lambda r: r["finished_s"]):
        first.setdefault(r["task"], r["finished_s"])
    return first


def line_fit(xs: list[float], ys: list[float]) -> tuple[float, float] | None:
    """Least-squares ``y = a + b x`` as (a, b); None unless x takes two values or more."""
    if len(set(xs)) < 2:
        return None
    mx, my = mean(xs), mean(ys)
    b = sum((x - mx) * (y - my) for x, y in zip(xs, ys, strict=True)) / sum((x - mx) ** 2 for x in xs)
    return my - b * mx, b


def trial_split(r: Record) -> tuple[float, float]:
    """A candidate's trials' wall time (s) as (the timed calls: trials x median, the rest)."""
    calls = r["trials"] * r["median_ms"] / 1000.0
    return calls, r["seconds"].get("timing_trials", 0.0) - calls


def runs_table(named: dict[str, dict[str, Any]], after: float) -> list[str]:
    out = [
        f"| tree | verdicts | after {after:g} s: verdicts, evals/h | lock held by those verdicts | "
        "baseline turns (s held) | tasks first seen after the cutoff (latest s) |",
        "|---|---|---|---|---|---|",
    ]
    for name, data in named.items():
        run = run_of(data)
        recs = run["records"]
        end = max(r["finished_s"] for r in recs)
        steady = run.get("steady") or {}
        turns = (run.get("turns") or [{}])[0]
        base_turns = turns.get("turns", {}).get("baseline")
        held = turns.get("held_s", {}).get("baseline")
        late = [t for t in first_seen(recs).values() if t >= after]
        out.append(
            f"| {name} | {run['verdicts']} | {steady.get('verdicts')}, {steady.get('per_hour')} | "
            f"{steady_lock_share(recs, after, end):.0%} | "
            + (f"{base_turns} ({held:.1f} s)" if base_turns is not None else "in candidates' turns")
            + f" | {len(late)} ({max(late, default=0):.1f}) |"
        )
    return out


def stages_table(named: dict[str, dict[str, Any]], kind: str, after: float) -> list[str]:
    names = list(named)
    recs = {n: correct(run_of(d)["records"], kind, after) for n, d in named.items()}
    head = " | ".join(f"{n} (n {len(recs[n])})" for n in names)
    out = [f"| {kind}: mean s | {head} | {names[0]} - {names[-1]} |", "|---|" + "---|" * (len(names) + 1)]
    for where, keys in (("before the turn", BEFORE), ("under the lock", UNDER)):
        out.append(f"| *{where}* |" + " |" * (len(names) + 1))
        for key in keys:
            cols = [mean([r["seconds"].get(key, 0.0) for r in recs[n]]) for n in names]
            out.append(
                f"| {key} | " + " | ".join(f"{c:.3f}" for c in cols) + f" | {cols[0] - cols[-1]:+.3f} |"
            )
    for label, pick in (("trials", lambda r: r["trials"]), ("wall ms per trial", per_trial_ms)):
        cols = [mean([pick(r) for r in recs[n]]) for n in names]
        out.append(f"| {label} | " + " | ".join(f"{c:.1f}" for c in cols) + f" | {cols[0] - cols[-1]:+.1f} |")
    for label, part in (("trials: timed calls", 0), ("trials: the rest", 1)):
        cols = [mean([trial_split(r)[part] for r in recs[n]]) for n in names]
        out.append(f"| {label} | " + " | ".join(f"{c:.3f}" for c in cols) + f" | {cols[0] - cols[-1]:+.3f} |")
    return out


def per_trial_ms(r: Record) -> float:
    return 1000.0 * float(r["seconds"].get("timing_trials", 0.0)) / float(r["trials"])


def tasks_table(named: dict[str, dict[str, Any]], kind: str, after: float) -> list[str]:
    out = [
        "| task | tree | n | trials mean [min-max] | stops | median ms | timed calls s | rest s | "
        "rest: fixed s + ms per trial | correctness s | last_check s | under the lock s |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    by: dict[str, dict[str, list[Record]]] = collections.defaultdict(dict)
    for name, data in named.items():
        for r in correct(run_of(data)["records"], kind, 0.0):  # every verdict: more points per task
            by[r["task"]].setdefault(name, []).append(r)
    for task in sorted(by):
        for name in named:
            rs = by[task].get(name, [])
            if not rs:
                continue
            trials = [r["trials"] for r in rs]
            stops = collections.Counter(r["stop"] for r in rs)
            fit = line_fit([float(t) for t in trials], [trial_split(r)[1] for r in rs])
            fitted = f"{fit[0]:.3f} + {1000 * fit[1]:.1f}" if fit else "-"
            out.append(
                f"| {task} | {name} | {len(rs)} | {mean(trials):.1f} [{min(trials)}-{max(trials)}] | "
                + ", ".join(f"{k} {v}" for k, v in sorted(stops.items()))
                + f" | {statistics.median(r['median_ms'] for r in rs):.2f} | "
                f"{mean([trial_split(r)[0] for r in rs]):.3f} | {mean([trial_split(r)[1] for r in rs]):.3f} | "
                f"{fitted} | {mean([r['seconds'].get('correctness', 0.0) for r in rs]):.3f} | "
                f"{mean([r['seconds'].get('last_check', 0.0) for r in rs]):.3f} | "
                f"{mean([r['seconds'].get('gpu_held', 0.0) for r in rs]):.3f} |"
            )
    return out


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("runs", nargs="+", type=Path, help="NAME=PATH or PATH (name: the file's stem)")
    parser.add_argument("--steady-after", type=float, default=40.0)
    args = parser.parse_args(argv)
    named: dict[str, dict[str, Any]] = {}
    for item in args.runs:
        text = str(item)
        name, _, path = text.partition("=") if "=" in text else (Path(text).name.split(".")[0], "", text)
        named[name] = load(Path(path))
    after = args.steady_after
    print("\n".join(runs_table(named, after)))
    for kind in ("function", "kernel"):
        print()
        print("\n".join(stages_table(named, kind, after)))
    print()
    print("\n".join(tasks_table(named, "function", after)))


if __name__ == "__main__":
    main()
