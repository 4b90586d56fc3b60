"""Liveness under load: how fast `/healthz` (and `/readyz`) answer while slow Cypher queries run.

Issue 15 (S9): 60 concurrent 10 s queries made `/healthz` take 8.8 s. This benchmark starts a
scratch embedded Neo4j, serves the API from it in a separate process (uvicorn, as `regraph up`
does, with the API's default limits), then sends ``--queries`` slow read-only queries at once
(each stopped by the server at ``--query-seconds``; spread over enough reader keys that the per-key
limit admits them all) and, while they run, probes `/healthz` and `/readyz` from another client,
one fresh connection per probe, every ``--interval`` seconds. The same probes run for
``--baseline-seconds`` before the load as the idle baseline. It stops by itself when the last
query has answered. Target: `/healthz` p99 <= 100 ms under the load.

    python -m bench.probes.healthz_load --queries 50 --query-seconds 10 \\
        --out bench/results/2026-11-27_cpu/healthz_load.json --md bench/results/2026-11-27_cpu/healthz_load.md
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections import Counter
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import httpx

from api.settings import ApiSettings
from graphdb.connection import GraphServerOptions, open_graph
from graphdb.embedded import free_port
from graphdb.models import Role

# A read that runs until the server's transaction timeout stops it (counting never ends in time).
SLOW_QUERY = "UNWIND range(1, 1000000000000) AS x WITH x WHERE x % 7 = 12 RETURN count(x) AS c"
TARGET_P99_MS = 100.0


@dataclass
class Probes:
    """Latencies (ms) of one endpoint's probes in one phase, and the probes that failed."""

    latencies_ms: list[float] = field(default_factory=list)
    failures: Counter[str] = field(default_factory=Counter)

    def summary(self) -> dict[str, Any]:
        """Count, percentiles and failures, for the table."""
        values = sorted(self.latencies_ms)

        def pct(q: float) -> float | None:
            if not values:
                return None
            return round(values[min(len(values) - 1, int(q * len(values)))], 1)

        return {
            "probes": len(values) + sum(self.failures.values()),
            "p50_ms": round(statistics.median(values), 1) if values else None,
            "p95_ms": pct(0.95),
            "p99_ms": pct(0.99),
            "max_ms": round(values[-1], 1) if values else None,
            "failures": dict(self.failures),
        }


def probe(url: str, path: str, interval_s: float, stop: threading.Event, into: Probes) -> None:
    """Probe `url + path` with a fresh connection every `interval_s` until `stop` is set.

    One client for all probes (building an httpx client costs ~10 ms of TLS set-up, more on a busy
    machine: that is not the server's latency), but `Connection: close`: each probe connects anew,
    as an orchestrator's probe does.
    """
    client = httpx.Client(timeout=30.0, headers={"Connection": "close"})
    while not stop.is_set():
        started = time.perf_counter()
        try:
            response = client.get(url + path)
            elapsed = (time.perf_counter() - started) * 1000
            if response.status_code == 200:
                into.latencies_ms.append(elapsed)
            else:
                into.failures[str(response.status_code)] += 1
        except httpx.HTTPError as e:
            into.failures[type(e).__name__] += 1
        stop.wait(interval_s)
    client.close()


def probe_phase(
    url: str, interval_s: float, stop: threading.Event
) -> tuple[Probes, Probes, list[threading.Thread]]:
    """Start probing /healthz and /readyz in two threads; they stop when `stop` is set."""
    health, ready = Probes(), Probes()
    threads = [
        threading.Thread(target=probe, args=(url, "/healthz", interval_s, stop, health), daemon=True),
        threading.Thread(target=probe, args=(url, "/readyz", interval_s, stop, ready), daemon=True),
    ]
    for thread in threads:
        thread.start()
    return health, ready, threads


@contextmanager
def api_process(settings_env: dict[str, str], port: int, log: Path) -> Iterator[str]:
    """The API under uvicorn in its own process (as `regraph up` serves it); yields its URL."""
    env = {**os.environ, **settings_env}
    command = [sys.executable, "-m", "uvicorn", "api.app:create_app", "--factory"]
    command += ["--host", "127.0.0.1", "--port", str(port), "--log-level", "warning"]
    with log.open("w") as out:
        process = subprocess.Popen(command, env=env, stdout=out, stderr=subprocess.STDOUT)
        url = f"http://127.0.0.1:{port}"
        try:
            deadline = time.monotonic() + 180
            while True:
                if process.poll() is not None:
                    raise RuntimeError(f"the API exited during start-up; see {log}")
                try:
                    if httpx.get(f"{url}/readyz", timeout=5).status_code == 200:
                        break
                except httpx.HTTPError:
                    pass
                if time.monotonic() > deadline:
                    raise TimeoutError(f"the API did not become ready; see {log}")
                time.sleep(0.5)
            yield url
        finally:
            process.terminate()
            try:
                process.wait(timeout=60)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()


def run(args: argparse.Namespace) -> dict[str, Any]:
    """Start the stack, measure the idle baseline and the loaded phase, and return the report."""
    defaults = ApiSettings.model_fields
    per_key = int(defaults["cypher_max_concurrent_per_key"].default)
    with tempfile.TemporaryDirectory(prefix="regraph-healthz-") as tmp:
        options = GraphServerOptions(
            uri=None,
            user="neo4j",
            password=None,
            database="neo4j",
            data_dir=Path(tmp) / "graph",
            embedded_port=free_port(),
        )
        with open_graph(options) as graph:
            key_count = -(-args.queries // per_key)
            tokens = [
                graph.store.create_api_key(f"load-{i}", Role.READER, actor="bench")[1]
                for i in range(key_count)
            ]
            env = {
                "REGRAPH_NEO4J_URI": graph.target.uri,
                "REGRAPH_NEO4J_PASSWORD": graph.target.password,
                "REGRAPH_DATA_DIR": str(Path(tmp) / "api"),
                "REGRAPH_SEED_GRAPH": "none",
                "REGRAPH_PRELOAD_RETRIEVAL": "false",
                "REGRAPH_CYPHER_TIMEOUT_S": str(args.query_seconds),
                "REGRAPH_LOG_LEVEL": "WARNING",
            }
            with api_process(env, free_port(), Path(tmp) / "api.log") as url:
                stop = threading.Event()
                idle_health, idle_ready, threads = probe_phase(url, args.interval, stop)
                time.sleep(args.baseline_seconds)
                stop.set()
                for thread in threads:
                    thread.join()

                def slow(index: int) -> str:
                    token = tokens[index % key_count]
                    try:
                        response = httpx.post(
                            f"{url}/v1/cypher",
                            headers={"X-API-Key": token},
                            json={"query": SLOW_QUERY},
                            timeout=args.queries * args.query_seconds + 120,
                        )
                    except httpx.HTTPError as e:
                        return type(e).__name__
                    body = response.json()
                    return body["error"]["type"] if response.status_code != 200 else "200"

                stop = threading.Event()
                started = time.monotonic()
                with ThreadPoolExecutor(max_workers=args.queries) as pool:
                    answers = [pool.submit(slow, i) for i in range(args.queries)]
                    time.sleep(0.5)  # the queries are in before the probes start
                    load_health, load_ready, threads = probe_phase(url, args.interval, stop)
                    outcomes = Counter(f.result() for f in answers)
                    stop.set()
                    for thread in threads:
                        thread.join()
                load_seconds = time.monotonic() - started
    health = load_health.summary()
    return {
        "benchmark": "healthz_load",
        "date": datetime.now(UTC).isoformat(timespec="seconds"),
        "machine": f"{platform.node()} ({platform.machine()}, {os.cpu_count()} cores, Python {platform.python_version()})",
        "load_average_at_end": [round(x, 1) for x in os.getloadavg()],
        "command": "python -m bench.probes.healthz_load " + " ".join(sys.argv[1:]),
        "queries": args.queries,
        "query_seconds": args.query_seconds,
        "keys": key_count,
        "load_seconds": round(load_seconds, 1),
        "query_outcomes": dict(outcomes),
        "phases": {
            "idle": {"healthz": idle_health.summary(), "readyz": idle_ready.summary()},
            "under load": {"healthz": health, "readyz": load_ready.summary()},
        },
        "target_p99_ms": TARGET_P99_MS,
        "meets_target": health["p99_ms"] is not None
        and health["p99_ms"] <= TARGET_P99_MS
        and not health["failures"],
    }


def markdown(report: dict[str, Any]) -> str:
    """The report as a table."""
    lines = [
        f"# /healthz under {report['queries']} slow Cypher queries",
        "",
        f"- date: {report['date']}",
        f"- machine: {report['machine']}; load average (1, 5, 15 min) at the end {report['load_average_at_end']}",
        f"- command: `{report['command']}`",
        f"- load: {report['queries']} queries of {report['query_seconds']} s over {report['keys']} reader keys, "
        f"{report['load_seconds']} s until the last answered; outcomes {report['query_outcomes']}",
        f"- target: /healthz p99 <= {report['target_p99_ms']:.0f} ms under load: "
        f"**{'met' if report['meets_target'] else 'NOT met'}**",
        "",
        "| phase | endpoint | probes | p50 ms | p95 ms | p99 ms | max ms | failures |",
        "| --- | --- | ---: | ---: | ---: | ---: | ---: | --- |",
    ]
    for phase, endpoints in report["phases"].items():
        for endpoint, s in endpoints.items():
            lines.append(
                f"| {phase} | /{endpoint} | {s['probes']} | {s['p50_ms']} | {s['p95_ms']} | {s['p99_ms']} "
                f"| {s['max_ms']} | {s['failures'] or '-'} |"
            )
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    """Run the benchmark, print the table, write the results; exit 1 when the target is missed."""
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--queries", type=int, default=50, help="slow queries sent at once")
    parser.add_argument("--query-seconds", type=float, default=10.0, help="the server's query timeout")
    parser.add_argument("--interval", type=float, default=0.05, help="seconds between probes")
    parser.add_argument("--baseline-seconds", type=float, default=5.0, help="idle probing before the load")
    parser.add_argument("--out", type=Path, help="write the report as JSON here")
    parser.add_argument("--md", type=Path, help="write the table as Markdown here")
    args = parser.parse_args(argv)
    report = run(args)
    table = markdown(report)
    print(table)
    save(report, table, args.out, args.md)
    return 0 if report["meets_target"] else 1


def save(report: dict[str, Any], table: str, out: Path | None, md: Path | None) -> None:
    """Write the report as JSON to `out` and its table as Markdown to `md`, each when given."""
    if out:
        out.parent.mkdir(parents=True, exist_ok=True)
        out.write_text(json.dumps(report, indent=2) + "\n")
    if md:
        md.parent.mkdir(parents=True, exist_ok=True)
        md.write_text(table)


if __name__ == "__main__":
    raise SystemExit(main())
