"""Session 39 (issue 28): the learning curve of the example rule (`bench.probes.relabel_loso`)."""

from __future__ import annotations

from bench.probes.relabel_loso import DEV_SETS, _bank_of, curve_draw


def test_a_learning_curve_bank_never_holds_the_held_out_set_and_is_the_same_every_run() -> None:
    for held in DEV_SETS:
        for k in (0, 2, 8, len(DEV_SETS) - 1):
            drawn = curve_draw(held, k, 0)
            assert len(drawn) == len(set(drawn)) == k
            assert held not in drawn
            assert drawn == curve_draw(held, k, 0)
            assert {e.source for e in _bank_of(drawn)} <= {"own", *drawn}
    # draws differ (else the range over draws says nothing)
    assert len({tuple(curve_draw("dev2", 4, d)) for d in range(5)}) > 1
