"""bench.probes.busy: the busy threads and the short switch interval last as long as the block, and are
undone however it ends (the GPU test of the launch gate runs its quiet timings after them)."""

from __future__ import annotations

import sys
import threading

import pytest

from bench.probes.busy import SWITCH_S, busy_interpreter


def test_the_threads_and_the_interval_last_as_long_as_the_block() -> None:
    before, threads = sys.getswitchinterval(), threading.active_count()
    with busy_interpreter(2):
        assert sys.getswitchinterval() == pytest.approx(SWITCH_S)
        assert threading.active_count() == threads + 2
    assert sys.getswitchinterval() == before
    assert threading.active_count() == threads


def test_an_error_in_the_block_undoes_both() -> None:
    before, threads = sys.getswitchinterval(), threading.active_count()
    with pytest.raises(KeyError), busy_interpreter(1):
        raise KeyError("x")
    assert sys.getswitchinterval() == before
    assert threading.active_count() == threads


def test_no_threads_leave_the_interval_alone() -> None:
    before = sys.getswitchinterval()
    with busy_interpreter(0):
        assert sys.getswitchinterval() == before
