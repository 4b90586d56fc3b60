"""Benchmark of the graph store: ingestion rate and the latency of the retrieval call on a large graph.

Generates a synthetic reasoning graph (default 100,000 examples) in a fresh embedded Neo4j, then
times `Neo4jGraphStore.successors` (the call behind `GraphKnowledge.successors`, with its default
scan limit) from random techniques with random query vectors, twice:

- cold: the process's candidate cache (graphdb/retrieval_cache.py) emptied before every call, as for
  a process's first question about a technique, or one whose transitions have all changed since;
- warm: after `Neo4jGraphStore.preload_retrieval` (one call per technique), which the API runs in the
  background at start-up, so this is what a running service answers; the cache's hit rates are reported with it, since random queries return examples whose text
  was not read yet;

and then as a search asks, from an empty cache (a fresh process): walks from the initial node along
random successors, up to 6 steps each, the query code drifting a little at each step (cosine ~0.96
with the previous one), as the code of a search's expansions does.

Embeddings are pre-computed random unit vectors, so the numbers measure the database, not the
embedding model (which adds ~5-20 ms per new code on CPU, once per code thanks to caching). The load
average is recorded before and after: other processes on the machine change the numbers a lot.

    python -m bench.probes.graph_bench --examples 100000
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

from graphdb.connection import scratch_store
from graphdb.models import (
    INITIAL_TECHNIQUE,
    Example,
    IngestBatch,
    StepVerdict,
    Technique,
    content_id,
    utc_now,
)
from graphdb.retrieval_cache import CacheStats, CandidateCache
from graphdb.store import DEFAULT_SCAN_LIMIT, Neo4jGraphStore, RetrievalStore

logger = logging.getLogger(__name__)

RESULTS_DIR = Path(__file__).resolve().parents[1] / "results"
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
                    verdict=StepVerdict.PASSED,
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


def process_tree_cpu_seconds(root: int | None = None) -> tuple[float, float]:
    """CPU seconds (user + system) used so far by process `root` (default: this one) and by its
    descendants (the embedded Neo4j server), read from /proc; (0, 0) where /proc is missing.

    On a machine shared with other busy processes, work per CPU-second is the fairer figure: the wall
    clock also counts the time the server waited for a core.
    """
    root = os.getpid() if root is None else root
    tick = os.sysconf("SC_CLK_TCK")
    parents: dict[int, int] = {}
    cpu: dict[int, float] = {}
    try:
        entries = os.listdir("/proc")
    except OSError:
        return 0.0, 0.0
    for entry in entries:
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat", encoding="ascii", errors="replace") as f:
                fields = f.read().rsplit(")", 1)[1].split()
        except OSError:
            continue  # the process ended meanwhile
        # Fields after the command: state, ppid, ... utime (14th of the line), stime (15th).
        parents[int(entry)] = int(fields[1])
        cpu[int(entry)] = (int(fields[11]) + int(fields[12])) / tick
    children: dict[int, list[int]] = {}
    for pid, parent in parents.items():
        children.setdefault(parent, []).append(pid)
    below, stack = 0.0, list(children.get(root, []))
    while stack:
        pid = stack.pop()
        below += cpu.get(pid, 0.0)
        stack.extend(children.get(pid, []))
    return cpu.get(root, 0.0), below


def percentile(values: list[float], p: float) -> float:
    """The p-th percentile (nearest rank) of `values`."""
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, max(0, round(p / 100 * len(ordered) + 0.5) - 1))]


def latency_summary(latencies: list[float]) -> dict[str, float]:
    """Median, 99th percentile and maximum, in ms."""
    return {
        "p50_ms": round(statistics.median(latencies), 2),
        "p99_ms": round(percentile(latencies, 99), 2),
        "max_ms": round(max(latencies), 2),
    }


def hit_rates(before: CacheStats, after: CacheStats) -> dict[str, float]:
    """How often the calls between two snapshots found transitions' candidates and examples cached."""
    transitions_hit = after.transitions_hit - before.transitions_hit
    transitions = transitions_hit + after.transitions_read - before.transitions_read
    examples_hit = after.examples_hit - before.examples_hit
    examples = examples_hit + after.examples_read - before.examples_read
    return {
        "transitions_hit_rate": round(transitions_hit / max(1, transitions), 3),
        "examples_hit_rate": round(examples_hit / max(1, examples), 3),
    }


def time_calls(
    store: Neo4jGraphStore,
    calls: list[tuple[str, list[float]]],
    args: argparse.Namespace,
    *,
    cold: bool,
) -> list[float]:
    """The latency (ms) of `successors` for each (technique, query) call; `cold` empties the cache first."""
    latencies = []
    for technique, vector in calls:
        if cold:
            store.candidate_cache.clear()
        t0 = time.perf_counter()
        store.successors(technique, vector, args.k, scan_limit=args.scan_limit, nearest=args.nearest)
        latencies.append((time.perf_counter() - t0) * 1000)
    return latencies


def time_walks(store: RetrievalStore, args: argparse.Namespace, rng: np.random.Generator) -> list[float]:
    """The latency (ms) of each `successors` call of `args.walks` search-like walks (see the module doc)."""
    latencies = []
    for _ in range(args.walks):
        technique, code = INITIAL_TECHNIQUE, unit_vectors(rng, 1)[0]
        for _step in range(6):
            t0 = time.perf_counter()
            options = store.successors(
                technique, [float(x) for x in code], args.k, scan_limit=args.scan_limit, nearest=args.nearest
            )
            latencies.append((time.perf_counter() - t0) * 1000)
            if not options:
                break
            technique = options[int(rng.integers(len(options)))].transition.target
            code = code + rng.normal(scale=0.3 / np.sqrt(code.size), size=code.size)
            code /= np.linalg.norm(code)
    return latencies


def run(args: argparse.Namespace) -> dict[str, Any]:
    """Build the graph, time ingestion and retrieval, and return the results."""
    load_before = os.getloadavg()
    names, examples = synthetic_examples(args.examples, args.techniques, args.seed)
    # A cache of its own, so that emptying it for the cold calls touches nothing else.
    cache = CandidateCache()
    with scratch_store(
        heap_mb=args.heap_mb,
        pagecache_mb=args.pagecache_mb,
        prefix="regraph-graph-bench-",
        candidate_cache=cache,
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
        cpu_start = process_tree_cpu_seconds()
        for at in range(0, len(examples), args.batch):
            store.ingest(IngestBatch(examples=examples[at : at + args.batch]))
            if (at // args.batch) % 10 == 0:
                done = min(at + args.batch, len(examples))
                logger.info(
                    "ingested %d / %d (%.0f/s so far, load %.1f)",
                    done,
                    len(examples),
                    done / (time.perf_counter() - start),
                    os.getloadavg()[0],
                )
        ingest_s = time.perf_counter() - start
        cpu_end = process_tree_cpu_seconds()
        client_cpu, server_cpu = (b - a for a, b in zip(cpu_start, cpu_end, strict=True))
        ingest = {
            "seconds": round(ingest_s, 2),
            "examples_per_s": round(len(examples) / ingest_s, 1),
            "client_cpu_s": round(client_cpu, 2),
            "server_cpu_s": round(server_cpu, 2),
            "examples_per_cpu_s": round(len(examples) / max(client_cpu + server_cpu, 1e-9), 1),
            "load_average_during": round(os.getloadavg()[1], 2),
            "batch": args.batch,
            "target_per_s": INGEST_TARGET_PER_S,
        }
        # Written at once: a run stopped later (the retrieval part) still leaves the ingestion figure.
        if args.out is not None:
            args.out.write_text(json.dumps({"partial": "ingestion only", "ingest": ingest}, indent=2) + "\n")
        logger.info("ingestion: %s", ingest)
        counts = store.counts()
        transitions = store.list_transitions(limit=1_000_000)
        sources = sorted({t.source for t in transitions})
        rng = np.random.default_rng(args.seed + 1)
        n = args.warmup + 2 * args.queries
        vectors = [[float(x) for x in v] for v in unit_vectors(rng, n)]
        picks = [sources[int(i)] for i in rng.choice(len(sources), size=n)]
        calls = list(zip(picks, vectors, strict=True))
        # Warm-up (the server's plans and JIT), then cold calls; then warm ones, after one per technique.
        time_calls(store, calls[: args.warmup], args, cold=True)
        cold = time_calls(store, calls[args.warmup : args.warmup + args.queries], args, cold=True)
        initial = [(INITIAL_TECHNIQUE, v) for v in vectors[: min(200, args.queries)]]
        initial_cold = time_calls(store, initial, args, cold=True)
        cache.clear()
        # As the API does at start-up (api.state.preload_retrieval): one call per technique.
        preload_start = time.perf_counter()
        store.preload_retrieval(scan_limit=args.scan_limit)
        preload_s = time.perf_counter() - preload_start
        primed = cache.stats()
        warm = time_calls(store, calls[args.warmup + args.queries :], args, cold=False)
        initial_warm = time_calls(store, initial, args, cold=False)
        after = cache.stats()
        cache.clear()
        walks = time_walks(store, args, rng)
        walked = cache.stats()
    biggest = max(t.stats.n_examples for t in transitions)
    load_after = os.getloadavg()
    return {
        "benchmark": "graph_store",
        "date": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
        "command": " ".join(["python -m bench.probes.graph_bench", *sys.argv[1:]]),
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
        "ingest": ingest,
        "retrieval": {
            "calls": len(warm),
            "k": args.k,
            "scan_limit": args.scan_limit,
            "nearest": args.nearest,
            "target_p99_ms": P99_TARGET_MS,
            "cold": {
                "what": "candidate cache emptied before every call",
                **latency_summary(cold),
                "from_initial_node": latency_summary(initial_cold),
            },
            "warm": {
                "what": "after Neo4jGraphStore.preload_retrieval (the API's start-up: one call per "
                "technique); random query vectors",
                "preload_s": round(preload_s, 2),
                **latency_summary(warm),
                "from_initial_node": latency_summary(initial_warm),
                "cache": {
                    **hit_rates(primed, after),
                    "entries": after.entries,
                    "mib": round(after.nbytes / 2**20, 1),
                },
            },
            "search_walks": {
                "what": "walks of up to 6 steps from the initial node, from an empty cache",
                "walks": args.walks,
                "calls": len(walks),
                **latency_summary(walks),
                "cache": {
                    **hit_rates(CacheStats(0, 0, 0, 0, 0, 0), walked),
                    "entries": walked.entries,
                    "mib": round(walked.nbytes / 2**20, 1),
                },
            },
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
    parser.add_argument("--walks", type=int, default=200, help="search-like walks (up to 6 calls each)")
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
    if args.out is None:
        args.out = RESULTS_DIR / f"graph_bench_{time.strftime('%Y%m%dT%H%M%S')}.json"
    args.out.parent.mkdir(parents=True, exist_ok=True)
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
        (
            "  per CPU-second (client + Neo4j server CPU s)",
            f"{g['examples_per_cpu_s']:.0f} ({g['client_cpu_s']:.0f} + {g['server_cpu_s']:.0f})",
            "",
        ),
    ]
    for mode in ("cold", "warm"):
        m = r[mode]
        rows += [
            (
                f"successors {mode} p50 / p99 (ms)",
                f"{m['p50_ms']:.2f} / {m['p99_ms']:.2f}",
                f"<= {P99_TARGET_MS:.0f}",
            ),
            (
                f"  from initial node {mode} p50 / p99 (ms)",
                f"{m['from_initial_node']['p50_ms']:.2f} / {m['from_initial_node']['p99_ms']:.2f}",
                "",
            ),
        ]
    c = r["warm"]["cache"]
    rows.append(
        (
            "  warm cache hits: transitions / examples",
            f"{c['transitions_hit_rate']:.0%} / {c['examples_hit_rate']:.0%} ({c['mib']:.0f} MiB)",
            "",
        )
    )
    rows.append(("  preload before the warm calls (s)", f"{r['warm']['preload_s']:.2f}", ""))
    w = r["search_walks"]
    rows += [
        (
            f"search walks p50 / p99 (ms, {w['calls']} calls)",
            f"{w['p50_ms']:.2f} / {w['p99_ms']:.2f}",
            f"<= {P99_TARGET_MS:.0f}",
        ),
        (
            "  walk cache hits: transitions / examples",
            f"{w['cache']['transitions_hit_rate']:.0%} / {w['cache']['examples_hit_rate']:.0%}",
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
    args.out.write_text(json.dumps(result, indent=2) + "\n")
    print(f"written {args.out}")


if __name__ == "__main__":
    main()
