"""MCGS on synthetic graphs whose reward is a known function of the technique path."""

from __future__ import annotations

import asyncio
import math
from typing import Any

import pytest

from search.baselines import optimize
from search.engine import SearchEvent, SearchResult, SearchSession
from search.inmemory import InMemoryKnowledge
from search.mcgs import MCGSConfig, MonteCarloGraphSearch, SearchState, p_ucb, select_child
from search.policy import StepPolicy
from search.protocols import INITIAL_TECHNIQUE as S
from tests.unit.search.pathworld import TASK, PathEvaluator, PathModel, best_verified, path_of

# A graph where the greedy first step (A, x3) leads nowhere good and the optimum is three steps deep.
TRAP = {
    S: ["A", "B", "C"],
    "A": ["A2", "X"],
    "B": ["D", "X"],
    "C": ["X"],
    "D": ["E", "B"],  # D -> B closes a cycle
    "E": ["E"],  # a self loop
    "A2": [],  # a dead end
}
TRAP_FACTORS = {"A": 3.0, "A2": 1.1, "B": 1.2, "C": 0.5, "D": 4.0, "E": 3.0, "X": 10.0}


def knowledge(edges: dict[str, list[str]]) -> InMemoryKnowledge:
    return InMemoryKnowledge(edges=[(s, t) for s, targets in edges.items() for t in targets])


def run(
    edges: dict[str, list[str]],
    evaluator: PathEvaluator,
    model: PathModel | None = None,
    events: list[SearchEvent] | None = None,
    **settings: Any,
) -> SearchResult:
    config = MCGSConfig(**settings)
    return asyncio.run(
        optimize(
            "regraph-mcgs",
            TASK,
            knowledge(edges),
            model or PathModel(),
            evaluator,
            config,
            events.append if events is not None else None,
        )
    )


def test_finds_the_known_optimum() -> None:
    evaluator = PathEvaluator(TRAP_FACTORS, broken=frozenset({"X"}))
    result = run(TRAP, evaluator, rollouts=40, max_path_length=4, seed=3)
    optimum = best_verified(evaluator, TRAP, max_steps=4)
    assert result.best_reward == pytest.approx(optimum)
    assert result.best_code is not None and result.best_path is not None
    assert [S, *path_of(result.best_code)] == result.best_path
    assert evaluator.score(result.best_path[1:]) == (True, pytest.approx(optimum))
    # X would be the best speedup of all, but it fails its tests: only verified code may win.
    assert all("X" not in c.path for c in result.candidates if c.index == result.best_index)
    assert any(c.technique == "X" and not c.passed for c in result.candidates)


def test_best_is_the_best_passing_candidate() -> None:
    evaluator = PathEvaluator(TRAP_FACTORS, broken=frozenset({"X"}))
    result = run(TRAP, evaluator, rollouts=6, seed=1)
    passing = [c for c in result.candidates if c.passed]
    best = max(passing, key=lambda c: c.reward)
    assert result.best_reward == best.reward and result.best_index == best.index
    assert result.best_speedup == best.evaluation.speedup  # type: ignore[union-attr]


@pytest.mark.parametrize("budget", [1, 5, 7, 12])
def test_evaluation_budget_is_exact(budget: int) -> None:
    evaluator = PathEvaluator(TRAP_FACTORS, broken=frozenset({"X"}))
    result = run(TRAP, evaluator, rollouts=100, evaluation_budget=budget, generation_concurrency=4)
    assert result.evaluations_used == budget == len(evaluator.evaluated)
    assert sum(1 for c in result.candidates if c.evaluation is not None) == budget
    assert result.stop_reason == "evaluation_budget"


@pytest.mark.parametrize("budget", [15, 44, 45, 46, 100])
def test_token_budget_is_exact(budget: int) -> None:
    model = PathModel(prompt_tokens=10, completion_tokens=5)
    result = run(
        TRAP, PathEvaluator(TRAP_FACTORS), model, rollouts=100, token_budget=budget, generation_concurrency=1
    )
    # No call starts once the budget is spent, so exactly ceil(budget / 15) calls are made.
    assert len(model.calls) == math.ceil(budget / 15)
    assert result.tokens_used == 15 * len(model.calls)
    assert result.stop_reason == "token_budget"


def test_cycles_and_self_loops_terminate_and_repeat_with_penalty() -> None:
    cycle = {S: ["P"], "P": ["Q", "P"], "Q": ["P"]}
    evaluator = PathEvaluator({"P": 1.5, "Q": 1.1})
    result = run(cycle, evaluator, rollouts=15, max_path_length=5, max_rollout_depth=4, epsilon=0.0, seed=0)
    assert result.stop_reason in {"completed", "exhausted"}
    repeated = [c.path for c in result.candidates if len(c.path) != len(set(c.path))]
    assert repeated, "a technique may appear more than once on a path"
    assert max(len(c.path) - 1 for c in result.candidates) <= 5


def test_revisit_penalty_steers_rollouts_away_from_repeats() -> None:
    # From P the rollout can repeat P (known good) or try R; a big lambda must prefer R.
    graph = {S: ["P"], "P": ["P", "R"], "R": []}
    for penalty, expected in [(0.0, "P"), (100.0, "R")]:
        evaluator = PathEvaluator({"P": 2.0, "R": 1.01})
        result = run(graph, evaluator, rollouts=1, max_rollout_depth=1, epsilon=0.0, revisit_penalty=penalty)
        # Iteration 1: expand the root (P), then one rollout step from P.
        rollout = [c for c in result.candidates if c.phase == "rollout"]
        assert [c.technique for c in rollout] == [expected]


def test_dead_end_exhausts_the_search() -> None:
    evaluator = PathEvaluator({"A": 2.0})
    result = run({S: ["A"]}, evaluator, rollouts=10)
    assert result.stop_reason == "exhausted"
    assert result.evaluations_used == 1 and result.best_path == [S, "A"]


def test_no_successors_at_all() -> None:
    result = run({}, PathEvaluator({}), rollouts=5)
    assert result.stop_reason == "exhausted" and result.best_code is None and result.candidates == []


def test_failures_without_code_spend_no_evaluations() -> None:
    model = PathModel(lose_entry=frozenset({"B"}))
    evaluator = PathEvaluator(TRAP_FACTORS, broken=frozenset({"X"}))
    result = run(TRAP, evaluator, model, rollouts=8)
    lost = [c for c in result.candidates if c.technique == "B"]
    assert lost and all(c.evaluation is None and c.failure_kind == "entry_point_lost" for c in lost)
    assert result.evaluations_used == len(evaluator.evaluated) == len(result.candidates) - len(lost)
    assert all("B" not in c.path[:-1] for c in result.candidates)  # nothing builds on a lost step


def _trace(result: SearchResult) -> list[tuple[int, list[str], str | None, float, int | None]]:
    return [(c.index, c.path, c.code, c.reward, c.parent_index) for c in result.candidates]


def test_same_seed_same_candidates_despite_concurrency() -> None:
    settings: dict[str, Any] = {
        "rollouts": 12,
        "seed": 11,
        "epsilon": 0.5,
        "generation_concurrency": 4,
        "evaluation_concurrency": 3,
    }
    runs = []
    for jitter_seed in (1, 2):
        # Different random evaluation durations: concurrent calls finish in different orders.
        evaluator = PathEvaluator(TRAP_FACTORS, broken=frozenset({"X"}), jitter_s=0.003, seed=jitter_seed)
        model = PathModel()
        runs.append((run(TRAP, evaluator, model, **settings), model))
    (first, m1), (second, m2) = runs
    assert _trace(first) == _trace(second)
    assert [c["seed"] for c in m1.calls] == [c["seed"] for c in m2.calls]
    assert len({c["seed"] for c in m1.calls}) == len(m1.calls)  # every call samples with its own seed


def test_generation_overlaps_evaluation() -> None:
    evaluator = PathEvaluator({}, jitter_s=0.01)
    graph = {S: [f"T{i}" for i in range(8)]}
    run(graph, evaluator, rollouts=1, generation_concurrency=4, evaluation_concurrency=2)
    assert evaluator.max_in_flight == 2


def _tree_after(backprop: str, rollouts: int) -> MonteCarloGraphSearch:
    # A looks best on its own (x5) but every step after it fails; B is modest (x2) and leads to Y (x1.5).
    graph = {S: ["A", "B"], "A": ["F"], "B": ["Y"], "Y": []}
    evaluator = PathEvaluator({"A": 5.0, "B": 2.0, "Y": 1.5}, broken=frozenset({"F"}))
    config = MCGSConfig(rollouts=rollouts, backprop=backprop, epsilon=0.0, max_rollout_depth=1)  # type: ignore[arg-type]
    session = SearchSession("regraph-mcgs", TASK, StepPolicy(PathModel(), TASK), evaluator, config)
    search = MonteCarloGraphSearch(session, knowledge(graph), config)
    asyncio.run(search.run())
    return search


@pytest.mark.parametrize(("backprop", "a_value", "chosen"), [("max", 5.0, "A"), ("last", -1.0, "B")])
def test_max_and_last_backprop_differ(backprop: str, a_value: float, chosen: str) -> None:
    search = _tree_after(backprop, rollouts=2)
    a, b = search.root.children  # type: ignore[misc]
    # Iteration 1 rolls out A -> F (fails); iteration 2 expands B and rolls out from Y (3.0).
    assert (a.visits, a.q) == (1, a_value)
    assert (b.visits, b.q) == (1, 3.0)
    picked = select_child(search.root, [a, b], search.config.exploration)
    assert picked.technique == chosen


def _state(
    name: str, visits: int, value: float, prior: float = 1.0, reward: float = 0.0, order: int = 0
) -> SearchState:
    return SearchState(
        name, "", [S, name], visits=visits, value_sum=value, prior=prior, reward=reward, order=order
    )


def test_p_ucb_by_hand() -> None:
    parent = _state("root", visits=10, value=0.0)
    c = math.sqrt(2)
    one, two = _state("one", 5, 10.0), _state("two", 2, 3.0, order=1)
    # one: 2 + sqrt2*sqrt(ln 10 / 5) = 2.9597; two: 1.5 + sqrt2*sqrt(ln 10 / 2) = 3.0174
    assert p_ucb(one, 10, c) == pytest.approx(2.95970, abs=1e-4)
    assert p_ucb(two, 10, c) == pytest.approx(3.01741, abs=1e-4)
    assert select_child(parent, [one, two], c).technique == "two"
    # A prior of 1.2 on "one" lifts it to 2 + 1.2*0.95970 = 3.1516.
    one.prior = 1.2
    assert select_child(parent, [one, two], c).technique == "one"
    # Unvisited children come first, the one with the best own reward first.
    fresh_low, fresh_high = (
        _state("low", 0, 0.0, reward=1.0, order=2),
        _state("high", 0, 0.0, reward=2.0, order=3),
    )
    assert select_child(parent, [one, two, fresh_low, fresh_high], c).technique == "high"


def test_events_stream_in_order() -> None:
    events: list[SearchEvent] = []
    result = run(TRAP, PathEvaluator(TRAP_FACTORS, broken=frozenset({"X"})), events=events, rollouts=5)
    assert events[0].kind == "started" and events[-1].kind == "finished"
    assert events[-1].stop_reason == result.stop_reason
    streamed = [e.candidate.index for e in events if e.kind == "candidate" and e.candidate]
    assert streamed == [c.index for c in result.candidates] == list(range(len(result.candidates)))
    bests = [e.best_reward for e in events if e.kind == "new_best"]
    assert bests == sorted(bests) and bests[-1] == result.best_reward
    assert [e.iteration for e in events if e.kind == "iteration"] == list(range(1, result.iterations + 1))
    assert result.backends == ["test-stand-in:path-model"]
