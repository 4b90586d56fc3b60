"""The relabel scorer: its fitted model file, the choice-model fit and the decision rule."""

from __future__ import annotations

import numpy as np
import pytest

from search.relabel.scoring import (
    FEATURES,
    Ranked,
    ScoringError,
    ScoringModel,
    TechniqueCandidate,
    decide,
    fit_choice,
    load_model,
    mention_core,
)


def test_the_committed_model_matches_the_features() -> None:
    model = load_model()
    assert len(model.weights) == len(FEATURES)
    assert 0.0 <= model.new_threshold <= model.merge_threshold <= 1.0
    # More name similarity and fewer unexplained words make a candidate more likely, never less.
    assert model.weights[FEATURES.index("name_sim")] > 0
    assert model.weights[FEATURES.index("unexplained")] < 0


def test_fit_choice_learns_which_candidate_is_right() -> None:
    # Per step, 5 candidates with 2 features; the right one has the largest x0 - 0.5 x1, and a step
    # whose best candidate scores below 0 has no right candidate ("none of them").
    rng = np.random.default_rng(0)
    steps = []
    for _ in range(300):
        x = rng.normal(size=(5, 2))
        score = x[:, 0] - 0.5 * x[:, 1]
        best = int(np.argmax(score))
        steps.append((x, best if score[best] > 0.5 else -1))
    weights, bias = fit_choice(steps, l2=0.1)
    assert weights[0] > 0 > weights[1]
    model = ScoringModel(weights=weights, bias=bias, merge_threshold=0.5, new_threshold=0.5, margin=0.0)
    hits = 0
    for x, target in steps:
        p = model.probabilities(x)
        assert 0.0 <= float(p.sum()) <= 1.0 + 1e-9
        chosen = int(np.argmax(p)) if p.max() > 1.0 - p.sum() else -1
        hits += chosen == target
    assert hits / len(steps) > 0.85


def test_probabilities_share_the_mass_between_close_candidates() -> None:
    model = ScoringModel(weights=(10.0, 0.0), bias=-5.0, merge_threshold=0.5, new_threshold=0.1, margin=0.0)
    alone = model.probabilities(np.array([[1.0, 0.0], [0.0, 0.0]]))
    rivals = model.probabilities(np.array([[1.0, 0.0], [1.0, 0.0]]))
    assert alone[0] > 0.95
    assert rivals[0] < 0.55 and rivals[0] == rivals[1]


def test_a_mention_matches_the_identifier_core_only_for_compound_identifiers() -> None:
    assert mention_core("__shfl_down_sync") == "shfl_down"
    assert mention_core("memcpy_async") == "memcpy_async"
    # A plain word inside underscores stays literal: "shared" is written by any shared-memory step.
    assert mention_core("__shared__") == "__shared__"
    assert mention_core("__ldg") == "__ldg"


def test_without_a_taxonomy_the_model_of_that_case_applies() -> None:
    bare = ScoringModel(
        weights=(1.0,) * len(FEATURES), bias=0.0, merge_threshold=0.9, new_threshold=0.5, margin=0.0
    )
    model = ScoringModel(
        weights=(0.0,) * len(FEATURES),
        bias=0.0,
        merge_threshold=0.6,
        new_threshold=0.2,
        margin=0.0,
        without_taxonomy=bare,
    )
    assert model.for_knowledge(taxonomy=True) is model
    assert model.for_knowledge(taxonomy=False) is bare
    again = ScoringModel.from_json(model.to_json())
    assert again.without_taxonomy is not None and again.without_taxonomy.merge_threshold == 0.9
    assert load_model().without_taxonomy is not None


def _ranked(*probabilities: float) -> Ranked:
    names = tuple(f"t{i}" for i in range(len(probabilities)))
    return Ranked(names, probabilities, tuple(() for _ in probabilities))


def test_decide_merges_creates_or_leaves_undecided() -> None:
    model = ScoringModel(
        weights=(0.0,) * len(FEATURES), bias=0.0, merge_threshold=0.7, new_threshold=0.2, margin=0.1
    )
    assert decide(model, _ranked(0.9, 0.3)) == "merge"
    assert decide(model, _ranked(0.9, 0.85)) == "undecided"  # the runner-up is too close
    assert decide(model, _ranked(0.5, 0.1)) == "undecided"
    assert decide(model, _ranked(0.1, 0.05)) == "new"
    assert decide(model, _ranked()) == "new"


def test_a_model_file_for_other_features_or_thresholds_is_refused() -> None:
    document = load_model().to_json()
    with pytest.raises(ScoringError, match="features"):
        ScoringModel.from_json({**document, "features": ["name_sim"]})
    with pytest.raises(ScoringError, match="new_threshold"):
        ScoringModel.from_json({**document, "new_threshold": 0.9, "merge_threshold": 0.5})
    with pytest.raises(ScoringError, match="invalid"):
        ScoringModel.from_json({**document, "bias": "high"})
    with pytest.raises(ScoringError, match="new_threshold"):
        ScoringModel.from_json(
            {**document, "without_taxonomy": {**document["without_taxonomy"], "new_threshold": 1.5}}
        )
    with pytest.raises(ScoringError, match=r"not a regraph\.relabel-model/v2"):
        ScoringModel.from_json({**document, "format": "regraph.relabel-model/v1"})


def _ranked_with_unexplained(p: float, unexplained: float) -> Ranked:
    features = [0.0] * len(FEATURES)
    features[FEATURES.index("unexplained")] = unexplained
    return Ranked(("t0", "t1"), (p, 0.01), (tuple(features), tuple(features)))


def test_a_merge_gate_keeps_names_with_words_the_graph_lacks_from_merging_by_score() -> None:
    base = ScoringModel(
        weights=(0.0,) * len(FEATURES), bias=0.0, merge_threshold=0.7, new_threshold=0.2, margin=0.0
    )
    known = ScoringModel(**{**base.__dict__, "merge_gate": "known_words"})
    explained = ScoringModel(**{**base.__dict__, "merge_gate": "explained"})
    sure = _ranked_with_unexplained(0.95, 0.0)
    half_explained = _ranked_with_unexplained(0.95, 0.5)
    assert decide(base, half_explained, ["prefix"]) == "merge"
    assert decide(known, half_explained, ["prefix"]) == "undecided"
    assert decide(known, half_explained, []) == "merge"
    assert decide(explained, half_explained, []) == "undecided"
    assert decide(explained, sure, []) == "merge"
    # The gate never turns a low score into anything but "new".
    assert decide(explained, _ranked_with_unexplained(0.1, 0.5), []) == "new"
    assert ScoringModel.from_json(explained.to_json()).merge_gate == "explained"
    with pytest.raises(ScoringError, match="merge_gate"):
        ScoringModel.from_json({**explained.to_json(), "merge_gate": "vibes"})


def test_a_labels_contrast_is_not_the_techniques_word() -> None:
    # "single precision instead of double": double precision is what the technique is not
    candidate = TechniqueCandidate(
        name="Reduced precision arithmetic",
        description="Compute in half precision rather than in double.",
        labels=("Reduced precision arithmetic", "single precision instead of double"),
    )
    words = candidate.vocabulary()
    assert "singl" in words and "half" in words
    assert "doubl" not in words
