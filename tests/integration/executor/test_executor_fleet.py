"""The executor fleet on a real Ray cluster on this machine: a head without CPUs, two worker nodes with
a ``fake_gpu`` each and a CPU-only worker node, each started by ``ray start`` as its own process group;
one replica per fake-GPU node (runtime ``none``), the fleet's compile worker on the CPU-only node (one
per CPU of the nodes without the GPU resource), the fleet's app served by uvicorn and driven by the
real client.

Static checks and compiles run for real (PyPI nvcc/NVRTC); the runtime stages report ``not_run`` as on
any machine without a GPU. One cluster serves the whole module; the last tests kill a fake-GPU node,
then the CPU-only node, then add a new CPU-only node.
"""

from __future__ import annotations

import contextlib
import os
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from executor.app import create_app
from executor.client import ExecutorClient
from executor.compile import DEFAULT_ARCH, Compiler
from executor.fleet.compilers import CONTROL_GROUP
from executor.fleet.router import Fleet
from executor.protocol import CandidateSource, EvaluateRequest, EvaluationOptions
from executor.settings import ExecutorSettings
from executor.taskformat import FunctionTask, KernelTask, load_task
from executor.verdict import ErrorKind, Verdict
from tests.support.raycluster import FAKE_GPU, RayCluster, shared_ray_cluster
from tests.support.servers import post_evaluation_and_hold, serve_in_thread

TASKS_DIR = Path(__file__).parents[2] / "unit" / "executor" / "fixtures" / "tasks"
ADVERSARIAL = Path(__file__).parents[2] / "gpu" / "adversarial"

# Starting three Ray nodes takes a minute or more on a busy 2-core machine.
pytestmark = pytest.mark.timeout(900)

KERNEL = (
    "__global__ void scale_kernel(long long count, double s, const double* in, double* out) {\n"
    "  long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x;\n"
    "  if (i < count) out[i] = s * in[i];\n}\n"
)


@pytest.fixture(scope="module")
def cluster(request: pytest.FixtureRequest) -> Iterator[RayCluster]:
    """A head without CPUs, two fake-GPU nodes and a CPU-only node, as started: this module's tests
    kill and add nodes (the cluster is handed on to test_executor_fleet_faults.py after them)."""
    with shared_ray_cluster(request, pristine=True) as c:
        yield c


CPU_NODE = 2  # the CPU-only worker node's index in the cluster


@pytest.fixture(scope="module")
def settings(tmp_path_factory: pytest.TempPathFactory) -> ExecutorSettings:
    return ExecutorSettings(
        cache_dir=tmp_path_factory.mktemp("cache"),
        runtime="none",
        prewarm_workers=False,
        compile_workers=2,
        fleet_gpu_resource=FAKE_GPU,
        fleet_affinity_depth=1,
        fleet_compilers_check_s=2,
    )


@pytest.fixture(scope="module")
def fleet(cluster: RayCluster, settings: ExecutorSettings) -> Iterator[Fleet]:
    started = Fleet(settings.model_copy(update={"ray": cluster.address}))
    started.start()
    yield started
    started.close()


@pytest.fixture(scope="module")
def fleet_url(fleet: Fleet, settings: ExecutorSettings) -> Iterator[str]:
    from executor.fleet.app import create_fleet_app

    with serve_in_thread(create_fleet_app(settings, fleet)) as url:
        yield url


@pytest.fixture(scope="module")
def client(fleet_url: str) -> Iterator[ExecutorClient]:
    with ExecutorClient(fleet_url, timeout_s=300) as c:
        yield c


@pytest.fixture(scope="module")
def single(settings: ExecutorSettings) -> Iterator[ExecutorClient]:
    """One executor without Ray, with the same settings: the verdicts the fleet must match."""
    with (
        serve_in_thread(create_app(settings.model_copy(update={"ray": None}))) as url,
        ExecutorClient(url, timeout_s=300) as c,
    ):
        yield c


@pytest.fixture(scope="module")
def saxpy() -> FunctionTask | KernelTask:
    return load_task(TASKS_DIR / "saxpy")


def _comparable(verdict: Verdict) -> dict[str, Any]:
    """A verdict without what differs between two runs of the same candidate: times and cache hits,
    the product's path (under the same cache), and the fleet's record."""
    data = verdict.model_dump(mode="json", exclude={"seconds", "fleet"})
    if data["compile"] is not None:
        for key in ("seconds", "cache_hit"):
            data["compile"].pop(key)
    return data


def test_device_lists_every_replica(client: ExecutorClient) -> None:
    device = client.device()
    assert len(device.gpus) == 2
    assert {g.replica for g in device.gpus} == {"replica-0", "replica-1"}
    assert len({g.node for g in device.gpus}) == 2  # one replica per worker node
    assert device.runtime == "none" and device.arch.startswith("sm_")  # the contract's fields
    # each replica says how its own GPU turns were used (the runtime "none" never takes one)
    assert all(
        g.turns is not None and g.turns.held_s == {"candidate": 0.0, "baseline": 0.0} for g in device.gpus
    )


def test_a_task_prepared_through_the_fleet_is_prepared_on_the_replica_its_candidates_go_to(
    client: ExecutorClient, settings: ExecutorSettings
) -> None:
    """``POST /v1/prepare`` on the fleet: forwarded once to the replica that becomes the task's home
    (which builds the task's reference: the runtime here is none), where its candidates then go."""
    task = load_task(TASKS_DIR / "histogram")  # new to this fleet
    built = set((settings.cache_dir / "reference").glob("*.so"))
    first = client.prepare(task)
    assert first.task_id == task.id and first.started and first.replica is not None
    deadline = time.monotonic() + 60
    while set((settings.cache_dir / "reference").glob("*.so")) == built and time.monotonic() < deadline:
        time.sleep(0.1)
    assert set((settings.cache_dir / "reference").glob("*.so")) - built, "the replica built nothing"
    again = client.prepare(task)
    assert not again.started and again.replica == first.replica
    verdict = client.evaluate(task, "__global__ void nothing() {}\n")  # whatever it says, where it runs
    assert verdict.fleet is not None and verdict.fleet.replica == first.replica


def test_a_waiting_prepare_through_the_fleet_answers_once_the_home_replica_prepared_the_task(
    client: ExecutorClient, settings: ExecutorSettings
) -> None:
    """``POST /v1/prepare`` with ``wait_s`` on the fleet: the router asks the task's home replica until
    it says the task is prepared, so the reference is built when the answer comes (the runtime here
    is none: no baseline is wanted, and the answer says so)."""
    task = load_task(TASKS_DIR / "row_sums_csr")  # new to this fleet
    built = set((settings.cache_dir / "reference").glob("*.so"))
    answer = client.prepare(task, wait_s=120)
    assert answer.started and answer.ready and answer.replica is not None, answer
    assert answer.baseline == "not_wanted" and answer.waited_s is not None
    assert set((settings.cache_dir / "reference").glob("*.so")) - built, "answered before the build"
    again = client.prepare(task, wait_s=120)
    assert not again.started and again.ready and again.replica == answer.replica, again


def test_same_verdicts_as_a_single_executor(
    client: ExecutorClient, single: ExecutorClient, saxpy: FunctionTask | KernelTask
) -> None:
    assert saxpy.naive_source is not None
    kernel_task = load_task(TASKS_DIR / "scale_kernel")
    items: list[tuple[FunctionTask | KernelTask, str]] = [
        (saxpy, saxpy.naive_source),
        (saxpy, saxpy.naive_source.replace("cudaFree(dx);", 'system("id"); cudaFree(dx);')),
        (saxpy, saxpy.naive_source.replace("blockIdx.x", "blockIdx.q")),
        (kernel_task, KERNEL),
    ]
    from_fleet = client.evaluate_batch(items)
    from_single = single.evaluate_batch(items)
    assert [v.error for v in from_fleet] == [
        ErrorKind.RUNTIME_NOT_AVAILABLE,
        ErrorKind.STATIC_REJECTED,
        ErrorKind.COMPILE_ERROR,
        ErrorKind.RUNTIME_NOT_AVAILABLE,
    ]
    assert [_comparable(v) for v in from_fleet] == [_comparable(v) for v in from_single]
    assert all(v.fleet is not None and v.fleet.attempts == 1 for v in from_fleet)
    assert all(v.fleet is None for v in from_single)


def test_compiles_run_on_the_cpu_only_node(
    cluster: RayCluster, fleet: Fleet, client: ExecutorClient, saxpy: FunctionTask | KernelTask
) -> None:
    assert saxpy.naive_source is not None
    cpu_node = cluster.node_id(CPU_NODE)[:8]
    assert len(fleet.compilers) == 1  # one per CPU of the nodes without a fake GPU: the CPU node's one
    # New sources (compile misses) of both kinds, a compile error among them, spread over both replicas.
    kernel_task = load_task(TASKS_DIR / "scale_kernel")
    items: list[tuple[FunctionTask | KernelTask, str]] = [
        *((saxpy, f"{saxpy.naive_source}\n// cpu node {i}\n") for i in range(3)),
        (saxpy, f"{saxpy.naive_source}\nnot CUDA at all;\n"),
        (kernel_task, f"{KERNEL}\n// cpu node\n"),
    ]
    verdicts = client.evaluate_batch(items)
    assert {v.fleet.replica for v in verdicts if v.fleet} == {"replica-0", "replica-1"}
    assert [v.error for v in verdicts] == [ErrorKind.RUNTIME_NOT_AVAILABLE] * 3 + [
        ErrorKind.COMPILE_ERROR,
        ErrorKind.RUNTIME_NOT_AVAILABLE,
    ]
    built_on = [v.fleet.compiled_on if v.fleet else None for v in verdicts]
    assert all(node is not None and node.endswith(cpu_node) for node in built_on), built_on
    assert all(v.fleet and v.fleet.node and not v.fleet.node.endswith(cpu_node) for v in verdicts)
    # The replicas stored the products where their own compiler would have: asked again, they answer
    # from their cache, without the compile worker.
    again = client.evaluate_batch(items[:1])
    assert again[0].compile is not None and again[0].compile.cache_hit
    assert again[0].fleet is not None and again[0].fleet.compiled_on is None


# A saxpy whose compile takes nvcc ten seconds or more (thrust's sort).
SLOW_COMPILE = (
    "#include <thrust/sort.h>\n#include <thrust/execution_policy.h>\n"
    'extern "C" void saxpy(int n, float a, const float* x, float* y) {\n'
    "  thrust::sort(thrust::device, y, y + n);\n}\n"
)
STOPPED_WITHIN_S = 5.0


def _command_line(pid: str) -> str:
    return Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")


def _on_a_compile_worker(pid: str) -> bool:
    """Whether the process ``pid`` runs below a compile worker (a Ray actor process whose title names
    the class), not below a replica, which builds in the same cache directory when it builds itself."""
    for _ in range(64):
        status = Path(f"/proc/{pid}/status").read_text()
        pid = next(line.split()[1] for line in status.splitlines() if line.startswith("PPid:"))
        if pid in ("0", "1"):
            return False
        if _command_line(pid).startswith("ray::CompileWorker"):
            return True
    return False


def _building(marker: str) -> list[str]:
    """The processes of this machine building on a compile worker in a directory whose name holds
    ``marker`` (the workers run in Ray's processes, not below this one): by their working directory
    (nvcc run as a user of its own or unjailed) or their command line (the namespace jail's spec names
    it)."""
    found = []
    for proc in Path("/proc").iterdir():
        if not proc.name.isdigit():
            continue
        with contextlib.suppress(OSError, StopIteration):
            line = _command_line(proc.name)
            where = ""
            with contextlib.suppress(OSError):
                where = os.readlink(proc / "cwd")
            if (marker in line or marker in where) and _on_a_compile_worker(proc.name):
                found.append(line[:200])
    return found


def test_a_build_given_up_is_stopped_on_its_compile_worker(
    fleet: Fleet,
    fleet_url: str,
    settings: ExecutorSettings,
    saxpy: FunctionTask | KernelTask,
    tmp_path: Path,
) -> None:
    """A caller that goes away while its candidate is built on a compile worker: the worker's nvcc is
    killed within seconds (it would hold the worker, which builds one at a time, to the compile limit
    for nobody), and nothing of the build is kept. A stop that reaches the worker before the build it
    stops starts nothing."""
    source = SLOW_COMPILE + f"// {tmp_path.name}\n"  # never built before
    item = EvaluateRequest(
        task=saxpy, candidate=CandidateSource(source=source), options=EvaluationOptions(correctness_sets=1)
    ).model_dump(mode="json")
    # Only this test builds now, and every build of this module's fleet is in its cache directory.
    compiler = Compiler.from_settings(settings, DEFAULT_ARCH)  # the replicas' (no GPU here) and the worker's
    marker = str(compiler.cache_dir / ".build-")
    caller = post_evaluation_and_hold(fleet_url, "/v1/evaluate", item, 120)
    started = time.monotonic()
    while not _building(marker):
        assert time.monotonic() < started + 120, "the build never started"
        time.sleep(0.1)
    caller.close()  # the caller goes away
    stopped = time.monotonic()
    while running := _building(marker):
        assert time.monotonic() < stopped + STOPPED_WITHIN_S, ("a build given up still runs", running)
        time.sleep(0.1)
    key = compiler.build_key(source, "shared_library")
    # The worker writes its record after its build's processes end: looked at for a while.
    while time.monotonic() < stopped + STOPPED_WITHIN_S + 1:
        assert compiler.cached(key, "shared_library") is None, "a stopped build was kept"
        time.sleep(0.1)
    # A stop that comes first: the build sent after it with the same ticket answers at once, unbuilt.
    import ray

    worker = fleet.compilers[0]
    early = SLOW_COMPILE + f"// {tmp_path.name} early\n"
    early_key = compiler.build_key(early, "shared_library")
    assert ray.get(worker.stop.options(concurrency_group=CONTROL_GROUP).remote("early"), timeout=60) is False
    answer = ray.get(
        worker.compile.remote(early_key, early, "shared_library", DEFAULT_ARCH, "early"), timeout=60
    )
    assert answer[:2] == (None, None), answer
    assert compiler.cached(early_key, "shared_library") is None


def test_each_task_stays_on_its_replica_and_a_burst_spreads(
    client: ExecutorClient, saxpy: FunctionTask | KernelTask
) -> None:
    assert saxpy.naive_source is not None
    kernel_task = load_task(TASKS_DIR / "block_sum")
    kernel = (ADVERSARIAL / "block_sum_correct.cu").read_text()
    # Two tasks new to the fleet, one candidate at a time, alternating: each task gets a home of its
    # own (the fleet is idle) and every later candidate of it goes there.
    homes: dict[str, set[str]] = {saxpy.id: set(), kernel_task.id: set()}
    for i in range(3):
        for task, source in ((saxpy, saxpy.naive_source), (kernel_task, kernel)):
            verdict = client.evaluate(task, f"{source}\n// home {i}\n")
            assert verdict.fleet is not None
            homes[task.id].add(verdict.fleet.replica)
    assert all(len(replicas) == 1 for replicas in homes.values()), homes
    assert homes[saxpy.id] != homes[kernel_task.id]
    burst = client.evaluate_batch([(saxpy, f"{saxpy.naive_source}\n// burst {i}\n") for i in range(4)])
    assert {v.fleet.replica for v in burst if v.fleet is not None} == {"replica-0", "replica-1"}
    assert all(v.error is ErrorKind.RUNTIME_NOT_AVAILABLE for v in burst)


def test_a_worker_node_killed_mid_batch_loses_no_evaluation(
    cluster: RayCluster, fleet: Fleet, client: ExecutorClient, saxpy: FunctionTask | KernelTask
) -> None:
    assert saxpy.naive_source is not None
    # Distinct sources: each is a compile miss, so the batch is still running when the node dies.
    items: list[tuple[FunctionTask | KernelTask, str]] = [
        (saxpy, f"{saxpy.naive_source}\n// killed {i}\n") for i in range(6)
    ]
    node = cluster.node_id(0)
    victim = next(r.name for r in fleet.replicas.values() if r.node is not None and r.node.endswith(node[:8]))
    survivor = next(name for name in fleet.replicas if name != victim)
    killer = threading.Timer(1.0, cluster.kill_worker, args=(0,))
    killer.start()
    started = time.monotonic()
    verdicts = client.evaluate_batch(items)
    killer.join()
    assert len(verdicts) == len(items)
    assert all(v.error is ErrorKind.RUNTIME_NOT_AVAILABLE and v.compile and v.compile.ok for v in verdicts)
    retried = [v for v in verdicts if v.fleet is not None and v.fleet.attempts == 2]
    assert retried, "no evaluation was running on the killed node"
    assert all(v.fleet is not None and v.fleet.replica == survivor for v in retried)
    assert all(victim in v.fleet.lost[0] for v in retried if v.fleet is not None)
    assert victim not in fleet.replicas and victim in fleet.retired
    assert time.monotonic() - started < 120


def test_a_lost_cpu_node_leaves_the_compiles_to_the_replicas(
    cluster: RayCluster, fleet: Fleet, client: ExecutorClient, saxpy: FunctionTask | KernelTask
) -> None:
    assert saxpy.naive_source is not None
    cluster.kill_worker(CPU_NODE)
    verdict = client.evaluate(saxpy, f"{saxpy.naive_source}\n// no cpu node\n")
    assert verdict.error is ErrorKind.RUNTIME_NOT_AVAILABLE and verdict.compile and verdict.compile.ok
    # Built by the replica, or (one host here: the nodes' compile workers build into the replicas' cache)
    # taken from the cache once the build that the lost node's worker had under way there was over (one
    # build of a key at a time over a cache, executor.compile); never the lost worker's answer.
    assert verdict.fleet is not None and verdict.fleet.compiled_on is None and verdict.fleet.attempts == 1


def test_a_cpu_node_that_joins_gets_compile_workers(
    cluster: RayCluster, fleet: Fleet, client: ExecutorClient, saxpy: FunctionTask | KernelTask
) -> None:
    """The CPU-only node is gone (the test before): a new one joins, the router's check of its compile
    workers starts one there and hands it to the replicas, and builds land on it again."""
    assert saxpy.naive_source is not None
    joined = cluster.node_id(cluster.add_worker(cpus=1))[:8]
    built_on: list[str | None] = []
    deadline = time.monotonic() + 180
    while time.monotonic() < deadline:
        verdict = client.evaluate(saxpy, f"{saxpy.naive_source}\n// after the join {len(built_on)}\n")
        assert verdict.compile is not None and verdict.compile.ok
        built_on.append(verdict.fleet.compiled_on if verdict.fleet else None)
        if built_on[-1] is not None:
            break
        time.sleep(1)
    assert built_on[-1] is not None and built_on[-1].endswith(joined), built_on
    assert len(fleet.compilers) == 1
