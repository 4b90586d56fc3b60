"""Which gate keeps a development set's right merges out? (issue 28; development sets only)

    python -m bench.probes.relabel_bench_gates bench/probes/relabel_data/dev2.jsonl ...

For every clear item of the given development sets that should merge on the full graph and does not,
the probe prints what the model alone said (`decide`: merge / undecided / new), the truth's rank and
probability, the best candidate and the flag (the gate) that queued it, and then counts the gates.
It refuses the outside set (`bench/probes/relabel_data/outside.jsonl`): that set is for measuring only.
"""

from __future__ import annotations

import argparse
import sys
from collections import Counter
from pathlib import Path

from bench.probes.relabel_bench import (
    NEW,
    OUTSIDE_DATA,
    Item,
    load_outside_items,
    scenarios,
)
from search.embeddings import shared_embedder
from search.relabel.relabeler import RelabelPolicy
from search.relabel.scoring import TextVectors, decide, load_model
from search.relabel.taxonomy import default_taxonomy


def gate_of(flags: tuple[str, ...], decision: str, verdict: str) -> str:
    """The gate that decided a missed merge: the first flag's name, else what the model said."""
    if flags:
        return flags[0].split(":")[0]
    if decision == "new":
        return "model_new"
    if verdict == "undecided":
        return "model_undecided"
    return f"other_{decision}"


def main(argv: list[str] | None = None) -> int:
    """Print the missed merges of the given development sets and count their gates."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("sets", nargs="+", type=Path, help="development sets (jsonl)")
    parser.add_argument("--vector-cache", type=Path, default=None)
    args = parser.parse_args(argv)
    if any(p.resolve() == OUTSIDE_DATA.resolve() for p in args.sets):
        print("the outside set is for measuring only", file=sys.stderr)
        return 2
    taxonomy = default_taxonomy()
    embedder = shared_embedder()
    vectors = TextVectors(embedder)
    if args.vector_cache is not None and args.vector_cache.exists():
        vectors.load(args.vector_cache)
    model = load_model(Path(__file__).resolve().parents[2] / "search/relabel/data/relabel_model.v2.json")
    full = scenarios(taxonomy)[0]
    policy = RelabelPolicy(embedder, taxonomy=taxonomy, model=model, vectors=vectors)
    index = policy.index(full.techniques)
    gates: Counter[str] = Counter()
    verdicts: Counter[str] = Counter()
    for path in args.sets:
        items: list[Item] = [i for i in load_outside_items(path) if not i.doubtful]
        policy.prepare([i.step() for i in items], index)
        for item in items:
            choice = policy.choose(item.step(), index)
            should = item.truth != NEW
            if should and choice.outcome == "merge" and choice.technique == item.truth:
                continue
            if not should and choice.outcome != "merge" and choice.canonical is None:
                continue
            ranked = choice.ranked
            verdict = decide(policy.model, ranked) if ranked is not None else "-"
            truth_rank = (
                ranked.names.index(item.truth) + 1 if ranked is not None and item.truth in ranked.names else 0
            )
            p_truth = ranked.probabilities[truth_rank - 1] if ranked is not None and truth_rank else 0.0
            top = ranked.top if ranked is not None else None
            gate = gate_of(choice.flags, choice.outcome, verdict)
            kind = "miss" if should else "false"
            gates[f"{kind}:{gate}"] += 1
            verdicts[f"{kind}:{verdict}"] += 1
            print(
                f"{path.stem}:{item.id} {kind} {item.name!r} truth={item.truth} -> {choice.outcome} "
                f"{choice.technique!r} by {choice.decided_by}; model {verdict}, truth rank {truth_rank} "
                f"p {p_truth:.2f}; top {top[0] if top else None!r} {top[1] if top else 0:.2f}; gate {gate}"
            )
    if args.vector_cache is not None:
        vectors.save(args.vector_cache)
    print()
    for gate, n in gates.most_common():
        print(f"{n:4d} {gate}")
    print()
    for verdict, n in verdicts.most_common():
        print(f"{n:4d} model {verdict}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
