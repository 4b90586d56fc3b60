"""What the parent (:mod:`executor.sandbox`) and a worker process tell each other.

The parent writes a job file (:class:`WorkerJob` then :class:`CandidateRun` for a candidate worker, a
:class:`ReferenceJob` for a reference worker) and names it on the worker's stdin. The worker writes the
stage it is in to the job's progress file (:func:`write_progress`, so that a timeout can say where it
happened) and its outcome (:class:`WorkerOutcome` or :class:`ReferenceOutcome`) to the job's result
file (:func:`write_result`), then wakes the parent through the pipe named in :data:`DONE_FD_ENV`.
On the same pipe it announces each candidate call's start, with that call's limit, and its end
(:func:`call_started`, :data:`CALL_ENDED`, read back by :func:`read_beat`), so that the parent can
kill a call that runs past its limit.
Both sides derive the evaluation's input sets from the same seeds with :func:`input_plan`.
"""

from __future__ import annotations

import logging
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, Field

from executor.protocol import EvaluationOptions
from executor.runlimit import CallLimit
from executor.taskformat import Size, Task
from executor.timingset import TimingSetSpec
from executor.verdict import DevicePeak, ErrorKind, FloorCheck, Mismatch, TimingStats

logger = logging.getLogger(__name__)

# At most this many confirming calls for the repeat-visit rule (CandidateRun.repeat_confirm_seeds): one
# was held off its core past the bound about 1 run in 20 under load here (session 39).
REPEAT_CONFIRM_CALLS = 3


def input_plan(options: EvaluationOptions, seeds: list[int]) -> list[tuple[int, Size]]:
    """The evaluation's input sets as ``(seed, size)``: the test-size sets, then the timing-size sets.

    There is always at least one timing-size set: it is what the trials run on and what the last trial
    is checked against, even when ``timing_size_checks`` is 0.
    """
    test: list[Size] = ["test"] * options.correctness_sets
    timing: list[Size] = ["timing"] * max(1, options.timing_size_checks)
    sizes = test + timing
    if len(seeds) < len(sizes):
        raise ValueError(f"{len(seeds)} seeds for {len(sizes)} input sets")
    return list(zip(seeds, sizes, strict=False))


def seeds_needed(options: EvaluationOptions) -> int:
    """How many fresh seeds an evaluation with these options draws."""
    return options.correctness_sets + max(1, options.timing_size_checks)


def expected_path(directory: Path, index: int, name: str) -> Path:
    """Where the reference's output ``name`` for input set ``index`` is stored."""
    return directory / f"set{index}-{name}.npy"


class WorkerJob(BaseModel):
    """The candidate-independent part of a worker's job, sent before the candidate is compiled."""

    task: Task
    runtime: Literal["gpu", "host", "none"]
    reference_library: str
    seeds: list[int]
    options: EvaluationOptions = EvaluationOptions()
    expected_dir: str | None = Field(
        default=None,
        description="the reference's outputs (from a ReferenceJob); None: run the reference here, "
        "after the candidate on each set",
    )
    timing_set: TimingSetSpec | None = Field(
        default=None,
        description="the task's timing set, which the trials run on; None: the fresh timing-size sets",
    )
    device_peak: DevicePeak | None = Field(
        default=None,
        description="the device's bandwidths and latency for the physical floor, measured by the executor "
        "(executor.peak); None: measured by this worker for this job alone",
    )
    compare_product: str | None = Field(
        default=None,
        description="the cubin of executor.devcompare's kernels (kernel tasks); None: every output is "
        "compared on the host",
    )
    baseline_copies: bool = Field(
        default=False,
        description="a baseline worker's job: make the naive baseline's rotated copies of the timing "
        "sets while naive.cu compiles, so its run does not copy them under the GPU lock",
    )
    host_lock_max_bytes: int | None = Field(
        default=None,
        ge=0,
        description="with options.host_memory page_locked: the most bytes of timed arrays this worker "
        "locks (the executor's setting host_lock_max_mb); past it they all stay pageable. None: "
        "executor.worker.host.DEFAULT_LOCK_MAX_BYTES",
    )
    result_path: str = "result.json"
    memory_limit_bytes: int | None = None
    progress_path: str | None = None


class CandidateRun(BaseModel):
    """The second half of a candidate worker's job: what to run, once it is compiled."""

    candidate_product: str
    candidate_symbol: str
    baseline_product: str | None = Field(
        default=None, description="the naive baseline's build (a baseline worker's run only)"
    )
    reference_timing: TimingStats | None = None
    call_limit: CallLimit | None = Field(
        default=None,
        description="the limit of each candidate call, announced to the parent with the call; None: "
        "only the run limit applies",
    )
    sent_at: float | None = Field(
        default=None,
        description="time.monotonic() when the parent handed this over: the worker reports how long "
        "the candidate then waited for the worker's preparation (``inputs_wait``)",
    )
    release_gpu: bool = Field(
        default=False,
        description="a function candidate's worker says when its GPU work is over and runs its host "
        "checks after it under the host memory's lock only (the setting release_gpu_early); False: "
        "every check under the trials' locks, no note",
    )
    host_shared: bool = Field(
        default=False,
        description="a function task's trials hold the host memory's lock shared, not alone: the parent "
        "knows the task to be compute-bound (executor.gpulock.compute_bound); False: alone",
    )
    first_visit_delay_ms: float = Field(
        default=0.0,
        ge=0.0,
        description="tests only (the evaluator never sets it): each timing set's first timed call waits "
        "this long inside its announced window, before its timed region, as a worker kept off its core "
        "by other processes is (tests/integration/executor/test_clock_confirmation.py); it can only "
        "lengthen the windows that executor.clockcheck compares",
    )
    clock_confirm_seeds: list[int] = Field(
        default_factory=list,
        description="the seeds of the clock-confirming calls' sets (executor.clockcheck), distinct, drawn "
        "by the executor from its own entropy as it hands the run over (executor.sandbox.finish_candidate): "
        "a candidate that changes what the worker's entropy returns cannot make them repeat (review 36c "
        "H1); none: the worker makes no clock-confirming call",
    )
    repeat_confirm_seeds: list[int] = Field(
        default_factory=list,
        description="the seeds of the repeat-visit rule's confirming sets (option repeat_confirm), at most "
        "REPEAT_CONFIRM_CALLS, drawn by the executor with the clock-confirming seeds and distinct from them, "
        "as it hands the run over: drawn by the worker, a candidate that patched its entropy knew the set "
        "ahead (session 35); the worker makes them one after another and stops at the first within the "
        "rule's bound; none: no confirming call is made (the rule refuses as without the option)",
    )
    spot_seed: int | None = Field(
        default=None,
        description="the seed (128 bits) of the spot samples' draws (which timed calls are sampled and at "
        "which positions: executor.worker.host.spot_sample, executor.worker.gpu.DeviceSpots), drawn by the "
        "executor as it hands the run over, for the same reason; None (a run not handed over by "
        "executor.sandbox.finish_candidate: a baseline's, some tests'): the worker's own entropy",
    )


class ReferenceJob(BaseModel):
    """A reference worker's job: expected outputs for the evaluation's input sets, and its timing."""

    task: Task
    reference_library: str
    seeds: list[int]
    options: EvaluationOptions = EvaluationOptions()
    sets: int | None = Field(default=None, description="only the first N planned sets (None: all)")
    out_dir: str
    time_reference: bool = False
    timing_set: TimingSetSpec | None = Field(
        default=None, description="store the task's timing set and its outputs here unless stored"
    )
    may_prepare: bool = Field(
        default=True,
        description="whether this job prepares the task's timing sets if they are missing (its executor "
        "holds the task's claim); else it waits for the job that does",
    )
    result_path: str = "result.json"
    memory_limit_bytes: int | None = None
    progress_path: str | None = None


class ReferenceOutcome(BaseModel):
    """What a reference worker reports: done (files written) or the task's own failure."""

    ok: bool
    message: str = ""
    reference_timing: TimingStats | None = None
    seconds: dict[str, float] = Field(default_factory=dict)


class WorkerOutcome(BaseModel):
    """What the worker reports back (the parent adds compile info and wraps it in a Verdict)."""

    passed: bool
    stage: Literal["correctness", "timing"]
    error: ErrorKind | None = None
    message: str = ""
    mismatch: Mismatch | None = None
    input_sets_checked: int = 0
    candidate_timing: TimingStats | None = None
    reference_timing: TimingStats | None = None
    device: str = ""
    seconds: dict[str, float] = Field(default_factory=dict)
    killed_by: Literal["call", "run"] | None = Field(
        default=None,
        description="a timeout: whether one call ran past its call limit or the run past the run limit",
    )
    floor: FloorCheck | None = None
    first_visits_ms: list[float] | None = Field(
        default=None,
        description="a function task's first timed call on each timing set, by the worker's clock, in "
        "order (executor.clockcheck compares them with the executor's clock)",
    )


# The descriptor of the pipe on which a worker tells its parent that its result is written (see
# executor.sandbox.WorkerProcess.wait); the parent names it in this variable.
DONE_FD_ENV = "REGRAPH_DONE_FD"


def write_progress(path: str | None, stage: str) -> None:
    """Record the stage a worker is in (nothing when the job names no progress file)."""
    if path:
        Path(path).write_text(stage)


# The stage a candidate worker reports once its preparation is done (see WorkerProcess.wait_prepared).
PREPARED = "prepared"


def notify_parent() -> None:
    """Wake the parent if it waits on the done pipe (an empty line): it then looks at the result
    file and the progress file. Without this it still finds them, later."""
    fd = os.environ.get(DONE_FD_ENV)
    if fd:
        try:
            os.write(int(fd), b"\n")
        except (OSError, ValueError) as e:
            logger.warning("could not wake the parent: %s", e)


def write_result(path: str, model: BaseModel) -> None:
    """Write a worker's outcome atomically and tell the parent that it is there."""
    target = Path(path)
    tmp = target.with_suffix(".tmp")
    tmp.write_text(model.model_dump_json())
    os.replace(tmp, target)
    notify_parent()


# What a function task's candidate worker writes on its done pipe once its candidate's GPU work is over
# (the last timed call returned, the device synchronised, the outputs on the host, the candidate's own
# process, if any, gone) and only host checks are left: the evaluator may then end the run's GPU turn
# (executor.evaluate). A candidate that writes it itself gains nothing: the evaluator holds the device's
# locks shared until the worker is gone, so no other run's trials begin beside it.
GPU_RELEASED = b"released\n"


def gpu_released() -> None:
    """Tell the parent that this worker's GPU work is over (:data:`GPU_RELEASED`)."""
    fd = os.environ.get(DONE_FD_ENV)
    if fd:
        try:
            os.write(int(fd), GPU_RELEASED)
        except (OSError, ValueError) as e:
            logger.warning("could not tell the parent that the GPU is released: %s", e)


# What a worker writes on its done pipe besides the result's note (an empty line): a call's start, with
# its limit in seconds, how many calls or launches it is, the time per call its limit was derived from
# and what it is; and the end of that call.
CALL_STARTED = b"call"
CALL_ENDED = b"end\n"
# How a function task's timed call is named in its announcement (executor.clockcheck compares those).
TIMED_CALL = "timed call "
# ... and a clock-confirming call after the trials (executor.clockcheck, executor.worker.candidate).
CLOCK_CONFIRM_CALL = "clock-confirming call "
_WHAT_MAX = 200  # with the numbers, far below PIPE_BUF: each line is written (and read) whole


def call_started(limit_s: float, calls: int, per_call_ms: float, what: str) -> bytes:
    """The line that announces a call of ``calls`` calls or launches, limited to ``limit_s`` seconds
    (derived from ``per_call_ms``)."""
    text = " ".join(what.split())[:_WHAT_MAX]
    # The time per call exactly (repr), so that the parent can tell whether it is the limit's basis.
    return CALL_STARTED + f" {limit_s:.6f} {max(calls, 1)} {float(per_call_ms)!r} {text}\n".encode()


@dataclass(frozen=True)
class CallBeat:
    """A call's start (``started``, with its limit, its number of calls or launches and what it is) or
    its end, as read from the done pipe."""

    started: bool
    limit_s: float = 0.0
    calls: int = 1
    per_call_ms: float = 0.0
    what: str = ""


def read_beat(line: bytes) -> CallBeat | None:
    """What one line of the done pipe (without its newline) says about a call; None for anything else
    (the result's note, or a line that does not parse, which is ignored)."""
    if line == CALL_ENDED.rstrip(b"\n"):
        return CallBeat(started=False)
    parts = line.split(b" ", 4)
    if len(parts) < 4 or parts[0] != CALL_STARTED:
        return None
    try:
        limit_s, calls, per_call_ms = float(parts[1]), int(parts[2]), float(parts[3])
    except ValueError:
        return None
    if not 0 < limit_s < float("inf"):
        return None
    what = parts[4].decode("utf-8", "replace") if len(parts) > 4 else ""
    return CallBeat(
        started=True, limit_s=limit_s, calls=max(calls, 1), per_call_ms=per_call_ms, what=what or "a call"
    )


class BaselineOutcome(BaseModel):
    """What a baseline worker reports (:mod:`executor.worker.baseline`): the task's naive baseline timed
    by a process that never loaded a candidate's code, or why it could not be."""

    ok: bool
    message: str = ""
    timing: TimingStats | None = None
    device: str = ""
    seconds: dict[str, float] = Field(default_factory=dict)
