"""Where a correct candidate's time under its GPU lock goes, 1 vs 2 replicas (session 18 call 1).

Usage: mkdir -p /tmp/s18 && tar -xzf bench/results/2026-11-29_s18/call1_x2/scaling_results.tar.gz -C /tmp/s18
       python -m bench.probes.lock_time_analysis /tmp/s18
Prints the markdown tables of lock_time_analysis.md (means over correct candidates; ``steady``: verdicts
finished after the first 60 s).
"""

from __future__ import annotations

import collections
import json
import statistics
import sys
from pathlib import Path
from typing import Any

PARTS = [
    "gpu_held",
    "handover",
    "load",
    "correctness",
    "compare",
    "timing_lock_wait",
    "timing_trials",
    "last_check",
    "reference_timing",
    "baseline_timing",
    "reap_wait",
]


def records(path: Path, replicas: int) -> list[dict[str, Any]]:
    data = json.loads((path / f"queue_{replicas}.json").read_text())
    return [r for run in data["runs"] for r in run["records"]]


def mean(values: list[float]) -> float:
    return statistics.fmean(values) if values else 0.0


def main(root: Path) -> None:
    print("| replicas | window | kind | n | " + " | ".join(PARTS) + " | rest | trials | median robust CoV |")
    print("|---|---|---|---|" + "---|" * (len(PARTS) + 3))
    for replicas in (1, 2):
        recs = [
            r for r in records(root, replicas) if r["candidate"] == "correct" and "gpu_held" in r["seconds"]
        ]
        for window, keep in (("all", lambda r: True), ("steady", lambda r: r["finished_s"] >= 60)):
            for kind in ("function", "kernel"):
                rs = [r for r in recs if r["task_kind"] == kind and keep(r)]
                cols = [mean([r["seconds"].get(p, 0.0) for r in rs]) for p in PARTS]
                # compare is part of correctness; reap_wait runs beside the run, in a thread
                inside = [p for p in PARTS[1:] if p not in ("reap_wait", "compare")]
                rest = mean(
                    [r["seconds"]["gpu_held"] - sum(r["seconds"].get(p, 0.0) for p in inside) for r in rs]
                )
                trials = mean([r["trials"] for r in rs if r["trials"]])
                cov = statistics.median([r["robust_cov"] for r in rs if r["robust_cov"] is not None] or [0])
                print(
                    f"| {replicas} | {window} | {kind} | {len(rs)} | "
                    + " | ".join(f"{c:.3f}" for c in cols)
                    + f" | {rest:.3f} | {trials:.1f} | {cov:.4f} |"
                )
    print()
    print(
        "Naive-baseline timings per task (correct function candidates that timed it / all such candidates):"
    )
    print()
    print(
        "| replicas | candidates | timed the baseline | distinct tasks | repeats | their lock seconds | share of function lock time |"
    )
    print("|---|---|---|---|---|---|---|")
    for replicas in (1, 2):
        recs = [
            r
            for r in records(root, replicas)
            if r["task_kind"] == "function" and "gpu_held" in r["seconds"] and "timing_trials" in r["seconds"]
        ]
        timed = [r for r in recs if "baseline_timing" in r["seconds"]]
        tasks = collections.Counter(r["task"] for r in timed)
        held = sum(r["seconds"]["gpu_held"] for r in recs)
        base = sum(r["seconds"]["baseline_timing"] for r in timed)
        print(
            f"| {replicas} | {len(recs)} | {len(timed)} | {len(tasks)} | {len(timed) - len(tasks)} | "
            f"{base:.1f} | {base / held:.0%} |"
        )
    print()
    print(
        "Trials of correct function candidates (host-timed; the stop rule's spread is within each timing set):"
    )
    print()
    print(
        "| replicas | trials 7 | 8-14 | 15-30 | > 30 | mean trials | mean timing_trials s | stopped by the 2 s cap | their share of trials time |"
    )
    print("|---|---|---|---|---|---|---|---|---|")
    for replicas in (1, 2):
        rs = [
            r
            for r in records(root, replicas)
            if r["task_kind"] == "function" and r["candidate"] == "correct" and r["trials"]
        ]
        t = [r["trials"] for r in rs]
        capped = [r for r in rs if r["stop"] == "time_cap"]
        print(
            f"| {replicas} | {sum(x <= 7 for x in t)} | {sum(8 <= x <= 14 for x in t)} | "
            f"{sum(15 <= x <= 30 for x in t)} | {sum(x > 30 for x in t)} | {mean(t):.1f} | "
            f"{mean([r['seconds']['timing_trials'] for r in rs]):.3f} | {len(capped)} | "
            f"{sum(r['seconds']['timing_trials'] for r in capped) / sum(r['seconds']['timing_trials'] for r in rs):.0%} |"
        )


def avoidable_baselines(root: Path) -> None:
    """The baseline timings that a host-wide cache read at the run's turn would have spared: a run
    whose turn came after another run of its task had stored the task's baseline (its verdict)."""
    print()
    print("Baseline timings a host-wide cache read at the turn spares (upper bound: stored at the verdict):")
    print()
    print("| replicas | timed | spared | lock seconds spared | per correct function candidate |")
    print("|---|---|---|---|---|")
    for replicas in (1, 2):
        recs = [r for r in records(root, replicas) if "baseline_timing" in r["seconds"]]
        function = [
            r
            for r in records(root, replicas)
            if r["task_kind"] == "function" and "timing_trials" in r["seconds"]
        ]
        spared = []
        for r in recs:
            turn = r["finished_s"] - r["seconds"]["gpu_held"]
            if any(o is not r and o["task"] == r["task"] and o["finished_s"] <= turn for o in recs):
                spared.append(r)
        seconds = sum(r["seconds"]["baseline_timing"] for r in spared)
        print(f"| {replicas} | {len(recs)} | {len(spared)} | {seconds:.1f} | {seconds / len(function):.3f} |")


def _phases(start: float, end: float, r: dict[str, Any]) -> dict[str, list[tuple[float, float]]]:
    """The parts of one run under its lock as time intervals, from its verdict's end backwards (the
    order of executor.worker.candidate: hand-over, load, correctness, the trials' lock wait, trials,
    ..., the naive baseline last)."""
    s = r["seconds"]
    t = start + s.get("handover", 0.0) + s.get("load", 0.0)
    out = {"correctness": [(t, t + s.get("correctness", 0.0))]}
    t += s.get("correctness", 0.0) + s.get("timing_lock_wait", 0.0)
    trials = (t, t + s.get("timing_trials", 0.0))
    if r["task_kind"] == "function":
        out["function trials"] = [trials]
        if "baseline_timing" in s:
            out["baseline timing"] = [(end - s["baseline_timing"], end)]
    else:
        out["kernel trials"] = [trials]
    return out


def beside_the_other_replica(root: Path) -> None:
    """With two replicas: what the other replica's run was doing while a correct function candidate's
    trials ran (the share of the trials' time covered by each of its phases), for the candidates
    whose trials were quiet and those that were noisy. The runs are split into the two replicas'
    chains by their lock intervals (one run at a time per replica; the records do not name it)."""
    runs = sorted(
        (r["finished_s"] - r["seconds"]["gpu_held"], r["finished_s"], r)
        for r in records(root, 2)
        if "gpu_held" in r["seconds"]
    )
    chains: list[list[tuple[float, float, dict[str, Any]]]] = [[], []]
    last = [-1e9, -1e9]
    for start, end, r in runs:
        free = [i for i in (0, 1) if last[i] <= start + 0.15]
        i = max(free, key=lambda k: last[k]) if free else int(last[1] < last[0])
        chains[i].append((start, end, r))
        last[i] = end
    kinds = ("correctness", "function trials", "baseline timing", "kernel trials")
    rows = []
    for mine in (0, 1):
        other: dict[str, list[tuple[float, float]]] = {}
        for start, end, r in chains[1 - mine]:
            for kind, spans in _phases(start, end, r).items():
                other.setdefault(kind, []).extend(spans)
        for start, end, r in chains[mine]:
            if r["task_kind"] != "function" or r["candidate"] != "correct" or not r["trials"]:
                continue
            lo, hi = _phases(start, end, r)["function trials"][0]
            if hi <= lo:
                continue
            cover = {
                k: sum(max(0.0, min(hi, b) - max(lo, a)) for a, b in other.get(k, [])) / (hi - lo)
                for k in kinds
            }
            rows.append((r, cover))
    print()
    print(
        "Two replicas: the share of a correct function candidate's trials covered by the other replica's phases:"
    )
    print()
    print("| trials (robust CoV) | n | mean trials | capped | " + " | ".join(kinds) + " | anything else |")
    print("|---|---|---|---|" + "---|" * (len(kinds) + 1))
    for name, low, high in (("quiet (< 4 %)", 0.0, 0.04), ("noisy (>= 8 %)", 0.08, float("inf"))):
        group = [(r, c) for r, c in rows if low <= r["robust_cov"] < high]
        shares = [mean([c[k] for _, c in group]) for k in kinds]
        print(
            f"| {name} | {len(group)} | {mean([r['trials'] for r, _ in group]):.1f} | "
            f"{sum(r['stop'] == 'time_cap' for r, _ in group)} | "
            + " | ".join(f"{x:.0%}" for x in shares)
            + f" | {1 - sum(shares):.0%} |"
        )


if __name__ == "__main__":
    if len(sys.argv) != 2:
        sys.exit(__doc__)
    main(Path(sys.argv[1]))
    avoidable_baselines(Path(sys.argv[1]))
    beside_the_other_replica(Path(sys.argv[1]))
