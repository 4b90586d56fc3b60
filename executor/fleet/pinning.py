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

Within a process's cores (a replica's share, or a single executor's whole set), the timing cores
(:func:`split_timing_cores`, setting ``timing_cores``, ``REGRAPH_EXECUTOR_TIMING_CORES``; by default
automatic, :func:`auto_timing_cores`: 2 for a process with 16 CPUs or more in its own set, a replica's
share once pinned, 1 for 8-15, none below 8, counting no more CPUs than its cgroup v2 CPU quota lets it
use, :func:`cgroup_cpu_quota`; a value set, 0 included, wins; an unpinned replica,
:func:`executor.fleet.replica.replica_settings`, and a remote compile worker take 0 when it is unset,
in their settings, which the executor hands to its workers and builds; an automatic value is
the host's to give once, :func:`claim_reserved`): the last N CPUs of the set, whole physical cores at a
time, are kept for the worker whose
function task's trials are timed on the host clock, and only while it holds the trials' lock; the
rest run everything else: the candidates' compiles (nvcc and its children, NVRTC; :func:`compile_cores`
around a build, inherited by the processes it starts) and every worker outside its trials
(:class:`WorkerCores`: the executor starts every worker on the rest and hands it the split; the worker
moves to the reserved cores when it takes the trials' lock and back when it lets it go). A set too small to leave the rest a core is not
split (logged): compiles never get zero cores. A sandbox that refuses affinities leaves everything where
it was (logged), never fails a build or a run. Measured on one H200 with 16 CPUs in session 29: half
the trials of a correct function candidate with 2 (docs/executor.md).
"""

from __future__ import annotations

import contextlib
import fcntl
import functools
import logging
import os
import threading
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import IO

from executor.gpulock import lock_dir, open_lock
from executor.gpuquery import gpus_or_none

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
    """The host's GPUs as (index, PCI bus id), from nvidia-smi (:mod:`executor.gpuquery`; empty
    without it, or when it does not answer: logged)."""
    return [(index, bus) for index, bus in gpus_or_none(["index", "pci.bus_id"]) if index.isdigit()]


def pci_numa_node(bus_id: str, root: Path = PCI) -> int | None:
    """The NUMA node of a PCI device (nvidia-smi's ``00000000:1B:00.0`` form or the kernel's), or None."""
    domain, _, rest = bus_id.lower().partition(":")
    name = f"{domain[-4:]}:{rest}" if rest else bus_id.lower()
    try:
        node = int((root / name / "numa_node").read_text())
    except (OSError, ValueError):
        return None
    return node if node >= 0 else None


def pin_process(cores: Sequence[int], pid: int | str = "self") -> None:
    """Pin every thread of this process (or of process ``pid``) to ``cores``: the mask is a thread's,
    and a Ray actor's threads (which start the workers and builds, who inherit their mask) may exist
    before it pins itself."""
    tasks = Path(f"/proc/{pid}/task")
    try:
        tids = [int(t.name) for t in tasks.iterdir()]
    except OSError:  # no /proc (this process: its calling thread), or a process that ended meanwhile
        if pid != "self":
            return
        tids = [0]
    for tid in tids:
        try:
            os.sched_setaffinity(tid, cores)
        except ProcessLookupError:  # a thread that ended meanwhile
            continue


def descendants(pid: int | str = "self") -> list[int]:
    """The processes started by process ``pid`` and by theirs: from ``/proc/<pid>/task/<tid>/children``,
    or, where the kernel has no such file (gVisor may not), from every process's parent in
    ``/proc/<n>/stat`` (empty where neither can be read)."""
    root = os.getpid() if pid == "self" else int(pid)
    try:
        (Path(f"/proc/{root}/task/{root}") / "children").read_text()
    except FileNotFoundError:
        return _descendants_by_parent(root)
    except OSError:
        return []
    return _walk(root, _children_of_tasks)


def _walk(root: int, children_of: Callable[[int], list[int]]) -> list[int]:
    """Every process below ``root``, each once, as ``children_of`` names each one's children."""
    found: list[int] = []
    seen = {root}
    todo = [root]
    while todo:
        for child in children_of(todo.pop()):
            if child not in seen:
                seen.add(child)
                found.append(child)
                todo.append(child)
    return found


def _children_of_tasks(pid: int) -> list[int]:
    """The children of every thread of ``pid`` (``/proc/<pid>/task/<tid>/children``; none where
    unreadable)."""
    try:
        tasks = list(Path(f"/proc/{pid}/task").iterdir())
    except OSError:
        return []
    children: list[int] = []
    for task in tasks:
        try:
            children += [int(c) for c in (task / "children").read_text().split()]
        except (OSError, ValueError):
            continue
    return children


def _descendants_by_parent(root: int) -> list[int]:
    """:func:`descendants` of ``root`` from every process's parent in ``/proc/<n>/stat``."""
    parents: dict[int, list[int]] = {}
    for entry in Path("/proc").iterdir() if Path("/proc").is_dir() else []:
        if not entry.name.isdigit():
            continue
        try:
            # the parent is the second field after the command name, which may hold spaces and ")"
            ppid = int((entry / "stat").read_text().rsplit(")", 1)[1].split()[1])
        except (OSError, ValueError, IndexError):
            continue
        parents.setdefault(ppid, []).append(int(entry.name))
    return _walk(root, lambda pid: parents.get(pid, []))


def pin_tree(cores: Sequence[int]) -> None:
    """Pin every thread of this process and of every process it started (a worker's runner) to
    ``cores``, trying each of them even when one is refused; then the first refusal as OSError (a child
    that ended meanwhile, or one of another uid, is passed over)."""
    refused: OSError | None = None
    try:
        pin_process(cores)
    except OSError as e:
        refused = e
    try:
        children = descendants()
    except OSError as e:  # /proc not listable
        children, refused = [], refused or e
    for child in children:
        try:
            pin_process(cores, child)
        except (ProcessLookupError, PermissionError):
            continue
        except OSError as e:
            refused = refused or e
    if refused is not None:
        raise refused


# --- The timing cores: a worker's host-timed trials on cores that no compile uses --------------------

TIMING_CORES_ENV = "REGRAPH_EXECUTOR_TIMING_CORES"
# The split an executor hands its workers (``REST;RESERVED``, two cpulists), set by it in their
# environment (executor.sandbox), never by an operator.
TIMING_SPLIT_ENV = "REGRAPH_TIMING_SPLIT"


@dataclass(frozen=True)
class TimingSplit:
    """A process's cores split for its host-timed trials: ``reserved`` for a worker while it holds a
    function task's trials' lock, ``rest`` for everything else."""

    rest: tuple[int, ...]
    reserved: tuple[int, ...]

    def encode(self) -> str:
        """``0-13;14-15``: the form :data:`TIMING_SPLIT_ENV` carries."""
        return f"{format_cpulist(self.rest)};{format_cpulist(self.reserved)}"

    @classmethod
    def decode(cls, text: str) -> TimingSplit | None:
        """The split :meth:`encode` wrote, or None for anything else (empty, malformed, overlapping)."""
        rest_text, sep, reserved_text = text.strip().partition(";")
        try:
            rest, reserved = parse_cpulist(rest_text), parse_cpulist(reserved_text)
        except ValueError:
            return None
        if not sep or not rest or not reserved or set(rest) & set(reserved):
            return None
        return cls(rest=tuple(sorted(set(rest))), reserved=tuple(sorted(set(reserved))))


def auto_timing_cores(cpus: int) -> int:
    """The timing cores of a process with ``cpus`` CPUs (its own set: a replica's share once pinned)
    when none is asked for: 2 from 16 CPUs, 1 from 8, none below (on one H200 with 16 CPUs, session 29:
    docs/executor.md)."""
    if cpus >= 16:
        return 2
    return 1 if cpus >= 8 else 0


def timing_cores_env() -> int | None:
    """The timing cores asked for in this process's environment (:data:`TIMING_CORES_ENV`, which the
    setting ``timing_cores`` reads too; None when it is not set: automatic, :func:`resolve_timing_cores`);
    ValueError for a value that is not a whole number >= 0."""
    text = os.environ.get(TIMING_CORES_ENV, "").strip()
    if not text:
        return None
    try:
        value = int(text)
    except ValueError:
        value = -1
    if value < 0:
        raise ValueError(f"{TIMING_CORES_ENV} must be a whole number of cores >= 0 (0: off), not {text!r}")
    return value


def split_timing_cores(
    allowed: Sequence[int], count: int, groups: Sequence[list[int]] | None = None
) -> TimingSplit | None:
    """The last ``count`` CPUs of ``allowed`` reserved for host-timed trials, whole physical cores at a
    time (``groups``: the allowed CPUs by physical core, as :func:`sibling_groups`; default each CPU
    alone), so that no compile runs on a hyperthread of a reserved core; the rest for everything else.
    None when ``count`` is 0 or when the rest would be empty (the reservation is refused: compiles and
    the other workers never get zero cores)."""
    if count <= 0:
        return None
    allowed_set = set(allowed)
    units = [sorted(g) for g in (groups or []) if g and set(g) <= allowed_set]
    covered = {cpu for unit in units for cpu in unit}
    units += [[cpu] for cpu in sorted(allowed_set - covered)]
    units.sort(key=lambda unit: unit[0])
    reserved: list[int] = []
    for unit in reversed(units):
        if len(reserved) >= count:
            break
        reserved.extend(unit)
    rest = sorted(allowed_set - set(reserved))
    if not rest:
        return None
    return TimingSplit(rest=tuple(rest), reserved=tuple(sorted(reserved)))


@functools.lru_cache(maxsize=64)
def timing_split(count: int, allowed: tuple[int, ...]) -> TimingSplit | None:
    """:func:`split_timing_cores` of ``allowed`` with the host's physical cores, said once per
    ``(count, allowed)`` in the log (a refusal as a WARNING)."""
    if count <= 0:
        return None
    split = split_timing_cores(allowed, count, sibling_groups(allowed))
    if split is None:
        logger.warning(
            "timing cores: %d asked for (%s), but the allowed cores %s would leave the compiles none; "
            "nothing is reserved",
            count,
            TIMING_CORES_ENV,
            format_cpulist(allowed),
        )
        return None
    logger.info(
        "timing cores: host-timed trials on %s, compiles and other work on %s",
        format_cpulist(split.reserved),
        format_cpulist(split.rest),
    )
    return split


def process_cores() -> tuple[int, ...]:
    """This process's cores: its main thread's (a replica's share once :func:`pin_replica` pinned it),
    not the calling thread's, which a build narrows (:func:`compile_cores`)."""
    try:
        return tuple(sorted(os.sched_getaffinity(os.getpid())))
    except OSError:
        return tuple(sorted(os.sched_getaffinity(0)))


# cgroup v2's mount and this process's membership (its line ``0::<path>``), for the CPU quota.
CGROUP_ROOT = Path("/sys/fs/cgroup")
PROC_CGROUP = Path("/proc/self/cgroup")


def cgroup_cpu_quota(root: Path | None = None, membership: Path | None = None) -> float | None:
    """The CPUs' worth of time that cgroup v2's CPU controller lets this process use: each ``cpu.max``
    (``<quota> <period>`` in microseconds, or ``max``) from its cgroup up to the root, the least of
    them (a container limited to 4 CPUs whose affinity shows 64); None without a limit, or without
    cgroup v2 (``root``: default :data:`CGROUP_ROOT`; ``membership``: :data:`PROC_CGROUP`)."""
    root = CGROUP_ROOT if root is None else root
    try:
        lines = (PROC_CGROUP if membership is None else membership).read_text().splitlines()
    except OSError:
        return None
    path = next((line[3:].strip() for line in lines if line.startswith("0::")), None)
    if path is None:
        return None
    here = root / path.lstrip("/")
    limits: list[float] = []
    while True:
        try:
            quota, _, period = (here / "cpu.max").read_text().strip().partition(" ")
            if quota != "max":
                limits.append(int(quota) / int(period or "100000"))
        except (OSError, ValueError, ZeroDivisionError):
            pass  # no controller file here (or one not understood): no limit from this level
        if here == root or root not in here.parents:
            break
        here = here.parent
    return min(limits) if limits else None


def usable_cpus(cpus: int, quota: float | None) -> int:
    """How many of ``cpus`` CPUs (an affinity set) a process can keep busy under a CPU quota of
    ``quota`` CPUs (:func:`cgroup_cpu_quota`; None: no quota): whole CPUs, at least one."""
    if quota is None:
        return cpus
    return max(1, min(cpus, int(quota)))


def resolve_timing_cores(count: int | None, cpus: int | None = None) -> int:
    """``count`` timing cores, or when it is None (not asked for) the automatic value
    (:func:`auto_timing_cores`) of ``cpus`` CPUs (default: those this process can use,
    :func:`process_cpus`)."""
    if count is not None:
        return count
    return auto_timing_cores(process_cpus() if cpus is None else cpus)


def process_cpus() -> int:
    """How many CPUs this process can keep busy: those of :func:`process_cores`, no more than its
    cgroup's CPU quota (:func:`usable_cpus`)."""
    return usable_cpus(len(process_cores()), cgroup_cpu_quota())


def executor_split(count: int | None = None, allowed: Sequence[int] | None = None) -> TimingSplit | None:
    """The executor's split of ``allowed`` (default :func:`process_cores`) for ``count`` timing cores
    (default :func:`timing_cores_env`, and when that is not set the automatic value for the process's
    cores; an invalid value there is off here, the settings refuse it with a clear error), or None when
    off or refused. An automatic split is this process's only while it holds the host-wide claim on its
    reserved CPUs (:func:`claim_reserved`): another process that reserves one of them first leaves it
    none."""
    try:
        cores = process_cores() if allowed is None else tuple(sorted(set(allowed)))
        asked = timing_cores_env() if count is None else count
        # the automatic value from the CPUs the process can use: its cores, or fewer under a quota
        cpus = len(cores) if allowed is not None else process_cpus()
        split = timing_split(resolve_timing_cores(asked, cpus), cores)
    except (OSError, ValueError):
        return None
    if split is None:
        return None
    return split if claim_reserved(split, automatic=asked is None) else None


# The directory, under the host's lock directory (executor.gpulock.lock_dir), of the timing cores'
# claims: one lock file per reserved CPU (cpu-<n>.lock).
TIMING_CLAIMS_DIR = "timing-cores"


@dataclass
class _Claim:
    split: TimingSplit
    handles: list[IO[bytes]]
    refused_by: int | None  # a reserved CPU that another process holds, or None: all held here
    said: bool = False


_claim: _Claim | None = None
_claim_lock = threading.Lock()


def _release(handles: list[IO[bytes]]) -> None:
    for handle in handles:
        with contextlib.suppress(OSError):
            handle.close()  # the flock goes with its last descriptor


def _take(split: TimingSplit) -> _Claim:
    """A non-blocking exclusive ``flock`` on each reserved CPU's claim file, all or none."""
    directory = lock_dir() / TIMING_CLAIMS_DIR
    handles: list[IO[bytes]] = []
    try:
        directory.mkdir(parents=True, exist_ok=True)
        with contextlib.suppress(OSError):  # shared by the host's executors, whoever made it first
            directory.chmod(0o1777)
        for cpu in split.reserved:
            handle = open_lock(directory / f"cpu-{cpu}.lock")
            handles.append(handle)
            try:
                fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                _release(handles)
                return _Claim(split, [], refused_by=cpu)
    except OSError as e:  # no lock directory (a read-only /tmp): unclaimed, as before the claims
        logger.warning("timing cores: cannot claim %s host-wide (%s)", format_cpulist(split.reserved), e)
        _release(handles)
        return _Claim(split, [], refused_by=None)
    return _Claim(split, handles, refused_by=None)


def claim_reserved(split: TimingSplit, automatic: bool) -> bool:
    """Whether this process may reserve ``split.reserved`` for its trials. The host's processes that see
    the same CPUs (two executors started by hand, two test sessions, pods whose CPU limit is a quota)
    would each reserve the same last ones, and their trials would share them; so the first takes a
    host-wide claim (an exclusive ``flock`` on ``<lock dir>/timing-cores/cpu-<n>.lock`` for each
    reserved CPU, :func:`executor.gpulock.lock_dir`) and holds it for its life, and the kernel lets it go
    when the process ends. An *automatic* split whose CPUs another process holds is refused (False: no
    timing cores here, logged once); a value *set* by the operator is kept (True) and the collision
    logged once as a WARNING. The answer stays the same for the process's life for one split (a new
    split, after its cores changed, lets the old claim go and asks anew)."""
    global _claim
    with _claim_lock:
        claim = _claim
        if claim is None or claim.split != split:
            if claim is not None:
                _release(claim.handles)
            claim = _claim = _take(split)
        if claim.refused_by is None:
            return True
        if not claim.said:
            claim.said = True
            held = format_cpulist(split.reserved)
            if automatic:
                logger.info(
                    "timing cores: CPU %d of %s is reserved by another process of this host (its claim in "
                    "%s): none here (set %s to reserve them anyway)",
                    claim.refused_by,
                    held,
                    lock_dir() / TIMING_CLAIMS_DIR,
                    TIMING_CORES_ENV,
                )
            else:
                logger.warning(
                    "timing cores: CPU %d of %s is reserved by another process of this host too (%s is "
                    "set here): both processes' trials share it",
                    claim.refused_by,
                    held,
                    TIMING_CORES_ENV,
                )
        return not automatic


_refused: set[str] = set()


def _refusal(what: str, e: OSError, level: int = logging.WARNING) -> None:
    """Say once per process and kind that the kernel refused an affinity (a sandbox: gVisor may)."""
    if what in _refused:
        return
    _refused.add(what)
    logger.log(level, "timing cores: could not pin %s (%s); it runs unreserved", what, e)


@contextlib.contextmanager
def compile_cores(count: int | None) -> Iterator[TimingSplit | None]:
    """Run the calling thread (a build: NVRTC in it, nvcc and its children started by it, who inherit its
    mask) on the cores that :func:`executor_split` leaves to everything but the host-timed trials, and
    give it back its own cores after; nothing changes when ``count`` is 0, when the process's cores are
    too few, or when the kernel refuses (logged once). ``count`` None: as the environment says, else
    automatic (:func:`executor_split`)."""
    split = executor_split(count)
    if split is None:
        yield None
        return
    try:
        before = os.sched_getaffinity(0)
        os.sched_setaffinity(0, split.rest)
    except OSError as e:
        _refusal("a compile", e)
        yield None
        return
    try:
        yield split
    finally:
        with contextlib.suppress(OSError):
            os.sched_setaffinity(0, before)


class WorkerCores:
    """A worker's cores under its executor's split (:data:`TIMING_SPLIT_ENV`): the rest from its start
    (its executor starts it there already), the reserved ones while it holds a function task's trials'
    lock (:meth:`trials`). Inactive (nothing moves) without a split, or when the kernel refused; never
    raises for the cores. Refusals go to the log at INFO (a worker's log may be shown in a verdict)."""

    def __init__(self) -> None:
        self.split: TimingSplit | None = None

    def start(self) -> TimingSplit | None:
        """Read the split from the environment and move every thread to its rest; the split, or None."""
        split = TimingSplit.decode(os.environ.get(TIMING_SPLIT_ENV, ""))
        if split is not None:
            try:
                pin_tree(split.rest)
            except OSError as e:
                _refusal("this worker", e, logging.INFO)
                split = None
        self.split = split
        return split

    @contextlib.contextmanager
    def trials(self) -> Iterator[None]:
        """This process and its children (a runner) on the reserved cores while the block runs, then
        on the rest again."""
        split = self.split
        if split is None:
            yield
            return
        try:
            pin_tree(split.reserved)
        except OSError as e:
            # Part of the tree may have moved before the refusal: all of it back on the rest, and the
            # trials run unreserved (review 43: the worker stayed on the trials' cores for the rest of
            # its life when a child could not be moved).
            _refusal("the trials", e, logging.INFO)
            with contextlib.suppress(OSError):
                pin_tree(split.rest)
            yield
            return
        try:
            yield
        finally:
            try:
                pin_tree(split.rest)
            except OSError as e:
                _refusal("a worker after its trials", e, logging.INFO)


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
