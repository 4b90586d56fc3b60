"""The trials' times kept in a timing record (``TimingStats.samples_ms``): in trial order, bounded,
with the rotation they ran in, so that a device run's records show where the stop rule's spread
comes from (``bench.probes.trial_trace``)."""

from __future__ import annotations

import numpy as np

from executor.checking import TRACE_TRIALS, TrialSamples, timing_stats, trial_trace
from executor.inputs import InputSet
from executor.protocol import EvaluationOptions
from executor.verdict import TimingStats
from executor.worker.host import host_copy_count


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
    assert EvaluationOptions(rotate_buffers=3, host_rotate_buffers=None).rotated_copies(kernel=False) == 3


def test_the_defaults_give_one_host_copy_per_timing_set_and_the_median_over_the_repeats() -> None:
    """Session 26's defaults (the H200 A/B, bench/device/run_s26_trials.sh): a function task's trials
    go through one host copy per timing set, so that a set's first visit is also its copy's, and
    once the repeat visits hold 5 pairs the noise and the median are theirs alone; a kernel task
    keeps its 3 device copies (4 slots with 2 sets)."""
    options = EvaluationOptions()
    assert (options.repeat_pairs, options.host_rotate_buffers, options.timing_sets) == (5, 2, 2)
    assert options.rotated_copies(kernel=False) == 2
    assert options.rotated_copies(kernel=True) == options.rotate_buffers == 3
    sources = [InputSet(seed, "timing", {}, {"x": np.zeros(4, np.float32)}) for seed in range(2)]
    assert host_copy_count(sources, options.rotated_copies(kernel=False), 1 << 20) == 2
    assert options.trial_policy().repeat_pairs == options.trial_policy(device_timed=True).repeat_pairs == 5


def test_kernel_trials_are_held_behind_the_launch_gate_by_default() -> None:
    """executor.worker.gpu.LaunchGate (session 26); ``launch_gate: false`` gives the batches as before."""
    assert EvaluationOptions().launch_gate is True
    assert EvaluationOptions(launch_gate=False).launch_gate is False
