"""The executor's clock against the worker's (executor.clockcheck): the rule on its own numbers."""

from __future__ import annotations

from pathlib import Path
from typing import Literal

from executor.checking import timing_stats
from executor.clockcheck import (
    CLOCK_FACTOR,
    CLOCK_SLACK_MS,
    FIRST_VISIT_SLACK_MS,
    clock_check,
    copy_allowance,
    timed_refusal,
)
from executor.floor import HEADROOM
from executor.verdict import DevicePeak, ErrorKind
from executor.worker.messages import WorkerOutcome
from tests.support.hostcode import one_input_task, write_task


def _passed(median_ms: float) -> WorkerOutcome:
    return WorkerOutcome(
        passed=True, stage="timing", input_sets_checked=4, candidate_timing=timing_stats([median_ms] * 7)
    )


def _check(
    outcome: WorkerOutcome,
    windows: list[float | None],
    unmatched: int,
    announced: bool = False,
    confirm_windows_s: list[float | None] | None = None,
) -> WorkerOutcome:
    """:func:`clock_check` of ``outcome`` as a worker that made as many clock-confirming calls as the
    executor saw windows of (``seconds["clock_confirm_calls"]``) reports it."""
    confirms = confirm_windows_s or []
    made = outcome.model_copy(
        update={"seconds": {**outcome.seconds, "clock_confirm_calls": float(len(confirms))}}
    )
    return clock_check(made, windows, unmatched, announced, confirms)


def test_windows_near_the_worker_clock_pass_and_far_above_it_are_implausible() -> None:
    outcome = _passed(2.0)
    limit_s = (CLOCK_FACTOR * 2.0 + CLOCK_SLACK_MS) / 1e3
    assert clock_check(outcome, [limit_s * 0.99] * 7, 0) is outcome
    refused = clock_check(outcome, [limit_s * 1.01] * 7, 0)
    assert not refused.passed and refused.error is ErrorKind.IMPLAUSIBLE and refused.stage == "timing"
    assert "executor's clock" in refused.message and refused.input_sets_checked == 4
    # the shortest window counts: windows the executor's thread was late for do not refuse
    assert clock_check(outcome, [1.0] * 6 + [0.002], 0) is outcome


def test_an_end_with_no_start_is_refused_and_nothing_announced_is_not_compared() -> None:
    outcome = _passed(2.0)
    refused = clock_check(outcome, [0.002] * 7, 1)
    assert not refused.passed and "had not started" in refused.message
    assert clock_check(outcome, [], 0) is outcome
    failed = WorkerOutcome(passed=False, stage="correctness", error=ErrorKind.WRONG_OUTPUT, message="wrong")
    assert clock_check(failed, [1.0] * 7, 3) is failed


def test_first_visits_far_longer_by_the_executors_clock_are_refused() -> None:
    """Review 22c: a changed clock with a memo of every answer. The repeats are really fast (short
    windows); the first visits, slow in truth, are reported as fast as them."""
    outcome = _passed(0.04).model_copy(update={"first_visits_ms": [0.04, 0.04, 0.04]})
    windows = [0.058, 0.058, 0.058] + [0.00004] * 4
    refused = clock_check(outcome, windows, 0)
    assert not refused.passed and "first timed call on each timing set" in refused.message
    # One first visit far longer is enough (session 35): the repeat-visit rule takes the fastest first
    # visit, so a memo that times one set's first visit on the true clock and changes it for the others
    # passed both rules when all had to disagree. A worker held up on one is what the confirming call
    # is for.
    late = [0.058, 0.00004, 0.00004] + [0.00004] * 4
    refused = clock_check(outcome, late, 0)
    assert not refused.passed and "first timed call on each timing set" in refused.message
    assert _check(outcome, late, 0, confirm_windows_s=[0.00005]).passed


def test_first_visits_an_executor_thread_was_late_for_on_a_loaded_host_pass() -> None:
    """Session 23, the suite's fleet test on this 2-core machine: an honest candidate's three first
    visits, 1.06, 4.53 and 1.09 ms by the worker's clock, had windows of 7-14 ms or more, each later than
    2 x + 5 ms, because the executor's reading thread was late for every one of them."""
    outcome = _passed(1.1).model_copy(update={"first_visits_ms": [1.058, 4.529, 1.087]})
    windows = [0.0135, 0.0145, 0.0140] + [0.0012] * 4
    assert clock_check(outcome, windows, 0) is outcome
    # the bound itself: every first-visit window just above 2 x + the slack is refused
    above = [(CLOCK_FACTOR * t + FIRST_VISIT_SLACK_MS) * 1.01 / 1e3 for t in (1.058, 4.529, 1.087)]
    refused = clock_check(outcome, above + [0.0012] * 4, 0)
    assert not refused.passed and "first timed call on each timing set" in refused.message


def test_a_function_task_with_windows_missing_is_refused_when_its_calls_were_announced() -> None:
    """Review 34: a candidate that redirects (dup2 of /dev/null) or shuts down the worker's end of the
    done channel after its first call writes no line, and leaves the check no window to compare. With
    a call limit (every call announced) a function task's passed outcome needs a known window for
    each timed trial; a window not known (None: a stamp missing, or none above the start's) is
    missing. Without a limit nothing is announced, and a kernel task (no first visits) announces
    batches: neither is refused for it."""
    outcome = _passed(2.0).model_copy(update={"first_visits_ms": [2.0, 2.0, 2.0]})
    assert outcome.candidate_timing is not None and outcome.candidate_timing.trials == 7
    honest = [0.0025] * 7
    assert clock_check(outcome, honest, 0, announced=True) is outcome
    # more windows than timed calls: a start and an end the worker did not write (a short one forged
    # between two calls took the shortest-window rule; confirming calls' windows are kept apart)
    extra = clock_check(outcome, [*honest, 0.0025], 0, announced=True)
    assert not extra.passed and "saw 8 timed calls" in extra.message, extra.message
    assert clock_check(outcome, [*honest, 0.0025], 0) is outcome  # not announced: no lines
    for seen in ([], [0.0025], [0.0025] * 6, [*[0.0025] * 6, None]):
        refused = clock_check(outcome, seen, 0, announced=True)
        assert not refused.passed and refused.error is ErrorKind.IMPLAUSIBLE, seen
        assert "cannot be checked" in refused.message and "7 calls" in refused.message, refused.message
        assert clock_check(outcome, seen, 0) is outcome  # not announced: nothing to miss
    kernel = _passed(2.0)  # no first visits: a kernel task's timing
    assert clock_check(kernel, [], 0, announced=True) is kernel


def test_an_unknown_window_is_left_out_of_the_comparison() -> None:
    outcome = _passed(2.0).model_copy(update={"first_visits_ms": [2.0, 2.0, 2.0]})
    limit_s = (CLOCK_FACTOR * 2.0 + CLOCK_SLACK_MS) / 1e3
    # the first visits' windows known and far too long: refused, with one of them unknown too
    far = (CLOCK_FACTOR * 2.0 + FIRST_VISIT_SLACK_MS) * 1.1 / 1e3
    refused = clock_check(outcome, [far, None, far] + [limit_s * 0.5] * 4, 0)
    assert not refused.passed and "first timed call on each timing set" in refused.message
    # the shortest known window, not an unknown one, is compared
    refused = clock_check(outcome, [None] + [limit_s * 1.1] * 6, 0)
    assert not refused.passed and "shortest timed call" in refused.message


def test_a_refusal_is_confirmed_by_the_last_clock_confirming_call() -> None:
    """Where the timed calls' windows refuse, the worker's last clock-confirming call (a first visit on
    a fresh set of the executor's after the trials, its outputs checked as every one's are) decides: within 2 x the median + the refusing
    rule's slack by the executor's clock, the outcome passes (a worker kept off its core during the
    trials); above it, or with none made, it is refused, and the message says which."""
    outcome = _passed(2.0).model_copy(update={"first_visits_ms": [2.0, 2.0]})
    late = (CLOCK_FACTOR * 2.0 + FIRST_VISIT_SLACK_MS) * 1.2 / 1e3
    windows = [late, late] + [0.0025] * 5  # the first visits held up, the repeats not
    bound_s = (CLOCK_FACTOR * 2.0 + FIRST_VISIT_SLACK_MS) / 1e3
    unconfirmed = clock_check(outcome, windows, 0, announced=True)
    assert not unconfirmed.passed and "made no clock-confirming call" in unconfirmed.message
    confirmed = _check(outcome, windows, 0, announced=True, confirm_windows_s=[bound_s * 0.99])
    assert confirmed.passed and confirmed.seconds["clock_confirmed"] == bound_s * 0.99
    for confirms in ([bound_s * 1.01], [bound_s * 0.5, bound_s * 1.01], [bound_s * 0.5, None]):
        refused = _check(outcome, windows, 0, announced=True, confirm_windows_s=confirms)
        assert not refused.passed and refused.error is ErrorKind.IMPLAUSIBLE, confirms
        assert "first timed call on each timing set" in refused.message, refused.message
        assert f"the last of {len(confirms)} clock-confirming call(s)" in refused.message, refused.message
    # the last one counts (the one the worker stopped at), not the shortest; every one's outputs are
    # checked by the worker and each set is the executor's own (review 36c's H1: test_clock_confirmation.py)
    assert _check(outcome, windows, 0, confirm_windows_s=[bound_s * 1.5, bound_s * 0.5]).passed
    # nothing refused: the confirming calls change nothing
    unrefused = _check(outcome, [0.0025] * 7, 0, confirm_windows_s=[1.0])
    assert unrefused.passed and "clock_confirmed" not in unrefused.seconds


def test_a_refusal_by_the_shortest_window_is_confirmed_within_its_own_slack() -> None:
    """Every window long (review 22: a clock that reads 3 ms for 58 ms calls): the confirming call must
    keep the shortest-window rule's slack, not the first visits' wider one."""
    outcome = _passed(2.0).model_copy(update={"first_visits_ms": [2.0, 2.0]})
    long_s = (CLOCK_FACTOR * 2.0 + FIRST_VISIT_SLACK_MS) * 1.2 / 1e3
    tight_s = (CLOCK_FACTOR * 2.0 + CLOCK_SLACK_MS) / 1e3
    refused = _check(outcome, [long_s] * 7, 0, confirm_windows_s=[tight_s * 1.01])
    assert not refused.passed and "clock-confirming" in refused.message
    assert _check(outcome, [long_s] * 7, 0, confirm_windows_s=[tight_s * 0.99]).passed
    middle_s = (CLOCK_FACTOR * 2.0 + CLOCK_SLACK_MS) * 1.1 / 1e3  # only the shortest-window rule
    assert not _check(outcome, [middle_s] * 7, 0, confirm_windows_s=[tight_s * 1.01]).passed
    assert _check(outcome, [middle_s] * 7, 0, confirm_windows_s=[tight_s * 0.99]).passed


def test_what_no_load_explains_is_not_confirmed() -> None:
    """An end announced with no call started, and windows missing under a call limit, are refused
    whatever the confirming calls say."""
    outcome = _passed(2.0).model_copy(update={"first_visits_ms": [2.0, 2.0]})
    assert not _check(outcome, [0.0025] * 7, 1, confirm_windows_s=[0.001]).passed
    assert not _check(outcome, [0.0025] * 6, 0, announced=True, confirm_windows_s=[0.001]).passed


def test_confirming_windows_the_worker_did_not_make_are_refused() -> None:
    """Review 36c's M1: a candidate that wrote a short clock-confirming call's start and end on the done
    channel itself. The executor's confirming windows must be as many as the confirming calls the worker
    says it made, and a start that the worker did not write (counted by the executor: with a call
    open, or a timed call's after a confirming call's) refuses whatever the windows say."""
    outcome = _passed(2.0).model_copy(update={"first_visits_ms": [2.0, 2.0]})
    late = (CLOCK_FACTOR * 2.0 + FIRST_VISIT_SLACK_MS) * 1.2 / 1e3
    windows = [late, late] + [0.0025] * 5
    short = 0.001
    three = outcome.model_copy(update={"seconds": {"clock_confirm_calls": 3.0}})
    assert _check(outcome, windows, 0, True, [late, late, late, short]).passed  # as many as the worker made
    for seen in ([late, late, late, short], [late, late], []):
        refused = clock_check(three, windows, 0, True, seen)
        assert not refused.passed and refused.error is ErrorKind.IMPLAUSIBLE, seen
        assert f"made 3 clock-confirming call(s) but the executor saw {len(seen)}" in refused.message
    # none made, one seen: refused even where the timed calls' windows refuse nothing
    honest = [0.0025] * 7
    refused = clock_check(outcome, honest, 0, True, [short])
    assert not refused.passed and "made 0 clock-confirming call(s)" in refused.message, refused.message
    for stray in (1, 2):
        refused = clock_check(outcome, honest, 0, True, (), stray_starts=stray)
        assert not refused.passed and f"saw {stray} call start(s)" in refused.message, refused.message


def test_a_candidate_in_a_process_of_its_own_is_not_refused_for_load() -> None:
    """Review 36c's M2: in a runner (executor.worker.runner) the candidate holds neither the worker's
    clock nor its channel, and the worker makes no clock-confirming call; one first visit held up (a
    loaded host) refused an honest candidate there. The windows are not compared with the worker's
    times; lines the worker did not write still refuse."""
    outcome = _passed(2.0).model_copy(update={"first_visits_ms": [2.0, 2.0]})
    late = (CLOCK_FACTOR * 2.0 + FIRST_VISIT_SLACK_MS) * 1.2 / 1e3
    held = [late, 0.0025] + [0.0025] * 5  # one first visit held up
    assert not clock_check(outcome, held, 0, announced=True).passed
    assert clock_check(outcome, held, 0, announced=True, own_process=True) is outcome
    assert clock_check(outcome, [late] * 7, 0, announced=True, own_process=True) is outcome
    assert not clock_check(outcome, held, 1, announced=True, own_process=True).passed
    assert not clock_check(outcome, held, 0, True, (), 1, own_process=True).passed
    assert not clock_check(outcome, held[:5], 0, announced=True, own_process=True).passed


def _peak(
    source: Literal["measured", "datasheet", "default"] = "measured",
    host_gbps: float = 20.0,
    cache: int = 32 << 20,
) -> DevicePeak:
    return DevicePeak(
        name="host",
        dram_gbps=host_gbps,
        launch_us=0.0,
        h2d_gbps=host_gbps,
        d2h_gbps=host_gbps,
        host_gbps=host_gbps,
        host_cache_bytes=cache,
        source=source,
    )


def test_the_copy_allowance_is_the_copys_time_at_the_executors_measured_rate(tmp_path: Path) -> None:
    """The confirming call's copy (docs/executor.md, "The copy's cost"): every array at the timing size
    beyond the host's cache, read and written, at the measured host rate x the headroom; nothing where
    the rate was not measured by the executor, and added to the confirming bound only."""
    spec = one_input_task("big", domain="elementwise", description="y = x", timing=64 << 20)  # 2 x 256 MB
    task = write_task(tmp_path, spec, "")
    ms, reckoned = copy_allowance(task, _peak())
    counted = 2 * (256 << 20) - (32 << 20)
    assert abs(ms - 2 * counted / (20.0 * HEADROOM * 1e6)) < 1e-9 and str(counted) in reckoned
    # the rate measured again when it is needed: the higher of the two is used (review 37b, M1)
    faster, _ = copy_allowance(task, _peak(), 40.0)
    assert abs(faster - ms / 2) < 1e-9 and copy_allowance(task, _peak(), 5.0)[0] == ms
    for peak in (None, _peak("datasheet"), _peak("default"), _peak(cache=1 << 30), _peak(cache=0)):
        assert copy_allowance(task, peak) == (0.0, "")
    # the timed calls' rule is not moved by it; the confirming bound is
    windows, firsts = [0.060, 0.060] + [0.0001] * 5, [0.04, 0.04]
    plain, allowed = timed_refusal(windows, firsts, 0.04), timed_refusal(windows, firsts, 0.04, ms)
    assert plain is not None and allowed is not None and allowed[1] == plain[1] + ms
    assert timed_refusal([0.004] * 7, None, 2.0, ms) is None
    outcome = _passed(0.04).model_copy(
        update={"first_visits_ms": firsts, "seconds": {"clock_confirm_calls": 1.0}}
    )
    within = (plain[1] + ms * 0.9) / 1e3
    assert not clock_check(outcome, windows, 0, confirm_windows_s=[within]).passed
    passed = clock_check(outcome, windows, 0, confirm_windows_s=[within], copy_allowance=(ms, reckoned))
    assert passed.passed and passed.seconds["clock_confirm_copy_allowance"] == ms / 1e3
    above = clock_check(
        outcome, windows, 0, confirm_windows_s=[within + ms / 1e3], copy_allowance=(ms, reckoned)
    )
    assert not above.passed and reckoned in above.message
