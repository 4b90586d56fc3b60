"""Session 24 (issue 28): a sixth development set (dev6) and a glossary of GPU jargon read before a name
is scored."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from bench.probes.relabel_bench import OUTSIDE_DATA, load_outside_items
from search.relabel import glossary
from search.relabel.relabeler import RelabelPolicy, StepInput
from search.relabel.scoring import CandidateIndex
from search.relabel.taxonomy import Taxonomy, content_tokens
from tests.unit.search.test_relabel_precision import _check_development_set

DEV6_DATA = OUTSIDE_DATA.with_name("dev6.jsonl")


def test_dev6_set_shares_nothing_with_the_outside_set_nor_the_other_development_sets(
    taxonomy: Taxonomy,
) -> None:
    """The sixth development set (`dev6.jsonl`, session 24: the GPU Programming 101 course, ENCCS' GPU
    programming lesson, the Carpentries GPU programming lesson): the outside set's format, no taxonomy
    label word for word, and no item of the outside set, the other development sets or the general set
    (compared by program)."""
    items = load_outside_items(DEV6_DATA)
    assert len(items) >= 60
    _check_development_set(items, taxonomy, 6, least_new=15, least_merge=20)


# --- the glossary (`search/relabel/glossary.py`) ---------------------------------------------------------


def _words(text: str) -> list[str]:
    return re.findall(r"[a-z0-9]+", text.lower())


_STOP = frozenset({"a", "an", "the", "of", "to", "for", "with", "in", "on", "and", "or", "by", "via", "vs"})


def _copied_phrases(glossary_text: str, names: list[str], own_words: str) -> list[str]:
    """The names of two words, and the phrases of three or more words (not starting or ending with a
    function word) of any name, that the glossary's text holds verbatim (words compared lower-case,
    punctuation ignored); a phrase the taxonomy's own labels or descriptions also hold is the team's
    wording, not a copy. A one-word name is a word, not a phrase."""
    text = f" {' '.join(_words(glossary_text))} "
    own = f" {' '.join(_words(own_words))} "
    copied = []
    for name in names:
        words = _words(name)
        if len(words) == 2 and f" {' '.join(words)} " in text and f" {' '.join(words)} " not in own:
            copied.append(name)
            continue
        for n in range(3, len(words) + 1):
            for start in range(len(words) - n + 1):
                run = words[start : start + n]
                phrase = f" {' '.join(run)} "
                if run[0] not in _STOP and run[-1] not in _STOP and phrase in text and phrase not in own:
                    copied.append(name)
                    break
            else:
                continue
            break
    return copied


def _taxonomy_words(taxonomy: Taxonomy) -> str:
    return " | ".join(f"{' | '.join(t.labels)} | {t.description}" for t in taxonomy.techniques)


def test_the_glossary_copies_no_outside_name_nor_a_phrase_of_one(taxonomy: Taxonomy) -> None:
    """The glossary is written from general knowledge: no outside-set name, and no phrase of three or
    more of its words, appears in the glossary's source (patterns, plain words and comments), unless the
    taxonomy itself writes that phrase (compared by program; the outside items are not printed)."""
    names = [json.loads(line)["name"] for line in OUTSIDE_DATA.read_text().splitlines() if line]
    source = Path(glossary.__file__).read_text()
    copied = _copied_phrases(source, names, _taxonomy_words(taxonomy))
    assert len(copied) == 0, f"{len(copied)} outside name(s) or phrases copied into the glossary"


def test_the_copy_check_sees_a_copied_name() -> None:
    """The check itself: a name, or three of its words in a row, found in the text is a copy."""
    names = ["Zorbified inner loop scheduling", "Qux memory"]
    assert _copied_phrases("# we zorbified inner loop here", names, "") == ["Zorbified inner loop scheduling"]
    assert _copied_phrases("(r'qux memory', 'plain')", names, "") == ["Qux memory"]
    assert _copied_phrases("inner loop", names, "") == []
    assert _copied_phrases("of inner loop", ["Stages of inner loop"], "") == []
    assert _copied_phrases("zorbified inner loop", names, "zorbified inner loop") == []


@pytest.mark.parametrize(
    ("jargon", "plain"),
    [
        ("Hoisting the bounds arithmetic", "loop invariant code motion the bounds arithmetic"),
        ("LICM pass", "loop invariant code motion pass"),
        ("Cooperatively fetching tiles", "cooperative loading of shared memory tiles tiles"),
        ("Array packing", "array data layout transformation"),
        ("mapped memory", "mapped host memory zero copy"),
        ("C preprocessor", "C compile time preprocessor"),
        ("multi-dimensional grid", "multidimensional grid"),
        ("Brent-Kung adder", "parallel prefix scan adder"),
        ("long-lived blocks", "persistent blocks"),
        ("memoized results", "memoization lookup table results"),
        ("call cuBLAS", "call cuBLAS vendor library"),
        ("cub::WarpReduce", "cub::WarpReduce"),
        ("distributed-memory machines", "multi node message passing memory machines"),
        ("distributed shared memory", "distributed shared memory"),
        ("Host- and device-side", "Host-side and device-side"),
    ],
)
def test_the_glossary_writes_jargon_in_plain_words(jargon: str, plain: str) -> None:
    assert glossary.explain_jargon(jargon) == plain


@pytest.mark.parametrize(
    ("name", "technique"),
    [
        ("Hoisting the bounds arithmetic out of the inner loop", "Loop-invariant code motion"),
        ("LICM on the index math", "Loop-invariant code motion"),
        ("Array packing before the GEMM", "Data layout transformation"),
        ("Mapped memory for the small result buffer", "Zero-copy host memory"),
        ("Brent-Kung scan of the block", "Parallel scan"),
    ],
)
def test_jargon_names_merge_into_their_technique(
    policy: RelabelPolicy, name: str, technique: str, full_index: CandidateIndex
) -> None:
    """Names in the trade's jargon (none from a benchmark set) merge once the glossary has explained it;
    without it each was new or queued."""
    choice = policy.choose(StepInput(name), full_index)
    assert (choice.outcome, choice.technique) == ("merge", technique), choice.flags


def test_distributed_memory_is_not_a_thread_block_cluster(
    policy: RelabelPolicy, full_index: CandidateIndex
) -> None:
    """A distributed-memory (MPI) heading, its hyphen suspended, is not CUDA's distributed shared memory:
    never merged into thread block clusters (it was, at p 0.97, before the glossary)."""
    for name in ("Distributed- and shared-memory parallelism", "Distributed-memory parallelism with MPI"):
        choice = policy.choose(StepInput(name), full_index)
        assert choice.outcome != "merge", (name, choice.technique)


def test_fuse_and_fusion_meet_and_approach_is_filler() -> None:
    """(session 24) "fuse", "fused", "fusing" and "fusion" are one stem; "approach" is a heading's filler,
    like "technique" ("strategy" is not)."""
    assert content_tokens("Fuse kernels") == content_tokens("Fused kernels") == ["fusion", "kernel"]
    assert content_tokens("Fusing passes") == content_tokens("Fusion of passes")
    assert (
        content_tokens("Tiling") == content_tokens("tiling approach") == content_tokens("Tiling approaches")
    )
    assert content_tokens("Tiling strategy") != content_tokens("Tiling")
