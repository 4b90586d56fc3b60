"""Where `regraph up`'s time to "Ready." goes: a table of start-up phases, with wall and CPU seconds.

Issue 31 asks for ready ≤ 15 s after a restart. Each cycle starts ``python -m regraph_cli up``
(embedded Neo4j, migrations, the seed graph, the embedding model, the local executor, the API) on
free ports in one temporary data directory, stamps every line it writes (stdout and stderr) with the
seconds since the spawn, and every ``--interval`` seconds reads the CPU time of each process of its
tree from /proc: the `up` process itself (the API, migrations, the model), the executor and the
Neo4j JVM (each with their own children). A phase runs from one line (or process) first seen to
another; its CPU seconds are what each of the three used in that interval. CPU seconds grow little
with the machine's load, where wall seconds do: on a machine shared with other work, compare those.
Phases can overlap (work done in parallel), so their wall seconds do not add up to the total.

The first cycle starts on an empty data directory, the next ones are restarts on it; each is stopped
with SIGINT once ready. ``--source`` runs another checkout's code (a before/after with the same
command).

    python -m bench.probes.ready_time --cycles 3 --md bench/results/2026-11-29_s17/ready_time_raw.md
"""

from __future__ import annotations

import argparse
import os
import re
import signal
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

from graphdb.embedded import free_port

ROOT = Path(__file__).resolve().parents[2]
TICK_S = 1.0 / os.sysconf("SC_CLK_TCK")
GROUPS = ("api", "executor", "neo4j")

# Events seen in the output: (name, pattern). The first line matching names the moment.
LINE_EVENTS: tuple[tuple[str, re.Pattern[str]], ...] = tuple(
    (name, re.compile(pattern))
    for name, pattern in (
        ("executor answers", r"executor\.app.*/healthz.*200|executor answers"),
        ("API listens", r"^ReGraph API serving on"),
        ("Neo4j start asked", r"start-up: starting the embedded Neo4j"),
        ("Neo4j answers", r"start-up: opening a connection to Neo4j"),
        ("migrations begin", r"start-up: migrating the schema"),
        ("migrations done", r"schema migrated"),
        ("seed graph begins", r"start-up: loading the seed graph"),
        ("model asked", r"start-up: loading the embedding model|embedding model: loading"),
        ("model loaded", r"embedding model loaded"),
        ("preload done", r"retrieval preloaded"),
        ("job service begins", r"start-up: starting the job service"),
        ("API ready", r"api ready"),
        ("Ready.", r"^Ready\."),
    )
)
# Events seen in the process tree: the first process whose command line matches.
PROCESS_EVENTS: tuple[tuple[str, str, re.Pattern[str]], ...] = (
    ("executor spawned", "executor", re.compile(r"regraph_cli\x00executor\x00serve")),
    ("JVM spawned", "neo4j", re.compile(r"java\x00.*EmbeddedNeo4j")),
)
# The table: (phase, from event, to event); the event "spawn" is 0.
PHASES: tuple[tuple[str, str, str], ...] = (
    ("Python start and imports of `up`", "spawn", "first child"),
    ("executor: spawn to /healthz 200", "executor spawned", "executor answers"),
    ("API port open (from spawn)", "spawn", "API listens"),
    ("Neo4j JVM: spawn to Bolt answering", "JVM spawned", "Neo4j answers"),
    ("migrations (check/apply)", "migrations begin", "migrations done"),
    ("seed graph check/load", "seed graph begins", "seed graph ends"),
    ("embedding model load", "model asked", "model loaded"),
    ("retrieval preload (background)", "seed graph ends", "preload done"),
    ("job service start", "job service begins", "API ready"),
    ("API ready to `Ready.` printed", "API ready", "Ready."),
    ("total: spawn to `Ready.`", "spawn", "Ready."),
)


@dataclass
class Cycle:
    """One start: when each event was first seen, and the CPU seconds per group at each sample."""

    events: dict[str, float] = field(default_factory=dict)
    samples: list[tuple[float, dict[str, float]]] = field(default_factory=list)
    lines: list[str] = field(default_factory=list)
    load: float = 0.0

    def at(self, event: str) -> float | None:
        if event == "spawn":
            return 0.0
        if event == "first child":
            seen = [self.events[e] for e in ("executor spawned", "JVM spawned") if e in self.events]
            return min(seen) if seen else None
        if event == "seed graph ends":  # the next phase of the start-up (the model's, before 2026-11-29)
            begun = self.events.get("seed graph begins")
            after = [
                t
                for e in ("model asked", "job service begins")
                if begun is not None and (t := self.events.get(e)) is not None and t >= begun
            ]
            return min(after) if after else None
        return self.events.get(event)

    def cpu_at(self, t: float) -> dict[str, float]:
        """CPU seconds per group at the last sample taken at or before `t`."""
        best = {g: 0.0 for g in GROUPS}
        for when, cpu in self.samples:
            if when > t:
                break
            best = cpu
        return best


def _stat(pid: str) -> tuple[int, float] | None:
    """(parent pid, CPU seconds of the process and its reaped children), or None when it is gone."""
    try:
        raw = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    fields = raw[raw.rindex(")") + 2 :].split()
    ppid = int(fields[1])
    utime, stime, cutime, cstime = (int(x) for x in fields[11:15])
    return ppid, (utime + stime + cutime + cstime) * TICK_S


def _cmdline(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/cmdline").read_text(errors="replace")
    except OSError:
        return ""


def sample_tree(root: int, kinds: dict[int, str]) -> tuple[dict[str, float], dict[int, str]]:
    """CPU seconds per group of `root`'s live tree; `kinds` caches each pid's group (updated)."""
    stats: dict[int, tuple[int, float]] = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit() and (s := _stat(entry)) is not None:
            stats[int(entry)] = s
    cpu = {g: 0.0 for g in GROUPS}
    for pid, (_ppid, seconds) in stats.items():
        chain, p = [], pid
        while p in stats and p != root and p not in kinds:
            chain.append(p)
            p = stats[p][0]
        if p == root:
            group = "api"
        elif p in kinds:
            group = kinds[p]
        else:
            continue  # not ours
        for q in reversed(chain):  # the nearest executor or JVM ancestor names the group
            line = _cmdline(q)
            matched = next((g for _, g, rx in PROCESS_EVENTS if rx.search(line)), None)
            if matched is not None:  # kept: a fork still running `up`'s code is read again next time
                kinds[q] = matched
            group = matched or group
        cpu[group] += seconds
    return cpu, kinds


def run_cycle(source: Path, data_dir: Path, interval_s: float, timeout_s: float) -> Cycle:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("REGRAPH_", "NEO4J_"))}
    env |= {
        "REGRAPH_DATA_DIR": str(data_dir),
        "REGRAPH_NEO4J_PORT": str(free_port()),
        "REGRAPH_LOG_FORMAT": "text",
        "PYTHONPATH": str(source),
    }
    command = [sys.executable, "-m", "regraph_cli", "up", "--port", str(free_port())]
    command += ["--executor-port", str(free_port())]
    cycle = Cycle()
    lock = threading.Lock()
    started = time.monotonic()
    process = subprocess.Popen(
        command,
        cwd=source,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )

    def read(stream: object) -> None:
        for line in stream:  # type: ignore[attr-defined]
            now = time.monotonic() - started
            with lock:
                cycle.lines.append(f"{now:7.2f} {line.rstrip()}")
                for name, rx in LINE_EVENTS:
                    if name not in cycle.events and rx.search(line):
                        cycle.events[name] = now

    readers = [
        threading.Thread(target=read, args=(s,), daemon=True) for s in (process.stdout, process.stderr)
    ]
    for reader in readers:
        reader.start()
    kinds: dict[int, str] = {}
    try:
        while "Ready." not in cycle.events:
            now = time.monotonic() - started
            if process.poll() is not None:
                raise RuntimeError(f"`up` exited with {process.returncode}:\n" + "\n".join(cycle.lines[-30:]))
            if now > timeout_s:
                raise TimeoutError("not ready in time:\n" + "\n".join(cycle.lines[-30:]))
            cpu, kinds = sample_tree(process.pid, kinds)
            cycle.samples.append((now, cpu))
            for pid, group in kinds.items():
                for name, g, rx in PROCESS_EVENTS:
                    if g == group and name not in cycle.events and rx.search(_cmdline(pid)):
                        cycle.events[name] = now
            time.sleep(interval_s)
        cpu, kinds = sample_tree(process.pid, kinds)
        cycle.samples.append((time.monotonic() - started, cpu))
        cycle.load = os.getloadavg()[0]
    finally:
        process.send_signal(signal.SIGINT)
        try:
            process.wait(timeout=60)
        except subprocess.TimeoutExpired:
            os.killpg(process.pid, signal.SIGKILL)
            process.wait()
    return cycle


def table(cycles: list[Cycle], label: str) -> str:
    def cell(value: float | None) -> str:
        return "—" if value is None else f"{value:.1f}"

    kinds = ["fresh"] + ["restart"] * (len(cycles) - 1)
    head = "| phase | " + " | ".join(
        f"{k} {i + 1}: from–to s | wall s | CPU s api/exec/neo4j" for i, k in enumerate(kinds)
    )
    lines = [f"### {label}", "", head + " |", "|---" * (1 + 3 * len(cycles)) + "|"]
    for phase, start, end in PHASES:
        row = [phase]
        for c in cycles:
            a, b = c.at(start), c.at(end)
            if a is None or b is None:
                row += ["—", "—", "—"]
                continue
            ca, cb = c.cpu_at(a), c.cpu_at(b)
            cpu = "/".join(f"{cb[g] - ca[g]:.1f}" for g in GROUPS)
            row += [f"{a:.1f}–{b:.1f}", cell(b - a), cpu]
        lines.append("| " + " | ".join(row) + " |")
    loads = ", ".join(f"{c.load:.1f}" for c in cycles)
    lines += ["", f"Load average (1 min) when each cycle was ready: {loads}.", ""]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--source", type=Path, default=ROOT, help="the checkout whose `up` runs")
    parser.add_argument("--label", default="this checkout", help="the table's title")
    parser.add_argument("--cycles", type=int, default=3, help="a fresh start, then restarts")
    parser.add_argument("--interval", type=float, default=0.05, help="seconds between CPU samples")
    parser.add_argument("--timeout", type=float, default=240.0)
    parser.add_argument("--md", type=Path, help="append the table here")
    parser.add_argument("--log", type=Path, help="write every stamped output line here")
    args = parser.parse_args(argv)
    cycles = []
    with tempfile.TemporaryDirectory(prefix="regraph-ready-") as tmp:
        for _ in range(args.cycles):
            cycles.append(run_cycle(args.source.resolve(), Path(tmp) / "data", args.interval, args.timeout))
    text = table(
        cycles, f"{args.label} (`{args.source}`), {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}"
    )
    print(text)
    if args.md:
        args.md.parent.mkdir(parents=True, exist_ok=True)
        with args.md.open("a") as out:
            out.write(text + "\n")
    if args.log:
        args.log.write_text("\n\n".join("\n".join(c.lines) for c in cycles) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
