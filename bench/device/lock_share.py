"""Evaluations per hour and the GPU lock's held share of throughput runs (bench.probes.throughput's
JSON), with how often a function candidate's turn was released early: read on any machine, from the
records a device call brought back. Used by bench/device/run_lock_share.sh; by hand:

    python3 bench/device/lock_share.py --after 40 --window 90 new=/tmp/s18_ab/ab/new.json base=/tmp/s18_ab/ab/base.json

Columns: the rate over the whole window and over the verdicts finished after ``--after`` s; ``lock
held``: the candidates' turns (``gpu_held``) over the window, and with the naive baselines' turns
(``GET /v1/device``'s ``turns``, where the tree reports them); per correct function candidate: how
many had their turn released before the host checks (the evaluator's ``after_release``), refused by
the evaluator (its hold of the device's locks not had), refused by the worker (a thread, handler or
timer of the candidate), or neither (the result came before the evaluator's hold), the mean
``gpu_held`` of each group and the evaluator's wait for the locks (``release_hold_wait``, session 32);
per correct kernel candidate the mean ``gpu_held``.
"""

from __future__ import annotations

import argparse
import json
import statistics
from pathlib import Path
from typing import Any


def _mean(values: list[float]) -> str:
    return f"{statistics.fmean(values):.3f}" if values else "-"


def row(name: str, run: dict[str, Any], after_s: float, window_s: float | None = None) -> str:
    """One table row for one run of the throughput probe: the verdicts that finished inside the window
    (``window_s`` from the queue's start, as bench.probes.throughput's ``--compare`` counts them; the
    run's wall time when None)."""
    wall = float(window_s or run["wall_s"])
    records = [r for r in run["records"] if r["finished_s"] <= wall]
    late = [r for r in records if r["finished_s"] > after_s]
    late_rate = round(len(late) * 3600 / (wall - after_s)) if wall > after_s else 0
    held = sum(r["seconds"].get("gpu_held", 0.0) for r in records)
    # the naive baselines' turns over the whole run (the device's count), scaled to the window
    turns = run.get("turns") or []
    baseline = sum(t.get("held_s", {}).get("baseline", 0.0) for t in turns) * wall / float(run["wall_s"])
    with_baselines = f"{(held + baseline) / wall:.0%}" if turns else "-"
    correct = [r for r in records if r["candidate"] == "correct" and r["error"] is None]
    function = [r for r in correct if r["task_kind"] == "function"]
    # released: the evaluator ended the turn early (its ``after_release``, set only then); the worker's
    # ``release`` alone is not that: its result may have come before the evaluator's hold (review 33 F7)
    released = [r for r in function if "after_release" in r["seconds"]]
    refused = [
        r for r in function if "after_release" not in r["seconds"] and r["seconds"].get("release_refused")
    ]
    by_evaluator = [r for r in refused if "release" in r["seconds"]]
    by_worker = [r for r in refused if "release" not in r["seconds"]]
    # neither released nor refused: the result (or the worker's end) came first
    kept = len(function) - len(released) - len(refused)
    kernel = [r for r in correct if r["task_kind"] == "kernel"]

    def held_of(rows: list[dict[str, Any]]) -> str:
        return _mean([r["seconds"].get("gpu_held", 0.0) for r in rows])

    waits = [r["seconds"]["release_hold_wait"] for r in function if "release_hold_wait" in r["seconds"]]
    return (
        f"| {name} | {len(records)} | {round(len(records) * 3600 / wall)} | {late_rate} | {held / wall:.0%} | {with_baselines} "
        f"| {len(function)} | {len(released)} / {len(by_evaluator)} / {len(by_worker)} / {kept} "
        f"| {held_of(released)} / {held_of(by_evaluator)} / {held_of(by_worker)} | {_mean(waits)} "
        f"| {held_of(function)} | {len(kernel)} | {held_of(kernel)} |"
    )


HEADER = (
    "| run | verdicts | evals/h | evals/h after {after:.0f} s | lock held | with baselines' turns "
    "| function n | released / refused by evaluator / by worker / result first | gpu_held of each | release_hold_wait "
    "| function gpu_held | kernel n | kernel gpu_held |\n|---|---|---|---|---|---|---|---|---|---|---|---|---|"
)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("runs", nargs="+", help="NAME=PATH of a bench.probes.throughput JSON")
    parser.add_argument(
        "--after", type=float, default=40.0, help="the steady rate counts verdicts after this"
    )
    parser.add_argument("--window", type=float, default=None, help="the queue's window, s (default: wall)")
    args = parser.parse_args(argv)
    print(HEADER.format(after=args.after))
    for spec in args.runs:
        name, _, path = spec.partition("=")
        if not Path(path).is_file():
            print(f"| {name} | not run: no file {path} (see the notes below the table) |")
            continue
        for run in json.loads(Path(path).read_text())["runs"]:
            print(row(name, run, args.after, args.window))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
