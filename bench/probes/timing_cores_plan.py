"""What timing cores a fleet's replicas on this host will take (``executor.fleet.pinning``), for a device
script's environment line: the value set in ``REGRAPH_EXECUTOR_TIMING_CORES``, or, unset, each pinned
replica's automatic value of its own share (review 45 F8: run_scaling_warm_x2.sh printed 0 when unset,
while each 16-CPU replica reserved 2). The shares are planned as the replicas plan them (:func:`plan_cores`
over nvidia-smi's GPUs); without GPUs, or with ``fleet_pin_cores`` off, the replicas are unpinned and
take 0 unless it is set.

Usage: python -m bench.probes.timing_cores_plan     (one line on stdout)
"""

from __future__ import annotations

import os

from executor.fleet.pinning import (
    auto_timing_cores,
    format_cpulist,
    host_gpus,
    node_cpus,
    pci_numa_node,
    plan_cores,
    sibling_groups,
    split_timing_cores,
    timing_cores_env,
)
from executor.settings import ExecutorSettings


def plan_line() -> str:
    """One line: the value set, or every replica's automatic value and reserved CPUs."""
    asked = timing_cores_env()
    if asked is not None:
        return f"{asked} (set)"
    if not ExecutorSettings().fleet_pin_cores:
        return "automatic: replicas unpinned (fleet_pin_cores off), 0"
    gpus = host_gpus()
    if not gpus:
        return "automatic: no GPU named by nvidia-smi, replicas unpinned, 0"
    allowed = sorted(os.sched_getaffinity(0))
    plan = plan_cores([pci_numa_node(bus) for _, bus in gpus], node_cpus(), allowed, sibling_groups(allowed))
    parts = []
    for (index, _), cores in zip(gpus, plan, strict=True):
        count = auto_timing_cores(len(cores)) if cores else 0
        split = split_timing_cores(cores, count, sibling_groups(cores)) if count else None
        reserved = f" on {format_cpulist(split.reserved)}" if split is not None else ""
        parts.append(f"GPU {index}: {count if split is not None else 0} of {len(cores)} CPUs{reserved}")
    return "automatic, each pinned replica's own (" + "; ".join(parts) + ")"


if __name__ == "__main__":
    print(plan_line())
