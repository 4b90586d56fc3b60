"""Workload words (issue 28, session 21): "Persistent GEMM" says of a matmul what the label "persistent
kernel" says of a kernel. A name's `workload_key` (its `label_key` without `WORKLOADS`) meets the labels
that say a technique of "the kernel" (`kernel_keys`), only where the technique's words are its own; the
scorer's word features keep the workload as a word."""

from __future__ import annotations

import pytest

from search.relabel.relabeler import RelabelPolicy, StepInput, name_problem
from search.relabel.scoring import CandidateIndex
from search.relabel.taxonomy import Taxonomy, content_tokens, kernel_keys, label_key, workload_key


@pytest.mark.parametrize(
    ("name", "label"),
    [
        ("Persistent GEMM", "persistent kernel"),
        ("persistent matmuls", "persistent kernel"),
        ("Templated SpMV", "templated kernel"),
    ],
)
def test_a_workload_name_keys_like_a_label_of_the_kernel(name: str, label: str) -> None:
    assert workload_key(name) == label_key(label)
    assert label_key(name) != label_key(label)


def test_the_word_features_keep_the_workload() -> None:
    assert "gemm" in content_tokens("Grouped GEMM")
    assert workload_key("Grouped GEMM") == "group"
    assert workload_key("Shared memory tiling") is None


def test_kernel_keys_need_the_kernel_and_words_of_one_technique() -> None:
    keys = kernel_keys(
        [
            ("Persistent threads", "persistent kernel"),
            ("Grid sync", "cooperative kernel"),
            ("Tiling", "cooperative tile loading"),
            ("Early exit", "pruning"),
        ]
    )
    # "cooperative" is two techniques' word; "pruning" says no kernel
    assert keys == {"persistent": "Persistent threads"}


@pytest.mark.parametrize(
    ("name", "technique"),
    [
        ("Persistent GEMM", "Persistent threads"),
        ("Templated matmul", "Compile-time specialization"),
    ],
)
def test_a_technique_of_a_workload_merges(
    policy: RelabelPolicy, taxonomy: Taxonomy, name: str, technique: str, full_index: CandidateIndex
) -> None:
    choice = policy.choose(StepInput(name), full_index)
    assert (choice.outcome, choice.technique, choice.decided_by) == ("merge", technique, "alias")
    assert taxonomy.lookup(name) is not None and taxonomy.lookup(name).name == technique  # type: ignore[union-attr]


@pytest.mark.parametrize(
    "name",
    [
        # "cooperative" is also shared memory tiling's ("cooperative tile loading") and "pruning" says no
        # kernel: none of them an alias merge ("Fused GEMM": below)
        "Cooperative GEMM",
        "Pruned GEMM",
        # a batched "Grouped GEMM" shares "group" with cooperative groups: the scorer still reads the
        # workload as a word of its own, so the one other word does not merge it
        "Grouped GEMM",
    ],
)
def test_an_ambiguous_word_before_a_workload_is_no_merge(
    policy: RelabelPolicy, name: str, full_index: CandidateIndex
) -> None:
    choice = policy.choose(StepInput(name), full_index)
    assert choice.outcome != "merge", (choice.technique, choice.decided_by)


def test_a_fused_workload_is_no_alias_merge_and_no_fused_multiply_add(
    policy: RelabelPolicy, full_index: CandidateIndex
) -> None:
    """ "fused" is also fused multiply-add's word, so "Fused GEMM" is no alias merge of "fused kernel"
    (session 21); since session 26 it is a kind of fusion (`CandidateIndex.kind_of`: a workload after
    "fused" says which kind), Kernel fusion, and never fused multiply-add."""
    choice = policy.choose(StepInput("Fused GEMM"), full_index)
    assert choice.decided_by != "alias"
    assert (choice.outcome, choice.technique) == ("merge", "Kernel fusion"), choice.flags


@pytest.mark.parametrize("name", ["GEMM", "softmax kernel"])
def test_a_workload_alone_names_no_technique(name: str) -> None:
    assert name_problem(name) == "the name has only filler words and the name of a workload"
