"""Each replica of a host on cores of its own (executor.fleet.pinning)."""

from __future__ import annotations

import os
import subprocess
import sys
from itertools import combinations
from pathlib import Path

from executor.fleet.pinning import (
    format_cpulist,
    node_cpus,
    parse_cpulist,
    pci_numa_node,
    plan_cores,
    sibling_groups,
)

ROOT = Path(__file__).resolve().parents[3]


def _disjoint(plan: list[list[int]]) -> bool:
    return all(not set(a) & set(b) for a, b in combinations(plan, 2))


def test_two_numa_nodes_each_split_among_their_gpus_whole_cores_at_a_time() -> None:
    # 2 sockets of 8 cores with hyperthreads (siblings n and n+16), GPUs 0,2 on node 0 and 1,3 on node 1
    nodes = {0: [*range(0, 8), *range(16, 24)], 1: [*range(8, 16), *range(24, 32)]}
    groups = [[c, c + 16] for c in range(16)]
    plan = plan_cores([0, 1, 0, 1], nodes, list(range(32)), groups)
    assert _disjoint(plan)
    assert [len(cores) for cores in plan] == [8, 8, 8, 8]
    for gpu, node in enumerate([0, 1, 0, 1]):
        assert set(plan[gpu]) <= set(nodes[node]), gpu
        assert all((c + 16 in plan[gpu]) for c in plan[gpu] if c < 16)  # both threads of a core
    assert sorted(c for cores in plan for c in cores) == list(range(32))


def test_without_numa_information_every_core_is_split_among_every_gpu() -> None:
    for gpu_nodes, nodes in (
        ([0, 0, 0], {0: list(range(16))}),  # one node
        ([0, None, 1], {0: list(range(8)), 1: list(range(8, 16))}),  # a GPU on no node
    ):
        plan = plan_cores(gpu_nodes, nodes, list(range(16)))
        assert _disjoint(plan) and [len(c) for c in plan] == [5, 5, 6]
    # only the cores the process may use; more GPUs than cores leaves some unpinned (empty)
    assert plan_cores([0, 0], {0: list(range(16))}, [3, 5, 7]) == [[3], [5, 7]]
    assert plan_cores([0, 0, 0], {}, [4]) == [[], [], [4]]


def test_the_kernels_files_are_read(tmp_path: Path) -> None:
    assert parse_cpulist("0-3,8,10-11\n") == [0, 1, 2, 3, 8, 10, 11]
    assert format_cpulist([11, 0, 1, 2, 3, 8, 10]) == "0-3,8,10-11"
    for node, cpus in ((0, "0-3"), (1, "4-7")):
        (tmp_path / "node" / f"node{node}").mkdir(parents=True)
        (tmp_path / "node" / f"node{node}" / "cpulist").write_text(cpus + "\n")
    assert node_cpus(tmp_path / "node") == {0: [0, 1, 2, 3], 1: [4, 5, 6, 7]}
    for cpu, siblings in ((0, "0,2"), (1, "1,3"), (2, "0,2"), (3, "1,3")):
        (tmp_path / "cpu" / f"cpu{cpu}" / "topology").mkdir(parents=True)
        (tmp_path / "cpu" / f"cpu{cpu}" / "topology" / "thread_siblings_list").write_text(siblings)
    assert sibling_groups([0, 1, 2, 3], tmp_path / "cpu") == [[0, 2], [1, 3]]
    (tmp_path / "pci" / "0000:1b:00.0").mkdir(parents=True)
    (tmp_path / "pci" / "0000:1b:00.0" / "numa_node").write_text("1\n")
    assert pci_numa_node("00000000:1B:00.0", tmp_path / "pci") == 1
    assert pci_numa_node("00000000:2B:00.0", tmp_path / "pci") is None


PINNED_CHILD = """
import os, subprocess, sys, threading
from executor.fleet.pinning import pin_process
started = threading.Event(); go = threading.Event(); seen = {}
def later():  # a thread that existed before the pinning starts a worker after it
    started.set(); go.wait()
    out = subprocess.run([sys.executable, "-c", "import os; print(sorted(os.sched_getaffinity(0)))"],
                         capture_output=True, text=True, check=True)
    seen["child"] = out.stdout.strip()
thread = threading.Thread(target=later); thread.start(); started.wait()
pin_process([int(sys.argv[1])])
go.set(); thread.join()
print(seen["child"])
"""


def test_a_pinned_replicas_workers_inherit_its_cores_whichever_thread_starts_them() -> None:
    cpu = min(os.sched_getaffinity(0))
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    out = subprocess.run(
        [sys.executable, "-c", PINNED_CHILD, str(cpu)], capture_output=True, text=True, env=env, check=True
    )
    assert out.stdout.strip() == f"[{cpu}]"
