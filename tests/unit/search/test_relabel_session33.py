"""Session 33 (issue 28): the fourteenth development set."""

from __future__ import annotations

from bench.probes.relabel_bench import OUTSIDE_DATA, load_outside_items
from search.relabel.taxonomy import Taxonomy
from tests.unit.search.test_relabel_precision import _check_development_set

DEV14_DATA = OUTSIDE_DATA.with_name("dev14.jsonl")


def test_dev14_set_shares_nothing_with_the_outside_set_nor_the_other_development_sets(
    taxonomy: Taxonomy,
) -> None:
    """The fourteenth development set (`dev14.jsonl`, session 33: an LLM kernel agent's optimization
    strategy database, snake_case names; a kernel-agent whitepaper's headings): the outside set's format, no taxonomy label word for word, and
    no item of the outside set, the other development sets or the general set."""
    items = load_outside_items(DEV14_DATA)
    assert len(items) >= 50
    _check_development_set(items, taxonomy, 14, least_new=10, least_merge=30)


DEV15_DATA = OUTSIDE_DATA.with_name("dev15.jsonl")


def test_dev15_set_shares_nothing_with_the_outside_set_nor_the_other_development_sets(
    taxonomy: Taxonomy,
) -> None:
    """The fifteenth development set (`dev15.jsonl`, session 33: TorchInductor's configuration option
    names, mostly knobs that are no technique of the taxonomy): the outside set's format, no taxonomy
    label word for word, and no item of the outside set, the other development sets (dev14 too) or the
    general set."""
    items = load_outside_items(DEV15_DATA)
    assert len(items) >= 50
    _check_development_set(items, taxonomy, 15, least_new=20, least_merge=10)
