"""The candidate process on a GPU, step by step, its stderr shown (:mod:`executor.worker.runner`).

    python -m bench.probes.runner_check --out "$OUT/runner_check"

Outside the executor and its jail: for each case a child process plays the worker (it makes its own
CUDA context first, as a GPU worker has one, then starts a runner ``Runner("gpu")`` in a directory of
its own) and does what a worker does, one step at a time, printing each step's result and time as a
JSON line: the runner's start-up (its first answer, then its CUDA context at the ``start`` request),
the empty and L2-flush round trips, the load of the candidate's library, three calls on shared
arrays (checked where the answer is known), then a copy to and from the device in the worker's own
context (the worker is non-dumpable by then). A case that stalls is killed after ``--case-timeout``
seconds; the last step it printed says where. For every case the report shows the child's exit, its
steps, its own stderr and the runner's (``runner.stderr`` in its directory), uncut.

The cases: the task fixture's naive saxpy (CUDA, nvcc), a saxpy that faults on the host after its
first CUDA calls (the GPU test's), the honest host-code poly_iter and the one that rewrites its
process's clock (tests/integration/executor/test_clock_attack.py), each with the runner confined
(Landlock and its seccomp filter), and the naive saxpy and the honest host code unconfined
(``REGRAPH_EXECUTOR_RUNNER_LANDLOCK=0``). Writes ``report.md`` and one directory per
case under ``--out``; exits 0 whatever the cases did (the report says).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shutil
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np

from executor.taskformat import FunctionTask, load_task

ROOT = Path(__file__).resolve().parents[2]
SAXPY = ROOT / "tests" / "unit" / "executor" / "fixtures" / "tasks" / "saxpy"
# CASE: (task, candidate, Landlock on)
CASES = {
    "naive": ("saxpy", "naive", True),
    "naive_unconfined": ("saxpy", "naive", False),
    "crash": ("saxpy", "crash", True),
    "host_honest": ("poly", "honest", True),
    "host_honest_unconfined": ("poly", "honest", False),
    "host_clock": ("poly", "clock", True),
}


def _emit(step: str, began: float, **fields: Any) -> None:
    print(
        json.dumps({"step": step, "ms": round((time.perf_counter() - began) * 1e3, 1), **fields}), flush=True
    )


def _build(work: Path) -> dict[str, str]:
    """The candidates' libraries (and the poly task's directory) in ``work``; a failed build is left
    out (its log is in ``work``)."""
    from tests.integration.executor.test_clock_attack import CLOCK, HONEST
    from tests.support.hostcode import CUDA_HOST_FAULT, build_host_candidates

    task = load_task(SAXPY)
    assert isinstance(task, FunctionTask) and task.naive_source is not None
    built: dict[str, str] = {}
    nvcc = shutil.which("nvcc") or "/usr/local/cuda/bin/nvcc"
    for name, source in (
        (("naive", task.naive_source), ("crash", CUDA_HOST_FAULT)) if Path(nvcc).exists() else ()
    ):
        src, lib = work / f"{name}.cu", work / f"{name}.so"
        src.write_text(source)
        done = subprocess.run(
            [nvcc, "-O2", "-shared", "-Xcompiler", "-fPIC", "-arch=native", str(src), "-o", str(lib)],
            capture_output=True,
            text=True,
            check=False,
        )
        (work / f"{name}.build.log").write_text(done.stdout + done.stderr)
        if done.returncode == 0:
            built[name] = str(lib)
    built.update(build_host_candidates(work, {"honest": HONEST, "clock": CLOCK}))
    _poly_task(work)
    return built


def _poly_task(work: Path) -> FunctionTask:
    from tests.integration.executor.test_clock_attack import HONEST
    from tests.integration.executor.test_executor_hacks_host import POLY_TASK
    from tests.support.hostcode import write_task

    directory = work / "poly_iter"
    task = load_task(directory) if directory.exists() else write_task(work, POLY_TASK, HONEST)
    assert isinstance(task, FunctionTask)
    return task


def run_case(name: str, work: Path, product: str, runtime: str) -> None:
    """One case, in this process (the worker's part); steps on stdout. ``runtime`` ``host``: the
    same without CUDA (to try the probe on a machine without a GPU)."""
    from executor.gpulock import LOCK_ENV, function_checks, function_reserve
    from executor.worker.runner import LANDLOCK_ENV, Runner, landlock_facts
    from executor.worker.runtime import CandidateFailed

    which, _, landlock = CASES[name]
    if not landlock:
        os.environ[LANDLOCK_ENV] = "0"
    task = load_task(SAXPY) if which == "saxpy" else _poly_task(work)
    assert isinstance(task, FunctionTask)
    began = time.perf_counter()
    _emit("facts", began, landlock=landlock_facts(), pid=os.getpid())
    worker_gpu: Any = None
    cuda: Any = None
    if runtime == "gpu":
        import pycuda.driver

        cuda = pycuda.driver
        from executor.worker.gpu import GpuContext

        worker_gpu = GpuContext()  # a GPU worker has its own context when it starts its runner
        _emit("worker_context", began, device=worker_gpu.device)
    home = work / name
    home.mkdir()
    os.chdir(home)
    # The executor's locks, held as a function candidate's run holds them (the runner must take none).
    os.environ[LOCK_ENV] = str(work / "gpu.lock")
    runner = Runner(runtime)
    _emit("spawned", began, runner_pid=runner.proc.pid)
    done = ["spawned"]
    try:
        with function_reserve(), function_checks():
            for step, fields in _steps(runner, task, product, cuda):
                done.append(step)
                _emit(step, began, **fields)
    except CandidateFailed as e:
        _emit("failed", began, after=done[-1], kind=e.kind.value, message=str(e))
    runner.stop()
    _emit("stopped", began, runner_exit=runner.proc.returncode)
    if worker_gpu is not None:
        worker_gpu.close()


def _steps(runner: Any, task: FunctionTask, product: str, cuda: Any) -> Iterator[tuple[str, dict[str, Any]]]:
    """What a worker does with its runner, a step at a time: each step's name and what it found."""
    from executor.worker.runner import SharedArrays

    runner.start()
    if runner.failure is not None:
        raise runner.failure
    yield "start", {}
    ping, flush = runner.roundtrip_s("ping", 5), runner.roundtrip_s("flush", 5)
    yield "roundtrips", {"ping_us": round(ping * 1e6, 1), "flush_us": round(flush * 1e6, 1)}
    runner.load(task, product, task.entry)
    yield "load", {}
    saxpy = task.entry == "saxpy"
    n = 1 << 16
    rng = np.random.default_rng(1)
    x = rng.uniform(-1, 1, n).astype(np.float32)
    y0 = rng.uniform(-1, 1, n).astype(np.float32)
    shared = SharedArrays.like({"x": x, "y": y0})
    for k in range(3):
        shared.arrays["x"][:] = x
        shared.arrays["y"][:] = y0
        t = time.perf_counter()
        runner.call(shared, {"n": n, "a": 2.5} if saxpy else {"n": n}, flush=True)
        fields: dict[str, Any] = {"call_ms": round((time.perf_counter() - t) * 1e3, 3)}
        if saxpy:
            fields["right"] = bool(np.allclose(shared.arrays["y"], 2.5 * x + y0, rtol=1e-4, atol=1e-5))
        yield f"call {k + 1}", fields
    if cuda is None:
        return
    # The worker's own context still works (it made itself non-dumpable when it started the runner).
    device = cuda.mem_alloc(x.nbytes)
    cuda.memcpy_htod(device, x)
    back = np.empty_like(x)
    cuda.memcpy_dtoh(back, device)
    device.free()
    yield "worker_copies", {"right": bool(np.array_equal(back, x))}


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--out", type=Path, default=Path("runner_check"))
    parser.add_argument("--case-timeout", type=float, default=60.0)
    parser.add_argument("--only", nargs="*", default=None, help="these cases only")
    parser.add_argument(
        "--host", action="store_true", help="no CUDA: the host runtime's runner (a trial run)"
    )
    parser.add_argument("--case", help=argparse.SUPPRESS)
    parser.add_argument("--product", help=argparse.SUPPRESS)
    args = parser.parse_args()
    out: Path = args.out.resolve()
    if args.case:
        run_case(args.case, out, args.product, "host" if args.host else "gpu")
        return 0
    out.mkdir(parents=True, exist_ok=True)
    built = _build(out)
    from executor.worker.runner import landlock_facts

    lines = [
        f"# The candidate process on {platform.node()} ({platform.release()})",
        "",
        f"{landlock_facts()}; glibc {platform.libc_ver()[1]}; Python {platform.python_version()}; "
        f"built: {', '.join(sorted(built))}",
        "",
    ]
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")])),
    }
    for name, (which, candidate, _) in CASES.items():
        if args.only and name not in args.only:
            continue
        if candidate not in built:
            lines += [f"## {name}", "", f"not built: see {candidate}.build.log", ""]
            continue
        command = [sys.executable, "-m", "bench.probes.runner_check", "--out", str(out)]
        command += ["--case", name, "--product", built[candidate], *(["--host"] if args.host else [])]
        began = time.perf_counter()
        try:
            done = subprocess.run(
                command,
                cwd=ROOT,
                env=env,
                capture_output=True,
                text=True,
                timeout=args.case_timeout,
                check=False,
            )
            stdout, stderr, fate = done.stdout, done.stderr, f"exit {done.returncode}"
        except subprocess.TimeoutExpired as e:
            stdout = e.stdout.decode() if isinstance(e.stdout, bytes) else (e.stdout or "")
            stderr = e.stderr.decode() if isinstance(e.stderr, bytes) else (e.stderr or "")
            fate = f"STALLED: killed after {args.case_timeout:g} s"
        seconds = time.perf_counter() - began
        runner_err = out / name / "runner.stderr"
        runner_text = runner_err.read_text(errors="replace") if runner_err.exists() else "(none)"
        steps = [line for line in stdout.splitlines() if line.startswith("{")]
        last = json.loads(steps[-1])["step"] if steps else "(none)"
        lines += [f"## {name} ({which}, {candidate}): {fate} in {seconds:.1f} s, last step {last}", "", "```"]
        lines += [*steps, "```", "", "worker-side stderr:", "", "```", stderr.strip()[-6000:] or "(empty)"]
        lines.append("```")
        lines += ["", "runner.stderr:", "", "```", runner_text.strip()[-6000:] or "(empty)", "```", ""]
        print(f"{name}: {fate}, last step {last}", flush=True)
    (out / "report.md").write_text("\n".join(lines) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
