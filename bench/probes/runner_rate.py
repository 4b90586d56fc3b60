"""What the candidate process (the runner, ``REGRAPH_EXECUTOR_CANDIDATE_PROCESS=1``) costs an executor's
evaluation rate and its timings, on function tasks, runner off against on.

    python -m bench.probes.runner_rate --runtime gpu --budget-s 400 \\
        --out runner_rate.json --md runner_rate.md --logs /tmp/runner_rate_logs

Two executor services (``python -m executor.server``) run side by side on loopback ports, the same
settings and the same store (``cache_dir``), one with the runner off, one with it on: the runner is
read by each worker from the environment it inherits, so one process cannot serve both modes. Each is
started and its tasks prepared (``POST /v1/prepare``) once, not once per block, so neither mode's
blocks pay a start or a task's preparation. On a GPU their workers take the same device-wide locks
(``executor.gpulock``), so the idle service's background work (a spare's context, a prepared worker)
cannot overlap the other's trials unseen; the timing cores are set to the same explicit value in both
(the automatic value is claimed host-wide by whichever starts first, and the second would run its
trials unreserved).

Every evaluation is a fresh candidate: the task's honest candidate (``bench.probes.executor_bench``:
its ``naive.cu`` on a GPU, its serial reference made into a candidate on the host runtime) with a unique
device variable appended, so it compiles, is checked and timed in full, as in a search. The modes
alternate block by block, in the order off, on, on, off, ... (ABBA), so that drift hits both. Two
regimes, each given its share of the budget:

* ``seq``: one evaluation at a time; a block is every task in turn, ``--per-visit`` evaluations of each
  back to back (a search sends a task's candidates one after the other, which the service's
  ``prepare_next`` serves);
* ``conc``: ``--concurrency`` callers drain a block of the same items at once (compiles and host work
  overlap, the GPU's turn is one run at a time).

A round (two blocks, one per mode) starts only while the regime's time is expected to hold it; no
evaluation starts past the budget. Every verdict is written to ``--out`` as it comes (``partial``
until the end), and the tables are rewritten after every block, so a run cut short keeps what it did.

Reported: per regime and mode the evaluations, their wall, evaluations per hour, the median and 90th
percentile of an evaluation's wall as its caller saw it, and the medians of the verdict's ``seconds``;
the ratio on/off of the rates with its spread over rounds and over tasks; per task the medians of the
passing evaluations' ``median_ms`` (and speedups) in both modes and their ratio, with the spread of the
ratios of the repeats paired in order (the serial reference is timed once, in the one store: every
speedup is that one time over the evaluation's median, in both modes); every verdict that did not pass; and whether the runner
ran, two ways: ``seconds["runner_roundtrip"]`` (reported by a worker that timed through a runner, never
otherwise), and the runner processes seen in ``/proc`` under each service (:class:`RunnerWatch`).
``--render JSON`` prints the tables of a (partial) JSON.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections import defaultdict
from pathlib import Path
from typing import Any

import httpx

from bench.probes.executor_bench import candidate_source
from executor.fleet.pinning import auto_timing_cores
from executor.protocol import CandidateSource, EvaluateRequest, EvaluationOptions, PrepareRequest, Verdict
from executor.taskformat import FunctionTask, KernelTask, load_task
from regraph_data import TASKS_DIR

MODES = ("off", "on")
REGIMES = ("seq", "conc")
RUNNER_ENV = "REGRAPH_EXECUTOR_CANDIDATE_PROCESS"
# Function tasks whose honest candidate passed on the H200 in session 36 with a run of 0.1-2 s (two of
# them, argmax_f32 and batched_gemm32_f32, had a runner median 15 % and 29 % above the in-process one
# in its single run each), and which prepare in seconds.
DEFAULT_TASKS = (
    "adler32_blocks_u32",
    "argmax_f32",
    "asian_call_mc_f32",
    "batched_gemm32_f32",
    "bellman_ford_rounds_f32",
    "cc_label_prop_i32",
    "complex_fir_f32",
    "crc32_blocks_u32",
)
# The verdict's seconds whose medians the rate table shows (all of them are kept in the JSON).
SECONDS_SHOWN = (
    "total",
    "compile",
    "reference_wait",
    "run",
    "inputs_wait",
    "correctness",
    "timing",
    "timing_trials",
    "runner_start",
    "runner_roundtrip",
)
STOP_MARGIN_S = 25.0  # kept at the end of the budget for the services' stop and the last write


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class Service:
    """One executor service in a process of its own (its own session, so that its workers go with it)."""

    def __init__(
        self, mode: str, runtime: str, cache: Path, logs: Path, timing_cores: int, extra: dict[str, str]
    ):
        self.mode = mode
        self.port = _free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        env = {k: v for k, v in os.environ.items() if k != RUNNER_ENV}
        env.update(
            {
                "REGRAPH_EXECUTOR_PORT": str(self.port),
                "REGRAPH_EXECUTOR_HOST": "127.0.0.1",
                "REGRAPH_EXECUTOR_RUNTIME": runtime,
                "REGRAPH_EXECUTOR_CACHE_DIR": str(cache),
                "REGRAPH_EXECUTOR_TIMING_CORES": str(timing_cores),
                **extra,
            }
        )
        if mode == "on":
            env[RUNNER_ENV] = "1"
        self.log_path = logs / f"service_{mode}.log"
        self._log = self.log_path.open("w")
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "executor.server"],
            env=env,
            stdout=self._log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
        # For the device script, which kills what is left of these sessions if this process was killed.
        with (logs / "service_pids").open("a") as pids:
            pids.write(f"{self.proc.pid}\n")

    def wait_ready(self, deadline: float) -> dict[str, Any]:
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(
                    f"service {self.mode} exited with {self.proc.returncode}: see {self.log_path}"
                )
            with contextlib.suppress(httpx.HTTPError):
                answer = httpx.get(f"{self.url}/readyz", timeout=5)
                if answer.status_code == 200:
                    ready: dict[str, Any] = answer.json()
                    with contextlib.suppress(httpx.HTTPError, ValueError):
                        ready["device"] = httpx.get(f"{self.url}/v1/device", timeout=30).json()
                    return ready
            time.sleep(0.5)
        raise RuntimeError(f"service {self.mode} not ready in time: see {self.log_path}")

    def stop(self) -> None:
        if self.proc.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                self.proc.send_signal(signal.SIGTERM)
            with contextlib.suppress(subprocess.TimeoutExpired):
                self.proc.wait(timeout=15)
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(self.proc.pid, signal.SIGKILL)  # whatever of its session is left
        with contextlib.suppress(subprocess.TimeoutExpired):
            self.proc.wait(timeout=5)
        self._log.close()


class RunnerWatch:
    """An independent check that the runner runs: every ``interval`` s, the processes whose command line is
    the runner's (``executor.worker runner candidate``), each attributed to the service it descends from
    (its parent chain: runner, worker, the jail's init and ``unshare``, the service). A runner lives for its
    worker's run, so a short one can be missed; the count says whether any were seen under each service,
    not how many ran. ``unattributed``: a runner of another process of the host (a test), or one whose
    parents ended while the chain was read."""

    def __init__(self, services: dict[str, Service], interval: float = 0.5):
        self.services = services
        self.interval = interval
        self.seen: dict[str, set[int]] = {mode: set() for mode in MODES}
        self.seen["unattributed"] = set()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, daemon=True)

    def __enter__(self) -> RunnerWatch:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join(timeout=5)

    @staticmethod
    def _parent(pid: int) -> int | None:
        try:
            text = Path(f"/proc/{pid}/stat").read_text()
        except OSError:
            return None
        return int(text.rpartition(")")[2].split()[1])

    def _loop(self) -> None:
        roots = {service.proc.pid: mode for mode, service in self.services.items()}
        while not self._stop.wait(self.interval):
            for entry in Path("/proc").iterdir():
                if not entry.name.isdigit():
                    continue
                try:
                    argv = (entry / "cmdline").read_bytes().split(b"\0")
                except OSError:
                    continue
                if b"executor.worker" not in argv or b"runner" not in argv or b"candidate" not in argv:
                    continue
                pid: int | None = int(entry.name)
                owner = "unattributed"
                for _ in range(12):
                    pid = self._parent(pid) if pid else None
                    if pid is None or pid <= 1:
                        break
                    if pid in roots:
                        owner = roots[pid]
                        break
                self.seen[owner].add(int(entry.name))

    def counts(self) -> dict[str, int]:
        return {owner: len(pids) for owner, pids in self.seen.items()}


class Run:
    """The measurement's state: the records so far, written to ``out`` as they come."""

    def __init__(
        self, args: argparse.Namespace, tasks: list[FunctionTask | KernelTask], sources: dict[str, str]
    ):
        self.args = args
        self.tasks = tasks
        self.sources = sources
        self.options = EvaluationOptions.model_validate(json.loads(args.options))
        self.began = time.monotonic()
        self.hard_end: float = self.began + float(args.budget_s) - STOP_MARGIN_S
        self.doc: dict[str, Any] = {
            "partial": True,
            "date": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
            "command": " ".join(sys.argv),
            "runtime": args.runtime,
            "tasks": [t.id for t in tasks],
            "settings": {},
            "services": {},
            "prepare": {},
            "warmup": [],
            "blocks": [],
            "records": [],
            "notes": [],
        }
        self.counter = 0

    def elapsed(self) -> float:
        return time.monotonic() - self.began

    def flush(self, tables: bool = False) -> None:
        out: Path = self.args.out
        out.parent.mkdir(parents=True, exist_ok=True)
        tmp = out.with_suffix(".tmp")
        tmp.write_text(json.dumps(self.doc, indent=1, default=str) + "\n")
        tmp.replace(out)
        if tables and self.args.md is not None:
            self.args.md.write_text(render(self.doc))

    def item(self, mode: str, task: FunctionTask | KernelTask) -> EvaluateRequest:
        self.counter += 1
        source = f"{self.sources[task.id]}\n__device__ int xrate_{mode}_{self.counter}_{time.time_ns()};\n"
        return EvaluateRequest(task=task, candidate=CandidateSource(source=source), options=self.options)

    def record(
        self,
        regime: str,
        rnd: int,
        mode: str,
        task_id: str,
        verdict: Verdict | None,
        error: str | None,
        started: float,
        wall: float,
    ) -> dict[str, Any]:
        timing = verdict.candidate_timing if verdict else None
        seconds = dict(verdict.seconds) if verdict else {}
        row = {
            "regime": regime,
            "round": rnd,
            "mode": mode,
            "task": task_id,
            "t": round(started - self.began, 3),
            "wall_s": round(wall, 4),
            "passed": bool(verdict and verdict.passed),
            "stage": verdict.stage if verdict else None,
            "error": (verdict.error.value if verdict and verdict.error else None) if verdict else "http",
            "message": (verdict.message if verdict else (error or ""))[:400],
            "median_ms": timing.median_ms if timing else None,
            "cov": timing.cov if timing else None,
            "trials": timing.trials if timing else None,
            "speedup": verdict.speedup if verdict else None,
            "runner": "runner_roundtrip" in seconds,
            "ran": bool(verdict and verdict.runtime_stages == "run") or "run" in seconds,
            "seconds": {k: round(v, 5) for k, v in seconds.items()},
        }
        self.doc["records"].append(row)
        self.flush()
        return row


def _timeout(run: Run) -> float:
    return max(30.0, run.hard_end - time.monotonic() + 60.0)


def evaluate_sync(
    run: Run, http: httpx.Client, regime: str, rnd: int, mode: str, task: FunctionTask | KernelTask
) -> dict[str, Any]:
    body = run.item(mode, task).model_dump_json()
    started = time.monotonic()
    verdict, error = None, None
    try:
        answer = http.post("/v1/evaluate", content=body, timeout=_timeout(run))
        if answer.is_success:
            verdict = Verdict.model_validate_json(answer.content)
        else:
            error = f"HTTP {answer.status_code}: {answer.text[:300]}"
    except httpx.HTTPError as e:
        error = f"{type(e).__name__}: {e}"
    return run.record(regime, rnd, mode, task.id, verdict, error, started, time.monotonic() - started)


def seq_block(run: Run, services: dict[str, Service], rnd: int, mode: str) -> dict[str, Any]:
    """Every task in turn, ``per_visit`` evaluations each, one at a time, on the service of ``mode``."""
    start = time.monotonic()
    n = 0
    complete = True
    headers = {"content-type": "application/json"}
    with httpx.Client(base_url=services[mode].url, headers=headers) as http:
        for task in run.tasks:
            for _ in range(run.args.per_visit):
                if time.monotonic() >= run.hard_end:
                    complete = False
                    break
                evaluate_sync(run, http, "seq", rnd, mode, task)
                n += 1
    return {
        "regime": "seq",
        "round": rnd,
        "mode": mode,
        "n": n,
        "wall_s": time.monotonic() - start,
        "complete": complete,
    }


async def _conc_block(run: Run, url: str, rnd: int, mode: str) -> tuple[int, bool]:
    items = [task for _ in range(run.args.per_visit) for task in run.tasks]
    queue: asyncio.Queue[FunctionTask | KernelTask] = asyncio.Queue()
    for task in items:
        queue.put_nowait(task)
    done = 0

    async def caller(http: httpx.AsyncClient) -> None:
        nonlocal done
        while not queue.empty() and time.monotonic() < run.hard_end:
            task = queue.get_nowait()
            body = run.item(mode, task).model_dump_json()
            started = time.monotonic()
            verdict, error = None, None
            try:
                answer = await http.post("/v1/evaluate", content=body, timeout=_timeout(run))
                if answer.is_success:
                    verdict = Verdict.model_validate_json(answer.content)
                else:
                    error = f"HTTP {answer.status_code}: {answer.text[:300]}"
            except httpx.HTTPError as e:
                error = f"{type(e).__name__}: {e}"
            run.record("conc", rnd, mode, task.id, verdict, error, started, time.monotonic() - started)
            done += 1

    headers = {"content-type": "application/json"}
    async with httpx.AsyncClient(base_url=url, headers=headers) as http:
        await asyncio.gather(*(caller(http) for _ in range(run.args.concurrency)))
    return done, done == len(items)


def conc_block(run: Run, services: dict[str, Service], rnd: int, mode: str) -> dict[str, Any]:
    start = time.monotonic()
    n, complete = asyncio.run(_conc_block(run, services[mode].url, rnd, mode))
    return {
        "regime": "conc",
        "round": rnd,
        "mode": mode,
        "n": n,
        "wall_s": time.monotonic() - start,
        "complete": complete,
    }


def prepare(run: Run, service: Service, timeout_s: float) -> dict[str, Any]:
    """Every task prepared on ``service`` (started at once, then waited for), as a job that starts does."""

    async def go() -> list[dict[str, Any]]:
        async with httpx.AsyncClient(base_url=service.url, timeout=timeout_s + 30) as http:

            async def one(task: FunctionTask | KernelTask, wait_s: float) -> dict[str, Any]:
                body = PrepareRequest(task=task, options=run.options, wait_s=wait_s).model_dump_json()
                try:
                    answer = await http.post(
                        "/v1/prepare", content=body, headers={"content-type": "application/json"}
                    )
                except httpx.HTTPError as e:
                    return {"task": task.id, "error": f"{type(e).__name__}: {e}"}
                if not answer.is_success:
                    return {"task": task.id, "error": answer.text[:300]}
                return dict(answer.json())

            await asyncio.gather(*(one(t, 0.0) for t in run.tasks))
            return list(await asyncio.gather(*(one(t, max(1.0, timeout_s)) for t in run.tasks)))

    start = time.monotonic()
    answers = asyncio.run(go())
    return {
        "seconds": round(time.monotonic() - start, 2),
        "ready": sum(bool(a.get("ready")) for a in answers),
        "answers": answers,
    }


def regime_loop(run: Run, services: dict[str, Service], regime: str, end: float) -> None:
    """Rounds of two blocks (ABBA order over rounds) while the regime's time is expected to hold one."""
    block = seq_block if regime == "seq" else conc_block
    items = len(run.tasks) * run.args.per_visit
    # A first guess of a block's length from the warm-up evaluations, then the mean of this regime's.
    warm = [w["wall_s"] for w in run.doc["warmup"]] or [3.0]
    guess = statistics.fmean(warm) * items / (1 if regime == "seq" else max(1.0, run.args.concurrency / 1.5))
    walls: list[float] = []
    rnd = 0
    while True:
        now = time.monotonic()
        estimate = statistics.fmean(walls) if walls else guess
        if now >= min(end, run.hard_end) or (rnd > 0 and now + 2 * estimate > end):
            break
        order = MODES if rnd % 2 == 0 else MODES[::-1]
        for mode in order:
            if time.monotonic() >= run.hard_end:
                break
            info = block(run, services, rnd, mode)
            walls.append(info["wall_s"])
            run.doc["blocks"].append(info)
            run.flush(tables=True)
            print(
                f"[{run.elapsed():6.1f} s] {regime} round {rnd} {mode}: {info['n']} evaluations in "
                f"{info['wall_s']:.1f} s{'' if info['complete'] else ' (cut short)'}",
                flush=True,
            )
        rnd += 1


def measure(args: argparse.Namespace) -> dict[str, Any]:
    tasks: list[FunctionTask | KernelTask] = []
    sources: dict[str, str] = {}
    for name in args.tasks.split(","):
        d = args.task_dir / name.strip()
        task = load_task(d)
        if isinstance(task, KernelTask):
            raise SystemExit(f"{name} is a kernel task: the runner concerns function tasks only")
        source = candidate_source(d, task, "host" if args.runtime == "host" else "gpu")
        if source is None:
            raise SystemExit(f"{name} has no honest candidate")
        tasks.append(task)
        sources[task.id] = source
    run = Run(args, tasks, sources)
    timing_cores = args.timing_cores
    if timing_cores is None:
        timing_cores = auto_timing_cores(len(os.sched_getaffinity(0)))
    extra = {"REGRAPH_EXECUTOR_RUN_TIMEOUT_S": str(args.run_timeout_s)}
    run.doc["settings"] = {
        "concurrency": args.concurrency,
        "per_visit": args.per_visit,
        "seq_share": args.seq_share,
        "budget_s": args.budget_s,
        "timing_cores": timing_cores,
        "options": run.options.model_dump(),
        "cache": "one store for both services",
        "env": extra,
    }
    logs: Path = args.logs
    logs.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="runner-rate-") as tmp:
        cache = Path(tmp) / "cache"
        services: dict[str, Service] = {}
        try:
            for mode in MODES:
                services[mode] = Service(mode, args.runtime, cache, logs, timing_cores, extra)
            ready_by = time.monotonic() + min(180.0, args.budget_s / 3)
            for mode in MODES:
                run.doc["services"][mode] = services[mode].wait_ready(ready_by)
            print(f"[{run.elapsed():6.1f} s] both services ready", flush=True)
            # The tasks prepared on the service with the runner off first, then on the other, which finds
            # the timing sets and the reference's outputs stored (one store).
            for mode in MODES:
                left = run.hard_end - time.monotonic()
                run.doc["prepare"][mode] = prepare(run, services[mode], min(args.prepare_timeout_s, left / 3))
                print(
                    f"[{run.elapsed():6.1f} s] prepared ({mode}): {run.doc['prepare'][mode]['ready']} ready "
                    f"in {run.doc['prepare'][mode]['seconds']} s",
                    flush=True,
                )
            # An evaluation of the first task(s) per mode, not counted: the services' first after preparing.
            headers = {"content-type": "application/json"}
            for task in tasks[: args.warmup_tasks]:
                for mode in MODES:
                    if time.monotonic() >= run.hard_end:
                        break
                    with httpx.Client(base_url=services[mode].url, headers=headers) as http:
                        row = evaluate_sync(run, http, "warmup", -1, mode, task)
                    run.doc["records"].pop()
                    run.doc["warmup"].append(row)
            run.flush()
            print(f"[{run.elapsed():6.1f} s] warm-up done ({len(run.doc['warmup'])} evaluations)", flush=True)
            left = run.hard_end - time.monotonic()
            seq_end = time.monotonic() + left * args.seq_share
            with RunnerWatch(services) as watch:
                try:
                    regime_loop(run, services, "seq", seq_end)
                    regime_loop(run, services, "conc", run.hard_end)
                finally:
                    run.doc["runner_processes_seen"] = watch.counts()
        finally:
            for service in services.values():
                service.stop()
    run.doc["partial"] = False
    run.doc["wall_s"] = round(run.elapsed(), 1)
    run.flush(tables=True)
    return run.doc


# --- the tables ---------------------------------------------------------------------------------------


def _pct(values: list[float], q: float) -> float | None:
    if not values:
        return None
    ordered = sorted(values)
    k = (len(ordered) - 1) * q
    lo = int(k)
    hi = min(lo + 1, len(ordered) - 1)
    return ordered[lo] + (ordered[hi] - ordered[lo]) * (k - lo)


def _spread(values: list[float]) -> dict[str, float | int | None]:
    return {
        "n": len(values),
        "min": min(values) if values else None,
        "median": statistics.median(values) if values else None,
        "max": max(values) if values else None,
    }


def summarize(doc: dict[str, Any]) -> dict[str, Any]:
    records = doc["records"]
    blocks = doc["blocks"]
    out: dict[str, Any] = {}
    for regime in REGIMES:
        mine = [r for r in records if r["regime"] == regime]
        if not mine:
            continue
        modes: dict[str, Any] = {}
        for mode in MODES:
            rows = [r for r in mine if r["mode"] == mode]
            walls = [r["wall_s"] for r in rows]
            wall = sum(b["wall_s"] for b in blocks if b["regime"] == regime and b["mode"] == mode)
            seconds: dict[str, list[float]] = defaultdict(list)
            for r in rows:
                for k, v in r["seconds"].items():
                    seconds[k].append(v)
            modes[mode] = {
                "evaluations": len(rows),
                "passed": sum(r["passed"] for r in rows),
                "wall_s": wall,
                "per_hour": 3600 * len(rows) / wall if wall > 0 else None,
                "eval_p50_s": _pct(walls, 0.5),
                "eval_p90_s": _pct(walls, 0.9),
                "seconds_median": {k: statistics.median(v) for k, v in sorted(seconds.items())},
                "runner_seen": sum(r["runner"] for r in rows),
                "ran": sum(r["ran"] for r in rows),
            }
        entry: dict[str, Any] = {"modes": modes}
        off, on = modes["off"].get("per_hour"), modes["on"].get("per_hour")
        entry["ratio"] = on / off if off and on else None
        # Per round: the rate of its on block over its off block (both complete, the same items).
        by_round: dict[int, dict[str, dict[str, Any]]] = defaultdict(dict)
        for b in blocks:
            if b["regime"] == regime and b["complete"] and b["n"]:
                by_round[b["round"]][b["mode"]] = b
        entry["round_ratios"] = [
            (pair["off"]["wall_s"] / pair["off"]["n"]) / (pair["on"]["wall_s"] / pair["on"]["n"])
            for _, pair in sorted(by_round.items())
            if len(pair) == 2
        ]
        # Per task: mean wall of an evaluation off over on (the rate ratio a task alone would show).
        per_task = {}
        for task in doc["tasks"]:
            w = {m: [r["wall_s"] for r in mine if r["task"] == task and r["mode"] == m] for m in MODES}
            if w["off"] and w["on"]:
                per_task[task] = {
                    "n_off": len(w["off"]),
                    "n_on": len(w["on"]),
                    "wall_off_s": statistics.fmean(w["off"]),
                    "wall_on_s": statistics.fmean(w["on"]),
                    "ratio": statistics.fmean(w["off"]) / statistics.fmean(w["on"]),
                }
        entry["per_task"] = per_task
        entry["task_ratios"] = _spread([t["ratio"] for t in per_task.values()])
        entry["round_ratio_spread"] = _spread(entry["round_ratios"])
        # Timing fidelity: the passing evaluations' medians, per task, on over off.
        fidelity = {}
        for task in doc["tasks"]:
            ms = {
                m: [r["median_ms"] for r in mine if r["task"] == task and r["mode"] == m and r["passed"]]
                for m in MODES
            }
            sp = {
                m: [
                    r["speedup"]
                    for r in mine
                    if r["task"] == task and r["mode"] == m and r["passed"] and r["speedup"]
                ]
                for m in MODES
            }
            if not (ms["off"] or ms["on"]):
                continue
            paired = [b / a for a, b in zip(ms["off"], ms["on"], strict=False) if a > 0]
            row: dict[str, Any] = {
                "n_off": len(ms["off"]),
                "n_on": len(ms["on"]),
                "ms_off": statistics.median(ms["off"]) if ms["off"] else None,
                "ms_on": statistics.median(ms["on"]) if ms["on"] else None,
                "speedup_off": statistics.median(sp["off"]) if sp["off"] else None,
                "speedup_on": statistics.median(sp["on"]) if sp["on"] else None,
                "paired": _spread(paired),
                "ms_off_all": ms["off"],
                "ms_on_all": ms["on"],
            }
            row["ratio"] = row["ms_on"] / row["ms_off"] if row["ms_off"] and row["ms_on"] else None
            fidelity[task] = row
        entry["fidelity"] = fidelity
        entry["fidelity_ratios"] = _spread([f["ratio"] for f in fidelity.values() if f["ratio"]])
        entry["fidelity_paired_all"] = _spread(
            [
                b / a
                for f in fidelity.values()
                for a, b in zip(f["ms_off_all"], f["ms_on_all"], strict=False)
                if a > 0
            ]
        )
        out[regime] = entry
    return out


def _f(value: Any, fmt: str = "{:.3f}") -> str:
    return "-" if value is None else fmt.format(value)


def _sp(s: dict[str, Any], fmt: str = "{:.3f}") -> str:
    if not s.get("n"):
        return "-"
    return f"{_f(s['min'], fmt)} / {_f(s['median'], fmt)} / {_f(s['max'], fmt)} (n={s['n']})"


def render(doc: dict[str, Any]) -> str:
    summary = summarize(doc)
    settings = doc.get("settings", {})
    device = (doc.get("services", {}).get("off") or {}).get("device") or {}
    lines = [
        f"# Runner off vs on: evaluation rate and timings ({doc.get('date', '?')}"
        f"{', PARTIAL' if doc.get('partial') else ''})",
        "",
        f"runtime {doc.get('runtime')}; device {device.get('name', '?')}; tasks ({len(doc['tasks'])}): "
        f"{', '.join(doc['tasks'])}; per visit {settings.get('per_visit')}; concurrency (conc) "
        f"{settings.get('concurrency')}; timing cores {settings.get('timing_cores')} (both services); "
        f"baseline {json.dumps(settings.get('options', {}).get('baseline'))}; budget "
        f"{settings.get('budget_s')} s, wall {doc.get('wall_s', '?')} s; two services side by side, one store.",
        "",
    ]
    prep = doc.get("prepare", {})
    if prep:
        lines.append(
            "Prepared: "
            + "; ".join(
                f"{m} {p['ready']}/{len(doc['tasks'])} ready in {p['seconds']} s" for m, p in prep.items()
            )
            + f"; warm-up evaluations (not counted): {len(doc.get('warmup', []))}, "
            f"{sum(w['passed'] for w in doc.get('warmup', []))} passed."
        )
        for mode, p in prep.items():
            for a in p["answers"]:
                if not a.get("ready"):
                    what = str(a.get("error") or f"baseline {a.get('baseline')}").replace("\n", " ")[:200]
                    lines.append(
                        f"- not prepared in time ({mode}): {a.get('task') or a.get('task_id')}: {what}"
                    )
        lines.append("")
    lines += [
        "## Evaluation rate",
        "",
        "Evaluations per hour = evaluations / the wall of that mode's blocks; eval p50/p90: an evaluation's "
        "wall as its caller saw it; the rest: medians of the verdicts' `seconds` (runner_roundtrip in ms).",
        "",
        "| regime | mode | evals (passed) | wall s | evals/hour | eval p50 s | eval p90 s | "
        + " | ".join(SECONDS_SHOWN)
        + " |",
        "| --- | --- | --- | ---: | ---: | ---: | ---: | " + " | ".join("---:" for _ in SECONDS_SHOWN) + " |",
    ]
    for regime, entry in summary.items():
        for mode in MODES:
            m = entry["modes"][mode]
            cells = []
            for key in SECONDS_SHOWN:
                v = m["seconds_median"].get(key)
                cells.append(_f(v * 1000 if v is not None and key == "runner_roundtrip" else v))
            lines.append(
                f"| {regime} | {mode} | {m['evaluations']} ({m['passed']}) | {m['wall_s']:.1f} | "
                f"{_f(m['per_hour'], '{:.0f}')} | {_f(m['eval_p50_s'])} | {_f(m['eval_p90_s'])} | "
                + " | ".join(cells)
                + " |"
            )
    lines += [
        "",
        "| regime | rate on/off | per round min / median / max | per task min / median / max |",
        "| --- | ---: | --- | --- |",
    ]
    for regime, entry in summary.items():
        lines.append(
            f"| {regime} | {_f(entry['ratio'])} | {_sp(entry['round_ratio_spread'])} | {_sp(entry['task_ratios'])} |"
        )
    lines += [
        "",
        "Per task (mean wall of an evaluation; ratio = off/on, the rate on over off):",
        "",
        "| regime | task | n off | n on | wall off s | wall on s | rate on/off |",
        "| --- | --- | ---: | ---: | ---: | ---: | ---: |",
    ]
    for regime, entry in summary.items():
        for task, t in entry["per_task"].items():
            lines.append(
                f"| {regime} | {task} | {t['n_off']} | {t['n_on']} | {t['wall_off_s']:.3f} | {t['wall_on_s']:.3f} | "
                f"{t['ratio']:.3f} |"
            )
    lines += [
        "",
        "## Timing fidelity",
        "",
        "Medians over the passing evaluations of each one's `median_ms`; ratio = on/off (> 1: the runner's "
        "timings are higher); paired: the k-th evaluation on over the k-th off of the task and regime.",
        "",
        "| regime | task | n off | n on | median ms off | median ms on | ratio on/off | paired min / median / max | "
        "speedup off | speedup on |",
        "| --- | --- | ---: | ---: | ---: | ---: | ---: | --- | ---: | ---: |",
    ]
    for regime, entry in summary.items():
        for task, f in entry["fidelity"].items():
            lines.append(
                f"| {regime} | {task} | {f['n_off']} | {f['n_on']} | {_f(f['ms_off'], '{:.4g}')} | "
                f"{_f(f['ms_on'], '{:.4g}')} | {_f(f['ratio'])} | {_sp(f['paired'])} | "
                f"{_f(f['speedup_off'], '{:.4g}')} | {_f(f['speedup_on'], '{:.4g}')} |"
            )
        lines.append(
            f"| {regime} | **all tasks** | | | | | {_sp(entry['fidelity_ratios'])} | "
            f"{_sp(entry['fidelity_paired_all'])} | | |"
        )
    records = doc["records"] + doc.get("warmup", [])
    failed = [r for r in records if not r["passed"]]
    lines += ["", f"## Verdicts that did not pass ({len(failed)} of {len(records)}, warm-up included)", ""]
    if failed:
        lines += [
            "| regime | round | mode | task | stage | error | message |",
            "| --- | ---: | --- | --- | --- | --- | --- |",
        ]
        for r in failed:
            message = str(r["message"]).replace("|", "/").replace("\n", " ")[:240]
            lines.append(
                f"| {r['regime']} | {r['round']} | {r['mode']} | {r['task']} | {r['stage']} | {r['error']} | {message} |"
            )
    else:
        lines.append("none")
    on_ran = [r for r in records if r["mode"] == "on" and r["ran"]]
    off_ran = [r for r in records if r["mode"] == "off" and r["ran"]]
    lines += [
        "",
        "## Did the runner run",
        "",
        f"`seconds.runner_roundtrip` (reported only by a worker that timed through a runner): in "
        f"{sum(r['runner'] for r in on_ran)} of {len(on_ran)} runtime-stage verdicts with the runner on, "
        f"{sum(r['runner'] for r in off_ran)} of {len(off_ran)} with it off.",
    ]
    seen = doc.get("runner_processes_seen")
    if seen is not None:
        lines += [
            "",
            "Runner processes (`executor.worker runner candidate`) seen in /proc every 0.5 s while measuring, "
            "by the service they descend from: "
            + ", ".join(f"{owner} {count}" for owner, count in seen.items())
            + ".",
        ]
    blocks = doc.get("blocks", [])
    if blocks:
        lines += [
            "",
            "Blocks in order: "
            + ", ".join(
                f"{b['regime']}{b['round']}{b['mode']} {b['n']}/{b['wall_s']:.0f}s{'' if b['complete'] else '*'}"
                for b in blocks
            )
            + (" (* cut short)" if any(not b["complete"] for b in blocks) else ""),
        ]
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--runtime", choices=["gpu", "host"], default="gpu")
    parser.add_argument("--task-dir", type=Path, default=TASKS_DIR)
    parser.add_argument("--tasks", default=",".join(DEFAULT_TASKS), help="function tasks, comma separated")
    parser.add_argument(
        "--budget-s", type=float, default=400.0, help="seconds for everything, services' stop included"
    )
    parser.add_argument("--seq-share", type=float, default=0.5, help="share of the measuring time for seq")
    parser.add_argument("--per-visit", type=int, default=2, help="evaluations of a task in a row in a block")
    parser.add_argument("--concurrency", type=int, default=4, help="callers at once in the conc regime")
    parser.add_argument(
        "--warmup-tasks", type=int, default=1, help="tasks given an uncounted evaluation per mode first"
    )
    parser.add_argument("--prepare-timeout-s", type=float, default=120.0)
    parser.add_argument("--run-timeout-s", type=float, default=120.0, help="the services' run_timeout_s")
    parser.add_argument(
        "--timing-cores", type=int, default=None, help="both services' (default: automatic for this host)"
    )
    parser.add_argument("--options", default='{"baseline": false}', help="EvaluationOptions as JSON")
    parser.add_argument("--out", type=Path, default=Path("runner_rate.json"))
    parser.add_argument("--md", type=Path, default=None)
    parser.add_argument("--logs", type=Path, default=Path(tempfile.gettempdir()) / "runner_rate_logs")
    parser.add_argument("--render", type=Path, default=None, help="only print the tables of a (partial) JSON")
    args = parser.parse_args(argv)

    def stopped(signum: int, _frame: object) -> None:
        raise SystemExit(128 + signum)  # so that the services are stopped on the way out (finally)

    signal.signal(signal.SIGTERM, stopped)
    doc = json.loads(args.render.read_text()) if args.render is not None else measure(args)
    table = render(doc)
    if args.md is not None:
        args.md.write_text(table)
    sys.stdout.write(table)
    return 0


if __name__ == "__main__":
    sys.exit(main())
