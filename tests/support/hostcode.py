"""Host-code candidates for the worker tests of the ``host`` runtime: C++ sources compiled into shared
libraries with the system's g++ (the worker loads them and calls their entry through ctypes, as it
does a GPU function task's library), and the one-input function tasks they answer."""

from __future__ import annotations

import json
import subprocess
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest

from executor.compile import find_toolchain
from executor.errors import ToolchainError
from executor.evaluate import Evaluator
from executor.protocol import EvaluationOptions
from executor.reference import build_reference
from executor.sandbox import WorkerProcess, finish_candidate, run_job, start_candidate
from executor.settings import ExecutorSettings
from executor.taskformat import FunctionTask, KernelTask, load_task, parse_task
from executor.timingset import TimingSetSpec
from executor.worker.messages import CandidateRun, WorkerJob, WorkerOutcome, seeds_needed
from executor.worker.runner import CANDIDATE_PROCESS_ENV, LANDLOCK_ENV, landlock_version

# The executor tests' fixture tasks (`saxpy` above all), and what a function task's source must hold
# besides its entry (a kernel it could launch, never launched), with saxpy's head and honest body.
FIXTURE_TASKS = Path(__file__).parents[1] / "unit" / "executor" / "fixtures" / "tasks"
STUB = "\n__global__ void stub_kernel() {}\nstatic void never_called() { stub_kernel<<<1, 1>>>(); }\n"
SAXPY_HEAD = 'extern "C" void saxpy(int n, float a, const float* x, float* y) {\n'
SAXPY_CORRECT = SAXPY_HEAD + "for (int i = 0; i < n; ++i) y[i] = a * x[i] + y[i]; }" + STUB
# A timing size for saxpy that its tests may choose when what they check does not depend on it: 256 Ki
# floats (1 MiB an array) instead of the fixture's 4 Mi (16 MiB). Every evaluation makes, copies, runs
# the reference on and compares its timing-size sets: at the fixture's size that was about 1 s of each
# evaluation's 1.8-4.3 s at load 12 (session 30: three evaluations of a correct saxpy with prepared
# workers, 5.6-7.1 s against 3.6-4.3 s).
SMALL_TIMING_N = 262144


def saxpy_timed_at(n: int = SMALL_TIMING_N) -> FunctionTask | KernelTask:
    """The fixture task ``saxpy`` (the same id, entry, sources and test size) timed at ``n`` floats."""
    data = load_task(FIXTURE_TASKS / "saxpy").model_dump(mode="json")
    data["params"]["n"]["timing"] = n
    return parse_task(data)


# Two test-size sets, one timing-size set and the first again: 4 correctness calls, then 1 warm-up call
# (5 checked calls), then four to six timed calls.
FIVE_CHECKED = EvaluationOptions(
    correctness_sets=2,
    timing_size_checks=1,
    warmup=1,
    min_trials=4,
    max_trials=6,
    min_timing_ms=0,
    reference_repeats=1,
    baseline=False,
)

# executor/gpulock.py, which imports the standard library only: the lock-holder processes of the tests
# load it alone (gpulock_alone), not the package (numpy, pydantic), and start in a tenth of the time.
GPULOCK = Path(__file__).resolve().parents[2] / "executor" / "gpulock.py"


def gpulock_alone(path: str) -> str:
    """A script's first lines: ``gpulock`` loaded from the file at ``path`` (a Python expression, e.g.
    ``sys.argv[1]``) alone, not as part of the package."""
    return (
        "import importlib.util, sys\n"
        f'spec = importlib.util.spec_from_file_location("gpulock", {path})\n'
        "gpulock = importlib.util.module_from_spec(spec)\n"
        'sys.modules["gpulock"] = gpulock\n'
        "spec.loader.exec_module(gpulock)\n"
    )


# A saxpy (the fixture task's entry) that dereferences a null pointer on the host after its first CUDA
# calls: in a runner, a fault of the candidate's process (tests/gpu/test_candidate_process_gpu.py,
# bench/probes/runner_check.py).
CUDA_HOST_FAULT = (
    "#include <cuda_runtime.h>\n"
    "__global__ void touch_kernel(float* y) { y[0] = 0.0f; }\n"
    'extern "C" void saxpy(int n, float a, const float* x, float* y) {\n'
    "    float* d; cudaMalloc(&d, sizeof(float)); touch_kernel<<<1, 1>>>(d); cudaDeviceSynchronize();\n"
    "    volatile float* never = nullptr; *never = a;\n"
    "}\n"
)
# Few sets and trials: two test-size sets, one timing-size set, the repeat of the first (four
# correctness calls), one warm-up call or more, three to five timed calls.
FAST = EvaluationOptions(
    correctness_sets=2,
    timing_size_checks=1,
    warmup=1,
    min_trials=3,
    max_trials=5,
    min_timing_ms=0,
    rotate_buffers=2,
    reference_repeats=1,
    baseline=False,
)


def build_host_candidates(out: Path, sources: dict[str, str]) -> dict[str, str]:
    """Compile each named C++ source in ``sources`` into ``out/NAME.so``; the libraries' paths by name."""
    built = {}
    for name, source in sources.items():
        src, lib = out / f"{name}.cpp", out / f"{name}.so"
        src.write_text(source)
        subprocess.run(["g++", "-O1", "-shared", "-fPIC", str(src), "-o", str(lib)], check=True)
        built[name] = str(lib)
    return built


def saxpy_worker_job(tmp: Path, source: str) -> tuple[WorkerJob, str]:
    """The fixture saxpy's host-runtime worker job (its reference built under ``tmp``, seeds 11-44,
    :data:`FAST`) and ``source`` built plainly (no static rules) as its candidate's library, for a
    jailed worker a test starts itself; ``tmp`` opened to the jail's uid (the reference's library)."""
    tmp.chmod(0o755)
    task = load_task(FIXTURE_TASKS / "saxpy")
    cache, products = tmp / "cache", tmp / "products"
    cache.mkdir()
    products.mkdir()
    job = WorkerJob(
        task=task,
        runtime="host",
        reference_library=str(build_reference(task, cache)),
        seeds=[11, 22, 33, 44],
        options=FAST,
    )
    return job, build_host_candidates(products, {"candidate": source})["candidate"]


def run_saxpy_job(
    proc: WorkerProcess, job: WorkerJob, product: str, memory_limit_bytes: int | None = None
) -> WorkerOutcome:
    """:func:`saxpy_worker_job`'s job and candidate in ``proc`` (a candidate worker the test started),
    handed over as the evaluator does, with ``memory_limit_bytes`` (None: no limit); ``proc`` is left to
    the caller to close."""
    start_candidate(proc, job, memory_limit_bytes)
    return finish_candidate(
        proc,
        CandidateRun(candidate_product=product, candidate_symbol="saxpy"),
        timeout_s=120,
        memory_limit_bytes=memory_limit_bytes,
    )


_C_TYPES = {"float32": "float", "float64": "double"}


def one_input_task(
    task_id: str,
    *,
    domain: str,
    description: str,
    timing: int,
    output: tuple[str, str, str] = ("y", "float32", "n"),
    low: float = -1.0,
    high: float = 1.0,
    rtol: float = 1e-6,
    atol: float = 1e-6,
) -> dict[str, Any]:
    """The ``task.json`` of a function task ``void ID(int n, const float* x, T* OUT)``: ``n`` is 1000 at
    the test size and ``timing`` at the timing size, ``x`` uniform in [low, high]; ``output`` is OUT's
    (name, dtype, size: ``"n"`` or a number), compared to the reference within rtol/atol."""
    name, dtype, size = output
    return {
        "format": "regraph.task/v1",
        "kind": "function",
        "id": task_id,
        "domain": domain,
        "description": description,
        "entry": task_id,
        "signature": f"void {task_id}(int n, const float* x, {_C_TYPES[dtype]}* {name})",
        "params": {"n": {"test": 1000, "timing": timing}},
        "args": [
            {"name": "n", "kind": "scalar", "dtype": "int32", "value": "n"},
            {
                "name": "x",
                "kind": "array",
                "dtype": "float32",
                "size": "n",
                "intent": "in",
                "generator": {"dist": "uniform", "low": low, "high": high},
            },
            {"name": name, "kind": "array", "dtype": dtype, "size": size, "intent": "out"},
        ],
        "compare": {"rtol": rtol, "atol": atol},
    }


def write_task(parent: Path, spec: dict[str, Any], reference: str) -> FunctionTask | KernelTask:
    """``parent/ID/`` with the task's ``task.json`` and its ``reference.cpp``, loaded."""
    directory = parent / str(spec["id"])
    directory.mkdir(parents=True)
    (directory / "task.json").write_text(json.dumps(spec))
    (directory / "reference.cpp").write_text(reference)
    return load_task(directory)


def run_on_timing_sets(
    task: FunctionTask | KernelTask,
    product: str,
    tmp: Path,
    options: EvaluationOptions,
) -> WorkerOutcome:
    """One host-runtime candidate job (:func:`timing_set_job`), start to finish in a fresh worker."""
    run = CandidateRun(candidate_product=product, candidate_symbol=task.entry)
    return run_job(timing_set_job(task, tmp, options), run, timeout_s=120)


def timing_set_job(
    task: FunctionTask | KernelTask, tmp: Path, options: EvaluationOptions, baseline_copies: bool = False
) -> WorkerJob:
    """A host-runtime worker job with the seeds its options draw (11, 22, 33, ...; at least three) and
    the task's timing sets stored under ``tmp`` (its reference built there too). The default options
    draw four (three correctness sets and a timing-size set): three were once given, and the GPU test
    that builds its job here died with "3 seeds for 4 input sets" on an H200."""
    return WorkerJob(
        task=task,
        runtime="host",
        reference_library=str(build_reference(task, tmp / "cache")),
        seeds=[11 * (i + 1) for i in range(max(3, seeds_needed(options)))],
        options=options,
        timing_set=TimingSetSpec(dir=str(tmp / "timing-set"), seed=4242),
        baseline_copies=baseline_copies,
    )


@contextmanager
def host_evaluator(cache_dir: Path, **settings: Any) -> Iterator[Evaluator]:
    """An evaluator of the host runtime, with ``settings`` over the defaults here (the test is skipped
    where there is no nvcc to build with)."""
    try:
        find_toolchain()
    except ToolchainError:
        pytest.skip("no nvcc here")
    built = Evaluator(
        ExecutorSettings(**{"cache_dir": cache_dir, "runtime": "host", "run_timeout_s": 120, **settings})
    )
    try:
        yield built
    finally:
        built.close()


def use_candidate_process(patch: pytest.MonkeyPatch) -> None:
    """Function candidates always in a process of their own (:mod:`executor.worker.runner`,
    ``REGRAPH_EXECUTOR_CANDIDATE_PROCESS=1``) for the workers started from now on; where the kernel has
    no Landlock, its switch off too, since a runner refuses to run unconfined unless told to."""
    patch.setenv(CANDIDATE_PROCESS_ENV, "1")
    if landlock_version() == 0:
        patch.setenv(LANDLOCK_ENV, "0")


def use_worker_process(patch: pytest.MonkeyPatch) -> None:
    """Function candidates in their workers' process (``REGRAPH_EXECUTOR_CANDIDATE_PROCESS=0``, as
    before session 23) for the workers started from now on: for a test of what a candidate there can
    do or is checked for (tests/conftest.py sets the same for the suite, which a test may not rely on)."""
    patch.setenv(CANDIDATE_PROCESS_ENV, "0")


def use_default_candidate_process(patch: pytest.MonkeyPatch) -> None:
    """The executor's default for where a function candidate runs (``auto``: a process of its own
    wherever a runner can confine itself, else its worker's), which tests/conftest.py sets aside for
    the suite, for the workers started from now on."""
    patch.delenv(CANDIDATE_PROCESS_ENV, raising=False)


def run_job_showing_stderr(job: WorkerJob, run: CandidateRun, timeout_s: float) -> tuple[WorkerOutcome, str]:
    """:func:`executor.sandbox.run_job`, and everything the worker and its runner wrote on stderr (the
    verdict shows only what the worker wrote before the hand-over): for a test's failure message."""
    from executor.sandbox import WorkerProcess, _job_dirs, finish_candidate, start_candidate

    proc = WorkerProcess("candidate", job.runtime, None, binds=_job_dirs(job))
    try:
        start_candidate(proc, job, None)
        outcome = finish_candidate(proc, run, timeout_s, None)
        texts = []
        for path in (proc.stderr_path, proc.dir / "runner.stderr"):
            data = path.read_bytes()[-8000:] if path.exists() else b""
            texts.append(f"--- {path.name} ---\n{data.decode('utf-8', 'replace')}")
        return outcome, "\n".join(texts)
    finally:
        proc.close()


def assert_no_gain(attack: WorkerOutcome, *honest: WorkerOutcome) -> None:
    """An attack that reached no memo: refused, or passed at no more than twice the honest code's
    speed (where it worked it passed at 1/60-1/1400 of the honest median). The honest code's speed is
    its fastest trial over the ``honest`` runs given: load on the machine only slows trials, and under
    the suite's load an honest run once took a median of 172 ms against its usual 64 (session 29, a
    clean-clone run), and once its fastest trial 218.8 ms against the attack's honest-speed 97.7 ms
    (session 35), which halved would have called an attack at the honest speed a gain."""
    assert honest, "at least one honest run"
    for run in honest:
        assert run.passed and run.candidate_timing is not None, run.message
    fastest = min(run.candidate_timing.min_ms for run in honest if run.candidate_timing is not None)
    if attack.passed:
        assert attack.candidate_timing is not None
        assert attack.candidate_timing.median_ms > fastest / 2, (
            attack.candidate_timing,
            [run.candidate_timing for run in honest],
        )
