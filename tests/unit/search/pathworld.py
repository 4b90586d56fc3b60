"""A synthetic world for engine tests: an LLM stand-in and a real evaluator whose reward is a known
function of the technique path.

`PathModel` (the only stand-in: it replaces the LLM) reads the technique from the prompt's regraph
header and the path so far from the ``// path:`` line of the current code, and answers with code whose
path line has the technique appended, optionally after a random delay. `PathEvaluator` is a genuine `CandidateEvaluator`: it parses
that line and scores the path (product of per-technique speedup factors, failing on broken techniques).
"""

from __future__ import annotations

import asyncio
import math
import random
import re
from collections.abc import Iterator
from typing import Any

from executor.protocol import reward_for
from search.backends.base import ChatMessage, Completion
from search.backends.replay import request_header
from search.policy import TaskContext
from search.protocols import INITIAL_TECHNIQUE, Evaluation

BODY = 'extern "C" void f(int n, float* x) {\n    for (int i = 0; i < n; ++i) x[i] *= 2.0f;\n}\n'
_CURRENT = re.compile(r"Current code[^\n]*:\n```cuda\n(.*?)\n```", re.DOTALL)


def code_for(path: list[str]) -> str:
    """The code the stand-in model writes after `path` (techniques after the initial node)."""
    return f"// path: {'|'.join(path)}\n{BODY}"


def path_of(code: str) -> list[str]:
    """The technique path a piece of code records."""
    first = code.splitlines()[0]
    assert first.startswith("// path:"), first
    rest = first[len("// path:") :].strip()
    return rest.split("|") if rest else []


TASK = TaskContext(id="synthetic", entry="f", signature="void f(int n, float* x)", initial_code=code_for([]))


class PathModel:
    """TEST STAND-IN FOR THE LLM (see module docstring). Fixed token costs per call."""

    def __init__(
        self,
        prompt_tokens: int = 10,
        completion_tokens: int = 5,
        lose_entry: frozenset[str] = frozenset(),
        jitter_s: float = 0.0,
        seed: int = 0,
    ):
        self.prompt_tokens = prompt_tokens
        self.completion_tokens = completion_tokens
        self.lose_entry = lose_entry
        self.jitter_s = jitter_s
        self._rng = random.Random(seed)
        self.calls: list[dict[str, Any]] = []
        self.in_flight = 0  # calls being answered right now

    async def complete(
        self,
        messages: list[ChatMessage],
        *,
        max_tokens: int,
        temperature: float,
        seed: int | None,
        json_schema: dict[str, Any] | None = None,
    ) -> Completion:
        header = request_header(messages)
        assert header is not None
        match = _CURRENT.search(messages[-1].content)
        assert match is not None
        path = path_of(match.group(1))
        step = header["technique"] if header["prompt"] == "step" else header["prompt"]
        self.calls.append({"header": header, "seed": seed, "path": path, "prompt": messages[-1].content})
        if self.jitter_s:
            self.in_flight += 1
            try:
                # Random durations make concurrent calls finish out of order.
                await asyncio.sleep(self._rng.random() * self.jitter_s)
            finally:
                self.in_flight -= 1
        code = code_for([*path, step])
        if step in self.lose_entry:
            code = code.replace('extern "C" ', "")
        return Completion(
            text=f"Applying {step}.\n```cuda\n{code}```\n",
            prompt_tokens=self.prompt_tokens,
            completion_tokens=self.completion_tokens,
            model="path-model",
            backend="test-stand-in",
        )

    async def aclose(self) -> None:
        pass


class PathEvaluator:
    """A real evaluator over the synthetic world: speedup = product of factors along the path."""

    def __init__(
        self,
        factors: dict[str, float],
        broken: frozenset[str] = frozenset(),
        jitter_s: float = 0.0,
        seed: int = 0,
        model: PathModel | None = None,
    ) -> None:
        self.factors = factors
        self.broken = broken
        self.jitter_s = jitter_s
        self._rng = random.Random(seed)
        self.evaluated: list[list[str]] = []
        self.in_flight = 0
        self.max_in_flight = 0
        self.model = model
        self.overlapped: list[list[str]] = []  # paths evaluated while `model` was generating

    def score(self, path: list[str]) -> tuple[bool, float]:
        passed = not any(t in self.broken for t in path)
        return passed, math.prod(self.factors.get(t, 1.0) for t in path)

    async def evaluate(self, code: str) -> Evaluation:
        path = path_of(code)
        self.evaluated.append(path)
        self.in_flight += 1
        self.max_in_flight = max(self.max_in_flight, self.in_flight)
        generating = self.model is not None and self.model.in_flight > 0
        try:
            if self.jitter_s:
                # Random durations make concurrent calls finish out of order.
                await asyncio.sleep(self._rng.random() * self.jitter_s)
        finally:
            self.in_flight -= 1
        if generating or (self.model is not None and self.model.in_flight > 0):
            self.overlapped.append(path)
        passed, speedup = self.score(path)
        return Evaluation(
            passed=passed,
            reward=reward_for(passed, speedup if passed else None),
            speedup=speedup if passed else None,
            error_kind=None if passed else "wrong_answer",
            message="" if passed else "mismatch",
            raw={"path": path},
        )


def all_paths(edges: dict[str, list[str]], max_steps: int) -> Iterator[list[str]]:
    """Every technique path of 1..max_steps steps from the initial node (brute force)."""

    def walk(node: str, path: list[str]) -> Iterator[list[str]]:
        if len(path) == max_steps:
            return
        for nxt in edges.get(node, []):
            yield [*path, nxt]
            yield from walk(nxt, [*path, nxt])

    yield from walk(INITIAL_TECHNIQUE, [])


def best_verified(evaluator: PathEvaluator, edges: dict[str, list[str]], max_steps: int) -> float:
    """The best reward reachable, where (as in the search) a failed step ends a path."""
    best = -math.inf
    for path in all_paths(edges, max_steps):
        if all(evaluator.score(path[: i + 1])[0] for i in range(len(path))):
            passed, speedup = evaluator.score(path)
            best = max(best, reward_for(passed, speedup))
    return best
