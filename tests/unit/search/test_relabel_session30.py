"""Session 30 (issue 28): the twelfth development set and the rules found on it."""

from __future__ import annotations

from bench.probes.relabel_bench import OUTSIDE_DATA, load_outside_items
from search.relabel.taxonomy import Taxonomy
from tests.unit.search.test_relabel_precision import _check_development_set

DEV12_DATA = OUTSIDE_DATA.with_name("dev12.jsonl")


def test_dev12_set_shares_nothing_with_the_outside_set_nor_the_other_development_sets(
    taxonomy: Taxonomy,
) -> None:
    """The twelfth development set (`dev12.jsonl`, session 30: an AMD kernel agent's strategy database,
    snake_case names in AMD's words, LDS, wavefront, MFMA): the outside set's format, no taxonomy label
    word for word, and no item of the outside set, the other development sets or the general set."""
    items = load_outside_items(DEV12_DATA)
    assert len(items) >= 50
    _check_development_set(items, taxonomy, 12, least_new=20, least_merge=14)
