"""The trials' times kept in a timing record (``TimingStats.samples_ms``): in trial order, bounded,
with the rotation they ran in, so that a device run's records show where the stop rule's spread
comes from (``bench.probes.trial_trace``)."""

from __future__ import annotations

from executor.checking import TRACE_TRIALS, TrialSamples, timing_stats, trial_trace
from executor.protocol import EvaluationOptions
from executor.verdict import TimingStats


def test_the_trace_keeps_the_first_trials_in_order_to_four_digits() -> None:
    samples = [10.123456, 9.87654321, 12.0, 1234.5678, 0.000123456]
    assert trial_trace(samples) == [10.12, 9.877, 12.0, 1235.0, 0.0001235]


def test_a_long_run_keeps_only_the_first_trace_trials() -> None:
    samples = [float(i + 1) for i in range(TRACE_TRIALS * 3)]
    stats = timing_stats(samples, "max_trials", sets=2, slots=4)
    assert stats.trials == TRACE_TRIALS * 3
    assert stats.samples_ms == samples[:TRACE_TRIALS]
    assert (stats.sets, stats.slots, stats.median_from) == (2, 4, None)
    # The verdict's model takes it back (its bound holds the trace).
    assert TimingStats.model_validate(stats.model_dump(mode="json")) == stats


def test_the_trace_says_when_the_median_was_taken_over_the_repeat_visits() -> None:
    samples = TrialSamples([20.0, 21.0, 10.0, 10.5, 10.2, 10.4])
    samples.median_from = 2
    stats = timing_stats(samples, "stable", sets=2, slots=2)
    assert stats.median_from == 2
    assert stats.samples_ms == [20.0, 21.0, 10.0, 10.5, 10.2, 10.4]  # the first visits kept too
    assert stats.median_ms == 10.3


def test_host_rotate_buffers_applies_to_function_tasks_only() -> None:
    options = EvaluationOptions(rotate_buffers=3, host_rotate_buffers=2)
    assert options.rotated_copies(kernel=False) == 2
    assert options.rotated_copies(kernel=True) == 3
    assert EvaluationOptions(rotate_buffers=3).rotated_copies(kernel=False) == 3
