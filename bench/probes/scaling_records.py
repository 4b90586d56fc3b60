"""Why a second replica adds no evaluations: the records of a warm scaling run read trial by trial.

Usage: python -m bench.probes.scaling_records RESULTS   (a ``warm_results.tar.gz`` of
       ``bench/device/run_scaling_warm_x2.sh`` or the folder it was extracted to; queue_1.json and
       queue_2.json are read). E.g.:
       python -m bench.probes.scaling_records bench/results/2026-11-30_s32/call5_scaling_x2/warm_results.tar.gz

What it prints (correct function candidates unless said):

1. The stop rule per copy-rate class (``bench.probes.throughput_copies``' classes): mean trials; the share
   of evaluations whose trials began in a *leading burst* (the median of the first 3 trials more than
   1.5 times the evaluation's median); mean trials with and without one; what kept the trials going
   before the last one (``executor.checking.stop_rule`` replayed on the recorded prefix: ``min_trials``,
   ``min_total_ms`` or the noise estimate; ``>40``: past the recorded trials); confirming calls (issue
   33's repeat-visit rule would have refused: ``seconds.repeat_confirm``).
2. The slow trials (over 1.5 times the median) by trial index: where in the run the noise is.
3. The GPU turn held while waiting: per kind, the turn's mean seconds and, inside it, the correctness
   calls' wait for the host memory's lock (``run_lock_wait``) and the trials' wait for their locks
   (``timing_lock_wait``), and their sum over the window as a share of the replicas' turn time; the
   slow trials' excess over the median (time the turn was held timing a burst).
4. The slow-trial rate against the time since the latest verdict of the same and of the other replica
   (each trial's time estimated from its record; turns are given to replicas as chains of turns that do
   not overlap: every turn that overlaps another is the other replica's).
5. A counterfactual: the stop rule replayed on the trials after the leading burst, as if they had begun
   once it was over (a burst spent outside the timed trials): trials and seconds of the turn saved.
"""

from __future__ import annotations

import json
import statistics
import sys
import tarfile
import tempfile
from collections import defaultdict
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path
from typing import Any

import numpy as np

from bench.probes.stop_rule_replay import host_policy
from bench.probes.throughput_copies import CLASSES, task_bytes
from executor.checking import stop_rule
from executor.trialpolicy import TrialPolicy

Record = dict[str, Any]
Window = tuple[float, float, float, float]
SLOW = 1.5  # a trial this many times its evaluation's median or more is slow
LEAD = 3  # the leading burst: the median of this many first trials over SLOW x the median


def load(path: Path) -> dict[int, dict[str, Any]]:
    """The runs of ``queue_<n>.json`` by fleet size, from a folder or a ``.tar.gz`` of one."""
    if path.is_file():
        tmp = Path(tempfile.mkdtemp(prefix="scaling_records_"))
        with tarfile.open(path) as tar:
            tar.extractall(tmp, filter="data")
        path = tmp
    runs: dict[int, dict[str, Any]] = {}
    for file in sorted(path.rglob("queue_*.json")):
        size = file.stem.split("_", 1)[1]
        if size.isdigit():
            runs[int(size)] = json.loads(file.read_text())["runs"][0]
    return runs


def correct_functions(records: list[Record]) -> list[Record]:
    return [
        r
        for r in records
        if r.get("task_kind") == "function"
        and r.get("candidate") == "correct"
        and r.get("error") is None
        and r.get("samples_ms")
        and r.get("median_ms")
    ]


def leading_burst(samples: list[float], median: float) -> int:
    """How many of the first trials form a leading burst: 0 unless the median of the first ``LEAD`` is
    over ``SLOW`` x ``median``; else the index of the first of two successive trials under 1.2 x the
    median (or the count of recorded trials, when they never come back)."""
    if len(samples) < LEAD or median <= 0 or float(np.median(samples[:LEAD])) <= SLOW * median:
        return 0
    for i in range(len(samples) - 1):
        if samples[i] < 1.2 * median and samples[i + 1] < 1.2 * median:
            return i
    return len(samples)


def binding(record: Record, policy: TrialPolicy) -> str:
    """What kept the trials going before the last one, by the stop rule on the recorded prefix."""
    samples, trials = record["samples_ms"], record["trials"]
    if trials > len(samples):
        return ">40"
    before = samples[: trials - 1]
    if len(before) < policy.min_trials:
        return "min_trials"
    if sum(before) < policy.min_total_ms:
        return "min_total_ms"
    return "noise"


def replay_from(samples: list[float], policy: TrialPolicy) -> int | None:
    """Trials the stop rule takes on ``samples`` (None: it would go on past them)."""
    for n in range(1, len(samples) + 1):
        if stop_rule(samples[:n], policy) is not None:
            return n
    return None


def turn_windows(record: Record) -> Window | None:
    """(turn start, turn end, trials start, trials end) in the window's seconds, from the verdict's
    ``finished_s`` and its steps: the turn ends ``after_release`` before the verdict, the trials begin
    after the checks' lock, the hand-over, the load, the correctness calls and the trials' lock."""
    s = record.get("seconds") or {}
    if "gpu_held" not in s:
        return None
    end = float(record["finished_s"]) - float(s.get("after_release", 0.0))
    start = end - float(s["gpu_held"])
    t0 = start + sum(
        float(s.get(k, 0.0)) for k in ("run_lock_wait", "handover", "load", "correctness", "timing_lock_wait")
    )
    return start, end, t0, t0 + float(s.get("timing_trials", 0.0))


def chains(records: list[Record], replicas: int, tol: float = 0.1) -> list[tuple[Record, Window, int]]:
    """Each turn given to a replica: turns in order of their start, each to the replica whose last turn
    ended latest before it began (within ``tol``); one replica's turns never overlap."""
    ends = [-1e9] * replicas
    out = []
    timed = [(r, w) for r in records if (w := turn_windows(r)) is not None]
    for r, w in sorted(timed, key=lambda x: x[1][0]):
        free = [i for i in range(replicas) if ends[i] <= w[0] + tol]
        i = max(free, key=lambda j: ends[j]) if free else min(range(replicas), key=lambda j: ends[j])
        out.append((r, w, i))
        ends[i] = w[1]
    return out


def copy_class(task: str, median_ms: float, cache: dict[str, int | None]) -> str:
    if task not in cache:
        cache[task] = task_bytes(task)
    size = cache[task]
    if size is None:
        return "?"
    rate = size / (median_ms / 1e3) / 1e9
    for low, high in CLASSES:
        if low <= rate < high:
            return f"{low:g}-{high:g} GB/s" if high != float("inf") else f">= {low:g} GB/s"
    return "?"


def fmt(value: float | None, spec: str = ".2f") -> str:
    return "-" if value is None else format(value, spec)


def stop_table(runs: dict[int, dict[str, Any]], policy: TrialPolicy) -> list[str]:
    cache: dict[str, int | None] = {}
    lines = [
        "| replicas | class | n | trials | leading burst | trials with / without | kept going by "
        "(min_trials, min_total_ms, noise, >40) | confirming calls |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for size, run in sorted(runs.items()):
        groups: dict[str, list[Record]] = defaultdict(list)
        for r in correct_functions(run["records"]):
            groups[copy_class(r["task"], r["median_ms"], cache)].append(r)
            groups["all"].append(r)
        for name in sorted(groups, key=lambda g: (g == "all", g)):
            rs = groups[name]
            burst = [leading_burst(r["samples_ms"], r["median_ms"]) > 0 for r in rs]
            with_b = [r["trials"] for r, b in zip(rs, burst, strict=True) if b]
            without = [r["trials"] for r, b in zip(rs, burst, strict=True) if not b]
            kinds: dict[str, int] = defaultdict(int)
            for r in rs:
                kinds[binding(r, policy)] += 1
            confirms = sum("repeat_confirm" in r["seconds"] for r in rs)
            lines.append(
                f"| {size} | {name} | {len(rs)} | {statistics.fmean(r['trials'] for r in rs):.1f} | "
                f"{statistics.fmean(burst):.0%} | {fmt(statistics.fmean(with_b) if with_b else None, '.1f')} / "
                f"{fmt(statistics.fmean(without) if without else None, '.1f')} | "
                f"{kinds['min_trials']}, {kinds['min_total_ms']}, {kinds['noise']}, {kinds['>40']} | {confirms} |"
            )
    return lines


def index_table(runs: dict[int, dict[str, Any]]) -> list[str]:
    marks = (0, 1, 2, 3, 5, 7, 10, 15, 20, 30)
    lines = [
        "| replicas | " + " | ".join(f"trial {i}" for i in marks) + " |",
        "|---|" + "---|" * len(marks),
    ]
    for size, run in sorted(runs.items()):
        rs = correct_functions(run["records"])
        cells = []
        for i in marks:
            at = [r["samples_ms"][i] > SLOW * r["median_ms"] for r in rs if len(r["samples_ms"]) > i]
            cells.append(f"{statistics.fmean(at):.0%} ({len(at)})" if at else "-")
        lines.append(f"| {size} | " + " | ".join(cells) + " |")
    return lines


def turn_table(runs: dict[int, dict[str, Any]]) -> list[str]:
    lines = [
        "| replicas | kind | n | turn s | checks' host-lock wait | trials' lock wait | waits / turn | "
        "slow trials' excess | waits over the window / replicas' turn time |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for size, run in sorted(runs.items()):
        held_all = sum(float(t["held_s"]["candidate"]) + float(t["held_s"]["baseline"]) for t in run["turns"])
        for kind in ("function", "kernel"):
            rs = [
                r for r in run["records"] if r.get("task_kind") == kind and "gpu_held" in r.get("seconds", {})
            ]
            ok = [r for r in rs if r.get("candidate") == "correct" and r.get("error") is None]
            if not ok:
                continue
            s = [r["seconds"] for r in ok]
            held = statistics.fmean(x["gpu_held"] for x in s)
            rlw = statistics.fmean(x.get("run_lock_wait", 0.0) for x in s)
            tlw = statistics.fmean(x.get("timing_lock_wait", 0.0) for x in s)
            excess = [
                sum(max(0.0, v - r["median_ms"]) for v in r["samples_ms"] if v > SLOW * r["median_ms"]) / 1e3
                for r in ok
                if r.get("samples_ms") and r.get("median_ms")
            ]
            waits_all = sum(
                r["seconds"].get("run_lock_wait", 0.0) + r["seconds"].get("timing_lock_wait", 0.0) for r in rs
            )
            lines.append(
                f"| {size} | {kind} | {len(ok)} | {held:.3f} | {rlw:.3f} | {tlw:.3f} | "
                f"{(rlw + tlw) / held:.0%} | {fmt(statistics.fmean(excess) if excess else None, '.3f')} | "
                f"{waits_all:.1f} s / {held_all:.1f} s = {waits_all / held_all:.0%} |"
            )
    return lines


def trial_times(record: Record, window: Window) -> list[tuple[float, float]]:
    """Each recorded trial's (estimated start in the window's seconds, milliseconds): the trials follow
    a 30-ms warm-up and share the rest of ``timing_trials`` (flushes, restores) evenly."""
    samples = record["samples_ms"]
    est = sum(samples) * record["trials"] / len(samples) / 1e3
    overhead = max(0.0, record["seconds"]["timing_trials"] - 0.03 - est) / record["trials"]
    out, t = [], window[2] + 0.03
    for v in samples:
        out.append((t, v))
        t += v / 1e3 + overhead
    return out


EVENTS: dict[str, Callable[[Record, Window], float]] = {
    "the other replica's turn end": lambda r, w: w[1],
    "the other replica's verdict": lambda r, w: float(r["finished_s"]),
    "this replica's verdict": lambda r, w: float(r["finished_s"]),
}


def since_table(runs: dict[int, dict[str, Any]], step: float = 0.1, last: int = 10) -> list[str]:
    """Slow-trial rate by seconds since the latest event of ``EVENTS`` before the trial, split by how
    the trials held the host memory's lock (``host_shared``)."""
    lines = [
        "| replicas | since | trials' host lock | "
        + " | ".join(f"{k * step:.1f}" for k in range(last))
        + f" | >= {last * step:.1f} |",
        "|---|---|---|" + "---|" * (last + 1),
    ]
    for size, run in sorted(runs.items()):
        assigned = chains(run["records"], size)
        for name, when in EVENTS.items():
            other = name.startswith("the other")
            if other and size == 1:
                continue
            events = [(when(r, w), i, id(r)) for r, w, i in assigned]
            for shared in (0.0, 1.0):
                bins: dict[int, list[bool]] = defaultdict(list)
                for r, w, i in assigned:
                    if not correct_functions([r]) or r["seconds"].get("host_shared") != shared:
                        continue
                    for t, v in trial_times(r, w):
                        prev = [
                            t - e for e, j, rid in events if e <= t and rid != id(r) and ((j != i) == other)
                        ]
                        k = min(int(min(prev) / step), last) if prev else last
                        bins[k].append(v > SLOW * r["median_ms"])
                cells = [f"{statistics.fmean(bins[k]):.0%}" if bins[k] else "-" for k in range(last + 1)]
                n = sum(len(b) for b in bins.values())
                lines.append(
                    f"| {size} | {name} | {'shared' if shared else 'alone'} ({n} trials) | "
                    + " | ".join(cells)
                    + " |"
                )
    return lines


def index_since_table(runs: dict[int, dict[str, Any]]) -> list[str]:
    """Slow-trial rate by the trial's index and by the seconds since the other replica's latest turn
    end: which of the two goes with the slow trials (with the host-wide lock a run's trials often begin
    as the other's trials end, so the two go together)."""
    near = ("< 0.2 s", "0.2-0.6 s", ">= 0.6 s")
    lines = [
        "| replicas | trial index | " + " | ".join(f"{k} after the other's turn end" for k in near) + " |",
        "|---|---|" + "---|" * len(near),
    ]
    for size, run in sorted(runs.items()):
        if size < 2:
            continue
        assigned = chains(run["records"], size)
        ends = [(w[1], i) for _, w, i in assigned]
        bins: dict[tuple[str, str], list[bool]] = defaultdict(list)
        for r, w, i in assigned:
            if not correct_functions([r]):
                continue
            for index, (t, v) in enumerate(trial_times(r, w)):
                prev = [t - e for e, j in ends if e <= t and j != i]
                d = min(prev) if prev else float("inf")
                dk = near[0] if d < 0.2 else near[1] if d < 0.6 else near[2]
                ik = "0-2" if index < 3 else "3-9" if index < 10 else "10+"
                bins[(ik, dk)].append(v > SLOW * r["median_ms"])
        for ik in ("0-2", "3-9", "10+"):
            cells = [
                f"{statistics.fmean(bins[(ik, dk)]):.0%} ({len(bins[(ik, dk)])})" if bins[(ik, dk)] else "-"
                for dk in near
            ]
            lines.append(f"| {size} | {ik} | " + " | ".join(cells) + " |")
    return lines


def _covered(span: tuple[float, float], spans: list[tuple[float, float]]) -> float:
    """Seconds of ``span`` covered by the union of ``spans``."""
    low, high = span
    total, cursor = 0.0, low
    for a, b in sorted((max(low, a), min(high, b)) for a, b in spans if b > low and a < high):
        a = max(a, cursor)
        if b > a:
            total += b - a
            cursor = b
    return total


def holders_table(runs: dict[int, dict[str, Any]]) -> list[str]:
    """What the other replica was doing while a function run waited, inside its turn, for the host
    memory's lock (its correctness calls: ``run_lock_wait``) or for its trials' locks
    (``timing_lock_wait``): the share of those waits covered by the other's trials that held the host
    memory alone, its trials that held it shared, its correctness calls, its host checks after its turn
    (``after_release``) and its kernel runs."""
    kinds = ("trials alone", "trials shared", "correctness", "host checks", "kernel runs")
    lines = [
        "| replicas | wait | seconds in all | " + " | ".join(f"other's {k}" for k in kinds) + " |",
        "|---|---|---|" + "---|" * len(kinds),
    ]
    for size, run in sorted(runs.items()):
        if size < 2:
            continue
        assigned = chains(run["records"], size)
        spans: dict[tuple[str, int], list[tuple[float, float]]] = defaultdict(list)
        for r, w, i in assigned:
            s = r["seconds"]
            if r["task_kind"] == "function":
                if "timing_trials" in s:
                    spans[("trials shared" if s.get("host_shared") else "trials alone", i)].append(
                        (w[2], w[3])
                    )
                begin = w[0] + s.get("run_lock_wait", 0.0)
                spans[("correctness", i)].append((begin, begin + s.get("correctness", 0.0)))
            else:
                spans[("kernel runs", i)].append((w[0], w[1]))
            if "after_release" in s:
                spans[("host checks", i)].append((w[1], w[1] + s["after_release"]))
        for wait in ("run_lock_wait", "timing_lock_wait"):
            total = 0.0
            covered: dict[str, float] = defaultdict(float)
            for r, w, i in assigned:
                if r["task_kind"] != "function":
                    continue
                s = r["seconds"]
                span = (
                    (w[0], w[0] + s.get(wait, 0.0))
                    if wait == "run_lock_wait"
                    else (w[2] - s.get(wait, 0.0), w[2])
                )
                total += span[1] - span[0]
                for kind in kinds:
                    covered[kind] += sum(_covered(span, spans[(kind, j)]) for j in range(size) if j != i)
            if total > 0:
                lines.append(
                    f"| {size} | {wait} | {total:.1f} | "
                    + " | ".join(f"{covered[k] / total:.0%}" for k in kinds)
                    + " |"
                )
    return lines


def clean_cov_table(runs: dict[int, dict[str, Any]]) -> list[str]:
    """Median robust CoV per copy-rate class, over every evaluation and over those with no slow trial
    recorded: whether the spread comes from the slow trials or from the rest."""
    cache: dict[str, int | None] = {}
    lines = [
        "| replicas | class | robust CoV, all (n) | robust CoV, no slow trial (n) |",
        "|---|---|---|---|",
    ]
    for size, run in sorted(runs.items()):
        groups: dict[str, dict[str, list[float]]] = defaultdict(lambda: defaultdict(list))
        for r in correct_functions(run["records"]):
            name = copy_class(r["task"], r["median_ms"], cache)
            clean = all(v <= SLOW * r["median_ms"] for v in r["samples_ms"])
            groups[name]["all"].append(r.get("robust_cov") or 0.0)
            if clean:
                groups[name]["clean"].append(r.get("robust_cov") or 0.0)
        for name, g in sorted(groups.items()):
            clean_cov = fmt(statistics.median(g["clean"]) if g["clean"] else None, ".3f")
            lines.append(
                f"| {size} | {name} | {statistics.median(g['all']):.3f} ({len(g['all'])}) | "
                f"{clean_cov} ({len(g['clean'])}) |"
            )
    return lines


def counterfactual_table(runs: dict[int, dict[str, Any]], policy: TrialPolicy) -> list[str]:
    lines = [
        "| replicas | evaluations with a leading burst | burst trials (mean) | burst s (mean) | trials as run | "
        "trials after the burst (replayed) | turn s saved per burst evaluation | per function evaluation | exact |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for size, run in sorted(runs.items()):
        rs = correct_functions(run["records"])
        rows = []
        for r in rs:
            lead = leading_burst(r["samples_ms"], r["median_ms"])
            if lead == 0:
                continue
            samples = r["samples_ms"]
            per_trial = r["seconds"]["timing_trials"] / r["trials"]
            burst_s = sum(samples[:lead]) / 1e3
            after = replay_from(samples[lead:], policy)
            exact = after is not None and r["trials"] <= len(samples)
            n_after = after if after is not None else r["trials"] - lead
            # trials no longer needed once the burst is over: the run's own less the burst and the replay
            saved_trials = max(0, r["trials"] - lead - n_after)
            rows.append((lead, burst_s, r["trials"], n_after, saved_trials * per_trial, exact))
        if not rows:
            lines.append(f"| {size} | 0 of {len(rs)} | - | - | - | - | - | - | - |")
            continue
        saved = sum(x[4] for x in rows)
        lines.append(
            f"| {size} | {len(rows)} of {len(rs)} | {statistics.fmean(x[0] for x in rows):.1f} | "
            f"{statistics.fmean(x[1] for x in rows):.3f} | {statistics.fmean(x[2] for x in rows):.1f} | "
            f"{statistics.fmean(x[3] for x in rows):.1f} | {saved / len(rows):.3f} | {saved / len(rs):.3f} | "
            f"{sum(x[5] for x in rows)} of {len(rows)} |"
        )
    return lines


def main(argv: list[str]) -> int:
    if len(argv) != 1:
        sys.stderr.write(__doc__ or "")
        return 2
    runs = load(Path(argv[0]))
    if not runs:
        print(f"no queue_<n>.json under {argv[0]}")
        return 1
    policy = replace(host_policy())
    out = [
        "## 1. The stop rule, correct function candidates by copy rate",
        "",
        *stop_table(runs, policy),
        "",
        f"## 2. Slow trials (over {SLOW}x the median) by trial index",
        "",
        *index_table(runs),
        "",
        "## 3. The GPU turn held while waiting (correct candidates, mean s)",
        "",
        *turn_table(runs),
        "",
        "## 4. Slow-trial rate by seconds since the latest event (turn end, verdict) of either replica",
        "",
        *since_table(runs),
        "",
        *index_since_table(runs),
        "",
        "## 5. The trials replayed from the end of the leading burst",
        "",
        *counterfactual_table(runs, policy),
        "",
        "## 6. What the other replica did while a function run waited inside its turn",
        "",
        *holders_table(runs),
        "",
        "## 7. Robust CoV with and without the evaluations that recorded a slow trial",
        "",
        *clean_cov_table(runs),
    ]
    print("\n".join(out))
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
