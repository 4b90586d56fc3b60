"""Graph construction from hand-written trajectories, with real embeddings and the real embedded Neo4j."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from executor.static import check_source
from executor.taskformat import load_task
from graphdb.errors import TechniqueExistsError
from graphdb.models import RelabelOutcome, ReviewStatus, Technique, utc_now
from graphdb.store import GraphStore
from search.embeddings import Embedder
from search.protocols import INITIAL_TECHNIQUE
from search.relabel.construction import (
    GraphBuilder,
    GraphWriteError,
    StepCheck,
    TaskDirectoryReferences,
    TrajectoryFormatError,
    read_trajectories,
)
from search.relabel.relabeler import Relabeler
from search.relabel.scoring import ScoringModel, load_model
from search.retrieval import GraphKnowledge

TASKS = Path(__file__).resolve().parents[3] / "regraph_data" / "tasks"


def naive_code(task: str) -> str:
    path = TASKS / task / "naive.cu"
    return path.read_text() if path.exists() else "__global__ void k(float* x) { x[0] = 1; }\n"


def trajectory(task: str, methods: list[str], model: str = "human-expert") -> dict[str, Any]:
    steps = [
        {
            "method": m,
            "think": f"why {m}",
            "detail": f"apply {m}",
            "code": f"// {task} after {m} (step {i})\n" + naive_code(task),
        }
        for i, m in enumerate(methods)
    ]
    return {"format": "regraph.trajectory/v1", "task_id": task, "model": model, "steps": steps}


def write(path: Path, items: list[dict[str, Any]]) -> Path:
    path.write_text("".join(json.dumps(t) + "\n" for t in items))
    return path


def builder(store: GraphStore, embedder: Embedder, **kwargs: Any) -> GraphBuilder:
    judge = kwargs.pop("judge", None)
    return GraphBuilder(
        store=store,
        embedder=embedder,
        relabeler=Relabeler(store, embedder, judge=judge),
        references=TaskDirectoryReferences(TASKS),
        **kwargs,
    )


def test_build_merges_relabels_and_is_idempotent(
    store: GraphStore, embedder: Embedder, tmp_path: Path
) -> None:
    file = write(
        tmp_path / "t.jsonl",
        [
            trajectory("reduce_sum_f64", ["Parallelization", "Shared memory tiling", "Loop unrolling"]),
            # Other spellings of the same techniques: the taxonomy knows them, so they merge as aliases
            # ("Memory access coalescing" is an alias of the taxonomy's "Memory coalescing").
            trajectory("gemm_f32", ["Parallelisation", "Shared-memory tiling", "Memory coalescing"]),
            trajectory(
                "transpose_f32", ["Parallelization", "Memory access coalescing", "Shared memory tiling"]
            ),
        ],
    )
    progress: list[tuple[int, int]] = []
    summary = builder(store, embedder).build(
        read_trajectories([file]), lambda d, t, _o: progress.append((d, t))
    )
    assert progress == [(1, 3), (2, 3), (3, 3)]
    assert summary.trajectories_ingested == 3 and summary.examples_added == 9
    names = {t.name for t in store.list_techniques()}
    assert names == {
        INITIAL_TECHNIQUE,
        "Parallelization",
        "Shared memory tiling",
        "Loop unrolling",
        "Memory coalescing",
    }
    assert set(store.get_technique("Shared memory tiling").aliases) == {"Shared-memory tiling"}
    assert set(store.get_technique("Memory coalescing").aliases) == {"Memory access coalescing"}
    # "flagged" counts what the curator queue lists (a flagged merge too), whatever it is.
    assert summary.merges == 3 and summary.flagged == store.count_queue()
    # Techniques made by construction carry the taxonomy's description, never an empty one.
    assert all(t.description for t in store.list_techniques())
    assert store.get_transition(INITIAL_TECHNIQUE, "Parallelization").stats.n_examples == 3
    # The first step starts from the serial reference.
    first = store.list_examples(source=INITIAL_TECHNIQUE, target="Parallelization")
    assert all(e.code_before == (TASKS / e.task_id / "reference.cpp").read_text() for e in first)
    # A cycle: tiling -> coalescing -> tiling is two transitions, both kept.
    store.get_transition("Memory coalescing", "Shared memory tiling")
    # Re-ingesting adds nothing.
    again = builder(store, embedder).build(read_trajectories([file]))
    assert again.trajectories_already_ingested == 3 and again.examples_added == 0
    assert store.counts()["examples"] == 9


def test_undo_relabel_decisions_both_ways(store: GraphStore, embedder: Embedder, tmp_path: Path) -> None:
    file = write(
        tmp_path / "t.jsonl",
        [
            trajectory("reduce_sum_f64", ["Parallelization", "Shared memory tiling"]),
            trajectory("gemm_f32", ["Parallelization", "Shared-memory tiling"]),
            trajectory("transpose_f32", ["Parallelization", "Kahan compensated summation"]),
        ],
    )
    builder(store, embedder).build(read_trajectories([file]))
    merge = store.list_decisions(outcome=RelabelOutcome.MERGED)[0]
    assert merge.candidate == "Shared-memory tiling"
    assert store.get_transition("Parallelization", "Shared memory tiling").stats.n_examples == 2
    store.undo_decision(merge.id, actor="curator")
    assert store.get_transition("Parallelization", "Shared memory tiling").stats.n_examples == 1
    split = store.list_examples(source="Parallelization", target="Shared-memory tiling")
    assert [e.task_id for e in split] == ["gemm_f32"]
    assert "Shared-memory tiling" not in store.get_technique("Shared memory tiling").aliases
    new = next(d for d in store.list_decisions() if d.candidate == "Kahan compensated summation")
    assert new.outcome in (RelabelOutcome.NEW, RelabelOutcome.FLAGGED) and new.matched is not None
    store.undo_decision(new.id, actor="curator")
    assert store.find_technique_by_label("Kahan compensated summation").name == new.matched  # type: ignore[union-attr]
    live = {d.id for d in store.list_decisions()}
    assert merge.id not in live and new.id not in live
    undone = [d for d in store.list_decisions(include_undone=True) if d.undone_at is not None]
    assert {d.id for d in undone} == {merge.id, new.id} and {d.undone_by for d in undone} == {"curator"}
    assert [a.action for a in store.list_audit(target=f"decision:{merge.id}")] == ["relabel.undo"]


def test_judge_decides_undecided_names_and_unknown_answers_are_refused(
    store: GraphStore, embedder: Embedder, tmp_path: Path
) -> None:
    asked: dict[str, list[str]] = {}

    def replay_judge(candidate: str, description: str, options: list[str]) -> dict[str, Any]:
        # An LLM stand-in replaying fixed answers: one valid merge, one made-up method, else "new".
        asked[candidate] = options
        if candidate == "Memory access coalescing":
            return {"existed": True, "method": "memory COALESCING"}  # matched without regard to case
        if candidate == "Shared memory blocking":
            return {"existed": True, "method": "Quantum tiling"}  # offered nowhere: must be refused
        return {"existed": False, "method": candidate}

    file = write(
        tmp_path / "t.jsonl",
        [
            trajectory("gemm_f32", ["Parallelization", "Memory coalescing", "Shared memory tiling"]),
            trajectory(
                "transpose_f32", ["Parallelization", "Memory access coalescing", "Shared memory blocking"]
            ),
        ],
    )
    # No taxonomy and a scorer that never decides alone: every unknown name with a neighbour goes to
    # the judge, whatever the embeddings say.
    fitted = load_model()
    undecided = ScoringModel(
        weights=fitted.weights, bias=fitted.bias, merge_threshold=1.0, new_threshold=0.0, margin=1.0
    )
    relabeler = Relabeler(store, embedder, judge=replay_judge, taxonomy=None, model=undecided)
    summary = GraphBuilder(
        store=store, embedder=embedder, relabeler=relabeler, references=TaskDirectoryReferences(TASKS)
    ).build(read_trajectories([file]))
    assert "Memory coalescing" in asked["Memory access coalescing"]
    assert "Quantum tiling" not in asked["Shared memory blocking"]
    by_candidate = {d.candidate: d for d in store.list_decisions()}
    merged = by_candidate["Memory access coalescing"]
    assert (merged.decided_by, merged.outcome, merged.technique) == (
        "judge",
        RelabelOutcome.MERGED,
        "Memory coalescing",
    )
    assert "Memory access coalescing" in store.get_technique("Memory coalescing").aliases
    # The paper's rule: a relabel onto a method that is not among the offered ones is refused. The
    # name is kept as its own technique, flagged for a curator, and the refusal is on record; the judge
    # decided nothing, so the decision is the scorer's, which left it undecided (session 39).
    refused = by_candidate["Shared memory blocking"]
    assert (refused.decided_by, refused.outcome) == ("model", RelabelOutcome.FLAGGED)
    assert refused.evidence is not None and "not one of the offered" in refused.evidence["judge"]["error"]
    assert "Quantum tiling" in str(refused.judge_answer) and "not one of the offered" in str(
        refused.judge_answer
    )
    assert refused.technique == "Shared memory blocking"
    assert store.get_technique("Shared memory blocking").name == "Shared memory blocking"
    assert all(
        "Shared memory blocking" not in store.get_technique(n).aliases
        for n in asked["Shared memory blocking"]
    )
    assert refused.id in {d.id for d in store.list_queue()}
    assert (summary.merges, summary.flagged) == (1, 1)


class StaticCheckValidator:
    """Validates steps with the executor's real static checker (no GPU here, so no timing)."""

    def __call__(self, task_id: str, code: str) -> StepCheck:
        violations = check_source(load_task(TASKS / task_id), code)
        return StepCheck(passed=not violations, reason="; ".join(v.rule for v in violations))


def test_validation_rejects_or_skips_failing_steps(
    store: GraphStore, embedder: Embedder, tmp_path: Path
) -> None:
    bad = trajectory("reduce_sum_f64", ["Parallelization", "Loop unrolling", "Thread coarsening"])
    bad["steps"][1]["code"] = (
        '#include <cstdlib>\nextern "C" double reduce_sum_f64() { system("ls"); return 0; }\n'
    )
    file = write(tmp_path / "t.jsonl", [bad])
    summary = builder(store, embedder, validator=StaticCheckValidator()).build(read_trajectories([file]))
    assert summary.rejected_steps == 1
    rejected = store.list_examples(status=ReviewStatus.REJECTED)
    assert [e.target for e in rejected] == ["Loop unrolling"]
    assert rejected[0].review_reason.startswith("validation failed")
    assert store.get_transition("Parallelization", "Loop unrolling").stats.n_rejected == 1
    # Retrieval never offers an edge whose only example was rejected.
    knowledge = GraphKnowledge(store, embedder)
    assert knowledge.successors("Parallelization", "anything", 2) == []


def test_skip_policy_truncates_at_the_failing_step(
    store: GraphStore, embedder: Embedder, tmp_path: Path
) -> None:
    bad = trajectory("reduce_sum_f64", ["Parallelization", "Loop unrolling", "Thread coarsening"])
    bad["steps"][1]["code"] = (
        '#include <cstdio>\nextern "C" void f() { FILE* f = fopen("/etc/passwd", "r"); }\n'
    )
    file = write(tmp_path / "t.jsonl", [bad])
    summary = builder(store, embedder, validator=StaticCheckValidator(), on_failure="skip").build(
        read_trajectories([file])
    )
    assert summary.skipped_steps == 2 and summary.examples_added == 1


def test_malformed_input_writes_nothing(store: GraphStore, embedder: Embedder, tmp_path: Path) -> None:
    good = trajectory("reduce_sum_f64", ["Parallelization"])
    broken = {
        "format": "regraph.trajectory/v1",
        "task_id": "gemm_f32",
        "model": "m",
        "steps": [{"method": ""}],
    }
    file = write(tmp_path / "t.jsonl", [good, broken])
    with pytest.raises(TrajectoryFormatError, match=r"t\.jsonl:2"):
        builder(store, embedder).build(read_trajectories([file]))
    assert store.counts()["examples"] == 0
    unknown = write(tmp_path / "u.jsonl", [trajectory("no_such_task", ["Parallelization"])])
    with pytest.raises(Exception, match="no_such_task"):
        builder(store, embedder).build(read_trajectories([unknown]))
    assert store.counts()["examples"] == 0


def test_resume_after_an_interruption(store: GraphStore, embedder: Embedder, tmp_path: Path) -> None:
    items = [
        trajectory("reduce_sum_f64", ["Parallelization", "Loop unrolling"]),
        trajectory("gemm_f32", ["Parallelization", "Shared memory tiling"]),
        trajectory("transpose_f32", ["Parallelization", "Thread coarsening"]),
    ]
    file = write(tmp_path / "t.jsonl", items)
    trajectories = read_trajectories([file])

    class Interrupted(Exception):
        pass

    def stop_after_first(done: int, total: int, origin: str) -> None:
        if done == 1:
            raise Interrupted(origin)

    with pytest.raises(Interrupted):
        builder(store, embedder).build(trajectories, stop_after_first)
    assert len(store.list_trajectories()) == 1
    resumed = builder(store, embedder).build(trajectories)
    assert (resumed.trajectories_already_ingested, resumed.trajectories_ingested) == (1, 2)
    assert store.counts()["examples"] == 6


def test_a_write_the_store_refuses_is_a_graph_write_error(
    store: GraphStore, embedder: Embedder, tmp_path: Path
) -> None:
    # A curator creates "Parallelization" while the build validates the step it has just relabeled as
    # that new technique (between the relabel and the write): the store refuses the batch, and the
    # builder says so with its own error, the store's error as the cause, and writes nothing.
    curator_done: list[bool] = []

    def validator_racing_a_curator(task_id: str, code: str) -> StepCheck:
        if not curator_done:
            store.create_technique(Technique(name="Parallelization", created_at=utc_now()), actor="curator")
            curator_done.append(True)
        return StepCheck(passed=True, speedup_over_serial=2.0)

    file = write(tmp_path / "t.jsonl", [trajectory("reduce_sum_f64", ["Parallelization"])])
    with pytest.raises(GraphWriteError, match="the graph refused the trajectory") as refused:
        builder(store, embedder, validator=validator_racing_a_curator).build(read_trajectories([file]))
    assert isinstance(refused.value.__cause__, TechniqueExistsError)
    assert store.list_trajectories() == [] and store.counts()["examples"] == 0


def test_retrieval_after_a_build(store: GraphStore, embedder: Embedder, tmp_path: Path) -> None:
    file = write(tmp_path / "t.jsonl", [trajectory("reduce_sum_f64", ["Parallelization"])])
    builder(store, embedder).build(read_trajectories([file]))
    knowledge = GraphKnowledge(store, embedder)
    options = knowledge.successors(
        INITIAL_TECHNIQUE, (TASKS / "reduce_sum_f64" / "reference.cpp").read_text(), 3
    )
    assert [o.technique for o in options] == ["Parallelization"]
    assert options[0].examples[0].similarity == pytest.approx(1.0, abs=1e-3)
    assert options[0].success_rate == 0.5  # nothing verified: the neutral prior
    hits = knowledge.search_techniques("parallel", 3)
    assert hits[0].technique.name == "Parallelization"
