"""The executor's clock against the worker's, around a function task's timed calls.

A function task's calls are timed on the host clock inside the worker, the process that runs the
candidate's library, so the clock they read is the candidate's to change: review 22 rewrote libc's
``clock_gettime`` from a candidate (a raw ``syscall`` to make its page writable, no Python), and every
timed call read 3 ms where it took 58 ms, with honest outputs past every check. The worker announces
each timed call's start and end on its done channel (:class:`executor.worker.runtime.CallWatch`), and
the kernel stamps each line with its own clock as the worker writes it (a Unix seqpacket socket with
SO_TIMESTAMPNS: :class:`executor.sandbox.WorkerProcess`); the window of a call is the time between the
two writes (the difference of the kernel's two stamps). A passed outcome whose median timed call is far below the shortest of those windows, or
whose first call on every timing set is far below that call's own window, is refused.

The windows hold the call and the worker's untimed preparation of it (an L2 flush on the GPU), and any
time the worker was not scheduled in between. Until session 33 they were stamped when the executor's
reading thread read the lines, which must take the interpreter's lock (held up to its 5 ms switch
interval by the executor's other threads) and be scheduled: on a loaded 2-core host that thread read a
call's start and end at once (a window of 0) or the end alone late (session 32 refused an honest
1.11 ms saxpy: its shortest of 7 windows was 7.30 ms); bench/probes/clock_slack_load.py measures both.
So the shortest window is compared (a changed clock shortens every call the worker reports), with a
factor and a slack. Where the kernel takes no stamps (executor.sandbox: a pipe), the windows are the
read times', as before. Kernel tasks are timed by CUDA events on the device (their launches are
announced as batches) and are not compared. A candidate that also writes the channel's lines itself, or
patches the worker's writes, can still lie: only a candidate process that holds neither the clock nor the checks
closes that (:mod:`executor.worker.runner`, opt-in; docs/executor.md).
"""

from __future__ import annotations

from collections.abc import Sequence

from executor.verdict import ErrorKind
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


def clock_check(
    outcome: WorkerOutcome,
    windows_s: Sequence[float | None],
    unmatched_ends: int,
    announced: bool = False,
) -> WorkerOutcome:
    """``outcome``, or an ``implausible`` one in its place when the worker's clock disagrees with the
    executor's: ``windows_s`` are the executor's seconds between the start and the end of each timed
    call the worker announced (None: not known), ``unmatched_ends`` the ends it announced with no call
    started (lines a candidate wrote on the pipe itself). ``announced``: the worker was to announce
    every call (a call limit was set); then a function task's passed outcome with fewer known windows
    than timed trials is refused too (review 34: a candidate that closes, redirects or shuts down the
    worker's end of the channel after its first call leaves the check nothing to compare)."""
    timing = outcome.candidate_timing
    if not outcome.passed or timing is None:
        return outcome
    known = [w for w in windows_s if w is not None]
    first = outcome.first_visits_ms or []
    # timed calls 1..K: each set's first visit (those whose window is known)
    pairs = [(w, t) for w, t in zip(windows_s, first, strict=False) if w is not None]
    if unmatched_ends:
        why = (
            f"the worker announced the end of {unmatched_ends} call(s) it had not started: lines on the "
            "executor's pipe that the worker's code did not write"
        )
    elif announced and outcome.first_visits_ms is not None and len(known) < timing.trials:
        # A function task (kernel tasks announce batches, not timed calls, and have no first visits).
        why = (
            f"the worker timed {timing.trials} calls but the executor saw the start and the end of "
            f"{len(known)} of them on the worker's done channel (it was closed, redirected or shut down, "
            "or its stamps were missing): the clock the calls were timed with cannot be checked"
        )
    elif pairs and all(w * 1e3 > CLOCK_FACTOR * t + FIRST_VISIT_SLACK_MS for w, t in pairs):
        # Review 22c: a changed clock and a memo of every answer. The repeats really are fast (short
        # windows), and the changed clock makes the first visits look fast too (no repeat-visit gain);
        # only those first visits' own windows show the time they took.
        why = (
            "the first timed call on each timing set took "
            + ", ".join(f"{w * 1e3:.4g}" for w, _ in pairs)
            + " ms by the executor's clock but "
            + ", ".join(f"{t:.4g}" for _, t in pairs)
            + " ms by the worker's: the clock the calls were timed with was changed"
        )
    elif known:
        seen_ms = min(known) * 1e3
        if seen_ms <= CLOCK_FACTOR * timing.median_ms + CLOCK_SLACK_MS:
            return outcome
        why = (
            f"the shortest timed call took {seen_ms:.4g} ms by the executor's clock ({len(known)} calls) "
            f"but the median one {timing.median_ms:.4g} ms by the worker's: the clock the calls were timed "
            "with was changed"
        )
    else:
        return outcome  # nothing announced as a timed call (kernel batches, no call limit)
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
