"""Benchmark of the graph store: ingestion rate and the latency of the retrieval call on a large graph.

Generates a synthetic reasoning graph (default 100,000 examples) in a fresh embedded Neo4j, then
times `Neo4jGraphStore.successors` (the call behind `GraphKnowledge.successors`, with its default
scan limit) from random techniques. Embeddings are pre-computed random unit vectors, so the numbers
measure the database, not the embedding model (which adds ~5-20 ms per new code on CPU, once per code
thanks to caching). The load average is recorded before and after: other processes on the machine
change the numbers a lot.

    python -m bench.graph_bench --examples 100000
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import platform
import statistics
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np

from graphdb.models import INITIAL_TECHNIQUE, Example, IngestBatch, Technique, Verdict, content_id, utc_now
from graphdb.store import DEFAULT_SCAN_LIMIT, scratch_store

logger = logging.getLogger(__name__)

RESULTS_DIR = Path(__file__).resolve().parent / "results"
P99_TARGET_MS = 25.0
INGEST_TARGET_PER_S = 500.0


def unit_vectors(rng: np.random.Generator, n: int) -> np.ndarray[Any, np.dtype[np.float64]]:
    """`n` random 384-d unit vectors."""
    v: np.ndarray[Any, np.dtype[np.float64]] = rng.normal(size=(n, 384))
    v /= np.linalg.norm(v, axis=1, keepdims=True)
    return v


def synthetic_examples(n_examples: int, n_techniques: int, seed: int) -> tuple[list[str], list[Example]]:
    """Random trajectories over `n_techniques` techniques, walked from the initial node, as examples."""
    rng = np.random.default_rng(seed)
    names = [f"technique {i:03d}" for i in range(n_techniques)]
    # Technique popularity is skewed (a few, like tiling, appear in most trajectories).
    weights = 1.0 / np.arange(1, n_techniques + 1) ** 0.8
    weights /= weights.sum()
    first = rng.choice(min(5, n_techniques), size=n_examples)
    vectors = unit_vectors(rng, n_examples)
    examples: list[Example] = []
    now = utc_now()
    trajectory = 0
    while len(examples) < n_examples:
        length = int(rng.integers(1, 7))
        source = INITIAL_TECHNIQUE
        trajectory += 1
        for step in range(length):
            if len(examples) >= n_examples:
                break
            i = len(examples)
            target = names[int(first[i])] if step == 0 else names[int(rng.choice(n_techniques, p=weights))]
            speedup = float(rng.lognormal(0.3, 0.5))
            examples.append(
                Example(
                    id=content_id("bench", str(seed), str(i)),
                    source=source,
                    target=target,
                    task_id=f"task_{trajectory % 500}",
                    think="synthetic step " * 8,
                    detail="synthetic change " * 8,
                    code_before=f"// code {i}\n" + "x[i] = a * x[i] + y[i];\n" * 25,
                    code_after=f"// code {i} after\n" + "x[i] = fmaf(a, x[i], y[i]);\n" * 25,
                    code_embedding=[float(x) for x in vectors[i]],
                    speedup=speedup,
                    speedup_over_serial=speedup,
                    verdict=Verdict.PASSED,
                    model="bench",
                    created_at=now,
                    source_label=source,
                    target_label=target,
                    trajectory_id=f"bench-{trajectory}",
                    step_index=step,
                )
            )
            source = target
    return names, examples


def percentile(values: list[float], p: float) -> float:
    """The p-th percentile (nearest rank) of `values`."""
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, max(0, round(p / 100 * len(ordered) + 0.5) - 1))]


def run(args: argparse.Namespace) -> dict[str, Any]:
    """Build the graph, time ingestion and retrieval, and return the results."""
    load_before = os.getloadavg()
    names, examples = synthetic_examples(args.examples, args.techniques, args.seed)
    with scratch_store(
        heap_mb=args.heap_mb, pagecache_mb=args.pagecache_mb, prefix="regraph-graph-bench-"
    ) as store:
        store.ingest(
            IngestBatch(
                new_techniques=[
                    Technique(name=n, embedding=[float(x) for x in v], created_at=utc_now())
                    for n, v in zip(
                        [INITIAL_TECHNIQUE, *names],
                        unit_vectors(np.random.default_rng(1), len(names) + 1),
                        strict=True,
                    )
                ]
            )
        )
        start = time.perf_counter()
        for at in range(0, len(examples), args.batch):
            store.ingest(IngestBatch(examples=examples[at : at + args.batch]))
            if (at // args.batch) % 10 == 0:
                logger.info("ingested %d / %d", at + args.batch, len(examples))
        ingest_s = time.perf_counter() - start
        counts = store.counts()
        transitions = store.list_transitions(limit=1_000_000)
        sources = sorted({t.source for t in transitions})
        rng = np.random.default_rng(args.seed + 1)
        queries = unit_vectors(rng, args.queries + args.warmup)
        picks = rng.choice(len(sources), size=args.queries + args.warmup)
        latencies: list[float] = []
        for i in range(args.queries + args.warmup):
            vector = [float(x) for x in queries[i]]
            t0 = time.perf_counter()
            store.successors(
                sources[int(picks[i])], vector, args.k, scan_limit=args.scan_limit, nearest=args.nearest
            )
            elapsed = (time.perf_counter() - t0) * 1000
            if i >= args.warmup:
                latencies.append(elapsed)
        initial: list[float] = []
        for i in range(min(200, args.queries)):
            t0 = time.perf_counter()
            store.successors(
                INITIAL_TECHNIQUE,
                [float(x) for x in queries[i]],
                args.k,
                scan_limit=args.scan_limit,
                nearest=args.nearest,
            )
            initial.append((time.perf_counter() - t0) * 1000)
    biggest = max(t.stats.n_examples for t in transitions)
    load_after = os.getloadavg()
    return {
        "benchmark": "graph_store",
        "date": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
        "command": " ".join(["python -m bench.graph_bench", *sys.argv[1:]]),
        "machine": {
            "platform": platform.platform(),
            "python": platform.python_version(),
            "cpus": os.cpu_count(),
            "load_average_1_5_15_before": [round(x, 2) for x in load_before],
            "load_average_1_5_15_after": [round(x, 2) for x in load_after],
            "neo4j_heap_mb": args.heap_mb,
            "neo4j_pagecache_mb": args.pagecache_mb,
        },
        "embeddings": "pre-computed random unit vectors (measures the database, not the model)",
        "examples": len(examples),
        "graph": {**counts, "largest_transition_examples": biggest},
        "ingest": {
            "seconds": round(ingest_s, 2),
            "examples_per_s": round(len(examples) / ingest_s, 1),
            "batch": args.batch,
            "target_per_s": INGEST_TARGET_PER_S,
        },
        "retrieval": {
            "calls": len(latencies),
            "k": args.k,
            "scan_limit": args.scan_limit,
            "nearest": args.nearest,
            "p50_ms": round(statistics.median(latencies), 2),
            "p99_ms": round(percentile(latencies, 99), 2),
            "max_ms": round(max(latencies), 2),
            "target_p99_ms": P99_TARGET_MS,
            "from_initial_node_p50_ms": round(statistics.median(initial), 2),
            "from_initial_node_p99_ms": round(percentile(initial, 99), 2),
        },
    }


def main() -> None:
    """Run the benchmark, print a table and write JSON under bench/results/."""
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--examples", type=int, default=100_000)
    parser.add_argument("--techniques", type=int, default=40)
    parser.add_argument("--batch", type=int, default=1000, help="examples per ingest transaction")
    parser.add_argument("--queries", type=int, default=1000)
    parser.add_argument("--warmup", type=int, default=100)
    parser.add_argument("--k", type=int, default=3)
    parser.add_argument(
        "--scan-limit", type=int, default=DEFAULT_SCAN_LIMIT, help="candidates ranked per transition"
    )
    parser.add_argument(
        "--nearest", type=int, default=0, help="vector-index complement (0: off, the default)"
    )
    parser.add_argument("--heap-mb", type=int, default=2048)
    parser.add_argument("--pagecache-mb", type=int, default=2048)
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument("--out", type=Path, default=None)
    args = parser.parse_args()
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(message)s")
    result = run(args)
    r, g = result["retrieval"], result["ingest"]
    rows = [
        (
            "examples / techniques / transitions",
            f"{result['examples']} / {result['graph']['techniques']} / {result['graph']['transitions']}",
            "",
        ),
        ("largest transition (examples)", str(result["graph"]["largest_transition_examples"]), ""),
        ("ingestion (examples/s)", f"{g['examples_per_s']:.0f}", f">= {INGEST_TARGET_PER_S:.0f}"),
        ("successors p50 (ms)", f"{r['p50_ms']:.2f}", ""),
        ("successors p99 (ms)", f"{r['p99_ms']:.2f}", f"<= {P99_TARGET_MS:.0f}"),
        (
            "from initial node p50 / p99 (ms)",
            f"{r['from_initial_node_p50_ms']:.2f} / {r['from_initial_node_p99_ms']:.2f}",
            "",
        ),
    ]
    load = result["machine"]
    rows.append(
        (
            "load average before / after (1 min)",
            f"{load['load_average_1_5_15_before'][0]:.2f} / {load['load_average_1_5_15_after'][0]:.2f}",
            "",
        )
    )
    width = max(len(a) for a, _, _ in rows)
    for name, value, target in rows:
        print(f"{name:<{width}}  {value:>22}  {target}")
    RESULTS_DIR.mkdir(parents=True, exist_ok=True)
    out = args.out or RESULTS_DIR / f"graph_bench_{time.strftime('%Y%m%dT%H%M%S')}.json"
    out.write_text(json.dumps(result, indent=2) + "\n")
    print(f"written {out}")


if __name__ == "__main__":
    main()
