"""Trajectories from a teacher model, end to end: the OpenAI-compatible test server (a real HTTP server
on loopback, the named stand-in for the model), the real embedded Neo4j and the real embeddings."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest

from graphdb.models import INITIAL_TECHNIQUE
from graphdb.store import GraphStore
from search.backends.openai import OpenAICompatibleModel
from search.embeddings import Embedder
from search.header import parse_header
from search.relabel.construction import (
    GraphBuilder,
    ReferencesInOrder,
    TaskDirectoryReferences,
    iter_sources,
    read_trajectories,
)
from search.relabel.relabeler import Relabeler
from search.relabel.teacher import TeacherTrajectorySource, load_teacher_tasks
from tests.support.openai_test_server import OpenAITestServer

TASKS = Path(__file__).resolve().parents[3] / "regraph_data" / "tasks"


def program(task: str, entry_args: str, note: str) -> str:
    return f'// {task}: {note}\n#include <cuda_runtime.h>\nextern "C" void {task}({entry_args}) {{ }}\n'


REDUCE = "int n, const double* x, double* out"
GEMM = "int M, int N, int K, const float* A, const float* B, float* C"
TRANSPOSE = "int rows, int cols, const float* in, float* out"


def answer(task: str, args: str, *methods: str) -> str:
    return json.dumps(
        {
            "steps": [
                {"method": m, "think": f"why {m}", "detail": f"apply {m}", "code": program(task, args, m)}
                for m in methods
            ]
        }
    )


@pytest.fixture()
def teacher_server() -> Iterator[OpenAITestServer]:
    with OpenAITestServer(model="teacher-7b") as server:
        yield server


def builder(store: GraphStore, embedder: Embedder, teacher: TeacherTrajectorySource) -> GraphBuilder:
    return GraphBuilder(
        store=store,
        embedder=embedder,
        relabeler=Relabeler(store, embedder),
        references=ReferencesInOrder(teacher.reference, TaskDirectoryReferences(TASKS)),
    )


def test_teacher_trajectories_build_the_graph_and_bad_answers_skip_their_task(
    store: GraphStore, embedder: Embedder, teacher_server: OpenAITestServer, tmp_path: Path
) -> None:
    tasks = load_teacher_tasks("reduce_sum_f64,gemm_f32,transpose_f32,argmax_f32", TASKS)
    # One reply per task, in task order: a plain answer, one fenced in prose, prose only, and a
    # trajectory whose second step lost the entry point.
    teacher_server.script(
        answer("reduce_sum_f64", REDUCE, "Parallelization", "Warp shuffle reduction"),
        "Here is the plan:\n```json\n"
        + answer("gemm_f32", GEMM, "Parallelization", "Shared memory tiling")
        + "\n```",
        "I would tile the transpose through shared memory.",
    )
    lost = json.loads(answer("argmax_f32", "int n", "Parallelization", "Vectorization"))
    lost["steps"][1]["code"] = "__global__ void k() {}\n"
    teacher_server.script(json.dumps(lost))
    record = tmp_path / "teacher.jsonl"
    model = OpenAICompatibleModel(teacher_server.base_url, "teacher-7b", max_attempts=1)
    seen: list[str] = []
    teacher = TeacherTrajectorySource(
        model,
        tasks,
        model_name="teacher-7b",
        max_steps=3,
        record_path=record,
        close_model=True,
        progress=lambda _done, _total, task_id: seen.append(task_id),
    )

    summary = builder(store, embedder, teacher).build(iter_sources(teacher))

    assert seen == ["reduce_sum_f64", "gemm_f32", "transpose_f32", "argmax_f32"]
    assert summary.trajectories_ingested == 2 and summary.examples_added == 4
    assert {s.task_id: s.reason for s in teacher.skipped} == {
        "transpose_f32": "the answer is not JSON",
        "argmax_f32": "step 2 ('Vectorization') does not define `argmax_f32`",
    }
    # The graph: both trajectories start at the initial node from the task's serial reference.
    first = store.list_examples(source=INITIAL_TECHNIQUE, target="Parallelization")
    assert sorted(e.task_id for e in first) == ["gemm_f32", "reduce_sum_f64"]
    assert all(e.code_before == (TASKS / e.task_id / "reference.cpp").read_text() for e in first)
    assert all(e.model == "teacher-7b" for e in first)
    tiling = store.list_examples(source="Parallelization", target="Shared memory tiling")
    assert [e.code_after for e in tiling] == [program("gemm_f32", GEMM, "Shared memory tiling")]
    # What the teacher was sent: a header naming the task, the reference, and the answer's schema.
    request = teacher_server.requests[0]
    prompt = request["messages"][1]["content"]
    assert parse_header(prompt) == {"prompt": "teacher", "task": "reduce_sum_f64"}
    assert (TASKS / "reduce_sum_f64" / "reference.cpp").read_text().strip() in prompt
    schema = request["response_format"]["json_schema"]["schema"]
    assert schema["properties"]["steps"]["maxItems"] == 3

    # The recorded trajectories rebuild the same graph with no model: nothing new is added.
    recorded = read_trajectories([record])
    assert [t.trajectory.task_id for t in recorded] == ["reduce_sum_f64", "gemm_f32"]
    again = GraphBuilder(
        store=store,
        embedder=embedder,
        relabeler=Relabeler(store, embedder),
        references=TaskDirectoryReferences(TASKS),
    ).build(recorded)
    assert again.trajectories_already_ingested == 2 and again.examples_added == 0


def test_model_failures_and_truncated_answers_skip_the_task_without_stopping_the_build(
    store: GraphStore, embedder: Embedder, teacher_server: OpenAITestServer
) -> None:
    tasks = load_teacher_tasks(str(TASKS / "reduce_sum_f64"), TASKS) + load_teacher_tasks(
        "gemm_f32,transpose_f32", TASKS
    )
    teacher_server.fail_next(400)  # reduce_sum_f64: the server refuses the request
    teacher_server.script(answer("gemm_f32", GEMM, "Parallelization"), finish_reason="length")
    teacher_server.script(answer("transpose_f32", TRANSPOSE, "Parallelization", "Shared memory tiling"))
    teacher = TeacherTrajectorySource(
        OpenAICompatibleModel(teacher_server.base_url, "teacher-7b", max_attempts=1),
        tasks,
        model_name="teacher-7b",
        close_model=True,
    )
    summary = builder(store, embedder, teacher).build(teacher())
    assert summary.trajectories_ingested == 1 and summary.examples_added == 2
    reasons = {s.task_id: s.reason for s in teacher.skipped}
    assert reasons["reduce_sum_f64"].startswith("the teacher model failed: HTTP 400")
    assert reasons["gemm_f32"] == "the answer was cut at 8192 tokens"
    assert store.get_transition("Parallelization", "Shared memory tiling").stats.n_examples == 1
