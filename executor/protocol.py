"""The executor's wire protocol: every model that crosses its HTTP API, in one module.

Both sides build on this module: :mod:`executor.app` serves it and :mod:`executor.client` speaks it,
so neither can drift from the other. It holds the requests (:class:`EvaluateRequest`,
:class:`BatchRequest` with :class:`CandidateSource` and :class:`EvaluationOptions`), the answers
(:class:`~executor.verdict.Verdict`, :class:`BatchResponse`, :class:`DeviceInfo`) and the error
envelope that every non-2xx answer carries (:class:`ErrorEnvelope`), plus the reward function
(:func:`reward_for`). The task and verdict models live in :mod:`executor.taskformat` and
:mod:`executor.verdict` (the task format is also a file format) and are re-exported here, so callers
of the service import from this module only.
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from executor.runlimit import RunLimit
from executor.taskformat import FunctionTask, KernelTask, Task
from executor.trialpolicy import TrialPolicy
from executor.verdict import (
    NOT_JUDGED,
    VERDICT_FORMAT,
    CompileResult,
    DevicePeak,
    ErrorKind,
    FleetRecord,
    KernelResources,
    Mismatch,
    Stage,
    TimingStats,
    Verdict,
    reward_for,
)

__all__ = [
    "NOT_JUDGED",
    "VERDICT_FORMAT",
    "BatchRequest",
    "BatchResponse",
    "CandidateSource",
    "CompileResult",
    "DeviceInfo",
    "ErrorBody",
    "ErrorEnvelope",
    "ErrorKind",
    "EvaluateRequest",
    "EvaluationOptions",
    "FleetDeviceInfo",
    "FleetRecord",
    "FunctionTask",
    "KernelResources",
    "KernelTask",
    "Mismatch",
    "PrepareRequest",
    "PrepareResponse",
    "ReplicaDevice",
    "RunLimit",
    "Stage",
    "Task",
    "TimingStats",
    "Verdict",
    "reward_for",
]


# The HTTP side's models build their validators at first use (``defer_build``), not at import: every
# worker imports this module for EvaluationOptions and never uses them (see executor.verdict).


class CandidateSource(BaseModel):
    """A candidate's code: one CUDA translation unit (function tasks) or kernel source (kernel tasks)."""

    model_config = ConfigDict(defer_build=True)

    source: str = Field(min_length=1, max_length=400_000)


class EvaluationOptions(BaseModel):
    """Knobs of the runtime stages (sent with a request or taken from the settings)."""

    correctness_sets: int = Field(default=3, ge=1, le=20, description="fresh input sets at the test size")
    timing_size_checks: int = Field(
        default=1, ge=0, le=5, description="input sets checked at the timing size"
    )
    run_timing: bool = True
    timing_inputs: Literal["task", "fresh"] = Field(
        default="task",
        description="what the trials run on: 'task', the task's timing set (drawn once from a seed "
        "derived from the task, the same for every candidate and repeat; its output is still checked); "
        "'fresh', the evaluation's fresh timing-size set(s)",
    )
    warmup: int = Field(
        default=1,
        ge=0,
        le=50,
        description="untimed calls before the trials (the correctness calls, one of them at the timing "
        "size, come before these)",
    )
    warmup_ms: float = Field(
        default=30.0, ge=0, le=2000, description="untimed calls go on until this much wall time has passed"
    )
    warmup_settle: float = Field(
        default=0.02,
        ge=0,
        le=1,
        description="kernel tasks: untimed launches also go on until the median time of the last window "
        "of them is within this fraction of the window before (the clocks have settled); 0: off",
    )
    max_warmup_ms: float = Field(
        default=200.0, ge=0, le=5000, description="wall-time cap of the settling (not of warmup/warmup_ms)"
    )
    min_trials: int = Field(default=5, ge=3, le=1000)
    max_trials: int = Field(default=100, ge=3, le=10000)
    min_timing_ms: float = Field(default=20.0, ge=0, description="timed work before timing may stop")
    target_error: float = Field(
        default=0.01,
        ge=0,
        le=1,
        description="stop once the median's relative standard error (1.2533*noise/sqrt(trials), the noise "
        "measured within each timing set) is at most this; 0: stop at min_trials and min_timing_ms",
    )
    host_target_error: float = Field(
        default=0.03,
        ge=0,
        le=1,
        description="target_error for trials timed on the host clock (function tasks), whose medians "
        "move by 10 % or more between evaluations of the same candidate; 0: the fixed rule",
    )
    repeat_pairs: int = Field(
        default=5,
        ge=0,
        le=1000,
        description="trials rotated over timing sets: once the repeat visits (each set's second visit "
        "and later) hold this many pairs of one set's samples, the stop rule's noise is their spread "
        "alone, and the median (and the figures beside it, which the floor, the repeat-visit rule and "
        "the clock check judge) are taken over the repeat visits alone (executor.checking.within_set_cov); "
        "0: every pair and every trial count, first visits included (5 by default since session 26, "
        "with host_rotate_buffers 2: the H200 A/B in docs/executor.md)",
    )
    max_timing_s: float = Field(
        default=2.0, gt=0, description="wall-clock cap of the trials of one candidate (after min_trials)"
    )
    rotate_buffers: int = Field(default=3, ge=1, le=8, description="input copies cycled through while timing")
    host_rotate_buffers: int | None = Field(
        default=2,
        ge=1,
        le=8,
        description="rotate_buffers for function tasks (host copies, executor.worker.host.host_copy_count): "
        "with timing_sets 2, 2 gives one copy per set, so that a set's first visit is also its copies' "
        "only first visit (each copy's first timed visit may find its data in memory, where later ones "
        "find them in the host's cache; repeat_pairs leaves out each set's first visit only; 2 by "
        "default since session 26); None: rotate_buffers",
    )
    host_memory: Literal["pageable", "page_locked"] | None = Field(
        default=None,
        description="function tasks: the host memory that the timed calls' arrays (the rotated copies of "
        "the timing sets, the warm-up's, the repeat-visit rule's confirming call's) are in, for a "
        "candidate and its naive baseline alike. None: the executor's setting (REGRAPH_EXECUTOR_HOST_MEMORY, "
        "pageable unless set); 'pageable': numpy's; 'page_locked': the "
        "same arrays locked once made, before the candidate runs: on a GPU registered with the driver "
        "(cuMemHostRegister, portable), so a cudaMemcpy of them is a DMA from their pages instead of a "
        "copy staged through the driver's own pinned buffers; on the host runtime mlock(2). All or none: "
        "where locking fails (the driver refuses, no context ahead, a candidate process of its own) they "
        "stay pageable and the verdict's seconds say so (host_lock_failed). Untimed calls (correctness) "
        "stay pageable. Issue 29's question: whether two GPUs' copies then stop disturbing each other "
        "(bench/probes/copy_interference.py)",
    )
    reference_repeats: int = Field(default=3, ge=1, le=20)
    timing_sets: int = Field(
        default=2,
        ge=2,
        le=8,
        description="distinct timing input sets (different seeds) the trials rotate through, so that no "
        "two successive timed calls see the same values; the warm-up runs on another set",
    )
    physical_floor: bool = Field(
        default=True,
        description="reject a candidate faster than the task's physical floor (executor.floor) as "
        "'implausible'",
    )
    repeat_gain_limit: float | None = Field(
        default=3.0,
        ge=1.5,
        description="reject as 'implausible' a candidate whose median timed call is more than this many "
        "times faster than its fastest first call on a timing set, once what the caches could explain is "
        "taken off (answers remembered from the first visits; executor.worker.candidate.check_repeats); "
        "None: no such check",
    )
    repeat_confirm: bool = Field(
        default=True,
        description="function tasks: where the repeat-visit rule would refuse, time one more first visit "
        "right after the trials, on a set drawn then from a secret seed, in new buffers, its outputs "
        "checked, and let it count as a first visit (executor.worker.candidate.confirm_first_visit): "
        "other processes' work can slow every first visit, and a memo cannot answer values it has never "
        "seen; False: the first visits of the trials alone",
    )
    baseline: bool = True
    compare_on_device: bool = Field(
        default=True,
        description="kernel tasks: check timing-size outputs on the device where they were written "
        "(executor.devcompare; the host re-checks whatever fails there); False: download them and "
        "compare on the host",
    )
    launch_gate: bool = Field(
        default=True,
        description="kernel tasks: hold each batch of trials on its stream (a wait on a word of pinned "
        "host memory) until the host has enqueued it, a chunk of 8 trials at a time, so that no trial's "
        "start event runs ahead of its launch and the wait for the host is never timed as the kernel's "
        "(executor.worker.gpu.LaunchGate); False: batches run as they are enqueued (before session 26)",
    )
    kernel_spot_checks: bool = Field(
        default=True,
        description="kernel tasks: copy a sample of every timed launch's outputs on the device and check "
        "them after the trials, as function tasks' timed calls are (executor.worker.gpu.DeviceSpots)",
    )
    kernel_spot_gather: bool = Field(
        default=False,
        description="kernel tasks with kernel_spot_checks and compare_on_device: copy a launch's sample "
        "of each output (8 runs) with one launch of a gather kernel instead of 8 driver calls, which made "
        "the trials host-bound on the H200 (+0.3 ms a trial; session 28); the same runs, drawn alike",
    )

    parent_ms: float | None = Field(
        default=None,
        gt=0,
        description="the parent candidate's measured time per call (its timing median), when the "
        "caller knows it: the candidate's run limit is derived from it instead of the reference's",
    )

    def rotated_copies(self, kernel: bool) -> int:
        """How many rotated copies of the timing sets a task's trials go through at least (rounded
        up to whole rounds of the sets where they are made): ``rotate_buffers``, or for a function
        task ``host_rotate_buffers`` when set."""
        if kernel or self.host_rotate_buffers is None:
            return self.rotate_buffers
        return self.host_rotate_buffers

    def trial_policy(self, device_timed: bool = False) -> TrialPolicy:
        """The warm-up and stopping rules that :mod:`executor.checking` applies, for these options.

        The settle rule applies only to ``device_timed`` trials (kernels timed by CUDA events), whose
        times move with the GPU's clocks; a function task's call is timed on the host clock with its
        copies, whose spread would keep a settle rule waiting until its cap. Host-timed trials stop at
        ``host_target_error`` instead of ``target_error``.
        """
        # Every timing set is timed at least twice before the trials may stop, and once more: the
        # median is then a repeat visit, so a candidate answering repeats from memory is timed at its
        # memory's speed (and meets the physical floor) instead of at its first, honest visits.
        least = max(self.min_trials, 2 * self.timing_sets + 1)
        return TrialPolicy(
            warmup=self.warmup,
            warmup_ms=self.warmup_ms,
            min_trials=least,
            max_trials=max(self.max_trials, least),
            min_total_ms=self.min_timing_ms,
            target_error=self.target_error if device_timed else self.host_target_error,
            max_wall_s=self.max_timing_s,
            settle=self.warmup_settle if device_timed else 0.0,
            max_warmup_ms=self.max_warmup_ms if device_timed else 0.0,
            repeat_pairs=self.repeat_pairs,
        )


class EvaluateRequest(BaseModel):
    """``POST /v1/evaluate``: one task, one candidate."""

    task: Task
    candidate: CandidateSource
    options: EvaluationOptions = EvaluationOptions()
    caller: str | None = Field(
        default=None,
        max_length=200,
        description="on whose behalf (the API's key id): the executor shares its evaluation slots "
        "fairly between callers, so one caller's long compiles cannot hold them all",
    )


# A task's naive baseline as its preparation ahead left it (`Evaluator.task_preparation`).
BaselineState = Literal["not_wanted", "kept", "measuring", "failed", "none"]

# The longest a ``POST /v1/prepare`` may wait for the task's preparation (``wait_s``).
PREPARE_WAIT_MAX_S = 600.0


class PrepareRequest(BaseModel):
    """``POST /v1/prepare``: a task whose candidates are coming (an optimization job's, as it starts):
    its reference built, its timing set stored, its serial reference and its naive baseline timed now,
    not by its first candidate."""

    task: Task
    options: EvaluationOptions = EvaluationOptions()
    wait_s: float = Field(
        default=0.0,
        ge=0.0,
        le=PREPARE_WAIT_MAX_S,
        description="0: answer at once. Otherwise answer when the task's preparation is done and its "
        "naive baseline's measurement ended (stored), or after this many seconds, whichever comes "
        "first; the answer then says which (``ready``, ``baseline``)",
    )


class PrepareResponse(BaseModel):
    """The answer to ``POST /v1/prepare``: whether the preparation was started now (False: under way
    or done already, or nothing to do), on which replica, and, when the request waited (``wait_s``),
    whether it was done in time and what became of the naive baseline."""

    model_config = ConfigDict(defer_build=True)

    task_id: str
    started: bool
    replica: str | None = None
    ready: bool | None = Field(
        default=None,
        description="with wait_s: the preparation done and the baseline's measurement ended within it",
    )
    baseline: BaselineState | None = Field(
        default=None,
        description="with wait_s: the naive baseline then: not_wanted (the task's verdicts carry none), "
        "kept (timed and stored), measuring, failed (its measurement ended with no timing), none",
    )
    waited_s: float | None = Field(default=None, description="with wait_s: how long the answer waited")


class BatchRequest(BaseModel):
    """``POST /v1/evaluate/batch``: several independent evaluations."""

    items: list[EvaluateRequest] = Field(min_length=1)


class BatchResponse(BaseModel):
    """Verdicts in request order."""

    model_config = ConfigDict(defer_build=True)

    verdicts: list[Verdict]


class TurnUsage(BaseModel):
    """How the executor's GPU turns (:mod:`executor.gputurns`: one run at a time) were used since it
    started: whose runs held them, for how long."""

    model_config = ConfigDict(defer_build=True)

    seconds: float = Field(description="wall time since the executor started")
    turns: dict[str, int] = Field(description="turns taken, per holder (`candidate`, `baseline`)")
    held_s: dict[str, float] = Field(description="seconds the turns were held, per holder")
    waiting: int = Field(description="runs waiting for a turn now")


class DeviceInfo(BaseModel):
    """``GET /v1/device``."""

    model_config = ConfigDict(defer_build=True)

    name: str | None = None
    compute_capability: str | None = None
    driver: str | None = None
    memory_total_mib: int | None = None
    arch: str
    runtime: str
    runtime_checks_available: bool
    nvcc: str | None = None
    candidate_process: str | None = Field(
        default=None,
        description="where a function candidate runs here (a process of its own, or its worker's) and "
        "why (REGRAPH_EXECUTOR_CANDIDATE_PROCESS); None where no candidate runs",
    )
    memory_cgroups: str | None = Field(
        default=None,
        description="whether each worker runs in a memory cgroup of its own (REGRAPH_EXECUTOR_MEMORY_CGROUPS), "
        "where, or why not",
    )
    peak: DevicePeak | None = Field(
        default=None,
        description="the bandwidths and launch latency the physical floor is computed from (executor.floor), "
        "measured once on this device by its first timed candidate; None before that",
    )
    turns: TurnUsage | None = Field(
        default=None, description="how this executor's GPU turns were used since it started"
    )


class ReplicaDevice(DeviceInfo):
    """One replica of an executor fleet and its GPU."""

    replica: str
    node: str | None = None
    gpu_ids: str = Field(default="", description="the replica's CUDA_VISIBLE_DEVICES")
    cores: str | None = Field(
        default=None, description="the cores the replica is pinned to (None: not pinned)"
    )


class FleetDeviceInfo(DeviceInfo):
    """``GET /v1/device`` of a fleet: the first replica's device at the top level, as one executor
    answers, and every replica's under ``gpus``."""

    gpus: list[ReplicaDevice] = Field(default_factory=list)


class ErrorBody(BaseModel):
    """The body of every error answer."""

    model_config = ConfigDict(defer_build=True)

    message: str
    type: str
    code: int


class ErrorEnvelope(BaseModel):
    """``{"error": {...}}``: what every non-2xx answer of the executor carries."""

    model_config = ConfigDict(defer_build=True)

    error: ErrorBody
