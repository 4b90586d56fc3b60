"""Session 34 (issue 28): the embedding-model probe (`bench.probes.relabel_embedder`): the wrappers that
change what a cosine is, and the gate scale chosen without the held-out set."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from bench.probes.relabel_embedder import (
    GATE_CONSTANTS,
    Averaged,
    Centered,
    auc,
    gate_scale_loso,
    set_gate_scale,
)
from bench.probes.relabel_loso import DEV_SETS, Record
from search.relabel import scoring


class _Fixed:
    """An embedder with a fixed unit vector per text."""

    def __init__(self, table: dict[str, list[float]]) -> None:
        self.table = {t: list(np.asarray(v) / np.linalg.norm(v)) for t, v in table.items()}

    def embed(self, texts: Sequence[str]) -> list[list[float]]:
        return [self.table[t] for t in texts]


def test_side_by_side_vectors_give_the_mean_of_the_two_cosines() -> None:
    a = _Fixed({"x": [1.0, 0.0, 0.0], "y": [0.6, 0.8, 0.0]})
    b = _Fixed({"x": [0.0, 0.0, 1.0], "y": [0.0, 1.0, 0.0]})
    x, y = (np.asarray(v) for v in Averaged(a, b).embed(["x", "y"]))
    assert abs(np.linalg.norm(x) - 1.0) < 1e-12
    assert abs(float(x @ y) - 0.5 * (0.6 + 0.0)) < 1e-12


def test_centred_vectors_lose_the_mean_and_keep_unit_length() -> None:
    inner = _Fixed({"x": [1.0, 1.0], "y": [1.0, 0.9]})
    mean = np.array([0.7, 0.7])
    x, y = (np.asarray(v) for v in Centered(inner, mean).embed(["x", "y"]))
    assert abs(np.linalg.norm(x) - 1.0) < 1e-12 and abs(np.linalg.norm(y) - 1.0) < 1e-12
    # the raw vectors are nearly parallel; less their common part, far less so
    raw = np.asarray(inner.embed(["x"])[0]) @ np.asarray(inner.embed(["y"])[0])
    assert raw > 0.99 and float(x @ y) < 0.9


def test_auc_counts_ties_as_half() -> None:
    values = np.array([0.9, 0.5, 0.5, 0.1])
    positive = np.array([True, True, False, False])
    assert auc(values, positive) == (2 + 1 + 0.5) / 4


def test_gate_scale_multiplies_every_constant_and_one_puts_them_back() -> None:
    try:
        set_gate_scale(2.0)
        for name, value in GATE_CONSTANTS.items():
            assert getattr(scoring, name) == 2 * value
    finally:
        set_gate_scale(1.0)
    for name, value in GATE_CONSTANTS.items():
        assert getattr(scoring, name) == value


def _record(source: str, verdict: str, n: int = 1) -> Record:
    return Record(source, "full", f"{source}-{n}", "a name", "T", False, True, verdict)


def test_the_gate_scale_of_a_fold_is_chosen_on_the_other_sets_only() -> None:
    held = DEV_SETS[0]
    others = DEV_SETS[1:]
    # scale 2 is right on 20 names of the held-out set and queues one name of every other set; scale 1
    # the other way round: the other sets (14 right) choose 1, the held-out set (20) would choose 2
    by_scale = {
        1.0: [_record(s, "correct") for s in others] + [_record(held, "queued", n) for n in range(20)],
        2.0: [_record(s, "queued") for s in others] + [_record(held, "correct", n) for n in range(20)],
    }
    for fewest_false in (True, False):
        chosen, folds = gate_scale_loso(by_scale, fewest_false=fewest_false)
        assert folds[0] == f"{held}: 1.0"
        assert {r.verdict for r in chosen if r.source == held} == {"queued"}
