"""Stop rules replayed on the trials a device run recorded (session 28).

Usage: python -m bench.probes.stop_rule_replay RUN.json[.gz] [--kind function] [--rules NAME,...]

A throughput run's verdicts (``bench.probes.throughput``'s JSON, as ``bench/device/run_s18_ab.sh``
writes them) keep each candidate's first 40 trials' times in order (``samples_ms``, session 25). Each
rule below is applied to every prefix of them as the executor applies its own
(:func:`executor.checking.stop_rule`, the median by :func:`executor.checking.timing_stats` over the
repeat visits when they decide): where it stops within the recorded trials, its trials and median are
exactly what it would have given on that device; where it would go on past them (a candidate that took
more than 40 trials, or a rule that stops later than the run's own), the run's own trials and median
stand in, and the share of such records is shown (``exact``).

Per task and rule: mean trials; seconds saved per candidate against the run's rule (trials saved
times the record's own wall time per trial, ``timing_trials / trials``); the median's distance from the
run's own median on the same trials (mean, 90th percentile, largest: what stopping earlier costs in
precision on that evaluation); and its distance from the task's consensus (the median of the run's
medians of the task: the correct candidates of a task are one source, so this is the spread between
evaluations that the verdicts show).

Rules (``RULES``): ``defaults`` (the run's own: 2 sets, at least 5, host target 3 %, ``repeat_pairs`` 5);
``target 4 %``/``target 5 %`` (``host_target_error``); ``pairs 3``/``pairs 2`` (``repeat_pairs``);
``cap 24`` (``max_trials`` 24); ``last 6`` (not in the executor: the noise and the median over the last
6 trials alone, once 8 are there: what a rule that forgets a burst of slow trials would give).
"""

from __future__ import annotations

import argparse
import collections
import gzip
import json
import statistics
from collections.abc import Callable
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import numpy as np

from executor.checking import TrialSamples, repeats_decide, stop_rule, timing_stats, within_set_cov
from executor.protocol import EvaluationOptions
from executor.trialpolicy import TrialPolicy

Record = dict[str, Any]
# (trials, median ms, exact): exact is False where the rule went past the recorded trials.
Outcome = tuple[int, float, bool]


def host_policy(**changes: Any) -> TrialPolicy:
    """A function task's stop rule as the executor's defaults build it (2 sets), with ``changes``
    to its options (EvaluationOptions fields) or, under ``policy_*`` names, to the policy itself."""
    policy_changes = {k[len("policy_") :]: v for k, v in changes.items() if k.startswith("policy_")}
    options = EvaluationOptions(**{k: v for k, v in changes.items() if not k.startswith("policy_")})
    policy = options.trial_policy(device_timed=False)
    return replace(policy, groups=options.timing_sets, **policy_changes)


def replay(samples: list[float], policy: TrialPolicy, trials: int, median_ms: float) -> Outcome:
    """``policy`` applied after every recorded trial (the wall-clock cap aside: the records keep no
    wall time per trial); the run's own ``trials`` and ``median_ms`` where it would go on past them."""
    kept = TrialSamples()
    for value in samples:
        kept.append(value)
        if stop_rule(kept, policy) is not None:
            if repeats_decide(len(kept), policy.groups, policy.repeat_pairs):
                kept.median_from = policy.groups
            return len(kept), timing_stats(kept).median_ms, True
    return trials, median_ms, False


def last_window(
    samples: list[float], trials: int, median_ms: float, window: int = 6, target: float = 0.03
) -> Outcome:
    """The ``last 6`` rule: from ``window + 2`` trials on, the spread within the 2 sets over the last
    ``window`` trials alone (:func:`executor.checking.within_set_cov`, every pair: a window of even
    length holds each set at alternate places whichever trial it starts at), stopping once
    ``1.2533 * spread / sqrt(window)`` is at most ``target``; the median of those ``window`` trials."""
    for n in range(window + 2, len(samples) + 1):
        last = samples[n - window : n]
        if 1.2533 * within_set_cov(last, 2) / float(np.sqrt(window)) <= target:
            return n, float(np.median(last)), True
    return trials, median_ms, False


@dataclass(frozen=True)
class ReplayRule:
    name: str
    apply: Callable[[Record], Outcome]


def _policy_rule(name: str, policy: TrialPolicy) -> ReplayRule:
    return ReplayRule(name, lambda r: replay(r["samples_ms"], policy, r["trials"], r["median_ms"]))


RULES: list[ReplayRule] = [
    _policy_rule("defaults", host_policy()),
    _policy_rule("target 4 %", host_policy(host_target_error=0.04)),
    _policy_rule("target 5 %", host_policy(host_target_error=0.05)),
    _policy_rule("pairs 3", host_policy(repeat_pairs=3)),
    _policy_rule("pairs 2", host_policy(repeat_pairs=2)),
    _policy_rule("cap 24", host_policy(max_trials=24)),
    ReplayRule("last 6", lambda r: last_window(r["samples_ms"], r["trials"], r["median_ms"])),
]


def load(path: Path) -> list[Record]:
    raw = gzip.decompress(path.read_bytes()) if path.suffix == ".gz" else path.read_bytes()
    data = json.loads(raw)
    records: list[Record] = data["runs"][0]["records"]
    return records


def timed(records: list[Record], kind: str) -> list[Record]:
    """Correct candidates of ``kind`` that passed and kept their trials."""
    return [
        r
        for r in records
        if r.get("task_kind") == kind
        and r.get("candidate") == "correct"
        and r.get("error") is None
        and r.get("samples_ms")
        and r.get("median_ms")
    ]


@dataclass
class Cell:
    trials: float
    exact: float
    saved_s: float
    own_mean: float
    own_p90: float
    own_max: float
    consensus_mae: float


def cell(rule: ReplayRule, records: list[Record], consensus: dict[str, float]) -> Cell:
    outcomes = [rule.apply(r) for r in records]
    own = [abs(m / r["median_ms"] - 1.0) for (_, m, _), r in zip(outcomes, records, strict=True)]
    saved = [
        (r["trials"] - t) * r["seconds"].get("timing_trials", 0.0) / max(r["trials"], 1)
        for (t, _, _), r in zip(outcomes, records, strict=True)
    ]
    return Cell(
        trials=statistics.fmean(t for t, _, _ in outcomes),
        exact=statistics.fmean(float(e) for _, _, e in outcomes),
        saved_s=statistics.fmean(saved),
        own_mean=statistics.fmean(own),
        own_p90=float(np.percentile(own, 90)),
        own_max=max(own),
        consensus_mae=statistics.fmean(
            abs(m / consensus[r["task"]] - 1.0) for (_, m, _), r in zip(outcomes, records, strict=True)
        ),
    )


def main(argv: list[str] | None = None, out: Callable[[str], None] = print) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("run", type=Path)
    parser.add_argument("--kind", default="function")
    parser.add_argument("--rules", default="", help="comma-separated rule names (default: all)")
    args = parser.parse_args(argv)
    rules = RULES
    if args.rules:
        wanted = args.rules.split(",")
        rules = [r for r in RULES if r.name in wanted]
    records = timed(load(args.run), args.kind)
    by_task: dict[str, list[Record]] = collections.defaultdict(list)
    for r in records:
        by_task[r["task"]].append(r)
    consensus = {task: statistics.median(r["median_ms"] for r in rs) for task, rs in by_task.items()}
    out(
        f"{len(records)} correct {args.kind} candidates of {len(by_task)} tasks in {args.run.name}. Cells: "
        "mean trials (share replayed exactly) / s saved per candidate / the median's distance from the "
        "run's own median: mean, p90, max / mean distance from the task's consensus.\n"
    )
    out("| task | n | " + " | ".join(r.name for r in rules) + " |")
    out("|---|---|" + "---|" * len(rules))
    for task, rs in [*sorted(by_task.items()), ("**all**", records)]:
        cells = [cell(rule, rs, consensus) for rule in rules]
        out(
            f"| {task} | {len(rs)} | "
            + " | ".join(
                f"{c.trials:.1f} ({c.exact:.0%}) / {c.saved_s:+.3f} / {c.own_mean:.1%}, {c.own_p90:.1%}, "
                f"{c.own_max:.0%} / {c.consensus_mae:.1%}"
                for c in cells
            )
            + " |"
        )


if __name__ == "__main__":
    main()
