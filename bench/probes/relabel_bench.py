"""The relabel benchmark: does a free-worded method name land on the right technique?

    python -m bench.probes.relabel_bench                 # evaluate the committed model, print the table
    python -m bench.probes.relabel_bench --calibrate     # refit the model on the calibration half, then evaluate
    python -m bench.probes.relabel_bench --out bench/results/relabel/latest.md

Two sets of items, reported in this order:

- **the outside set** (`bench/probes/relabel_data/outside.jsonl`, test only): technique names as other systems,
  papers, guides and blog posts write them (other kernel agents' technique lists, the CUDA guides'
  headings, well-known optimization write-ups), each with its source and licence, labelled by the team
  with the taxonomy technique it means (or NEW) and a `doubtful` flag where the name alone cannot tell.
  No name of it is a taxonomy name or alias word for word, and calibration never reads it (`fit`
  refuses it); the targets are read on its items not marked doubtful. See
  `bench/probes/relabel_data/OUTSIDE.md`.
- **our own set** (`bench/probes/relabel_data/names.jsonl`, written by the team): a method name as a teacher writes it,
its detail, and the true technique (a taxonomy name, or NEW for a technique outside the taxonomy) —
paraphrases, synonyms, abbreviations, informal and non-native phrasings, near-misses. Code-bearing items
come from `bench/trajectories/` with re-worded names (`bench.probes.reword_trajectories`): the step's detail,
think and its code before -> after.

Each item goes into the calibration half or the test half by a hash of its id; `--calibrate` fits the
scorer (`search.relabel.scoring.fit_logistic`) and picks the thresholds on the calibration half only and
writes `search/relabel/data/relabel_model.v2.json`. Every half is evaluated in three graph states:

- `full`: the graph holds the whole taxonomy (what `REGRAPH_TAXONOMY` seeds);
- `partial`: the graph holds 20 techniques, the taxonomy is background knowledge (names of the other
  techniques must not merge into the 20; creating the right canonical technique counts as correct);
- `bare`: the graph holds the same 20 techniques with names and descriptions only and the relabeler
  has no taxonomy (like a team that starts from its own list with `REGRAPH_TAXONOMY=none`).

Metrics: correct merges (of the items whose technique is in the graph, the share merged into it),
false merges (items merged into a technique they are not, or made into the wrong canonical technique),
kept apart (of the items whose technique is not in the graph, the share not merged), queue share
(undecided items, for the judge or the curator queue), decisions per second (embedding included).
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import platform
import sys
import time
from collections import Counter
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import numpy as np

from bench.probes.reword_trajectories import reworded_steps
from bench.split import REPO_ROOT
from graphdb.export import read_export
from graphdb.models import Technique, utc_now
from regraph_data import SEED_GRAPH_PATH
from search.embeddings import Embedder, shared_embedder
from search.protocols import INITIAL_TECHNIQUE
from search.relabel.packaged_vectors import read_packaged_vectors
from search.relabel.relabeler import (
    EXAMPLES_READ,
    PairRule,
    RelabelPolicy,
    StepInput,
    characteristic_signals,
    code_disagrees,
    pair_scores,
    technique_candidates,
)
from search.relabel.scoring import (
    DEFAULT_MODEL_PATH,
    FEATURES,
    MERGE_GATES,
    ScoringModel,
    TextVectors,
    Thresholds,
    candidate_text,
    fit_choice,
    gate_allows,
    load_model,
)
from search.relabel.taxonomy import Taxonomy, default_taxonomy, label_key

DATA = Path(__file__).resolve().parent / "relabel_data" / "names.jsonl"
SEED_GRAPH = SEED_GRAPH_PATH
OUTSIDE_DATA = DATA.with_name("outside.jsonl")
OUTSIDE = "outside"
"""The half of the outside set's items: never "calibration"."""
NEW = "NEW"
CODE_ITEMS_PER_NAME = 3
PARTIAL_GRAPH: tuple[str, ...] = (
    "Parallelization",
    "Memory coalescing",
    "Shared memory tiling",
    "Vectorized memory access",
    "Loop unrolling",
    "Constant memory",
    "Read-only cache (__ldg)",
    "Thread coarsening",
    "Grid-stride loop",
    "Privatization",
    "Atomic operation optimization",
    "Fast math intrinsics",
    "Warp divergence reduction",
    "Kernel fusion",
    "Warp-level shuffle reduction",
    "Algorithm restructuring",
    "Block size tuning",
    "Streams and copy-compute overlap",
    "Precomputation / lookup table",
    "Occupancy-aware launch bounds",
)
"""The 20 techniques of the `partial` and `bare` graphs: common ones whose near neighbours
(register tiling, shared-memory reductions, warp scans, kernel fission...) are left out on purpose."""


@dataclass(frozen=True)
class Item:
    """One labelled method name."""

    id: str
    kind: str
    truth: str
    name: str
    detail: str
    think: str = ""
    code_before: str | None = None
    code_after: str | None = None
    doubtful: bool = False
    """Outside set: the team could not tell the technique from the name for sure (left out of the targets)."""
    source: str = ""
    licence: str = ""
    outside: bool = False
    """An item of the outside set (test only: its half is always `OUTSIDE`)."""

    @property
    def half(self) -> str:
        """ "calibration" or "test", by a hash of the id (never by content the model could see);
        `OUTSIDE` for the outside set."""
        if self.outside:
            return OUTSIDE
        return "calibration" if hashlib.sha256(self.id.encode()).digest()[0] % 2 == 0 else "test"

    def step(self) -> StepInput:
        """The step the relabeler sees."""
        return StepInput(self.name, self.detail, self.think, self.code_before, self.code_after)


def cached_vectors(embedder: Embedder, cache: Path | None) -> TextVectors:
    """Text vectors of ``embedder``, with those an earlier run saved to ``cache`` (an .npz) loaded when
    it exists (the probes' ``--vector-cache``)."""
    vectors = TextVectors(embedder)
    if cache is not None and cache.exists():
        vectors.load(cache)
    return vectors


def load_items(taxonomy: Taxonomy, path: Path = DATA) -> list[Item]:
    """The written items, then the code-bearing items from the re-worded trajectories."""
    items = [Item(**json.loads(line)) for line in path.read_text().splitlines() if line.strip()]
    seen: Counter[str] = Counter()
    for step in reworded_steps():
        concept = taxonomy.lookup(step.original)
        if concept is None or seen[step.method] >= CODE_ITEMS_PER_NAME:
            continue
        seen[step.method] += 1
        items.append(
            Item(
                id=f"code:{step.task_id}:{step.trajectory}:{step.step}",
                kind="code",
                truth=concept.name,
                name=step.method,
                detail=step.detail,
                think=step.think,
                code_before=step.code_before,
                code_after=step.code_after,
            )
        )
    return items


def load_outside_items(path: Path = OUTSIDE_DATA) -> list[Item]:
    """The outside set (names written outside the team, with source and licence): test only."""
    items = []
    for line in path.read_text(encoding="utf-8").splitlines():
        if not line.strip():
            continue
        row = json.loads(line)
        items.append(
            Item(
                id=row["id"],
                kind="outside-set",
                truth=row["truth"],
                name=row["name"],
                detail=row.get("detail", ""),
                doubtful=bool(row["doubtful"]),
                source=row["source"],
                licence=row["licence"],
                outside=True,
            )
        )
    return items


@dataclass
class Scenario:
    """A graph state and the knowledge the relabeler has."""

    name: str
    techniques: list[Technique]
    taxonomy: Taxonomy | None

    @property
    def graph_names(self) -> set[str]:
        """The techniques in the graph."""
        return {t.name for t in self.techniques}


def scenarios(taxonomy: Taxonomy) -> list[Scenario]:
    """The three graph states (see the module docstring)."""
    now = utc_now()
    full = [
        Technique(
            name=t.name,
            description=t.description,
            aliases=list(t.aliases),
            created_at=now,
            created_by="bench",
        )
        for t in taxonomy.techniques
    ]
    partial = [t for t in full if t.name in PARTIAL_GRAPH]
    bare = [t.model_copy(update={"aliases": []}) for t in partial]
    return [
        Scenario("full", full, taxonomy),
        Scenario("partial", partial, taxonomy),
        Scenario("bare", bare, None),
    ]


@dataclass
class Outcome:
    """What happened to one item in one scenario."""

    item: Item
    decision: str
    technique: str
    decided_by: str
    should_merge: bool
    correct: bool
    false_merge: bool
    top_probability: float | None = None

    def record(self) -> dict[str, Any]:
        """The decision as a JSON-able record (the scorer's top probability rounded to 1e-4)."""
        return {
            "id": self.item.id,
            "name": self.item.name,
            "decision": self.decision,
            "technique": self.technique,
            "decided_by": self.decided_by,
            "top_probability": None if self.top_probability is None else round(self.top_probability, 4),
        }


def judge_outcome(item: Item, scenario: Scenario, decision: str, technique: str, canonical: bool) -> Outcome:
    """Score one decision against the item's truth."""
    should_merge = item.truth != NEW and item.truth in scenario.graph_names
    if decision == "merge":
        correct = should_merge and technique == item.truth
        false_merge = not correct
    elif decision == "new":
        if canonical:
            correct = technique == item.truth and not should_merge
            false_merge = technique != item.truth
        else:
            correct = not should_merge
            false_merge = False
    else:
        correct = false_merge = False
    return Outcome(item, decision, technique, "", should_merge, correct, false_merge)


@dataclass
class Row:
    """The table row of one half in one scenario."""

    half: str
    scenario: str
    n: int = 0
    should_merge: int = 0
    correct_merges: int = 0
    false_merges: int = 0
    kept_apart: int = 0
    should_separate: int = 0
    queued: int = 0
    best_right: int = 0
    """Of the items that must merge: merged right, or the scorer's best candidate right where the rule
    did not take it (what a gate that never erred would merge: the ceiling of any gate over the scorer)."""
    seconds: float = 0.0
    cpu_seconds: float = 0.0
    timed: bool = False
    by_rule: Counter[str] = field(default_factory=Counter)
    failures: list[str] = field(default_factory=list)


def evaluate(
    items: list[Item], scenario: Scenario, policy: RelabelPolicy, half: str, *, timed: bool = False
) -> tuple[Row, list[Outcome]]:
    """Decide every item of `half` against the scenario's graph.

    With `timed`, on a cache holding only the graph's labels, so the steps' texts are embedded inside
    the timed part (decisions per second include embedding, as in construction).
    """
    chosen = [i for i in items if i.half == half]
    if timed:
        shared = policy.index(scenario.techniques)
        labels = [label for c in shared.candidates for label in c.labels] + [
            candidate_text(c) for c in shared.candidates
        ]
        policy = RelabelPolicy(
            policy.embedder,
            taxonomy=policy.taxonomy,
            model=policy.model,
            vectors=policy.vectors.copy_of(labels),
        )
    index = policy.index(scenario.techniques)
    row = Row(half, scenario.name, n=len(chosen))
    start, cpu_start = time.perf_counter(), time.process_time()
    # As construction does: one batch per set of steps, names embedded only where the scorer needs them.
    policy.prepare([i.step() for i in chosen], index)
    choices = [policy.choose(i.step(), index) for i in chosen]
    row.seconds = time.perf_counter() - start
    row.cpu_seconds = time.process_time() - cpu_start
    row.timed = timed
    outcomes = []
    for item, choice in zip(chosen, choices, strict=True):
        outcome = judge_outcome(
            item, scenario, choice.outcome, choice.technique, choice.canonical is not None
        )
        outcome.decided_by = choice.decided_by
        if choice.ranked is not None and choice.ranked.top is not None:
            outcome.top_probability = choice.ranked.top[1]
        outcomes.append(outcome)
        row.by_rule[choice.decided_by] += 1
        if outcome.should_merge:
            row.should_merge += 1
            row.correct_merges += outcome.correct
            row.best_right += outcome.correct or _best_is_right(item, scenario, policy, index, choice)
        else:
            row.should_separate += 1
            row.kept_apart += choice.outcome != "merge" and not outcome.false_merge
        row.false_merges += outcome.false_merge
        row.queued += choice.outcome == "undecided"
        if not outcome.correct:
            row.failures.append(
                f"{item.id} {item.name!r} (truth {item.truth}{', doubtful' if item.doubtful else ''}) -> "
                f"{choice.outcome} {choice.technique!r} [{choice.decided_by}"
                + (
                    f", p {choice.ranked.top[1]:.2f}"
                    if choice.ranked is not None and choice.ranked.top
                    else ""
                )
                + "]"
                + "".join(f"; {flag.split(':')[0]}" for flag in choice.flags)
            )
    return row, outcomes


def _best_is_right(item: Item, scenario: Scenario, policy: RelabelPolicy, index: Any, choice: Any) -> bool:
    """Whether the scorer's best candidate for a step the rule did not merge right is the item's truth."""
    ranked = choice.ranked
    if ranked is None or ranked.top is None:
        return False
    top = policy._concept_choice(ranked.top[0], index, "model", None, ranked)
    if top.outcome == "undecided":
        return False
    return judge_outcome(item, scenario, "merge", top.technique, top.canonical is not None).correct


def ceiling_lines(rows: list[Row]) -> str:
    """Per row: how many of the items that must merge a gate that never erred would merge (session 40)."""
    return "\n".join(
        f"- {r.half} / {r.scenario}: {r.best_right}/{r.should_merge} ({percent(r.best_right, r.should_merge)})"
        for r in rows
        if r.should_merge
    )


# -- calibration ----------------------------------------------------------------------------------------


def calibration_rows(
    items: list[Item], scene: Scenario, policy: RelabelPolicy
) -> list[tuple[Item, np.ndarray[Any, Any], list[str], list[bool], bool]]:
    """Per calibration item that reaches the scorer: its candidate features, which candidate is right,
    and whether its name has a word no candidate uses (`CandidateIndex.unknown_words`)."""
    out = []
    index = policy.index(scene.techniques)
    chosen = [i for i in items if i.half == "calibration" and not i.outside]
    policy.prepare([i.step() for i in chosen])
    for item in chosen:
        choice = policy.choose(item.step(), index)
        if choice.decided_by != "model":
            continue
        step = item.step()
        evidence = choice.evidence
        features = index.features(
            step.text,
            evidence,
            policy.vectors.get(step.text.embedded_name()),
            policy.vectors.get(step.text.embedded_text()),
        )
        names = [c.name for c in index.candidates]
        right = [
            item.truth != NEW and c.name == item.truth and (c.in_graph or scene.taxonomy is not None)
            for c in index.candidates
        ]
        out.append((item, features, names, right, bool(index.unknown_words(item.name))))
    return out


Decision = tuple[str, Item, np.ndarray[Any, Any], list[str], list[bool], bool]
"""One calibration decision of the scorer: graph state, item, candidate features, candidate names, which is
right, whether the name has a word no candidate uses."""
Top = tuple[float, float, bool, bool, str, bool]
"""Per scorer decision: the top candidate's probability, its lead over the runner-up, whether the top is
right, whether the step has a right candidate at all (else only "new" or the queue is correct), what it
was (item, name, top candidate: for the error message), and whether the merge gate lets it merge by score."""

L2_GRID: tuple[float, ...] = (0.1, 0.3, 1.0, 3.0, 10.0)
BARE_MERGE_GATE = "explained"
"""The merge gate of the model without a taxonomy (`--bare-gate` to try another)."""
FOLDS = 5


def _groups(
    data: list[Decision],
) -> list[tuple[np.ndarray[Any, Any], int]]:
    return [(f, right.index(True) if any(right) else -1) for _, _, f, _, right, _ in data]


def _folds(data: list[Decision]) -> dict[str, int]:
    """Each item's cross-validation fold (by a hash of its id, so all its graph states share one)."""
    return {item.id: int(hashlib.sha256(item.id.encode()).hexdigest(), 16) % FOLDS for _, item, *_ in data}


def choose_l2(data: list[Decision]) -> float:
    """The L2 penalty with the best held-out log-likelihood, by 5-fold cross-validation over items.

    Folds split by item (an item's decisions in all graph states stay in one fold), calibration half only.
    """
    fold_of = _folds(data)
    best: tuple[float, float] | None = None
    for l2 in L2_GRID:
        loss = 0.0
        for fold in range(FOLDS):
            train = [d for d in data if fold_of[d[1].id] != fold]
            held = [d for d in data if fold_of[d[1].id] == fold]
            weights, bias = fit_choice(_groups(train), l2=l2)
            model = ScoringModel(
                weights=weights, bias=bias, merge_threshold=1.0, new_threshold=0.0, margin=0.0
            )
            for features, target in _groups(held):
                p = model.probabilities(features)
                chosen = float(p[target]) if target >= 0 else 1.0 - float(np.sum(p))
                loss -= float(np.log(max(chosen, 1e-12)))
        if best is None or loss < best[0]:
            best = (loss, l2)
    assert best is not None
    return best[1]


def choose_thresholds(tops: list[Top]) -> Thresholds:
    """The thresholds with no false merge on `tops` (and a 0.03 safety band) that score best.

    Score: correct decisions - missed merges - 0.3 x queued (a queued name costs a curator's minute,
    a missed merge leaves a duplicate technique).
    """
    best: tuple[float, float, float, float] | None = None
    grid = [round(v, 3) for v in np.linspace(0.05, 0.99, 95)] + [0.995, 0.999, 1.0]
    for margin in (0.0, 0.05, 0.1, 0.2, 0.3):
        for merge_t in grid:
            # No wrong top may reach within 0.03 of the merge threshold (1.0: the scorer never merges).
            if merge_t < 1.0 and any(
                t[0] >= merge_t - 0.03 and t[1] >= margin and not t[2] and t[5] for t in tops
            ):
                continue
            for new_t in grid:
                if new_t > merge_t:
                    break
                correct = missed = queued = 0
                for top_p, gap, _top_right, has_right, _what, mergeable in tops:
                    if top_p >= merge_t and gap >= margin and mergeable:
                        correct += 1
                    elif top_p < new_t:
                        correct += not has_right
                        missed += has_right
                    else:
                        queued += 1
                score = correct - 1.0 * missed - 0.3 * queued
                if best is None or score > best[0]:
                    best = (score, merge_t, new_t, margin)
    if best is None:
        worst = sorted((t for t in tops if not t[2]), key=lambda t: -t[0])[:5]
        raise SystemExit(
            "calibration found no threshold without false merges; the most probable wrong tops: "
            + "; ".join(f"{t[4]} p={t[0]:.3f}" for t in worst)
        )
    score, merge_t, new_t, margin = best
    return Thresholds(
        merge_threshold=float(merge_t), new_threshold=float(new_t), margin=float(margin), score=score
    )


def _fit_one(data: list[Decision], label: str, *, gates: tuple[str, ...] = ("",)) -> ScoringModel:
    """The choice model and thresholds for the scorer decisions `data`.

    `gates`: the merge gates (`search.relabel.scoring.MERGE_GATES`) to try; the one whose thresholds
    score best is kept (ties: the first).
    """
    l2 = choose_l2(data)
    weights, bias = fit_choice(_groups(data), l2=l2)
    # The thresholds are chosen on out-of-fold probabilities (each decision scored by a model fitted
    # without its item): in-sample probabilities are optimistic, and a threshold that only just
    # excludes the wrong tops in-sample lets similar ones through on new names.
    fold_of = _folds(data)
    scored: list[tuple[float, float, bool, bool, str, bool, tuple[float, ...]]] = []
    for fold in range(FOLDS):
        w, b = fit_choice(_groups([d for d in data if fold_of[d[1].id] != fold]), l2=l2)
        model = ScoringModel(weights=w, bias=b, merge_threshold=1.0, new_threshold=0.0, margin=0.0)
        for scene_name, item, features, names, right, unknown in data:
            if fold_of[item.id] != fold:
                continue
            p = model.probabilities(features)
            order = np.argsort(-p)
            gap = float(p[order[0]] - p[order[1]]) if len(order) > 1 else float(p[order[0]])
            what = f"{scene_name} {item.id} {item.name!r} -> {names[order[0]]} (truth {item.truth})"
            top_features = tuple(float(v) for v in features[order[0]])
            scored.append(
                (float(p[order[0]]), gap, bool(right[order[0]]), any(right), what, unknown, top_features)
            )
    best: tuple[Thresholds, str] | None = None
    for gate in gates:
        tops: list[Top] = [(*t[:5], gate_allows(gate, unknown=t[5], top_features=t[6])) for t in scored]
        rule = choose_thresholds(tops)
        if best is None or rule.score > best[0].score:
            best = (rule, gate)
    assert best is not None
    rule, gate = best
    return ScoringModel(
        weights=weights,
        bias=bias,
        merge_threshold=rule.merge_threshold,
        new_threshold=rule.new_threshold,
        margin=rule.margin,
        merge_gate=gate,
        fitted_on=f"{label}: {len(data)} scorer decisions; L2 {l2} by {FOLDS}-fold cross-validation"
        + (f"; merge gate {gate!r}" if gate else "")
        + (f" chosen over {list(gates)}" if len(gates) > 1 else ""),
    )


def fit(
    items: list[Item], vectors: TextVectors, taxonomy: Taxonomy, *, bare_gate: str = BARE_MERGE_GATE
) -> ScoringModel:
    """Fit the models and choose their thresholds on the calibration half only.

    Two models: with the taxonomy (fitted on the full and partial graphs) and without it (the bare
    graph), since a relabeler without a taxonomy sees fewer, barer candidates.
    """
    leaked = [i.id for i in items if i.outside]
    if leaked:
        raise ValueError(f"calibration must not read the outside set (items {leaked[:5]}...)")
    placeholder = ScoringModel(
        weights=(0.0,) * len(FEATURES), bias=0.0, merge_threshold=1.0, new_threshold=0.0, margin=0.0
    )
    data: list[Decision] = []
    for scene in scenarios(taxonomy):
        policy = RelabelPolicy(vectors.embedder, taxonomy=scene.taxonomy, model=placeholder, vectors=vectors)
        data.extend((scene.name, *row) for row in calibration_rows(items, scene, policy))
    n = sum(1 for i in items if i.half == "calibration")
    with_taxonomy = _fit_one(
        [d for d in data if d[0] != "bare"],
        f"bench/probes/relabel_data calibration half ({n} items), full+partial graphs",
    )
    # Without a taxonomy a name may be a technique the graph lacks, which only the graph's own words can
    # tell: merges by score need every word of the name explained by the technique (`explained`). The
    # laxer `known_words` gate scores better on the calibration half but made a false merge on the test
    # half ("Loop tiling without shared memory" -> Shared memory tiling, 2026-11-27): the gate is fixed,
    # not chosen by the calibration (see bench/results/2026-11-27_cpu/relabel/README.md).
    without = _fit_one(
        [d for d in data if d[0] == "bare"],
        f"bench/probes/relabel_data calibration half ({n} items), bare graph",
        gates=(bare_gate,),
    )
    return replace(with_taxonomy, without_taxonomy=without)


# -- likely duplicates on the seed graph -------------------------------------------------------------------


def duplicates_report(
    policy: RelabelPolicy,
    bare: RelabelPolicy,
    *,
    top: int = 20,
    min_probability: float = 0.5,
    pair_rule: PairRule = "mutual",
    before: bool = True,
) -> str:
    """The likely-duplicate pairs of the seed graph, before (the bare scorer; left out without `before`)
    and after (the relabel rule with `pair_rule`, the taxonomy and the graph's transitions and examples'
    code; and the rule without a taxonomy, `bare`), the first `top` of each with whether the pair is
    false.

    Every seed technique is a taxonomy technique, so a pair is true only when both are linked to the
    same taxonomy technique (or their labels are written alike); every other pair is a false one.
    """
    export = read_export(SEED_GRAPH)
    techniques = [t for t in export.techniques if t.name != INITIAL_TECHNIQUE]
    candidates = tuple(c for c in technique_candidates(techniques, policy.taxonomy) if c.in_graph)
    concept = {c.name: c.concept for c in candidates}
    linked = {frozenset((t.source, t.target)) for t in export.transitions}
    changes: dict[str, list[tuple[str, str]]] = {}
    for example in export.examples:
        if len(changes.setdefault(example.target, [])) < EXAMPLES_READ:
            changes[example.target].append((example.code_before, example.code_after))
    signals = {name: characteristic_signals(c) for name, c in changes.items()}
    lines = [
        f"Seed graph `{SEED_GRAPH.relative_to(REPO_ROOT)}`: {len(candidates)} techniques, "
        f"{len(export.transitions)} transitions; pairs from p >= {min_probability}, the first {top} shown.",
        "",
        "| listing | pairs listed | false pairs in the first 20 | false pairs shown at >= 0.9 | held back | kept apart by the taxonomy |",
        "| --- | ---: | ---: | ---: | ---: | ---: |",
    ]
    details = []
    listings = (
        ("before: the scorer alone", False, policy),
        ("after: the relabel rule + the taxonomy + the graph", True, policy),
        ("after, without a taxonomy: the relabel rule + the graph", True, bare),
    )
    for label, rule, scorer in listings if before else listings[1:]:
        scored = pair_scores(
            scorer,
            tuple(c for c in technique_candidates(techniques, scorer.taxonomy) if c.in_graph),
            min_probability,
            rule=rule,
            pair_rule=pair_rule,
        )
        listed = sorted(scored.pairs.items(), key=lambda item: (-item[1][0], item[0]))
        held = scored.held_back
        if rule:
            kept = [
                (pair, v)
                for pair, v in listed
                if v[0] >= 1.0
                or (
                    frozenset(pair) not in linked
                    and not code_disagrees(
                        signals.get(pair[0], frozenset()), signals.get(pair[1], frozenset())
                    )
                )
            ]
            held += len(listed) - len(kept)
            listed = kept
        shown = listed[:top]

        def false(pair: tuple[str, str]) -> bool:
            return concept[pair[0]] is None or concept[pair[0]] != concept[pair[1]]

        lines.append(
            f"| {label} | {len(listed)} | {sum(false(p) for p, _ in shown)} | "
            f"{sum(false(p) and v[0] >= 0.9 for p, v in shown)} | {held if rule else '-'} | "
            f"{scored.taxonomy_apart if rule else '-'} |"
        )
        details.append(f"\n### {label}\n")
        details.extend(
            f"- {a} ~ {b}: {v[0]:.2f}{' (false pair)' if false((a, b)) else ''} ({'; '.join(sorted(v[1]))})"
            for (a, b), v in shown
        )
    return "\n".join(lines + details)


# -- report -----------------------------------------------------------------------------------------------


def percent(a: int, b: int) -> str:
    """a/b as a percentage ("-" for 0/0)."""
    return f"{100.0 * a / b:.1f} %" if b else "-"


def table(rows: list[Row]) -> str:
    """The markdown table of all rows."""
    lines = [
        "| half | graph | items | correct merges | false merges | kept apart | queue | decisions/s | decisions/CPU-s | decided by |",
        "| --- | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | --- |",
    ]
    for r in rows:
        rules = ", ".join(f"{k} {v}" for k, v in sorted(r.by_rule.items()))
        lines.append(
            f"| {r.half} | {r.scenario} | {r.n} | {r.correct_merges}/{r.should_merge} ({percent(r.correct_merges, r.should_merge)}) "
            f"| {r.false_merges} | {r.kept_apart}/{r.should_separate} ({percent(r.kept_apart, r.should_separate)}) "
            f"| {r.queued} ({percent(r.queued, r.n)}) | {f'{r.n / r.seconds:.1f}' if r.timed else '-'} "
            f"| {f'{r.n / r.cpu_seconds:.1f}' if r.timed else '-'} | {rules} |"
        )
    return "\n".join(lines)


def unseen_name_row(items: list[Item], outcomes: list[Outcome]) -> str:
    """The test/full result on the items whose name no calibration item writes alike.

    The code-bearing items re-use a few re-wordings per technique, so the same wording can fall in both
    halves; this line shows how much of the test result rests on names the calibration saw.
    """
    seen = {label_key(i.name) for i in items if i.half == "calibration"}
    fresh = [o for o in outcomes if label_key(o.item.name) not in seen]
    merges = [o for o in fresh if o.should_merge]
    return (
        f"Test half on the full graph, only the {len(fresh)} of {len(outcomes)} items whose name no "
        f"calibration item writes alike (`label_key`): correct merges {sum(o.correct for o in merges)}/"
        f"{len(merges)} ({percent(sum(o.correct for o in merges), len(merges))}), false merges "
        f"{sum(o.false_merge for o in fresh)}, queue {sum(o.decision == 'undecided' for o in fresh)}."
    )


def cold_start_line(policy: RelabelPolicy, techniques: list[Technique], timed: Row) -> str:
    """What a fresh process pays before its first decision: embedding the candidates' labels and
    descriptions (the full graph), from an empty cache and from the packaged taxonomy vectors; and the
    test half's decisions per CPU-second with that cost included."""
    costs = []
    for packaged in (False, True):
        vectors = TextVectors(policy.embedder)
        start = time.process_time()
        if packaged:
            vectors.add(read_packaged_vectors(policy.embedder))
        RelabelPolicy(policy.embedder, taxonomy=policy.taxonomy, model=policy.model, vectors=vectors).index(
            techniques
        )
        costs.append(time.process_time() - start)
    return (
        f"A fresh process's candidate index (full graph): {costs[0]:.2f} CPU-s from an empty cache, "
        f"{costs[1]:.2f} CPU-s from the packaged taxonomy vectors (`search/relabel/packaged_vectors.py`); "
        f"the test half with that cost included: {timed.n / (timed.cpu_seconds + costs[0]):.1f} "
        f"decisions/CPU-s before, {timed.n / (timed.cpu_seconds + costs[1]):.1f} with them."
    )


def main(argv: list[str] | None = None) -> int:
    """Command line."""
    parser = argparse.ArgumentParser(description="relabel benchmark")
    parser.add_argument(
        "--calibrate", action="store_true", help="refit the model on the calibration half first"
    )
    parser.add_argument("--model", type=Path, default=DEFAULT_MODEL_PATH)
    parser.add_argument(
        "--bare-gate",
        choices=MERGE_GATES,
        default=BARE_MERGE_GATE,
        help="with --calibrate: the merge gate of the model without a taxonomy",
    )
    parser.add_argument("--out", type=Path, help="also write the report (markdown) here")
    parser.add_argument(
        "--outside",
        type=Path,
        default=OUTSIDE_DATA,
        help="the outside set (test only; default: the committed one)",
    )
    parser.add_argument("--failures", action="store_true", help="list every wrong decision")
    parser.add_argument(
        "--decisions",
        type=Path,
        help="write every decision (half, graph, item, outcome, technique, rule, top probability) as JSON "
        "lines here, to diff two runs",
    )
    parser.add_argument(
        "--vector-cache",
        type=Path,
        help="keep the untimed embeddings in this .npz between runs (development)",
    )
    parser.add_argument(
        "--torch-threads",
        type=int,
        help="torch intra-op threads for the embedding model (default: torch's own, one per core); on a "
        "machine shared with other busy processes 1 avoids threads spinning while they wait for a core",
    )
    args = parser.parse_args(argv)
    if args.torch_threads is not None:
        import torch

        torch.set_num_threads(args.torch_threads)
    taxonomy = default_taxonomy()
    items = load_items(taxonomy)
    embedder = shared_embedder()
    vectors = cached_vectors(embedder, args.vector_cache)
    if args.calibrate:
        model = fit(items, vectors, taxonomy, bare_gate=args.bare_gate)
        args.model.write_text(json.dumps(model.to_json(), indent=1) + "\n")
        print(f"fitted model written to {args.model}")
    model = load_model(args.model)
    outside = load_outside_items(args.outside)
    outside_rows: list[Row] = []
    decisions: list[str] = []
    for scene in scenarios(taxonomy):
        policy = RelabelPolicy(embedder, taxonomy=scene.taxonomy, model=model, vectors=vectors)
        for label, chosen in (
            ("outside, clear", [i for i in outside if not i.doubtful]),
            ("outside, doubtful", [i for i in outside if i.doubtful]),
        ):
            row, outcomes = evaluate(chosen, scene, policy, OUTSIDE)
            row.half = label
            outside_rows.append(row)
            decisions.extend(
                json.dumps({"half": OUTSIDE, "graph": scene.name, **o.record()}, sort_keys=True)
                for o in outcomes
            )
    rows = []
    for half in ("calibration", "test"):
        for scene in scenarios(taxonomy):
            policy = RelabelPolicy(embedder, taxonomy=scene.taxonomy, model=model, vectors=vectors)
            row, outcomes = evaluate(items, scene, policy, half, timed=(half, scene.name) == ("test", "full"))
            rows.append(row)
            decisions.extend(
                json.dumps({"half": half, "graph": scene.name, **o.record()}, sort_keys=True)
                for o in outcomes
            )
            if (half, scene.name) == ("test", "full"):
                unseen = unseen_name_row(items, outcomes)
                cold = cold_start_line(policy, scene.techniques, row)
    duplicates = duplicates_report(
        RelabelPolicy(embedder, taxonomy=taxonomy, model=model, vectors=vectors),
        RelabelPolicy(embedder, taxonomy=None, model=model, vectors=vectors),
    )
    if args.vector_cache is not None:
        vectors.save(args.vector_cache)
    if args.decisions is not None:
        args.decisions.write_text("".join(f"{line}\n" for line in decisions))
    kinds = Counter(i.kind for i in items)
    halves = Counter(i.half for i in items)
    report = "\n".join(
        [
            f"# Relabel benchmark ({datetime.now(UTC):%Y-%m-%d %H:%M} UTC)",
            "",
            f"- command: `python -m bench.probes.relabel_bench {' '.join(argv if argv is not None else sys.argv[1:])}`",
            f"- machine: {platform.machine()}, {os.cpu_count()} cores, load average {os.getloadavg()[0]:.1f} "
            f"at the end (the machine is shared), python {sys.version.split()[0]}",
            "- decisions/s: the test half on the full graph, embedding of every step included (the other rows "
            "reuse those embeddings); decisions/CPU-s counts this process's CPU time (all its threads), "
            "the fairer figure on a shared machine",
            f"- outside set: {len(outside)} names from {len({i.source for i in outside})} sources "
            f"({sum(not i.doubtful for i in outside)} clear, {sum(i.doubtful for i in outside)} doubtful; "
            f"{sum(i.truth != NEW for i in outside)} mean a taxonomy technique, {sum(i.truth == NEW for i in outside)} none)",
            f"- own set: {len(items)} items ({', '.join(f'{k} {v}' for k, v in sorted(kinds.items()))}); "
            f"calibration {halves['calibration']}, test {halves['test']}",
            f"- taxonomy {taxonomy.version} ({len(taxonomy.techniques)} techniques); model: "
            f"merge >= {model.merge_threshold}, new < {model.new_threshold}, margin {model.margin}"
            + (
                f" (without a taxonomy, its own weights: merge >= {model.without_taxonomy.merge_threshold}, "
                f"new < {model.without_taxonomy.new_threshold}, margin {model.without_taxonomy.margin}, "
                f"merge gate {model.without_taxonomy.merge_gate!r})"
                if model.without_taxonomy is not None
                else ""
            ),
            "",
            "## The outside set (names written outside the team; never calibrated on)",
            "",
            "Graphs: `full` = the taxonomy seeded (the default); `partial` = 20 techniques, the taxonomy as "
            "knowledge; `bare` = the same 20 techniques, names and descriptions only, no taxonomy "
            "(`REGRAPH_TAXONOMY=none`). Targets on the clear items: >= 90 % correct merges, 0 false merges, "
            "<= 15 % queue.",
            "",
            table(outside_rows),
            "",
            "The ceiling of any gate over the scorer: of the items that must merge, those merged right or "
            "whose scorer's best candidate is right where the rule queued them or made a new technique (what "
            "a gate that took every right best candidate and no wrong one would merge):",
            "",
            ceiling_lines(outside_rows),
            "",
            "## Our own set",
            "",
            table(rows),
            "",
            unseen,
            "",
            cold,
            "",
            "## Likely duplicates on the seed graph (`RelabelService.likely_duplicates`' pair rule)",
            "",
            duplicates,
            "",
        ]
    )
    if args.failures:
        for r in [*outside_rows, *rows]:
            report += f"\n## {r.half} / {r.scenario}: {len(r.failures)} not correct\n" + "".join(
                f"- {f}\n" for f in r.failures
            )
    print(report)
    if args.out is not None:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(report)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
