"""The rate of a scaling run's windows after their first 45 s and first minute, and the efficiency.

A window of ~120 s is too short for the throughput probe's own steady rate (``summarize`` wants twice
its ``steady_after_s``), so the device scripts that run such windows (bench/device/run_fleet38_x2.sh,
run_scaling_warm_x2.sh) print this table from the records instead: per fleet size, the verdicts, the
wall time, the rate over the whole window and over what finished after 45 s and after 60 s, each
rate's efficiency (rate / (replicas x the 1-replica rate)), then one script's own columns
(:data:`COLUMNS`): ``pilot``, the naive baselines timed and those whose trials held the host memory
shared (session 27's pilot); ``warm``, what was still a first evaluation in a window after the
prepare pass (baselines timed, verdicts that waited for one, ``task_prepare_wait``).

Usage: python -m bench.probes.rate_after DIR --columns pilot|warm   (DIR holds queue_<n>.json files)
       e.g. tar -xzf bench/results/2026-11-30_s27/call5/scaling_results.tar.gz -C /tmp/c5
            python -m bench.probes.rate_after /tmp/c5 --columns pilot
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from bench.probes.fleet_breakdown import load_runs

AFTER_S = (45, 60)
# A rate after t needs this much of the window past t; with less, too few verdicts to count ("-").
MIN_TAIL_S = 20
SIZES = (1, 2)

Run = dict[str, Any]


def rate_after(run: Run, after_s: float) -> int | None:
    """Verdicts per hour of ``run`` over what finished after its first ``after_s`` seconds; None when
    the window leaves :data:`MIN_TAIL_S` or less past ``after_s``."""
    wall, records = float(run["wall_s"]), run["records"]
    if wall <= after_s + MIN_TAIL_S:
        return None
    late = sum(1 for r in records if r["finished_s"] > after_s)
    return round(late / (wall - after_s) * 3600)


def rates(run: Run) -> list[int | None]:
    """``run``'s rate over the whole window, then after each of :data:`AFTER_S`."""
    return [run["per_hour"], *(rate_after(run, t) for t in AFTER_S)]


def _seconds(run: Run) -> list[dict[str, Any]]:
    return [r.get("seconds") or {} for r in run["records"]]


def pilot_columns(run: Run) -> list[str]:
    """The naive baselines that verdicts report timed, and those whose trials held the host memory
    shared (their pilot said compute-bound)."""
    timed = [s for s in _seconds(run) if "baseline_timing" in s]
    return [str(len(timed)), str(sum(bool(s.get("baseline_host_shared")) for s in timed))]


def warm_columns(run: Run) -> list[str]:
    """What was still a first evaluation in the window: the baselines timed in the replicas' turns,
    the verdicts that waited for a baseline, and the verdicts that waited for their task's preparation
    (how many, the mean seconds)."""
    turns = sum(t["turns"].get("baseline", 0) for t in run.get("turns", []))
    seconds = _seconds(run)
    waited = sum("baseline_wait" in s for s in seconds)
    prep = [s["task_prepare_wait"] for s in seconds if "task_prepare_wait" in s]
    mean = f"{sum(prep) / len(prep):.2f}" if prep else "-"
    return [str(turns), str(waited), f"{len(prep)}, {mean}"]


# A script's own columns: their headers, and their cells for a run.
COLUMNS: dict[str, tuple[tuple[str, ...], Callable[[Run], list[str]]]] = {
    "pilot": (("baselines timed (verdicts)", "their trials shared (pilot)"), pilot_columns),
    "warm": (
        (
            "baselines timed in the window (turns)",
            "verdicts that waited for a baseline",
            "task_prepare_wait (n, mean s)",
        ),
        warm_columns,
    ),
}


def render_rate_table(runs: dict[int, Run], columns: str, sizes: Sequence[int] = SIZES) -> list[str]:
    """The table's lines: a row per fleet size of ``sizes`` (``no run`` for one without a run in
    ``runs``), the efficiency against the 1-replica run, then the ``columns`` of :data:`COLUMNS`."""
    if columns not in COLUMNS:
        raise ValueError(f"columns must be one of {', '.join(COLUMNS)}, not {columns!r}")
    extra, cells = COLUMNS[columns]
    after = [f"after {t} s" for t in AFTER_S]
    head = [
        "replicas",
        "verdicts",
        "wall s",
        "evals/h",
        *after,
        "eff.",
        *(f"eff. {a}" for a in after),
        *extra,
    ]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    base: list[int | None] = [None] * (1 + len(AFTER_S))  # no 1-replica run: no efficiency
    for n in sizes:
        run = runs.get(n)
        if run is None:
            lines.append(f"| {n} | no run |")
            continue
        rate = rates(run)
        if n == 1:
            base = rate
        eff = [f"{v / (n * b):.0%}" if v and b else "-" for v, b in zip(rate, base, strict=True)]
        row = [str(n), str(run["verdicts"]), str(run["wall_s"]), str(rate[0])]
        row += [str(v or "-") for v in rate[1:]] + eff + cells(run)
        lines.append("| " + " | ".join(row) + " |")
    return lines


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m bench.probes.rate_after", description="The rate after the first 45 s and 60 s."
    )
    parser.add_argument("directory", type=Path, help="holds the scaling run's queue_<n>.json files")
    parser.add_argument("--columns", choices=sorted(COLUMNS), required=True, help="the script's own columns")
    args = parser.parse_args(argv)
    if not args.directory.is_dir():
        print(f"not a directory: {args.directory}", file=sys.stderr)
        return 2
    print("\n".join(render_rate_table(load_runs(args.directory), args.columns)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
