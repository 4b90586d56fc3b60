"""Engine overhead of MCGS per iteration, with an instant stand-in model and evaluator.

Synthetic reasoning graph: 200 techniques, 10 successors each (2,000 transitions), one example per
transition. The model stand-in answers instantly (it only rewrites a path comment) and the evaluator
scores the path with a hash, so the time measured is the engine's own: prompt building, code
extraction, knowledge queries, selection, bookkeeping. Target: <= 2 ms per iteration.

Run: ``python -m bench.mcgs_overhead [--rollouts 200] [--repeats 3]``.
"""

from __future__ import annotations

import argparse
import asyncio
import hashlib
import random
import re
import time
from typing import Any

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
    hierarchical_reward,
)

BODY = 'extern "C" void f(int n, float* x) {\n    for (int i = 0; i < n; ++i) x[i] *= 2.0f;\n}\n'
_CURRENT = re.compile(r"Current code[^\n]*:\n```cuda\n// path: ([^\n]*)\n")


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


class TimedKnowledge:
    """Forwards to the in-memory graph and adds up the time spent there (the database's share)."""

    def __init__(self, inner: InMemoryKnowledge) -> None:
        self.inner = inner
        self.seconds = 0.0

    def successors(self, technique: str, code: str, k: int) -> list[SuccessorOption]:
        """Timed `InMemoryKnowledge.successors`."""
        start = time.perf_counter()
        options = self.inner.successors(technique, code, k)
        self.seconds += time.perf_counter() - start
        return options

    def similar_examples(self, code: str, k: int) -> list[RetrievedExample]:
        """Timed `InMemoryKnowledge.similar_examples`."""
        start = time.perf_counter()
        examples = self.inner.similar_examples(code, k)
        self.seconds += time.perf_counter() - start
        return examples


class InstantModel:
    """Stand-in for the LLM that answers at once (its own time is measured and subtracted)."""

    def __init__(self) -> None:
        self.seconds = 0.0

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
        start = time.perf_counter()
        header = request_header(messages) or {}
        match = _CURRENT.search(messages[-1].content)
        path = match.group(1) if match else ""
        code = f"// path: {path}|{header.get('technique')}\n{BODY}"
        completion = Completion(
            text=f"```cuda\n{code}```",
            prompt_tokens=1,
            completion_tokens=1,
            model="instant",
            backend="bench-stand-in",
        )
        self.seconds += time.perf_counter() - start
        return completion

    async def aclose(self) -> None:
        """Nothing to release."""


class HashEvaluator:
    """Scores a candidate from a hash of its code: 10% fail, others get a speedup in [0.5, 4)."""

    def __init__(self) -> None:
        self.seconds = 0.0

    async def evaluate(self, code: str) -> Evaluation:
        """Instant verdict."""
        start = time.perf_counter()
        digest = int.from_bytes(hashlib.blake2b(code.encode(), digest_size=8).digest(), "big")
        passed = digest % 10 != 0
        speedup = 0.5 + (digest % 3500) / 1000 if passed else None
        evaluation = Evaluation(
            passed=passed, reward=hierarchical_reward(passed=passed, speedup=speedup), speedup=speedup
        )
        self.seconds += time.perf_counter() - start
        return evaluation


def measure(knowledge: InMemoryKnowledge, config: MCGSConfig) -> tuple[int, int, float, float]:
    """(iterations, evaluations, engine seconds, knowledge seconds) of one search.

    Engine seconds = wall time minus the time spent inside the model, evaluator and knowledge stand-ins.
    """
    task = TaskContext(
        id="bench", entry="f", signature="void f(int n, float* x)", initial_code=f"// path: \n{BODY}"
    )
    model, evaluator, timed = InstantModel(), HashEvaluator(), TimedKnowledge(knowledge)

    async def search() -> tuple[int, int, float, float]:
        start = time.perf_counter()
        result = await optimize("regraph-mcgs", task, timed, model, evaluator, config)
        seconds = time.perf_counter() - start - model.seconds - evaluator.seconds - timed.seconds
        return result.iterations, result.evaluations_used, seconds, timed.seconds

    return asyncio.run(search())


def main() -> None:
    """Print a table of engine overhead per iteration."""
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("--rollouts", type=int, default=200)
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    knowledge = synthetic_graph()
    print(f"graph: {len(knowledge.techniques)} techniques, 2000 transitions; rollouts={args.rollouts}")
    print(
        f"{'setting':<32}{'iters':>6}{'evals':>7}"
        f"{'engine ms/iter':>16}{'engine ms/eval':>16}{'graph ms/iter':>15}"
    )
    settings: dict[str, dict[str, Any]] = {
        "defaults (knowledge in thread)": {},
        "knowledge inline": {"knowledge_in_thread": False},
        "concurrency 1/1, inline": {"knowledge_in_thread": False, "generation_concurrency": 1},
    }
    for label, extra in settings.items():
        config = MCGSConfig(rollouts=args.rollouts, evaluation_budget=10**9, **extra)
        runs = [measure(knowledge, config) for _ in range(args.repeats)]
        iterations, evaluations, seconds, graph_seconds = min(runs, key=lambda r: r[2])
        print(
            f"{label:<32}{iterations:>6}{evaluations:>7}{1000 * seconds / iterations:>16.3f}"
            f"{1000 * seconds / max(evaluations, 1):>16.3f}{1000 * graph_seconds / iterations:>15.3f}"
        )


if __name__ == "__main__":
    main()
