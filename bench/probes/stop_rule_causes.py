"""Which cause of spread makes the stop rule take 13 trials where 57d0025's took 7 (session 25).

Usage: python -m bench.probes.stop_rule_causes [--runs 300] [--seed 0] [--call-ms 30] [--overhead-ms 10]

On one H200 (bench/results/2026-11-29_s25, call 4) a correct function candidate took 13.1 trials
(robust CoV over its trials 0.033) against 7.1 (0.019) at 57d0025. This simulates honest function
candidates under one cause of spread at a time and applies each rule as the executor does
(:func:`executor.checking.stop_rule` after every trial, the median by
:func:`executor.checking.timing_stats` with the repeat visits' ``median_from``), with the host clock's
target (3 %), at least 5 trials (2 sets: ``2 * sets + 1``), ``max_trials`` 100 and the 2-s wall cap.

Causes (``Model``), each on top of normal noise ``sigma`` (2 %):
* ``noise``: that alone (4 %: twice as much);
* ``first``: each rotated copy's first timed visit slower (the warm-up runs on a set of its own, so
  every copy's first visit is in the trials; 57d0025 warmed up through its copies and timed none cold);
* ``set offset``: the second set's values do more work (data-dependent tasks);
* ``copy offset``: the second copy of each set runs slower (its memory);
* ``bursts``: the host busy with other work for runs of trials (a two-state chain: busy 25 % of the
  time, runs of 4 trials on average, 15 % slower while busy);
* ``strays``: 10 % of trials 1.3-2.3x slower.

Rules: ``57d0025`` (one set, 3 copies warmed, the spread over all trials); ``tonight`` (2 sets, 4
copies: 3 rounded up to whole rounds, the spread within the sets over every pair); ``repeat_pairs``
(the same, over the repeat visits once they hold 5 pairs, and the median over them: the existing option
``repeat_pairs: 5``); ``2 copies`` (``rotate_buffers: 2``: one copy per set) with and without
``repeat_pairs``; ``first round off`` (what a rule that left out each copy's first visit, not each
set's, would take: noise and median over trials ``copies`` on once 5 pairs are there; not in the
executor). Cells: mean trials (90th percentile) / CoV of the medians over the runs, and the 95th
percentile of their distance from the medians' mean / bias of their mean against the repeat visits' true time (the sets' mean) / mean robust CoV over all the trials (the
verdict's ``robust_cov``, to hold against the device's 0.033 and 0.019).
"""

from __future__ import annotations

import argparse
import statistics
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from bench.probes.stop_rule_sim import host_policy
from executor.checking import TrialSamples, median_error, stop_rule, timing_stats, within_set_cov
from executor.trialpolicy import TrialPolicy

MAX_WALL_MS = 2000.0


@dataclass(frozen=True)
class Model:
    """One cause of spread (see the module's docstring); every figure relative."""

    sigma: float = 0.02
    first: float = 0.0
    set_offset: float = 0.0
    copy_offset: float = 0.0
    busy_share: float = 0.0
    busy_run: float = 4.0
    busy_slower: float = 0.15
    strays: float = 0.0


@dataclass(frozen=True)
class Rule:
    """A stop rule: its policy, how many rotated copies the trials go through, whether their first
    visits are warm (57d0025's warm-up went through them), and ``first_round``: the rule that leaves
    out every copy's first visit (not in the executor)."""

    policy: TrialPolicy
    copies: int
    warm_copies: bool = False
    first_round: bool = False


def rules() -> dict[str, Rule]:
    def policy(sets: int, repeat_pairs: int) -> TrialPolicy:
        return host_policy(sets, max(5, 2 * sets + 1) if sets > 1 else 5, repeat_pairs)

    return {
        "57d0025": Rule(policy(1, 0), copies=3, warm_copies=True),
        "tonight": Rule(policy(2, 0), copies=4),
        "pairs 5": Rule(policy(2, 5), copies=4),
        "2 copies": Rule(policy(2, 0), copies=2),
        "2 copies + pairs 5": Rule(policy(2, 5), copies=2),
        "2 copies + pairs 3": Rule(policy(2, 3), copies=2),
        "2 copies + pairs 2": Rule(policy(2, 2), copies=2),
        "first round off + pairs 5": Rule(policy(2, 5), copies=4, first_round=True),
        "first round off + pairs 2": Rule(policy(2, 2), copies=4, first_round=True),
    }


def _first_round_error(samples: list[float], sets: int, copies: int, repeat_pairs: int) -> float:
    """The first-round rule's error of the median: the spread within the sets over trials ``copies``
    on once they hold ``repeat_pairs`` pairs (before: every pair, as tonight)."""
    later = samples[copies:]
    pairs = sum(len(later[g::sets]) * (len(later[g::sets]) - 1) // 2 for g in range(sets))
    if pairs >= repeat_pairs:
        return 1.2533 * within_set_cov(later, sets) / float(np.sqrt(len(samples)))
    return median_error(samples, sets)


def evaluate(
    rule: Rule, model: Model, rng: np.random.Generator, call_ms: float, overhead_ms: float
) -> tuple[int, float, float, float]:
    """One simulated evaluation: (trials, median ms, its true time, robust CoV over all trials)."""
    policy, sets = rule.policy, max(rule.policy.groups, 1)
    samples = TrialSamples()
    wall, busy = 0.0, rng.random() < model.busy_share
    leave = 1.0 / model.busy_run
    enter = model.busy_share * leave / (1.0 - model.busy_share) if model.busy_share < 1 else 1.0
    truth = call_ms * (1.0 + model.set_offset * (sets - 1) / 2)
    while True:
        i = len(samples)
        x = call_ms * (1.0 + model.sigma * float(rng.standard_normal()))
        x *= 1.0 + model.set_offset * (i % sets)
        x *= 1.0 + model.copy_offset * ((i % rule.copies) // sets % 2)
        if i < rule.copies and not rule.warm_copies:
            x *= 1.0 + model.first
        busy = (rng.random() >= leave) if busy else (rng.random() < enter)
        if busy:
            x *= 1.0 + model.busy_slower
        if rng.random() < model.strays:
            x *= 1.3 + float(rng.random())
        samples.append(x)
        wall += x + overhead_ms
        n = len(samples)
        if rule.first_round:
            done = n >= policy.max_trials or (
                n >= policy.min_trials
                and sum(samples) >= policy.min_total_ms
                and _first_round_error(samples, sets, rule.copies, policy.repeat_pairs) <= policy.target_error
            )
        else:
            done = stop_rule(samples, policy) is not None
        if done or (n >= policy.min_trials and wall >= MAX_WALL_MS):
            break
    if rule.first_round:
        later = samples[rule.copies :]
        pairs = sum(len(later[g::sets]) * (len(later[g::sets]) - 1) // 2 for g in range(sets))
        if pairs >= policy.repeat_pairs:
            samples.median_from = rule.copies
    elif policy.repeat_pairs and sets > 1:
        from executor.checking import repeats_decide

        if repeats_decide(len(samples), sets, policy.repeat_pairs):
            samples.median_from = sets
    stats = timing_stats(samples)
    return len(samples), stats.median_ms, truth, timing_stats(list(samples)).robust_cov or 0.0


def models() -> dict[str, Model]:
    return {
        "noise 2 %": Model(),
        "noise 4 %": Model(sigma=0.04),
        "first +15 %": Model(first=0.15),
        "first +30 %": Model(first=0.30),
        "set offset 10 %": Model(set_offset=0.10),
        "copy offset 8 %": Model(copy_offset=0.08),
        "bursts": Model(busy_share=0.25),
        "strays 10 %": Model(strays=0.10),
        "first +15 %, bursts": Model(first=0.15, busy_share=0.25),
    }


def cell(runs: list[tuple[int, float, float, float]]) -> tuple[str, float]:
    trials = [t for t, _, _, _ in runs]
    medians = np.asarray([m for _, m, _, _ in runs])
    truth = runs[0][2]
    cov = float(medians.std() / medians.mean())
    p95 = float(np.percentile(np.abs(medians / medians.mean() - 1.0), 95))
    bias = float(medians.mean() / truth - 1.0)
    rcov = statistics.fmean(r for _, _, _, r in runs)
    mean = statistics.fmean(trials)
    return (
        f"{mean:.1f} ({np.percentile(trials, 90):.0f}) / {cov:.1%}, {p95:.1%} / {bias:+.1%} / {rcov:.3f}",
        mean,
    )


def main(argv: list[str] | None = None, out: Callable[[str], None] = print) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=300)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--call-ms", type=float, default=30.0)
    parser.add_argument("--overhead-ms", type=float, default=10.0)
    parser.add_argument("--only", default="", help="run only the causes whose name contains this")
    parser.add_argument("--rules", default="", help="comma-separated rule names (default: all)")
    args = parser.parse_args(argv)
    named = rules()
    if args.rules:
        named = {name: named[name] for name in args.rules.split(",")}
    out(
        f"Simulated honest function candidates: a {args.call_ms:g} ms call, {args.overhead_ms:g} ms more per "
        f"trial, {args.runs} evaluations per cell, seed {args.seed}. Cells: mean trials (p90) / CoV of the "
        "medians, p95 of |median / mean median - 1| / bias / mean robust CoV over all trials.\n"
    )
    out("| cause | " + " | ".join(named) + " |")
    out("|---|" + "---|" * len(named))
    totals: dict[str, list[float]] = {name: [] for name in named}
    for k, (label, model) in enumerate(models().items()):
        if args.only not in label:
            continue
        cells = []
        for name, rule in named.items():
            rng = np.random.default_rng([args.seed, k])
            text, mean = cell(
                [evaluate(rule, model, rng, args.call_ms, args.overhead_ms) for _ in range(args.runs)]
            )
            totals[name].append(mean)
            cells.append(text)
        out(f"| {label} | " + " | ".join(cells) + " |")
    out("| **mean trials** | " + " | ".join(f"**{statistics.fmean(v):.1f}**" for v in totals.values()) + " |")


if __name__ == "__main__":
    main()
