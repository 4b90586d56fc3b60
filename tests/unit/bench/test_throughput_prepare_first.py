"""The throughput benchmark's ``--prepare-first`` (bench/probes/throughput.py): the prepare pass asks for
every task of the queue once, and a window over a store that an earlier window used compiles its
candidates as new (no compile of another window's is reused)."""

from __future__ import annotations

from pathlib import Path

from bench.probes.throughput import build_queue, queue_tasks, render_prepare, retag
from executor.cache import content_key

ROOT = Path(__file__).resolve().parents[3]
DIRS = [ROOT / "regraph_data" / "tasks" / name for name in ("argmax_f32", "adler32_blocks_u32")]


def test_the_prepare_pass_asks_for_each_task_of_the_queue_once_in_queue_order() -> None:
    items = build_queue(DIRS, per_task=3, hangs=0, seed=1)
    tasks = queue_tasks(items)
    assert sorted(t.id for t in tasks) == ["adler32_blocks_u32", "argmax_f32"]
    assert tasks[0].id == items[0].task.id  # the first the queue reaches is prepared first


def test_each_window_compiles_its_candidates_as_new() -> None:
    items = build_queue(DIRS, per_task=2, hangs=0, seed=1)
    first, second = retag(items, "wa"), retag(items, "wb")
    keys = [{content_key("c", item.source) for item in window} for window in (items, first, second)]
    assert all(len(k) == len(items) for k in keys)  # distinct within a window
    assert not keys[0] & keys[1] and not keys[1] & keys[2] and not keys[0] & keys[2]  # none shared
    # the same tasks and kinds, in the same order: only the compile differs
    assert [(i.task.id, i.kind) for i in first] == [(i.task.id, i.kind) for i in items]


def test_the_prepare_line_says_what_was_not_ready() -> None:
    lines = render_prepare(
        {
            "replicas": 2,
            "tasks": 3,
            "ready": 2,
            "seconds": 41.5,
            "timeout_s": 60.0,
            "baselines": {"kept": 1, "measuring": 1, "not_wanted": 1},
            "baseline_turns": 1,
            "baseline_held_s": 0.9,
            "not_ready": ["argmax_f32"],
            "errors": [],
        }
    )
    assert "**2 of 3 tasks ready in 41.5 s**" in lines[0] and "1 timed in this pass" in lines[0]
    assert lines[1] == "Not ready: argmax_f32"
