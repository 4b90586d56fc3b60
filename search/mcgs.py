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

Rollout steps are sequential (step k+1 rewrites the code of step k), so one iteration alone keeps
either the model or the executor busy, never both. Up to `rollouts_in_flight` iterations therefore
run at once (tree parallelism). They advance in lock-step *rounds*: each round, every iteration in
flight contributes its next model calls (an expansion, or one rollout step), all of them run as one
batch (so the model writes some candidates while the executor times others), and the results are
applied in the order the iterations started, whatever order the calls finished in. Every decision
(selection, the rollout's random draws, edge statistics) happens between rounds, so a seed and a
deterministic model give the same search however long each call takes. While an iteration is in
flight, every state on its path counts one extra visit valued as a failure (a virtual loss), so the
next selections spread to other branches; a state being expanded cannot be selected again.
"""

from __future__ import annotations

import asyncio
import logging
import math
import random
from dataclasses import dataclass, field
from typing import Any, Literal

from pydantic import Field, model_validator

from executor.protocol import reward_for
from search.engine import Candidate, SearchConfig, SearchResult, SearchSession, StepJob, knowledge_blocks
from search.protocols import INITIAL_TECHNIQUE, KnowledgeSource, SuccessorOption

logger = logging.getLogger(__name__)

VIRTUAL_LOSS = -1.0
"""The value an in-flight visit counts as in P-UCB until it is backed up: the reward of a failure."""


MCGSPreset = Literal["ours", "paper"]

PAPER_PRESET: dict[str, Any] = {
    "prior": "uniform",
    "exploration": math.sqrt(2),
    "examples_per_step": 1,
    "rollouts_in_flight": 1,
}
"""What ``preset="paper"`` fixes: P-UCB exactly ``Q + sqrt(2 ln N(parent) / N(s))`` (no prior, c = sqrt 2),
one example of the chosen transition in each step prompt, and one rollout at a time."""


class MCGSConfig(SearchConfig):
    """MCGS settings (plus the common `SearchConfig` ones).

    Two presets. ``preset="paper"`` is the paper's algorithm where the paper states it
    (`PAPER_PRESET`): P-UCB ``Q + sqrt(2 ln N(parent) / N(s))``, one example per step, sequential
    rollouts; a setting given together with it that contradicts it is refused, so a run that says
    "paper" is the paper's. ``preset="ours"`` (the default) deviates from the paper in three ways,
    each our choice:

    * ``prior="edge"`` (ours): the exploration term is scaled by the edge's Laplace-smoothed success
      rate, to explore transitions whose examples sped code up more often. Where examples carry no
      validation (an in-memory graph built from trajectories without speedups, success rate 0) it
      reduces to ``1/(n_examples+2)`` and explores common transitions *less*. The replay benchmark of
      both presets on an H100 (bench/results/2026-11-25_h100/presets) resolved no difference, so the
      default stays ours.
    * ``examples_per_step=2`` (ours, from `SearchConfig`): two retrieved examples per step prompt
      instead of one, to show the small model the transition in more than one program.
    * ``rollouts_in_flight=4`` (ours): several iterations in lock-step rounds with virtual loss, so the
      model writes while the executor times; a different (equally valid) search than the sequential
      one.

    Settings the paper does not give are ours in both presets: ``epsilon`` 0.2, ``revisit_penalty``
    (lambda) 0.5, ``max_rollout_depth`` 3, N(parent) counted per search-tree state, unvisited children
    selected first, Q(s,a) before any observation taken from the edge's examples (`expected_reward`).
    The paper's own values are kept: 10 rollouts, an evaluation budget of 200, max backup.
    """

    preset: MCGSPreset = Field(
        default="ours", description="'paper': the paper's P-UCB, one example, sequential; 'ours': see above"
    )
    rollouts: int = Field(default=10, ge=1, description="iterations: select, expand, roll out, back up")
    exploration: float = Field(default=math.sqrt(2), ge=0.0, description="c in Q + c*P*sqrt(ln N / n)")
    prior: Literal["edge", "uniform"] = Field(
        default="edge",
        description="P(s,a): edge success rate (Laplace-smoothed, mean 1; ours) or 1 (the paper's)",
    )
    epsilon: float = Field(default=0.2, ge=0.0, le=1.0, description="rollout: probability of a random step")
    revisit_penalty: float = Field(default=0.5, ge=0.0, description="lambda in Q(s,a) - lambda*N(s,a)")
    max_rollout_depth: int = Field(default=3, ge=0, description="steps per rollout")
    backprop: Literal["max", "last"] = Field(default="max", description="value backed up from a rollout")
    rollouts_in_flight: int = Field(
        default=4,
        ge=1,
        le=64,
        description="iterations run at once in lock-step rounds, so generation overlaps evaluation "
        "(ours); 1: the sequential algorithm (the paper's)",
    )

    @model_validator(mode="before")
    @classmethod
    def _fill_preset(cls, data: Any) -> Any:
        if isinstance(data, dict) and data.get("preset") == "paper":
            return {**PAPER_PRESET, **data}
        return data

    @model_validator(mode="after")
    def _check_preset(self) -> MCGSConfig:
        if self.preset == "paper":
            clash = {k: getattr(self, k) for k, v in PAPER_PRESET.items() if getattr(self, k) != v}
            if clash:
                raise ValueError(
                    f"preset 'paper' fixes {', '.join(f'{k}={PAPER_PRESET[k]!r}' for k in clash)}; "
                    f"got {', '.join(f'{k}={v!r}' for k, v in clash.items())} (use preset 'ours' to change them)"
                )
        return self


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
    in_flight: int = 0  # iterations in flight whose path passes through this state
    expanding: bool = False  # an iteration in flight is expanding (or finishing) it

    @classmethod
    def child(
        cls, parent: SearchState, technique: str, candidate: Candidate, order: int, prior: float = 1.0
    ) -> SearchState:
        """The state `candidate` reached from `parent`; terminal when the candidate failed."""
        return cls(
            technique=technique,
            code=candidate.code or "",
            path=candidate.path,
            parent=parent,
            candidate_index=candidate.index,
            reward=candidate.reward,
            viable=candidate.passed,
            prior=prior,
            order=order,
        )

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
    """A prior for Q(s,a) from the graph: the hierarchical reward (`reward_for`) expected from the edge's
    examples, a success at their mean speedup (1 when none was measured) weighted by their success rate."""
    speedup = option.mean_speedup if option.mean_speedup is not None else 1.0
    rate = option.success_rate
    return rate * reward_for(True, speedup) + (1.0 - rate) * reward_for(False, None)


def priors(options: list[SuccessorOption], mode: Literal["edge", "uniform"]) -> list[float]:
    """P(s,a) for each option: 1 each (uniform) or Laplace-smoothed success rates scaled to mean 1."""
    if mode == "uniform" or not options:
        return [1.0] * len(options)
    weights = [(o.success_rate * o.n_examples + 1.0) / (o.n_examples + 2.0) for o in options]
    total = sum(weights)
    return [w * len(options) / total for w in weights]


def p_ucb(child: SearchState, parent_visits: int, c: float) -> float:
    """P-UCB score of a visited child: Q + c * P * sqrt(ln N(parent) / n(child)).

    With P = 1 and c = sqrt(2) (``preset="paper"``) this is the paper's Q + sqrt(2 ln N(parent) / N(s)).

    Visits of iterations still in flight count, valued `VIRTUAL_LOSS` (none in a sequential search).
    """
    if child.in_flight:
        n = child.visits + child.in_flight
        q = (child.value_sum + VIRTUAL_LOSS * child.in_flight) / n
    else:
        n, q = child.visits, child.q
    return q + c * child.prior * math.sqrt(math.log(max(parent_visits, 1)) / n)


def select_child(parent: SearchState, children: list[SearchState], c: float) -> SearchState:
    """Unvisited children first (best own reward, then prior, then graph order); else highest P-UCB."""
    unvisited = [ch for ch in children if ch.visits == 0 and ch.in_flight == 0]
    if unvisited:
        return min(unvisited, key=lambda ch: (-ch.reward, -ch.prior, ch.order))
    parent_visits = parent.visits + parent.in_flight
    # max() keeps the first of equal scores, i.e. graph order breaks ties.
    return max(children, key=lambda ch: p_ucb(ch, parent_visits, c))


def backup(state: SearchState, value: float) -> None:
    """Count one visit worth `value` on `state` and every ancestor."""
    node: SearchState | None = state
    while node is not None:
        node.visits += 1
        node.value_sum += value
        node = node.parent


def backed_up_value(rewards: list[float], backprop: Literal["max", "last"]) -> float:
    """What an iteration backs up: the maximum reward it saw (the paper's) or its last one."""
    return max(rewards) if backprop == "max" else rewards[-1]


def mark_exhausted(node: SearchState) -> None:
    """Mark `node` final, and each ancestor whose children are now all failed or exhausted."""
    current: SearchState | None = node
    while current is not None:
        if current is not node and (
            current.children is None or any(ch.viable and not ch.exhausted for ch in current.children)
        ):
            return
        current.exhausted = True
        current = current.parent


@dataclass(eq=False)
class _Iteration:
    """One iteration in flight: its leaf, then (once expanded) the rollout from the chosen child."""

    leaf: SearchState
    start: SearchState | None = None  # the child the rollout starts from; None while expanding
    rewards: list[float] = field(default_factory=list)
    # Where the rollout stands: the last state's technique, code, path and candidate.
    technique: str = ""
    code: str = ""
    path: list[str] = field(default_factory=list)
    parent_index: int | None = None
    steps: int = 0
    # What the current round asked for.
    options: list[SuccessorOption] = field(default_factory=list)
    jobs: list[StepJob] = field(default_factory=list)
    done: bool = False


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
        # Successors per (technique, code) for this search: the code a rollout starts from is queried
        # again when its state is expanded later, and the graph must look the same to the whole search.
        self._successor_cache: dict[tuple[str, str], list[SuccessorOption]] = {}
        self._started = 0

    # ---- knowledge ------------------------------------------------------------------------------

    async def _successors(self, keys: list[tuple[str, str]]) -> list[list[SuccessorOption]]:
        """Successors for each (technique, code), querying concurrently what is not cached yet."""
        cache = self._successor_cache
        missing = list(dict.fromkeys(key for key in keys if key not in cache))
        if missing:
            k = self.config.examples_per_step
            query = self.knowledge.successors
            if not knowledge_blocks(self.knowledge, self.config):
                found = [query(t, code, k) for t, code in missing]
            elif len(missing) == 1:
                found = [await asyncio.to_thread(query, *missing[0], k)]
            else:
                # One worker thread per query: a database answers them in parallel.
                found = await asyncio.gather(*(asyncio.to_thread(query, t, code, k) for t, code in missing))
            cache.update(zip(missing, found, strict=True))
        return [cache[key] for key in keys]

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

    def _edge_q(self, source: str, option: SuccessorOption) -> float:
        stats = self.tables.edges.get((source, option.technique))
        if stats is None or stats.n == 0:
            return expected_reward(option)
        return stats.total / stats.n

    def _record_edge(self, source: str, target: str, reward: float) -> None:
        stats = self.tables.edges.get((source, target))
        if stats is None:
            stats = self.tables.edges[(source, target)] = _EdgeStats()
        stats.n += 1
        stats.total += reward

    # ---- selection ------------------------------------------------------------------------------

    def _select(self) -> SearchState | None:
        """The leaf for a new iteration; None when every open branch is being expanded right now."""
        node = self.root
        while node.children is not None:
            open_children = [ch for ch in node.children if ch.viable and not ch.exhausted]
            if not open_children:
                return node
            selectable = [ch for ch in open_children if not ch.expanding]
            if not selectable:
                return None
            node = select_child(node, selectable, self.config.exploration)
        return None if node.expanding else node

    @staticmethod
    def _mark_in_flight(state: SearchState, delta: int) -> None:
        node: SearchState | None = state
        while node is not None:
            node.in_flight += delta
            node = node.parent

    def _begin(self) -> _Iteration | None:
        leaf = self._select()
        if leaf is None:
            return None
        self._started += 1
        self._mark_in_flight(leaf, 1)
        if leaf.children is None:
            leaf.expanding = True  # claimed: no other iteration may select it until this one is done
        return _Iteration(leaf)

    # ---- one round: plan, run, apply ------------------------------------------------------------

    async def _plan(self, iterations: list[_Iteration]) -> None:
        """Give each iteration its next jobs, or mark it done when it has nothing more to do."""
        config, session = self.config, self.session
        asking: list[_Iteration] = []
        for it in iterations:
            it.jobs, it.options = [], []
            if it.start is None:  # expansion
                if it.leaf.children is None and it.leaf.steps < config.max_path_length:
                    asking.append(it)
                else:
                    it.done = True  # a depth limit (or no open child): this state is final
            elif (
                it.steps >= config.max_rollout_depth
                or len(it.path) - 1 >= config.max_path_length
                or session.out_of_budget() is not None
            ):
                it.done = True
            else:
                asking.append(it)
        if not asking:
            return
        found = await self._successors(
            [
                (it.leaf.technique, it.leaf.code) if it.start is None else (it.technique, it.code)
                for it in asking
            ]
        )
        # Decisions in start order: the rollout's random draws do not depend on timing.
        for it, options in zip(asking, found, strict=True):
            if it.start is None:
                leaf = it.leaf
                it.options = options
                it.jobs = [
                    self._job(
                        o.technique,
                        leaf.code,
                        [*leaf.path, o.technique],
                        o,
                        "expansion",
                        leaf.candidate_index,
                    )
                    for o in options
                ]
                continue
            if not options:
                it.done = True  # dead end in the graph
                continue
            if self.rng.random() < config.epsilon:
                option = options[self.rng.randrange(len(options))]
            else:
                penalty, technique, path = config.revisit_penalty, it.technique, it.path
                option = max(
                    options, key=lambda o: self._edge_q(technique, o) - penalty * path.count(o.technique)
                )
            it.options = [option]
            it.jobs = [
                self._job(
                    option.technique,
                    it.code,
                    [*it.path, option.technique],
                    option,
                    "rollout",
                    it.parent_index,
                )
            ]

    def _apply_expansion(self, it: _Iteration, candidates: list[Candidate]) -> None:
        leaf = it.leaf
        weights = priors(it.options, self.config.prior)
        children = []
        # A batch cut short by a budget yields candidates for a prefix of the options only.
        for order, (option, prior, candidate) in enumerate(
            zip(it.options, weights, candidates, strict=False)
        ):
            self._record_edge(leaf.technique, option.technique, candidate.reward)
            children.append(SearchState.child(leaf, option.technique, candidate, order, prior))
        leaf.children = children
        leaf.expanding = False
        open_children = [ch for ch in children if ch.viable]
        if not open_children:
            it.done = True  # a dead end, or every successor failed: this state is final
            return
        start = select_child(leaf, open_children, self.config.exploration)
        start.in_flight += 1
        it.start = start
        it.rewards = [start.reward]
        it.technique, it.code, it.path, it.parent_index = (
            start.technique,
            start.code,
            list(start.path),
            start.candidate_index,
        )

    def _apply_step(self, it: _Iteration, candidates: list[Candidate]) -> None:
        if not candidates:
            it.done = True  # a budget ran out before this step
            return
        option, candidate = it.options[0], candidates[0]
        self._record_edge(it.technique, option.technique, candidate.reward)
        it.rewards.append(candidate.reward)
        if not candidate.passed or candidate.code is None:
            it.done = True  # a failed step ends the rollout
            return
        it.technique, it.code, it.path, it.parent_index = (
            option.technique,
            candidate.code,
            [*it.path, option.technique],
            candidate.index,
        )
        it.steps += 1
        if it.steps >= self.config.max_rollout_depth:
            it.done = True

    async def _round(self, iterations: list[_Iteration]) -> None:
        """Run every planned job as one batch and hand each iteration its candidates, in start order."""
        jobs = [job for it in iterations for job in it.jobs]
        candidates = await self.session.run_batch(jobs)
        # run_batch drops jobs only at the end of the batch (budgets), so positions line up.
        position = 0
        for it in iterations:
            mine = candidates[position : position + len(it.jobs)]
            position += len(it.jobs)
            if it.start is None:
                self._apply_expansion(it, mine)
            else:
                self._apply_step(it, mine)

    # ---- back-up --------------------------------------------------------------------------------

    def _value(self, rewards: list[float]) -> float:
        return backed_up_value(rewards, self.config.backprop)

    async def _complete(self, it: _Iteration) -> None:
        """Back up a finished iteration, take its virtual loss back, and count it."""
        if it.start is not None:
            self._mark_in_flight(it.start, -1)
            backup(it.start, self._value(it.rewards))
        else:
            leaf = it.leaf
            leaf.expanding = False
            self._mark_in_flight(leaf, -1)
            failed = [ch.reward for ch in leaf.children or []]
            rewards = [leaf.reward, max(failed)] if failed else [leaf.reward]
            mark_exhausted(leaf)
            backup(leaf, self._value(rewards))
        self.session.iterations += 1
        await self.session.emit("iteration", iteration=self.session.iterations)

    async def _settle(self, active: list[_Iteration]) -> list[_Iteration]:
        """Complete the finished iterations (in start order); return those still in flight."""
        settled: list[_Iteration] = []
        for it in active:
            if it.done:
                await self._complete(it)
            else:
                settled.append(it)
        return settled

    def _fill(self, active: list[_Iteration]) -> list[_Iteration]:
        """Start new iterations while slots, rollouts and budgets allow; return them."""
        started: list[_Iteration] = []
        while (
            len(active) + len(started) < self.config.rollouts_in_flight
            and self._started < self.config.rollouts
            and self.session.out_of_budget() is None
            and not self.root.exhausted
        ):
            it = self._begin()
            if it is None:
                break  # everything open is being expanded: wait for a round
            started.append(it)
        return started

    async def run(self) -> SearchResult:
        """Search until the rollouts, a budget or the graph is exhausted; return the best verified code."""
        session = self.session
        await session.emit("started")
        active: list[_Iteration] = []
        while True:
            # Plan until every iteration in flight has a job: planning can finish iterations (a
            # budget, a dead end), which frees slots for new ones, which need planning in turn.
            unplanned = active
            while True:
                await self._plan(unplanned)
                active = await self._settle(active)
                started = self._fill(active)
                if not started:
                    break
                active.extend(started)
                unplanned = started
            if not active:
                break
            await self._round(active)
            active = await self._settle(active)
        stop = session.out_of_budget() or ("exhausted" if self.root.exhausted else "completed")
        return await session.finish(stop)
