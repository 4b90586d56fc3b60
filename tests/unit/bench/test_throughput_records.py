"""The throughput benchmark keeps every verdict's stage seconds and reports a correct candidate's time
under the GPU lock per task kind (bench/probes/throughput.py): the table that says where the lock goes."""

from __future__ import annotations

from pathlib import Path

import pytest

from bench.probes.throughput import (
    MESSAGE_CHARS,
    QueueItem,
    Result,
    _turns_since,
    lock_by_kind,
    render,
    render_honest_refusals,
    summarize,
)
from executor.protocol import ErrorKind, Stage, TimingStats, Verdict
from executor.taskformat import load_task

ROOT = Path(__file__).resolve().parents[3]


def _timing(trials: int) -> TimingStats:
    return TimingStats(
        trials=trials, median_ms=1.0, mean_ms=1.0, min_ms=1.0, max_ms=1.0, iqr_ms=0.0, cov=0.0, stop="stable"
    )


def test_records_and_the_lock_table_by_task_kind() -> None:
    function = load_task(ROOT / "regraph_data" / "tasks" / "argmax_f32")
    kernel = load_task(ROOT / "regraph_data" / "kernel_tasks" / "k_bfs_pull_step")
    results: list[Result] = []
    for task, held, trials in ((function, 1.0, 5), (function, 2.0, 15), (kernel, 0.25, 100)):
        verdict = Verdict(
            task_id=task.id,
            stage=Stage.TIMING,
            passed=True,
            runtime_stages="run",
            candidate_timing=_timing(trials),
            reward=1.0,
            seconds={
                "gpu_held": held,
                "handover": held / 4,
                "run_lock_wait": held / 8,
                "correctness": 0.1,
                "timing_trials": held / 2,
                # the first function candidate's turn ended before its host checks; it waited before it
                **({"after_release": 0.2, "host_gate_wait": 0.4} if held == 1.0 else {}),
            },
        )
        results.append(
            (QueueItem(task, "src", "correct"), verdict, held + 1.0, None, 50.0 + 10 * len(results))
        )
    failed = Verdict(
        task_id=function.id,
        stage=Stage.CORRECTNESS,
        passed=False,
        error=ErrorKind.UNWRITTEN_OUTPUT,
        runtime_stages="run",
        reward=-1.0,
        seconds={"gpu_held": 9.0},
    )
    results.append((QueueItem(function, "src", "unwritten"), failed, 10.0, None, 20.0))
    summary = summarize(results, wall_s=100.0, replicas=1, steady_after_s=45.0)
    records = summary["records"]
    assert len(records) == 4
    assert records[3]["candidate"] == "unwritten" and records[3]["error"] == "unwritten_output"
    assert records[3]["trials"] is None and records[3]["median_ms"] is None  # not timed
    assert records[2]["task_kind"] == "kernel" and records[2]["stop"] == "stable"
    assert records[0]["seconds"]["gpu_held"] == 1.0 and records[0]["trials"] == 5
    assert [r["finished_s"] for r in records] == [50.0, 60.0, 70.0, 20.0]
    # the three verdicts after 45 s, over the 55 s left of the run; the lock held 12.25 s of 100
    assert summary["steady"] == {"after_s": 45.0, "verdicts": 3, "seconds": 55.0, "per_hour": 196}
    assert summary["lock_held"] == pytest.approx(0.1225, abs=1e-3)
    assert summarize(results, wall_s=80.0, replicas=1, steady_after_s=45.0)["steady"] is None  # too short
    table = lock_by_kind(records)  # the failing candidate is not a correct one: left out
    assert table["function"]["n"] == 2
    assert table["function"]["gpu_held"] == pytest.approx(1.5)
    assert table["function"]["trials"] == pytest.approx(10.0)
    assert table["kernel"]["gpu_held"] == pytest.approx(0.25) and table["kernel"][
        "handover"
    ] == pytest.approx(0.0625)
    text = render({"runs": [summary], "command": "test", "date": "today", "host": "here", "runtime": "gpu"})
    assert "| 1 | function | 2 | 1.500 | 0.375 | 0.188 | 0.100 | 0.750 | 10.0 | 0.200 | 0.100 | 50% |" in text
    assert "| 1 | kernel | 1 | 0.250 | 0.062 | 0.031 | 0.100 | 0.125 | 100.0 | 0.000 | 0.000 | 0% |" in text
    assert (
        "GPU lock held 12% of the wall time; after the first 45 s" in text
        and "**196 evaluations/hour**" in text
    )


def test_the_turns_reported_are_the_queues_own() -> None:
    """What the executor's turns did before the queue began (a task prepared, a warm-up) is left out."""
    before = [
        {
            "replica": "r0",
            "seconds": 5.0,
            "turns": {"candidate": 2, "baseline": 1},
            "held_s": {"candidate": 1.5, "baseline": 0.5},
            "waiting": 0,
        }
    ]
    after = [
        {
            "replica": "r0",
            "seconds": 65.0,
            "turns": {"candidate": 12, "baseline": 4},
            "held_s": {"candidate": 31.5, "baseline": 3.0},
            "waiting": 1,
        },
        {
            "replica": "r1",
            "seconds": 60.0,
            "turns": {"candidate": 3, "baseline": 0},
            "held_s": {"candidate": 2.0, "baseline": 0.0},
            "waiting": 0,
        },
    ]
    since = _turns_since(before, after)
    assert since[0] == {
        "replica": "r0",
        "seconds": 60.0,
        "turns": {"candidate": 10, "baseline": 3},
        "held_s": {"candidate": 30.0, "baseline": 2.5},
        "waiting": 1,
    }
    assert since[1] == after[1]  # a replica that answered only after the queue began: all of it


def test_a_refused_honest_candidate_keeps_its_message_and_is_listed() -> None:
    """A failing verdict's stage and message (cut to MESSAGE_CHARS) stay in its record; the summary counts
    the known-good candidates that did not pass and the markdown lists each with its message."""
    function = load_task(ROOT / "regraph_data" / "tasks" / "argmax_f32")
    refused = Verdict(
        task_id=function.id,
        stage=Stage.TIMING,
        passed=False,
        error=ErrorKind.IMPLAUSIBLE,
        message="the first timed call on each timing set took 40 ms " + "x" * 400,
        runtime_stages="run",
        reward=-1.0,
        seconds={"gpu_held": 1.0},
    )
    passed = Verdict(
        task_id=function.id, stage=Stage.TIMING, passed=True, runtime_stages="run", reward=1.0, seconds={}
    )
    unwritten = refused.model_copy(
        update={
            "error": ErrorKind.UNWRITTEN_OUTPUT,
            "stage": Stage.CORRECTNESS,
            "message": "left 5 unwritten",
        }
    )
    results: list[Result] = [
        (QueueItem(function, "src", "correct"), refused, 3.0, None, 10.0),
        (QueueItem(function, "src", "correct"), passed, 3.0, None, 11.0),
        (QueueItem(function, "src", "unwritten"), unwritten, 3.0, None, 12.0),
    ]
    summary = summarize(results, wall_s=100.0, replicas=2)
    first, second, third = summary["records"]
    assert first["stage"] == "timing" and first["message"].startswith("the first timed call")
    assert len(first["message"]) == MESSAGE_CHARS and first["message"].endswith("...")
    assert "message" not in second and "stage" not in second  # a passed verdict has none
    assert third["message"] == "left 5 unwritten" and third["stage"] == "correctness"
    assert summary["honest_refused"] == 1  # the unwritten candidate failed as it should
    text = render({"runs": [summary], "command": "test", "date": "today", "host": "here", "runtime": "gpu"})
    assert "- 2 replicas: **1**" in text
    assert "  - argmax_f32 (function): `implausible` at timing after 3.0 s: the first timed call" in text
    labelled = render_honest_refusals([summary | {"label": "queue_2_ctxhost"}])
    assert labelled[2] == "- queue_2_ctxhost: **1**"
