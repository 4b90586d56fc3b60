"""Start-up: how long after the process starts the API listens, answers `/healthz` and is ready.

Issue 15: `/healthz` refused connections for the 17-28 s the embedded Neo4j took to start and
migrate. This benchmark starts the API as `regraph up` serves it (uvicorn, the app factory, embedded
defaults: its own Neo4j in a fresh data directory, the seed graph loaded, the retrieval preload on)
in a process of its own, ``--runs`` times, and polls it every ``--interval`` seconds from the moment
the process is spawned: when the port first accepts a connection, when `/healthz` first answers 200,
when `/readyz` first answers 200, and when each start-up phase named by `/healthz` was first seen.
``--source`` serves another checkout's code (e.g. an export of the previous commit) for a before/after.

    python -m bench.probes.startup_time --runs 3 \\
        --out bench/results/2026-11-27_cpu/startup_time.json --md bench/results/2026-11-27_cpu/startup_time.md
"""

from __future__ import annotations

import argparse
import os
import platform
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import httpx

from bench.probes.healthz_load import save
from graphdb.embedded import free_port

ROOT = Path(__file__).resolve().parents[2]


def _port_open(port: int) -> bool:
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=0.5):
            return True
    except OSError:
        return False


def one_run(source: Path, timeout_s: float, interval_s: float) -> dict[str, Any]:
    """Start the API once from `source`; the seconds from spawning it to each milestone."""
    with tempfile.TemporaryDirectory(prefix="regraph-startup-") as tmp:
        port = free_port()
        env = {
            **os.environ,
            "REGRAPH_DATA_DIR": str(Path(tmp) / "data"),
            "REGRAPH_NEO4J_PORT": str(free_port()),
            "REGRAPH_LOG_FORMAT": "text",
            "PYTHONPATH": str(source),
        }
        env.pop("NEO4J_URI", None)
        env.pop("REGRAPH_NEO4J_URI", None)
        command = [sys.executable, "-m", "uvicorn", "api.app:create_app", "--factory"]
        command += ["--host", "127.0.0.1", "--port", str(port), "--log-level", "warning"]
        log = Path(tmp) / "api.log"
        url = f"http://127.0.0.1:{port}"
        marks: dict[str, float | None] = {"port open": None, "/healthz 200": None, "/readyz 200": None}
        phases: dict[str, float] = {}
        with log.open("w") as out:
            started = time.monotonic()
            process = subprocess.Popen(command, cwd=source, env=env, stdout=out, stderr=subprocess.STDOUT)
            try:
                while marks["/readyz 200"] is None:
                    now = time.monotonic() - started
                    if process.poll() is not None:
                        raise RuntimeError(
                            f"the API exited ({process.returncode}):\n{log.read_text()[-3000:]}"
                        )
                    if now > timeout_s:
                        raise TimeoutError(f"not ready within {timeout_s} s:\n{log.read_text()[-3000:]}")
                    if marks["port open"] is None and _port_open(port):
                        marks["port open"] = round(time.monotonic() - started, 2)
                    if marks["port open"] is not None:
                        try:
                            health = httpx.get(f"{url}/healthz", timeout=2)
                            if health.status_code == 200:
                                at = round(time.monotonic() - started, 2)
                                marks["/healthz 200"] = marks["/healthz 200"] or at
                                phase = health.json().get("startup")
                                if isinstance(phase, str) and phase not in phases:
                                    phases[phase] = at
                            if httpx.get(f"{url}/readyz", timeout=2).status_code == 200:
                                marks["/readyz 200"] = round(time.monotonic() - started, 2)
                        except httpx.HTTPError:
                            pass
                    time.sleep(interval_s)
            finally:
                process.terminate()
                try:
                    process.wait(timeout=60)
                except subprocess.TimeoutExpired:
                    process.kill()
                    process.wait()
        return {"marks": marks, "phases": phases}


def run(args: argparse.Namespace) -> dict[str, Any]:
    runs = [one_run(args.source.resolve(), args.timeout, args.interval) for _ in range(args.runs)]
    summary: dict[str, dict[str, float | None]] = {}
    for mark in ("port open", "/healthz 200", "/readyz 200"):
        values = [r["marks"][mark] for r in runs if r["marks"][mark] is not None]
        summary[mark] = {
            "median_s": round(statistics.median(values), 2) if values else None,
            "min_s": min(values) if values else None,
            "max_s": max(values) if values else None,
        }
    return {
        "benchmark": "startup_time",
        "date": datetime.now(UTC).isoformat(timespec="seconds"),
        "machine": f"{platform.node()} ({platform.machine()}, {os.cpu_count()} cores, Python {platform.python_version()})",
        "load_average_at_end": [round(x, 1) for x in os.getloadavg()],
        "command": "python -m bench.probes.startup_time " + " ".join(sys.argv[1:]),
        "source": str(args.source),
        "label": args.label,
        "runs": runs,
        "summary": summary,
    }


def markdown(report: dict[str, Any]) -> str:
    """The report as a table."""
    lines = [
        f"# Start-up of the API on the embedded defaults ({report['label']})",
        "",
        f"- date: {report['date']}",
        f"- machine: {report['machine']}; load average (1, 5, 15 min) at the end {report['load_average_at_end']}",
        f"- command: `{report['command']}`",
        "- seconds from spawning the process (uvicorn, app factory, fresh data directory, its own embedded "
        "Neo4j, seed graph, preload on)",
        "",
        "| milestone | median s | min s | max s | runs |",
        "| --- | ---: | ---: | ---: | --- |",
    ]
    for mark, s in report["summary"].items():
        each = ", ".join(str(r["marks"][mark]) for r in report["runs"])
        lines.append(f"| {mark} | {s['median_s']} | {s['min_s']} | {s['max_s']} | {each} |")
    lines += ["", "Start-up phases named by `/healthz`, first seen at (s), per run:", ""]
    for i, r in enumerate(report["runs"], 1):
        seen = "; ".join(f"{phase} {at}" for phase, at in r["phases"].items()) or "none (no phase reported)"
        lines.append(f"{i}. {seen}")
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    """Run the benchmark, print the table, write the results."""
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--runs", type=int, default=3, help="start-ups measured")
    parser.add_argument("--interval", type=float, default=0.02, help="seconds between polls")
    parser.add_argument("--timeout", type=float, default=300.0, help="give up on a run after this")
    parser.add_argument("--source", type=Path, default=ROOT, help="the checkout whose API is served")
    parser.add_argument("--label", default="this checkout", help="what the source is, for the table")
    parser.add_argument("--out", type=Path, help="write the report as JSON here")
    parser.add_argument("--md", type=Path, help="write the table as Markdown here")
    args = parser.parse_args(argv)
    report = run(args)
    table = markdown(report)
    print(table)
    save(report, table, args.out, args.md)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
