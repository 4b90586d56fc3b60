"""The benchmark split: deterministic, stratified, and its leakage check catches planted leaks."""

from __future__ import annotations

import json
import random
from pathlib import Path

import pytest

from bench.split import (
    DEFAULT_SPLIT_PATH,
    LeakageError,
    StaleSplitError,
    check_leakage,
    check_split,
    find_leaks,
    load_bench_tasks,
    make_split,
    read_split,
    write_split,
)


def _code(seed: str, length: int = 400) -> str:
    # Distinct random identifiers: unrelated tasks share no shingles.
    rng = random.Random(seed)
    lines = [
        f"int v{rng.randrange(10**9)} = v{rng.randrange(10**9)} + {rng.randrange(1000)};"
        for _ in range(length // 8)
    ]
    return "\n".join(lines) + "\n"


def _write_task(root: Path, task_id: str, domain: str, steps: list[str], *, named: str | None = None) -> None:
    directory = root / "tasks" / task_id
    directory.mkdir(parents=True)
    (directory / "task.json").write_text(json.dumps({"id": task_id, "domain": domain}))
    (directory / "reference.cpp").write_text(_code(f"{task_id}/reference"))
    trajectories = root / "trajectories"
    trajectories.mkdir(exist_ok=True)
    line = {
        "format": "regraph.trajectory/v1",
        "task_id": named or task_id,
        "model": "human-expert",
        "steps": [{"method": f"Technique {i}", "code": code} for i, code in enumerate(steps)],
    }
    (trajectories / f"{task_id}.jsonl").write_text(json.dumps(line) + "\n")


def _corpus(root: Path, per_stratum: int = 5) -> Path:
    # 2 tiers x 2 domains x `per_stratum` tasks (+ 2 hard ones), all unrelated code.
    for tier, n_steps in (("easy", 2), ("medium", 4)):
        for domain in ("stencils", "sparse"):
            for i in range(per_stratum):
                task_id = f"{tier}_{domain}_{i}"
                _write_task(root, task_id, domain, [_code(f"{task_id}/{s}") for s in range(n_steps)])
    for i in range(2):
        _write_task(root, f"hard_{i}", "graphs", [_code(f"hard_{i}/{s}") for s in range(6)])
    return root


def test_split_is_deterministic_and_stratified(tmp_path: Path) -> None:
    tasks, skipped = load_bench_tasks(_corpus(tmp_path) / "tasks", tmp_path / "trajectories")
    assert not skipped and len(tasks) == 22
    first = make_split(tasks, seed=11)
    again = make_split(list(reversed(tasks)), seed=11)
    assert first.eval == again.eval and first.build == again.build
    assert any(make_split(tasks, seed=s).eval != first.eval for s in range(12, 20))
    # About 30%: round(0.3 * 22) = 7, with each tier at its share (easy 10 -> 3, medium 10 -> 3, hard 2 -> 1).
    assert first.counts.eval == 7 and first.counts.build == 15
    assert {t: c.eval for t, c in first.counts.by_tier.items()} == {"easy": 3, "medium": 3, "hard": 1}
    # Domains get their share (0.3 * 10 = 3 for each of the two big ones) to within one.
    for domain in ("stencils", "sparse"):
        assert abs(first.counts.by_domain[domain].eval - 3) <= 1
    assert set(first.eval).isdisjoint(first.build) and len(first.eval) + len(first.build) == 22
    assert all(first.tasks[i].split == "eval" for i in first.eval)


def test_split_round_trips_and_detects_a_changed_task_set(tmp_path: Path) -> None:
    root = _corpus(tmp_path, per_stratum=2)
    tasks, _ = load_bench_tasks(root / "tasks", root / "trajectories")
    split = make_split(tasks, seed=3)
    write_split(split, tmp_path / "split.json")
    assert read_split(tmp_path / "split.json") == split
    check_split(split, tasks)
    _write_task(root, "newcomer", "sparse", [_code("newcomer/0")])
    grown, _ = load_bench_tasks(root / "tasks", root / "trajectories")
    with pytest.raises(StaleSplitError, match="newcomer"):
        check_split(split, grown)


def test_incomplete_tasks_are_left_out_with_a_reason(tmp_path: Path) -> None:
    root = _corpus(tmp_path, per_stratum=1)
    (root / "tasks" / "half_written").mkdir()
    (root / "tasks" / "half_written" / "task.json").write_text('{"id": "half_wri')
    no_trajectory = root / "tasks" / "no_trajectory"
    no_trajectory.mkdir()
    (no_trajectory / "task.json").write_text('{"id": "no_trajectory", "domain": "x"}')
    (no_trajectory / "reference.cpp").write_text("int main() {}")
    tasks, skipped = load_bench_tasks(root / "tasks", root / "trajectories")
    assert set(skipped) == {"half_written", "no_trajectory"}
    assert "trajectory" in skipped["no_trajectory"]
    assert "half_written" not in {t.id for t in tasks}


def test_planted_leaks_are_caught(tmp_path: Path) -> None:
    root = _corpus(tmp_path, per_stratum=2)
    tasks, _ = load_bench_tasks(root / "tasks", root / "trajectories")
    split = make_split(tasks, seed=5)
    victim, donor = split.eval[0], split.build[0]
    by_id = {t.id: t for t in tasks}
    stolen = json.loads((root / "trajectories" / f"{victim}.jsonl").read_text())["steps"][-1]["code"]

    # 1. The donor's (building) trajectory contains the evaluation task's final step, re-indented.
    donor_file = root / "trajectories" / f"{donor}.jsonl"
    trajectory = json.loads(donor_file.read_text())
    trajectory["steps"].append({"method": "Copied", "code": "   " + stolen.replace(" ", "\n\t ")})
    donor_file.write_text(json.dumps(trajectory) + "\n")
    leaked, _ = load_bench_tasks(root / "tasks", root / "trajectories")
    with pytest.raises(LeakageError) as caught:
        check_leakage(split, leaked)
    leak = caught.value.leaks[0]
    assert (leak.eval_task, leak.build_task, leak.kind) == (victim, donor, "exact")
    assert victim in str(caught.value) and donor in str(caught.value) and "identical" in str(caught.value)

    # 2. A near duplicate: the same code with one statement changed is still caught (Jaccard >= 0.9).
    lines = stolen.splitlines()
    lines[3] = "int changed = 0;"
    trajectory["steps"][-1]["code"] = "\n".join(lines)
    donor_file.write_text(json.dumps(trajectory) + "\n")
    leaked, _ = load_bench_tasks(root / "tasks", root / "trajectories")
    near = find_leaks([t for t in leaked if t.id == donor], [by_id[victim]])
    assert [leak.kind for leak in near] == ["near_duplicate"]
    assert near[0].similarity is not None and 0.9 <= near[0].similarity < 1.0

    # 3. A building trajectory that names the evaluation task.
    _write_task(root, "renamed", "sparse", [_code("renamed/0")], named=victim)
    leaked, _ = load_bench_tasks(root / "tasks", root / "trajectories")
    kinds = {leak.kind for leak in find_leaks([t for t in leaked if t.id == "renamed"], [by_id[victim]])}
    assert kinds == {"task_id"}


def test_unrelated_code_is_not_a_near_duplicate(tmp_path: Path) -> None:
    root = _corpus(tmp_path, per_stratum=1)
    tasks, _ = load_bench_tasks(root / "tasks", root / "trajectories")
    assert find_leaks(tasks[:3], tasks[3:]) == []


def test_near_duplicate_tasks_are_kept_together_on_the_building_side(tmp_path: Path) -> None:
    root = _corpus(tmp_path, per_stratum=2)
    shared = _code("shared")
    _write_task(root, "twin_a", "sparse", [shared, _code("twin_a/1")])
    _write_task(root, "twin_b", "sparse", [_code("twin_b/0"), shared + "int extra = 1;\n"])
    tasks, _ = load_bench_tasks(root / "tasks", root / "trajectories")
    for seed in range(5):
        split = make_split(tasks, seed=seed)  # raises LeakageError if the twins were separated
        assert ["twin_a", "twin_b"] in split.kept_together
        assert {"twin_a", "twin_b"} <= set(split.build)


def test_committed_split_matches_the_tasks_and_does_not_leak() -> None:
    tasks, _ = load_bench_tasks()
    check_split(read_split(DEFAULT_SPLIT_PATH), tasks)
