"""The benchmark metrics against values worked out by hand (the arithmetic is in each test)."""

from __future__ import annotations

import math

import pytest

from bench.metrics import (
    MetricsError,
    SampleOutcome,
    TeacherStepOutcome,
    expected_best_of_k,
    geometric_mean,
    pareval_speedup_at_k,
    pass_at_k,
    summarize,
    summarize_by_tier,
    summarize_teacher_by_tier,
    tier_for_steps,
)


@pytest.mark.parametrize(
    ("n", "c", "k", "expected"),
    [
        (5, 2, 1, 1 - 3 / 5),  # 1 - C(3,1)/C(5,1)
        (5, 2, 2, 1 - 3 / 10),  # 1 - C(3,2)/C(5,2)
        (5, 2, 4, 1.0),  # only 3 failures: any 4 samples include a correct one
        (3, 1, 3, 1.0),  # n = k, one correct
        (3, 0, 3, 0.0),  # n = k, none correct
        (4, 0, 1, 0.0),  # c = 0
        (4, 4, 2, 1.0),  # c = n
        (10, 3, 5, 1 - 21 / 252),  # 1 - C(7,5)/C(10,5)
    ],
)
def test_pass_at_k_matches_hand_values(n: int, c: int, k: int, expected: float) -> None:
    assert pass_at_k(n, c, k) == pytest.approx(expected)


@pytest.mark.parametrize(("n", "c", "k"), [(3, 1, 4), (3, 4, 1), (3, 1, 0), (0, 0, 1)])
def test_pass_at_k_rejects_undefined_cases(n: int, c: int, k: int) -> None:
    with pytest.raises(MetricsError):
        pass_at_k(n, c, k)


def test_expected_best_of_k_enumerates_draws() -> None:
    # Draws of 2 from {0, 2, 4}: {0,2}->2, {0,4}->4, {2,4}->4, mean 10/3.
    assert expected_best_of_k([4.0, 0.0, 2.0], 2) == pytest.approx(10 / 3)
    assert expected_best_of_k([4.0, 0.0, 2.0], 1) == pytest.approx(2.0)  # k=1: the mean
    assert expected_best_of_k([4.0, 0.0, 2.0], 3) == pytest.approx(4.0)  # k=n: the maximum
    assert expected_best_of_k([0.0, 0.0], 2) == 0.0  # c=0: nothing correct, speedup 0
    with pytest.raises(MetricsError):
        expected_best_of_k([1.0], 2)
    with pytest.raises(MetricsError):
        expected_best_of_k([-1.0, 2.0], 1)


def test_tiers_follow_trajectory_length() -> None:
    assert [tier_for_steps(n) for n in (1, 2, 3, 5, 6, 9)] == [
        "easy",
        "easy",
        "medium",
        "medium",
        "hard",
        "hard",
    ]
    with pytest.raises(MetricsError):
        tier_for_steps(0)


def test_geometric_mean() -> None:
    assert geometric_mean([2.0, 8.0]) == pytest.approx(4.0)
    assert geometric_mean([]) is None
    with pytest.raises(MetricsError):
        geometric_mean([0.0, 1.0])


def _two_tasks() -> list[SampleOutcome]:
    # Task a (easy): correct x2, correct x4, a failure that did not compile.
    # Task b (hard): two failures that compiled, correct x0.5.
    return [
        SampleOutcome(
            task_id="a", tier="easy", compiled=True, correct=True, speedup=2.0, baseline_speedup=1.0
        ),
        SampleOutcome(
            task_id="a", tier="easy", compiled=True, correct=True, speedup=4.0, baseline_speedup=3.0
        ),
        SampleOutcome(task_id="a", tier="easy", compiled=False, correct=False),
        SampleOutcome(task_id="b", tier="hard", compiled=True, correct=False),
        SampleOutcome(task_id="b", tier="hard", compiled=True, correct=False),
        SampleOutcome(
            task_id="b", tier="hard", compiled=True, correct=True, speedup=0.5, baseline_speedup=0.2
        ),
    ]


def test_summary_of_two_tasks_matches_hand_values() -> None:
    s = summarize(_two_tasks(), ks=(1, 2, 3), ps=(0, 1, 2, 5))
    assert s.tasks == 2 and s.samples == 6 and s.samples_per_task == 3
    assert s.runtime_measured and s.unmeasured_samples == 0
    assert s.compile_rate == pytest.approx(5 / 6)
    assert s.pass_at_k is not None and s.speedup_at_k is not None and s.fast_p is not None
    # pass@1: a 2/3, b 1/3. pass@2: a 1 - C(1,2)/C(3,2) = 1, b 1 - C(2,2)/C(3,2) = 2/3. pass@3: 1, 1.
    assert s.pass_at_k == pytest.approx({"1": 0.5, "2": 5 / 6, "3": 1.0})
    # speedup@1: a mean(2,4,0) = 2, b mean(0,0,0.5) = 1/6. speedup@3: a 4, b 0.5.
    assert s.speedup_at_k["1"] == pytest.approx((2 + 1 / 6) / 2)
    assert s.speedup_at_k["3"] == pytest.approx((4 + 0.5) / 2)
    # speedup@2 of a: draws {0,2}->2 {0,4}->4 {2,4}->4 = 10/3; of b: {0,0}->0 {0,.5}x2->.5 = 1/3.
    assert s.speedup_at_k["2"] == pytest.approx((10 / 3 + 1 / 3) / 2)
    # fast_p: > p strictly. fast_0: a 2/3, b 1/3. fast_1: a 2/3, b 0. fast_2: a 1/3 (2 is not > 2).
    assert s.fast_p == pytest.approx({"0": 0.5, "1": 1 / 3, "2": 1 / 6, "5": 0.0})
    # Over the naive CUDA version: a has 1.0 and 3.0, b 0.2; fast_1: a 1/3, b 0.
    assert s.fast_p_naive is not None
    assert s.fast_p_naive["1"] == pytest.approx(1 / 6)
    assert s.correct_rate == pytest.approx(0.5)
    # Means over correct samples only: 2, 4, 0.5.
    assert s.speedup_arithmetic_mean == pytest.approx(6.5 / 3)
    assert s.speedup_geometric_mean == pytest.approx(4.0 ** (1 / 3))
    assert s.speedup_median == pytest.approx(2.0)


def test_k_above_the_sample_count_is_left_out() -> None:
    s = summarize(_two_tasks(), ks=(1, 5))
    assert s.pass_at_k is not None and set(s.pass_at_k) == {"1"}


def test_summary_by_tier_splits_tasks() -> None:
    by_tier = summarize_by_tier(_two_tasks(), ks=(1,))
    assert set(by_tier) == {"easy", "hard", "overall"}
    assert by_tier["easy"].pass_at_k == pytest.approx({"1": 2 / 3})
    assert by_tier["hard"].pass_at_k == pytest.approx({"1": 1 / 3})
    assert by_tier["hard"].speedup_geometric_mean == pytest.approx(0.5)
    assert by_tier["overall"].tasks == 2


def test_unmeasured_samples_suppress_runtime_metrics() -> None:
    outcomes = [
        SampleOutcome(task_id="a", tier="easy", compiled=True, correct=None),
        SampleOutcome(task_id="a", tier="easy", compiled=False, correct=False),
    ]
    s = summarize(outcomes, ks=(1, 2))
    assert s.compile_rate == 0.5
    assert not s.runtime_measured and s.unmeasured_samples == 1
    assert s.pass_at_k is None and s.speedup_at_k is None and s.fast_p is None
    assert s.correct_rate is None and s.speedup_geometric_mean is None


def test_correct_sample_without_speedup_is_an_error() -> None:
    with pytest.raises(MetricsError):
        summarize([SampleOutcome(task_id="a", tier="easy", compiled=True, correct=True)])


def test_empty_group() -> None:
    s = summarize([])
    assert s.tasks == 0 and s.compile_rate is None and not s.runtime_measured


def test_teacher_summary_matches_hand_values() -> None:
    steps = [
        TeacherStepOutcome(
            task_id="x", tier="easy", step=1, method="P", compiled=True, correct=True, speedup=3.0
        ),
        TeacherStepOutcome(
            task_id="x", tier="easy", step=2, method="T", compiled=True, correct=True, speedup=6.0
        ),
        TeacherStepOutcome(
            task_id="y", tier="easy", step=1, method="P", compiled=True, correct=True, speedup=2.0
        ),
        TeacherStepOutcome(task_id="y", tier="easy", step=2, method="T", compiled=False, correct=False),
    ]
    s = summarize_teacher_by_tier(steps)["easy"]
    assert s.tasks == 2 and s.steps == 4
    assert s.compile_rate == pytest.approx(3 / 4)
    assert s.step_pass_rate == pytest.approx(3 / 4)
    assert s.final_pass_rate == pytest.approx(1 / 2)
    assert s.final_speedup_median == pytest.approx(6.0)
    assert s.final_speedup_geometric_mean == pytest.approx(6.0)
    # Best correct step per task: x 6, y 2.
    assert s.best_speedup_median == pytest.approx(4.0)
    assert s.best_speedup_geometric_mean == pytest.approx(math.sqrt(12))


def test_teacher_summary_without_runtime() -> None:
    steps = [TeacherStepOutcome(task_id="x", tier="hard", step=1, method="P", compiled=True, correct=None)]
    s = summarize_teacher_by_tier(steps)["overall"]
    assert not s.runtime_measured and s.compile_rate == 1.0 and s.final_pass_rate is None


def _issue_example() -> list[SampleOutcome]:
    # A = [fail, 4x], B = [2x, 2x]
    return [
        SampleOutcome(task_id="A", tier="easy", compiled=True, correct=False),
        SampleOutcome(task_id="A", tier="easy", compiled=True, correct=True, speedup=4.0),
        SampleOutcome(task_id="B", tier="easy", compiled=True, correct=True, speedup=2.0),
        SampleOutcome(task_id="B", tier="easy", compiled=True, correct=True, speedup=2.0),
    ]


def test_both_speedup_at_k_conventions_on_the_issue_example() -> None:
    s = summarize(_issue_example(), ks=(1, 2))
    assert s.speedup_at_k is not None and s.speedup_at_k_pareval is not None
    # Ours, k=1: A mean(0, 4) = 2, B mean(2, 2) = 2 -> 2.0. k=2: A max = 4, B 2 -> 3.0.
    assert s.speedup_at_k == pytest.approx({"1": 2.0, "2": 3.0})
    # ParEval's code, k=1: A only its correct 4 -> 4, B 2 -> 3.0. k=2: A has m=1 < k: the sum, 4;
    # B m=2: j=1 weight C'(0,1)=1, j=2 weight C(1,1)=1, over C(2,2)=1 -> 2 + 2 = 4 -> 4.0.
    assert s.speedup_at_k_pareval == pytest.approx({"1": 3.0, "2": 4.0})


@pytest.mark.parametrize(
    ("speedups", "k", "expected"),
    [
        ([4.0], 1, 4.0),
        ([2.0, 2.0], 1, 2.0),
        ([1.0, 2.0, 4.0], 1, 7 / 3),  # k=1: the mean of the correct samples
        # Descending 4, 2, 1: C'(0,1)=1, C(1,1)=1, C(2,1)=2 over C(3,2)=3: (4 + 2 + 2*1) / 3.
        ([1.0, 2.0, 4.0], 2, 8 / 3),
        # k=3=m: C'(0,2)=1, C'(1,2)=1, C(2,2)=1 over 1: the sum, 7.
        ([1.0, 2.0, 4.0], 3, 7.0),
        ([4.0], 3, 4.0),  # m < k: the sum of the correct speedups
        ([3.0, 5.0], 4, 8.0),
    ],
)
def test_pareval_speedup_at_k_matches_hand_values(speedups: list[float], k: int, expected: float) -> None:
    assert pareval_speedup_at_k(speedups, k) == pytest.approx(expected)


def test_pareval_speedup_at_k_leaves_out_tasks_without_a_correct_sample() -> None:
    assert pareval_speedup_at_k([], 1) is None
    outcomes = [
        *_issue_example(),
        SampleOutcome(task_id="C", tier="easy", compiled=False, correct=False),
        SampleOutcome(task_id="C", tier="easy", compiled=True, correct=False),
    ]
    s = summarize(outcomes, ks=(1,))
    # Ours counts C as 0 over three tasks; ParEval's code averages A and B only.
    assert s.speedup_at_k == pytest.approx({"1": 4.0 / 3})
    assert s.speedup_at_k_pareval == pytest.approx({"1": 3.0})
    nothing = summarize(outcomes[-2:], ks=(1,))
    assert nothing.speedup_at_k == pytest.approx({"1": 0.0}) and nothing.speedup_at_k_pareval is None
    with pytest.raises(MetricsError):
        pareval_speedup_at_k([0.0], 1)
