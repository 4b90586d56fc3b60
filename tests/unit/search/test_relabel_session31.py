"""Session 31 (issue 28): the thirteenth development set and the rules found on it."""

from __future__ import annotations

from bench.probes.relabel_bench import OUTSIDE_DATA, load_outside_items
from search.relabel.taxonomy import Taxonomy
from tests.unit.search.test_relabel_precision import _check_development_set

DEV13_DATA = OUTSIDE_DATA.with_name("dev13.jsonl")


def test_dev13_set_shares_nothing_with_the_outside_set_nor_the_other_development_sets(
    taxonomy: Taxonomy,
) -> None:
    """The thirteenth development set (`dev13.jsonl`, session 31: an LLM code optimizer's CUDA optimization
    menu, MLIR's affine and GPU pass names): the outside set's format, no taxonomy label word for word, and
    no item of the outside set, the other development sets or the general set."""
    items = load_outside_items(DEV13_DATA)
    assert len(items) >= 50
    _check_development_set(items, taxonomy, 13, least_new=14, least_merge=25)
