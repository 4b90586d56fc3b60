"""Which function candidates a larger fleet slows, by their task's copy rate (bench/probes/throughput_copies.py):
the table that tells the host's memory and PCIe (copy-bound tasks slowed) from its CPU (all slowed)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from bench.probes.throughput_copies import compare, main, render, task_bytes


def _record(task: str, median_ms: float, trials: int, cov: float) -> dict[str, Any]:
    return {
        "task": task,
        "task_kind": "function",
        "error": None,
        "trials": trials,
        "median_ms": median_ms,
        "robust_cov": cov,
    }


def test_copy_bound_and_compute_bound_tasks_are_compared_apart(tmp_path: Path) -> None:
    copies = task_bytes("reduce_sum_f64")  # 2^25 doubles in, one out
    assert copies == (1 << 25) * 8 + 8
    # reduce_sum_f64 at 10 GB/s (copy-bound), knn_dist_f32 far under 2 GB/s (compute-bound)
    fast = copies / 10e9 * 1e3
    small = [_record("reduce_sum_f64", fast, 8, 0.03), _record("reduce_sum_f64", 2 * fast, 8, 0.03)]
    small += [_record("knn_dist_f32", 500.0, 7, 0.01), _record("only_small", 1.0, 7, 0.0)]
    large = [_record("reduce_sum_f64", 1.5 * fast, 20, 0.1), _record("knn_dist_f32", 505.0, 9, 0.02)]
    rows = compare(small, large)
    assert [(r["class"], r["tasks"]) for r in rows] == [("0-2 GB/s", 1), (">= 8 GB/s", 1)]
    compute, copy = rows
    assert abs(compute["median_ratio"] - 1.01) < 1e-9 and abs(copy["median_ratio"] - 1.5) < 1e-9
    assert (copy["trials_small"], copy["trials_large"], copy["cov_large"]) == (8, 20, 0.1)
    assert "| >= 8 GB/s | 1 | 1.50 | 8.0 | 20.0 | 0.030 | 0.100 |" in render(rows, "1", "2")
    for name, records in (("1", small), ("2", large)):
        (tmp_path / f"queue_{name}.json").write_text(json.dumps({"runs": [{"records": records}]}))
    assert main([str(tmp_path)]) == 0 and main([str(tmp_path), "1", "4"]) == 0  # queue_4 missing: says so
