"""Likely duplicates on names we did not write (issue 28, part 3; development sets only)

    python -m bench.probes.relabel_duplicates --vector-cache /tmp/dup/vc.npz --out duplicates.md

`RelabelService.likely_duplicates` lists pairs of a graph's techniques that probably name one technique
(`search.relabel.relabeler.pair_scores`). The seed graph holds one node per taxonomy technique, so it only
shows false pairs; here each development set (`general.jsonl`, `dev2.jsonl` ... `dev15.jsonl`, opened by
name; the outside set is refused by `load_dev_set`) becomes a bare graph (`REGRAPH_TAXONOMY=none`) whose
techniques are its clear items' names, described by their details where they have one. Two names labelled
with the same taxonomy technique are a true duplicate pair; every other pair, names of different
techniques or of none (`NEW`), is a false one (two `NEW` names may still be one technique the taxonomy
lacks: they are counted apart). A second table puts each set's doubtful names in its graph too (more
techniques to tell apart); a pair with a doubtful name is listed but counted neither true nor false.

Each listing rule is run from `--min-probability` (the API's default 0.5), as the service lists:

- the scorer alone (`rule=False`), for comparison;
- `pair_scores` with each `PAIR_RULES` value: `either` (one technique would be merged into the other,
  the rule before session 34), `mutual` (that, and the other's nearest technique is the first, at the
  lower probability), `both` (each would be merged into the other);
- the whole relabel rule (`RelabelPolicy.choose`, every gate) with each technique as a step against the
  others: one way, or both ways.

Rules are compared by false pairs shown at >= 0.9, then true pairs kept. Leave one set out: for each set
the rule is chosen on the other sets (fewest false pairs at >= 0.9 among the rules that keep at least
half of `either`'s true pairs there; then most true pairs, fewest false) and its result on the held-out
set is summed. The seed graph's listings (with and without the taxonomy, `relabel_bench.duplicates_report`)
follow, per `pair_scores` rule, as a check on our own material.
"""

from __future__ import annotations

import argparse
import os
import platform
import sys
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path

from bench.probes.relabel_bench import NEW, Item, cached_vectors, duplicates_report
from bench.probes.relabel_gate_audit import load_dev_set
from bench.probes.relabel_loso import DEV_SETS
from graphdb.models import Technique, utc_now
from search.embeddings import shared_embedder
from search.relabel.relabeler import (
    PAIR_RULES,
    PairRule,
    RelabelPolicy,
    StepInput,
    pair_scores,
    technique_candidates,
)
from search.relabel.scoring import load_model
from search.relabel.taxonomy import default_taxonomy

SHOWN_HIGH = 0.9
"""A pair shown at this probability or more reads as certain to a curator: none of them should be false."""
Pairs = dict[tuple[str, str], float]


@dataclass
class BareGraph:
    """One development set as a graph: a technique per clear name, and what each name means."""

    name: str
    techniques: list[Technique]
    truth: dict[str, str]
    dropped: int = 0
    """Items whose name another item of the set already writes (case ignored)."""
    doubtful: frozenset[str] = frozenset()
    """Names the team could not label for sure: in the graph, but a pair with one is not counted."""

    def true_pair(self, pair: tuple[str, str]) -> bool:
        """Both names mean one taxonomy technique."""
        first, second = (self.truth[n] for n in pair)
        return first != NEW and first == second

    def true_pairs(self) -> int:
        """How many pairs of the graph are true (of clear names)."""
        counts: dict[str, int] = {}
        for name, truth in self.truth.items():
            if truth != NEW and name not in self.doubtful:
                counts[truth] = counts.get(truth, 0) + 1
        return sum(n * (n - 1) // 2 for n in counts.values())


def bare_graph(name: str, items: list[Item], *, doubtful: bool = False) -> BareGraph:
    """The clear items of set `name` as techniques (name, detail as description, no aliases); with
    `doubtful` its doubtful items too (more techniques to tell apart, their pairs not counted)."""
    now = utc_now()
    seen: dict[str, Item] = {}
    chosen = [i for i in items if doubtful or not i.doubtful]
    for item in sorted(chosen, key=lambda i: i.doubtful):  # a clear item first where two write one name
        seen.setdefault(item.name.strip().lower(), item)
    kept = list(seen.values())
    return BareGraph(
        name,
        [
            Technique(name=i.name, description=i.detail, aliases=[], created_at=now, created_by="bench")
            for i in kept
        ],
        {i.name: i.truth for i in kept},
        dropped=len(chosen) - len(kept),
        doubtful=frozenset(i.name for i in kept if i.doubtful),
    )


def whole_rule_pairs(policy: RelabelPolicy, graph: BareGraph, min_probability: float, both: bool) -> Pairs:
    """Pairs by the whole relabel rule: each technique (name, description) decided against the others;
    a merge of one into the other (`both`: each into the other), at the merging probability (`both`: the
    lower), 1.0 for an alias hit."""
    steps = [StepInput(t.name, t.description) for t in graph.techniques]
    policy.prepare(steps)
    merged: dict[str, tuple[str, float]] = {}
    for technique, step in zip(graph.techniques, steps, strict=True):
        others = [t for t in graph.techniques if t.name != technique.name]
        choice = policy.choose(step, policy.index(others))
        if choice.outcome != "merge":
            continue
        p = 1.0
        if choice.decided_by != "alias" and choice.ranked is not None:
            p = choice.ranked.probabilities[choice.ranked.names.index(choice.technique)]
        merged[technique.name] = (choice.technique, p)
    out: Pairs = {}
    for first, (second, p) in merged.items():
        pair = (first, second) if first < second else (second, first)
        back = merged.get(second)
        if both:
            if back is None or back[0] != first:
                continue
            p = min(p, back[1])
        if p >= min_probability:
            out[pair] = max(out.get(pair, 0.0), p)
    return out


def listing_rules(policy: RelabelPolicy, min_probability: float) -> dict[str, Callable[[BareGraph], Pairs]]:
    """Every listing rule compared, by its label."""

    def scored(graph: BareGraph, *, rule: bool = True, pair_rule: PairRule = "mutual") -> Pairs:
        candidates = tuple(c for c in technique_candidates(graph.techniques, None) if c.in_graph)
        result = pair_scores(policy, candidates, min_probability, rule=rule, pair_rule=pair_rule)
        return {pair: value[0] for pair, value in result.pairs.items() if value[0] >= min_probability}

    rules: dict[str, Callable[[BareGraph], Pairs]] = {
        "the scorer alone": lambda g: scored(g, rule=False),
    }
    for pair_rule in PAIR_RULES:
        rules[f"pair_scores, {pair_rule}"] = lambda g, r=pair_rule: scored(g, pair_rule=r)  # type: ignore[misc]
    rules["whole relabel rule, one way"] = lambda g: whole_rule_pairs(policy, g, min_probability, False)
    rules["whole relabel rule, both ways"] = lambda g: whole_rule_pairs(policy, g, min_probability, True)
    return rules


@dataclass
class PairTally:
    """What one rule listed on one or more graphs."""

    listed: int = 0
    """Pairs listed, a doubtful name's included."""
    uncounted: int = 0
    """Pairs listed with a doubtful name."""
    true: int = 0
    false: int = 0
    false_new: int = 0
    """False pairs of two `NEW` names (possibly one technique the taxonomy lacks)."""
    false_high: int = 0
    true_high: int = 0
    false_pairs: list[str] = field(default_factory=list)

    def add(self, other: PairTally) -> None:
        """Sum `other` into this tally."""
        self.listed += other.listed
        self.uncounted += other.uncounted
        self.true += other.true
        self.false += other.false
        self.false_new += other.false_new
        self.false_high += other.false_high
        self.true_high += other.true_high
        self.false_pairs.extend(other.false_pairs)


def tally(graph: BareGraph, pairs: Pairs) -> PairTally:
    """Count `pairs` against the graph's labels."""
    out = PairTally(listed=len(pairs))
    for pair, p in sorted(pairs.items(), key=lambda item: (-item[1], item[0])):
        high = p >= SHOWN_HIGH
        if graph.doubtful & set(pair):
            out.uncounted += 1
            continue
        if graph.true_pair(pair):
            out.true += 1
            out.true_high += high
            continue
        out.false += 1
        out.false_high += high
        both_new = all(graph.truth[n] == NEW for n in pair)
        out.false_new += both_new
        out.false_pairs.append(
            f"{graph.name}: {pair[0]} ~ {pair[1]}: {p:.2f} ({graph.truth[pair[0]]} | {graph.truth[pair[1]]})"
        )
    return out


def chosen_rule(results: dict[str, dict[str, PairTally]], sets: list[str]) -> str:
    """The rule `sets` choose: among those keeping at least half of `either`'s true pairs, the fewest false
    pairs shown at >= 0.9, then the most true pairs, then the fewest false pairs."""
    summed: dict[str, PairTally] = {}
    for rule, per_set in results.items():
        summed[rule] = PairTally()
        for name in sets:
            summed[rule].add(per_set[name])
    floor = summed["pair_scores, either"].true / 2
    eligible = [r for r, t in summed.items() if t.true >= floor and r != "the scorer alone"]
    return min(eligible, key=lambda r: (summed[r].false_high, -summed[r].true, summed[r].false, r))


def row(label: str, t: PairTally, true_pairs: int) -> str:
    """One markdown table row."""
    return (
        f"| {label} | {t.listed}{f' ({t.uncounted} with a doubtful name)' if t.uncounted else ''} | "
        f"{t.true}/{true_pairs} | {t.false} ({t.false_new}) | "
        f"{t.false_high} | {t.true_high} |"
    )


HEADER = (
    "| listing | pairs listed | true pairs (of all true) | false pairs (both NEW) | false shown >= 0.9 | "
    "true shown >= 0.9 |\n| --- | ---: | ---: | ---: | ---: | ---: |"
)


def main(argv: list[str] | None = None) -> int:
    """Command line."""
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--vector-cache", type=Path, default=None)
    parser.add_argument("--min-probability", type=float, default=0.5)
    parser.add_argument("--out", type=Path, default=None)
    args = parser.parse_args(argv)
    embedder = shared_embedder()
    vectors = cached_vectors(embedder, args.vector_cache)
    model = load_model()
    bare = RelabelPolicy(embedder, taxonomy=None, model=model, vectors=vectors)
    sets = {name: load_dev_set(name) for name in DEV_SETS}
    graphs = [bare_graph(name, items) for name, items in sets.items()]
    wide = [bare_graph(name, items, doubtful=True) for name, items in sets.items()]
    rules = listing_rules(bare, args.min_probability)
    results: dict[str, dict[str, PairTally]] = {
        rule: {g.name: tally(g, list_pairs(g)) for g in graphs} for rule, list_pairs in rules.items()
    }
    results_wide: dict[str, dict[str, PairTally]] = {
        rule: {g.name: tally(g, list_pairs(g)) for g in wide} for rule, list_pairs in rules.items()
    }
    taxonomy = default_taxonomy()
    seed = [
        f"\n### `pair_scores`, {pair_rule}\n\n"
        + duplicates_report(
            RelabelPolicy(embedder, taxonomy=taxonomy, model=model, vectors=vectors),
            bare,
            min_probability=args.min_probability,
            pair_rule=pair_rule,
            before=False,
        )
        for pair_rule in PAIR_RULES
    ]
    if args.vector_cache is not None:
        vectors.save(args.vector_cache)
    true_of = {g.name: g.true_pairs() for g in graphs}
    dev = [g.name for g in graphs if g.name != "general"]
    lines = [
        f"# Likely duplicates on the development sets ({datetime.now(UTC):%Y-%m-%d %H:%M} UTC)",
        "",
        f"- command: `python -m bench.probes.relabel_duplicates {' '.join(argv if argv is not None else sys.argv[1:])}`",
        f"- machine: {platform.machine()}, {os.cpu_count()} cores, load average {os.getloadavg()[0]:.1f} "
        f"at the end, python {sys.version.split()[0]}",
        f"- graphs: one bare graph (no taxonomy) per set, its clear items' names as techniques (details as "
        f"descriptions); {sum(len(g.techniques) for g in graphs)} techniques in all "
        f"({sum(g.dropped for g in graphs)} clear names written twice in a set dropped); pairs from "
        f"p >= {args.min_probability}; true pairs: two names of one taxonomy technique; false: the rest "
        "(in brackets the false pairs of two NEW names, which may be one technique the taxonomy lacks)",
        "",
        "## All sets together",
        "",
    ]
    for label, names in (
        ("dev2 ... dev15 (names written outside the team)", dev),
        ("general (written by the team, session 16)", ["general"]),
        ("all 15 sets", [g.name for g in graphs]),
    ):
        lines += [f"### {label}", "", HEADER]
        for rule, per_set in results.items():
            total = PairTally()
            for name in names:
                total.add(per_set[name])
            lines.append(row(rule, total, sum(true_of[n] for n in names)))
        lines.append("")
    lines += [
        "### all 15 sets, their doubtful names in the graphs too",
        "",
        f"{sum(len(g.techniques) for g in wide)} techniques; a pair with a doubtful name is listed but not counted.",
        "",
        HEADER,
    ]
    for rule, per_set in results_wide.items():
        total = PairTally()
        for name in per_set:
            total.add(per_set[name])
        lines.append(row(rule, total, sum(g.true_pairs() for g in wide)))
    lines += [
        "",
        "## Leave one set out",
        "",
        "Each set's rule chosen on the other 14 sets (see the module docstring), its result on the set summed:",
        "",
        HEADER,
    ]
    held_out = PairTally()
    choices = []
    for g in graphs:
        rule = chosen_rule(results, [n for n in true_of if n != g.name])
        choices.append(f"{g.name}: {rule}")
        held_out.add(results[rule][g.name])
    lines += [
        row("held out, all 15 sets", held_out, sum(true_of.values())),
        "",
        "Chosen per fold: " + "; ".join(choices) + ".",
        "",
        "## Per set",
        "",
        "| set | techniques | true pairs | "
        + " | ".join(f"{r} (listed: true/false/false >= 0.9)" for r in results)
        + " |",
        "| --- | ---: | ---: | " + " | ".join("---:" for _ in results) + " |",
    ]
    for g in graphs:
        cells = [
            f"{t.listed}: {t.true}/{t.false}/{t.false_high}" for t in (results[r][g.name] for r in results)
        ]
        lines.append(f"| {g.name} | {len(g.techniques)} | {true_of[g.name]} | " + " | ".join(cells) + " |")
    lines += ["", "## False pairs listed, per rule"]
    for rule, per_set in results.items():
        if rule == "the scorer alone":
            continue
        lines += ["", f"### {rule}", ""]
        lines += [f"- {p}" for name in true_of for p in per_set[name].false_pairs] or ["- none"]
    lines += [
        "",
        "## The seed graph (our own material), per `pair_scores` rule",
        "",
        "Every seed technique is a taxonomy technique, so every pair but one of a taxonomy technique is false.",
        *seed,
        "",
    ]
    report = "\n".join(lines)
    print(report)
    if args.out is not None:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(report)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
