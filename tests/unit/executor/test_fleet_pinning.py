"""Each replica of a host on cores of its own (executor.fleet.pinning)."""

from __future__ import annotations

import os
import subprocess
import sys
from itertools import combinations
from pathlib import Path

import pytest

from executor.compile import Compiler
from executor.fleet import pinning
from executor.fleet.pinning import (
    TIMING_CORES_ENV,
    TIMING_SPLIT_ENV,
    auto_timing_cores,
    cgroup_cpu_quota,
    executor_split,
    format_cpulist,
    node_cpus,
    parse_cpulist,
    pci_numa_node,
    plan_cores,
    process_cores,
    process_cpus,
    resolve_timing_cores,
    sibling_groups,
    timing_cores_env,
    usable_cpus,
)
from executor.fleet.replica import replica_settings
from executor.gpulock import LOCK_DIR_ENV
from executor.sandbox import _probe, _worker_env
from executor.settings import ExecutorSettings

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


def test_automatic_timing_cores_follow_the_cpu_count_given() -> None:
    """Unset, the timing cores are 2 for a process with 16 CPUs or more of its own, 1 for 8-15, 0 below
    (session 29); a value set wins, 0 included."""
    assert [auto_timing_cores(n) for n in (0, 1, 2, 7, 8, 15, 16, 17, 64, 128)] == [
        0,
        0,
        0,
        0,
        1,
        1,
        2,
        2,
        2,
        2,
    ]
    assert resolve_timing_cores(None, 16) == 2 and resolve_timing_cores(None, 12) == 1
    assert resolve_timing_cores(None, 4) == 0
    assert resolve_timing_cores(0, 64) == 0 and resolve_timing_cores(3, 4) == 3


def _unset(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(TIMING_CORES_ENV, "")  # recorded, so that what a test sets is undone
    monkeypatch.delenv(TIMING_CORES_ENV)


def test_unset_is_automatic_and_none_here_below_eight_cpus(monkeypatch: pytest.MonkeyPatch) -> None:
    _unset(monkeypatch)
    assert timing_cores_env() is None
    assert ExecutorSettings().timing_cores is None
    assert Compiler.from_settings(ExecutorSettings(), "sm_90").timing_cores is None
    cpus = len(process_cores())
    if cpus >= 8:
        pytest.skip(f"{cpus} CPUs here: the automatic value reserves some")
    # the CI machine (2 CPUs): nothing changes
    assert resolve_timing_cores(timing_cores_env()) == 0 and executor_split() is None
    monkeypatch.setenv(TIMING_CORES_ENV, "1")  # set, it wins
    assert timing_cores_env() == 1 and ExecutorSettings().timing_cores == 1
    monkeypatch.setenv(TIMING_CORES_ENV, "0")
    assert timing_cores_env() == 0 and ExecutorSettings().timing_cores == 0 and executor_split() is None


def test_an_unpinned_replica_takes_no_timing_cores_without_touching_the_environment(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """An unpinned replica's settings say 0 timing cores when none is set, a value set stands, and
    nothing is written to the process's environment (review 45 F4: it named 0 there for its workers);
    the workers' split comes from the value handed to them, whatever the environment says."""
    _unset(monkeypatch)
    unpinned = replica_settings(ExecutorSettings(), pinned=False)
    assert unpinned.timing_cores == 0 and TIMING_CORES_ENV not in os.environ
    assert replica_settings(ExecutorSettings(), pinned=True).timing_cores is None
    assert replica_settings(ExecutorSettings(timing_cores=2), pinned=False).timing_cores == 2
    assert TIMING_CORES_ENV not in os.environ
    # The workers follow the setting handed to them, not the environment.
    monkeypatch.setenv(TIMING_CORES_ENV, "1")
    assert TIMING_SPLIT_ENV not in _worker_env(None, 0)
    split = executor_split(1)
    if split is None:
        pytest.skip("this machine's cores cannot be split for one timing core")
    assert _worker_env(None, 1)[TIMING_SPLIT_ENV] == split.encode()


def _cgroup(tmp_path: Path, limits: dict[str, str], member: str = "/kubepods/pod1/ctr") -> tuple[Path, Path]:
    """A cgroup v2 tree under ``tmp_path`` with ``cpu.max`` files (``limits``: a cgroup's path under the
    root, '' for the root, -> its cpu.max) and the membership file of a process in ``member``."""
    root = tmp_path / "cgroup"
    (root / member.lstrip("/")).mkdir(parents=True)
    for path, value in limits.items():
        (root / path / "cpu.max").write_text(value + "\n")
    membership = tmp_path / "proc-self-cgroup"
    membership.write_text(f"0::{member}\n")
    return root, membership


def test_the_cgroup_cpu_quota_is_read_along_the_process_s_cgroup(tmp_path: Path) -> None:
    root, membership = _cgroup(
        tmp_path / "a", {"kubepods/pod1/ctr": "max 100000", "kubepods/pod1": "400000 100000"}
    )
    assert cgroup_cpu_quota(root, membership) == 4.0  # the pod's limit, above the container's none
    root, membership = _cgroup(
        tmp_path / "b", {"kubepods/pod1/ctr": "150000 100000", "kubepods": "800000 100000"}
    )
    assert cgroup_cpu_quota(root, membership) == 1.5  # the least along the path
    root, membership = _cgroup(tmp_path / "c", {"": "max 100000"}, member="/")
    assert cgroup_cpu_quota(root, membership) is None  # no limit
    assert cgroup_cpu_quota(tmp_path / "none", tmp_path / "no-membership") is None  # no cgroup v2
    assert usable_cpus(64, 4.0) == 4 and usable_cpus(64, 1.5) == 1 and usable_cpus(2, 8.0) == 2
    assert usable_cpus(64, 0.5) == 1 and usable_cpus(64, None) == 64


def test_the_executor_counts_only_the_cpus_its_quota_lets_it_use(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The CPUs from which the automatic timing cores are sized: this process's affinity, cut to its
    cgroup's CPU quota, read from a fake cgroup tree (a container whose affinity shows 64 CPUs but
    whose cgroup lets it use 4 reserved 2 cores it could not keep busy)."""
    root, membership = _cgroup(tmp_path, {"kubepods/pod1/ctr": "100000 100000"})
    monkeypatch.setattr(pinning, "CGROUP_ROOT", root)
    monkeypatch.setattr(pinning, "PROC_CGROUP", membership)
    affinity = len(process_cores())
    assert process_cpus() == 1  # one CPU's worth of time, whatever the affinity shows
    (root / "kubepods/pod1/ctr/cpu.max").write_text("max 100000\n")
    assert process_cpus() == affinity  # no quota: the affinity
    (root / "kubepods/pod1/cpu.max").write_text(f"{100000 * (affinity + 8)} 100000\n")
    assert process_cpus() == affinity  # a quota above the affinity changes nothing
    _unset(monkeypatch)
    assert resolve_timing_cores(None) == auto_timing_cores(affinity)


def test_a_worker_probe_claims_no_timing_cores(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The runtime jail's start-up probe runs no trials, so it takes no host-wide claim on timing cores
    (review 30 F2: made without the executor's setting, it took the automatic split's claim for the
    process's life, an unpinned replica's too, whose setting is 0, and another executor of the host lost
    its timing cores). A real probe worker, on 32 CPUs as this process is told it has."""
    _unset(monkeypatch)
    monkeypatch.setenv(LOCK_DIR_ENV, str(tmp_path / "locks"))
    monkeypatch.setattr(pinning, "process_cores", lambda: tuple(range(32)))
    monkeypatch.setattr(pinning, "cgroup_cpu_quota", lambda *a, **k: None)
    monkeypatch.setattr(pinning, "_claim", None)
    assert replica_settings(ExecutorSettings(), pinned=False).timing_cores == 0
    ok, out = _probe("reference", "none", "none")
    assert ok, out
    assert pinning._claim is None  # nothing claimed, nothing held
    # what the automatic split of these CPUs would have claimed
    assert TIMING_SPLIT_ENV in _worker_env(None, None)
    claim = pinning._claim
    assert claim is not None and len(claim.handles) == 2
    pinning._release(claim.handles)
