"""Session 24 (issue 28): a sixth development set (dev6) and a glossary of GPU jargon read before a name
is scored."""

from __future__ import annotations

from bench.probes.relabel_bench import OUTSIDE_DATA, load_outside_items
from search.relabel.taxonomy import Taxonomy
from tests.unit.search.test_relabel_precision import _check_named_set, _shares_no_item

DEV6_DATA = OUTSIDE_DATA.with_name("dev6.jsonl")


def test_dev6_set_shares_nothing_with_the_outside_set_nor_the_other_development_sets(
    taxonomy: Taxonomy,
) -> None:
    """The sixth development set (`dev6.jsonl`, session 24: the GPU Programming 101 course, ENCCS' GPU
    programming lesson, the Carpentries GPU programming lesson): the outside set's format, no taxonomy
    label word for word, and no item of the outside set, the other development sets or the general set
    (compared by program)."""
    items = load_outside_items(DEV6_DATA)
    assert len(items) >= 60
    _check_named_set(items, taxonomy, "dev6")
    _shares_no_item(
        items,
        "dev6",
        (
            (OUTSIDE_DATA, "the outside set"),
            *((OUTSIDE_DATA.with_name(f"dev{n}.jsonl"), f"dev{n}") for n in (2, 3, 4, 5)),
            (OUTSIDE_DATA.with_name("general.jsonl"), "the general set"),
        ),
    )
    clear = [i for i in items if not i.doubtful]
    assert sum(i.truth == "NEW" for i in clear) >= 15, "dev6 needs near-misses that must not merge"
    assert sum(i.truth != "NEW" for i in clear) >= 20, "dev6 needs clear paraphrases that must merge"
