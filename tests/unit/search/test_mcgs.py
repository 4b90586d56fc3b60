"""MCGS on synthetic graphs whose reward is a known function of the technique path."""

from __future__ import annotations

import asyncio
import math
import threading
from typing import Any

import pytest

from search.baselines import optimize
from search.engine import SearchConfig, SearchEvent, SearchResult, SearchSession
from search.inmemory import InMemoryKnowledge
from search.mcgs import MCGSConfig, MonteCarloGraphSearch, SearchState, expected_reward, p_ucb, select_child
from search.mcts_rag import MCTSRAGConfig
from search.policy import StepPolicy
from search.protocols import INITIAL_TECHNIQUE as S
from search.protocols import SuccessorOption
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


@pytest.mark.parametrize("in_flight", [1, 4])
def test_finds_the_known_optimum(in_flight: int) -> None:
    evaluator = PathEvaluator(TRAP_FACTORS, broken=frozenset({"X"}))
    result = run(TRAP, evaluator, rollouts=40, max_path_length=4, seed=3, rollouts_in_flight=in_flight)
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


@pytest.mark.parametrize("in_flight", [1, 4])
@pytest.mark.parametrize("budget", [1, 5, 7, 12])
def test_evaluation_budget_is_exact(budget: int, in_flight: int) -> None:
    evaluator = PathEvaluator(TRAP_FACTORS, broken=frozenset({"X"}))
    result = run(
        TRAP,
        evaluator,
        rollouts=100,
        evaluation_budget=budget,
        generation_concurrency=4,
        rollouts_in_flight=in_flight,
    )
    assert result.evaluations_used == budget == len(evaluator.evaluated)
    assert sum(1 for c in result.candidates if c.evaluation is not None) == budget
    assert result.stop_reason == "evaluation_budget"


@pytest.mark.parametrize("in_flight", [1, 4])
@pytest.mark.parametrize("budget", [15, 44, 45, 46, 100])
def test_token_budget_is_exact(budget: int, in_flight: int) -> None:
    model = PathModel(prompt_tokens=10, completion_tokens=5)
    result = run(
        TRAP,
        PathEvaluator(TRAP_FACTORS),
        model,
        rollouts=100,
        token_budget=budget,
        generation_concurrency=1,
        rollouts_in_flight=in_flight,
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


@pytest.mark.parametrize(("penalty", "expected"), [(0.0, ["R", "P"]), (100.0, ["R", "R"])])
def test_learned_q_and_the_revisit_penalty_steer_rollouts(penalty: float, expected: list[str]) -> None:
    # Graph order puts R (x1.01) before P (x2), so only what the search learned can pick P.
    graph = {S: ["P"], "P": ["R", "P"], "R": []}
    evaluator = PathEvaluator({"P": 2.0, "R": 1.01})
    result = run(
        graph,
        evaluator,
        rollouts=2,
        max_rollout_depth=1,
        epsilon=0.0,
        revisit_penalty=penalty,
        rollouts_in_flight=1,
    )
    # Iteration 1: expand the root (P: 2), roll out one step from P. Nothing is known of P->R or P->P
    # (no examples: both -1), so graph order picks R (2.02). Iteration 2: expand P (P/R 2.02, P/P 4),
    # start from P/P (best own reward), roll out from it: learned Q(P,R) = 2.02, Q(P,P) = 4, and P is
    # on the path twice: lambda 0 -> P (4 > 2.02); lambda 100 -> 4 - 200 < 2.02 -> R.
    rollout = [c for c in result.candidates if c.phase == "rollout"]
    assert [c.technique for c in rollout] == expected
    assert rollout[1].path == [S, "P", "P", expected[1]]


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


@pytest.mark.parametrize("in_flight", [1, 4])
def test_same_seed_same_candidates_despite_concurrency(in_flight: int) -> None:
    settings: dict[str, Any] = {
        "rollouts": 12,
        "seed": 11,
        "epsilon": 0.5,
        "generation_concurrency": 4,
        "evaluation_concurrency": 3,
        "rollouts_in_flight": in_flight,
    }
    runs = []
    for jitter_seed in (1, 2):
        # Random model and evaluation durations: concurrent calls finish in different orders.
        model = PathModel(jitter_s=0.003, seed=jitter_seed)
        evaluator = PathEvaluator(
            TRAP_FACTORS, broken=frozenset({"X"}), jitter_s=0.003, seed=jitter_seed + 10
        )
        runs.append((run(TRAP, evaluator, model, **settings), model))
    (first, m1), (second, m2) = runs
    assert _trace(first) == _trace(second)
    assert (first.stop_reason, first.iterations) == (second.stop_reason, second.iterations)
    assert [c["seed"] for c in m1.calls] == [c["seed"] for c in m2.calls]
    assert len({c["seed"] for c in m1.calls}) == len(m1.calls)  # every call samples with its own seed


def test_one_in_flight_is_the_sequential_search() -> None:
    # Recorded from the sequential implementation (before iterations could run concurrently):
    # (phase, path, parent candidate) of every candidate.
    result = run(
        TRAP,
        PathEvaluator(TRAP_FACTORS, broken=frozenset({"X"})),
        rollouts=6,
        seed=5,
        epsilon=0.5,
        max_path_length=4,
        rollouts_in_flight=1,
    )
    assert [(c.phase[0], "/".join(c.path[1:]), c.parent_index) for c in result.candidates] == [
        ("e", "A", None),
        ("e", "B", None),
        ("e", "C", None),
        ("r", "A/A2", 0),
        ("e", "B/D", 1),
        ("e", "B/X", 1),
        ("r", "B/D/E", 4),
        ("r", "B/D/E/E", 6),
        ("e", "C/X", 2),
        ("e", "B/D/E", 4),
        ("e", "B/D/B", 4),
        ("r", "B/D/E/E", 9),
        ("e", "B/D/B/D", 10),
        ("e", "B/D/B/X", 10),
        ("e", "B/D/E/E", 9),
    ]
    assert (result.stop_reason, result.iterations) == ("completed", 6)


def test_paper_preset_by_hand() -> None:
    # Worked out by hand with the paper's P-UCB, Q + sqrt(2 ln N(parent) / N(s)), independently of any
    # recorded output. Rewards are path speedups (all >= 1): A 4, A/A1 2.5, A/A1/A2 2, B 2, B/B1 2.88,
    # B/B1/B2 2.88. Iteration 4 is decided by the exploration constant: with c = 1 it would pick A.
    graph = {S: ["A", "B"], "A": ["A1"], "A1": ["A2"], "A2": [], "B": ["B1"], "B1": ["B2"], "B2": []}
    evaluator = PathEvaluator({"A": 4.0, "A1": 0.625, "A2": 0.8, "B": 2.0, "B1": 1.44, "B2": 1.0})
    config = MCGSConfig(preset="paper", rollouts=5, epsilon=0.0, max_rollout_depth=1)
    assert (config.prior, config.exploration, config.examples_per_step, config.rollouts_in_flight) == (
        "uniform",
        math.sqrt(2),
        1,
        1,
    )
    session = SearchSession("regraph-mcgs", TASK, StepPolicy(PathModel(), TASK), evaluator, config)
    search = MonteCarloGraphSearch(session, knowledge(graph), config)
    result = asyncio.run(search.run())
    # 1: expand the root (c0 A 4, c1 B 2); start at the unvisited child with the best reward, A; roll
    #    out A1 (c2, 2.5); back up max(4, 2.5) = 4.  Root N=1.
    # 2: B is unvisited: expand it (c3 B/B1 2.88), roll out from B1 to B2 (c4, 2.88); back up 2.88.  N=2.
    # 3: A = 4 + sqrt(2 ln 2 / 1) = 5.177, B = 2.88 + 1.177 = 4.057 -> A; expand A (c5 A/A1 2.5), roll
    #    out from A1 to A2 (c6, 2); back up max(2.5, 2) = 2.5, so Q(A) = 6.5 / 2 = 3.25.  N=3.
    # 4: A = 3.25 + sqrt(2 ln 3 / 2) = 3.25 + 1.048 = 4.298; B = 2.88 + sqrt(2 ln 3 / 1) = 2.88 + 1.482
    #    = 4.362: B, although Q(A) > Q(B) (with c = 1 instead: A 3.991 > B 3.928, and c7 would be
    #    A/A1/A2); down to B1, expand it (c7 B/B1/B2 2.88), B2 has no successors; back up 2.88.  N=4.
    # 5: A = 3.25 + sqrt(2 ln 4 / 2) = 4.427, B = 2.88 + 1.177 = 4.057 -> A; down to A1, expand it
    #    (c8 A/A1/A2 2), A2 has no successors; back up 2.
    assert [(c.phase[0], "/".join(c.path[1:]), c.parent_index) for c in result.candidates] == [
        ("e", "A", None),
        ("e", "B", None),
        ("r", "A/A1", 0),
        ("e", "B/B1", 1),
        ("r", "B/B1/B2", 3),
        ("e", "A/A1", 0),
        ("r", "A/A1/A2", 5),
        ("e", "B/B1/B2", 3),
        ("e", "A/A1/A2", 5),
    ]
    assert [c.reward for c in result.candidates] == pytest.approx(
        [4.0, 2.0, 2.5, 2.88, 2.88, 2.5, 2.0, 2.88, 2.0]
    )
    a, b = search.root.children  # type: ignore[misc]
    assert (search.root.visits, a.visits, b.visits, result.iterations) == (5, 3, 2, 5)
    assert (a.value_sum, b.value_sum) == pytest.approx((8.5, 5.76))


def test_paper_preset_refuses_settings_that_contradict_it() -> None:
    with pytest.raises(ValueError, match="preset 'paper' fixes prior='uniform'"):
        MCGSConfig(preset="paper", prior="edge")
    with pytest.raises(ValueError, match="rollouts_in_flight=1"):
        MCGSConfig(preset="paper", rollouts_in_flight=4)
    ours = MCGSConfig()
    assert (ours.preset, ours.prior, ours.examples_per_step, ours.rollouts_in_flight) == (
        "ours",
        "edge",
        2,
        4,
    )
    # A dumped config validates back to itself (the runner and the API round-trip settings).
    paper = MCGSConfig(preset="paper", rollouts=3)
    assert MCGSConfig.model_validate(paper.model_dump()) == paper


# Four branches from the initial node, each a chain: after the first expansion every iteration
# submits one job per round, so only iterations running side by side can overlap model and executor.
CHAINS = {
    S: ["A", "B", "C", "D"],
    **{f"{b}{i}" if i else b: [f"{b}{i + 1}"] for b in "ABCD" for i in range(4)},
}
CHAIN_FACTORS = {"A": 1.4, "B": 1.3, "C": 1.2, "D": 1.1}


def test_concurrent_iterations_spread_over_the_tree() -> None:
    result = run(CHAINS, PathEvaluator(CHAIN_FACTORS), rollouts=4, rollouts_in_flight=4, epsilon=0.0)
    first, second = result.candidates[:4], result.candidates[4:8]
    assert [c.path[1:] for c in first] == [["A"], ["B"], ["C"], ["D"]]
    # Round two: the rollout from A and the expansions of B, C and D, side by side (virtual loss
    # steers the later selections away from A, and a state being expanded is not selected again).
    assert [c.path[1:] for c in second] == [["A", "A1"], ["B", "B1"], ["C", "C1"], ["D", "D1"]]
    assert [c.phase for c in second] == ["rollout", "expansion", "expansion", "expansion"]
    assert result.iterations == 4


@pytest.mark.parametrize(("in_flight", "overlaps"), [(1, False), (4, True)])
def test_iterations_in_flight_overlap_generation_with_evaluation(in_flight: int, overlaps: bool) -> None:
    model = PathModel(jitter_s=0.004, seed=1)
    evaluator = PathEvaluator(CHAIN_FACTORS, jitter_s=0.004, seed=2, model=model)
    result = run(CHAINS, evaluator, model, rollouts=8, rollouts_in_flight=in_flight, generation_concurrency=4)
    assert result.evaluations_used > 8
    # Beyond the first expansion (whose four siblings overlap either way), a candidate is evaluated
    # while the model writes another only when several iterations are in flight.
    deeper = [path for path in evaluator.overlapped if len(path) >= 2]
    assert bool(deeper) is overlaps
    assert evaluator.max_in_flight == 1  # evaluation_concurrency=1: the executor is never shared


def _states(root: SearchState) -> list[SearchState]:
    found, stack = [], [root]
    while stack:
        state = stack.pop()
        found.append(state)
        stack.extend(state.children or [])
    return found


@pytest.mark.parametrize("in_flight", [2, 8])
def test_no_state_is_expanded_twice_and_every_visit_is_backed_up(in_flight: int) -> None:
    evaluator = PathEvaluator(TRAP_FACTORS, broken=frozenset({"X"}), jitter_s=0.001)
    config = MCGSConfig(rollouts=30, max_path_length=5, seed=2, rollouts_in_flight=in_flight)
    session = SearchSession("regraph-mcgs", TASK, StepPolicy(PathModel(), TASK), evaluator, config)
    search = MonteCarloGraphSearch(session, knowledge(TRAP), config)
    result = asyncio.run(search.run())
    expansions = [(c.parent_index, c.technique) for c in result.candidates if c.phase == "expansion"]
    assert len(expansions) == len(set(expansions))
    assert result.iterations <= 30 and result.stop_reason in {"completed", "exhausted"}
    # Every iteration was backed up once through the root, and no virtual loss is left behind.
    assert search.root.visits == result.iterations
    assert all(s.in_flight == 0 and not s.expanding for s in _states(search.root))
    assert result.best_reward == max(c.reward for c in result.candidates if c.passed)


def _tree_after(backprop: str, rollouts: int) -> MonteCarloGraphSearch:
    # A looks best on its own (x5) but every step after it fails; B is modest (x2) and leads to Y (x1.5).
    graph = {S: ["A", "B"], "A": ["F"], "B": ["Y"], "Y": []}
    evaluator = PathEvaluator({"A": 5.0, "B": 2.0, "Y": 1.5}, broken=frozenset({"F"}))
    config = MCGSConfig(
        rollouts=rollouts,
        backprop=backprop,  # type: ignore[arg-type]
        epsilon=0.0,
        max_rollout_depth=1,
        rollouts_in_flight=1,
    )
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


@pytest.mark.parametrize(
    ("success_rate", "mean_speedup", "expected"),
    [
        (0.0, None, -1.0),  # no example sped up: every draw fails
        (1.0, None, 1.0),  # all passed, speed unknown: taken as 1x
        (0.75, 3.0, 0.75 * 3.0 - 0.25),  # faster: reward = speedup
        (0.5, 0.5, 0.5 * (0.5 - 1.0) - 0.5),  # slower than serial: reward = speedup - 1, above a failure's -1
    ],
)
def test_q_before_any_observation_is_the_expected_hierarchical_reward(
    success_rate: float, mean_speedup: float | None, expected: float
) -> None:
    option = SuccessorOption(
        technique="T", n_examples=4, success_rate=success_rate, mean_speedup=mean_speedup
    )
    assert expected_reward(option) == pytest.approx(expected)


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


class _ThreadRecordingKnowledge:
    """The TRAP graph, recording which thread answers each query; `blocking` as a database says."""

    def __init__(self, blocking: bool) -> None:
        self.inner = knowledge(TRAP)
        self.blocking = blocking
        self.threads: set[int] = set()

    def successors(self, technique: str, code: str, k: int) -> Any:
        self.threads.add(threading.get_ident())
        return self.inner.successors(technique, code, k)

    def similar_examples(self, code: str, k: int) -> Any:
        self.threads.add(threading.get_ident())
        return self.inner.similar_examples(code, k)


# Every method that asks the knowledge source: the graph searches its successors, the RAG ones its
# similar examples.
ASKING_METHODS: dict[str, SearchConfig] = {
    "regraph-mcgs": MCGSConfig(rollouts=6, seed=1),
    "regraph": SearchConfig(seed=1, attempts=2),
    "rag": SearchConfig(seed=1),
    "mcts-rag": MCTSRAGConfig(rollouts=2, branching=2, max_rollout_depth=2, rag_examples=1),
}


@pytest.mark.parametrize("method", list(ASKING_METHODS))
@pytest.mark.parametrize("blocking", [True, False])
def test_only_a_blocking_knowledge_source_is_queried_in_worker_threads(blocking: bool, method: str) -> None:
    source = _ThreadRecordingKnowledge(blocking)
    loop_threads: set[int] = set()

    def on_event(_: SearchEvent) -> None:
        loop_threads.add(threading.get_ident())

    evaluator = PathEvaluator(TRAP_FACTORS, broken=frozenset({"X"}))
    config = ASKING_METHODS[method]
    result = asyncio.run(optimize(method, TASK, source, PathModel(), evaluator, config, on_event))
    assert result.candidates and source.threads and len(loop_threads) == 1
    if blocking:
        assert not (source.threads & loop_threads)  # every query left the event loop's thread
    else:
        assert source.threads == loop_threads  # answered inline: no thread hop per query
    assert InMemoryKnowledge.blocking is False
