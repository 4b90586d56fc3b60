"""How fast the curation workspace's pages answer: each main page of /ui, timed over HTTP.

Starts a fresh embedded Neo4j and the real API on loopback, signs in with an admin key through the
sign-in form (as a browser does) and times full GET requests (server time plus loopback transfer;
the browser's own rendering is not included) for every main page:

    python -m bench.probes.ui_pages                     # the seed graph (target: every page <= 300 ms)
    python -m bench.probes.ui_pages --examples 100000   # a synthetic graph of that many examples (<= 1 s)

The synthetic graph is bench.probes.graph_bench's (random trajectories over --techniques techniques, every
example pending review). The load average is recorded: other processes on the machine change the
numbers a lot.
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import platform
import re
import statistics
import tempfile
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any
from urllib.parse import quote

import httpx
import numpy as np
from pydantic import SecretStr

from api.app import create_app
from api.settings import ApiSettings
from bench.probes.graph_bench import percentile, synthetic_examples, unit_vectors
from graphdb.connection import GraphServerOptions, open_graph
from graphdb.embedded import free_port
from graphdb.models import INITIAL_TECHNIQUE, IngestBatch, ReviewStatus, Role, Technique, utc_now
from graphdb.store import GraphStore, IngestStore
from tests.support.servers import serve_in_thread

logger = logging.getLogger(__name__)

RESULTS_DIR = Path(__file__).resolve().parents[1] / "results"


def load_synthetic(store: IngestStore, n_examples: int, n_techniques: int, seed: int) -> None:
    """bench.probes.graph_bench's synthetic graph, ingested in batches of 1000."""
    names, examples = synthetic_examples(n_examples, n_techniques, seed)
    vectors = unit_vectors(np.random.default_rng(1), len(names) + 1)
    store.ingest(
        IngestBatch(
            new_techniques=[
                Technique(name=n, embedding=[float(x) for x in v], created_at=utc_now())
                for n, v in zip([INITIAL_TECHNIQUE, *names], vectors, strict=True)
            ]
        )
    )
    for at in range(0, len(examples), 1000):
        store.ingest(IngestBatch(examples=examples[at : at + 1000]))


def sign_in(client: httpx.Client, token: str) -> None:
    """Sign in through the form: the double-submit token comes with the page."""
    page = client.get("/ui/login")
    csrf = re.search(r'name="csrf" value="([^"]+)"', page.text)
    assert csrf is not None, "no CSRF token on the sign-in page"
    answer = client.post("/ui/login", data={"key": token, "csrf": csrf.group(1), "next": "/ui/queue"})
    if answer.status_code != 303:
        raise RuntimeError(f"sign-in failed: {answer.status_code} {answer.text[:200]}")


def pages(store: GraphStore) -> dict[str, str]:
    """The pages to time, named; the example, technique and transition are the busiest of the graph."""
    transitions = store.list_transitions(limit=100_000)
    busiest = max(transitions, key=lambda t: t.stats.n_examples)
    technique = max(
        {t.target for t in transitions},
        key=lambda n: sum(t.stats.n_examples for t in transitions if n in (t.source, t.target)),
    )
    example = store.list_examples(status=ReviewStatus.PENDING, limit=1)[0]
    return {
        "queue": "/ui/queue",
        "queue, one example selected": f"/ui/queue?selected={example.id}",
        "queue, filtered by technique": f"/ui/queue?technique={quote(busiest.target)}",
        "example": f"/ui/examples/{example.id}",
        "techniques": "/ui/techniques",
        "technique (busiest)": f"/ui/technique?name={quote(technique)}",
        "transition (busiest)": f"/ui/transition?source={quote(busiest.source)}&target={quote(busiest.target)}",
        "graph page": "/ui/graph",
        "graph data (JSON)": "/ui/graph/data",
        "relabel decisions": "/ui/relabel",
        "relabel queue": "/ui/relabel-queue",
        "likely duplicates": "/ui/duplicates",
        "cypher console": "/ui/cypher",
        "jobs": "/ui/jobs",
        "audit log": "/ui/audit",
        "admin": "/ui/admin",
    }


def time_pages(client: httpx.Client, targets: dict[str, str], runs: int, warmup: int) -> dict[str, Any]:
    """Median, 95th percentile and maximum of each page, in ms, and its size."""
    out: dict[str, Any] = {}
    for name, path in targets.items():
        logger.info("timing %s (%s)", name, path)
        for _ in range(warmup):
            client.get(path).raise_for_status()
        times = []
        size = 0
        for _ in range(runs):
            start = time.perf_counter()
            answer = client.get(path)
            times.append((time.perf_counter() - start) * 1000)
            answer.raise_for_status()
            size = len(answer.content)
        out[name] = {
            "path": path,
            "p50_ms": round(statistics.median(times), 1),
            "p95_ms": round(percentile(times, 95), 1),
            "max_ms": round(max(times), 1),
            "kib": round(size / 1024, 1),
        }
        logger.info("%s: %s", name, out[name])
    return out


def run(args: argparse.Namespace) -> dict[str, Any]:
    """Start the stack, sign in, time every page; the results as one document."""
    load_before = os.getloadavg()
    with tempfile.TemporaryDirectory(prefix="regraph-ui-bench-") as scratch:
        # With --data-dir the graph stays there: a later run reuses it instead of loading it again.
        tmp = args.data_dir or Path(scratch)
        tmp.mkdir(parents=True, exist_ok=True)
        options = GraphServerOptions(
            uri=None,
            user="neo4j",
            password=None,
            database="neo4j",
            data_dir=Path(tmp) / "neo4j",
            embedded_port=free_port(),
            embedded_heap_mb=args.heap_mb,
            embedded_pagecache_mb=args.pagecache_mb,
        )
        with open_graph(options) as graph:
            store = graph.store
            reused = store.counts()["examples"] > 0
            if args.examples and not reused:
                load_synthetic(store, args.examples, args.techniques, args.seed)
                logger.info("loaded %s", store.counts())
            settings = ApiSettings(
                neo4j_uri=graph.target.uri,
                neo4j_password=SecretStr(graph.target.password),
                data_dir=Path(scratch) / "api",
                log_level="WARNING",
                log_format="text",
                preload_retrieval=False,
                **({"seed_graph": None} if args.examples else {}),
            )
            with serve_in_thread(create_app(settings), startup_timeout_s=900) as url:
                _, token = store.create_api_key("bench-admin", Role.ADMIN, actor="bench")
                counts = store.counts()
                with httpx.Client(base_url=url, timeout=600) as client:
                    sign_in(client, token)
                    results = time_pages(client, pages(store), args.runs, args.warmup)
    target_ms = 1000.0 if args.examples else 300.0
    return {
        "benchmark": "ui_pages",
        "at": datetime.now(UTC).isoformat(timespec="seconds"),
        "command": "python -m bench.probes.ui_pages"
        + (f" --examples {args.examples}" if args.examples else "")
        + (f" --runs {args.runs}" if args.runs != 20 else ""),
        "graph": "synthetic" if args.examples else "seed",
        "graph_reused": reused,
        "counts": counts,
        "runs": args.runs,
        "target_ms": target_ms,
        "all_within_target": all(r["p95_ms"] <= target_ms for r in results.values()),
        "pages": results,
        "machine": {
            "note": args.machine,
            "platform": platform.platform(),
            "python": platform.python_version(),
            "cpus": os.cpu_count(),
            "load_before": [round(x, 2) for x in load_before],
            "load_after": [round(x, 2) for x in os.getloadavg()],
        },
    }


def table(result: dict[str, Any]) -> str:
    """The results as a markdown table."""
    lines = [
        f"{result['graph']} graph ({result['counts']['techniques']} techniques, "
        f"{result['counts']['examples']} examples), {result['runs']} runs a page, target p95 <= "
        f"{result['target_ms']:.0f} ms; load {result['machine']['load_before']} -> {result['machine']['load_after']}"
        + (f"; {result['machine']['note']}" if result["machine"]["note"] else ""),
        "",
        "| page | p50 ms | p95 ms | max ms | KiB |",
        "| --- | ---: | ---: | ---: | ---: |",
    ]
    for name, r in result["pages"].items():
        lines.append(f"| {name} | {r['p50_ms']} | {r['p95_ms']} | {r['max_ms']} | {r['kib']} |")
    return "\n".join(lines)


def main() -> None:
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(message)s")
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--examples", type=int, default=0, help="a synthetic graph instead of the seed graph")
    parser.add_argument("--techniques", type=int, default=300)
    parser.add_argument("--runs", type=int, default=20)
    parser.add_argument("--warmup", type=int, default=2)
    parser.add_argument("--heap-mb", type=int, default=1024)
    parser.add_argument("--pagecache-mb", type=int, default=512)
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument("--out", type=Path, default=None)
    parser.add_argument(
        "--data-dir", type=Path, default=None, help="keep the graph here and reuse it on the next run"
    )
    parser.add_argument("--machine", default="", help="a note on the machine, kept with the results")
    args = parser.parse_args()
    if args.data_dir is not None and not args.examples:
        parser.error("--data-dir keeps a synthetic graph: give --examples too")
    result = run(args)
    print(table(result))
    stamp = datetime.now(UTC).strftime("%Y%m%dT%H%M%S")
    out = args.out or RESULTS_DIR / f"ui_pages_{result['graph']}_{stamp}.json"
    out.write_text(json.dumps(result, indent=2) + "\n")
    print(f"written {out}")


if __name__ == "__main__":
    main()
