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
from search.policy import StepPolicy
from search.protocols import INITIAL_TECHNIQUE as S
from search.protocols import RetrievedExample
from tests.unit.search.pathworld import TASK, PathEvaluator, PathModel, code_for, path_of

GRAPH = InMemoryKnowledge(edges=[(S, "A"), (S, "B"), ("A", "C"), ("B", "C")])


@pytest.mark.parametrize("method", ["standard", "cot", "rag"])
def test_one_shot_baselines(method: str) -> None:
    model = PathModel()
    result = asyncio.run(optimize(method, TASK, GRAPH, model, PathEvaluator({method: 3.0})))
    assert len(result.candidates) == 1 and model.calls[0]["header"] == {"prompt": method, "task": TASK.id}
    assert result.best_speedup == 3.0 and result.best_path == [S]


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
