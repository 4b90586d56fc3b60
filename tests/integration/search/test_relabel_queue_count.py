"""A build's "flagged" count is what the curator queue then holds, and names that cannot name a
technique (one character, mixed scripts) wait in the queue with a reason: never merged, never new.
(A method over 200 characters is refused by the trajectory format before relabeling; the relabeler's
own handling of a 10 kB name is in tests/unit/search/test_relabel_precision.py.)"""

from __future__ import annotations

import pytest

from graphdb.models import RelabelOutcome
from graphdb.store import GraphStore
from search.embeddings import Embedder
from search.relabel.construction import GraphBuilder, TaskDirectoryReferences
from search.relabel.relabeler import Relabeler
from tests.integration.search.test_relabel_construction import TASKS, real_steps, sourced

pytestmark = pytest.mark.timeout(1200)


def test_build_counts_what_the_queue_lists_and_unusable_names_wait_there(
    store: GraphStore, embedder: Embedder
) -> None:
    steps = real_steps("transpose_f32", 3)
    mixed = "\u0421oalescing"  # a Cyrillic capital Es, then Latin letters
    steps[1] = {**steps[1], "method": "x"}
    steps[2] = {**steps[2], "method": mixed, "code": "}{ ][ not code " * 50}
    builder = GraphBuilder(
        store=store,
        embedder=embedder,
        relabeler=Relabeler(store, embedder),
        references=TaskDirectoryReferences(TASKS),
    )
    summary = builder.build([sourced("transpose_f32", steps)])
    assert summary.trajectories_ingested == 1
    assert summary.flagged == store.count_queue() >= 2
    queued = {d.candidate: d for d in store.list_queue(limit=100)}
    for name in ("x", mixed):
        decision = queued[name]
        assert decision.outcome is RelabelOutcome.FLAGGED
        assert any(f.startswith("name_unusable") for f in decision.flags)
        assert len(decision.technique) <= 200
