"""Session 40: the ceiling of any gate over the relabel scorer (bench.probes.relabel_loso --ceiling)."""

from __future__ import annotations

from bench.probes.relabel_loso import Record, ceiling_report


def _rec(
    source: str, verdict: str, top_verdict: str, *, should_merge: bool = True, doubtful: bool = False
) -> Record:
    return Record(
        source=source,
        graph="full",
        id=f"{source}-{verdict}-{top_verdict}",
        name="n",
        truth="t",
        doubtful=doubtful,
        should_merge=should_merge,
        verdict=verdict,
        top_verdict=top_verdict,
    )


def test_the_ceiling_counts_right_merges_and_right_best_candidates_the_rule_did_not_take() -> None:
    records = [
        _rec("general", "correct", "-"),  # merged by an alias: counts
        _rec("general", "queued", "correct"),  # a gate that never erred would take it
        _rec("dev2", "new wrong", "correct"),  # likewise
        _rec("dev2", "queued", "false"),  # its best candidate is wrong: no gate can merge it right
        _rec("dev3", "new wrong", "false"),
        _rec("dev3", "false", "false"),
        _rec("dev3", "queued", "correct", doubtful=True),  # doubtful: not counted
        _rec("dev3", "new ok", "-", should_merge=False),  # must not merge: not counted
        _rec("own", "queued", "correct"),  # the own set: not a development set
    ]
    row = next(
        line for line in ceiling_report(records).splitlines() if line.startswith("| 15 example sets | full")
    )
    assert row == "| 15 example sets | full | 6 | 1 | 1 | 1 | 1 / 1 | 3 (50.0%) |", row
