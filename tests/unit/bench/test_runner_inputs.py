"""The runner's inputs: task selection against the split, model specs, and the in-memory graph."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from bench.runner import RunnerError, TaskSelection, knowledge_from_trajectories, model_factory, select_tasks
from bench.split import load_bench_tasks, make_split, write_split
from search.backends.replay import ReplayModel
from search.protocols import INITIAL_TECHNIQUE

REPO = Path(__file__).resolve().parents[3]
TASKS = [
    "to_upper_ascii_u8",
    "reduce_sum_f64",
    "rgb_gray_half_u8",
    "complex_dot_rows_f32",
    "black_scholes_f32",
]


@pytest.fixture()
def corpus(tmp_path: Path) -> Path:
    (tmp_path / "trajectories").mkdir()
    for task_id in TASKS:
        shutil.copytree(REPO / "regraph_data" / "tasks" / task_id, tmp_path / "tasks" / task_id)
        shutil.copy(REPO / "bench" / "trajectories" / f"{task_id}.jsonl", tmp_path / "trajectories")
    return tmp_path


def _select(corpus: Path, *names: str) -> TaskSelection:
    return select_tasks(
        list(names),
        tasks_dir=corpus / "tasks",
        trajectories_dir=corpus / "trajectories",
        split_path=corpus / "split.json",
    )


def test_eval_selection_uses_a_checked_split(corpus: Path) -> None:
    with pytest.raises(RunnerError, match="regraph bench split"):
        _select(corpus, "eval")
    tasks, _ = load_bench_tasks(corpus / "tasks", corpus / "trajectories")
    split = make_split(tasks, seed=1)
    write_split(split, corpus / "split.json")
    selection = select_tasks(
        ["eval"],
        tasks_dir=corpus / "tasks",
        trajectories_dir=corpus / "trajectories",
        split_path=corpus / "split.json",
    )
    assert [t.id for t in selection.tasks] == split.eval and selection.build_ids == split.build
    assert all(t.context.initial_code == t.task.reference_source for t in selection.tasks)
    # A task added after the split makes the split stale: the run refuses rather than mis-splitting.
    shutil.copytree(REPO / "regraph_data" / "tasks" / "sobel_mag2_u8", corpus / "tasks" / "sobel_mag2_u8")
    shutil.copy(REPO / "bench" / "trajectories" / "sobel_mag2_u8.jsonl", corpus / "trajectories")
    with pytest.raises(RunnerError, match="sobel_mag2_u8"):
        _select(corpus, "eval")


def test_explicit_and_all_selections(corpus: Path) -> None:
    selection = _select(corpus, "reduce_sum_f64,to_upper_ascii_u8")
    assert [t.id for t in selection.tasks] == ["reduce_sum_f64", "to_upper_ascii_u8"]
    assert _select(corpus, "all").tasks[0].id == "black_scholes_f32"
    with pytest.raises(RunnerError, match="no_such_task"):
        _select(corpus, "no_such_task")


def test_knowledge_graph_from_trajectories(corpus: Path) -> None:
    knowledge = knowledge_from_trajectories(
        ["rgb_gray_half_u8", "black_scholes_f32"],
        tasks_dir=corpus / "tasks",
        trajectories_dir=corpus / "trajectories",
    )
    first = knowledge.successors(INITIAL_TECHNIQUE, "int main() {}", k=5)
    assert [o.technique for o in first] == ["Parallelization"] and first[0].n_examples == 2
    reference = (corpus / "tasks" / "rgb_gray_half_u8" / "reference.cpp").read_text()
    assert reference in {e.code_before for e in first[0].examples}
    after = {o.technique for o in knowledge.successors("Parallelization", "x", k=1)}
    assert after == {"Kernel fusion", "Fast math intrinsics"}


def test_model_specs(corpus: Path, tmp_path: Path) -> None:
    factory, description = model_factory("teacher", trajectories_dir=corpus / "trajectories")
    model = factory()
    assert isinstance(model, ReplayModel) and len(model.records) == 10 and "teacher" in description
    trajectory_file = corpus / "trajectories" / "reduce_sum_f64.jsonl"
    factory, _ = model_factory(str(trajectory_file))
    from_file = factory()
    assert isinstance(from_file, ReplayModel) and len(from_file.records) == 2
    replay = tmp_path / "answers.jsonl"
    replay.write_text(json.dumps({"format": "regraph.replay/v1", "completion": "hi"}) + "\n")
    replayed = model_factory(str(replay))[0]()
    assert isinstance(replayed, ReplayModel) and replayed.records[0].completion == "hi"
    with pytest.raises(RunnerError):
        model_factory(str(tmp_path / "missing.jsonl"))
    bad = tmp_path / "role.json"
    bad.write_text('{"backend": "openai"}')
    with pytest.raises(RunnerError, match="role configuration"):
        model_factory(str(bad))
