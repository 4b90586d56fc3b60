"""A real Ray cluster on loopback for tests: a head and worker nodes, each started by ``ray start`` as
its own process group, so that one node can be killed (SIGKILL to the group) as a host would die.

The worker nodes carry a custom resource (``fake_gpu``) that the fleet places its replicas by, so the
executors (runtime ``none``) need no GPU. Every node gets its own ports: several raylets on one host
otherwise race for the same defaults. The head checks its nodes' health every second, so a killed node
is declared dead within about five seconds.

The modules of ``SHARING`` (one xdist group, run one after the other on one worker) share one cluster
(:func:`shared_ray_cluster`): a cluster start is three to four node starts, 15-35 s of both cores.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
RAY = str(Path(sys.executable).with_name("ray"))
FAKE_GPU = "fake_gpu"
# The modules that share one cluster (:func:`shared_ray_cluster`); tests/conftest.py puts them in one xdist
# group, so one worker runs them one after the other.
SHARING = (
    "tests/integration/executor/test_executor_fleet.py",
    "tests/integration/executor/test_executor_fleet_faults.py",
)


def _free_ports(count: int) -> list[int]:
    sockets = [socket.socket() for _ in range(count)]
    try:
        for s in sockets:
            s.bind(("127.0.0.1", 0))
        return [int(s.getsockname()[1]) for s in sockets]
    finally:
        for s in sockets:
            s.close()


@dataclass
class RayCluster:
    """The head's address, and the worker nodes' process groups (in start order)."""

    address: str
    temp_dir: Path
    env: dict[str, str]
    workers: list[subprocess.Popen[bytes]] = field(default_factory=list)
    manager_ports: list[int] = field(default_factory=list)
    head: subprocess.Popen[bytes] | None = None
    port_base: int = 20000  # worker-port ranges of this cluster: one block of 100 per node
    fake_gpu: list[bool] = field(default_factory=list)  # per worker node: whether it has the fake GPU
    killed: set[int] = field(default_factory=set)  # the worker nodes killed by kill_worker

    def live_fake_gpu_nodes(self) -> int:
        """How many worker nodes with the fake GPU have not been killed."""
        return sum(1 for i, gpu in enumerate(self.fake_gpu) if gpu and i not in self.killed)

    def node_id(self, index: int) -> str:
        """The Ray node id of worker node ``index`` (from its raylet's command line)."""
        group = self.workers[index].pid
        for proc in Path("/proc").iterdir():
            if not proc.name.isdigit():
                continue
            with contextlib.suppress(OSError):
                if os.getpgid(int(proc.name)) != group:
                    continue
                for arg in (proc / "cmdline").read_bytes().split(b"\0"):
                    if arg.startswith((b"--node_id=", b"--node-id=")):
                        return arg.split(b"=", 1)[1].decode()
        raise LookupError(f"no raylet found for worker node {index}")

    def add_worker(self, cpus: int = 1, fake_gpu: bool = False, timeout_s: float = 240.0) -> int:
        """Start one more worker node (``fake_gpu``: with one unit of the fake GPU); its index."""
        index = len(self.workers)
        self.manager_ports.append(_free_ports(1)[0])
        args = [
            f"--address={self.address}",
            f"--num-cpus={cpus}",
            *([f'--resources={{"{FAKE_GPU}": 1}}'] if fake_gpu else []),
            "--object-store-memory=100000000",
            *_node_ports(self.manager_ports[-1], self.port_base + 100 * (index + 1)),
        ]
        self.workers.append(_start_node(args, self.env, self.temp_dir / f"worker-{index}.log", timeout_s))
        self.fake_gpu.append(fake_gpu)
        return index

    def kill_worker(self, index: int) -> None:
        """Kill worker node ``index`` at once: its raylet, agents and every actor process on it (Ray
        starts those in sessions of their own, so they are found by their raylet's port)."""
        process = self.workers[index]
        self.killed.add(index)
        with contextlib.suppress(ProcessLookupError):
            os.killpg(process.pid, signal.SIGKILL)
        _kill_matching(f"--node-manager-port={self.manager_ports[index]}".encode())
        process.wait(timeout=30)


def _kill_matching(marker: bytes) -> None:
    """SIGKILL every process whose command line contains ``marker``."""
    for proc in Path("/proc").iterdir():
        if not proc.name.isdigit() or int(proc.name) == os.getpid():
            continue
        with contextlib.suppress(OSError):
            if marker in (proc / "cmdline").read_bytes():
                os.kill(int(proc.name), signal.SIGKILL)


def _worker_port_base(blocks: int = 10) -> int:
    """First port of this run's worker-port ranges (``blocks`` blocks of 100, one per node), below the
    kernel's ephemeral range: the other ports of a node are ephemeral ones the kernel hands out
    (``_free_ports``), and one of those inside a worker range makes ``ray start`` refuse to start
    (seen in CI: the object manager's port fell inside 35700-35799)."""
    low = 32768
    with contextlib.suppress(OSError, ValueError):
        low = int(Path("/proc/sys/net/ipv4/ip_local_port_range").read_text().split()[0])
    first, size = 10000, 100 * blocks
    slots = max(1, (low - first) // size)
    return first + (os.getpid() % slots) * size


def _node_ports(manager: int, first_worker_port: int) -> list[str]:
    objects, agent, agent_grpc, env_agent, metrics = _free_ports(5)
    return [
        f"--node-manager-port={manager}",
        f"--object-manager-port={objects}",
        f"--dashboard-agent-listen-port={agent}",
        f"--dashboard-agent-grpc-port={agent_grpc}",
        f"--runtime-env-agent-port={env_agent}",
        f"--metrics-export-port={metrics}",
        f"--min-worker-port={first_worker_port}",
        f"--max-worker-port={first_worker_port + 99}",
    ]


def _start(args: list[str], env: dict[str, str], log: Path) -> subprocess.Popen[bytes]:
    with log.open("wb") as out:
        return subprocess.Popen(
            [RAY, "start", "--block", "--disable-usage-stats", "--node-ip-address=127.0.0.1", *args],
            env=env,
            stdout=out,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )


def _wait_started(process: subprocess.Popen[bytes], log: Path, timeout_s: float) -> None:
    deadline = time.monotonic() + timeout_s
    while "Ray runtime started" not in log.read_text(errors="replace"):
        if process.poll() is not None or time.monotonic() > deadline:
            raise RuntimeError(f"a Ray node did not start:\n{log.read_text(errors='replace')[-2000:]}")
        time.sleep(0.2)


def _start_node(args: list[str], env: dict[str, str], log: Path, timeout_s: float) -> subprocess.Popen[bytes]:
    """Start a node, again if it fails: a raylet gives its agents 15 s to start, which a
    loaded 2-core machine does not always give a fresh Python (the next try finds its files cached)."""
    for attempt in range(3):
        process = _start(args, env, log)
        try:
            _wait_started(process, log, timeout_s)
            return process
        except RuntimeError:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(process.pid, signal.SIGKILL)
            process.wait(timeout=30)
            if attempt == 2:
                raise
    raise AssertionError("unreachable")


@contextlib.contextmanager
def ray_cluster(
    workers: int = 2,
    worker_cpus: int = 1,
    timeout_s: float = 240.0,
    cpu_workers: int = 0,
    head_cpus: int = 1,
) -> Iterator[RayCluster]:
    """Start a head (no fake GPU, ``head_cpus`` CPUs), ``workers`` nodes with one ``fake_gpu`` each, then
    ``cpu_workers`` nodes with only CPUs (``worker_cpus`` each; they come after the GPU nodes in
    ``RayCluster.workers``); kill them all after."""
    temp_dir = Path(tempfile.mkdtemp(prefix="rgray-", dir="/tmp"))  # short: Ray's socket paths
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")])),
        "RAY_USAGE_STATS_ENABLED": "0",
        # No token authentication, whatever a local ray.init() left in ~/.ray: the driver (this
        # process, see below) and every node must agree.
        "RAY_AUTH_MODE": "disabled",
        "RAY_health_check_period_ms": "1000",
        "RAY_health_check_timeout_ms": "2000",
        "RAY_health_check_failure_threshold": "4",
        # A loaded CI machine: the raylet waits for its agents, the CLI for the raylet, longer.
        "RAY_agent_register_timeout_ms": "120000",
        "RAY_raylet_start_wait_time_s": "120",
        # No Python workers started ahead: they would compete with the agents' start-up for the CPU.
        "RAY_enable_worker_prestart": "0",
        "RAY_prestart_worker_first_driver": "0",
    }
    (gcs,) = _free_ports(1)
    saved_mode = os.environ.get("RAY_AUTH_MODE")
    os.environ["RAY_AUTH_MODE"] = "disabled"
    base = _worker_port_base()
    cluster = RayCluster(address=f"127.0.0.1:{gcs}", temp_dir=temp_dir, env=env, port_base=base)
    try:
        head_log = temp_dir / "head.log"
        cluster.head = _start_node(
            [
                "--head",
                f"--port={gcs}",
                f"--num-cpus={head_cpus}",
                "--include-dashboard=false",
                "--object-store-memory=100000000",
                f"--temp-dir={temp_dir}",
                *_node_ports(_free_ports(1)[0], base),
            ],
            env,
            head_log,
            timeout_s,
        )
        for index in range(workers + cpu_workers):
            cluster.add_worker(worker_cpus, fake_gpu=index < workers, timeout_s=timeout_s)
        yield cluster
    finally:
        for process in [*cluster.workers, *([cluster.head] if cluster.head else [])]:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(process.pid, signal.SIGKILL)
            with contextlib.suppress(subprocess.TimeoutExpired):
                process.wait(timeout=30)
        _kill_matching(str(temp_dir).encode())  # the actors' worker processes, in their own sessions
        shutil.rmtree(temp_dir, ignore_errors=True)
        if saved_mode is None:
            os.environ.pop("RAY_AUTH_MODE", None)
        else:
            os.environ["RAY_AUTH_MODE"] = saved_mode


# The cluster the SHARING modules share, and what stops it; at most one.
_shared: tuple[RayCluster, contextlib.ExitStack] | None = None


def _stop_shared() -> None:
    global _shared
    if _shared is not None:
        stack = _shared[1]
        _shared = None
        stack.close()


@contextlib.contextmanager
def shared_ray_cluster(request: pytest.FixtureRequest, pristine: bool) -> Iterator[RayCluster]:
    """For a module-scoped fixture of a SHARING module: a head without CPUs, two worker nodes with a
    fake GPU each and one CPU-only worker node (test_executor_fleet.py's cluster; the fault tests place
    no work by CPUs), started for the first SHARING module and handed on to the next one.

    ``pristine``: the module needs the cluster as started (no node killed or added), else a new one is
    started; otherwise it needs two live fake-GPU nodes, and one is added for each that an earlier
    module killed. The cluster is stopped after the module unless a SHARING module's test is still to
    run in this session (and at the latest when pytest ends)."""
    global _shared
    if _shared is not None:
        cluster = _shared[0]
        if pristine and (cluster.killed or len(cluster.workers) != 3):
            _stop_shared()
    if _shared is None:
        stack = contextlib.ExitStack()
        cluster = stack.enter_context(ray_cluster(workers=2, cpu_workers=1, head_cpus=0))
        _shared = (cluster, stack)
        request.config.add_cleanup(_stop_shared)
    cluster = _shared[0]
    while cluster.live_fake_gpu_nodes() < 2:
        cluster.add_worker(fake_gpu=True)
    try:
        yield cluster
    finally:
        module = request.node.nodeid.split("::")[0]
        items = request.session.items
        last = max((i for i, item in enumerate(items) if item.nodeid.split("::")[0] == module), default=-1)
        if not any(item.nodeid.split("::")[0] in SHARING for item in items[last + 1 :]):
            _stop_shared()
