"""Shorthands in the plural and adverbs meet their words (issue 28, session 19): the word features and
the separation gate read "tiles" as "tile" and "atomically" as "atomic"; the text an embedding reads
is not rewritten for it."""

from __future__ import annotations

import pytest

from search.relabel.scoring import StepText
from search.relabel.taxonomy import concept_tokens, expand_abbreviations, label_key, shorthand


@pytest.mark.parametrize(
    ("plural", "singular"),
    [("tiles", "tile"), ("LUTs", "LUT"), ("SMs", "SM"), ("vecs", "vec"), ("consts", "const")],
)
def test_a_plural_shorthand_meets_its_singular(plural: str, singular: str) -> None:
    assert concept_tokens(plural) == concept_tokens(singular)
    assert concept_tokens(f"shared memory {plural}") == concept_tokens(f"shared memory {singular}")


def test_tiles_tiled_and_tiling_meet() -> None:
    assert label_key("shared memory tiles") == label_key("shared memory tiling")
    assert concept_tokens("tiles") == concept_tokens("tiled") == concept_tokens("tiling")


def test_plurals_only_for_word_matching() -> None:
    assert shorthand("luts") is None
    assert shorthand("luts", plurals=True) == shorthand("lut") == "lookup table"
    # the name an embedding reads keeps its plural words
    assert StepText("Double buffering of shared tiles").embedded_name() == "Double buffering of shared tiles"
    assert expand_abbreviations("LUTs in smem") == "LUTs in shared memory"
    # a word that merely ends in s is no shorthand's plural
    assert shorthand("bus", plurals=True) is None


@pytest.mark.parametrize(
    ("adverb", "word"),
    [
        ("atomically", "atomic"),
        ("dynamically", "dynamic"),
        ("statically", "static"),
        ("asynchronously", "asynchronous"),
        ("synchronously", "synchronous"),
    ],
)
def test_an_adverb_meets_its_adjective(adverb: str, word: str) -> None:
    assert concept_tokens(adverb) == concept_tokens(word)


def test_short_ly_words_are_left_alone() -> None:
    # "-ically" and "-ously" only: "early" or "assembly" keep their letters
    assert concept_tokens("early assembly") == ["early", "assembly"]
