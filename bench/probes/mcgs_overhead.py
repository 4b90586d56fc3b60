"""Engine overhead of MCGS per iteration, with an instant stand-in model and evaluator.

Synthetic reasoning graph: 200 techniques, 10 successors each (2,000 transitions), one example per
transition. The model stand-in answers instantly (it only rewrites a path comment) and the evaluator
scores the path with a hash, so the time measured is the engine's own: prompt building, code
extraction, handing knowledge queries to worker threads, selection, bookkeeping. Target: <= 2 ms per
iteration with the default settings (the first row). Each setting runs `--repeats` times and the
median is reported, with the load average before and after (other processes skew the numbers).

Run: ``python -m bench.probes.mcgs_overhead [--rollouts 200] [--repeats 3] [--out results.json]``.
"""

from __future__ import annotations

import argparse
import asyncio
import hashlib
import json
import os
import platform
import random
import re
import statistics
import sys
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from executor.protocol import reward_for
from search.backends.base import ChatMessage, Completion
from search.backends.replay import request_header
from search.baselines import optimize
from search.inmemory import InMemoryKnowledge
from search.mcgs import MCGSConfig
from search.policy import TaskContext
from search.protocols import (
    INITIAL_TECHNIQUE,
    Evaluation,
    RetrievedExample,
    SuccessorOption,
)

BODY = 'extern "C" void f(int n, float* x) {\n    for (int i = 0; i < n; ++i) x[i] *= 2.0f;\n}\n'
_CURRENT = re.compile(r"Current code[^\n]*:\n```cuda\n// path: ([^\n]*)\n")
TARGET_MS_PER_ITERATION = 2.0


def synthetic_graph(techniques: int = 200, fanout: int = 10, seed: int = 0) -> InMemoryKnowledge:
    """`techniques` nodes plus the initial one, `fanout` random successors each, one example per edge."""
    rng = random.Random(seed)
    names = [f"technique {i:03d}" for i in range(techniques)]
    examples = []
    for source in [INITIAL_TECHNIQUE, *names]:
        for target in rng.sample(names, fanout):
            snippet = " ".join(f"v{rng.randrange(400)}" for _ in range(60))
            examples.append(
                RetrievedExample(
                    id=f"{source}->{target}",
                    task_id=f"task{rng.randrange(50)}",
                    source_technique=source,
                    target_technique=target,
                    code_before=f"// {snippet}\n{BODY}",
                    code_after=f"// {snippet} {target}\n{BODY}",
                    think=f"apply {target}",
                    speedup=rng.uniform(0.5, 3.0),
                )
            )
    return InMemoryKnowledge(examples)


class CpuClock:
    """Adds up the CPU time of the thread that runs each timed section (GIL waits are not counted)."""

    def __init__(self) -> None:
        self.seconds = 0.0
        # Several worker threads may be inside the same clock at once: one start per thread.
        self._starts: dict[int, float] = {}

    def __enter__(self) -> None:
        self._starts[threading.get_ident()] = time.thread_time()

    def __exit__(self, *_: object) -> None:
        self.seconds += time.thread_time() - self._starts.pop(threading.get_ident())


class TimedKnowledge:
    """Forwards to the in-memory graph and adds up the CPU time spent there (the database's share)."""

    def __init__(self, inner: InMemoryKnowledge, blocking: bool = False) -> None:
        self.inner = inner
        self.clock = CpuClock()
        # As the wrapped in-memory graph: non-blocking, so queried inline. `blocking=True` makes the
        # search treat it like a database (a worker thread per query), to show what that hop costs.
        self.blocking = blocking

    def successors(self, technique: str, code: str, k: int) -> list[SuccessorOption]:
        """Timed `InMemoryKnowledge.successors`."""
        with self.clock:
            return self.inner.successors(technique, code, k)

    def similar_examples(self, code: str, k: int) -> list[RetrievedExample]:
        """Timed `InMemoryKnowledge.similar_examples`."""
        with self.clock:
            return self.inner.similar_examples(code, k)


class InstantModel:
    """Stand-in for the LLM that answers at once (its own time is measured and subtracted)."""

    def __init__(self) -> None:
        self.clock = CpuClock()

    async def complete(
        self,
        messages: list[ChatMessage],
        *,
        max_tokens: int,
        temperature: float,
        seed: int | None,
        json_schema: dict[str, Any] | None = None,
    ) -> Completion:
        """Append the requested technique to the code's path comment."""
        with self.clock:
            header = request_header(messages) or {}
            match = _CURRENT.search(messages[-1].content)
            path = match.group(1) if match else ""
            code = f"// path: {path}|{header.get('technique')}\n{BODY}"
            return Completion(
                text=f"```cuda\n{code}```",
                prompt_tokens=1,
                completion_tokens=1,
                model="instant",
                backend="bench-stand-in",
            )

    async def aclose(self) -> None:
        """Nothing to release."""


class HashEvaluator:
    """Scores a candidate from a hash of its code: 10% fail, others get a speedup in [0.5, 4)."""

    def __init__(self) -> None:
        self.clock = CpuClock()

    async def evaluate(self, code: str) -> Evaluation:
        """Instant verdict."""
        with self.clock:
            digest = int.from_bytes(hashlib.blake2b(code.encode(), digest_size=8).digest(), "big")
            passed = digest % 10 != 0
            speedup = 0.5 + (digest % 3500) / 1000 if passed else None
            return Evaluation(passed=passed, reward=reward_for(passed, speedup), speedup=speedup)


@dataclass(frozen=True)
class Measurement:
    """One search: its size and where the time went (seconds)."""

    iterations: int
    evaluations: int
    engine_wall: float  # wall time minus the stand-ins' CPU time
    engine_cpu: float  # the process's CPU time (every thread) minus the stand-ins' CPU time
    graph_cpu: float  # CPU time inside the in-memory graph


def measure(knowledge: InMemoryKnowledge, config: MCGSConfig, blocking_graph: bool = False) -> Measurement:
    """Run one search and split its time between the engine and the stand-ins.

    The stand-ins' share is their CPU time, so time the engine spends waiting (for the GIL, for a
    worker thread to pick up a query, for the CPU when other processes load the machine) counts as
    engine time in the wall column; the CPU column leaves those waits out.
    """
    task = TaskContext(
        id="bench", entry="f", signature="void f(int n, float* x)", initial_code=f"// path: \n{BODY}"
    )
    model, evaluator, timed = InstantModel(), HashEvaluator(), TimedKnowledge(knowledge, blocking_graph)

    async def search() -> Measurement:
        wall, cpu = time.perf_counter(), time.process_time()
        result = await optimize("regraph-mcgs", task, timed, model, evaluator, config)
        wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
        stand_ins = model.clock.seconds + evaluator.clock.seconds + timed.clock.seconds
        return Measurement(
            iterations=result.iterations,
            evaluations=result.evaluations_used,
            engine_wall=wall - stand_ins,
            engine_cpu=cpu - stand_ins,
            graph_cpu=timed.clock.seconds,
        )

    return asyncio.run(search())


BLOCKING = "graph_blocks"
"""Not an MCGS setting: the stand-in graph says it blocks, so each query goes to a worker thread, as a
Neo4j-backed source does (the in-memory graph does not block and is queried inline)."""

SETTINGS: dict[str, dict[str, Any]] = {
    "defaults (4 in flight, in-memory graph inline)": {},
    "1 in flight (sequential)": {"rollouts_in_flight": 1},
    "4 in flight, graph as if blocking (threads)": {BLOCKING: True},
    "1 in flight, as if blocking (threads)": {"rollouts_in_flight": 1, BLOCKING: True},
    "1 in flight, concurrency 1/1": {"rollouts_in_flight": 1, "generation_concurrency": 1},
}
"""The rows of the table: MCGS settings on top of the defaults (the first row is what the service runs)."""


def load_average() -> list[float]:
    """The 1, 5 and 15 minute load averages (other processes on the machine skew the numbers)."""
    return [round(x, 2) for x in os.getloadavg()]


def main() -> None:
    """Print a table of engine overhead per iteration (median of the repeats); optionally save JSON."""
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("--rollouts", type=int, default=200)
    parser.add_argument("--repeats", type=int, default=3, help="runs per setting; the median is reported")
    parser.add_argument("--out", type=Path, default=None, help="also write the results as JSON to this file")
    args = parser.parse_args()
    knowledge = synthetic_graph()
    load_before = load_average()
    print(f"graph: {len(knowledge.techniques)} techniques, 2000 transitions; rollouts={args.rollouts}")
    print(f"load average before: {load_before}")
    print(
        f"{'setting':<50}{'iters':>6}{'evals':>7}{'engine ms/iter':>16}{'engine ms/eval':>16}"
        f"{'engine CPU ms/iter':>20}{'graph ms/iter':>15}"
    )
    rows = []
    for label, extra in SETTINGS.items():
        settings = dict(extra)
        blocking = bool(settings.pop(BLOCKING, False))
        config = MCGSConfig(rollouts=args.rollouts, evaluation_budget=10**9, **settings)
        runs = [measure(knowledge, config, blocking) for _ in range(args.repeats)]
        iterations, evaluations = runs[0].iterations, runs[0].evaluations
        wall_ms = [1000 * r.engine_wall / r.iterations for r in runs]
        cpu_ms = [1000 * r.engine_cpu / r.iterations for r in runs]
        graph_ms = statistics.median(1000 * r.graph_cpu / r.iterations for r in runs)
        engine_ms = statistics.median(wall_ms)
        print(
            f"{label:<50}{iterations:>6}{evaluations:>7}{engine_ms:>16.3f}"
            f"{engine_ms * iterations / max(evaluations, 1):>16.3f}{statistics.median(cpu_ms):>20.3f}"
            f"{graph_ms:>15.3f}"
        )
        rows.append(
            {
                "setting": label,
                "config": extra,
                "iterations": iterations,
                "evaluations": evaluations,
                "engine_ms_per_iteration": round(engine_ms, 4),
                "engine_ms_per_iteration_runs": [round(x, 4) for x in wall_ms],
                "engine_cpu_ms_per_iteration": round(statistics.median(cpu_ms), 4),
                "engine_cpu_ms_per_iteration_runs": [round(x, 4) for x in cpu_ms],
                "graph_ms_per_iteration": round(graph_ms, 4),
            }
        )
    load_after = load_average()
    print(f"load average after: {load_after}; target: <= {TARGET_MS_PER_ITERATION} ms per iteration")
    if args.out is not None:
        report = {
            "benchmark": "mcgs_overhead",
            "date": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
            "command": "python -m bench.probes.mcgs_overhead " + " ".join(sys.argv[1:]),
            "machine": {
                "platform": platform.platform(),
                "python": platform.python_version(),
                "cpus": os.cpu_count(),
            },
            "load_average_before": load_before,
            "load_average_after": load_after,
            "rollouts": args.rollouts,
            "repeats": args.repeats,
            "target_ms_per_iteration": TARGET_MS_PER_ITERATION,
            "rows": rows,
        }
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(json.dumps(report, indent=2) + "\n", encoding="utf-8")
        print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
