"""Monte Carlo Graph Search over the reasoning graph (ReGraphT).

Search state = (technique node reached, code produced so far). States form a tree: several paths
can reach the same technique with different code, and a technique may repeat on a path. Statistics
are kept at two levels:

* per search-tree state (visits N, value sum W): used by P-UCB selection. N(parent) in the
  exploration term is the visit count of the parent STATE, i.e. how many iterations passed through
  it. Counting visits of the graph node instead would let a state reached for the first time by a new
  path inherit the visits of every other path through that technique, shrinking its exploration
  bonus although its code (and so its children's prospects) is new; the tree count keeps UCB's usual
  meaning (how often this decision point was tried).
* per graph edge (source technique -> target technique) for the whole search: the mean reward seen
  for that transition, used as Q(s,a) by the epsilon-greedy rollout policy.

One iteration: select down the tree by P-UCB (unvisited children first); expand the leaf (generate
and evaluate a candidate for every successor technique); pick a child and roll out from it
epsilon-greedily over argmax[Q(s,a) - lambda * N(s,a)] (N(s,a): how often `a` is already on the path);
back up the maximum (or last) reward of the rollout.
"""

from __future__ import annotations

import asyncio
import logging
import math
import random
from dataclasses import dataclass, field
from typing import Literal

from pydantic import Field

from search.engine import SearchConfig, SearchResult, SearchSession, StepJob, StopReason
from search.protocols import INITIAL_TECHNIQUE, KnowledgeSource, SuccessorOption

logger = logging.getLogger(__name__)


class MCGSConfig(SearchConfig):
    """MCGS settings (plus the common `SearchConfig` ones). Paper defaults where it gives them."""

    rollouts: int = Field(default=10, ge=1, description="iterations: select, expand, roll out, back up")
    exploration: float = Field(default=math.sqrt(2), ge=0.0, description="c in Q + c*P*sqrt(ln N / n)")
    prior: Literal["edge", "uniform"] = Field(
        default="edge", description="P(s,a): edge success rate (Laplace-smoothed, mean 1) or 1"
    )
    epsilon: float = Field(default=0.2, ge=0.0, le=1.0, description="rollout: probability of a random step")
    revisit_penalty: float = Field(default=0.5, ge=0.0, description="lambda in Q(s,a) - lambda*N(s,a)")
    max_rollout_depth: int = Field(default=3, ge=0, description="steps per rollout")
    backprop: Literal["max", "last"] = Field(default="max", description="value backed up from a rollout")


@dataclass(eq=False)
class SearchState:
    """A node of the search tree."""

    technique: str
    code: str
    path: list[str]
    parent: SearchState | None = None
    candidate_index: int | None = None
    reward: float = 0.0
    viable: bool = True  # its code passed; a failed step is a terminal state
    prior: float = 1.0
    order: int = 0
    visits: int = 0
    value_sum: float = 0.0
    children: list[SearchState] | None = None  # None: not expanded yet
    exhausted: bool = False  # nothing left to explore below

    @property
    def q(self) -> float:
        """Mean backed-up value."""
        return self.value_sum / self.visits if self.visits else 0.0

    @property
    def steps(self) -> int:
        """Optimization steps from the initial code."""
        return len(self.path) - 1


@dataclass
class _EdgeStats:
    n: int = 0
    total: float = 0.0


@dataclass
class _Tables:
    edges: dict[tuple[str, str], _EdgeStats] = field(default_factory=dict)


def expected_reward(option: SuccessorOption) -> float:
    """A prior for Q(s,a) from the graph: the hierarchical reward expected from the edge's examples."""
    speedup = option.mean_speedup if option.mean_speedup is not None else 1.0
    on_success = speedup if speedup >= 1.0 else speedup - 1.0
    return option.success_rate * on_success - (1.0 - option.success_rate)


def priors(options: list[SuccessorOption], mode: Literal["edge", "uniform"]) -> list[float]:
    """P(s,a) for each option: 1 each (uniform) or Laplace-smoothed success rates scaled to mean 1."""
    if mode == "uniform" or not options:
        return [1.0] * len(options)
    weights = [(o.success_rate * o.n_examples + 1.0) / (o.n_examples + 2.0) for o in options]
    total = sum(weights)
    return [w * len(options) / total for w in weights]


def p_ucb(child: SearchState, parent_visits: int, c: float) -> float:
    """P-UCB score of a visited child: Q + c * P * sqrt(ln N(parent) / n(child))."""
    return child.q + c * child.prior * math.sqrt(math.log(max(parent_visits, 1)) / child.visits)


def select_child(parent: SearchState, children: list[SearchState], c: float) -> SearchState:
    """Unvisited children first (best own reward, then prior, then graph order); else highest P-UCB."""
    unvisited = [ch for ch in children if ch.visits == 0]
    if unvisited:
        return min(unvisited, key=lambda ch: (-ch.reward, -ch.prior, ch.order))
    # max() keeps the first of equal scores, i.e. graph order breaks ties.
    return max(children, key=lambda ch: p_ucb(ch, parent.visits, c))


class MonteCarloGraphSearch:
    """One MCGS run for one task; create a new instance per run."""

    def __init__(self, session: SearchSession, knowledge: KnowledgeSource, config: MCGSConfig) -> None:
        """Bind the search to a session (policy, evaluator, budgets, events) and a knowledge source."""
        self.session = session
        self.knowledge = knowledge
        self.config = config
        self.rng = random.Random(config.seed)
        self.tables = _Tables()
        self.root = SearchState(INITIAL_TECHNIQUE, session.task.initial_code, [INITIAL_TECHNIQUE])

    async def _successors(self, state_technique: str, code: str) -> list[SuccessorOption]:
        k = self.config.examples_per_step
        if self.config.knowledge_in_thread:
            return await asyncio.to_thread(self.knowledge.successors, state_technique, code, k)
        return self.knowledge.successors(state_technique, code, k)

    def _job(
        self,
        technique: str,
        code: str,
        path: list[str],
        option: SuccessorOption,
        phase: Literal["expansion", "rollout"],
        parent_index: int | None,
    ) -> StepJob:
        messages = self.session.policy.step_messages(
            code, technique, option.examples, step=len(path) - 1, source_technique=path[-2]
        )
        return StepJob(
            messages=messages, phase=phase, path=path, technique=technique, parent_index=parent_index
        )

    def _edge(self, source: str, target: str) -> _EdgeStats:
        return self.tables.edges.setdefault((source, target), _EdgeStats())

    def _edge_q(self, source: str, option: SuccessorOption) -> float:
        stats = self.tables.edges.get((source, option.technique))
        if stats is None or stats.n == 0:
            return expected_reward(option)
        return stats.total / stats.n

    # ---- the four phases ------------------------------------------------------------------------

    def _select(self) -> SearchState:
        node = self.root
        while node.children is not None:
            open_children = [ch for ch in node.children if ch.viable and not ch.exhausted]
            if not open_children:
                return node
            node = select_child(node, open_children, self.config.exploration)
        return node

    async def _expand(self, node: SearchState) -> list[SearchState]:
        options = await self._successors(node.technique, node.code)
        weights = priors(options, self.config.prior)
        jobs = [
            self._job(o.technique, node.code, [*node.path, o.technique], o, "expansion", node.candidate_index)
            for o in options
        ]
        candidates = await self.session.run_batch(jobs)
        children = []
        for order, (option, prior, candidate) in enumerate(zip(options, weights, candidates, strict=False)):
            self._record_edge(node.technique, option.technique, candidate.reward)
            children.append(
                SearchState(
                    technique=option.technique,
                    code=candidate.code or "",
                    path=candidate.path,
                    parent=node,
                    candidate_index=candidate.index,
                    reward=candidate.reward,
                    viable=candidate.passed,
                    prior=prior,
                    order=order,
                )
            )
        node.children = children
        return children

    def _record_edge(self, source: str, target: str, reward: float) -> None:
        stats = self._edge(source, target)
        stats.n += 1
        stats.total += reward

    async def _rollout(self, start: SearchState) -> list[float]:
        """Rewards of the steps taken after `start` (its own reward is not included)."""
        rewards: list[float] = []
        technique, code, path, parent_index = (
            start.technique,
            start.code,
            list(start.path),
            start.candidate_index,
        )
        for _ in range(self.config.max_rollout_depth):
            if len(path) - 1 >= self.config.max_path_length or self.session.out_of_budget():
                break
            options = await self._successors(technique, code)
            if not options:
                break  # dead end in the graph
            if self.rng.random() < self.config.epsilon:
                option = options[self.rng.randrange(len(options))]
            else:
                penalty = self.config.revisit_penalty
                option = max(
                    options, key=lambda o: self._edge_q(technique, o) - penalty * path.count(o.technique)
                )
            step_path = [*path, option.technique]
            batch = await self.session.run_batch(
                [self._job(option.technique, code, step_path, option, "rollout", parent_index)]
            )
            if not batch:
                break
            candidate = batch[0]
            self._record_edge(technique, option.technique, candidate.reward)
            rewards.append(candidate.reward)
            if not candidate.passed or candidate.code is None:
                break  # a failed step ends the rollout
            technique, code, path, parent_index = option.technique, candidate.code, step_path, candidate.index
        return rewards

    def _backup(self, state: SearchState, value: float) -> None:
        node: SearchState | None = state
        while node is not None:
            node.visits += 1
            node.value_sum += value
            node = node.parent

    def _value(self, rewards: list[float]) -> float:
        return max(rewards) if self.config.backprop == "max" else rewards[-1]

    def _mark_exhausted(self, node: SearchState) -> None:
        current: SearchState | None = node
        while current is not None:
            if current is not node and (
                current.children is None or any(ch.viable and not ch.exhausted for ch in current.children)
            ):
                return
            current.exhausted = True
            current = current.parent

    async def run(self) -> SearchResult:
        """Search until the rollouts, a budget or the graph is exhausted; return the best verified code."""
        session = self.session
        await session.emit("started")
        stop: StopReason = "completed"
        for iteration in range(self.config.rollouts):
            if (spent := session.out_of_budget()) is not None:
                stop = spent
                break
            if self.root.exhausted:
                stop = "exhausted"
                break
            leaf = self._select()
            start: SearchState | None = None
            if leaf.children is None and leaf.steps < self.config.max_path_length:
                children = await self._expand(leaf)
                open_children = [ch for ch in children if ch.viable]
                if open_children:
                    start = select_child(leaf, open_children, self.config.exploration)
            if start is not None:
                rewards = [start.reward, *await self._rollout(start)]
                self._backup(start, self._value(rewards))
            else:
                # A dead end, a depth limit, or every successor failed: this state is final.
                failed = [ch.reward for ch in leaf.children or []]
                rewards = [leaf.reward, max(failed)] if failed else [leaf.reward]
                self._mark_exhausted(leaf)
                self._backup(leaf, self._value(rewards))
            session.iterations = iteration + 1
            await session.emit("iteration", iteration=iteration + 1)
        else:
            stop = session.out_of_budget() or "completed"
        if self.root.exhausted and stop == "completed":
            stop = "exhausted"
        return await session.finish(stop)
