"""The executor's one result model, `Verdict`, and the parts it is built from.

Every evaluation ends in a Verdict, whatever happened to the candidate: static rejection, compile
error, crash, timeout, wrong answer or success. Runtime stages that could not run (no GPU) are
reported as ``runtime_stages="not_run"`` with ``passed=False`` and ``reward=None``, never as passed.
"""

from __future__ import annotations

from enum import StrEnum
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, computed_field, model_validator

from executor.runlimit import RunLimit

VERDICT_FORMAT: Literal["regraph.verdict/v1"] = "regraph.verdict/v1"

# The models that only the executor's HTTP side and its callers validate or write (a verdict, its
# compile result, static violations and fleet record) build their validators at first use
# (``defer_build``), not at import: every worker imports this module and never uses them (with those of
# executor.protocol, 6-12 ms of a worker start's ~0.4 CPU-s).


class StaticViolation(BaseModel):
    """One broken rule: its id, why the rule exists, and where it matched."""

    model_config = ConfigDict(defer_build=True, frozen=True)

    rule: str
    reason: str
    line: int | None = None
    excerpt: str = ""


class Stage(StrEnum):
    """How far the evaluation got (the last stage that was attempted)."""

    STATIC = "static"
    COMPILE = "compile"
    CORRECTNESS = "correctness"
    TIMING = "timing"


class ErrorKind(StrEnum):
    """Why a candidate did not pass."""

    STATIC_REJECTED = "static_rejected"
    COMPILE_ERROR = "compile_error"
    COMPILE_TIMEOUT = "compile_timeout"
    TIMEOUT = "timeout"
    CRASH = "crash"
    CUDA_ERROR = "cuda_error"
    WRONG_OUTPUT = "wrong_output"
    UNWRITTEN_OUTPUT = "unwritten_output"
    NONDETERMINISTIC = "nondeterministic"
    OUT_OF_MEMORY = "out_of_memory"
    RUNTIME_NOT_AVAILABLE = "runtime_not_available"
    REFERENCE_ERROR = "reference_error"
    INTERNAL_ERROR = "internal_error"
    IMPLAUSIBLE = "implausible"
    # Not about the candidate: the executor shut down before the evaluation finished (a batch's item
    # stopped by the shut-down; evaluate it again).
    EXECUTOR_STOPPED = "executor_stopped"
    # Not about the candidate: its batch's request ran past the executor's request limit
    # (``request_timeout_s``) before this item's evaluation finished; evaluate it again.
    BATCH_TIMEOUT = "batch_timeout"


NOT_JUDGED = frozenset(
    {
        ErrorKind.REFERENCE_ERROR,
        ErrorKind.INTERNAL_ERROR,
        ErrorKind.EXECUTOR_STOPPED,
        ErrorKind.BATCH_TIMEOUT,
    }
)
"""The error kinds of a verdict that is about the executor or the task, not the candidate: its reference
broke, the executor failed, it shut down before the evaluation finished, or the evaluation's batch ran
past the request limit first. Such a verdict judged
nothing: it is never a candidate's failure (reward -1), a failed step or a rejected example; evaluate
the candidate again. Every reader of verdicts (the search's evaluator, the bench runners, the graph's
step validation) goes by this one set."""


class FloorCheck(BaseModel):
    """The physical floor of a task's timed call (:mod:`executor.floor`): the least time any correct
    implementation needs on this device, from the bytes it must move and the device's measured (or
    datasheet) bandwidth and launch latency. ``floor_ms`` None: no floor (``reason`` says why)."""

    floor_ms: float | None = None
    measured_ms: float | None = Field(default=None, description="the candidate's median")
    read_bytes: int = 0
    written_bytes: int = 0
    path: str = Field(default="", description="what bounds it: 'device', 'host copies', 'host memory'")
    source: str = Field(default="", description="where the device figures came from: measured / datasheet")
    reason: str = ""


class KernelResources(BaseModel):
    """What ``ptxas -v`` reports for one kernel."""

    model_config = ConfigDict(defer_build=True, frozen=True)

    name: str
    registers: int | None = None
    shared_bytes: int = 0
    constant_bytes: int = 0
    stack_bytes: int = 0
    spill_store_bytes: int = 0
    spill_load_bytes: int = 0
    barriers: int | None = None


class CompileResult(BaseModel):
    """The outcome of compiling a candidate: a product path on success, the log either way."""

    model_config = ConfigDict(defer_build=True)

    ok: bool
    kind: Literal["shared_library", "cubin"]
    product: str | None = None
    log: str = ""
    command: list[str] = Field(default_factory=list)
    cache_hit: bool = False
    seconds: float = 0.0
    timed_out: bool = False
    interrupted: bool = Field(
        default=False,
        description="the compiler was killed by a signal before it finished (its process or its host "
        "going away): like a timeout, it says nothing about the source, so it is never cached",
    )
    kernels: list[KernelResources] = Field(default_factory=list)
    arch: str = ""
    compiler: Literal["nvcc", "nvrtc"] = "nvcc"
    fallback: str | None = Field(
        default=None, description="why NVRTC was not used for a kernel task although it was chosen"
    )

    @property
    def rememberable(self) -> bool:
        """Whether the build says something about its source, so that the cache may answer with it:
        not after a timeout (it may depend on the load) nor after the compiler was killed."""
        return not (self.timed_out or self.interrupted)


class TimingStats(BaseModel):
    """Robust statistics over timing trials, in milliseconds."""

    trials: int
    median_ms: float
    mean_ms: float
    min_ms: float
    max_ms: float
    iqr_ms: float
    cov: float = Field(description="coefficient of variation (std/mean)")
    robust_cov: float | None = Field(
        default=None, description="1.4826*MAD/median, the spread that the stopping rule uses"
    )
    stop: Literal["stable", "min_time", "max_trials", "time_cap"] | None = Field(
        default=None,
        description="why trials stopped: the median was stable, the plain minimum (no stability "
        "target), the trial limit, or the wall-clock cap",
    )
    warmup_calls: int | None = Field(
        default=None, description="untimed launches of the warm-up before the trials (kernel tasks)"
    )
    samples_ms: list[float] | None = Field(
        default=None,
        max_length=64,
        description="the first trials' times in trial order (at most executor.checking.TRACE_TRIALS, "
        "4 significant digits): trial i ran on timing set i % sets and rotated copy i % slots, so that a "
        "record shows where the spread comes from (first visits, a set slower than another, a burst)",
    )
    sets: int | None = Field(default=None, description="timing sets the trials rotated over")
    slots: int | None = Field(
        default=None,
        description="rotated copies the trials went through (a whole number of rounds of the sets)",
    )
    median_from: int | None = Field(
        default=None,
        description="the trial from which the median and the figures beside it were taken (the repeat "
        "visits: option repeat_pairs); None or 0: every trial",
    )


class Mismatch(BaseModel):
    """The first disagreement found in an output, for the model's feedback."""

    arg: str
    index: int
    expected: str
    got: str
    count: int = Field(description="number of elements that failed")
    total: int
    size: Literal["test", "timing"]
    seed: int | None = Field(
        default=None,
        description="the seed of the input set it was found on; None on a timing set (its seed is the "
        "executor's secret)",
    )


class FleetRecord(BaseModel):
    """Where a fleet evaluated the candidate; a single executor's verdicts have none."""

    model_config = ConfigDict(defer_build=True)

    replica: str = Field(description="the replica whose verdict this is")
    node: str | None = Field(default=None, description="the Ray node it ran on")
    attempts: int = Field(default=1, ge=1, le=2, description="2: retried once on another replica")
    lost: list[str] = Field(
        default_factory=list, description="why an earlier attempt gave no verdict (its replica died...)"
    )
    compiled_on: str | None = Field(
        default=None,
        description="the node of the fleet's compile worker that built the candidate; None: the "
        "replica's own host built it, or it came from the replica's cache",
    )


# What a function task's timed calls ran on when ``host_memory: page_locked`` was asked (review 45 F9:
# ``seconds["host_page_locked"]`` 0 meant both "never locked" and "locked, then unlocked by the
# candidate during its trials").
HostMemoryState = Literal["page_locked", "pageable_lock_refused", "pageable_over_cap", "locks_lost"]


def host_memory_state(seconds: dict[str, float]) -> HostMemoryState | None:
    """What the timed calls whose stages took ``seconds`` ran on, from the worker's entries
    (``executor.worker.candidate``: ``host_page_locked``, ``host_lock_failed``, ``host_lock_over_cap``,
    ``host_locks_lost``): ``page_locked`` (every array locked throughout), ``pageable_lock_refused``
    (not locked: a refusal, no context, ``RLIMIT_MEMLOCK``), ``pageable_over_cap`` (not locked: the
    executor's cap), ``locks_lost`` (locked, then unlocked during the timed calls: they ran at least
    in part on pageable memory); None when page-locked memory was not asked for, or nothing was timed."""
    if "host_page_locked" not in seconds:
        return None
    if seconds.get("host_locks_lost"):
        return "locks_lost"
    if seconds["host_page_locked"] == 1.0:
        return "page_locked"
    return "pageable_over_cap" if seconds.get("host_lock_over_cap") else "pageable_lock_refused"


class Verdict(BaseModel):
    """The result of evaluating one candidate for one task."""

    model_config = ConfigDict(defer_build=True)

    format: Literal["regraph.verdict/v1"] = VERDICT_FORMAT
    task_id: str
    stage: Stage
    passed: bool
    error: ErrorKind | None = None
    message: str = ""
    runtime_stages: Literal["run", "not_run"] = "not_run"
    static_violations: list[StaticViolation] = Field(default_factory=list)
    compile: CompileResult | None = None
    mismatch: Mismatch | None = None
    input_sets_checked: int = 0
    candidate_timing: TimingStats | None = None
    reference_timing: TimingStats | None = None
    baseline_timing: TimingStats | None = None
    speedup: float | None = Field(default=None, description="serial reference time / candidate time")
    baseline_speedup: float | None = Field(default=None, description="naive CUDA time / candidate time")
    reward: float | None = None
    device: str | None = None
    seconds: dict[str, float] = Field(default_factory=dict, description="wall time spent per stage")
    run_limit: RunLimit | None = Field(
        default=None, description="the wall-clock limit of the candidate's run and what it came from"
    )
    fleet: FleetRecord | None = None
    floor: FloorCheck | None = Field(
        default=None, description="the physical floor the candidate's time was checked against"
    )

    @computed_field(  # type: ignore[prop-decorator]
        description="what the timed calls ran on when page-locked host memory was asked for (option "
        "host_memory): page_locked, pageable_lock_refused, pageable_over_cap or locks_lost (locked, then "
        "unlocked by the candidate during its trials); null when it was not asked for or nothing was "
        "timed. seconds['host_page_locked'] is 0 for the last three alike"
    )
    @property
    def host_memory(self) -> HostMemoryState | None:
        """What the timed calls ran on (:func:`host_memory_state` of :attr:`seconds`)."""
        return host_memory_state(self.seconds)

    @model_validator(mode="after")
    def _consistent(self) -> Verdict:
        if self.passed and (self.error is not None or self.runtime_stages != "run"):
            raise ValueError("a verdict can only pass when the runtime stages ran without error")
        if self.reward is not None and self.runtime_stages != "run" and self.error is None:
            raise ValueError("a reward without runtime stages is only possible for a failure (-1)")
        return self


def reward_for(passed: bool, speedup: float | None) -> float:
    """The paper's hierarchical reward of one candidate, the one formula of the whole project.

    * ``-1`` if the candidate failed (static rejection, compile error, crash, wrong output...);
    * ``speedup - 1`` if it passed but is slower than the serial reference (``speedup < 1``), so a slow
      correct candidate, in (-1, 0), still beats a broken one;
    * ``speedup`` otherwise (``speedup >= 1``).

    `speedup` is the serial reference's time over the candidate's. This function never raises: a
    candidate that passed without a measured speedup also gets ``-1``, because nothing about its speed
    is known. The evaluator does not call it for such a verdict (its reward stays ``None``), and the
    search refuses to score one (`search.evaluation`), so that case never becomes a real reward.
    """
    if not passed or speedup is None:
        return -1.0
    return speedup - 1.0 if speedup < 1.0 else speedup


# The device's record the physical floor (executor.floor) is computed from; on the wire in /v1/device.
PEAK_FORMAT = "regraph.device-peak/v1"


class DevicePeak(BaseModel):
    """What bounds a call on one device: bandwidths in GB/s (1e9 bytes/s), latency in microseconds."""

    format: str = PEAK_FORMAT
    name: str
    dram_gbps: float
    launch_us: float
    h2d_gbps: float
    d2h_gbps: float
    host_gbps: float
    l2_bytes: int = 0
    host_cache_bytes: int = 0
    source: Literal["measured", "datasheet", "default"] = "measured"
    note: str = ""
    model: str = Field(
        default="",
        description="the device as its workers name it (e.g. 'NVIDIA H200 (sm_90)', 'host-cpu'): the key "
        "of the host's naive-baseline timings; '' when not measured",
    )
