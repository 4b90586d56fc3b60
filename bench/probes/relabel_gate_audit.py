"""Which gate queued each decision, and what it would have done without it (issue 28; development sets only)

    python -m bench.probes.relabel_gate_audit --vector-cache /tmp/rl14/vc.npz --out audit.md

For every queued decision (outcome "undecided") of the own set (both halves) and of every development
set (`general.jsonl`, `dev2.jsonl` ... `dev13.jsonl`, clear and doubtful items apart), on the three graphs
of `bench.probes.relabel_bench` (full, partial, bare), the probe records the gate that queued it (the
decision's first queueing flag, else what the scorer's thresholds said: `model_below_merge`,
`model_margin`, `model_bare_gate`) and two would-be decisions, each judged against the item's label:

- *top*: the scorer's best candidate taken as the decision (merged into, or its canonical technique
  created), no later gate applied;
- *without*: the same step decided again with that one gate switched off (the rest of the rule as it
  is), which may still queue it by a later gate.

Each would-be decision is `correct` (the right merge or canonical technique), `false` (a merge into, or
a canonical creation of, a technique the item is not), `new ok` / `new wrong` (a new technique: right
when the item's technique is not in the graph, a duplicate otherwise) or `queued` (without: a later
gate). The probe refuses the outside set (`bench/probes/relabel_data/outside.jsonl`): it is for measuring
only, and none of its items is read here.
"""

from __future__ import annotations

import argparse
import sys
from collections import Counter, defaultdict
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from bench.probes.relabel_bench import (
    NEW,
    OUTSIDE_DATA,
    Item,
    judge_outcome,
    load_items,
    load_outside_items,
    scenarios,
)
from search.embeddings import shared_embedder
from search.relabel import relabeler
from search.relabel.relabeler import RelabelChoice, RelabelPolicy
from search.relabel.scoring import (
    FEATURES,
    CandidateIndex,
    Ranked,
    TextVectors,
    gate_allows,
    load_model,
)
from search.relabel.taxonomy import default_taxonomy

DATA_DIR = Path(__file__).resolve().parent / "relabel_data"
DEV_SETS: tuple[str, ...] = (
    "general",
    *(f"dev{n}" for n in range(2, 14)),
)
QUEUEING_FLAGS: tuple[str, ...] = (
    "name_unusable",
    "not_separated",
    "name_points_elsewhere",
    "name_unexplained",
    "name_not_understood",
    "kind_disagrees",
    "name_contradicts",
    "name_diagnostic",
    "name_mentions_other",
    "name_generic",
    "name_one_word",
)
"""The flags that queue a step (the others, `detail_oversized`, `code_unparsed`, `name_code_mismatch`,
`evidence_missing`, only mark it)."""
SEPARATION = ("not_separated", "name_points_elsewhere", "name_unexplained")
VERDICTS = ("correct", "false", "new ok", "new wrong", "queued", "-")


def load_dev_set(name: str) -> list[Item]:
    """The development set `name` (`relabel_data/<name>.jsonl`); the outside set is refused: it is for
    measuring only, and no development probe reads it."""
    path = DATA_DIR / f"{name}.jsonl"
    if path.resolve() == OUTSIDE_DATA.resolve():
        raise SystemExit("the outside set is for measuring only")
    return load_outside_items(path)


def gate_of(choice: RelabelChoice, policy: RelabelPolicy) -> str:
    """The gate that queued `choice`: its first queueing flag, else what the thresholds said."""
    for flag in choice.flags:
        kind = flag.split(":")[0]
        if kind in QUEUEING_FLAGS:
            return kind
    ranked = choice.ranked
    if ranked is None or ranked.top is None:
        return "other"
    model = policy.model
    if ranked.top[1] < model.merge_threshold:
        return "model_below_merge"
    if ranked.gap < model.margin:
        return "model_margin"
    if not gate_allows(model.merge_gate, unknown=False, top_features=ranked.features[0]):
        return "model_bare_gate"
    return "model_other"


def _filtered(original: Callable[..., str | None], prefix: str) -> Callable[..., str | None]:
    def call(*args: Any, **kwargs: Any) -> str | None:
        reason = original(*args, **kwargs)
        return None if reason is not None and reason.startswith(prefix) else reason

    return call


def _undecided_merges(original: Callable[..., str]) -> Callable[..., str]:
    def call(*args: Any, **kwargs: Any) -> str:
        verdict = original(*args, **kwargs)
        return "merge" if verdict == "undecided" else verdict

    return call


@contextmanager
def without(gate: str) -> Iterator[None]:
    """The rule with `gate` switched off (module and class attributes restored on exit)."""
    saved: list[tuple[Any, str, Any]] = []

    def put(owner: Any, attribute: str, value: Any) -> None:
        saved.append((owner, attribute, getattr(owner, attribute)))
        setattr(owner, attribute, value)

    def wrap(owner: Any, attribute: str, wrapper: Callable[[Any], Any]) -> None:
        put(owner, attribute, wrapper(getattr(owner, attribute)))

    if gate in SEPARATION:
        wrap(relabeler, "separation", lambda original: _filtered(original, gate + ":"))
    elif gate == "name_not_understood":
        put(relabeler, "strange_words", lambda *a, **k: [])
    elif gate == "kind_disagrees":
        put(CandidateIndex, "kind_of", lambda self, name: None)
    elif gate == "name_contradicts":
        put(CandidateIndex, "contradicted", lambda self, name: {})
    elif gate == "name_diagnostic":
        put(CandidateIndex, "diagnostic", lambda self, name, technique: None)
    elif gate == "name_mentions_other":
        put(CandidateIndex, "named", lambda self, name: {})
    elif gate == "name_generic":
        put(relabeler, "generic_name", lambda *a, **k: ())
    elif gate == "name_one_word":
        put(CandidateIndex, "lone_word", lambda self, name, technique: None)
    elif gate.startswith("model_"):
        wrap(relabeler, "decide", _undecided_merges)
    try:
        yield
    finally:
        for owner, attribute, value in reversed(saved):
            setattr(owner, attribute, value)


@dataclass
class Queued:
    """One queued decision and its would-be decisions."""

    source: str
    graph: str
    item: Item
    gate: str
    top: str
    top_p: float
    top_verdict: str
    top_technique: str
    without_verdict: str = "-"
    without_technique: str = ""
    features: str = ""
    """The best candidate's name lead (cosine, over the name's nearest other), "name: detail" lead and
    unexplained share of the name's words (`search.relabel.scoring.FEATURES`)."""

    @property
    def part(self) -> str:
        """The set and its part ("dev2 clear", "own test")."""
        return self.source


def verdict(item: Item, scene: Any, choice: RelabelChoice) -> str:
    """`choice` judged against the item's label."""
    if choice.outcome == "undecided":
        return "queued"
    outcome = judge_outcome(item, scene, choice.outcome, choice.technique, choice.canonical is not None)
    if outcome.false_merge:
        return "false"
    if choice.outcome == "merge" or choice.canonical is not None:
        return "correct" if outcome.correct else "false"
    return "new ok" if outcome.correct else "new wrong"


def describe(ranked: Ranked | None) -> str:
    """The best candidate's leads and unexplained share (see `Queued.features`)."""
    if ranked is None or len(ranked.names) < 2:
        return ""
    name_sim, text_sim = FEATURES.index("name_sim"), FEATURES.index("text_sim")
    unexplained = FEATURES.index("unexplained")
    top, others = ranked.features[0], ranked.features[1:]
    return (
        f"name lead {top[name_sim] - max(o[name_sim] for o in others):+.2f}, detail lead "
        f"{top[text_sim] - max(o[text_sim] for o in others):+.2f}, unexplained {top[unexplained]:.2f}"
    )


def item_sets() -> list[tuple[str, list[Item]]]:
    """The own set's halves and every development set's clear and doubtful items."""
    own = load_items(default_taxonomy())
    out = [
        ("own calibration", [i for i in own if i.half == "calibration"]),
        ("own test", [i for i in own if i.half == "test"]),
    ]
    for name in DEV_SETS:
        items = load_dev_set(name)
        out.append((f"{name} clear", [i for i in items if not i.doubtful]))
        out.append((f"{name} doubtful", [i for i in items if i.doubtful]))
    return out


def audit(vectors: TextVectors) -> list[Queued]:
    """Every queued decision of every set and graph, with its would-be decisions."""
    taxonomy = default_taxonomy()
    model = load_model()
    sets = item_sets()
    rows: list[Queued] = []
    for scene in scenarios(taxonomy):
        policy = RelabelPolicy(vectors.embedder, taxonomy=scene.taxonomy, model=model, vectors=vectors)
        index = policy.index(scene.techniques)
        mine: list[Queued] = []
        for source, items in sets:
            policy.prepare([i.step() for i in items], index)
            for item in items:
                choice = policy.choose(item.step(), index)
                if choice.outcome != "undecided":
                    continue
                ranked = choice.ranked
                if ranked is not None and ranked.top is not None:
                    before = policy._concept_choice(ranked.top[0], index, "model", None, ranked)
                    top_verdict, top, top_p = verdict(item, scene, before), ranked.top[0], ranked.top[1]
                else:
                    top_verdict, top, top_p = "-", "", 0.0
                mine.append(
                    Queued(
                        source,
                        scene.name,
                        item,
                        gate_of(choice, policy),
                        top,
                        top_p,
                        top_verdict,
                        top,
                        features=describe(ranked),
                    )
                )
        by_gate: dict[str, list[Queued]] = defaultdict(list)
        for row in mine:
            by_gate[row.gate].append(row)
        for gate, queued in by_gate.items():
            if gate in ("name_unusable", "other", "model_other"):
                continue
            with without(gate):
                for row in queued:
                    again = policy.choose(row.item.step(), index)
                    row.without_verdict = verdict(row.item, scene, again)
                    row.without_technique = again.technique if again.outcome != "undecided" else ""
        rows.extend(mine)
    return rows


def _summary(rows: list[Queued], gates: list[str], graphs: tuple[str, ...]) -> list[str]:
    """One row per gate and graph: queued, and the would-be decisions' verdicts."""
    lines = []
    for gate in gates:
        for graph in graphs:
            sel = [r for r in rows if r.gate == gate and r.graph == graph]
            if not sel:
                continue
            t = Counter(r.top_verdict for r in sel)
            w = Counter(r.without_verdict for r in sel)
            lines.append(
                f"| {gate} | {graph} | {len(sel)} | {t['correct']} | {t['false']} | {t['new ok']} / "
                f"{t['new wrong']} / {t['-']} | {w['correct']} | {w['false']} | {w['queued']} | "
                f"{w['new ok']} / {w['new wrong']} |"
            )
    return lines


def tables(rows: list[Queued]) -> str:
    """The per-gate summary, the per-gate per-set table, and every queued decision."""
    lines = [
        "## Per gate, all sets (clear and doubtful, own set included)",
        "",
        "Top = the scorer's best candidate taken; without = the rule with that gate alone switched off.",
        "",
        "| gate | graph | queued | top: correct | top: false | top: new ok / new wrong / - | without: correct | without: false | without: still queued | without: new ok / new wrong |",
        "| --- | --- | ---: | ---: | ---: | --- | ---: | ---: | ---: | --- |",
    ]
    graphs = ("full", "partial", "bare")
    gates = sorted({r.gate for r in rows}, key=lambda g: (-sum(r.gate == g for r in rows), g))
    lines += _summary(rows, gates, graphs)
    lines += [
        "",
        "## Per gate, clear items and the own set only (the doubtful items left out)",
        "",
        lines[4],
        lines[5],
    ]
    lines += _summary([r for r in rows if not r.item.doubtful], gates, graphs)
    lines += [
        "",
        "## Per gate and set (would-be decisions: top correct/false; without correct/false/still queued)",
        "",
        "| gate | set | full: n, top c/f, without c/f/q | partial | bare |",
        "| --- | --- | --- | --- | --- |",
    ]
    parts = list(dict.fromkeys(r.part for r in rows))
    for gate in gates:
        for part in parts:
            cells = []
            for graph in graphs:
                sel = [r for r in rows if r.gate == gate and r.graph == graph and r.part == part]
                if not sel:
                    cells.append("")
                    continue
                t = Counter(r.top_verdict for r in sel)
                w = Counter(r.without_verdict for r in sel)
                cells.append(
                    f"{len(sel)}, {t['correct']}/{t['false']}, {w['correct']}/{w['false']}/{w['queued']}"
                )
            if any(cells):
                lines.append(f"| {gate} | {part} | " + " | ".join(cells) + " |")
    lines += ["", "## Every queued decision (development and own sets only)", ""]
    for gate in gates:
        lines.append(f"\n### {gate}\n")
        for r in sorted((r for r in rows if r.gate == gate), key=lambda r: (r.graph, r.part, r.item.id)):
            truth = r.item.truth if r.item.truth != NEW else "NEW"
            lines.append(
                f"- {r.graph} {r.part} {r.item.id} {r.item.name!r} (truth {truth}): top {r.top!r} "
                f"p {r.top_p:.2f} ({r.features}) -> {r.top_verdict}; without -> {r.without_verdict}"
                + (f" {r.without_technique!r}" if r.without_technique else "")
            )
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    """Command line."""
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--vector-cache", type=Path, default=None)
    parser.add_argument("--out", type=Path, default=None, help="also write the report (markdown) here")
    parser.add_argument("--torch-threads", type=int, default=None)
    args = parser.parse_args(argv)
    if args.torch_threads is not None:
        import torch

        torch.set_num_threads(args.torch_threads)
    vectors = TextVectors(shared_embedder())
    if args.vector_cache is not None and args.vector_cache.exists():
        vectors.load(args.vector_cache)
    rows = audit(vectors)
    if args.vector_cache is not None:
        vectors.save(args.vector_cache)
    report = tables(rows)
    print(report)
    if args.out is not None:
        args.out.write_text(report + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
