"""Throughput of the executor fleet on a mixed queue, and the fleet's own overhead per evaluation.

Queue mode (default): candidates over every task of the ``--tasks`` directories, shuffled with a fixed
seed: per task ``--per-task`` correct candidates (the task's ``naive.cu`` or ``candidate.cu``, each a
distinct compile), one failing one (in turn: its entry returns at once, so its outputs stay unwritten;
a compile error; a static rejection), and ``--hangs`` candidates that never return (every thread spins at the
top of the entry on a volatile global flag that nothing sets; ``hang_source``). ``--clients`` callers keep the fleet busy over HTTP, as rollouts in flight or several
jobs do, so compiles overlap the GPU work. Reported: evaluations per hour (and per GPU), the fraction
of wall time each replica spent in the runtime stages that hold its GPU (``run``: correctness and
timing; and each of those), call latency, what the hangs cost and which run limit applied, timing-set
rebuilds (a task's set stored more than once in the run), and retried or lost evaluations. The JSON
also holds every verdict's stage seconds (``records``); the table shows a correct candidate's time under
the GPU lock per task kind from them.

``--replicas 1,2,4`` runs the same queue on fleets of each size in one call and reports the scaling
efficiency: (evaluations/hour with N) / (N x evaluations/hour with 1). ``--kill-after K`` kills one
replica after K verdicts (the fault run of the multi-GPU issue).

``--prepare-first`` measures the steady state that issue 29's target names (a task's preparation and
naive baseline are made once per host and kept for a day, so in a deployment a task's first
evaluation is rare): before the windows, every task of the queue is prepared on a fleet of the
largest size (``POST /v1/prepare``, then again with ``wait_s`` until the task is prepared and its naive
baseline stored; ``--prepare-timeout``), the pass's seconds, ready tasks and baselines timed (the GPU
turns baselines took) reported; then each window starts a fresh fleet over that same store (the
host's, as a deployment's replicas and restarts share it), with every candidate made a new compile
(``retag``), so no window inherits an earlier one's compiles. Without it each size gets a fresh cache.

Every queue run also reports where the time goes (``time_table``): the share of the wall time each
replica's GPU lock was held, and per correct candidate of each task kind its time under the lock, its
trials' wait for their lock, its worker's driver initialisation, context lock wait and context creation,
and its trials; and the cores each replica is pinned to. ``bench/device/run_scaling.sh`` puts the sizes
together in one table, with the efficiency over the whole run and after the first minute.

Probe mode (``--probe``): every task's known-good candidate once on a fresh fleet of the first
``--replicas`` size (so each is its task's first evaluation, preparation included), then the same
candidates again, by ``--probe-clients`` callers in all (16); each pass's rate apart.

Overhead mode (``--overhead``): what the fleet adds to one evaluation on the CPU. One executor and a
fleet of one replica (both runtime ``none``, same settings) answer the same request over HTTP,
alternating, one at a time: a candidate of the first task that the static checks reject, so the
evaluation itself takes about a millisecond; the difference of the medians is the fleet's scheduling
overhead (the router, Ray's actor call, the JSON crossing twice).

    python -m bench.probes.throughput --runtime gpu --tasks regraph_data/tasks --tasks regraph_data/kernel_tasks \\
        --replicas 1 --out bench/results/throughput.json --md bench/results/throughput.md
    python -m bench.probes.throughput --overhead --evals 200 --md bench/results/fleet_overhead.md
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import logging
import os
import platform
import random
import re
import secrets
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections import Counter, defaultdict
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import uvicorn

from bench.probes.executor_bench import candidate_source, task_dirs
from executor.app import create_app
from executor.fleet.app import create_fleet_app
from executor.fleet.router import Fleet
from executor.protocol import (
    PREPARE_WAIT_MAX_S,
    CandidateSource,
    EvaluateRequest,
    EvaluationOptions,
    PrepareRequest,
    PrepareResponse,
    Verdict,
)
from executor.settings import ExecutorSettings
from executor.taskformat import FunctionTask, KernelTask, load_task
from regraph_data import KERNEL_TASKS_DIR, TASKS_DIR

logger = logging.getLogger("bench.probes.throughput")

# The runtime stages, all inside the replica's GPU lock (``run`` is their whole).
GPU_STAGES = ("run", "correctness", "timing", "timing_trials", "compare", "compare_behind")
# The candidate's timing statistics that each verdict's record keeps.
# The trials' times in order and their rotation (executor.checking.trial_trace: at most 40 of them):
# where the stop rule's spread comes from (bench.probes.trial_trace reads them).
RECORD_TIMING = (
    "trials",
    "stop",
    "median_ms",
    "robust_cov",
    "warmup_calls",
    "samples_ms",
    "sets",
    "slots",
    "median_from",
)
FAKE_GPU = "bench_gpu"


# One evaluation of the queue: its item, the verdict (None when the call failed), the call's seconds,
# the error of a failed call, and when it finished (seconds since the queue started).
Result = tuple["QueueItem", Verdict | None, float, str | None, float]


@dataclass(frozen=True)
class QueueItem:
    """One candidate of the queue and what it is meant to do."""

    task: FunctionTask | KernelTask
    source: str
    kind: str  # correct, unwritten, compile_error, static, hang


def task_kind(task: FunctionTask | KernelTask) -> str:
    """``kernel`` or ``function``: the two kinds the tables report apart."""
    return "kernel" if isinstance(task, KernelTask) else "function"


def _entry_body(task: FunctionTask | KernelTask, source: str) -> int | None:
    """The offset just after the opening brace of the entry's definition (None when not found)."""
    match = re.search(rf"\b{re.escape(task.entry)}\s*\([^;{{]*\)\s*\{{", source)
    return match.end() if match else None


def _inject(task: FunctionTask | KernelTask, source: str, statement: str) -> str | None:
    at = _entry_body(task, source)
    return None if at is None else f"{source[:at]}\n{statement}\n{source[at:]}"


# A flag in global memory that nothing writes: the spin reads it again on every turn (volatile), and
# the compiler cannot prove it stays 0 (the host could set a __device__ variable at any time). A spin
# on a volatile *local* (``volatile int x = 1; while (x) {}``) is not enough: the H100's NVRTC 13.0
# built it into a kernel that returned at once (k_byte_hist_chunks "passed" in 0.07 s), because a
# local that nothing else can reach is a register to the optimiser and an empty endless loop may be
# removed.
HANG_FLAG = "xthroughput_hang_flag"
HANG_SPIN = f"while ({HANG_FLAG} == 0) {{}}"


def hang_source(task: FunctionTask | KernelTask, source: str) -> str | None:
    """The candidate made to never return: every thread spins at the top of the entry on a volatile
    global flag that no thread and no host code sets (None when the entry's definition is not found)."""
    spin = _inject(task, source, HANG_SPIN)
    return None if spin is None else f"__device__ volatile int {HANG_FLAG} = 0;\n{spin}"


def _distinct(source: str, tag: str) -> str:
    # A new content hash and a changed module (NVRTC caches what it compiled by preprocessed text).
    return f"{source}\n__device__ int xthroughput_{tag};\n"


def build_queue(
    dirs: list[Path], per_task: int, hangs: int, seed: int, runtime: str = "gpu"
) -> list[QueueItem]:
    """The mixed queue: correct and failing candidates of every task and a few hangs, shuffled. With
    ``runtime="host"`` (the CPU test runtime) only function tasks, their serial reference as the
    correct candidate (``bench.probes.executor_bench.candidate_source``)."""
    items: list[QueueItem] = []
    failing = ("unwritten", "compile_error", "static")
    hung = 0
    for n, d in enumerate(dirs):
        task = load_task(d)
        source = candidate_source(d, task, "host" if runtime == "host" else "gpu")
        if source is None:
            continue
        for k in range(per_task):
            items.append(QueueItem(task, _distinct(source, f"{n}_{k}"), "correct"))
        kind = failing[n % len(failing)]
        broken: str | None
        if kind == "unwritten":
            broken = _inject(task, source, "return;")
        elif kind == "compile_error":
            broken = source + "\nthis is not CUDA;\n"
        else:
            broken = _inject(task, source, 'printf("x");')
        if broken is not None:
            items.append(QueueItem(task, _distinct(broken, f"{n}_f"), kind))
        if hung < hangs and isinstance(task, KernelTask):
            spin = hang_source(task, source)
            if spin is not None:
                items.append(QueueItem(task, _distinct(spin, f"{n}_h"), "hang"))
                hung += 1
    random.Random(seed).shuffle(items)
    return items


# --- serving -------------------------------------------------------------------------------------


@contextlib.contextmanager
def serving(app: Any) -> Iterator[str]:
    """Serve an ASGI app on a free loopback port in a thread; yields its URL."""
    config = uvicorn.Config(app, host="127.0.0.1", port=0, log_level="warning", lifespan="on")
    server = uvicorn.Server(config)
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    deadline = time.monotonic() + 600
    while not server.started:
        if not thread.is_alive() or time.monotonic() > deadline:
            raise RuntimeError("the server did not start")
        time.sleep(0.05)
    port = server.servers[0].sockets[0].getsockname()[1]
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        server.should_exit = True
        thread.join(timeout=60)


def start_ray(runtime: str, replicas: int, address: str | None) -> str:
    """Connect to ``address`` or start Ray on this machine; the resource that places replicas."""
    import ray

    if ray.is_initialized():
        ray.shutdown()
    if address:
        ray.init(address=address, log_to_driver=False, logging_level="warning")
        return "GPU"
    os.environ.setdefault(
        "RAY_AUTH_MODE", "disabled"
    )  # a throwaway local cluster: no token file left in ~/.ray
    if runtime in ("none", "host"):  # no GPU: a custom resource stands for one per replica
        ray.init(num_cpus=2, resources={FAKE_GPU: replicas}, log_to_driver=False, logging_level="warning")
        return FAKE_GPU
    ray.init(log_to_driver=False, logging_level="warning")
    return "GPU"


class GpuSampler:
    """The GPUs' own utilisation while the queue runs, sampled with ``nvidia-smi`` every 200 ms: the
    share of each sample period in which a kernel ran (``utilization.gpu``), an independent check of the
    busy fractions the verdicts report (those count the time a replica holds its GPU lock, kernels or
    not). Nothing is sampled where nvidia-smi is missing."""

    def __init__(self) -> None:
        self._proc: subprocess.Popen[str] | None = None
        self._samples: dict[str, list[float]] = defaultdict(list)
        self._reader: threading.Thread | None = None

    def __enter__(self) -> GpuSampler:
        smi = shutil.which("nvidia-smi")
        if smi is None:
            return self
        command = [smi, "--query-gpu=index,utilization.gpu", "--format=csv,noheader,nounits", "-lms", "200"]
        self._proc = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()
        return self

    def _read(self) -> None:
        assert self._proc is not None and self._proc.stdout is not None
        for line in self._proc.stdout:
            index, _, value = line.partition(",")
            with contextlib.suppress(ValueError):
                self._samples[index.strip()].append(float(value))

    def __exit__(self, *exc: object) -> None:
        if self._proc is not None:
            self._proc.terminate()
            with contextlib.suppress(subprocess.TimeoutExpired):
                self._proc.wait(timeout=5)
        if self._reader is not None:
            self._reader.join(timeout=5)

    def summary(self) -> dict[str, dict[str, float]]:
        """Per GPU index: the mean utilisation (0-1) and the number of samples."""
        return {
            index: {"mean": round(statistics.fmean(values) / 100, 3), "samples": len(values)}
            for index, values in sorted(self._samples.items())
            if values
        }


# --- queue mode ----------------------------------------------------------------------------------


async def _drain(
    url: str,
    items: list[QueueItem],
    options: EvaluationOptions,
    clients: int,
    fleet: Fleet | None,
    kill_after: int | None,
    max_seconds: float | None = None,
    hard_stop: bool = False,
) -> list[Result]:
    queue: asyncio.Queue[tuple[int, QueueItem]] = asyncio.Queue()
    for i, item in enumerate(items):
        queue.put_nowait((i, item))
    results: list[Any] = [None] * len(items)
    done = 0
    stop_at = time.monotonic() + max_seconds if max_seconds else None
    began = time.perf_counter()

    async def caller(http: httpx.AsyncClient) -> None:
        nonlocal done
        while not queue.empty() and (stop_at is None or time.monotonic() < stop_at):
            i, item = queue.get_nowait()
            body = EvaluateRequest(
                task=item.task, candidate=CandidateSource(source=item.source), options=options
            )
            start = time.perf_counter()
            try:
                answer = await http.post("/v1/evaluate", content=body.model_dump_json())
                error = None if answer.is_success else answer.text[:300]
                verdict = Verdict.model_validate_json(answer.content) if answer.is_success else None
            except httpx.HTTPError as e:
                verdict, error = None, f"{type(e).__name__}: {e}"
            finished = time.perf_counter()
            results[i] = (item, verdict, finished - start, error, finished - began)
            done += 1
            if kill_after is not None and done == kill_after and fleet is not None:
                import ray

                victim = sorted(fleet.replicas)[0]
                logger.warning("killing %s after %d verdicts", victim, done)
                ray.kill(fleet.replicas[victim].handle, no_restart=True)

    headers = {"content-type": "application/json"}
    async with httpx.AsyncClient(base_url=url, timeout=1200, headers=headers) as http:
        callers = [asyncio.ensure_future(caller(http)) for _ in range(clients)]
        if hard_stop and max_seconds:
            # At the window's end the calls still in flight are dropped (their connections closed, so
            # the executor stops them): the verdicts are those of the window, and the next fleet size
            # does not wait for a tail of first evaluations and hangs.
            _, pending = await asyncio.wait(callers, timeout=max_seconds)
            for task in pending:
                task.cancel()
        await asyncio.gather(*callers, return_exceptions=True)
    return [r for r in results if r is not None]  # those started (or, hard_stop, ended) in the window


def _stat(values: list[float]) -> dict[str, float | None]:
    if not values:
        return {"median": None, "p90": None, "max": None}
    ordered = sorted(values)
    return {
        "median": statistics.median(ordered),
        "p90": ordered[min(len(ordered) - 1, int(0.9 * len(ordered)))],
        "max": ordered[-1],
    }


# A verdict's message is kept in its record up to this many characters.
MESSAGE_CHARS = 300


def cut_message(message: str | None) -> str:
    """A verdict's message for its record: at most :data:`MESSAGE_CHARS` characters (cut ones end in ...)."""
    text = message or ""
    return text if len(text) <= MESSAGE_CHARS else text[: MESSAGE_CHARS - 3] + "..."


def honest_refusals(records: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The records of known-good candidates that did not pass (the executor refused honest code)."""
    return [r for r in records if r["candidate"] == "correct" and r["error"] is not None]


def render_honest_refusals(runs: list[dict[str, Any]]) -> list[str]:
    """The markdown list of every run's honest candidates refused, with each verdict's stage and message
    (a run is named by its ``label`` when it has one, else by its replicas)."""
    lines = ["Honest candidates refused (a known-good candidate's verdict was not `passed`):", ""]
    for r in runs:
        refused = honest_refusals(r.get("records", []))
        lines.append(f"- {r.get('label') or str(r['replicas']) + ' replicas'}: **{len(refused)}**")
        for rec in refused:
            message = str(rec.get("message", "(no message recorded)")).replace("\n", " ").replace("|", "/")
            lines.append(
                f"  - {rec['task']} ({rec['task_kind']}): `{rec['error']}` at {rec.get('stage', '?')} "
                f"after {rec['call_s']:.1f} s: {message}"
            )
    return lines


def summarize(
    results: list[Result], wall_s: float, replicas: int, steady_after_s: float = 60.0
) -> dict[str, Any]:
    """The queue run's figures (see the module's docstring). ``steady_after_s``: the rate is also given
    over the verdicts that came after this many seconds (when the run lasted twice as long): the
    executor's start and the tasks' first evaluations, which a run of hours amortises, left out."""
    verdicts = [(item, v, call) for item, v, call, _, _ in results if v is not None]
    finished = [done for _, v, _, _, done in results if v is not None]
    per_replica: dict[str, dict[str, float]] = defaultdict(lambda: defaultdict(float))
    for _, v, _ in verdicts:
        name = v.fleet.replica if v.fleet else "single"
        for stage in GPU_STAGES:
            per_replica[name][stage] += v.seconds.get(stage, 0.0)
        per_replica[name]["evaluations"] += 1
    busy = {
        name: {stage: round(total.get(stage, 0.0) / wall_s, 3) for stage in GPU_STAGES}
        | {"evaluations": int(total["evaluations"])}
        for name, total in sorted(per_replica.items())
    }
    stored = Counter(v.task_id for _, v, _ in verdicts if "timing_set" in v.seconds)
    hangs = [
        {
            "task": v.task_id,
            "error": v.error.value if v.error else None,
            "run_s": round(v.seconds.get("run", 0.0), 2),
            "call_s": round(call, 2),
            "run_limit": v.run_limit.model_dump() if v.run_limit else None,
        }
        for item, v, call in verdicts
        if item.kind == "hang"
    ]
    outcome = Counter(f"{item.kind}:{v.error.value if v.error else 'passed'}" for item, v, _ in verdicts)
    by_kind: dict[str, list[float]] = defaultdict(list)
    for item, _, call in verdicts:
        by_kind[task_kind(item.task)].append(call)
    per_hour = len(verdicts) / wall_s * 3600 if wall_s > 0 else 0.0
    # A task's first evaluation on a replica: the one that stored its timing set, timed its serial
    # reference, or waited for the replica to prepare the task (Evaluator.prepare_task).
    first_keys = ("timing_set", "reference_timing", "task_prepare_wait")
    firsts = [(v, call) for _, v, call in verdicts if any(k in v.seconds for k in first_keys)]
    first_eval = {
        "count": len(firsts),
        "call_s": _stat([call for _, call in firsts]),
        "later_call_s": _stat(
            [call for _, v, call in verdicts if not any(k in v.seconds for k in first_keys)]
        ),
        # what the candidate waited for after its compile: the reference's work, the task's preparation
        "waited_s": _stat(
            [
                v.seconds.get("reference_wait", 0.0) + v.seconds.get("task_prepare_wait", 0.0)
                for v, _ in firsts
            ]
        ),
    }
    # Where an evaluation's time went: every key of the verdicts' ``seconds`` (CPU stages such as the
    # compile and the task's preparation as well as the GPU stages), its total over the run and its
    # mean per verdict; stages overlap across evaluations, so the totals may exceed the wall time.
    stage_totals: dict[str, float] = defaultdict(float)
    for _, v, _ in verdicts:
        for key, value in v.seconds.items():
            stage_totals[key] += value
    stage_seconds = {
        key: {"total": round(total, 2), "per_verdict": round(total / len(verdicts), 4)}
        for key, total in sorted(stage_totals.items(), key=lambda kv: -kv[1])
    }
    # Each verdict's own figures, for breakdowns by task kind and outcome after the run; a failing
    # verdict's stage and message too (what refused an honest candidate is read from them).
    records = [
        {
            "task": v.task_id,
            "task_kind": task_kind(item.task),
            "candidate": item.kind,
            "error": v.error.value if v.error else None,
            **({"stage": v.stage.value, "message": cut_message(v.message)} if v.error else {}),
            "call_s": round(call, 4),
            "finished_s": round(done, 3),
            "seconds": {key: round(value, 4) for key, value in v.seconds.items()},
            # the candidate's timing, None each when it was not timed
            **{name: getattr(v.candidate_timing, name, None) for name in RECORD_TIMING},
        }
        for (item, v, call), done in zip(verdicts, finished, strict=True)
    ]
    steady = None
    if wall_s >= 2 * steady_after_s > 0:
        late = sum(1 for done in finished if done > steady_after_s)
        steady = {
            "after_s": steady_after_s,
            "verdicts": late,
            "seconds": round(wall_s - steady_after_s, 1),
            "per_hour": round(late / (wall_s - steady_after_s) * 3600),
        }
    return {
        "records": records,
        "evaluations": len(results),
        "verdicts": len(verdicts),
        "lost": len(results) - len(verdicts),
        "errors": [e for _, _, _, e, _ in results if e is not None][:5],
        "retried": sum(1 for _, v, _ in verdicts if v.fleet is not None and v.fleet.attempts > 1),
        "wall_s": round(wall_s, 1),
        "replicas": replicas,
        "per_hour": round(per_hour),
        "per_hour_per_gpu": round(per_hour / max(replicas, 1)),
        "steady": steady,
        # the share of the wall time that the evaluators' GPU locks were held (all replicas together)
        "lock_held": round(sum(v.seconds.get("gpu_held", 0.0) for _, v, _ in verdicts) / wall_s, 3)
        if wall_s > 0
        else 0.0,
        "gpu_busy": busy,
        "rebuilds": sum(n - 1 for n in stored.values()),
        "timing_sets_stored": sum(stored.values()),
        "latency_s": {kind: _stat(calls) for kind, calls in sorted(by_kind.items())},
        "hangs": hangs,
        "outcomes": dict(sorted(outcome.items())),
        "honest_refused": len(honest_refusals(records)),
        "first_evaluation": first_eval,
        "stage_seconds": stage_seconds,
    }


@contextlib.contextmanager
def executor_under_test(
    args: argparse.Namespace, replicas: int, cache: Path
) -> Iterator[tuple[Any, Fleet | None]]:
    """The app to serve (one executor with ``--single``, else a Ray fleet of ``replicas``) over ``cache``
    and its fleet, closed when the block ends."""
    settings = ExecutorSettings.model_validate(
        {**json.loads(args.settings), "cache_dir": cache, "runtime": args.runtime, "fleet_replicas": replicas}
    )
    if args.single:
        yield create_app(settings), None
        return
    resource = start_ray(args.runtime, replicas, args.ray)
    settings = settings.model_copy(update={"ray": args.ray or "auto", "fleet_gpu_resource": resource})
    fleet = Fleet(settings)
    fleet.start()
    try:
        yield create_fleet_app(settings, fleet), fleet
    finally:
        fleet.close()


def run_queue(args: argparse.Namespace, items: list[QueueItem], replicas: int, cache: Path) -> dict[str, Any]:
    """Start a fleet of ``replicas`` (or one executor with ``--single``), drain the queue through its
    URL, and summarize."""
    options = EvaluationOptions.model_validate(json.loads(args.options))
    with executor_under_test(args, replicas, cache) as (app, fleet):
        cores = _cores(fleet)
        with serving(app) as url, GpuSampler() as sampler:
            turns_before = _turn_usage(url)
            start = time.perf_counter()
            results = asyncio.run(
                _drain(
                    url,
                    items,
                    options,
                    args.clients * replicas,
                    fleet,
                    args.kill_after,
                    args.max_seconds,
                    args.hard_stop,
                )
            )
            wall = time.perf_counter() - start
            turns = _turns_since(turns_before, _turn_usage(url))
    summary = summarize(results, wall, replicas, args.steady_after)
    summary["gpu_utilization"] = sampler.summary()
    summary["cores"] = cores
    summary["turns"] = turns
    logger.info("%d replicas: %s", replicas, json.dumps({k: summary[k] for k in ("per_hour", "wall_s")}))
    return summary


def _turn_usage(url: str) -> list[dict[str, Any]]:
    """Each executor's (replica's) use of its GPU turns since it started (``GET /v1/device``'s
    ``turns``): the seconds candidates' runs and tasks' naive baselines held them. Empty when the
    executor does not say."""
    try:
        body = httpx.get(f"{url}/v1/device", timeout=60).json()
    except (httpx.HTTPError, ValueError):
        logger.warning("no turn usage: GET /v1/device failed", exc_info=True)
        return []
    described = body.get("gpus") or [body]
    return [{"replica": d.get("replica", "single"), **d["turns"]} for d in described if d.get("turns")]


def _turns_since(before: list[dict[str, Any]], after: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Each replica's turns taken and seconds held between two :func:`_turn_usage` answers (the queue's
    own, without what the executor did before it began)."""
    earlier = {t["replica"]: t for t in before}
    since = []
    for t in after:
        b = earlier.get(t["replica"], {"turns": {}, "held_s": {}, "seconds": 0.0})
        since.append(
            {
                **t,
                "seconds": round(t["seconds"] - b["seconds"], 3),
                "turns": {k: v - b["turns"].get(k, 0) for k, v in t["turns"].items()},
                "held_s": {k: round(v - b["held_s"].get(k, 0.0), 3) for k, v in t["held_s"].items()},
            }
        )
    return since


def _cores(fleet: Fleet | None) -> dict[str, str | None]:
    """The cores each replica is pinned to (None: not pinned), as the replicas describe themselves."""
    if fleet is None:
        return {}
    described = asyncio.run(fleet.describe())
    return {str(d.get("replica")): d.get("cores") for d in described}


# --- the steady state: every task prepared before the window (--prepare-first) -------------------

# Waiting prepare calls in flight at once (each answers when its task is ready; every task's
# preparation was started before by a call that answers at once).
PREPARE_CALLERS = 16


def queue_tasks(items: list[QueueItem]) -> list[FunctionTask | KernelTask]:
    """The queue's tasks, each once, in the order the queue first reaches them."""
    tasks: dict[str, FunctionTask | KernelTask] = {}
    for item in items:
        tasks.setdefault(item.task.model_dump_json(), item.task)
    return list(tasks.values())


def retag(items: list[QueueItem], tag: str) -> list[QueueItem]:
    """The same queue with every candidate made a distinct compile again (``_distinct``): a window on
    a store that an earlier window used compiles its candidates as new, as a deployment's are."""
    return [QueueItem(item.task, _distinct(item.source, tag), item.kind) for item in items]


async def _prepare_all(
    url: str, tasks: list[FunctionTask | KernelTask], options: EvaluationOptions, timeout_s: float
) -> list[dict[str, Any]]:
    """``POST /v1/prepare`` for every task, answered at once (all of them started, as jobs that start
    together), then again with ``wait_s`` until each is ready (prepared, its naive baseline stored) or
    ``timeout_s`` has passed since the start; what each last answer said."""
    deadline = time.monotonic() + timeout_s
    slots = asyncio.Semaphore(PREPARE_CALLERS)

    async def post(http: httpx.AsyncClient, task: FunctionTask | KernelTask, wait_s: float) -> dict[str, Any]:
        body = PrepareRequest(task=task, options=options, wait_s=wait_s)
        async with slots:
            try:
                answer = await http.post("/v1/prepare", content=body.model_dump_json())
            except httpx.HTTPError as e:
                return {"task": task.id, "ready": False, "error": f"{type(e).__name__}: {e}"}
        if not answer.is_success:
            return {"task": task.id, "ready": False, "error": answer.text[:300]}
        return PrepareResponse.model_validate_json(answer.content).model_dump()

    headers = {"content-type": "application/json"}
    async with httpx.AsyncClient(base_url=url, timeout=PREPARE_WAIT_MAX_S + 60, headers=headers) as http:
        started = await asyncio.gather(*(post(http, task, 0.0) for task in tasks))

        async def waited(task: FunctionTask | KernelTask, first: dict[str, Any]) -> dict[str, Any]:
            left = min(deadline - time.monotonic(), PREPARE_WAIT_MAX_S)
            if "error" in first or left <= 0:
                return {**first, "ready": False}
            return {**await post(http, task, left), "started": first.get("started")}

        return list(await asyncio.gather(*(waited(t, s) for t, s in zip(tasks, started, strict=True))))


def prepare_pass(
    args: argparse.Namespace, items: list[QueueItem], replicas: int, cache: Path
) -> dict[str, Any]:
    """Every task of the queue prepared ahead on a fleet of ``replicas`` (or one executor) over the
    store ``cache``, as jobs that know their tasks do (``POST /v1/prepare``), and waited for until each
    task's preparation is done and its naive baseline stored (``wait_s``), at most
    ``--prepare-timeout`` seconds; then the fleet is closed. The windows that follow start fleets of
    their own over the same store: the host's, kept across restarts, as a deployment's is. Returns
    how long it took, how many tasks were ready, the baselines' states and the turns baselines took
    (how many it timed)."""
    options = EvaluationOptions.model_validate(json.loads(args.options))
    tasks = queue_tasks(items)
    with executor_under_test(args, replicas, cache) as (app, _fleet), serving(app) as url:
        turns_before = _turn_usage(url)
        start = time.perf_counter()
        answers = asyncio.run(_prepare_all(url, tasks, options, args.prepare_timeout))
        seconds = time.perf_counter() - start
        turns = _turns_since(turns_before, _turn_usage(url))
    baselines = Counter(str(a.get("baseline")) for a in answers)
    summary = {
        "replicas": replicas,
        "tasks": len(tasks),
        "seconds": round(seconds, 1),
        "timeout_s": args.prepare_timeout,
        "ready": sum(bool(a.get("ready")) for a in answers),
        "started": sum(bool(a.get("started")) for a in answers),
        "baselines": dict(sorted(baselines.items())),
        # each measurement of a naive baseline takes its GPU's turn once: how many this pass timed
        "baseline_turns": sum(t["turns"].get("baseline", 0) for t in turns),
        "baseline_held_s": round(sum(t["held_s"].get("baseline", 0.0) for t in turns), 2),
        "not_ready": [a["task"] if "task" in a else a.get("task_id") for a in answers if not a.get("ready")][
            :20
        ],
        "errors": [a["error"] for a in answers if "error" in a][:5],
        "turns": turns,
        "answers": answers,
    }
    logger.info(
        "prepare pass: %s",
        json.dumps({k: summary[k] for k in ("tasks", "ready", "seconds", "baselines", "baseline_turns")}),
    )
    return summary


def render_prepare(prepared: dict[str, Any]) -> list[str]:
    """The prepare pass's lines (``--prepare-first``)."""
    lines = [
        f"Prepare pass (`--prepare-first`, on {prepared['replicas']} replica(s), before every window; the "
        "windows then share its store, the host's, as a deployment's replicas and restarts do; each "
        "window's candidates are new compiles): "
        f"**{prepared['ready']} of {prepared['tasks']} tasks ready in {prepared['seconds']} s** "
        f"(limit {prepared['timeout_s']:.0f} s); naive baselines {json.dumps(prepared['baselines'])}, "
        f"{prepared['baseline_turns']} timed in this pass ({prepared['baseline_held_s']} s of GPU turns).",
    ]
    if prepared["not_ready"]:
        lines.append(f"Not ready: {', '.join(map(str, prepared['not_ready']))}")
    if prepared["errors"]:
        lines.append(f"Errors: {'; '.join(prepared['errors'])}")
    return [*lines, ""]


# --- probe mode: every task's known-good candidate once, then again ------------------------------


def run_probe(args: argparse.Namespace, dirs: list[Path], replicas: int, cache: Path) -> dict[str, Any]:
    """Every task's known-good candidate sent once (a fresh executor: each is its task's first
    evaluation, the task's preparation included), then the same candidates again (compiled, prepared),
    by ``--probe-clients`` callers in all; the rate of each pass apart."""
    options = EvaluationOptions.model_validate(json.loads(args.options))
    settings = ExecutorSettings.model_validate(
        {**json.loads(args.settings), "cache_dir": cache, "runtime": args.runtime, "fleet_replicas": replicas}
    )
    items = [item for item in build_queue(dirs, 1, 0, args.seed, args.runtime) if item.kind == "correct"]
    fleet: Fleet | None = None
    if args.single:
        app = create_app(settings)
    else:
        resource = start_ray(args.runtime, replicas, args.ray)
        settings = settings.model_copy(update={"ray": args.ray or "auto", "fleet_gpu_resource": resource})
        fleet = Fleet(settings)
        fleet.start()
        app = create_fleet_app(settings, fleet)
    passes = []
    try:
        with serving(app) as url:
            for name in ("first", "second"):
                start = time.perf_counter()
                results = asyncio.run(
                    _drain(
                        url, items, options, args.probe_clients, None, None, args.max_seconds, args.hard_stop
                    )
                )
                wall = time.perf_counter() - start
                summary = summarize(results, wall, replicas, steady_after_s=0.0)
                passes.append({"pass": name, **{k: summary[k] for k in PROBE_FIELDS}})
    finally:
        if fleet is not None:
            fleet.close()
    return {"replicas": replicas, "clients": args.probe_clients, "candidates": len(items), "passes": passes}


PROBE_FIELDS = ("verdicts", "lost", "wall_s", "per_hour", "per_hour_per_gpu", "latency_s", "outcomes")


# --- where the time goes --------------------------------------------------------------------------

# Per correct candidate, the seconds of the verdict that say what a replica's host shares (means).
TIME_KEYS = ("gpu_held", "timing_lock_wait", "context_init", "context_lock_wait", "context_create")


def time_table(run: dict[str, Any]) -> dict[str, Any]:
    """Where the time goes in one run, for the scaling table: the lock held (share of the wall time,
    per replica), and per correct candidate of each kind the mean seconds of ``TIME_KEYS`` (the time
    under the evaluator's lock, its trials' wait for their lock, the worker's driver initialisation, its
    wait for the lock to make its context and the context's creation) and the host- or event-timed
    trials."""
    row: dict[str, Any] = {
        "replicas": run["replicas"],
        "lock_held_per_replica": round(run.get("lock_held", 0.0) / max(run["replicas"], 1), 3),
        "steady_per_hour": (run.get("steady") or {}).get("per_hour"),
        "per_hour": run["per_hour"],
    }
    for kind in ("function", "kernel"):
        rows = [
            r
            for r in run.get("records", [])
            if r["candidate"] == "correct" and r["error"] is None and r["task_kind"] == kind
        ]
        row[kind] = {
            "n": len(rows),
            **{
                key: round(statistics.fmean([r["seconds"][key] for r in rows if key in r["seconds"]]), 3)
                if any(key in r["seconds"] for r in rows)
                else None
                for key in TIME_KEYS
            },
            "trials": round(statistics.fmean([r["trials"] or 0 for r in rows]), 1) if rows else None,
        }
    return row


def render_time_table(runs: list[dict[str, Any]]) -> list[str]:
    """The markdown of :func:`time_table` for every run."""
    base = runs[0]["per_hour"] / max(runs[0]["replicas"], 1) if runs else 0
    steady_base = (
        ((runs[0].get("steady") or {}).get("per_hour") or 0) / max(runs[0]["replicas"], 1) if runs else 0
    )
    lines = [
        "Where the time goes per fleet size (correct candidates, mean seconds; `lock held`: the share of the "
        "wall time a replica's GPU lock was held; `driver init`/`context lock wait`/`context create`: the "
        "candidate worker's CUDA start-up, made by a spare; efficiency: rate / (replicas x the first row's "
        "rate), whole run and after the first minute):",
        "",
        "| replicas | evals/h | after 1st min | eff. | eff. after 1st min | lock held | kind | n | time under lock "
        "| trials' lock wait | driver init | context lock wait | context create | trials |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]

    def cell(value: float | None) -> str:
        return "-" if value is None else f"{value:.3f}"

    for run in runs:
        row = time_table(run)
        n = row["replicas"]
        eff = f"{row['per_hour'] / (n * base):.0%}" if base else "-"
        steady = row["steady_per_hour"]
        steady_eff = f"{steady / (n * steady_base):.0%}" if steady and steady_base else "-"
        for kind in ("function", "kernel"):
            k = row[kind]
            lines.append(
                f"| {n} | {row['per_hour']} | {steady or '-'} | {eff} | {steady_eff} "
                f"| {row['lock_held_per_replica']:.0%} | {kind} | {k['n']} | {cell(k['gpu_held'])} "
                f"| {cell(k['timing_lock_wait'])} | {cell(k['context_init'])} | {cell(k['context_lock_wait'])} "
                f"| {cell(k['context_create'])} | {k['trials'] if k['trials'] is not None else '-'} |"
            )
    lines.append("")
    for run in runs:
        cores = run.get("cores") or {}
        if cores:
            shown = ", ".join(f"{name}: {c or 'not pinned'}" for name, c in sorted(cores.items()))
            lines.append(f"- {run['replicas']} replicas, cores: {shown}")
    return lines


def render_probe(probe: dict[str, Any]) -> list[str]:
    """The markdown of the first-pass/second-pass probe."""
    lines = [
        f"Probe: every task's known-good candidate once, then again ({probe['candidates']} candidates, "
        f"{probe['clients']} callers, {probe['replicas']} replicas, a fresh cache):",
        "",
        "| pass | verdicts | lost | wall s | evals/hour | per GPU | latency median/p90 s (function; kernel) |",
        "|---|---|---|---|---|---|---|",
    ]
    for p in probe["passes"]:
        lat = "; ".join(
            f"{v['median']:.2f}/{v['p90']:.2f}" for v in p["latency_s"].values() if v["median"] is not None
        )
        lines.append(
            f"| {p['pass']} | {p['verdicts']} | {p['lost']} | {p['wall_s']} | **{p['per_hour']}** "
            f"| {p['per_hour_per_gpu']} | {lat} |"
        )
    return [*lines, ""]


# --- overhead mode -------------------------------------------------------------------------------


def measure_overhead(args: argparse.Namespace, cache: Path) -> dict[str, Any]:
    """Median call time of one executor and of a one-replica fleet on the same cached requests."""
    task_dir = task_dirs(args.tasks)[0]
    task = load_task(task_dir)
    # A candidate that the static checks reject: the evaluation itself is a millisecond, so what is
    # measured is the way there and back (the same request, the same task JSON).
    source = _inject(task, candidate_source(task_dir, task, "gpu") or "", 'printf("x");') or ""
    body = EvaluateRequest(task=task, candidate=CandidateSource(source=source)).model_dump_json()
    settings = ExecutorSettings(cache_dir=cache, runtime="none", prewarm_workers=False)
    resource = start_ray("none", 1, None)
    fleet = Fleet(settings.model_copy(update={"ray": "auto", "fleet_gpu_resource": resource}))
    fleet.start()
    calls: dict[str, list[float]] = {"single": [], "fleet": []}
    inside: list[float] = []
    try:
        with (
            serving(create_app(settings)) as single_url,
            serving(create_fleet_app(settings, fleet)) as fleet_url,
            httpx.Client(timeout=300, headers={"content-type": "application/json"}) as http,
        ):
            for round_ in range(args.evals + 10):
                for name, url in (("single", single_url), ("fleet", fleet_url)):
                    start = time.perf_counter()
                    answer = http.post(f"{url}/v1/evaluate", content=body)
                    elapsed = time.perf_counter() - start
                    answer.raise_for_status()
                    if round_ >= 10:  # the first ones compile and warm up
                        calls[name].append(elapsed)
                        if name == "fleet":
                            seconds = Verdict.model_validate_json(answer.content).seconds
                            inside.append(seconds.get("total", sum(seconds.values())))
    finally:
        fleet.close()
    single = statistics.median(calls["single"])
    fleet_median = statistics.median(calls["fleet"])
    return {
        "task": task.id,
        "evaluations": len(calls["fleet"]),
        "single_ms": round(single * 1e3, 2),
        "fleet_ms": round(fleet_median * 1e3, 2),
        "evaluation_ms": round(statistics.median(inside) * 1e3, 2),
        "overhead_ms": round((fleet_median - single) * 1e3, 2),
        "fleet_p90_ms": round(_stat(calls["fleet"])["p90"] or 0.0, 5) * 1e3,
        "single_p90_ms": round(_stat(calls["single"])["p90"] or 0.0, 5) * 1e3,
    }


# --- report --------------------------------------------------------------------------------------


def render(result: dict[str, Any]) -> str:
    """The markdown tables of a result."""
    lines = [
        f"# Executor fleet throughput ({result['date']}, {result['host']}, runtime {result['runtime']})",
        "",
        f"Command: `{result['command']}`",
        "",
    ]
    if "overhead" in result:
        o = result["overhead"]
        lines += [
            "| task | evaluations | one executor (median ms) | fleet of 1 (median ms) | evaluation inside (ms) "
            "| fleet overhead (ms) | p90 one / fleet (ms) |",
            "|---|---|---|---|---|---|---|",
            f"| {o['task']} | {o['evaluations']} | {o['single_ms']} | {o['fleet_ms']} | {o['evaluation_ms']} "
            f"| **{o['overhead_ms']}** | {o['single_p90_ms']:.2f} / {o['fleet_p90_ms']:.2f} |",
            "",
        ]
    if "probe" in result:
        lines += render_probe(result["probe"])
    if "prepare" in result:
        lines += render_prepare(result["prepare"])
    runs = result.get("runs", [])
    if runs:
        lines += [*render_time_table(runs), ""]
        base = runs[0]["per_hour"] / max(runs[0]["replicas"], 1)
        lines += [
            "| replicas | evaluations | lost | retried | wall s | evals/hour | per GPU | scaling eff. "
            "| rebuilds | latency median/p90 s (function; kernel) |",
            "|---|---|---|---|---|---|---|---|---|---|",
        ]
        for r in runs:
            eff = r["per_hour"] / (r["replicas"] * base) if base else 0.0
            lat = "; ".join(
                f"{v['median']:.2f}/{v['p90']:.2f}"
                for v in r["latency_s"].values()
                if v["median"] is not None
            )
            lines.append(
                f"| {r['replicas']} | {r['evaluations']} | {r['lost']} | {r['retried']} | {r['wall_s']} "
                f"| {r['per_hour']} | {r['per_hour_per_gpu']} | {eff:.0%} | {r['rebuilds']} | {lat} |"
            )
        lines.append("")
        for r in runs:
            held = f"the GPU lock held {r['lock_held']:.0%} of the wall time" if "lock_held" in r else ""
            steady = r.get("steady")
            if steady:
                held += (
                    f"; after the first {steady['after_s']:.0f} s (the executor's start and most tasks' first "
                    f"evaluations), {steady['verdicts']} verdicts in {steady['seconds']} s: "
                    f"**{steady['per_hour']} evaluations/hour** ({steady['per_hour'] / r['replicas']:.0f} per GPU)"
                )
            if held:
                lines.append(f"- {r['replicas']} replicas: {held}")
            for t in r.get("turns") or []:
                # the baselines' turns are not in any verdict's gpu_held: a task's naive baseline is
                # timed by a worker of its own, under the GPU's turn (executor.baseline)
                lines.append(
                    f"  - {t['replica']}: GPU turns held {sum(t['held_s'].values()) / r['wall_s']:.0%} of the "
                    f"queue's wall time: candidates {t['held_s'].get('candidate', 0.0):.1f} s "
                    f"({t['turns'].get('candidate', 0)} turns), naive baselines "
                    f"{t['held_s'].get('baseline', 0.0):.1f} s ({t['turns'].get('baseline', 0)} turns)"
                )
        lines += [
            "",
            "A task's first evaluation on a replica (it stored the timing set, timed the serial reference, or "
            "waited for the task's preparation) against the others: call latency, and what the first ones "
            "waited for after their compile (`reference_wait` + `task_prepare_wait`), median/p90 s:",
            "",
            "| replicas | first evaluations | first: call | first: waited | later: call |",
            "|---|---|---|---|---|",
        ]
        for r in runs:
            f = r.get("first_evaluation")
            if f is None:
                continue
            cells = [
                f"{f[k]['median']:.2f}/{f[k]['p90']:.2f}" if f[k]["median"] is not None else "-"
                for k in ("call_s", "waited_s", "later_call_s")
            ]
            lines.append(f"| {r['replicas']} | {f['count']} | " + " | ".join(cells) + " |")
        stage_keys = list(runs[0].get("stage_seconds", {}))  # the first run's stages name the columns
        lines += [
            "",
            "Where the time went: every stage the verdicts time, mean seconds per verdict (CPU and GPU stages; "
            "evaluations overlap, so these add up to more than the wall time per evaluation):",
            "",
            "| replicas | " + " | ".join(stage_keys) + " |",
            "|---|" + "---|" * len(stage_keys),
        ]
        for r in runs:
            cells = [
                f"{r['stage_seconds'][k]['per_verdict']:.3f}" if k in r.get("stage_seconds", {}) else "-"
                for k in stage_keys
            ]
            lines.append(f"| {r['replicas']} | " + " | ".join(cells) + " |")
        lines += [
            "",
            "The GPUs' own utilisation while the queue ran (nvidia-smi `utilization.gpu`, sampled every "
            "200 ms; the share of time a kernel ran):",
            "",
        ]
        for r in runs:
            util = r.get("gpu_utilization") or {}
            shown = ", ".join(f"GPU {i}: {u['mean']:.0%} ({u['samples']} samples)" for i, u in util.items())
            lines.append(f"- {r['replicas']} replicas: {shown or 'not sampled (no nvidia-smi)'}")
        lines += ["", "GPU-busy fraction of the wall time per replica and stage:", ""]
        lines += ["| replicas | replica | evaluations | " + " | ".join(GPU_STAGES) + " |"]
        lines += ["|---|---|---|" + "---|" * len(GPU_STAGES)]
        for r in runs:
            for name, busy in r["gpu_busy"].items():
                stages = " | ".join(f"{busy[s]:.0%}" for s in GPU_STAGES)
                lines.append(f"| {r['replicas']} | {name} | {busy['evaluations']} | {stages} |")
        lines += [
            "",
            "Hangs: what each cost (the seconds its run held the GPU, and the caller's whole call), the "
            "run limit and the limit of one call that applied, and which of them stopped it. A hang whose "
            "verdict is not `timeout` did not hang: the candidate is not what it claims.",
            "",
            "| replicas | task | verdict | GPU held s | call s | run limit s | call limit s | limit basis (from ms) "
            "| stopped by |",
            "|---|---|---|---|---|---|---|---|---|",
        ]
        for r in runs:
            for h in r["hangs"]:
                limit = h["run_limit"] or {}
                verdict = h["error"] or "passed"
                if verdict != "timeout":
                    verdict = f"**{verdict}: did not hang**"
                basis = str(limit.get("basis", "-"))
                if limit.get("basis_ms") is not None:
                    basis += f" ({limit['basis_ms']:.1f})"
                seconds = f"{limit['seconds']:.1f}" if limit.get("seconds") is not None else "-"
                call_limit = f"{limit['call']['seconds']:.1f}" if limit.get("call") else "-"
                lines.append(
                    f"| {r['replicas']} | {h['task']} | {verdict} | {h['run_s']} | {h['call_s']} | {seconds} "
                    f"| {call_limit} | {basis} | {limit.get('stopped_by') or '-'} |"
                )
        lines += ["", "Outcomes (candidate kind: verdict):", ""]
        for r in runs:
            lines.append(f"- {r['replicas']} replicas: {json.dumps(r['outcomes'])}")
        if any(r.get("records") for r in runs):
            lines += ["", *render_honest_refusals(runs)]
        if any(r.get("records") for r in runs):
            lines += [
                "",
                "A correct candidate's time under the GPU lock by task kind, mean seconds (`gpu_held`: the "
                "evaluator's lock; `handover`: to the worker's start on the candidate, of which `run_lock_wait` "
                "waited for the worker-side lock that other workers' preparation held; `host_gate_wait`: before "
                "the turn, for another GPU's trials; `after_release`: the host checks after the turn ended, "
                "`released`: the share of runs whose turn ended before their checks), and its trials:",
                "",
                "| replicas | task kind | evaluations | gpu_held | handover | run_lock_wait | correctness "
                "| timing_trials | trials (mean) | host_gate_wait | after_release | released |",
                "|---|---|---|---|---|---|---|---|---|---|---|---|",
            ]
            for r in runs:
                for kind, row in lock_by_kind(r.get("records", [])).items():
                    lines.append(
                        f"| {r['replicas']} | {kind} | {row['n']} | {row['gpu_held']:.3f} | {row['handover']:.3f} "
                        f"| {row['run_lock_wait']:.3f} | {row['correctness']:.3f} | {row['timing_trials']:.3f} | {row['trials']:.1f} "
                        f"| {row['host_gate_wait']:.3f} | {row['after_release']:.3f} | {row['released']:.0%} |"
                    )
    return "\n".join(lines) + "\n"


def _cov(values: list[float]) -> float | None:
    return statistics.pstdev(values) / statistics.fmean(values) if len(values) >= 3 and any(values) else None


def compare_row(name: str, result: dict[str, Any], window_s: float, after_s: float) -> dict[str, Any]:
    """One run's line of :func:`render_compare`, from its JSON (this probe's, or an older tree's with
    the same ``records``): every figure is recomputed from the verdicts' records, so runs of trees whose
    probes summarise differently compare alike. Rates count the verdicts that finished inside the
    window (``window_s`` from the queue's start; a run's tail after it is left out), the steady rate
    those after ``after_s``; the lock times are means over the correct candidates that passed and
    finished after ``after_s``; the repeat spread is the CoV of the medians of one task's correct
    candidates (the same code each), the median over tasks of each kind."""
    run = result["runs"][0]
    records = run.get("records", [])
    done = [r for r in records if r["finished_s"] <= window_s]
    late = [r for r in done if r["finished_s"] > after_s]
    row: dict[str, Any] = {
        "name": name,
        "verdicts": len(done),
        "per_hour": round(len(done) / window_s * 3600),
        "steady_per_hour": round(len(late) / (window_s - after_s) * 3600) if window_s > after_s else None,
        "lock_held": round(sum(r["seconds"].get("gpu_held", 0.0) for r in done) / window_s, 3),
    }
    medians: dict[str, dict[str, list[float]]] = defaultdict(lambda: defaultdict(list))
    for kind in ("function", "kernel"):
        good = [
            r for r in late if r["task_kind"] == kind and r["candidate"] == "correct" and r["error"] is None
        ]
        for key, column in (("gpu_held", "held"), ("timing_lock_wait", "trials_wait")):
            values = [r["seconds"].get(key, 0.0) for r in good]
            row[f"{kind}_{column}"] = round(statistics.fmean(values), 3) if values else None
        row[f"{kind}_n"] = len(good)
        row[f"{kind}_trials"] = round(statistics.fmean(r["trials"] or 0 for r in good), 1) if good else None
    # gpu_kernel_first's own figures (absent without it): kernel runs that went ahead of an earlier
    # function run, and how often a function run was passed over on average
    ahead = [r["seconds"]["turn_ahead"] for r in done if "turn_ahead" in r["seconds"]]
    skipped = [r["seconds"]["turn_skipped"] for r in done if "turn_skipped" in r["seconds"]]
    row["kernel_ahead"] = round(statistics.fmean(ahead), 3) if ahead else None
    row["function_skipped"] = round(statistics.fmean(skipped), 2) if skipped else None
    for r in records:
        if r["candidate"] == "correct" and r["error"] is None and r.get("median_ms"):
            medians[r["task_kind"]][r["task"]].append(r["median_ms"])
    for kind in ("function", "kernel"):
        spreads = [c for c in (_cov(v) for v in medians[kind].values()) if c is not None]
        row[f"{kind}_repeat_cov"] = round(statistics.median(spreads), 4) if spreads else None
        row[f"{kind}_repeat_tasks"] = len(spreads)
    return row


def render_compare(rows: list[dict[str, Any]], window_s: float, after_s: float) -> list[str]:
    """The short table of several runs of one configuration (settings off and on, another tree)."""

    def cell(value: Any, fmt: str = "{}") -> str:
        return "-" if value is None else fmt.format(value)

    lines = [
        f"Window {window_s:.0f} s; steady: the verdicts after {after_s:.0f} s; lock times: correct candidates "
        "after that, mean s (n); repeat CoV: the spread of one task's repeated medians, median over tasks.",
        "",
        "| config | verdicts | evals/h | evals/h after first "
        f"{after_s:.0f} s | lock held | function under lock (n) | its trials' lock wait | function trials "
        "| kernel under lock (n) | repeat CoV function / kernel (tasks) | kernel runs ahead / function "
        "runs passed over (mean) |",
        "|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for r in rows:
        lines.append(
            f"| {r['name']} | {r['verdicts']} | {r['per_hour']} | **{cell(r['steady_per_hour'])}** "
            f"| {r['lock_held']:.0%} | {cell(r['function_held'], '{:.3f}')} ({r['function_n']}) "
            f"| {cell(r['function_trials_wait'], '{:.3f}')} | {cell(r['function_trials'])} "
            f"| {cell(r['kernel_held'], '{:.3f}')} ({r['kernel_n']}) "
            f"| {cell(r['function_repeat_cov'], '{:.1%}')} / {cell(r['kernel_repeat_cov'], '{:.1%}')} "
            f"({r['function_repeat_tasks']}+{r['kernel_repeat_tasks']}) "
            f"| {cell(r['kernel_ahead'], '{:.0%}')} / {cell(r['function_skipped'], '{:.2f}')} |"
        )
    return lines


def lock_by_kind(records: list[dict[str, Any]]) -> dict[str, dict[str, float]]:
    """Mean lock-time stages and trials of the correct candidates' records, per task kind."""
    by_kind: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for record in records:
        if record["candidate"] == "correct" and record["error"] is None:
            by_kind[record["task_kind"]].append(record)
    table = {}
    for kind, rows in sorted(by_kind.items()):
        stages = (
            "gpu_held",
            "handover",
            "run_lock_wait",
            "correctness",
            "timing_trials",
            "host_gate_wait",
            "after_release",
        )
        table[kind] = {key: statistics.mean(row["seconds"].get(key, 0.0) for row in rows) for key in stages}
        table[kind]["released"] = statistics.mean(float("after_release" in row["seconds"]) for row in rows)
        table[kind]["trials"] = statistics.mean(row["trials"] or 0 for row in rows)
        table[kind]["n"] = len(rows)
    return table


def main(argv: list[str] | None = None) -> int:
    """Command-line entry point."""
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--tasks", type=Path, action="append", help="a directory of tasks (repeatable)")
    parser.add_argument("--limit", type=int, default=1000, help="at most this many tasks per directory")
    parser.add_argument(
        "--runtime", choices=["gpu", "none", "host", "auto"], default="auto", help="host: CPU, function tasks"
    )
    parser.add_argument("--settings", default="{}", help="ExecutorSettings fields as JSON (every replica's)")
    parser.add_argument("--ray", default=None, help="a running cluster's address (default: start one here)")
    parser.add_argument("--replicas", default="1", help="fleet sizes to run the queue on, e.g. 1,2,4")
    parser.add_argument("--single", action="store_true", help="one executor without Ray instead of a fleet")
    parser.add_argument("--per-task", type=int, default=2, help="correct candidates per task")
    parser.add_argument("--hangs", type=int, default=3, help="candidates that never return")
    parser.add_argument("--clients", type=int, default=4, help="concurrent callers per replica")
    parser.add_argument("--seed", type=int, default=0, help="the queue's shuffle")
    parser.add_argument("--kill-after", type=int, default=None, help="kill one replica after K verdicts")
    parser.add_argument("--options", default="{}", help="EvaluationOptions fields as JSON")
    parser.add_argument(
        "--max-seconds", type=float, default=None, help="stop starting candidates after this (per fleet size)"
    )
    parser.add_argument(
        "--hard-stop",
        action="store_true",
        help="at --max-seconds, drop the calls in flight instead of waiting for them (a window of exactly that)",
    )
    parser.add_argument(
        "--steady-after",
        type=float,
        default=60.0,
        help="also report the rate of the verdicts after this many seconds (runs of twice that or more)",
    )
    parser.add_argument(
        "--probe",
        action="store_true",
        help="every task's known-good candidate once, then again, on a fleet of the first --replicas size",
    )
    parser.add_argument(
        "--prepare-first",
        action="store_true",
        help="queue mode: before the windows, every task of the queue prepared (POST /v1/prepare, waited "
        "for until its naive baseline is stored) on a fleet of the largest --replicas size; then every "
        "window over that same store (the host's), its candidates new compiles: the steady state",
    )
    parser.add_argument(
        "--prepare-timeout", type=float, default=300.0, help="--prepare-first: the pass's limit in seconds"
    )
    parser.add_argument(
        "--prepare-only",
        action="store_true",
        help="the prepare pass of --prepare-first alone (no window), into --cache for later runs",
    )
    parser.add_argument(
        "--cache",
        type=Path,
        default=None,
        help="queue mode: the host's store, kept after the run (default: a temporary one, and without "
        "--prepare-first a fresh cache per fleet size); every window over it, its candidates new compiles",
    )
    parser.add_argument("--probe-clients", type=int, default=16, help="probe mode: callers in all")
    parser.add_argument("--overhead", action="store_true", help="measure the fleet's overhead on the CPU")
    parser.add_argument("--evals", type=int, default=200, help="overhead mode: evaluations measured")
    parser.add_argument(
        "--compare",
        nargs="+",
        metavar="NAME=JSON",
        default=None,
        help="no run: the short table of earlier runs' JSONs (of this probe or an older tree's), one line "
        "each, recomputed from their records for a window of --max-seconds and a steady part after "
        "--steady-after (bench/device/run_s17_ab.sh)",
    )
    parser.add_argument("--out", type=Path, default=None)
    parser.add_argument("--md", type=Path, default=None)
    args = parser.parse_args(argv)
    unknown = set(json.loads(args.settings)) - set(ExecutorSettings.model_fields)
    if unknown:  # the settings ignore unknown fields: a misspelt one would silently do nothing
        parser.error(f"--settings: no such executor setting: {', '.join(sorted(unknown))}")
    if args.compare:
        if args.max_seconds is None:
            parser.error("--compare needs --max-seconds (the runs' window)")
        rows = []
        for item in args.compare:
            name, _, path = item.partition("=")
            try:
                rows.append(
                    compare_row(name, json.loads(Path(path).read_text()), args.max_seconds, args.steady_after)
                )
            except (OSError, ValueError, KeyError, IndexError) as e:
                sys.stderr.write(f"{name}: no result ({type(e).__name__}: {e})\n")
        table = "\n".join(render_compare(rows, args.max_seconds, args.steady_after)) + "\n"
        if args.out is not None:
            args.out.write_text(json.dumps(rows, indent=2) + "\n")
        if args.md is not None:
            args.md.write_text(table)
        sys.stdout.write(table)
        return 0
    args.tasks = args.tasks or [TASKS_DIR, KERNEL_TASKS_DIR]
    logging.basicConfig(level=logging.WARNING, format="%(name)s: %(message)s", stream=sys.stderr)
    logger.setLevel(logging.INFO)
    result: dict[str, Any] = {
        "command": "python -m bench.probes.throughput "
        + " ".join(argv if argv is not None else sys.argv[1:]),
        "date": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "host": f"{platform.node()} ({platform.processor() or platform.machine()})",
        "runtime": "none" if args.overhead else args.runtime,
    }
    with tempfile.TemporaryDirectory(prefix="throughput-") as tmp:
        if args.overhead:
            result["overhead"] = measure_overhead(args, Path(tmp) / "cache")
        elif args.probe:
            dirs = [d for root in args.tasks for d in task_dirs([root])[: args.limit]]
            replicas = 1 if args.single else int(args.replicas.split(",")[0])
            result["probe"] = run_probe(args, dirs, replicas, Path(tmp) / "cache-probe")
        else:
            dirs = [d for root in args.tasks for d in task_dirs([root])[: args.limit]]
            items = build_queue(dirs, args.per_task, args.hangs, args.seed, args.runtime)
            logger.info("queue: %d candidates over %d tasks", len(items), len(dirs))
            runs = []
            sizes = [int(x) for x in args.replicas.split(",")]
            # One store for the prepare pass and every window (the host's, as a deployment's replicas
            # and restarts share it), or a fresh cache per fleet size.
            shared = args.cache is not None or args.prepare_first or args.prepare_only
            host = args.cache or Path(tmp) / "cache-host"
            if args.prepare_first or args.prepare_only:
                result["prepare"] = prepare_pass(args, items, 1 if args.single else max(sizes), host)
            for n in [] if args.prepare_only else sizes:
                if shared:
                    # Its candidates compiled as new (the store may hold an earlier window's compiles:
                    # a tag of its own, whichever run made that window).
                    run = run_queue(
                        args, retag(items, f"w{secrets.token_hex(4)}"), 1 if args.single else n, host
                    )
                    runs.append(run | {"store": str(host), "prepared_first": "prepare" in result})
                else:
                    # A fresh cache per fleet size: each run builds its references and timing sets itself.
                    runs.append(run_queue(args, items, 1 if args.single else n, Path(tmp) / f"cache-{n}"))
                if args.out is not None:
                    args.out.write_text(json.dumps({**result, "runs": runs}, indent=2, default=str) + "\n")
            result["runs"] = runs
    if args.out is not None:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(json.dumps(result, indent=2, default=str) + "\n")
    table = render(result)
    if args.md is not None:
        args.md.parent.mkdir(parents=True, exist_ok=True)
        args.md.write_text(table)
    sys.stdout.write(table)
    return 0


if __name__ == "__main__":
    sys.exit(main())
