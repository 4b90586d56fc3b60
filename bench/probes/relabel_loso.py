"""Leave-one-set-out evaluation of relabel decision changes (issue 28; development sets only)

    python -m bench.probes.relabel_loso --vector-cache /tmp/rl32/vc.npz --records /tmp/rl32/rec.json \
        --out loso.md

Every development set's items (`general.jsonl`, `dev2.jsonl` ... `dev17.jsonl`) and the own set are
decided once on the `full` and `bare` graphs of `bench.probes.relabel_bench`; each decision is recorded
with its verdict (`correct`, `false`, `new ok`, `new wrong`, `queued`), the gate that queued it, the
scorer's best candidate and what taking it would be (`top_verdict`), what a new technique named as the
step would be (`new_verdict`), and the scorer's features of the best and second candidates. A
*candidate change* is a function of a decision and free parameters that may turn it into "take the top
candidate" or "new technique". For each development set X, the change's free parameters are
chosen on the others only (the most right decisions gained with no false merge and no duplicate
technique added on any of them, clear and doubtful items, both graphs; ties to the strictest), then
applied to X. The report sums the held-out sets: correct merges, false merges, queued and duplicates on
the clear items per graph, false merges on the doubtful items, and the own set under each fold's
parameters (it never chooses them). The probe refuses the outside set
(`bench/probes/relabel_data/outside.jsonl`): none of its items is read here.

Why: every session's rules gained on the development sets they were written from and none moved the
outside set; a figure measured on sets that did not choose the change is the estimate that transfers.

"As is" is the rule without the labelled examples (`search.relabel.examples`, which hold the development
sets' own names: in-sample, every set would decide its names by their own labels). `--implemented`
decides each development set with the examples of the other sets only (the committed rule, held out);
`--knn` simulates the example families that chose its thresholds; `--refit` refits the choice model's
weights on the other sets (tried, not kept); `--write-examples` writes the packaged examples.
"""

from __future__ import annotations

import argparse
import json
import random
import sys
from collections.abc import Callable, Iterator, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from bench.probes.relabel_bench import (
    NEW,
    Item,
    Scenario,
    cached_vectors,
    judge_outcome,
    load_items,
    scenarios,
)
from bench.probes.relabel_gate_audit import gate_of, load_dev_set, verdict
from search.embeddings import shared_embedder
from search.relabel.relabeler import RelabelChoice, RelabelPolicy
from search.relabel.scoring import FEATURES, CandidateIndex, ScoringModel, TextVectors, fit_choice, load_model
from search.relabel.taxonomy import concept_tokens, default_taxonomy

DEV_SETS: tuple[str, ...] = ("general", *(f"dev{n}" for n in range(2, 18)))
EXAMPLE_SETS: tuple[str, ...] = DEV_SETS[:15]
"""The development sets whose clear items the packaged examples hold (`--write-examples`): general, dev2
... dev15. dev16 and dev17 (session 39) were measured held out and left out: they gained no right decision
on the clear items (`bench/results/relabel/2026-12-01_s39_learning_curve.md`)."""
GRAPHS: tuple[str, ...] = ("full", "bare")
NEVER_NEW_GATES = frozenset({"name_unusable", "name_not_understood", "name_contradicts", "other"})
"""Queued names a change may never turn into new techniques: the issue's bad input and nonsense names,
and names that turn against a technique's own label (a curator says what they are)."""


@dataclass
class Record:
    """One decision of one item on one graph."""

    source: str
    """"own", "general", "dev2" ..."""
    graph: str
    id: str
    name: str
    truth: str
    doubtful: bool
    should_merge: bool
    verdict: str
    gate: str = ""
    top: str = ""
    top_verdict: str = "-"
    new_verdict: str = "-"
    decided_by: str = ""
    detail: bool = False
    top_features: list[float] = field(default_factory=list)
    second_features: list[float] = field(default_factory=list)
    p: list[float] = field(default_factory=list)
    """The best two candidates' probabilities."""
    words: list[float] = field(default_factory=list)
    """The name's words (`WORDS`): content words, words no candidate uses, whether the head word is one
    of them, the best candidate's weighted word share (`WordCoverage.shares`) and its lead over every
    other candidate's, its rare words, the name's rare words of other techniques it lacks, and words of
    its own name."""


def _sets() -> list[tuple[str, list[Item]]]:
    own = load_items(default_taxonomy())
    out: list[tuple[str, list[Item]]] = [("own", own)]
    for name in DEV_SETS:
        out.append((name, load_dev_set(name)))
    return out


def _graphs(
    model: ScoringModel, vectors: TextVectors
) -> Iterator[tuple[Scenario, RelabelPolicy, CandidateIndex]]:
    """The full and bare graphs (`GRAPHS`), each with its policy under `model` (no examples: the
    probe judges the scorer and its gates, and the example rule apart) and its candidate index."""
    for scene in scenarios(default_taxonomy()):
        if scene.name not in GRAPHS:
            continue
        policy = RelabelPolicy(
            vectors.embedder, taxonomy=scene.taxonomy, model=model, vectors=vectors, examples=[]
        )
        yield scene, policy, policy.index(scene.techniques)


def _record(source: str, scene: Scenario, item: Item, choice: RelabelChoice, **more: Any) -> Record:
    """`item`'s decision `choice` on `scene`'s graph as a record (`more`: its other fields)."""
    return Record(
        source,
        scene.name,
        item.id,
        item.name,
        item.truth,
        item.doubtful,
        item.truth != NEW and item.truth in scene.graph_names,
        verdict(item, scene, choice),
        decided_by=choice.decided_by,
        **more,
    )


def collect(
    vectors: TextVectors,
    model: ScoringModel | None = None,
    sets: list[tuple[str, list[Item]]] | None = None,
) -> list[Record]:
    """Decide every item of the own and development sets (or of `sets`: `bench.probes.relabel_adapter`
    decides one held-out set at a time) on the full and bare graphs (under `model`, default the
    committed one: `bench.probes.relabel_embedder` passes one recalibrated for another embedding model)."""
    model = model or load_model()
    sets = _sets() if sets is None else sets
    records: list[Record] = []
    for scene, policy, index in _graphs(model, vectors):
        for source, items in sets:
            policy.prepare([i.step() for i in items], index)
            for item in items:
                choice = policy.choose(item.step(), index)
                new = judge_outcome(item, scene, "new", item.name, False)
                rec = _record(
                    source,
                    scene,
                    item,
                    choice,
                    detail=bool(item.detail.strip()),
                    new_verdict="new ok" if new.correct else "new wrong",
                )
                if choice.outcome == "undecided":
                    rec.gate = gate_of(choice, policy)
                ranked = choice.ranked
                if ranked is not None and ranked.top is not None:
                    top = policy._concept_choice(ranked.top[0], index, "model", None, ranked)
                    rec.top, rec.top_verdict = ranked.top[0], verdict(item, scene, top)
                    rec.top_features = [round(v, 5) for v in ranked.features[0]]
                    if len(ranked.names) > 1:
                        rec.second_features = [round(v, 5) for v in ranked.features[1]]
                    rec.p = [round(v, 5) for v in ranked.probabilities[:2]]
                    cov = index.word_coverage(item.name)
                    best = ranked.top[0]
                    others = [v for k, v in cov.shares.items() if k != best]
                    rec.words = [
                        float(len(set(concept_tokens(item.name)))),
                        float(cov.unknown),
                        float(cov.head_unknown),
                        round(cov.shares.get(best, 0.0), 5),
                        round(cov.shares.get(best, 0.0) - max(others, default=0.0), 5),
                        float(cov.rare.get(best, 0)),
                        float(cov.foreign.get(best, 0)),
                        float(cov.own_name.get(best, 0)),
                    ]
                records.append(rec)
    return records


# --- features of a decision for the candidate changes -------------------------------------------------

_NAME, _TEXT = FEATURES.index("name_sim"), FEATURES.index("text_sim")
_LEX, _UNEXPLAINED = FEATURES.index("lexical"), FEATURES.index("unexplained")
VECTOR: tuple[str, ...] = (
    "p",
    "gap",
    "name_sim",
    "name_lead",
    "text_lead",
    "lexical",
    "explained",
    "unknown_share",
    "word_share",
    "word_lead",
)
WORDS: tuple[str, ...] = (
    "words",
    "unknown",
    "head_unknown",
    "share",
    "share_lead",
    "rare",
    "foreign",
    "own_name",
)


def vector(rec: Record) -> np.ndarray[Any, np.dtype[np.float64]]:
    """The second stage's inputs (`VECTOR`): the scorer's view of the best candidate against the next."""
    top, second = rec.top_features, rec.second_features or [0.0] * len(FEATURES)
    p2 = rec.p[1] if len(rec.p) > 1 else 0.0
    return np.array(
        [
            rec.p[0],
            rec.p[0] - p2,
            top[_NAME],
            top[_NAME] - second[_NAME],
            top[_TEXT] - second[_TEXT],
            top[_LEX],
            1.0 - top[_UNEXPLAINED],
            rec.words[1] / max(rec.words[0], 1.0),
            rec.words[3],
            rec.words[4],
        ]
    )


def fit_logistic(
    x: np.ndarray[Any, np.dtype[np.float64]], y: np.ndarray[Any, np.dtype[np.float64]], l2: float = 1.0
) -> np.ndarray[Any, np.dtype[np.float64]]:
    """Weights (bias last) of an L2-regularised logistic regression by Newton's method."""
    xb = np.hstack([x, np.ones((len(x), 1))])
    w = np.zeros(xb.shape[1])
    reg = np.full(xb.shape[1], l2)
    reg[-1] = 0.0
    for _ in range(50):
        p = 1.0 / (1.0 + np.exp(-(xb @ w)))
        grad = xb.T @ (p - y) + reg * w
        hess = (xb * (p * (1 - p))[:, None]).T @ xb + np.diag(reg) + 1e-9 * np.eye(len(w))
        step = np.linalg.solve(hess, grad)
        w -= step
        if np.abs(step).max() < 1e-8:
            break
    return w


# --- candidate changes ---------------------------------------------------------------------------------

Action = str
""""top" (take the scorer's best candidate), "new" (a new technique named as the step) or "" (as is)."""


@dataclass
class Change:
    """A candidate change: which decisions it may touch, and how a fitted parameter scores them."""

    name: str
    doc: str
    eligible: Callable[[Record], bool]
    action: Action
    score: Callable[[Record], float] | None = None
    """A fixed score (larger = act sooner); None: a logistic fitted on the training sets' eligible
    decisions (label: the action would be right)."""


def _queued_top(rec: Record) -> bool:
    return rec.verdict == "queued" and rec.top_verdict in ("correct", "false") and len(rec.p) > 0


def _queued_separation(rec: Record) -> bool:
    return _queued_top(rec) and rec.gate in ("not_separated", "name_unexplained", "name_points_elsewhere")


def _new_top(rec: Record) -> bool:
    return (
        rec.verdict in ("new ok", "new wrong")
        and rec.decided_by == "model"
        and rec.top_verdict in ("correct", "false")
        and len(rec.p) > 0
    )


def _queued_to_new(rec: Record) -> bool:
    return rec.verdict == "queued" and rec.gate not in NEVER_NEW_GATES and len(rec.p) > 0


CHANGES: tuple[Change, ...] = (
    Change("lift_p", "queued, a best candidate: take it when p >= t", _queued_top, "top", lambda r: r.p[0]),
    Change(
        "lift_name_lead",
        "queued, a best candidate: take it when its name lead >= t",
        _queued_top,
        "top",
        lambda r: float(vector(r)[3]),
    ),
    Change(
        "lift_learned",
        "queued, a best candidate: take it when a logistic over `VECTOR`, fitted on the other sets' "
        "queued decisions (label: taking the best is right), scores >= t",
        _queued_top,
        "top",
    ),
    Change(
        "lift_learned_separation",
        "as lift_learned, only decisions queued by the three separation stops",
        _queued_separation,
        "top",
    ),
    Change(
        "lift_word_lead",
        "queued, a best candidate: take it when its weighted word share leads every other's by >= t",
        _queued_top,
        "top",
        lambda r: r.words[4],
    ),
    Change(
        "new_to_top_word_lead",
        "a new technique (model): take the best candidate when its word share leads by >= t",
        _new_top,
        "top",
        lambda r: r.words[4],
    ),
    Change(
        "new_to_top_p",
        "a new technique (model): take the best candidate when p >= t",
        _new_top,
        "top",
        lambda r: r.p[0],
    ),
    Change(
        "new_to_top_learned",
        "a new technique (model): take the best candidate when the fitted logistic scores >= t",
        _new_top,
        "top",
    ),
    Change(
        "queued_to_new_p",
        "queued (not bad input, nonsense or a contradiction): a new technique when p <= -t",
        _queued_to_new,
        "new",
        lambda r: -r.p[0],
    ),
    Change(
        "queued_to_new_unknown",
        "queued (as above): a new technique when the share of the name's words no candidate uses >= t",
        _queued_to_new,
        "new",
        lambda r: r.words[1] / max(r.words[0], 1.0),
    ),
    Change(
        "queued_to_new_learned",
        "queued (as above): a new technique when a logistic (label: the name is no graph technique) "
        "scores >= t",
        _queued_to_new,
        "new",
    ),
)


def outcome(rec: Record, action: Action) -> str:
    """The verdict of `rec` after `action`."""
    if action == "top":
        return rec.top_verdict
    if action == "new":
        return rec.new_verdict
    return rec.verdict


def _right(rec: Record, action: Action) -> bool:
    return outcome(rec, action) in ("correct", "new ok")


def _harm(before: str, after: str) -> bool:
    """A change of verdict that adds a false merge or a duplicate technique."""
    return (after == "false" and before != "false") or (after == "new wrong" and before != "new wrong")


@dataclass
class Fitted:
    """A change's parameters chosen on some sets."""

    threshold: float
    weights: list[float] | None
    gained: int


def _scorer(
    change: Change, weights: np.ndarray[Any, np.dtype[np.float64]] | None
) -> Callable[[Record], float]:
    if change.score is not None:
        return change.score
    assert weights is not None

    def score(rec: Record) -> float:
        return float(np.dot(np.append(vector(rec), 1.0), weights))

    return score


CLEAR_ONLY = False
"""Whether the fit reads the training sets' clear items only (`--clear-only`; the doubtful items' labels
are the team's guesses); the held-out report counts both either way."""


def fit(change: Change, train: Sequence[Record]) -> Fitted:
    """The threshold (and weights) that gain the most right decisions on `train` with no harm."""
    pool = [r for r in train if change.eligible(r) and not (CLEAR_ONLY and r.doubtful)]
    weights = None
    if change.score is None:
        if len(pool) < 4 or len({_right(r, change.action) for r in pool}) < 2:
            return Fitted(float("inf"), None, 0)
        x = np.array([vector(r) for r in pool])
        y = np.array([1.0 if _right(r, change.action) else 0.0 for r in pool])
        weights = fit_logistic(x, y)
    score = _scorer(change, weights)
    scored = sorted(((score(r), r) for r in pool), key=lambda sr: -sr[0])
    # The strictest threshold below the first harmful decision that gains the most.
    best = Fitted(float("inf"), None if weights is None else weights.tolist(), 0)
    gained = 0
    for i, (s, rec) in enumerate(scored):
        after = outcome(rec, change.action)
        if _harm(rec.verdict, after):
            break
        if after in ("correct", "new ok") and rec.verdict not in ("correct", "new ok"):
            gained += 1
        nxt = scored[i + 1][0] if i + 1 < len(scored) else -float("inf")
        if nxt < s and gained > best.gained:
            best = Fitted(s, best.weights, gained)
    return best


def apply(change: Change, fitted: Fitted, rec: Record) -> str:
    """`rec`'s verdict under `change` with `fitted` parameters."""
    if fitted.gained == 0 or not change.eligible(rec):
        return rec.verdict
    weights = None if fitted.weights is None else np.array(fitted.weights)
    if _scorer(change, weights)(rec) >= fitted.threshold:
        return outcome(rec, change.action)
    return rec.verdict


@dataclass
class HeldOutTally:
    """Counts over some decisions."""

    items: int = 0
    merge_items: int = 0
    correct: int = 0
    false: int = 0
    queued: int = 0
    duplicates: int = 0
    new_ok: int = 0
    """Right new techniques (a name the graph lacks)."""

    def add(self, rec: Record, v: str) -> None:
        self.items += 1
        self.merge_items += rec.should_merge
        self.correct += v == "correct" and rec.should_merge
        self.false += v == "false"
        self.queued += v == "queued"
        self.duplicates += v == "new wrong"
        self.new_ok += v == "new ok"

    def cell(self) -> str:
        q = 100.0 * self.queued / self.items if self.items else 0.0
        return f"{self.correct}/{self.merge_items}, {self.false} false, {self.queued} queued ({q:.1f} %), {self.duplicates} dup"


def loso(change: Change, records: Sequence[Record]) -> tuple[dict[str, Any], list[str]]:
    """Held-out totals of `change` and one line per fold."""
    before: dict[tuple[str, bool], HeldOutTally] = {}
    after: dict[tuple[str, bool], HeldOutTally] = {}
    own_before: dict[str, HeldOutTally] = {g: HeldOutTally() for g in GRAPHS}
    own_after: dict[str, HeldOutTally] = {g: HeldOutTally() for g in GRAPHS}
    folds = []
    final = fit(change, [r for r in records if r.source != "own"])
    for rec in records:
        if rec.source == "own":
            own_before[rec.graph].add(rec, rec.verdict)
            own_after[rec.graph].add(rec, apply(change, final, rec))
    for held in DEV_SETS:
        train = [r for r in records if r.source not in (held, "own")]
        fitted = fit(change, train)
        moved = 0
        for rec in records:
            if rec.source != held:
                continue
            v = apply(change, fitted, rec)
            moved += v != rec.verdict
            key = (rec.graph, rec.doubtful)
            before.setdefault(key, HeldOutTally()).add(rec, rec.verdict)
            after.setdefault(key, HeldOutTally()).add(rec, v)
        folds.append(
            f"{held}: t {fitted.threshold:.3f}, gains {fitted.gained} on the other sets, {moved} held-out decisions moved"
        )
    folds.append(
        f"all {len(DEV_SETS)} sets (the own set's columns): t {final.threshold:.3f}, gains {final.gained}"
    )
    summary = {"before": before, "after": after, "own_before": own_before, "own_after": own_after}
    return summary, folds


def report(records: Sequence[Record], changes: Sequence[Change]) -> str:
    """The held-out table of every change, and each fold's parameters."""
    lines = [
        f"## Held-out totals ({len(DEV_SETS)} folds; each set judged with parameters chosen on the others)",
        "",
        "Cells: correct merges / items that must merge, false merges, queued (share of items), duplicates"
        " (new techniques for a name the graph has). Own set (both halves): with the parameters chosen"
        f" on all {len(DEV_SETS)} development sets (the rule one would commit); it never chooses them.",
        "",
        "| change | clear full | clear bare | doubtful full: false | doubtful bare: false | own full | own bare |",
        "| --- | --- | --- | --- | --- | --- | --- |",
    ]
    details = []
    first = True
    for change in changes:
        summary, folds = loso(change, records)
        b, a = summary["before"], summary["after"]
        if first:
            lines.append(
                f"| (as is) | {b[('full', False)].cell()} | {b[('bare', False)].cell()} | "
                f"{b[('full', True)].false} | {b[('bare', True)].false} | "
                f"{summary['own_before']['full'].cell()} | {summary['own_before']['bare'].cell()} |"
            )
            first = False
        lines.append(
            f"| {change.name} | {a[('full', False)].cell()} | {a[('bare', False)].cell()} | "
            f"{a[('full', True)].false} | {a[('bare', True)].false} | "
            f"{summary['own_after']['full'].cell()} | {summary['own_after']['bare'].cell()} |"
        )
        details += [f"\n### {change.name}\n", change.doc, "", *(f"- {f}" for f in folds)]
    return "\n".join([*lines, "", "## Changes and folds", *details])


def per_set(records: Sequence[Record]) -> str:
    """The decisions as they are, per set and graph (clear items)."""
    lines = [
        "## As is, per set (clear items; own set: all)",
        "",
        "| set | full | bare |",
        "| --- | --- | --- |",
    ]
    for source in ("own", *DEV_SETS):
        cells = []
        for graph in GRAPHS:
            t = HeldOutTally()
            for r in records:
                if r.source == source and r.graph == graph and (source == "own" or not r.doubtful):
                    t.add(r, r.verdict)
            cells.append(t.cell())
        lines.append(f"| {source} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


# --- refitting the choice model on outside-written names, leave one set out --------------------------------

REFIT_L2 = 0.1
"""The committed models' L2 penalty (chosen by the calibration's cross-validation); kept, not refitted."""

Rows = dict[tuple[str, str], list[tuple[str, np.ndarray[Any, Any], int]]]
"""(source, graph) -> per model-decided clear item: its id, its candidates' features, the right one (-1)."""


def scorer_rows(vectors: TextVectors) -> Rows:
    """The candidate features of every clear item that reaches the scorer (own set: calibration half),
    on the full and partial graphs (the model with a taxonomy) and the bare graph (the one without)."""
    taxonomy = default_taxonomy()
    model = load_model()
    rows: Rows = {}
    for scene in scenarios(taxonomy):
        policy = RelabelPolicy(
            vectors.embedder, taxonomy=scene.taxonomy, model=model, vectors=vectors, examples=[]
        )
        index = policy.index(scene.techniques)
        for source, items in _sets():
            chosen = [i for i in items if not i.doubtful and (source != "own" or i.half == "calibration")]
            policy.prepare([i.step() for i in chosen], index)
            out = rows.setdefault((source, scene.name), [])
            for item in chosen:
                choice = policy.choose(item.step(), index)
                if choice.decided_by != "model":
                    continue
                step = item.step()
                features = index.features(
                    step.text,
                    choice.evidence,
                    vectors.get(step.text.embedded_name()),
                    vectors.get(step.text.embedded_text()),
                )
                right = [
                    item.truth != NEW and c.name == item.truth and (c.in_graph or scene.taxonomy is not None)
                    for c in index.candidates
                ]
                out.append((item.id, features, right.index(True) if any(right) else -1))
    return rows


REFIT_THRESHOLDS: tuple[float, float] | None = None
"""(merge, new) thresholds of the refitted model with a taxonomy (`--refit-thresholds`); None: the
committed ones."""


def refit(rows: Rows, sources: Sequence[str]) -> ScoringModel:
    """The committed model with both choice models' weights fitted on `sources`' rows (own calibration
    half and development sets' clear items); thresholds, margin and merge gate kept."""
    base = load_model()
    bare = base.for_knowledge(taxonomy=False)

    def weights(graphs: tuple[str, ...]) -> tuple[tuple[float, ...], float]:
        data = [(f, t) for (src, g), rs in rows.items() if src in sources and g in graphs for _, f, t in rs]
        return fit_choice(data, l2=REFIT_L2)

    w, b = weights(("full", "partial"))
    wb, bb = weights(("bare",))
    merge_t, new_t = REFIT_THRESHOLDS or (base.merge_threshold, base.new_threshold)
    return ScoringModel(
        weights=w,
        bias=b,
        merge_threshold=merge_t,
        new_threshold=new_t,
        margin=base.margin,
        merge_gate=base.merge_gate,
        fitted_on=f"own calibration half and the clear items of {', '.join(s for s in sources if s != 'own')}",
        without_taxonomy=ScoringModel(
            weights=wb,
            bias=bb,
            merge_threshold=bare.merge_threshold,
            new_threshold=bare.new_threshold,
            margin=bare.margin,
            merge_gate=bare.merge_gate,
        ),
    )


def decide_with(model: ScoringModel, vectors: TextVectors, sources: Sequence[str]) -> list[Record]:
    """`sources`' decisions (full and bare graphs) under `model`, as records (verdicts only)."""
    out = []
    sets = dict(_sets())
    for scene, policy, index in _graphs(model, vectors):
        for source in sources:
            for item in sets[source]:
                choice = policy.choose(item.step(), index)
                out.append(_record(source, scene, item, choice, top=choice.technique))
    return out


def refit_report(records: Sequence[Record], vectors: TextVectors, model_out: Path | None) -> str:
    """Leave one set out: the choice model refitted on the own calibration half and the other sets."""
    rows = scorer_rows(vectors)
    after: list[Record] = []
    lines = ["## The choice model refitted on outside-written names (leave one set out)", ""]
    for held in DEV_SETS:
        model = refit(rows, ["own", *(s for s in DEV_SETS if s != held)])
        mine = decide_with(model, vectors, [held])
        after.extend(mine)
        lines.append(f"- {held}: weights {[round(w, 2) for w in model.weights]}, bias {model.bias:.2f}")
    final = refit(rows, ["own", *DEV_SETS])
    own_after = decide_with(final, vectors, ["own"])
    if model_out is not None:
        document = final.to_json()
        document["fitted_on"] = final.fitted_on
        model_out.write_text(json.dumps(document, indent=1) + "\n")
    before = {(r.source, r.graph, r.id): r for r in records}
    table = [
        "",
        "| set | graph | items | before: correct, false, queued, dup | held out: correct, false, queued, dup |",
        "| --- | --- | --- | --- | --- |",
    ]
    moved = []
    for source in ("own", *DEV_SETS):
        for graph in GRAPHS:
            for doubtful in (False, True):
                if source == "own" and doubtful:
                    continue
                pool = own_after if source == "own" else after
                sel = [r for r in pool if r.source == source and r.graph == graph and r.doubtful == doubtful]
                b, a = HeldOutTally(), HeldOutTally()
                for r in sel:
                    old = before[(r.source, r.graph, r.id)]
                    b.add(old, old.verdict)
                    a.add(r, r.verdict)
                    if old.verdict != r.verdict:
                        moved.append(
                            f"- {source} {graph} {'doubtful' if doubtful else 'clear'} {r.id} {r.name[:70]!r} "
                            f"(truth {r.truth}): {old.verdict} {old.top!r} -> {r.verdict} {r.top!r}"
                        )
                part = "doubtful" if doubtful else "clear"
                table.append(f"| {source} | {graph} | {part} ({a.items}) | {b.cell()} | {a.cell()} |")
    sums = []
    for graph in GRAPHS:
        for doubtful in (False, True):
            b, a = HeldOutTally(), HeldOutTally()
            for r in after:
                if r.graph == graph and r.doubtful == doubtful:
                    old = before[(r.source, r.graph, r.id)]
                    b.add(old, old.verdict)
                    a.add(r, r.verdict)
            part = "doubtful" if doubtful else "clear"
            sums.append(
                f"| all {len(DEV_SETS)} held out | {graph} | {part} ({a.items}) | {b.cell()} | {a.cell()} |"
            )
    return "\n".join(lines + table[:3] + sums + table[3:] + ["", "Moved decisions:", "", *moved])


# --- labelled names of other sets as examples (nearest neighbour), leave one set out ----------------------

KNN_GRAPHS: tuple[str, ...] = GRAPHS
"""`--knn-graphs`: the graphs whose decisions the example families may touch (fit and held out); the
committed rule reads the examples with a taxonomy only (`--knn-graphs full`)."""
TWO_SOURCES = False
"""`--two-sources`: the example families score by the nearest example of a second source that agrees
with the nearest one (tried in session 32)."""
BANK_GRAPHS: dict[str, frozenset[str]] = {}
"""graph -> the names of its techniques (filled by `knn_report`)."""


def bank_items(sets: Sequence[str] | None = None) -> list[tuple[str, Item]]:
    """The labelled names an example bank may hold: the clear items of the development `sets` (default
    `EXAMPLE_SETS`, the packaged examples' sets) and the own set's calibration half (the test half stays
    a clean check)."""
    keep = {"own", *(EXAMPLE_SETS if sets is None else sets)}
    out = []
    for source, items in _sets():
        if source not in keep:
            continue
        for item in items:
            if item.doubtful or (source == "own" and item.half != "calibration"):
                continue
            out.append((source, item))
    return out


KNN_FAMILIES: tuple[tuple[str, str], ...] = (
    (
        "knn_merge",
        "queued or new (by the scorer): merge into the nearest example's technique when it is a graph technique and cosine >= t",
    ),
    (
        "knn_new",
        "queued (not bad input, nonsense, contradiction): a new technique when the nearest example names no graph technique and cosine >= t",
    ),
    (
        "knn_veto",
        "merged by the scorer into another technique than the nearest example's: queued when cosine >= t",
    ),
    ("knn_all", "the three above with one t"),
    (
        "knn_agree",
        "queued or new (by the scorer): take the scorer's best candidate when the nearest example names it"
        " and cosine >= t",
    ),
)


def knn_action(family: str, rec: Record, label: str, graph_names: frozenset[str]) -> tuple[str, str]:
    """(verdict after, target) of `family` for `rec` whose nearest example says `label`; ("", "") when
    the family does not touch it."""
    if rec.graph not in KNN_GRAPHS:
        return "", ""
    in_graph = label != NEW and label in graph_names
    model = rec.decided_by == "model"
    families = ("knn_merge", "knn_new", "knn_veto") if family == "knn_all" else (family,)
    if family == "knn_agree":
        if model and in_graph and label == rec.top and rec.verdict in ("queued", "new ok", "new wrong"):
            return rec.top_verdict, label
        return "", ""
    if "knn_merge" in families and in_graph and model and rec.verdict in ("queued", "new ok", "new wrong"):
        return ("correct" if rec.should_merge and rec.truth == label else "false"), label
    if "knn_new" in families and not in_graph and rec.verdict == "queued" and rec.gate not in NEVER_NEW_GATES:
        return rec.new_verdict, ""
    if "knn_veto" in families and model and rec.verdict in ("correct", "false") and rec.top != label:
        return "queued", ""
    return "", ""


def _knn_threshold(scored: list[tuple[float, Record, str]]) -> tuple[float, int]:
    """The cosine threshold that gains the most right decisions over `scored` (cosine, decision, the
    example's verdict), walking down from the nearest, stopping at the first right decision lost or harm
    done, and only between two distinct cosines; with the gain (inf and 0: none)."""
    scored = sorted(scored, key=lambda x: -x[0])
    t, best, gained = float("inf"), 0, 0
    for i, (sim, r, v) in enumerate(scored):
        was_right = r.verdict in ("correct", "new ok")
        if (was_right and v not in ("correct", "new ok")) or _harm(r.verdict, v):
            break
        gained += v in ("correct", "new ok") and not was_right
        gained += r.verdict == "false" and v == "queued"
        nxt = scored[i + 1][0] if i + 1 < len(scored) else -float("inf")
        if nxt < sim and gained > best:
            t, best = sim, gained
    return t, best


def bank_similarities(
    records: Sequence[Record], matrix: Callable[[list[str]], np.ndarray]
) -> tuple[np.ndarray, np.ndarray, np.ndarray, list[str]]:
    """The cosine of each record's name to each example-bank name (rows: ``records``), with the bank's
    sources, ids and labels; ``matrix`` embeds a list of texts (one row each). Sets ``BANK_GRAPHS``
    from the taxonomy's scenarios first, as the banks need."""
    for scene in scenarios(default_taxonomy()):
        BANK_GRAPHS[scene.name] = frozenset(scene.graph_names)
    bank = bank_items(DEV_SETS)
    texts = [i.step().text.embedded_name() for _, i in bank]
    by_key = {(src, i.id): i for src, items in _sets() for i in items}
    rec_texts = [by_key[(r.source, r.id)].step().text.embedded_name() for r in records]
    b = matrix(texts).astype(np.float64)
    b /= np.linalg.norm(b, axis=1, keepdims=True)
    q = matrix(rec_texts).astype(np.float64)
    q /= np.linalg.norm(q, axis=1, keepdims=True)
    bank_src = np.array([src for src, _ in bank])
    bank_id = np.array([i.id for _, i in bank])
    return q @ b.T, bank_src, bank_id, [i.truth for _, i in bank]


def knn_report(records: Sequence[Record], vectors: TextVectors) -> str:
    """Leave one set out: each held-out set's decisions changed by its names' nearest labelled example
    among the other sets' (and the own calibration half's), t chosen on the other sets with banks
    that leave out both the fold's set and the training set itself."""

    def matrix(texts: list[str]) -> np.ndarray:
        vectors.ensure(texts)
        return np.array([vectors.get(t) for t in texts])

    sims, bank_src, bank_id, bank_label = bank_similarities(records, matrix)
    by_key = {(src, i.id): i for src, items in _sets() for i in items}

    def nearest(k: int, excluded: set[str]) -> tuple[float, str]:
        rec = records[k]
        mask = ~np.isin(bank_src, list(excluded)) & ~((bank_src == rec.source) & (bank_id == rec.id))
        if not mask.any():
            return -1.0, NEW
        row = np.where(mask, sims[k], -2.0)
        j = int(np.argmax(row))
        if TWO_SOURCES:
            # the nearest example of another source than the nearest one's must say the same; its
            # cosine is the score
            other = np.where(bank_src != bank_src[j], row, -2.0)
            j2 = int(np.argmax(other))
            if other[j2] <= -2.0 or bank_label[j2] != bank_label[j]:
                return -1.0, NEW
            return float(other[j2]), bank_label[j]
        return float(row[j]), bank_label[j]

    lines = [
        "## Labelled names of the other sets as examples (nearest neighbour; leave one set out)",
        "",
        "| change | clear full | clear bare | doubtful full: false | doubtful bare: false | own test half full | own test half bare |",
        "| --- | --- | --- | --- | --- | --- | --- |",
    ]
    details: list[str] = []
    dev_index = [k for k, r in enumerate(records) if r.source != "own"]
    own_test = [
        k for k, r in enumerate(records) if r.source == "own" and by_key[("own", r.id)].half == "test"
    ]
    first = True
    for family, doc in KNN_FAMILIES:
        before: dict[tuple[str, bool], HeldOutTally] = {}
        after: dict[tuple[str, bool], HeldOutTally] = {}
        folds = []
        moved_lines = []
        for held in DEV_SETS:
            # training: each other set's decisions with a bank that lacks the fold's set and its own
            scored = []
            for k in dev_index:
                r = records[k]
                if r.source == held:
                    continue
                sim, label = nearest(k, {held, r.source})
                verdict_after, _ = knn_action(family, r, label, BANK_GRAPHS[r.graph])
                if verdict_after:
                    scored.append((sim, r, verdict_after))
            t, best = _knn_threshold(scored)
            moved = 0
            for k in dev_index:
                r = records[k]
                if r.source != held:
                    continue
                sim, label = nearest(k, {held})
                v = r.verdict
                if sim >= t:
                    va, _target = knn_action(family, r, label, BANK_GRAPHS[r.graph])
                    if va:
                        v = va
                if v != r.verdict:
                    moved += 1
                    moved_lines.append(
                        f"- {held} {r.graph} {'doubtful' if r.doubtful else 'clear'} {r.id} {r.name[:60]!r} "
                        f"(truth {r.truth}; nearest {label!r} at {sim:.2f}): {r.verdict} -> {v}"
                    )
                key = (r.graph, r.doubtful)
                before.setdefault(key, HeldOutTally()).add(r, r.verdict)
                after.setdefault(key, HeldOutTally()).add(r, v)
            folds.append(
                f"{held}: t {t:.3f}, gains {best} on the other sets, {moved} held-out decisions moved"
            )
        # the own test half with t chosen on all sets and a bank of all of them
        scored = []
        for k in dev_index:
            r = records[k]
            sim, label = nearest(k, {r.source})
            va, _ = knn_action(family, r, label, BANK_GRAPHS[r.graph])
            if va:
                scored.append((sim, r, va))
        t_all, best = _knn_threshold(scored)
        own_b = {g: HeldOutTally() for g in GRAPHS}
        own_a = {g: HeldOutTally() for g in GRAPHS}
        for k in own_test:
            r = records[k]
            sim, label = nearest(k, set())
            v = r.verdict
            if sim >= t_all:
                va, _ = knn_action(family, r, label, BANK_GRAPHS[r.graph])
                v = va or v
            own_b[r.graph].add(r, r.verdict)
            own_a[r.graph].add(r, v)
        folds.append(f"all {len(DEV_SETS)} sets (own test half): t {t_all:.3f}, gains {best}")
        if first:
            lines.append(
                f"| (as is) | {before[('full', False)].cell()} | {before[('bare', False)].cell()} | "
                f"{before[('full', True)].false} | {before[('bare', True)].false} | {own_b['full'].cell()} | "
                f"{own_b['bare'].cell()} |"
            )
            first = False
        lines.append(
            f"| {family} | {after[('full', False)].cell()} | {after[('bare', False)].cell()} | "
            f"{after[('full', True)].false} | {after[('bare', True)].false} | {own_a['full'].cell()} | "
            f"{own_a['bare'].cell()} |"
        )
        details += [f"\n### {family}\n", doc, "", *(f"- {f}" for f in folds), "", *moved_lines]
    return "\n".join(lines + details)


def implemented_report(
    records: Sequence[Record], vectors: TextVectors, bank_sets: Sequence[str] = EXAMPLE_SETS
) -> str:
    """The committed rule (`search.relabel.examples`) leaving one set out: each development set decided
    with the examples of every other set of `bank_sets` (default: the packaged examples' sets; `--bank-sets
    all`: every development set) and the own calibration half; the own set with all of them."""
    from search.relabel.examples import LabelledName

    bank = [
        LabelledName(item.name, None if item.truth == NEW else item.truth, source)
        for source, item in bank_items(bank_sets)
    ]
    taxonomy = default_taxonomy()
    model = load_model()
    sets = dict(_sets())
    before = {(r.source, r.graph, r.id): r for r in records}
    rows: list[str] = []
    moved: list[str] = []
    totals: dict[tuple[str, bool], tuple[HeldOutTally, HeldOutTally]] = {}
    for source in ("own", *DEV_SETS):
        examples = [e for e in bank if e.source != source or source == "own"]
        for scene in scenarios(taxonomy):
            if scene.name not in GRAPHS:
                continue
            policy = RelabelPolicy(
                vectors.embedder, taxonomy=scene.taxonomy, model=model, vectors=vectors, examples=examples
            )
            index = policy.index(scene.techniques)
            items = sets[source]
            policy.prepare([i.step() for i in items], index)
            cells: dict[bool, tuple[HeldOutTally, HeldOutTally]] = {}
            for item in items:
                old = before[(source, scene.name, item.id)]
                choice = policy.choose(item.step(), index)
                new = verdict(item, scene, choice)
                b, a = cells.setdefault(item.doubtful, (HeldOutTally(), HeldOutTally()))
                b.add(old, old.verdict)
                a.add(old, new)
                if source != "own":
                    tb, ta = totals.setdefault((scene.name, item.doubtful), (HeldOutTally(), HeldOutTally()))
                    tb.add(old, old.verdict)
                    ta.add(old, new)
                if new != old.verdict:
                    moved.append(
                        f"- {source} {scene.name} {'doubtful' if item.doubtful else 'clear'} {item.id} "
                        f"{item.name[:60]!r} (truth {item.truth}): {old.verdict} -> {new} "
                        f"{choice.technique!r}" + (f" (example {choice.example})" if choice.example else "")
                    )
            for doubtful, (b, a) in sorted(cells.items()):
                part = "doubtful" if doubtful else ("all" if source == "own" else "clear")
                rows.append(f"| {source} | {scene.name} | {part} ({a.items}) | {b.cell()} | {a.cell()} |")
    head = [
        "## The committed rule, leave one set out (`search.relabel.examples`)",
        "",
        "Each development set decided with the examples of the other sets and the own calibration half;"
        " the own set with all of them (its calibration half is in the bank: not a held-out figure)."
        + f" Sets in the bank: {', '.join(s for s in DEV_SETS if s in bank_sets)}.",
        "",
        "| set | graph | items | before | after |",
        "| --- | --- | --- | --- | --- |",
    ]
    for (graph, doubtful), (b, a) in sorted(totals.items()):
        part = "doubtful" if doubtful else "clear"
        head.append(
            f"| all {len(DEV_SETS)} held out | {graph} | {part} ({a.items}) | {b.cell()} | {a.cell()} |"
        )
    return "\n".join(head + rows + ["", "Moved decisions:", "", *moved])


def _bank_of(sources: Sequence[str]) -> list[Any]:
    """The example bank of the own calibration half and the clear items of the development `sources`."""
    from search.relabel.examples import LabelledName

    return [
        LabelledName(item.name, None if item.truth == NEW else item.truth, source)
        for source, item in bank_items(sources)
    ]


CURVE_KS: tuple[int, ...] = (0, 2, 4, 8, 14)
CURVE_DRAWS = 5
CURVE_SEED = 39


def curve_draw(held: str, k: int, draw: int, seed: int = CURVE_SEED) -> list[str]:
    """The `k` other development sets whose names make `held`'s example bank in draw `draw` (seeded by
    the held-out set, k and the draw: a run decides the same banks every time)."""
    others = [s for s in DEV_SETS if s != held]
    return sorted(random.Random(f"{seed}:{held}:{k}:{draw}").sample(others, min(k, len(others))))


def learning_curve_report(
    records: Sequence[Record],
    vectors: TextVectors,
    ks: Sequence[int] = CURVE_KS,
    draws: int = CURVE_DRAWS,
    seed: int = CURVE_SEED,
) -> str:
    """The committed example rule with banks of k other development sets (issue 28, session 39): each
    set held out as `implemented_report` does, its names decided on the full graph (the rule needs the
    taxonomy) with the own calibration half and `k` sets drawn from the others; `draws` draws per k
    (one when k is 0 or all of them). Summed over the held-out sets, per draw; the table shows the mean
    over the draws and their range. It also counts the clear names with a near twin in the bank: an
    example at cosine >= `EXAMPLE_MERGE` naming the right technique (or none, for a name that names
    none), and one as near naming another: what the bank could decide, gates aside."""
    from search.relabel.examples import EXAMPLE_MERGE, example_text

    taxonomy = default_taxonomy()
    model = load_model()
    sets = dict(_sets())
    before = {(r.source, r.graph, r.id): r for r in records}
    scene = next(s for s in scenarios(taxonomy) if s.name == "full")
    index = None
    n_other = len(DEV_SETS) - 1
    # draw -> (clear, doubtful) tallies, per k
    results: dict[int, list[tuple[HeldOutTally, HeldOutTally]]] = {}
    twins: dict[int, list[tuple[int, int]]] = {}
    """k -> per draw, clear names with a near twin naming the right technique, and another one."""
    for k in ks:
        k_draws = 1 if k in (0, n_other) else draws
        for draw in range(k_draws):
            clear, doubtful = HeldOutTally(), HeldOutTally()
            twin_right = twin_wrong = 0
            for held in DEV_SETS:
                policy = RelabelPolicy(
                    vectors.embedder,
                    taxonomy=scene.taxonomy,
                    model=model,
                    vectors=vectors,
                    examples=_bank_of(curve_draw(held, k, draw, seed)),
                )
                if index is None:
                    index = policy.index(scene.techniques)
                items = sets[held]
                policy.prepare([i.step() for i in items], index)
                bank = policy.example_bank()
                vectors.ensure([example_text(i.name) for i in items])
                for item in items:
                    old = before[(held, scene.name, item.id)]
                    (doubtful if item.doubtful else clear).add(
                        old, verdict(item, scene, policy.choose(item.step(), index))
                    )
                    near = bank.nearest(vectors.get(example_text(item.name))) if bank else None
                    if near is not None and not item.doubtful and near[1] >= EXAMPLE_MERGE:
                        named = (near[0].technique or NEW) == item.truth
                        twin_right += named
                        twin_wrong += not named
            results.setdefault(k, []).append((clear, doubtful))
            twins.setdefault(k, []).append((twin_right, twin_wrong))

    def spread(values: list[int]) -> str:
        mean = sum(values) / len(values)
        return f"{mean:.1f}" if min(values) == max(values) else f"{mean:.1f} ({min(values)}-{max(values)})"

    first = results[min(results)][0][0]
    lines = [
        f"## Learning curve: the example rule with banks of k other development sets ({len(DEV_SETS)} sets, "
        "each held out; full graph)",
        "",
        f"Bank: the own calibration half and k of the {n_other} other sets' clear items, {draws} draws per k"
        f" (seed {seed}; one when k is 0 or {n_other}). Clear items ({first.items}, {first.merge_items} must"
        " merge), summed over the held-out sets: mean over the draws (range). Right: correct merges and"
        " right new techniques; queued and duplicates as counts. Twins: clear names whose nearest example is"
        f" at cosine >= {EXAMPLE_MERGE} and names their technique (right) or another (wrong).",
        "",
        "| k sets | draws | bank size (mean) | right | correct merges | false merges | queued | duplicates |"
        " doubtful: false merges | twins right | twins wrong |",
        "| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |",
    ]
    for k, rows in sorted(results.items()):
        k_draws = len(rows)
        sizes = [len(_bank_of(curve_draw(held, k, d, seed))) for d in range(k_draws) for held in DEV_SETS]
        right = [c.correct + c.new_ok for c, _ in rows]
        lines.append(
            f"| {k} | {k_draws} | {sum(sizes) / len(sizes):.0f} | {spread(right)} | "
            f"{spread([c.correct for c, _ in rows])} | {spread([c.false for c, _ in rows])} | "
            f"{spread([c.queued for c, _ in rows])} | {spread([c.duplicates for c, _ in rows])} | "
            f"{spread([d.false for _, d in rows])} | {spread([t[0] for t in twins[k]])} | "
            f"{spread([t[1] for t in twins[k]])} |"
        )
    return "\n".join(lines)


def write_bank(path: Path | None = None) -> int:
    """Write the packaged examples (`search.relabel.examples`) from the development sets' clear items
    and the own set's calibration half (never the outside set); returns how many."""
    from search.relabel.examples import EXAMPLES_PATH, LabelledName, write_examples

    examples = [
        LabelledName(item.name, None if item.truth == NEW else item.truth, source)
        for source, item in bank_items()
    ]
    write_examples(examples, default_taxonomy().version, path or EXAMPLES_PATH)
    return len(examples)


def ceiling_report(records: Sequence[Record]) -> str:
    """What no gate over this scorer can exceed (session 40): of the development sets' clear items that
    must merge, those merged right plus those whose scorer's best candidate is right where the rule
    queued them or made a new technique. A gate that never erred (taking every right best candidate
    and refusing every wrong one) would merge exactly these."""
    rows = [
        "## The ceiling of any gate over the scorer (clear items that must merge)",
        "",
        "| sets | graph | items | merged right | queued, best right | new, best right | best wrong (queued / new) | "
        "ceiling |",
        "| --- | --- | --- | --- | --- | --- | --- | --- |",
    ]
    for label, sets in (("15 example sets", EXAMPLE_SETS), (f"all {len(DEV_SETS)}", DEV_SETS)):
        for graph in ("full", "bare"):
            mine = [
                r
                for r in records
                if r.graph == graph and r.source in sets and not r.doubtful and r.should_merge
            ]
            right = sum(r.verdict == "correct" for r in mine)
            queued = sum(r.verdict == "queued" and r.top_verdict == "correct" for r in mine)
            new = sum(r.verdict == "new wrong" and r.top_verdict == "correct" for r in mine)
            wrong_q = sum(r.verdict == "queued" and r.top_verdict == "false" for r in mine)
            wrong_n = sum(r.verdict == "new wrong" and r.top_verdict == "false" for r in mine)
            ceiling = right + queued + new
            share = f"{ceiling / len(mine):.1%}" if mine else "-"
            rows.append(
                f"| {label} | {graph} | {len(mine)} | {right} | {queued} | {new} | {wrong_q} / {wrong_n} | "
                f"{ceiling} ({share}) |"
            )
    return "\n".join(rows)


def main(argv: list[str] | None = None) -> int:
    """Command line."""
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--vector-cache", type=Path, default=None)
    parser.add_argument(
        "--records", type=Path, default=None, help="keep the decisions here (JSON); reused when present"
    )
    parser.add_argument("--fresh", action="store_true", help="decide again even when --records exists")
    parser.add_argument("--out", type=Path, default=None, help="also write the report (markdown) here")
    parser.add_argument("--torch-threads", type=int, default=None)
    parser.add_argument("--changes", default="", help="comma-separated change names (default: all)")
    parser.add_argument("--knn", action="store_true", help="also the nearest-example changes")
    parser.add_argument(
        "--knn-graphs", default=",".join(GRAPHS), help="with --knn: the graphs the families touch (full,bare)"
    )
    parser.add_argument(
        "--two-sources", action="store_true", help="with --knn: two agreeing examples of two sources"
    )
    parser.add_argument(
        "--implemented", action="store_true", help="also the committed example rule, leave one set out"
    )
    parser.add_argument(
        "--refit", action="store_true", help="also refit the choice model leaving one set out"
    )
    parser.add_argument(
        "--model-out", type=Path, default=None, help="with --refit: write the model fitted on all sets"
    )
    parser.add_argument(
        "--clear-only", action="store_true", help="fit on the training sets' clear items only"
    )
    parser.add_argument(
        "--refit-thresholds",
        default="",
        help="with --refit: MERGE,NEW thresholds of the model with a taxonomy",
    )
    parser.add_argument(
        "--bank-sets",
        choices=("committed", "all"),
        default="committed",
        help="with --implemented: the bank's development sets (the packaged examples' sets, or all)",
    )
    parser.add_argument(
        "--learning-curve",
        action="store_true",
        help="also the example rule with banks of k other sets, leave one set out (full graph)",
    )
    parser.add_argument(
        "--curve-ks",
        default=",".join(str(k) for k in CURVE_KS),
        help="with --learning-curve: the numbers of other sets in the bank",
    )
    parser.add_argument(
        "--curve-draws", type=int, default=CURVE_DRAWS, help="with --learning-curve: draws per k"
    )
    parser.add_argument("--curve-seed", type=int, default=CURVE_SEED, help="with --learning-curve: seed")
    parser.add_argument(
        "--ceiling", action="store_true", help="also the ceiling of any gate over the scorer (session 40)"
    )
    parser.add_argument(
        "--write-examples", action="store_true", help="write search/relabel/data/examples.v1.jsonl and stop"
    )
    args = parser.parse_args(argv)
    global TWO_SOURCES, KNN_GRAPHS
    TWO_SOURCES = args.two_sources
    KNN_GRAPHS = tuple(args.knn_graphs.split(","))
    if args.write_examples:
        print(f"{write_bank()} examples written")
        return 0
    global CLEAR_ONLY, REFIT_THRESHOLDS
    if args.refit_thresholds:
        merge_t, new_t = (float(v) for v in args.refit_thresholds.split(","))
        REFIT_THRESHOLDS = (merge_t, new_t)
    CLEAR_ONLY = args.clear_only
    if args.records is not None and args.records.exists() and not args.fresh:
        records = [Record(**r) for r in json.loads(args.records.read_text())]
    else:
        if args.torch_threads is not None:
            import torch

            torch.set_num_threads(args.torch_threads)
        vectors = cached_vectors(shared_embedder(), args.vector_cache)
        records = collect(vectors)
        if args.vector_cache is not None:
            vectors.save(args.vector_cache)
        if args.records is not None:
            args.records.write_text(json.dumps([asdict(r) for r in records]))
    wanted = {c for c in args.changes.split(",") if c}
    unknown = wanted - {c.name for c in CHANGES}
    if unknown:
        parser.error(f"unknown changes: {sorted(unknown)}")
    changes = [c for c in CHANGES if not wanted or c.name in wanted]
    text = per_set(records) + "\n\n" + report(records, changes)
    if args.ceiling:
        text += "\n\n" + ceiling_report(records)
    if args.implemented or args.knn or args.refit or args.learning_curve:
        # one set of vectors for every report (each built its own from the cache before)
        vectors = cached_vectors(shared_embedder(), args.vector_cache)
        if args.implemented:
            bank_sets = DEV_SETS if args.bank_sets == "all" else EXAMPLE_SETS
            text += "\n\n" + implemented_report(records, vectors, bank_sets)
        if args.knn:
            text += "\n\n" + knn_report(records, vectors)
        if args.learning_curve:
            ks = [int(k) for k in args.curve_ks.split(",") if k]
            text += "\n\n" + learning_curve_report(records, vectors, ks, args.curve_draws, args.curve_seed)
        if args.refit:
            text += "\n\n" + refit_report(records, vectors, args.model_out)
    print(text)
    if args.out is not None:
        args.out.write_text(text + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
