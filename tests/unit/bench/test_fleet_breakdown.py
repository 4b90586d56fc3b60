"""Where a verdict's time goes per fleet size (bench/probes/fleet_breakdown.py): the steps of a correct
candidate's path, each replica's turn and the host memory's lock held alone, from a scaling run's records."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from bench.probes.fleet_breakdown import host_alone_s, main, render, step_seconds


def _function(**seconds: float) -> dict[str, Any]:
    return {
        "task": "t",
        "task_kind": "function",
        "candidate": "correct",
        "error": None,
        "call_s": seconds.pop("call_s"),
        "seconds": seconds,
    }


def test_the_steps_add_up_to_the_verdicts_total_and_the_turn_is_split() -> None:
    record = _function(
        call_s=10.5,
        static=0.1,
        task_prepare_wait=1.0,
        compile=1.5,
        reference_wait=2.0,
        prepare_wait=0.5,
        host_gate_wait=0.2,
        gpu_wait=4.0,
        gpu_held=1.8,
        run_lock_wait=0.3,
        correctness=0.3,
        timing_lock_wait=0.5,
        timing_trials=0.6,
        after_release=0.2,
        total=10.0,
    )
    steps = step_seconds(record)
    assert abs(steps["queue"] - 0.5) < 1e-9 and abs(steps["compile_past"] - 0.5) < 1e-9
    assert abs(steps["turn_rest"] - 0.1) < 1e-9  # 1.8 under the turn less its four parts
    on_path = ["task_prepare_wait", "compile_past", "reference_wait", "prepare_wait", "host_gate_wait"]
    on_path += ["gpu_wait", "run_lock_wait", "correctness", "timing_lock_wait", "timing_trials", "turn_rest"]
    assert abs(0.1 + sum(steps[k] for k in on_path) + 0.2 + steps["other"] - 10.0) < 1e-9


def test_the_host_memorys_lock_held_alone_and_the_turns_per_replica(tmp_path: Path) -> None:
    base = {"call_s": 2.0, "total": 2.0, "gpu_held": 1.0, "timing_trials": 0.5}
    records = [
        _function(**base, host_shared=0.0, baseline_timing=0.4),
        _function(**base, host_shared=1.0, baseline_timing=0.2, baseline_host_shared=1.0),
        {**_function(**base), "candidate": "static", "error": "static_rejected"},
    ]
    turns = [{"replica": "replica-0", "seconds": 10.0, "turns": {"candidate": 2, "baseline": 4},
              "held_s": {"candidate": 2.0, "baseline": 3.0}}]  # fmt: skip
    run = {"records": records, "turns": turns, "wall_s": 10.0, "per_hour": 720}
    held = host_alone_s(run)
    # every function run's trials (the static one's too: it reports them), the baselines by their mean
    assert (held["candidates_alone"], held["candidates_shared"]) == (1.0, 0.5)
    assert abs(held["baselines_alone"] - 0.6) < 1e-9 and abs(held["baselines_shared"] - 0.6) < 1e-9
    text = render([("x", {1: run})])
    assert "| x x1 | replica-0 | 2.0 s / 2 | 1.000 | 3.0 s / 4 | 0.750 | 50% |" in text
    assert "| turn: trials | - | 0.500 |" in text
    (tmp_path / "queue_1.json").write_text(json.dumps({"runs": [run]}))
    assert main([f"x={tmp_path}"]) == 0 and main([str(tmp_path / "none")]) == 1
