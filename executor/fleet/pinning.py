"""Each replica of a host on cores of its own: the replicas' host-timed trials kept apart from the others'
CPU work.

Replicas on one host share the host: a function task's trials are timed on the host clock, so another
replica's builds, serial references, input generation and host copies running on the same cores (or
beside them on the same memory controller) scatter its samples, and the adaptive trials stop later (a
correct function candidate's trials went from 6.9 to 15.2 on average with four replicas on one H200
host). Copies between host memory and a GPU are kept apart by the host's own lock instead
(:mod:`executor.gpulock`: cores of its own do not keep a replica's copies from another's). So every
replica pins itself, before it starts any worker, to a share of the host's cores that no other replica
of the host gets (``os.sched_setaffinity``); its workers, builds and reference runs inherit it, and
memory that they touch first is then placed on the same NUMA node.

The share (:func:`plan_cores`): the host's GPUs in their order, each with the NUMA node of its PCI
device (``/sys/bus/pci/devices/<bus id>/numa_node``); a node's cores are split evenly among the GPUs on
it, whole physical cores at a time (both hyperthreads of a core go to one replica); without NUMA
information (one node, or a GPU on none), every core of the process's set is split among all the GPUs.
A replica takes its GPU's share whether or not the other GPUs have replicas: a fleet of one on a
four-GPU host then has the CPU of a one-GPU machine, and scaling runs compare like with like.
"""

from __future__ import annotations

import logging
import os
import shutil
import subprocess
from collections.abc import Mapping, Sequence
from pathlib import Path

logger = logging.getLogger(__name__)

NODES = Path("/sys/devices/system/node")
CPUS = Path("/sys/devices/system/cpu")
PCI = Path("/sys/bus/pci/devices")


def parse_cpulist(text: str) -> list[int]:
    """``0-3,8,10-11`` -> [0, 1, 2, 3, 8, 10, 11] (the kernel's cpulist format)."""
    cpus: list[int] = []
    for part in text.strip().split(","):
        if not part:
            continue
        low, _, high = part.partition("-")
        cpus.extend(range(int(low), int(high or low) + 1))
    return cpus


def format_cpulist(cpus: Sequence[int]) -> str:
    """[0, 1, 2, 3, 8] -> ``0-3,8``."""
    runs: list[list[int]] = []
    for cpu in sorted(set(cpus)):
        if runs and cpu == runs[-1][-1] + 1:
            runs[-1].append(cpu)
        else:
            runs.append([cpu])
    parts = [str(run[0]) if len(run) == 1 else f"{run[0]}-{run[-1]}" for run in runs]
    return ",".join(parts)


def node_cpus(root: Path = NODES) -> dict[int, list[int]]:
    """The CPUs of every NUMA node (empty where the kernel shows no nodes)."""
    nodes: dict[int, list[int]] = {}
    for entry in sorted(root.glob("node[0-9]*")) if root.is_dir() else []:
        try:
            nodes[int(entry.name[4:])] = parse_cpulist((entry / "cpulist").read_text())
        except (OSError, ValueError):
            continue
    return nodes


def sibling_groups(cpus: Sequence[int], root: Path = CPUS) -> list[list[int]]:
    """``cpus`` grouped by physical core (hyperthread siblings together), in the order of their first
    CPU; a CPU whose topology cannot be read is a core of its own."""
    groups: dict[str, list[int]] = {}
    allowed = set(cpus)
    for cpu in sorted(allowed):
        try:
            siblings = parse_cpulist((root / f"cpu{cpu}" / "topology" / "thread_siblings_list").read_text())
            key = format_cpulist([s for s in siblings if s in allowed] or [cpu])
        except (OSError, ValueError):
            key = str(cpu)
        groups.setdefault(key, []).append(cpu)
    return list(groups.values())


def _split(units: Sequence[list[int]], parts: int) -> list[list[int]]:
    """``units`` (physical cores) in ``parts`` contiguous runs as even as can be, each flattened."""
    out: list[list[int]] = []
    for k in range(parts):
        chosen = units[k * len(units) // parts : (k + 1) * len(units) // parts]
        out.append(sorted(cpu for unit in chosen for cpu in unit))
    return out


def plan_cores(
    gpu_nodes: Sequence[int | None],
    nodes: Mapping[int, Sequence[int]],
    allowed: Sequence[int],
    groups: Sequence[list[int]] | None = None,
) -> list[list[int]]:
    """Every GPU's cores (index: the GPU's position on the host), disjoint: a NUMA node's allowed cores
    split among the GPUs on that node, or, without usable NUMA information, all ``allowed`` cores split
    among all the GPUs. ``groups``: the allowed CPUs by physical core (default: each CPU alone). A GPU
    left without a core (more GPUs than cores) gets an empty list: it is not pinned."""
    allowed_set = set(allowed)
    units = [list(g) for g in (groups or [[cpu] for cpu in sorted(allowed_set)]) if set(g) <= allowed_set]
    count = len(gpu_nodes)
    if count == 0:
        return []
    by_node: dict[int, list[int]] = {}
    for index, node in enumerate(gpu_nodes):
        if node is not None:
            by_node.setdefault(node, []).append(index)
    usable = (
        len(nodes) > 1
        and all(node is not None for node in gpu_nodes)
        and all(allowed_set & set(nodes.get(node, ())) for node in by_node)
    )
    if not usable:
        return _split(units, count)
    plan: list[list[int]] = [[] for _ in range(count)]
    for node, gpus in by_node.items():
        mine = set(nodes[node])
        local = [u for u in units if set(u) <= mine]
        for gpu, cores in zip(gpus, _split(local, len(gpus)), strict=True):
            plan[gpu] = cores
    return plan


def host_gpus() -> list[tuple[str, str]]:
    """The host's GPUs as (index, PCI bus id), from nvidia-smi (empty without it)."""
    smi = shutil.which("nvidia-smi")
    if smi is None:
        return []
    try:
        out = subprocess.run(
            [smi, "--query-gpu=index,pci.bus_id", "--format=csv,noheader"],
            capture_output=True,
            text=True,
            timeout=30,
            check=False,
        )
    except (OSError, subprocess.TimeoutExpired):
        return []
    gpus = []
    for line in out.stdout.splitlines():
        index, _, bus = (part.strip() for part in line.partition(","))
        if index.isdigit():
            gpus.append((index, bus))
    return gpus


def pci_numa_node(bus_id: str, root: Path = PCI) -> int | None:
    """The NUMA node of a PCI device (nvidia-smi's ``00000000:1B:00.0`` form or the kernel's), or None."""
    domain, _, rest = bus_id.lower().partition(":")
    name = f"{domain[-4:]}:{rest}" if rest else bus_id.lower()
    try:
        node = int((root / name / "numa_node").read_text())
    except (OSError, ValueError):
        return None
    return node if node >= 0 else None


def pin_process(cores: Sequence[int]) -> None:
    """Pin every thread of this process to ``cores``: the mask is a thread's, and a Ray actor's threads
    (which start the workers and builds, who inherit their mask) may exist before it pins itself."""
    tasks = Path("/proc/self/task")
    for tid in [int(t.name) for t in tasks.iterdir()] if tasks.is_dir() else [0]:
        try:
            os.sched_setaffinity(tid, cores)
        except ProcessLookupError:  # a thread that ended meanwhile
            continue


def pin_replica(visible: str | None = None) -> list[int] | None:
    """Pin this process (and so every process it starts later) to the cores of its GPU's share
    (:func:`plan_cores`); the cores, or None when nothing was pinned (no single GPU named in
    ``CUDA_VISIBLE_DEVICES``, no nvidia-smi, or a share without cores)."""
    visible = os.environ.get("CUDA_VISIBLE_DEVICES", "") if visible is None else visible
    mine = visible.strip()
    gpus = host_gpus()
    indices = [index for index, _ in gpus]
    if not mine or "," in mine or mine not in indices:
        return None
    allowed = sorted(os.sched_getaffinity(0))
    plan = plan_cores([pci_numa_node(bus) for _, bus in gpus], node_cpus(), allowed, sibling_groups(allowed))
    cores = plan[indices.index(mine)]
    if not cores:
        return None
    try:
        pin_process(cores)
    except OSError as e:  # a sandbox that refuses affinities (gVisor may): the replica runs unpinned
        logger.warning("could not pin to cores %s: %s", format_cpulist(cores), e)
        return None
    logger.info("pinned to cores %s (GPU %s of %d)", format_cpulist(cores), mine, len(gpus))
    return cores
