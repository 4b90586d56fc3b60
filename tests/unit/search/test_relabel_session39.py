"""Session 39 (issue 28): the learning curve of the example rule (`bench.probes.relabel_loso`)."""

from __future__ import annotations

from bench.probes.relabel_bench import OUTSIDE_DATA, load_outside_items
from bench.probes.relabel_loso import DEV_SETS, _bank_of, curve_draw
from search.relabel.taxonomy import Taxonomy
from tests.unit.search.test_relabel_precision import _check_development_set


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


DEV16_DATA = OUTSIDE_DATA.with_name("dev16.jsonl")


def test_dev16_set_shares_nothing_with_the_outside_set_nor_the_other_development_sets(
    taxonomy: Taxonomy,
) -> None:
    """The sixteenth development set (`dev16.jsonl`, session 39: GEMM and attention kernel repositories'
    optimization-method lists and step headings, DeepGEMM's optimization headings): the outside set's
    format, no taxonomy label word for word, and no item of the outside set, the other development sets
    or the general set."""
    items = load_outside_items(DEV16_DATA)
    assert len(items) >= 40
    _check_development_set(items, taxonomy, 16, least_new=5, least_merge=12)


DEV17_DATA = OUTSIDE_DATA.with_name("dev17.jsonl")


def test_dev17_set_shares_nothing_with_the_outside_set_nor_the_other_development_sets(
    taxonomy: Taxonomy,
) -> None:
    """The seventeenth development set (`dev17.jsonl`, session 39: course material, GPU MODE's lecture
    titles and code file names, the OLCF CUDA training series' exercise headings, a video series' example
    directories and concepts): the outside set's format, no taxonomy label word for word, and no item of
    the outside set, the other development sets (dev16 too) or the general set."""
    items = load_outside_items(DEV17_DATA)
    assert len(items) >= 50
    _check_development_set(items, taxonomy, 17, least_new=15, least_merge=15)
