"""The relabel scorer: its fitted model file, the logistic fit and the decision rule."""

from __future__ import annotations

import numpy as np
import pytest

from search.relabel_scoring import (
    FEATURES,
    Ranked,
    ScoringError,
    ScoringModel,
    decide,
    fit_logistic,
    load_model,
)


def test_the_committed_model_matches_the_features() -> None:
    model = load_model()
    assert len(model.weights) == len(FEATURES)
    assert 0.0 <= model.new_threshold <= model.merge_threshold <= 1.0
    # More name similarity and fewer unexplained words make a candidate more likely, never less.
    assert model.weights[FEATURES.index("name_sim")] > 0
    assert model.weights[FEATURES.index("unexplained")] < 0


def test_fit_logistic_separates_a_separable_set() -> None:
    rng = np.random.default_rng(0)
    x = rng.normal(size=(200, 2))
    y = (x[:, 0] - 0.5 * x[:, 1] > 0).astype(np.float64)
    weights, bias = fit_logistic(x, y, l2=0.1)
    model = ScoringModel(weights=weights, bias=bias, merge_threshold=0.5, new_threshold=0.5, margin=0.0)
    accuracy = float(np.mean((model.probabilities(x) >= 0.5) == (y == 1)))
    assert accuracy > 0.95
    assert weights[0] > 0 > weights[1]


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
