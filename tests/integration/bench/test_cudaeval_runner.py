"""The benchmark runner end to end: replayed teacher steps, the real executor on loopback, real nvcc.

This machine has no GPU, so the executor is compile-only: the runs must report compile rates and say
that the runtime stages did not run, and must not report any pass or speedup number.
"""

from __future__ import annotations

import hashlib
import json
import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest
from typer.testing import CliRunner

from bench.metrics import OVERALL
from bench.results import SampleRecord
from bench.runner import (
    CudaEvalRunner,
    knowledge_from_trajectories,
    model_factory,
    read_result,
    select_tasks,
)
from executor.app import create_app
from executor.client import ExecutorClient
from executor.settings import ExecutorSettings
from regraph_cli.bench import bench_app
from tests.support.servers import serve_in_thread

REPO = Path(__file__).resolve().parents[3]
HELD_OUT = ["to_upper_ascii_u8", "reduce_sum_f64"]
GRAPH_BUILDING = ["rgb_gray_half_u8", "complex_dot_rows_f32"]


@pytest.fixture(scope="module")
def corpus(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A small copy of the benchmark: two held-out tasks and two graph-building ones."""
    root = tmp_path_factory.mktemp("corpus")
    (root / "trajectories").mkdir()
    for task_id in HELD_OUT + GRAPH_BUILDING:
        shutil.copytree(REPO / "regraph_data" / "tasks" / task_id, root / "tasks" / task_id)
        shutil.copy(REPO / "bench" / "trajectories" / f"{task_id}.jsonl", root / "trajectories")
    return root


@pytest.fixture(scope="module")
def executor_url(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    settings = ExecutorSettings(cache_dir=tmp_path_factory.mktemp("executor-cache"), compile_workers=2)
    with serve_in_thread(create_app(settings)) as url:
        yield url


def _teacher_codes(corpus: Path, task_id: str) -> set[str]:
    trajectory = json.loads((corpus / "trajectories" / f"{task_id}.jsonl").read_text().splitlines()[0])
    return {hashlib.sha256(step["code"].rstrip().encode()).hexdigest() for step in trajectory["steps"]} | {
        hashlib.sha256(step["code"].encode()).hexdigest() for step in trajectory["steps"]
    }


def _runner(corpus: Path, url: str, client: ExecutorClient, method: str, out: Path) -> CudaEvalRunner:
    selection = select_tasks(
        [",".join(HELD_OUT)],
        tasks_dir=corpus / "tasks",
        trajectories_dir=corpus / "trajectories",
        split_path=corpus / "no-split.json",
    )
    assert sorted(selection.build_ids) == sorted(GRAPH_BUILDING)
    model, description = model_factory("teacher", trajectories_dir=corpus / "trajectories")
    return CudaEvalRunner(
        method=method,
        selection=selection,
        client=client,
        executor_url=url,
        model=model,
        model_description=description,
        knowledge=lambda: knowledge_from_trajectories(
            selection.build_ids, tasks_dir=corpus / "tasks", trajectories_dir=corpus / "trajectories"
        ),
        knowledge_description="test graph",
        out_dir=out,
        samples=2,
        evaluation_budget=3,
    )


def test_mcgs_run_compile_only_reports_compile_rate_and_no_runtime_numbers(
    corpus: Path, executor_url: str, tmp_path: Path
) -> None:
    with ExecutorClient(executor_url) as client:
        result = _runner(corpus, executor_url, client, "regraph-mcgs", tmp_path).run()

    assert result.run.verification == "compile-only"
    assert result.complete and not result.runtime_measured
    assert [(s.task_id, s.sample) for s in result.samples] == [(t, i) for t in HELD_OUT for i in range(2)]
    for sample in result.samples:
        # The replayed teacher step compiled, but was never run: unknown correctness, no speedup.
        assert sample.answer == "compiled" and sample.compiled and sample.correct is None
        assert sample.runtime_stages == "not_run" and sample.error == "runtime_not_available"
        assert sample.speedup is None and 1 <= sample.search_evaluations <= 3
        assert sample.failures.get("not_verified", 0) == sample.search_evaluations
        assert sample.code_sha256 in _teacher_codes(corpus, sample.task_id)
        assert sample.backends and all(b.startswith("replay:") for b in sample.backends)
        assert (tmp_path / "code" / sample.task_id / f"sample{sample.sample}.cu").is_file()
    assert result.totals.executor_evaluations == sum(s.search_evaluations for s in result.samples)
    assert result.totals.prompt_tokens > 0 and result.totals.completion_tokens > 0

    assert result.metrics is not None
    overall = result.metrics[OVERALL]
    assert overall.compile_rate == 1.0 and overall.unmeasured_samples == 4
    assert overall.pass_at_k is None and overall.speedup_at_k is None and overall.fast_p is None

    report = (tmp_path / "report.md").read_text()
    assert "Runtime stages not run" in report
    assert "| overall | 2 | 4 | 100.0% | not run |" in report
    assert not (tmp_path / "speedup_per_tier.png").exists()
    assert read_result(tmp_path / "result.json") == result

    # Resuming the finished run evaluates nothing again and gives the same samples.
    lines = (tmp_path / "samples.jsonl").read_text().splitlines()
    with ExecutorClient(executor_url) as client:
        again = _runner(corpus, executor_url, client, "regraph-mcgs", tmp_path).run()
    assert (tmp_path / "samples.jsonl").read_text().splitlines() == lines
    assert [s.model_dump(exclude={"seconds"}) for s in again.samples] == [
        s.model_dump(exclude={"seconds"}) for s in result.samples
    ]


def _untimed(sample: SampleRecord) -> dict[str, object]:
    """A sample without its times (and the compile cache's hits, which the second run has)."""
    data = sample.model_dump(exclude={"seconds", "generation_seconds", "evaluation_seconds"})
    verdict = data.get("verdict") or {}
    verdict.pop("seconds", None)
    for key in ("seconds", "cache_hit"):
        (verdict.get("compile") or {}).pop(key, None)
    return data


def test_tasks_in_parallel_lanes_give_the_same_samples(
    corpus: Path, executor_url: str, tmp_path: Path
) -> None:
    """--executors N: N (task, sample) searches at once, as over an executor fleet; same seeds, same
    samples as one at a time (timings aside), in the selection's order."""
    with ExecutorClient(executor_url) as client:
        one = _runner(corpus, executor_url, client, "regraph-mcgs", tmp_path / "one").run()
        lanes = _runner(corpus, executor_url, client, "regraph-mcgs", tmp_path / "lanes")
        lanes.executors = 3
        parallel = lanes.run()
    assert [(s.task_id, s.sample) for s in parallel.samples] == [(t, i) for t in HELD_OUT for i in range(2)]
    assert [_untimed(s) for s in parallel.samples] == [_untimed(s) for s in one.samples]
    assert parallel.complete and parallel.totals.executor_evaluations == one.totals.executor_evaluations


def test_one_shot_without_replayed_answers_has_no_code(
    corpus: Path, executor_url: str, tmp_path: Path
) -> None:
    # The teacher replay answers only graph steps: the one-shot baseline gets no code, spends nothing.
    with ExecutorClient(executor_url) as client:
        result = _runner(corpus, executor_url, client, "standard", tmp_path).run()
    assert all(s.answer == "none" and not s.compiled and s.correct is False for s in result.samples)
    assert result.totals.executor_evaluations == 0
    assert result.metrics is not None and result.metrics[OVERALL].compile_rate == 0.0


def test_teacher_mode_and_cli_report(corpus: Path, executor_url: str, tmp_path: Path) -> None:
    cli = CliRunner()
    teacher_out = tmp_path / "teacher"
    invoked = cli.invoke(
        bench_app,
        [
            "cudaeval",
            "--teacher",
            "--executor-url",
            executor_url,
            "--out",
            str(teacher_out),
            "--tasks",
            ",".join(HELD_OUT),
            "--tasks-dir",
            str(corpus / "tasks"),
            "--trajectories-dir",
            str(corpus / "trajectories"),
            "--split",
            str(corpus / "no-split.json"),
        ],
    )
    assert invoked.exit_code == 0, invoked.output
    teacher = read_result(teacher_out / "result.json")
    assert teacher.run.kind == "teacher" and not teacher.runtime_measured
    assert [(s.task_id, s.step) for s in teacher.teacher_steps] == [(t, i) for t in HELD_OUT for i in (1, 2)]
    assert all(s.compiled and s.correct is None for s in teacher.teacher_steps)
    assert teacher.teacher_metrics is not None
    easy = teacher.teacher_metrics["easy"]
    assert easy.compile_rate == 1.0 and easy.final_pass_rate is None and easy.final_speedup_median is None
    assert "Runtime stages not run" in (teacher_out / "report.md").read_text()

    search_out = tmp_path / "search"
    with ExecutorClient(executor_url) as client:
        _runner(corpus, executor_url, client, "regraph", search_out).run()
    compared = tmp_path / "compared"
    invoked = cli.invoke(
        bench_app,
        ["report", str(search_out / "result.json"), str(teacher_out / "result.json"), "--out", str(compared)],
    )
    assert invoked.exit_code == 0, invoked.output
    comparison = json.loads((compared / "comparison.json").read_text())
    assert comparison["format"] == "regraph.bench-comparison/v1"
    assert [run["kind"] for run in comparison["runs"]] == ["search", "teacher"]
    assert not (compared / "pass_at_k.png").exists()  # nothing measured: no pass@k to plot
    assert "No pass@k plot" in (compared / "report.md").read_text()
