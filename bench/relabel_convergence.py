"""Does a graph built from re-worded method names converge to the same techniques as the seed graph?

    python -m bench.relabel_convergence [--out bench/results/relabel/convergence.md]

Builds two graphs on throwaway embedded Neo4j databases with the real construction pipeline (the
taxonomy-seeded graph, `build_relabeler`, no judge): one from the building tasks' trajectories as
written (what `python -m bench.seed_graph` builds), one from the same trajectories with every method
name re-worded by `bench.reword_trajectories`. The code of every step is unchanged, so each example has
the same id in both graphs; the check compares, example by example, the technique the step landed on,
and the sets of techniques that have examples. It passes when every step lands on the same technique.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import sys
import tempfile
import time
from collections import Counter
from datetime import UTC, datetime
from pathlib import Path

from bench.reword_trajectories import write_reworded
from bench.seed_graph import building_trajectories
from bench.split import DEFAULT_SPLIT_PATH, DEFAULT_TASKS_DIR, DEFAULT_TRAJECTORIES_DIR, read_split
from graphdb.connection import scratch_store
from search.construction import GraphBuilder, SourcedTrajectory, TaskDirectoryReferences
from search.embeddings import shared_embedder
from search.relabel import build_relabeler
from search.relabel_scoring import shared_text_vectors


def build_graph(trajectories: list[SourcedTrajectory]) -> tuple[dict[str, str], dict[str, int], float]:
    """Build a graph from `trajectories`; return example id -> technique, decisions by rule, seconds."""
    embedder = shared_embedder()
    with scratch_store(prefix="regraph-relabel-convergence-") as store:
        relabeler = build_relabeler(store, embedder)
        builder = GraphBuilder(
            store=store,
            embedder=embedder,
            relabeler=relabeler,
            references=TaskDirectoryReferences(DEFAULT_TASKS_DIR),
            seed_taxonomy=relabeler.policy.taxonomy,
            actor="convergence",
        )
        start = time.perf_counter()
        builder.build(trajectories)
        seconds = time.perf_counter() - start
        targets = {e.id: e.target for e in store.list_examples(limit=100_000)}
        rules = Counter(f"{d.decided_by}:{d.outcome.value}" for d in store.list_decisions(limit=100_000))
    return targets, dict(rules), seconds


def main(argv: list[str] | None = None) -> int:
    """Command line."""
    parser = argparse.ArgumentParser(description="relabel convergence check")
    parser.add_argument("--out", type=Path, help="also write the report (markdown) here")
    args = parser.parse_args(argv)
    split = read_split(DEFAULT_SPLIT_PATH)
    original = building_trajectories(list(split.build), DEFAULT_TRAJECTORIES_DIR)
    shared_text_vectors(shared_embedder())  # one label cache for both builds
    with tempfile.TemporaryDirectory(prefix="regraph-reworded-") as tmp:
        write_reworded(Path(tmp))
        reworded = building_trajectories(list(split.build), Path(tmp))
        renamed = sum(
            a.method != b.method
            for x, y in zip(original, reworded, strict=True)
            for a, b in zip(x.trajectory.steps, y.trajectory.steps, strict=True)
        )
        steps = sum(len(x.trajectory.steps) for x in original)
        a, rules_a, seconds_a = build_graph(original)
        b, rules_b, seconds_b = build_graph(reworded)
    same = [i for i in a if b.get(i) == a[i]]
    differ = sorted(
        ((i, a[i], b.get(i, "-")) for i in a if b.get(i) != a[i]),
        key=lambda r: (r[1], r[2]),
    )
    techniques_a, techniques_b = set(a.values()), set(b.values())
    ok = not differ and techniques_a == techniques_b
    lines = [
        f"# Relabel convergence ({datetime.now(UTC):%Y-%m-%d %H:%M} UTC)",
        "",
        "- command: `python -m bench.relabel_convergence`",
        f"- machine: {platform.machine()}, {os.cpu_count()} cores, load average {os.getloadavg()[0]:.1f} "
        f"(shared), python {sys.version.split()[0]}",
        f"- trajectories: {len(original)} (building tasks of bench/split.json), {steps} steps, "
        f"{renamed} method names re-worded by `bench.reword_trajectories`",
        "",
        "| graph | techniques with examples | build seconds | decisions (rule:outcome) |",
        "| --- | ---: | ---: | --- |",
        f"| original names | {len(techniques_a)} | {seconds_a:.0f} | {json.dumps(rules_a, sort_keys=True)} |",
        f"| re-worded names | {len(techniques_b)} | {seconds_b:.0f} | {json.dumps(rules_b, sort_keys=True)} |",
        "",
        f"Steps on the same technique in both graphs: {len(same)}/{len(a)}. "
        f"Techniques only in the original graph: {sorted(techniques_a - techniques_b) or 'none'}; "
        f"only in the re-worded graph: {sorted(techniques_b - techniques_a) or 'none'}.",
        "",
        "Converged: " + ("yes" if ok else "no"),
    ]
    if differ:
        lines += ["", "| example | original graph | re-worded graph |", "| --- | --- | --- |"]
        lines += [f"| {i[:12]} | {x} | {y} |" for i, x, y in differ]
    report = "\n".join(lines) + "\n"
    print(report)
    if args.out is not None:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(report)
    return 0 if ok else 1


if __name__ == "__main__":
    raise SystemExit(main())
