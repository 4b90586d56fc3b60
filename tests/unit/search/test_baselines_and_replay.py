"""Baselines, the step policy's prompts, and the replay backend end to end."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import pytest

from search.backends import ChatMessage, ReplayMissError, RoleConfig, build_model
from search.backends.replay import (
    RecordingModel,
    ReplayModel,
    ReplayRecord,
    records_from_trajectories,
    write_replay,
)
from search.baselines import METHODS, optimize
from search.engine import SearchConfig
from search.errors import SearchConfigError
from search.inmemory import InMemoryKnowledge
from search.mcgs import MCGSConfig
from search.mcts_rag import MCTSRAGConfig
from search.policy import StepPolicy
from search.protocols import INITIAL_TECHNIQUE as S
from search.protocols import RetrievedExample
from tests.unit.search.pathworld import TASK, PathEvaluator, PathModel, code_for, path_of

GRAPH = InMemoryKnowledge(edges=[(S, "A"), (S, "B"), ("A", "C"), ("B", "C")])


def _example(name: str, code_before: str) -> RetrievedExample:
    return RetrievedExample(
        id=name,
        task_id=f"task_{name}",
        source_technique=S,
        target_technique="A",
        code_before=code_before,
        code_after=f"int {name}_after_marker;",
        think=f"{name} reasoning marker",
    )


# Examples whose code is more or less like the task's code (token Jaccard): "near" shares most tokens.
NEAR = _example("near", TASK.initial_code.replace("2.0f", "3.0f"))
MIDDLE = _example("middle", 'extern "C" void f(int n) { for (int i = 0; i < n; ++i) {} }')
FAR = _example("far", "struct unrelated { double q; };")
# Like the code after one MCTS-RAG rewrite (its path line names the step): closer to that code than
# NEAR is, farther from the serial reference than NEAR is.
LATER = _example("later", code_for(["mcts-rag"]).replace("2.0f", "3.0f"))
GRAPH_WITH_EXAMPLES = InMemoryKnowledge(examples=[FAR, MIDDLE, NEAR, LATER])


@pytest.mark.parametrize("method", ["standard", "cot", "rag"])
def test_one_shot_baselines(method: str) -> None:
    model = PathModel()
    result = asyncio.run(optimize(method, TASK, GRAPH, model, PathEvaluator({method: 3.0})))
    assert len(result.candidates) == 1 and model.calls[0]["header"] == {"prompt": method, "task": TASK.id}
    assert result.best_speedup == 3.0 and result.best_path == [S]


def test_rag_prompt_carries_the_most_similar_examples() -> None:
    model = PathModel()
    config = SearchConfig(rag_examples=2)
    asyncio.run(optimize("rag", TASK, GRAPH_WITH_EXAMPLES, model, PathEvaluator({"rag": 3.0}), config))
    prompt = model.calls[0]["prompt"]
    # The two most similar to the reference (Jaccard 12/14 and 12/16), most similar first; the others
    # (9/13 and 0) are left out.
    assert "near reasoning marker" in prompt and "later reasoning marker" in prompt
    assert prompt.index("near_after_marker") < prompt.index("later_after_marker")
    assert "middle_after_marker" not in prompt and "far_after_marker" not in prompt


def test_mcts_rag_searches_with_retrieved_examples_at_every_step() -> None:
    model = PathModel()
    evaluator = PathEvaluator({"mcts-rag": 2.0})
    config = MCTSRAGConfig(rollouts=2, branching=2, max_rollout_depth=2, rag_examples=1)
    result = asyncio.run(optimize("mcts-rag", TASK, GRAPH_WITH_EXAMPLES, model, evaluator, config))
    # Iteration 1: expand the root (two rewrites, x2 each), roll out two steps from the first (x4, x8).
    # Iteration 2: the root's other child is unvisited: expand it (x4, x4) and roll out (x8, x16).
    assert [(c.phase[0], len(c.path) - 1, c.parent_index) for c in result.candidates] == [
        ("e", 1, None),
        ("e", 1, None),
        ("r", 2, 0),
        ("r", 3, 2),
        ("e", 2, 1),
        ("e", 2, 1),
        ("r", 3, 4),
        ("r", 4, 6),
    ]
    assert result.best_speedup == pytest.approx(16.0) and result.iterations == 2
    assert all(c.technique is None and set(c.path[1:]) == {"rewrite"} for c in result.candidates)
    headers = [call["header"] for call in model.calls]
    assert headers[0] == {"prompt": "mcts-rag", "step": 1, "task": TASK.id}
    assert [h["step"] for h in headers] == [1, 1, 2, 3, 2, 2, 3, 4]
    # Every prompt carries the example most similar to *its own* code, and only that one
    # (rag_examples=1): NEAR for the serial reference, LATER for code already rewritten.
    for call in model.calls:
        shown, hidden = ("near", "later") if call["header"]["step"] == 1 else ("later", "near")
        assert f"{shown} reasoning marker" in call["prompt"] and f"{shown}_after_marker" in call["prompt"]
        assert f"{hidden}_after_marker" not in call["prompt"] and "middle_after_marker" not in call["prompt"]
    # Each rewrite of one expansion is sampled with its own seed.
    assert len({call["seed"] for call in model.calls}) == len(model.calls)


def test_mcts_rag_stops_at_a_failed_step_and_keeps_the_budget() -> None:
    evaluator = PathEvaluator({}, broken=frozenset({"mcts-rag"}))
    config = MCTSRAGConfig(rollouts=5, branching=3, evaluation_budget=7)
    result = asyncio.run(optimize("mcts-rag", TASK, GRAPH_WITH_EXAMPLES, PathModel(), evaluator, config))
    # Every rewrite fails: the root's three children are terminal, so the tree is exhausted at once.
    assert len(result.candidates) == 3 and result.best_code is None
    assert result.stop_reason == "exhausted" and result.evaluations_used == 3
    budgeted = asyncio.run(
        optimize(
            "mcts-rag",
            TASK,
            GRAPH_WITH_EXAMPLES,
            PathModel(),
            PathEvaluator({"mcts-rag": 1.5}),
            MCTSRAGConfig(rollouts=50, evaluation_budget=7),
        )
    )
    assert budgeted.evaluations_used == 7 and budgeted.stop_reason == "evaluation_budget"


def test_regraph_walk_retries_failed_steps() -> None:
    model = PathModel()
    evaluator = PathEvaluator({"A": 2.0, "B": 2.0, "C": 1.5}, broken=frozenset({"A"}))
    result = asyncio.run(optimize("regraph", TASK, GRAPH, model, evaluator, SearchConfig(seed=4, attempts=5)))
    # Every accepted step passed; failed tries (A) were resampled; the walk ends at C's dead end.
    assert result.best_path == [S, "B", "C"] and result.stop_reason == "exhausted"
    first_steps = [c for c in result.candidates if len(c.path) == 2]
    assert 1 <= len(first_steps) <= 5 and first_steps[-1].technique == "B"
    assert all(c.technique == "A" and not c.passed for c in first_steps[:-1])


def test_regraph_gives_up_after_attempts() -> None:
    evaluator = PathEvaluator({}, broken=frozenset({"A", "B"}))
    result = asyncio.run(optimize("regraph", TASK, GRAPH, PathModel(), evaluator, SearchConfig(attempts=3)))
    assert len(result.candidates) == 3 and result.best_code is None


def test_unknown_method() -> None:
    assert "regraph-mcgs" in METHODS
    with pytest.raises(SearchConfigError):
        asyncio.run(optimize("beam", TASK, GRAPH, PathModel(), PathEvaluator({})))


def test_step_prompt_carries_header_contract_examples_and_code() -> None:
    example = RetrievedExample(
        id="e1",
        task_id="other",
        source_technique=S,
        target_technique="Tiling",
        code_before="int before_marker;",
        code_after="int after_marker;",
        think="tile to reuse data",
        speedup=2.5,
    )
    messages = StepPolicy(PathModel(), TASK).step_messages(TASK.initial_code, "Tiling", [example], step=1)
    user = messages[-1].content
    assert user.startswith(
        '<!-- regraph: {"prompt":"step","step":1,"task":"synthetic","technique":"Tiling"} -->'
    )
    for needle in (
        "before_marker",
        "after_marker",
        "tile to reuse data",
        "x2.50",
        'extern "C" void f(int n, float* x)',
        "HOST pointer",
        TASK.initial_code.strip(),
        "serial C++ reference",
    ):
        assert needle in user


def _trajectory_file(tmp_path: Path) -> Path:
    steps = [("A", 2.0), ("C", 3.0)]
    line = {
        "format": "regraph.trajectory/v1",
        "task_id": TASK.id,
        "model": "teacher-x",
        "steps": [
            {"method": m, "think": f"do {m}", "detail": "", "code": code_for([m for m, _ in steps[: i + 1]])}
            for i, (m, _) in enumerate(steps)
        ],
    }
    path = tmp_path / "synthetic.jsonl"
    path.write_text(json.dumps(line) + "\n")
    return path


def test_replay_from_trajectories_runs_the_search_end_to_end(tmp_path: Path) -> None:
    trajectories = _trajectory_file(tmp_path)
    replay = tmp_path / "replay.jsonl"
    assert write_replay(records_from_trajectories(trajectories.read_text().splitlines()), replay) == 2
    model = build_model(RoleConfig(backend="replay", replay_path=replay))
    evaluator = PathEvaluator({"A": 2.0, "C": 3.0, "B": 9.0})
    result = asyncio.run(optimize("regraph-mcgs", TASK, GRAPH, model, evaluator, MCGSConfig(rollouts=5)))
    # The teacher never took B, so that step is a replay miss (no evaluation); A then C is replayed.
    assert result.best_path == [S, "A", "C"] and result.best_speedup == pytest.approx(6.0)
    assert path_of(result.best_code or "") == ["A", "C"]
    assert result.backends == ["replay:trajectory:teacher-x"]
    misses = [c for c in result.candidates if c.failure_kind == "replay_miss"]
    assert misses and all(c.technique == "B" and c.evaluation is None for c in misses)


def test_replay_matching_precedence_and_miss() -> None:
    messages = [
        ChatMessage(role="user", content='<!-- regraph: {"prompt":"step","task":"t","technique":"A"} -->\nhi')
    ]
    from search.backends.replay import request_key

    model = ReplayModel(
        [
            ReplayRecord(completion="catch-all"),
            ReplayRecord(match={"task": "t"}, completion="task only"),
            ReplayRecord(match={"task": "t", "technique": "A"}, completion="task+technique"),
            ReplayRecord(match={"task": "t", "technique": "A"}, completion="later duplicate"),
            ReplayRecord(key=request_key(messages), completion="exact"),
        ]
    )
    answer = asyncio.run(model.complete(messages, max_tokens=9, temperature=1.0, seed=None))
    assert answer.text == "exact" and answer.backend == "replay"
    model.records.pop()
    assert model.find(messages).completion == "task+technique"
    other = [
        ChatMessage(role="user", content='<!-- regraph: {"prompt":"step","task":"u","technique":"A"} -->')
    ]
    assert model.find(other).completion == "catch-all"
    model.records.pop(0)
    with pytest.raises(ReplayMissError):
        model.find(other)


def test_record_then_replay(tmp_path: Path) -> None:
    record_path = tmp_path / "recorded.jsonl"
    first = asyncio.run(
        optimize(
            "regraph-mcgs",
            TASK,
            GRAPH,
            RecordingModel(PathModel(), record_path),
            PathEvaluator({"A": 2.0}),
            MCGSConfig(rollouts=3),
        )
    )
    replayed = asyncio.run(
        optimize(
            "regraph-mcgs",
            TASK,
            GRAPH,
            ReplayModel.from_file(record_path),
            PathEvaluator({"A": 2.0}),
            MCGSConfig(rollouts=3),
        )
    )
    assert [c.code for c in replayed.candidates] == [c.code for c in first.candidates]
    assert replayed.tokens_used == first.tokens_used
    assert {c.backend for c in replayed.candidates} == {"replay"}
