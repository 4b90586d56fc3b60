"""Where a relabel decision's CPU time goes: the test half on the full graph, timed as `relabel_bench` does.

    python -m bench.probes.relabel_bench_speed --repeats 5 --vector-cache /tmp/vc.npz

Each repeat starts from a vector cache holding only the graph's labels (the steps' texts are embedded
inside the timed part, as in `relabel_bench`) and from empty code-analysis and word caches, then times
`RelabelPolicy.prepare` (embedding the steps' names and "name: detail" texts) and the decisions
(`RelabelPolicy.choose`) apart, in CPU seconds of this process. Prints one row per repeat and the median
decisions per CPU-second. Run it on two checkouts in turn to compare them on a shared machine.
"""

from __future__ import annotations

import argparse
import os
import statistics
import time
from pathlib import Path

import torch

from bench.probes.relabel_bench import load_items, scenarios
from search.embeddings import shared_embedder
from search.relabel import evidence, taxonomy
from search.relabel.relabeler import RelabelPolicy
from search.relabel.scoring import DEFAULT_MODEL_PATH, TextVectors, candidate_text, load_model


def _clear_caches() -> None:
    evidence._analyze_cached.cache_clear()
    cached = getattr(taxonomy, "_content_tokens", None)  # absent before session 19
    if cached is not None:
        cached.cache_clear()


def main(argv: list[str] | None = None) -> int:
    """Command line."""
    parser = argparse.ArgumentParser(description="relabel decision speed")
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--vector-cache", type=Path, help="the graph's label vectors (as relabel_bench)")
    args = parser.parse_args(argv)
    torch.set_num_threads(1)
    knowledge = taxonomy.default_taxonomy()
    items = [i for i in load_items(knowledge) if i.half == "test"]
    embedder = shared_embedder()
    vectors = TextVectors(embedder)
    if args.vector_cache is not None and args.vector_cache.exists():
        vectors.load(args.vector_cache)
    scene = next(s for s in scenarios(knowledge) if s.name == "full")
    model = load_model(DEFAULT_MODEL_PATH)
    shared = RelabelPolicy(embedder, taxonomy=scene.taxonomy, model=model, vectors=vectors)
    candidates = shared.index(scene.techniques).candidates
    labels = [label for c in candidates for label in c.labels] + [candidate_text(c) for c in candidates]
    print("| repeat | prepare (embedding) CPU-s | decisions CPU-s | decisions/CPU-s | load |")
    print("| ---: | ---: | ---: | ---: | ---: |")
    rates = []
    for repeat in range(args.repeats):
        policy = RelabelPolicy(
            embedder, taxonomy=scene.taxonomy, model=model, vectors=vectors.copy_of(labels)
        )
        index = policy.index(scene.techniques)
        _clear_caches()
        start = time.process_time()
        policy.prepare([i.step() for i in items], index)
        prepared = time.process_time()
        for item in items:
            policy.choose(item.step(), index)
        end = time.process_time()
        rates.append(len(items) / (end - start))
        print(
            f"| {repeat + 1} | {prepared - start:.3f} | {end - prepared:.3f} | {rates[-1]:.1f} "
            f"| {os.getloadavg()[0]:.1f} |"
        )
    print(f"\n{len(items)} decisions; median {statistics.median(rates):.1f} decisions/CPU-s")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
