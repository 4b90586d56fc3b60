"""The executor's clock against the worker's, around a function task's timed calls.

A function task's calls are timed on the host clock inside the worker, the process that runs the
candidate's library, so the clock they read is the candidate's to change: review 22 rewrote libc's
``clock_gettime`` from a candidate (a raw ``syscall`` to make its page writable, no Python), and every
timed call read 3 ms where it took 58 ms, with honest outputs past every check. The worker announces
each timed call's start and end on its done channel (:class:`executor.worker.runtime.CallWatch`), and
the kernel stamps each line with its own clock as the worker writes it (a Unix seqpacket socket with
SO_TIMESTAMPNS: :class:`executor.sandbox.WorkerProcess`); the window of a call is the time between the
two writes (the difference of the kernel's two stamps). A passed outcome whose median timed call is far below the shortest of those windows, or
whose first call on any timing set is far below that call's own window, is refused, unless the
worker's last clock-confirming call after the trials (a first visit on a set of the executor's seed,
which no memo has seen, its outputs checked) took within the bound by the executor's clock: see :func:`clock_check`.

The windows hold the call and the worker's untimed preparation of it (an L2 flush on the GPU), and any
time the worker was not scheduled in between. Until session 33 they were stamped when the executor's
reading thread read the lines, which must take the interpreter's lock (held up to its 5 ms switch
interval by the executor's other threads) and be scheduled: on a loaded 2-core host that thread read a
call's start and end at once (a window of 0) or the end alone late (session 32 refused an honest
1.11 ms saxpy: its shortest of 7 windows was 7.30 ms); bench/probes/clock_slack_load.py measures both.
So the shortest window is compared (a changed clock shortens every call the worker reports), with a
factor and a slack. With the kernel's stamps a worker kept off its core still lengthens them (session
35: an honest 3 ms saxpy's two first visits took 24.2 and 32.0 ms under a load of 7 on 2 cores), hence
the confirming call. Where the kernel takes no stamps (executor.sandbox: a pipe), the windows are the
read times', as before. Kernel tasks are timed by CUDA events on the device (their launches are
announced as batches) and are not compared. Lines the worker cannot have written are refused (an end
with no call started, a start with a call open, more timed windows than timed calls, a timed call's start
after a clock-confirming call's, more or fewer confirming windows than confirming calls), but a candidate
that patches the worker's writes, or does its work
at a clock read of the worker's between its calls (review 36c's H2) can still lie: only a candidate
process that holds neither the clock nor the checks closes that (:mod:`executor.worker.runner`, opt-in,
where the windows are not compared; docs/executor.md).
"""

from __future__ import annotations

from collections.abc import Sequence

from executor import floor
from executor.taskformat import NUMPY_DTYPES, FunctionTask, KernelTask
from executor.verdict import DevicePeak, ErrorKind
from executor.worker.messages import WorkerOutcome

# The executor's shortest window may be this many times the worker's median timed call, plus the slack.
CLOCK_FACTOR = 2.0
CLOCK_SLACK_MS = 5.0
# Each timing set's first visit is one window, not the shortest of many, so a late reading thread
# lengthened all three at once when the executor was loaded: on this 2-core machine, under the suite's
# load, an honest 1-4.5 ms call's three first-visit windows were each 7-14 ms or more by read times
# (session 23, the fleet test). Three switch intervals of slack there; a changed clock is then caught on
# the first visits when the true call takes more than 15 ms more than twice what it reports. Both
# slacks are kept as they were with the kernel's stamps (session 33), which only a worker not
# scheduled between its writes lengthens (bench/results/2026-11-30_s33/clock_slack.md).
FIRST_VISIT_SLACK_MS = 15.0


# Where the rule would refuse (the first visits' or the shortest window), the worker makes up to this many
# clock-confirming calls right after the trials, each a first visit on a set of its own seed, which the
# executor draws (distinct) and hands over with the run (executor.sandbox.clock_confirm_seeds; review 36c's
# H1 patched the worker's entropy to make every set the same and answered the last from a memo), stopping
# at the first whose window by its own clock is within the confirming bound (:func:`timed_refusal`);
# every one's outputs and ``in`` arrays are checked (executor.worker.candidate.confirm_clock).
CLOCK_CONFIRM_CALLS = 3


def copy_allowance(
    task: FunctionTask | KernelTask, peak: DevicePeak | None, rate_now_gbps: float = 0.0
) -> tuple[float, str]:
    """What a clock-confirming call's window may hold beyond the confirming bound for the copy of what
    the call left (executor.worker.host's ``first_visit``: every one of the task's arrays at the timing
    size, copied into buffers touched before the call, before its end is announced), in ms, and how
    it was reckoned (for the verdict's message); ``(0.0, "")`` where no trustworthy rate is known.

    At most the copy's own time, so that it gives a candidate nothing the copy does not take from it:
    the bytes beyond the host's last-level cache (those the call may have left in it are not counted),
    read and written, at the host's copy rate measured by the executor's peak worker
    (:mod:`executor.peak`: no candidate code loaded, the trials' locks held; ``host_gbps`` counts a
    copy's reads and writes both, :func:`executor.worker.host.measure_host_gbps`) x
    :data:`executor.floor.HEADROOM`. None where the figures were not measured (the datasheet's or the
    default: a rate no host was seen to copy at; None: a job whose worker measures its own, which is
    its candidate's process) and for kernel tasks (not compared).

    ``rate_now_gbps``: the same rate measured again by the executor when the allowance is needed (a
    confirming call was made), and the higher of the two is used: the peak is measured once per
    process, and review 37b saw this host's rate move 1.66x within 8 minutes (a peak measured at a slow
    moment made the allowance ~9 ms more than a later copy took, and a changed clock with a memo whose
    work fitted it passed with the peak's rate x 0.6). A higher rate only makes the allowance smaller,
    so neither measurement can be lowered to a candidate's gain."""
    if peak is None or peak.source != "measured" or not isinstance(task, FunctionTask):
        return 0.0, ""
    if not (peak.host_gbps > 0 and peak.host_cache_bytes > 0):
        return 0.0, ""
    try:
        nbytes = sum(task.array_length(a, "timing") * NUMPY_DTYPES[a.dtype]().itemsize for a in task.arrays)
    except Exception:  # any failure to size an array means: no allowance
        return 0.0, ""
    counted = max(0, nbytes - peak.host_cache_bytes)
    gbps = max(peak.host_gbps, rate_now_gbps) * floor.HEADROOM
    ms = 2 * counted / (gbps * 1e6)
    if ms <= 0:
        return 0.0, ""
    return ms, (
        f"{ms:.4g} ms for the copy of what it left ({nbytes} bytes, {counted} beyond the host's cache, read "
        f"and written at {gbps:.4g} GB/s, the executor's measured host copy rate x {floor.HEADROOM:g})"
    )


def timed_refusal(
    windows_s: Sequence[float | None],
    first_visits_ms: Sequence[float] | None,
    median_ms: float,
    copy_allowance_ms: float = 0.0,
) -> tuple[str, float] | None:
    """Whether the timed calls' windows alone refuse the worker's clock: None where they agree with it,
    else why, and the bound in ms that a clock-confirming call's window must keep instead (``CLOCK_FACTOR``
    x the median + the slack of the rule that refused, the shortest window's where both did). Used by the
    executor on the kernel's stamps and by the worker on its own clock, which only decides whether it
    makes a confirming call (a changed clock there can skip it, and is refused for it).
    ``copy_allowance_ms`` (:func:`copy_allowance`) is added to that bound only, never to the timed
    calls' own rules (their windows hold no copy)."""
    known = [w for w in windows_s if w is not None]
    # timed calls 1..K: each set's first visit (those whose window is known)
    pairs = [(w, t) for w, t in zip(windows_s, first_visits_ms or [], strict=False) if w is not None]
    slack: float | None = None
    why = ""
    if pairs and any(w * 1e3 > CLOCK_FACTOR * t + FIRST_VISIT_SLACK_MS for w, t in pairs):
        # Review 22c: a changed clock and a memo of every answer. The repeats really are fast (short
        # windows), and the changed clock makes the first visits look fast too (no repeat-visit gain);
        # only those first visits' own windows show the time they took. Any one, not all (until session
        # 35): the repeat-visit rule takes the fastest first visit, so a memo that timed one set's first
        # visit on the true clock and changed it for the other's passed both rules (1,079x, the host
        # runtime); an honest one held up is what the clock-confirming call is for.
        slack = FIRST_VISIT_SLACK_MS
        why = (
            "the first timed call on each timing set took "
            + ", ".join(f"{w * 1e3:.4g}" for w, _ in pairs)
            + " ms by the executor's clock but "
            + ", ".join(f"{t:.4g}" for _, t in pairs)
            + " ms by the worker's"
        )
    if known and min(known) * 1e3 > CLOCK_FACTOR * median_ms + CLOCK_SLACK_MS:
        slack = CLOCK_SLACK_MS
        why = why or (
            f"the shortest timed call took {min(known) * 1e3:.4g} ms by the executor's clock ({len(known)} "
            f"calls) but the median one {median_ms:.4g} ms by the worker's"
        )
    if slack is None:
        return None
    return why, CLOCK_FACTOR * median_ms + slack + copy_allowance_ms


def clock_check(
    outcome: WorkerOutcome,
    windows_s: Sequence[float | None],
    unmatched_ends: int,
    announced: bool = False,
    confirm_windows_s: Sequence[float | None] = (),
    stray_starts: int = 0,
    own_process: bool = False,
    copy_allowance: tuple[float, str] = (0.0, ""),
) -> WorkerOutcome:
    """``outcome``, or an ``implausible`` one in its place when the worker's clock disagrees with the
    executor's: ``windows_s`` are the executor's seconds between the start and the end of each timed
    call the worker announced (None: not known), ``unmatched_ends`` the ends it announced with no call
    started (lines a candidate wrote on the pipe itself). ``announced``: the worker was to announce
    every call (a call limit was set); then a function task's passed outcome with fewer known windows
    than timed trials is refused too (review 34: a candidate that closes, redirects or shuts down the
    worker's end of the channel after its first call leaves the check nothing to compare).
    ``confirm_windows_s``: the windows of the worker's clock-confirming calls after the trials, in
    order; where the timed calls' windows refuse (:func:`timed_refusal`), the outcome passes when the
    last of them (the one the worker stopped at; every one's outputs are checked) is within the bound, with
    ``seconds["clock_confirmed"]`` its window in seconds, and is refused, saying so, when it is not or
    none was made. Refused whatever the windows say: ``stray_starts`` calls started that the worker did
    not start (:class:`executor.sandbox.WorkerProcess`: a start with a call open, a timed call's after a
    clock-confirming call's), more timed windows than timed trials (announced), and a number of clock-confirming windows other than the number of
    clock-confirming calls the worker says it made (``seconds["clock_confirm_calls"]``; review 36c's M1
    wrote a short one's start and end itself). ``own_process``: the candidate ran in a process of its
    own (:mod:`executor.worker.runner`), so the worker's clock and its writes on the channel are not its
    to change (the runner gets neither the channel nor a way to trace the worker, which is non-dumpable
    before the runner starts): the windows are not compared with the worker's times, which only load
    could make them disagree with (review 36c's M2: one first visit held up refused an honest candidate
    there, and a runner makes no clock-confirming call: only the repeat-visit rule's, in a fresh
    runner); the lines themselves are still checked.
    ``copy_allowance``: :func:`copy_allowance`'s for the job (the executor's figures), added to the
    confirming call's bound only; ``seconds["clock_confirm_copy_allowance"]`` on a confirmed pass."""
    timing = outcome.candidate_timing
    if not outcome.passed or timing is None:
        return outcome
    known = [w for w in windows_s if w is not None]
    if unmatched_ends:
        why = (
            f"the worker announced the end of {unmatched_ends} call(s) it had not started: lines on the "
            "executor's pipe that the worker's code did not write"
        )
    elif stray_starts:
        why = (
            f"the executor saw {stray_starts} call start(s) on the worker's done channel that the "
            "worker's code did not write (a start with a call open, or a timed call's after a "
            "clock-confirming call's)"
        )
    elif announced and outcome.first_visits_ms is not None and len(windows_s) > timing.trials:
        # A function task's trials are timed one call at a time, every one kept (no batch to discard
        # from): an extra window is a start and an end that the worker did not write.
        why = (
            f"the worker timed {timing.trials} calls but the executor saw {len(windows_s)} timed calls "
            "start and end on the worker's done channel: lines the worker's code did not write"
        )
    elif len(confirm_windows_s) != int(outcome.seconds.get("clock_confirm_calls", 0)):
        why = (
            f"the worker made {int(outcome.seconds.get('clock_confirm_calls', 0))} clock-confirming "
            f"call(s) but the executor saw {len(confirm_windows_s)} on its done channel: lines the "
            "worker's code did not write"
        )
    elif announced and outcome.first_visits_ms is not None and len(known) < timing.trials:
        # A function task (kernel tasks announce batches, not timed calls, and have no first visits).
        why = (
            f"the worker timed {timing.trials} calls but the executor saw the start and the end of "
            f"{len(known)} of them on the worker's done channel (it was closed, redirected or shut down, "
            "or its stamps were missing): the clock the calls were timed with cannot be checked"
        )
    else:
        allowance_ms, reckoned = copy_allowance
        refusal = (
            None
            if own_process
            else timed_refusal(windows_s, outcome.first_visits_ms, timing.median_ms, allowance_ms)
        )
        if refusal is None:  # also: nothing announced as a timed call (kernel batches, no call limit)
            return outcome
        why, bound_ms = refusal
        last = confirm_windows_s[-1] if confirm_windows_s else None
        if last is not None and last * 1e3 <= bound_ms:
            # Other processes' work kept the worker off its core inside the trials' windows; a first
            # visit on values no memo has seen, timed on both clocks after them, agrees.
            seconds = {**outcome.seconds, "clock_confirmed": last}
            if allowance_ms > 0:
                seconds["clock_confirm_copy_allowance"] = allowance_ms / 1e3
            return outcome.model_copy(update={"seconds": seconds})
        if not confirm_windows_s:
            confirmed = "; the worker made no clock-confirming call"
        else:
            shown = "unknown" if last is None else f"{last * 1e3:.4g} ms"
            confirmed = (
                f"; confirmed after the trials: the last of {len(confirm_windows_s)} clock-confirming "
                f"call(s) on a fresh set took {shown} by the executor's clock, above {bound_ms:.4g} ms "
                f"({CLOCK_FACTOR:g} x the median + the slack"
                + (f" + {reckoned}" if allowance_ms > 0 else "")
                + ")"
            )
        why += f"{confirmed}: the clock the calls were timed with was changed"
    return WorkerOutcome(
        passed=False,
        stage="timing",
        error=ErrorKind.IMPLAUSIBLE,
        message=why,
        input_sets_checked=outcome.input_sets_checked,
        device=outcome.device,
        seconds=outcome.seconds,
        floor=outcome.floor,
    )
