"""The executor service's settings, read from ``REGRAPH_EXECUTOR_*`` environment variables."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Literal

from pydantic import Field, field_validator
from pydantic_settings import BaseSettings, SettingsConfigDict

from executor.cache import DEFAULT_CACHE_DIR
from executor.cgroup import default_pids_max


def default_compile_workers(cpus: int | None) -> int:
    """Evaluations in flight by default: 3/4 of ``cpus`` (the rest serve the GPU worker and the
    service), at least 2, at most 16."""
    return max(2, min(16, (cpus or 2) * 3 // 4))


class ExecutorSettings(BaseSettings):
    """Configuration of one executor process (one GPU)."""

    model_config = SettingsConfigDict(env_prefix="REGRAPH_EXECUTOR_", extra="ignore")

    host: str = "127.0.0.1"
    port: int = Field(default=8081, ge=0, le=65535)
    cache_dir: Path = DEFAULT_CACHE_DIR
    arch: str = Field(default="auto", description="'auto' (from the GPU, sm_90 without one) or e.g. 'sm_90'")
    nvcc_path: str | None = None
    compiler: Literal["auto", "nvrtc", "nvcc"] = Field(
        default="auto",
        description="kernel tasks: 'auto' uses NVRTC when found and falls back to nvcc when NVRTC is "
        "missing or rejects the source; function tasks (host code) always use nvcc",
    )
    nvrtc_path: str | None = Field(
        default=None,
        description="libnvrtc (file or directory); otherwise the wheel, $CUDA_HOME, /usr/local/cuda",
    )
    prewarm_workers: bool = Field(
        default=True,
        description="keep one worker process started (imports done, CUDA context made) for the next "
        "candidate, and one for the reference; each candidate still gets a fresh process",
    )
    prepare_next: bool = Field(
        default=True,
        description="after an evaluation, start the workers of the next candidate of the same task: "
        "fresh seeds, inputs generated and reference outputs computed before that candidate arrives; "
        "only when no other evaluation is in flight (see prepare_next_when_busy)",
    )
    prepare_next_when_busy: bool = Field(
        default=False,
        description="prepare the next candidate's workers even while other evaluations are in flight "
        "(the behaviour before 2026-11-27): on a queue that mixes tasks those workers are mostly "
        "stopped unused, after their reference run and input upload took CPU and the GPU lock",
    )
    prepare_tasks: bool = Field(
        default=True,
        description="when a request for a task new to this executor arrives, build its reference, store "
        "its timing set and time the serial reference at once (Evaluator.prepare_task), while the "
        "request may wait for a free evaluation slot; the fleet's replicas have fleet_prepare_tasks",
    )
    gpu_kernel_first: bool = Field(
        default=False,
        description="when the GPU's turn passes on and a kernel task's run and an earlier function "
        "task's run both wait, give it to the kernel run while the device is busy for a function "
        "task's trials (another process holds the GPU lock: a spare making its CUDA context; or "
        "finished workers are still torn down): the kernel's event-timed trials run beside that, the "
        "function's host-timed trials would wait for it (executor.gputurns). Still one run at a time",
    )
    gpu_kernel_first_skips: int = Field(
        default=4,
        ge=0,
        description="with gpu_kernel_first: how many kernel runs may go before a waiting function run "
        "(a kernel run holds the GPU ~0.15 s, a context's creation under load ~0.65 s)",
    )
    release_gpu_early: bool = Field(
        default=True,
        description="end a function candidate's GPU turn once its worker says that its GPU work is over "
        "(trials done, device synchronised, outputs on the host), so that its host checks after the "
        "trials (the copies' inputs, the last calls' outputs, the spot checks) run outside the turn; "
        "the device's locks stay held shared for that worker until it is gone, so no other run's trials "
        "begin beside it (issue 33's cost: ~0.2 s of a function candidate's turn on an H200). Off: every "
        "check under the turn, as before",
    )
    host_gate_before_turn: bool = Field(
        default=True,
        description="before a function run takes the GPU's turn, wait until the host memory's lock (the "
        "host's, shared by every GPU's function trials) could be had shared, so that the run does not "
        "wait for another GPU's trials while holding this GPU's turn (issue 29: 0.58 s per correct "
        "function candidate with two replicas); a pass, not a hold: the run's worker takes the lock "
        "itself, after the turn",
    )
    timings_at_turn: bool = Field(
        default=True,
        description="read the task's cached serial-reference timing when a candidate's run gets the "
        "GPU, not when its run was made up before the wait: candidates of one task in flight together "
        "then time the reference once, not each (for the naive baseline this was 8 tasks' baselines "
        "timed 15-17 times in a long run's first minute: bench/results/2026-11-27_s13; the baseline now "
        "has a worker of its own, once per task: executor.baseline). On by default since 2026-11-29: "
        "it hands a run only a timing that the task's later candidates get anyway, measured the same "
        "way (bench/results/2026-11-29_s18/lock_time_analysis.md)",
    )
    baseline_timing_cache: bool = Field(
        default=True,
        description="keep the naive baselines' timings on disk (cache_dir/baseline-timings, per device "
        "model, task, baseline source and timing options; executor.basetiming), so that the host's other "
        "replicas and a restarted executor reuse them instead of timing each baseline again under their "
        "GPU lock (two H200 replicas timed 70 tasks' baselines 104 times, 38 % of a function "
        "candidate's time under the lock: bench/results/2026-11-29_s18/lock_time_analysis.md)",
    )
    baseline_copies_ahead: bool = Field(
        default=True,
        description="the baseline worker (executor.baseline) makes its copies of the timing sets while "
        "naive.cu compiles, off the GPU lock; off: in its run, under the lock, before the baseline's "
        "trials. (Until 2026-11-29 the candidate's worker made them: it timed the baseline too.)",
    )
    baseline_workers: int = Field(
        default_factory=lambda: min(8, default_compile_workers(os.cpu_count())),
        ge=1,
        le=64,
        description="naive baselines measured at once by one executor (default 8, or compile_workers' default "
        "where that is less; executor.baseline: each a worker with "
        "its CUDA context, the task's timing sets and their copies, and an nvcc build of naive.cu). The "
        "verdicts of a task's first candidates wait for its baseline, so with too few a batch of new tasks "
        "queues here while the GPU stands idle: with 2, a mixed queue of first evaluations on one H200 ran "
        "at 2,736/h with the GPU lock held 24 % of the time, its function candidates waiting 24 s on average "
        "for their baseline (bench/results/2026-11-29_s20/README.md)",
    )
    host_baseline: bool = Field(
        default=False,
        description="also time the naive baselines in the test-only host runtime (a baseline worker per "
        "task, as on the GPU): for the tests of the baseline's path; off, the host runtime's verdicts "
        "carry no baseline speedup and its tests pay no nvcc build of naive.cu",
    )
    baseline_timing_max_age_s: float = Field(
        default=24 * 3600.0,
        gt=0,
        description="with baseline_timing_cache: a stored baseline timing older than this is stale; the "
        "task's next candidate times the baseline again and stores the new timing",
    )
    host_memory: Literal["pageable", "page_locked"] = Field(
        default="pageable",
        description="function tasks: the host memory of the timed calls' arrays for a request that does "
        "not say (EvaluationOptions.host_memory, which a request may set either way, under "
        "host_lock_max_mb): 'pageable', numpy's; "
        "'page_locked', registered with the driver once made (mlock on the host runtime), so that their "
        "copies are DMA instead of staged by the driver. Issue 29's A/B: whether two GPUs' copies then "
        "stop disturbing each other (bench/probes/copy_interference.py); off by default, not yet measured",
    )
    host_lock_max_mb: int = Field(
        default=2048,
        ge=0,
        description="with host_memory page_locked (the setting's or a request's): the most MiB of timed "
        "arrays one worker locks (each candidate's and baseline's worker: the rotated copies of the "
        "timing sets, the warm-up's, the confirming call's, counted for a baseline too, which makes no such "
        "call, so that a task's baseline and candidates pass it together; the benchmark's largest task needs about "
        "2.5 GB). Past it every array stays pageable and the verdict's seconds say host_lock_failed and "
        "host_lock_over_cap, the worker's log names the cap; a baseline past it is kept, marked pageable "
        "(under a key of this cap's), and compared only with candidates that were pageable too. cuMemHostRegister is not bounded by RLIMIT_MEMLOCK: this is what "
        "bounds a request's pinned memory (on the host runtime, mlock, the soft RLIMIT_MEMLOCK caps it too). 0: nothing is locked",
    )
    timing_set_cache_bytes: int = Field(
        default=24 << 30,
        ge=0,
        description="disk space for the tasks' timing sets (reference outputs at the timing size, one "
        "per task, and their inputs while they fit; executor.timingset): the benchmark's 102 tasks "
        "need 18.2 GiB",
    )
    runtime: Literal["auto", "gpu", "host", "none"] = Field(
        default="auto",
        description="'auto': the GPU when pycuda and a device are present, else none. 'host' runs function-"
        "task libraries on the CPU and exists for testing the isolation machinery only.",
    )
    compile_timeout_s: float = Field(default=180.0, gt=0)
    compile_nice: int = Field(
        default=10,
        ge=0,
        le=19,
        description="how much lower the CPU priority of nvcc builds is than the executor's: with many "
        "compiles in flight, a function task's trials (timed on the host clock) then keep their CPU, "
        "and their spread, which decides how many trials are taken, stays that of a quiet machine; 0: same",
    )
    timing_cores: int | None = Field(
        default=None,
        ge=0,
        description="CPUs kept for a function task's host-timed trials (executor.fleet.pinning): the last "
        "N of the executor's (a replica's share), whole physical cores at a time; a worker runs on them "
        "only while it holds the trials' lock, builds (nvcc, NVRTC) and every other worker on the rest. "
        "The split handed to the workers and used by the builds is made from this value (the evaluator "
        "passes it on; nothing is written to the process's environment). Refused "
        "(logged) when it would leave the rest no core, and where the sandbox refuses affinities. "
        "0: off. Unset: automatic by the executor's own CPUs (its affinity set, a replica's share once "
        "pinned, no more than its cgroup v2 CPU quota lets it use): 2 from 16, 1 from 8, 0 below (executor.fleet.pinning.auto_timing_cores; on one H200 with "
        "16 CPUs, 2 halved a correct function candidate's trials, session 29), claimed host-wide: none "
        "where another process of the host reserved the same CPUs first (executor.fleet.pinning.claim_reserved)",
    )
    run_timeout_s: float = Field(
        default=300.0,
        gt=0,
        description="wall-clock limit of one worker process, and the cap of a candidate's run limit (a "
        "reference worker's job, the task's own code, gets executor.reference.REFERENCE_TIMEOUT_FACTOR times it)",
    )
    run_limit_factor: float = Field(
        default=10.0,
        ge=1,
        description="a candidate's run may take this many times the parent's (or else the serial "
        "reference's) time per call, for each call outside the trials, plus the trials' time budget",
    )
    run_limit_floor_s: float = Field(
        default=5.0, gt=0, description="the least run limit a candidate gets (executor.runlimit)"
    )
    run_call_floor_s: float = Field(
        default=2.0,
        gt=0,
        description="each candidate call may take this plus run_limit_factor x the same time per call "
        "(a batch of N timed calls or launches: N times that, plus this once); a call that runs longer "
        "has its worker killed at once, long before the run limit (executor.runlimit). It covers what "
        "a first call pays beyond its work: on the GPU the CUDA runtime's start-up inside a function "
        "task's library and the lazy loading of its kernels (the context and the module are made "
        "before the first call), and the candidate's own allocations and copies of a timing-size set; "
        "a whole correctness stage took 0.07 s per verdict on average on the H200 "
        "(bench/results/2026-11-27_h200), so 2 s leaves a wide margin and still stops a hang in seconds",
    )
    request_timeout_s: float = Field(default=900.0, gt=0, description="limit of one synchronous request")
    memory_limit_bytes: int = Field(default=16 << 30, gt=0, description="host memory of one worker process")
    memory_cgroups: str = Field(
        default="auto",
        description="a memory cgroup per worker (executor.cgroup), limited to memory_limit_bytes plus 64 MiB, "
        "so that what no process maps counts too (memfd pages, files in the jail's tmpfs, SysV segments): "
        "'auto' (the executor's own cgroup on v1; on v2 its own, only where it is delegated to the executor "
        "(systemd's trusted.delegate or user.delegate, or the root of a cgroup namespace): where memory is "
        "enabled for its children, or a leaf it moves itself to where it is alone in it), 'off', or a cgroup "
        "directory to make them in. Only a root executor whose workers are jailed has them (its workers' "
        "code runs as another uid, which may write no cgroup file). Where none is usable the workers run "
        "without, and GET /v1/device's memory_cgroups says why",
    )
    memory_cgroup_pids: int = Field(
        default_factory=lambda: default_pids_max(),
        ge=16,
        description="pids.max of each worker's memory cgroup where the pids controller is enabled for it "
        "(cgroup v2): the tasks (threads included) that a worker, its jail and its runner may have at once "
        "(default: 1024, or 8 per core of the host where that is more)",
    )
    compile_workers: int = Field(
        default_factory=lambda: default_compile_workers(os.cpu_count()),
        ge=1,
        le=64,
        description="evaluations in flight at once (each compiles, then prepares its inputs on the CPU "
        "while others use the GPU); default: 3/4 of the CPU cores, at least 2 and at most 16 (12 on a "
        "16-core GPU host, where 12 gave 31 % more evaluations per hour than 2 on the mixed queue)",
    )
    max_batch: int = Field(default=64, ge=1)
    ray: str | None = Field(
        default=None,
        description="serve a fleet on a Ray cluster: 'auto' (a running cluster, or a local one) or the "
        "cluster's address (host:port); unset: this one executor on this machine's GPU",
    )
    fleet_replicas: int = Field(
        default=0, ge=0, description="fleet: executor replicas to start; 0: one per GPU of the cluster"
    )
    fleet_gpu_resource: str = Field(
        default="GPU",
        description="fleet: the Ray resource one replica takes one unit of ('GPU'; tests name a custom one)",
    )
    fleet_affinity_depth: int = Field(
        default=2,
        ge=1,
        description="fleet: evaluations a task's replica may have in flight before a candidate of that "
        "task goes to a less busy replica instead",
    )
    fleet_compilers: int = Field(
        default=-1,
        ge=-1,
        description="fleet: compile workers (one CPU each) that build the replicas' candidates: -1 one per "
        "CPU of the cluster's nodes without the GPU resource (none there: each replica compiles on its own "
        "host), 0 none, N that many wherever Ray finds a free CPU",
    )
    fleet_compilers_check_s: float = Field(
        default=30.0,
        ge=0,
        description="fleet: how often the router checks its compile workers and starts those missing (on a "
        "CPU node that joined, or in place of workers that died where Ray can place them); 0 never",
    )
    fleet_prepare_tasks: bool = Field(
        default=True,
        description="fleet: when a task is new to the replica a request goes to, have the replica build "
        "its reference, store its timing set and time the serial reference at once, while the request "
        "may still wait behind the replica's evaluations (Evaluator.prepare_task)",
    )
    fleet_pin_cores: bool = Field(
        default=True,
        description="fleet: each replica on a GPU pins itself and its workers to its GPU's share of the "
        "host's cores (NUMA-local where the host has several nodes; executor.fleet.pinning), so other "
        "replicas' CPU work does not land in its host-timed trials",
    )
    fleet_probe_command: list[str] | None = Field(
        default=None,
        description="fleet: the health probe of a replica's GPU, a command run in a fresh process after a "
        "verdict that may come from a sick GPU and before a replacement joins (exit 0: healthy); its "
        "environment names the replica (REGRAPH_FLEET_REPLICA) and its GPU (CUDA_VISIBLE_DEVICES). "
        "Unset: the built-in CUDA probe on a GPU, and none (healthy) without one",
    )
    fleet_probe_timeout_s: float = Field(
        default=60.0, gt=0, description="fleet: limit of the health probe of a replica's GPU"
    )
    log_level: str = "INFO"

    @field_validator("ray")
    @classmethod
    def _empty_is_unset(cls, value: str | None) -> str | None:
        return value or None  # compose passes an unset variable as ""
