"""Construction relabels on everything a step carries, describes what it creates, asks the judge
through the `judge` model role (the local OpenAI-compatible test server stands in for the LLM), and
never half-writes a trajectory on bad input."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from graphdb.models import RelabelOutcome
from graphdb.store import GraphStore
from search.backends.config import ModelRoles, RoleConfig
from search.embeddings import Embedder
from search.relabel.construction import (
    GraphBuilder,
    SourcedTrajectory,
    TaskDirectoryReferences,
    Trajectory,
    TrajectoryFormatError,
)
from search.relabel.relabeler import MAX_DESCRIPTION_CHARS, RelabelConfig, Relabeler, build_relabeler
from search.relabel.scoring import load_model
from tests.support.openai_test_server import OpenAITestServer

# Building embeds code and labels: give a loaded shared machine room (it takes seconds idle).
pytestmark = pytest.mark.timeout(1200)

ROOT = Path(__file__).resolve().parents[3]
TASKS = ROOT / "regraph_data" / "tasks"
KAHAN = "Each thread keeps a running compensation term so that the float sum loses fewer low bits."


def real_steps(task: str, count: int) -> list[dict[str, Any]]:
    line = (ROOT / "bench" / "trajectories" / f"{task}.jsonl").read_text().splitlines()[0]
    steps: list[dict[str, Any]] = json.loads(line)["steps"][:count]
    return steps


def sourced(task: str, steps: list[dict[str, Any]]) -> SourcedTrajectory:
    raw = {"format": "regraph.trajectory/v1", "task_id": task, "model": "test-teacher", "steps": steps}
    return SourcedTrajectory(Trajectory.model_validate(raw), "test")


def build(store: GraphStore, embedder: Embedder, relabeler: Relabeler, *items: SourcedTrajectory) -> None:
    GraphBuilder(
        store=store, embedder=embedder, relabeler=relabeler, references=TaskDirectoryReferences(TASKS)
    ).build(list(items))


def test_new_techniques_get_the_step_detail_as_description_and_decisions_keep_evidence(
    store: GraphStore, embedder: Embedder
) -> None:
    steps = real_steps("reduce_sum_f64", 2)
    steps[1] = {**steps[1], "method": "Kahan compensated summation", "detail": KAHAN}
    build(store, embedder, Relabeler(store, embedder), sourced("reduce_sum_f64", steps))
    kahan = store.find_technique_by_label("Kahan compensated summation")
    assert kahan is not None and kahan.description == KAHAN and kahan.embedding is not None
    decision = next(d for d in store.list_decisions() if d.candidate == "Kahan compensated summation")
    assert decision.outcome in (RelabelOutcome.NEW, RelabelOutcome.FLAGGED)
    assert decision.evidence is not None and decision.evidence["candidates"]
    assert decision.evidence["code"]["parsed"] is True


def test_bad_input_is_flagged_or_refused_and_never_half_written(
    store: GraphStore, embedder: Embedder
) -> None:
    relabeler = Relabeler(store, embedder)
    steps = real_steps("reduce_sum_f64", 2)
    huge = "padding " * 200_000  # a 1.6 MB detail
    steps[1] = {
        **steps[1],
        "method": "Warp shuffles (__shfl_down_sync)",
        "detail": huge,
        "code": "}{ ][ not code " * 50,
    }
    build(store, embedder, relabeler, sourced("reduce_sum_f64", steps))
    decision = next(d for d in store.list_decisions() if d.candidate.startswith("Warp shuffles"))
    assert any(f.startswith("code_unparsed") for f in decision.flags)
    assert any(f.startswith("detail_oversized") for f in decision.flags)
    assert decision.id in {d.id for d in store.list_queue()}
    assert len(decision.candidate_description) <= MAX_DESCRIPTION_CHARS
    examples_before = store.counts()["examples"]
    blank = real_steps("gemm_f32", 2)
    blank[1] = {**blank[1], "method": "   "}
    with pytest.raises(TrajectoryFormatError, match="empty"):
        build(store, embedder, relabeler, sourced("gemm_f32", blank))
    assert store.counts()["examples"] == examples_before
    assert not any(t.task_id == "gemm_f32" for t in store.list_trajectories())


def test_the_judge_role_decides_undecided_names_and_its_unknown_answers_are_refused(
    store: GraphStore, embedder: Embedder, tmp_path: Path
) -> None:
    # A scorer that never decides alone, so that every new name reaches the judge.
    never = {"merge_threshold": 1.0, "new_threshold": 0.0, "margin": 1.0}
    document = load_model().to_json() | never
    # The relabeler below has no taxonomy: it is that model which must never decide alone.
    document["without_taxonomy"] = document["without_taxonomy"] | never
    model_file = tmp_path / "undecided.json"
    model_file.write_text(json.dumps(document))
    config = RelabelConfig(taxonomy="none", relabel_model=model_file)
    first = real_steps("gemm_f32", 2)
    second = real_steps("transpose_f32", 3)
    second[1] = {**second[1], "method": "Tiling through shared memory"}
    second[2] = {**second[2], "method": "Quantum tiling"}
    with OpenAITestServer() as server:
        roles = ModelRoles(judge=RoleConfig(backend="openai", base_url=server.base_url, model="test-model"))
        server.script(
            json.dumps({"existed": False, "method": first[1]["method"]}),
            json.dumps({"existed": True, "method": first[1]["method"]}),
            json.dumps({"existed": True, "method": "Warp-specialised tiling"}),
        )
        relabeler = build_relabeler(store, embedder, config=config, roles=roles)
        build(store, embedder, relabeler, sourced("gemm_f32", first), sourced("transpose_f32", second))
        prompts = [r["messages"][0]["content"] for r in server.requests]
    assert len(prompts) == 3 and "Tiling through shared memory" in prompts[1]
    by_candidate = {d.candidate: d for d in store.list_decisions()}
    merged = by_candidate["Tiling through shared memory"]
    assert (merged.outcome, merged.decided_by, merged.technique) == (
        RelabelOutcome.MERGED,
        "judge",
        first[1]["method"],
    )
    refused = by_candidate["Quantum tiling"]
    assert refused.outcome is RelabelOutcome.FLAGGED and "Warp-specialised tiling" in str(
        refused.judge_answer
    )
    assert refused.id in {d.id for d in store.list_queue()}
