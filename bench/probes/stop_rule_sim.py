"""How many trials the stop rule takes, and how precise its median is, on simulated honest candidates.

Usage: python -m bench.probes.stop_rule_sim [--runs 400] [--seed 0]

Each simulated evaluation times an honest call of 30 ms (`--call-ms`) with `--overhead-ms` of untimed
work per trial, under multiplicative noise (normal, ``sigma``) with stray slow trials (``outliers``: that
share of trials is 1.3-2.3x slower), whose first visit to each timing set is ``first`` slower than its
repeats (a set's data come from memory on its first visit, maybe from a cache on the next: session 23's
`long` queue took 12-23 trials on the function tasks with large inputs, at most 7-8 on the others). It
applies :func:`executor.checking.stop_rule` after every trial, as the function tasks' one-at-a-time
timing does, with the host clock's target (3 %), ``max_trials`` 100 and the 2-s wall cap. Per policy and
case it prints the mean (and 90th percentile) of the trials and the spread of the medians over
``--runs`` evaluations (the "repeat CoV" of the throughput probe: std / mean of one candidate's medians)
and how far their mean lies from the repeats' true time.

Policies: 57d0025 (one timing set, at least 5 trials, the whole spread), this tree before session 23
(3 sets, at least 7, the spread within the sets over every pair), ``repeat pairs`` (the same, over the
repeat visits once they hold 5 pairs: executor.checking.within_set_cov), and the two with
``timing_sets: 2`` (at least 5 trials).
"""

from __future__ import annotations

import argparse
import statistics
from dataclasses import dataclass

import numpy as np

from executor.checking import stop_rule
from executor.trialpolicy import TrialPolicy

HOST_TARGET = 0.03
MAX_WALL_MS = 2000.0


@dataclass(frozen=True)
class Case:
    sigma: float
    outliers: float
    first: float


def host_policy(sets: int, least: int, repeat_pairs: int) -> TrialPolicy:
    """A function task's stop rule as the executor's defaults build it, for ``sets`` timing sets, at
    least ``least`` trials and ``repeat_pairs``."""
    return TrialPolicy(
        warmup=1,
        min_trials=least,
        max_trials=100,
        min_total_ms=20.0,
        target_error=HOST_TARGET,
        groups=sets,
        repeat_pairs=repeat_pairs,
    )


def policies() -> dict[str, TrialPolicy]:
    make = host_policy
    return {
        "57d0025 (1 set, >=5)": make(1, 5, 0),
        "3 sets, every pair": make(3, 7, 0),
        "3 sets, repeat pairs": make(3, 7, 5),
        "2 sets, every pair": make(2, 5, 0),
        "2 sets, repeat pairs": make(2, 5, 5),
    }


def evaluate(
    policy: TrialPolicy, case: Case, rng: np.random.Generator, call_ms: float, overhead_ms: float
) -> tuple[int, float]:
    """One simulated evaluation: (trials, median ms). The first visits of a one-set policy are as slow
    as the others' (its warm-up went through its copies)."""
    samples: list[float] = []
    wall = 0.0
    while True:
        i = len(samples)
        x = call_ms * (1.0 + case.sigma * float(rng.standard_normal()))
        if rng.random() < case.outliers:
            x *= 1.3 + float(rng.random())
        if policy.groups > 1 and i < policy.groups:
            x *= 1.0 + case.first
        samples.append(x)
        wall += x + overhead_ms
        if stop_rule(samples, policy) is not None:
            break
        if len(samples) >= policy.min_trials and wall >= MAX_WALL_MS:
            break
    return len(samples), float(np.median(samples))


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=400)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--call-ms", type=float, default=30.0)
    parser.add_argument("--overhead-ms", type=float, default=25.0)
    args = parser.parse_args(argv)
    cases = [
        Case(sigma, outliers, first)
        for sigma in (0.02, 0.04, 0.08)
        for outliers in (0.0, 0.1)
        for first in (0.0, 0.15, 0.3)
    ]
    named = policies()
    print(
        f"Simulated honest function candidates: a {args.call_ms:g} ms call, {args.overhead_ms:g} ms more per "
        f"trial, {args.runs} evaluations per cell, seed {args.seed}. Cells: mean trials (p90) / CoV of "
        "the medians / mean median's bias against the repeats' true time.\n"
    )
    print("| noise | stray trials | first visits slower | " + " | ".join(named) + " |")
    print("|---|---|---|" + "---|" * len(named))
    totals: dict[str, list[float]] = {name: [] for name in named}
    for case in cases:
        cells = []
        for name, policy in named.items():
            rng = np.random.default_rng(
                [args.seed, int(case.sigma * 1000), int(case.outliers * 100), int(case.first * 100)]
            )
            runs = [evaluate(policy, case, rng, args.call_ms, args.overhead_ms) for _ in range(args.runs)]
            trials = [t for t, _ in runs]
            medians = np.asarray([m for _, m in runs])
            cov = float(medians.std() / medians.mean())
            bias = float(medians.mean() / args.call_ms - 1.0)
            totals[name].append(statistics.fmean(trials))
            cells.append(
                f"{statistics.fmean(trials):.1f} ({np.percentile(trials, 90):.0f}) / {cov:.1%} / {bias:+.1%}"
            )
        print(f"| {case.sigma:.0%} | {case.outliers:.0%} | {case.first:.0%} | " + " | ".join(cells) + " |")
    print(
        "| **mean trials over the cases** | | | "
        + " | ".join(f"**{statistics.fmean(v):.1f}**" for v in totals.values())
        + " |"
    )


if __name__ == "__main__":
    main()
