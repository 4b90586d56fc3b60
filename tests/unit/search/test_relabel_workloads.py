"""Workload words (issue 28, session 21): "Persistent GEMM" says of a matmul what the label "persistent
kernel" says of a kernel. `label_key` and `bag_key` drop the names of what a kernel computes
(`WORKLOADS`) as they drop "kernel"; the scorer's word features keep them."""

from __future__ import annotations

import pytest

from search.relabel.relabeler import RelabelPolicy, StepInput, name_problem
from search.relabel.taxonomy import Taxonomy, bag_key, content_tokens, label_key
from tests.unit.search.test_relabel_precision import _full_graph


@pytest.mark.parametrize(
    ("name", "label"),
    [
        ("Persistent GEMM", "persistent kernel"),
        ("persistent matmuls", "persistent kernel"),
        ("Fused RMSNorm", "fused kernel"),
        ("fused softmax kernel", "fused kernel"),
    ],
)
def test_a_workload_word_keys_like_kernel(name: str, label: str) -> None:
    assert label_key(name) == label_key(label)
    assert bag_key(name) == bag_key(label)


def test_the_word_features_keep_the_workload() -> None:
    assert "gemm" in content_tokens("Grouped GEMM")


@pytest.mark.parametrize(
    ("name", "technique"),
    [
        ("Persistent GEMM", "Persistent threads"),
        ("Fused RMSNorm", "Kernel fusion"),
    ],
)
def test_a_technique_of_a_workload_merges(
    policy: RelabelPolicy, taxonomy: Taxonomy, name: str, technique: str
) -> None:
    choice = policy.choose(StepInput(name), policy.index(_full_graph(taxonomy)))
    assert (choice.outcome, choice.technique, choice.decided_by) == ("merge", technique, "alias")


def test_a_workload_is_no_licence_to_merge_the_other_word(policy: RelabelPolicy, taxonomy: Taxonomy) -> None:
    """A batched "Grouped GEMM" shares "group" with cooperative groups: the scorer still reads
    the workload as a word of its own, so the one other word does not merge it."""
    choice = policy.choose(StepInput("Grouped GEMM"), policy.index(_full_graph(taxonomy)))
    assert choice.outcome != "merge", choice.technique


@pytest.mark.parametrize("name", ["GEMM", "softmax kernel"])
def test_a_workload_alone_names_no_technique(name: str) -> None:
    assert name_problem(name) == "the name has only filler words and the name of a workload"
