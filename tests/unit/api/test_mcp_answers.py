"""The MCP `next_techniques` answer: ranked, one line of evidence each, code only on request, in budget."""

from __future__ import annotations

import json

import pytest

from api.retrieve.mcp import SuccessorEvidence, concise_successors
from graphdb.models import TransitionStats
from search.protocols import RetrievedExample


def _example(owner: str, i: int, code_chars: int) -> RetrievedExample:
    body = ('  out[i] = "quoted"\\t' * (code_chars // 20 + 1))[:code_chars]
    return RetrievedExample(
        id=f"{owner.replace(' ', '_')}_ex{i}",
        task_id=f"task_{i}",
        source_technique="Parallelization",
        target_technique="t",
        think="why",
        detail="what",
        code_before="for (int i = 0; i < n; ++i) {\n" + body + "\n}",
        code_after="__global__ void k() {\n" + body + "\n}",
        speedup=1.5,
        similarity=0.9 - i / 100,
    )


def _successor(
    name: str, verified: int, median: float | None, examples: int, code_chars: int
) -> SuccessorEvidence:
    stats = TransitionStats(
        n_examples=verified + 2,
        n_verified=verified,
        success_rate=0.5,
        mean_speedup=median,
        median_speedup=median,
    )
    return SuccessorEvidence(name, stats, [_example(name, i, code_chars) for i in range(examples)])


def _found(n: int = 12, examples: int = 3, code_chars: int = 3000) -> list[SuccessorEvidence]:
    return [
        _successor(
            f"technique {i:02d}",
            verified=i % 4,
            median=1.0 + (i % 3),
            examples=examples,
            code_chars=code_chars,
        )
        for i in range(n)
    ]


def _size(answer: dict[str, object]) -> int:
    return len(json.dumps(answer, ensure_ascii=False, separators=(",", ":")))


def test_ranked_best_supported_first_without_code() -> None:
    answer = concise_successors("Parallelization", _found(n=5))
    stats = [(s["stats"]["n_verified"], s["stats"]["median_speedup"]) for s in answer["successors"]]
    assert stats == sorted(stats, key=lambda v: (-v[0], -(v[1] or 0)))
    assert [s["rank"] for s in answer["successors"]] == [1, 2, 3, 4, 5]
    first = answer["successors"][0]
    assert first["technique"] == "technique 03"  # 3 verified (the most), median 1x
    assert first["evidence"] == "5 examples (3 verified), success rate 50%, median speedup 1x"
    assert all(
        "code_before" not in e and "code_after" not in e for s in answer["successors"] for e in s["examples"]
    )
    assert "include_code" in answer["code"]


@pytest.mark.parametrize("max_chars", [2_000, 4_000, 10_000, 40_000])
def test_code_is_cut_to_the_budget_and_the_cut_is_named(max_chars: int) -> None:
    answer = concise_successors("Parallelization", _found(), include_code=True, max_chars=max_chars)
    assert _size(answer) <= max_chars
    kept = [e for s in answer["successors"] for e in s["examples"]]
    assert kept and all("code_after" in e for e in kept)
    assert answer["truncated"].endswith("code fields cut to fit max_chars (each says how much)")
    cut = [(e, f) for e in kept for f in ("code_before", "code_after") if "more characters" in e[f]]
    assert cut and all(f"regraph://examples/{e['id']}" in e[f] for e, f in cut)
    assert len(cut) <= int(answer["truncated"].split()[0])


def test_a_large_budget_keeps_all_code_uncut() -> None:
    answer = concise_successors(
        "Parallelization", _found(n=2, examples=1, code_chars=200), include_code=True, max_chars=100_000
    )
    assert "truncated" not in answer and "omitted" not in answer
    assert answer["successors"][0]["examples"][0]["code_after"].endswith("\n}")


def test_too_many_successors_for_the_budget_leave_out_the_lowest_ranked() -> None:
    answer = concise_successors("Parallelization", _found(n=60, examples=3, code_chars=10), max_chars=2_000)
    assert _size(answer) <= 2_000
    kept = [s["technique"] for s in answer["successors"]]
    omitted = answer["omitted"]
    assert len(kept) + len(omitted) == 60 and not set(kept) & set(omitted)
    full = [
        s["technique"]
        for s in concise_successors(
            "Parallelization", _found(n=60, examples=3, code_chars=10), max_chars=10**6
        )["successors"]
    ]
    assert full[: len(kept)] == kept  # the best ranked are the ones kept


def test_a_budget_too_small_for_any_code_says_so_and_keeps_the_ranking() -> None:
    answer = concise_successors(
        "Parallelization", _found(n=3, examples=2), include_code=True, max_chars=1_000
    )
    assert _size(answer) <= 1_000
    assert "too small for code" in answer["code"] and answer["successors"][0]["rank"] == 1
    assert all("code_after" not in e for s in answer["successors"] for e in s["examples"])
