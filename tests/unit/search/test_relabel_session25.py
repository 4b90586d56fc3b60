"""Session 25 (issue 28): a seventh development set (dev7), names as compilers and kernel write-ups
write them (pass and rule identifiers, terse tags), and the rules it asked for."""

from __future__ import annotations

from bench.probes.relabel_bench import OUTSIDE_DATA, load_outside_items
from search.relabel.taxonomy import Taxonomy
from tests.unit.search.test_relabel_precision import _check_named_set, _shares_no_item

DEV7_DATA = OUTSIDE_DATA.with_name("dev7.jsonl")


def test_dev7_set_shares_nothing_with_the_outside_set_nor_the_other_development_sets(
    taxonomy: Taxonomy,
) -> None:
    """The seventh development set (`dev7.jsonl`, session 25: Triton's and XLA's GPU passes, TVM's TIR
    passes and MetaSchedule rules, two GEMM write-ups' optimization tags): the outside set's format, no
    taxonomy label word for word, and no item of the outside set, the other development sets or the
    general set (compared by program)."""
    items = load_outside_items(DEV7_DATA)
    assert len(items) >= 100
    _check_named_set(items, taxonomy, "dev7")
    _shares_no_item(
        items,
        "dev7",
        (
            (OUTSIDE_DATA, "the outside set"),
            *((OUTSIDE_DATA.with_name(f"dev{n}.jsonl"), f"dev{n}") for n in (2, 3, 4, 5, 6)),
            (OUTSIDE_DATA.with_name("general.jsonl"), "the general set"),
        ),
    )
    clear = [i for i in items if not i.doubtful]
    assert sum(i.truth == "NEW" for i in clear) >= 25, "dev7 needs near-misses that must not merge"
    assert sum(i.truth != "NEW" for i in clear) >= 20, "dev7 needs clear paraphrases that must merge"
