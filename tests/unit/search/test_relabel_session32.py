"""Session 32 (issue 28): labelled names written outside the team as examples (`search.relabel.examples`),
the rule chosen leave one set out (`bench.probes.relabel_loso`)."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from bench.probes.relabel_bench import NEW, scenarios
from bench.probes.relabel_loso import Change, Record, bank_items, fit
from search.embeddings import Embedder
from search.relabel import examples as examples_module
from search.relabel.examples import (
    EXAMPLES_PATH,
    ExampleBank,
    ExampleError,
    LabelledName,
    read_examples,
    write_examples,
)
from search.relabel.relabeler import RelabelPolicy, StepInput
from search.relabel.scoring import TextVectors, load_model
from search.relabel.taxonomy import Taxonomy


def _choose(
    embedder: Embedder,
    taxonomy: Taxonomy | None,
    name: str,
    examples: list[LabelledName],
    graph: str = "full",
) -> tuple[str, str, dict[str, object] | None]:
    scene = next(s for s in scenarios(taxonomy or _default()) if s.name == graph)
    policy = RelabelPolicy(embedder, taxonomy=taxonomy, model=load_model(), examples=examples)
    choice = policy.choose(StepInput(name), policy.index(scene.techniques))
    return choice.outcome, choice.technique, choice.example


def _default() -> Taxonomy:
    from search.relabel.taxonomy import default_taxonomy

    return default_taxonomy()


COARSENING = [LabelledName("Several outputs per thread", "Thread coarsening", "general")]
MULTI_GPU = [LabelledName("simpleMultiGPU", None, "dev10")]


def test_a_near_example_merges_a_waiting_step(embedder: Embedder, taxonomy: Taxonomy) -> None:
    # general g005: not separated from parallelization by the scorer's features (queued); the labelled
    # "Several outputs per thread" is 0.89 away
    name = "Computing several outputs in each thread"
    assert _choose(embedder, taxonomy, name, [])[0] == "undecided"
    outcome, technique, example = _choose(embedder, taxonomy, name, COARSENING)
    assert (outcome, technique) == ("merge", "Thread coarsening")
    assert example is not None and example["name"] == "Several outputs per thread"
    assert 0.88 <= float(example["cosine"]) < 0.9  # type: ignore[arg-type]


def test_a_near_example_of_no_technique_makes_a_waiting_step_new(
    embedder: Embedder, taxonomy: Taxonomy
) -> None:
    # dev5 k028: queued (not separated from parallelization); dev10's "simpleMultiGPU", labelled as no
    # taxonomy technique, is 0.91 away
    assert _choose(embedder, taxonomy, "Multi-GPU Basics", [])[0] == "undecided"
    outcome, technique, example = _choose(embedder, taxonomy, "Multi-GPU Basics", MULTI_GPU)
    assert (outcome, technique) == ("new", "Multi-GPU Basics")
    assert example is not None and example["technique"] is None


def test_a_far_example_changes_nothing(embedder: Embedder, taxonomy: Taxonomy) -> None:
    # the merge needs 0.88: "Evening out the work across warps" is farther from the coarsening example
    far = [LabelledName("Several outputs per thread", "Thread coarsening")]
    assert (
        _choose(embedder, taxonomy, "Evening out the work across warps", far)[:2]
        == _choose(embedder, taxonomy, "Evening out the work across warps", [])[:2]
    )


def test_an_example_never_overrides_a_merge_the_scorer_made(embedder: Embedder, taxonomy: Taxonomy) -> None:
    # the rule touches waiting and new steps only: a separated merge stands whatever an example says
    name = "Unrolling the inner loop by hand"  # a model merge (not an alias)
    wrong = [LabelledName(name, "Kernel fusion")]
    assert _choose(embedder, taxonomy, name, wrong)[:3] == ("merge", "Loop unrolling", None)


def test_the_later_gates_still_hold(embedder: Embedder, taxonomy: Taxonomy) -> None:
    # a contrary word queues a step whatever merged it
    contrary = [LabelledName("Avoid shared memory tiling", "Shared memory tiling")]
    assert _choose(embedder, taxonomy, "Avoid shared memory tiling here", contrary)[0] == "undecided"


def test_without_a_taxonomy_the_examples_are_not_read(embedder: Embedder) -> None:
    # the examples' labels are taxonomy techniques; a relabeler without one does not use them
    name = "Computing several outputs in each thread"
    with_examples = _choose(embedder, None, name, COARSENING, "bare")
    assert with_examples == _choose(embedder, None, name, [], "bare")
    assert with_examples[2] is None
    assert (
        RelabelPolicy(embedder, taxonomy=None, model=load_model(), examples=COARSENING).example_bank() is None
    )


def test_the_packaged_examples_are_the_development_sets_clear_items_and_the_own_calibration_half(
    taxonomy: Taxonomy,
) -> None:
    version, packaged = read_examples()
    assert version == taxonomy.version
    expected = [(i.name, None if i.truth == NEW else i.truth, src) for src, i in bank_items()]
    assert [(e.name, e.technique, e.source) for e in packaged] == expected
    assert {e.source for e in packaged} == {"own", "general", *(f"dev{n}" for n in range(2, 16))}


def test_the_examples_file_is_checked(embedder: Embedder, taxonomy: Taxonomy, tmp_path: Path) -> None:
    path = tmp_path / "examples.jsonl"
    write_examples(COARSENING + MULTI_GPU, taxonomy.version, path)
    version, read = read_examples(path)
    assert (version, read) == (taxonomy.version, COARSENING + MULTI_GPU)
    path.write_text('{"name": "x", "technique": null}\n')
    with pytest.raises(ExampleError, match="header"):
        read_examples(path)
    with pytest.raises(ExampleError, match="lacks"):
        ExampleBank([LabelledName("x", "Not a technique")], TextVectors(embedder), taxonomy)
    assert EXAMPLES_PATH.exists()


def test_packaged_examples_are_not_used_with_a_taxonomy_that_lacks_their_techniques(
    embedder: Embedder, taxonomy: Taxonomy
) -> None:
    # a taxonomy of the same version but fewer techniques (the API tests' own): no examples, no error
    from dataclasses import replace

    small = replace(taxonomy, techniques=taxonomy.techniques[:5])
    bank = RelabelPolicy(embedder, taxonomy=small, model=load_model()).example_bank()
    assert bank is not None and bank.examples == ()


def test_examples_of_another_taxonomy_version_are_not_used(
    embedder: Embedder, taxonomy: Taxonomy, monkeypatch: pytest.MonkeyPatch
) -> None:
    from search.relabel import relabeler

    relabeler._packaged_examples.cache_clear()
    monkeypatch.setattr(relabeler, "read_examples", lambda: ("another version", COARSENING))
    try:
        policy = RelabelPolicy(embedder, taxonomy=taxonomy, model=load_model())
        bank = policy.example_bank()
        assert bank is not None and bank.examples == ()
    finally:
        relabeler._packaged_examples.cache_clear()


def test_the_thresholds_are_the_probes_choice() -> None:
    # between the full graph's last right decision and its first wrong one (0.889 / 0.862, 0.798 / 0.759)
    assert 0.862 < examples_module.EXAMPLE_MERGE <= 0.889
    assert 0.759 < examples_module.EXAMPLE_NEW <= 0.798


def _record(score: float, before: str, after: str) -> Record:
    return Record(
        "dev2",
        "full",
        f"i{score}",
        "n",
        "T",
        False,
        True,
        before,
        gate="not_separated",
        top="T",
        top_verdict=after,
        p=[score, 0.0],
    )


def test_the_probe_stops_before_the_first_harmful_decision() -> None:
    change = Change("lift", "", lambda r: r.verdict == "queued", "top", lambda r: r.p[0])
    train = [
        _record(0.99, "queued", "correct"),
        _record(0.95, "queued", "correct"),
        _record(0.90, "queued", "false"),
        _record(0.80, "queued", "correct"),
    ]
    fitted = fit(change, train)
    assert (fitted.threshold, fitted.gained) == (0.95, 2)
    # a harmful decision first: nothing is lifted
    assert fit(change, [_record(0.99, "queued", "false"), *train[:2]]).gained == 0


def test_probe_records_round_trip() -> None:
    rec = _record(0.5, "queued", "correct")
    assert Record(**json.loads(json.dumps(rec.__dict__))) == rec
    assert np.isfinite(rec.p[0])


def test_packaged_vectors_cover_the_examples(embedder: Embedder) -> None:
    from search.relabel.packaged_vectors import example_texts, read_packaged_vectors

    packaged = read_packaged_vectors(embedder)
    missing = [t for t in example_texts() if t not in packaged]
    assert missing == [], (
        f"{len(missing)} example texts missing: run `python -m search.relabel.packaged_vectors`"
    )


def test_a_benchmarks_own_cache_takes_the_packaged_example_vectors(
    embedder: Embedder, taxonomy: Taxonomy
) -> None:
    # a cache that did not start from the packaged vectors embeds no example (none is in the cache after)
    vectors = TextVectors(embedder)
    _, packaged = read_examples()
    bank = ExampleBank(packaged, vectors, taxonomy)
    assert len(bank.examples) == len(packaged) and bank.matrix.shape[0] == len(packaged)
    assert np.allclose(np.linalg.norm(bank.matrix, axis=1), 1.0, atol=1e-4)
