"""The packaged technique taxonomy: its shape, the label normalisation and the settings that choose it."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from search.relabel.evidence import SIGNALS
from search.relabel.taxonomy import (
    DEFAULT_TAXONOMY_PATH,
    TaxonomyError,
    bag_key,
    concept_tokens,
    content_tokens,
    default_taxonomy,
    label_key,
    load_taxonomy,
    parse_taxonomy,
    taxonomy_setting,
)


def test_the_packaged_taxonomy_is_complete() -> None:
    taxonomy = default_taxonomy()
    assert 40 <= len(taxonomy.techniques) <= 80
    for technique in taxonomy.techniques:
        assert technique.description.strip(), technique.name
        assert technique.aliases, technique.name
        assert set(technique.evidence) <= set(SIGNALS), technique.name
    # The names the seed trajectories use are all known (the seed graph is rebuilt on the taxonomy).
    for name in ("Parallelization", "Shared memory tiling", "Loop unrolling", "Read-only cache (__ldg)"):
        assert taxonomy.get(name).name == name


@pytest.mark.parametrize(
    ("label", "technique"),
    [
        ("Unrolling loops", "Loop unrolling"),
        ("apply loop unrolling", "Loop unrolling"),
        ("Shared-Memory  Tiling", "Shared memory tiling"),
        ("smem tiling", "Shared memory tiling"),
        ("use const mem", "Constant memory"),
        ("Memory access coalescing", "Memory coalescing"),
        ("Warp shuffle reduction", "Warp-level shuffle reduction"),
        # Verbs of doing and small counts are filler; word order is free where no "per" binds it.
        ("Switch to 4 CUDA streams", "Streams and copy-compute overlap"),
        ("Restructure the algorithm", "Algorithm restructuring"),
    ],
)
def test_lookup_ignores_case_punctuation_fillers_and_shorthands(label: str, technique: str) -> None:
    found = default_taxonomy().lookup(label)
    assert found is not None and found.name == technique


def test_near_names_stay_apart() -> None:
    taxonomy = default_taxonomy()
    assert taxonomy.lookup("Loop tiling") is not None
    assert taxonomy.lookup("Loop tiling").name == "Loop tiling"  # type: ignore[union-attr]
    assert taxonomy.lookup("Register tiling").name == "Register tiling"  # type: ignore[union-attr]
    assert taxonomy.lookup("Tiling of everything") is None
    assert label_key("Loop tiling without shared memory") == label_key("Loop tiling")
    # "per" binds the word after it: outputs per thread (coarsening) is not a thread per output.
    assert label_key("Several outputs per thread") != label_key("thread per output")
    assert bag_key("Several outputs per thread") != bag_key("thread per output")
    found = taxonomy.lookup("outputs per thread")
    assert found is None or found.name != "Parallelization"


def test_normalisation_of_informal_words() -> None:
    assert label_key("Branchless rewrite") == label_key("branch rewrite")
    assert label_key("coalesced reads") == label_key("coalesce reads")
    assert label_key("play with block dims") == label_key("block dimensions")
    assert label_key("#pragma unroll x8") == label_key("pragma unroll")
    # Bigger numbers say something ("128-bit loads"), small counts do not ("4 streams").
    assert label_key("128-bit loads") != label_key("loads")


def _document(**technique: object) -> dict[str, object]:
    base = {"name": "Thing", "description": "d", "aliases": ["thingy"], "evidence": []}
    return {"format": "regraph.taxonomy/v1", "version": "t", "techniques": [{**base, **technique}]}


def test_parse_refuses_unknown_signals_and_shared_labels() -> None:
    with pytest.raises(TaxonomyError, match="unknown evidence signals"):
        parse_taxonomy(_document(evidence=["no_such_signal"]))
    document = _document()
    document["techniques"] = [  # type: ignore[index]
        {"name": "A thing", "description": "d", "aliases": ["the same"]},
        {"name": "Other", "description": "d", "aliases": ["same"]},
    ]
    with pytest.raises(TaxonomyError, match="normalises like"):
        parse_taxonomy(document)
    with pytest.raises(TaxonomyError, match="format"):
        parse_taxonomy({**_document(), "format": "other/v9"})


def test_setting_chooses_packaged_none_or_a_file(tmp_path: Path) -> None:
    assert taxonomy_setting("") is default_taxonomy()
    assert taxonomy_setting("none") is None
    own = tmp_path / "own.json"
    own.write_text(json.dumps(_document()))
    loaded = taxonomy_setting(str(own))
    assert loaded is not None and loaded.names == ["Thing"]
    with pytest.raises(TaxonomyError, match="cannot read"):
        load_taxonomy(tmp_path / "missing.json")
    assert DEFAULT_TAXONOMY_PATH.is_file()


@pytest.mark.parametrize(
    ("first", "second"),
    [
        ("copies", "copy"),
        ("copied", "copy"),
        ("libraries", "library"),
        ("splitting", "split"),
        ("padded", "pad"),
        ("overlapping", "overlap"),
        ("access", "accesses"),
        # a verb and its noun meet ("-ate"/"-ation", "-ize"/"-ization")
        ("eliminate", "elimination"),
        ("eliminating", "elimination"),
        ("aggregated", "aggregation"),
        ("vectorize", "vectorization"),
        ("vectorized", "vectorization"),
        ("parallelize", "parallelization"),
        ("privatize", "privatization"),
        ("private", "privatization"),
        ("separate", "separation"),
        ("minimise", "minimization"),
        ("repeat", "repeated"),
    ],
)
def test_stemming_is_consistent(first: str, second: str) -> None:
    assert content_tokens(first) == content_tokens(second)


def test_stemming_keeps_double_letters_of_the_root() -> None:
    assert content_tokens("spilled") == content_tokens("spill") == ["spill"]


def test_an_ate_root_keeps_what_is_its_own() -> None:
    # "repeat" is not an "-ate" verb; "state" and "create" are too short to lose their "at"
    assert content_tokens("repeated")[0].startswith("repeat")
    assert content_tokens("states") == ["stat"] and content_tokens("creating") == ["creat"]


def test_words_of_one_idea_are_one_concept_but_labels_stay_apart() -> None:
    assert concept_tokens("Minimizing copies between CPU and GPU") == concept_tokens(
        "minimize transfers between host and GPU"
    )
    assert concept_tokens("Combining kernels") == concept_tokens("fused kernels")
    # CUDA's barrier intrinsics are synchronization; reworking an algorithm restructures it
    assert concept_tokens("fewer __syncthreads") == concept_tokens("fewer synchronizations") == ["sync"]
    assert concept_tokens("Rework the algorithm") == concept_tokens("algorithm restructuring")[::-1]
    # the labels themselves are not made equal: only the scorer's word features read concepts
    assert label_key("asynchronous copy") != label_key("asynchronous transfers")
