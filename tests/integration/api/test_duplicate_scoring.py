"""Likely duplicates score every technique against all the others from one candidate index: the same
probabilities as an index built per technique without it (the scorer's own definition), on the seed
graph's techniques with the real embeddings, taxonomy and fitted model."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from graphdb.export import read_export
from search.embeddings import Embedder
from search.protocols import INITIAL_TECHNIQUE
from search.relabel.relabeler import RelabelConfig, RelabelPolicy, scorer_rows, technique_candidates
from search.relabel.scoring import CandidateIndex, StepText, load_model

SEED_GRAPH = Path(__file__).resolve().parents[3] / "regraph_data" / "seed_graph" / "seed_graph.json"


def test_one_index_scores_each_technique_as_an_index_of_the_others_does(embedder: Embedder) -> None:
    config = RelabelConfig()
    policy = RelabelPolicy(
        embedder, taxonomy=config.resolved_taxonomy(), model=load_model(config.relabel_model)
    )
    techniques = [t for t in read_export(SEED_GRAPH).techniques if t.name != INITIAL_TECHNIQUE]
    candidates = tuple(c for c in technique_candidates(techniques, policy.taxonomy) if c.in_graph)
    assert len(candidates) > 50
    steps = [StepText(c.name, c.description) for c in candidates]
    policy.vectors.ensure([s.embedded_name() for s in steps] + [s.embedded_text() for s in steps])

    rows = list(scorer_rows(policy, candidates, steps))
    assert [i for i, _, _ in rows] == list(range(len(candidates)))
    likely = 0
    for i, others, probabilities in rows:
        reference = CandidateIndex([c for c in candidates if c is not candidates[i]], policy.vectors)
        expected = policy.model.probabilities(
            reference.features(
                steps[i],
                None,
                policy.vectors.get(steps[i].embedded_name()),
                policy.vectors.get(steps[i].embedded_text()),
            )
        )
        assert [c.name for c in others] == [c.name for c in reference.candidates]
        np.testing.assert_allclose(probabilities, expected, atol=1e-6, err_msg=candidates[i].name)
        likely += int(np.sum(expected >= 0.5))
    assert likely > 0  # the comparison covers pairs that the page lists, not only improbable ones
