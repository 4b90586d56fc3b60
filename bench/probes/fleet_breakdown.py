"""Where a verdict's wall time goes on a fleet of 1 and N replicas, and which of it waits on another GPU.

Reads the throughput probe's records of a scaling run (``bench/device/run_scaling.sh``'s
``queue_<n>.json``, e.g. from a ``scaling_results.tar.gz``) and prints, per fleet size and task kind,
the mean seconds of each step on a correct candidate's path, in the order the evaluator takes them
(``executor/evaluate.py``'s ``_run``), with whose lock or queue each step waits on: the replica's own
(its GPU turn, its request slots), its GPU's (the GPU and uploads locks, ``executor/gpulock.py``) or
the host's (the host memory's lock, the timing sets' and baselines' claims): only the last serialises
one replica's work against another's. Then each replica's GPU turn (who held it: candidates' runs,
naive baselines' runs) and an estimate of how long the host memory's lock was held alone (the trials
that hold it so: copy-bound or not yet known function candidates', and every naive baseline's before
session 27).

Usage: python -m bench.probes.fleet_breakdown DIR [DIR ...]   (each DIR holds queue_<n>.json files;
       a DIR may be given as LABEL=DIR)
       e.g. tar -xzf bench/results/2026-11-30_s26/call5/scaling_results.tar.gz -C /tmp/c5
            python -m bench.probes.fleet_breakdown s26c5=/tmp/c5
"""

from __future__ import annotations

import json
import statistics
import sys
from pathlib import Path
from typing import Any

# (label, seconds key or computed name, whose lock/queue it waits on, what it is)
STEPS: tuple[tuple[str, str, str, str], ...] = (
    ("queue", "queue", "replica", "the router and the replica's request slots: call_s - total"),
    (
        "task prepare",
        "task_prepare_wait",
        "host*",
        "the task's preparation ahead (reference build, timing set)",
    ),
    ("compile past it", "compile_past", "replica", "compile time not hidden by the task's preparation"),
    ("reference wait", "reference_wait", "host*", "expected outputs after the compile (timing-set claim)"),
    ("prepare wait", "prepare_wait", "GPU+host", "the candidate worker not ready: context, inputs, copies"),
    ("host gate", "host_gate_wait", "host", "the pass through the host memory's lock before the turn"),
    ("GPU turn queue", "gpu_wait", "replica", "waiting for this GPU's turn (other runs, baselines)"),
    ("turn: checks' lock", "run_lock_wait", "host", "correctness calls wait for the host memory (shared)"),
    ("turn: correctness", "correctness", "-", "the correctness calls"),
    ("turn: trials' lock", "timing_lock_wait", "GPU+host", "trials wait for their locks (alone)"),
    ("turn: trials", "timing_trials", "-", "warm-up and trials"),
    ("turn: rest", "turn_rest", "-", "the rest of the turn (load, checks kept under it, release)"),
    ("after release", "after_release", "host", "host checks after the turn (host memory shared)"),
    ("baseline wait", "baseline_wait", "host*", "the task's naive baseline not timed yet"),
    ("other", "other", "-", "total less the steps above"),
)
# Off the path (the spare worker's start, made while the candidate compiles): shown for reference.
OFF_PATH: tuple[tuple[str, str], ...] = (
    ("context lock wait", "context_lock_wait"),
    ("context create", "context_create"),
    ("driver init", "context_init"),
    ("copies' lock wait", "prepare_lock_wait"),
    ("timing inputs", "timing_inputs"),
)
TURN_PARTS = ("run_lock_wait", "correctness", "timing_lock_wait", "timing_trials")


def correct_records(run: dict[str, Any], kind: str) -> list[dict[str, Any]]:
    """The run's verdicts of known-good candidates of ``kind`` that passed."""
    return [
        r
        for r in run.get("records", [])
        if r.get("task_kind") == kind and r.get("candidate") == "correct" and r.get("error") is None
    ]


def step_seconds(record: dict[str, Any]) -> dict[str, float]:
    """A verdict's steps (``STEPS``' keys) in seconds."""
    s = record.get("seconds") or {}
    out = {key: float(s.get(key, 0.0)) for _, key, _, _ in STEPS if key in s}
    out["queue"] = max(0.0, float(record.get("call_s", 0.0)) - float(s.get("total", 0.0)))
    out["compile_past"] = max(0.0, float(s.get("compile", 0.0)) - float(s.get("task_prepare_wait", 0.0)))
    held = float(s.get("gpu_held", 0.0))
    out["turn_rest"] = max(0.0, held - sum(float(s.get(k, 0.0)) for k in TURN_PARTS))
    on_path = [key for _, key, _, _ in STEPS if key not in ("queue", "other")]
    out["other"] = (
        float(s.get("total", 0.0)) - float(s.get("static", 0.0)) - sum(out.get(k, 0.0) for k in on_path)
    )
    out["gpu_held"] = held
    for _, key in OFF_PATH:
        out[key] = float(s.get(key, 0.0))
    return out


def mean(values: list[float]) -> float | None:
    return statistics.fmean(values) if values else None


def load_runs(directory: Path) -> dict[int, dict[str, Any]]:
    """The runs of ``directory``'s ``queue_<n>.json`` files, by fleet size."""
    runs = {}
    for path in sorted(directory.glob("queue_*.json")):
        size = path.stem.split("_", 1)[1]
        if not size.isdigit():
            continue
        for run in json.loads(path.read_text()).get("runs", []):
            runs[int(size)] = run
    return runs


def host_alone_s(run: dict[str, Any]) -> dict[str, float]:
    """Seconds the host memory's lock was held alone by trials, estimated from the verdicts: function
    candidates' trials not marked ``host_shared`` (every function run's verdict), and naive baselines'
    trials (the mean of the verdicts that report ``baseline_timing`` times the baselines' turns)."""
    records = run.get("records", [])
    fn = [
        r["seconds"]
        for r in records
        if r.get("task_kind") == "function" and "timing_trials" in (r.get("seconds") or {})
    ]
    alone = sum(s["timing_trials"] for s in fn if not s.get("host_shared"))
    shared = sum(s["timing_trials"] for s in fn if s.get("host_shared"))
    timed = [
        r["seconds"]["baseline_timing"] for r in records if "baseline_timing" in (r.get("seconds") or {})
    ]
    timed_shared = [
        r["seconds"]["baseline_timing"]
        for r in records
        if "baseline_timing" in (r.get("seconds") or {}) and r["seconds"].get("baseline_host_shared")
    ]
    turns = sum(t.get("turns", {}).get("baseline", 0) for t in run.get("turns", []))
    each = statistics.fmean(timed) if timed else 0.0
    share_shared = len(timed_shared) / len(timed) if timed else 0.0
    return {
        "candidates_alone": alone,
        "candidates_shared": shared,
        "baselines_alone": each * turns * (1 - share_shared),
        "baselines_shared": each * turns * share_shared,
        "baseline_trials_each": each,
        "baseline_turns": float(turns),
        "wall": float(run.get("wall_s") or 0.0),
    }


def cell(value: float | None, fmt: str = "{:.3f}") -> str:
    return "-" if value is None else fmt.format(value)


def render(labelled: list[tuple[str, dict[int, dict[str, Any]]]]) -> str:
    lines = []
    columns = [(label, size, run) for label, runs in labelled for size, run in sorted(runs.items())]
    head = [f"{label} x{size}" for label, size, _ in columns]
    for kind in ("function", "kernel"):
        per = [[step_seconds(r) for r in correct_records(run, kind)] for _, _, run in columns]
        lines += [
            f"### A correct {kind} candidate's path (mean seconds; n = "
            + ", ".join(str(len(p)) for p in per)
            + ")",
            "",
            "| step | waits on | " + " | ".join(head) + " | what |",
            "|---|---|" + "---|" * len(head) + "---|",
        ]
        for label, key, whose, what in STEPS:
            values = [cell(mean([s.get(key, 0.0) for s in p])) for p in per]
            lines.append(f"| {label} | {whose} | " + " | ".join(values) + f" | {what} |")
        held = " | ".join(cell(mean([s["gpu_held"] for s in p])) for p in per)
        lines.append(f"| **under the turn** | | {held} | |")
        for label, key in OFF_PATH:
            values = [cell(mean([s[key] for s in p])) for p in per]
            lines.append(
                f"| ({label}) | off the path | " + " | ".join(values) + " | the spare's start, its copies |"
            )
        lines.append("")
    lines += [
        "### Each replica's GPU turn (seconds held / turns, share of the window)",
        "",
        "| run | replica | candidates | per turn | baselines | per turn | turn held |",
        "|---|---|---|---|---|---|---|",
    ]
    for label, size, run in columns:
        for t in run.get("turns", []):
            held, turns, window = t.get("held_s", {}), t.get("turns", {}), t.get("seconds") or 1.0
            c, b = held.get("candidate", 0.0), held.get("baseline", 0.0)
            nc, nb = turns.get("candidate", 0), turns.get("baseline", 0)
            lines.append(
                f"| {label} x{size} | {t.get('replica')} | {c:.1f} s / {nc} | {cell(c / nc if nc else None)} | "
                f"{b:.1f} s / {nb} | {cell(b / nb if nb else None)} | {(c + b) / window:.0%} |"
            )
    lines += [
        "",
        "### The host memory's lock held alone by trials (estimate, seconds over the window, all replicas)",
        "",
        "| run | evals/h | function candidates' trials alone | shared | naive baselines' trials alone (turns x mean) "
        "| shared | held alone / window |",
        "|---|---|---|---|---|---|---|",
    ]
    for label, size, run in columns:
        h = host_alone_s(run)
        alone = h["candidates_alone"] + h["baselines_alone"]
        lines.append(
            f"| {label} x{size} | {run.get('per_hour')} | {h['candidates_alone']:.1f} | {h['candidates_shared']:.1f} | "
            f"{h['baselines_alone']:.1f} ({h['baseline_turns']:.0f} x {h['baseline_trials_each']:.2f}) | "
            f"{h['baselines_shared']:.1f} | {alone / (h['wall'] or 1.0):.0%} |"
        )
    lines += [
        "",
        "`waits on`: replica = its own queue or turn; GPU = its GPU's locks (per device); host = the host "
        "memory's lock, the one lock every GPU of the host shares; host* = a claim kept in the host's cache "
        "(one task's timing set, one task's naive baseline), never held by another task's work.",
    ]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    if not args:
        print(__doc__)
        return 2
    labelled = []
    for arg in args:
        label, _, path = arg.rpartition("=")
        directory = Path(path)
        runs = load_runs(directory)
        if not runs:
            print(f"no queue_<n>.json runs in {directory}", file=sys.stderr)
            return 1
        labelled.append((label or directory.name, runs))
    print(render(labelled))
    return 0


if __name__ == "__main__":
    sys.exit(main())
