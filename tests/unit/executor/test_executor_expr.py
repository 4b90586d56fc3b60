import pytest

from executor.errors import ExpressionError
from executor.expr import evaluate, expression_names


@pytest.mark.parametrize(
    ("expr", "params", "expected"),
    [
        ("n", {"n": 7}, 7),
        ("n*m", {"n": 3, "m": 5}, 15),
        ("(n+255)/256", {"n": 1000}, 4),  # integer division, as in C
        ("n/2", {"n": 9}, 4),
        ("-7/2", {}, -3),  # C truncates toward zero
        ("n//2 + n%3", {"n": 10}, 6),
        ("2**10", {}, 1024),
        ("2.5", {}, 2.5),
        ("1.0/4", {}, 0.25),
        ("max(1, n-20)", {"n": 5}, 1),
        ("min(n, m) * 2", {"n": 5, "m": 4}, 8),
    ],
)
def test_evaluates_whitelisted_expressions(expr: str, params: dict[str, int], expected: float) -> None:
    assert evaluate(expr, params) == expected


@pytest.mark.parametrize(
    "expr",
    [
        "__import__('os')",
        "n.bit_length()",
        "[1,2]",
        "lambda: 1",
        "n if n else 1",
        "open('x')",
        "2**1000",
        "1/0",
    ],
)
def test_rejects_anything_else(expr: str) -> None:
    with pytest.raises(ExpressionError):
        evaluate(expr, {"n": 3})


def test_unknown_name_is_reported() -> None:
    with pytest.raises(ExpressionError, match="unknown name 'k'"):
        evaluate("n*k", {"n": 2})


def test_names_are_collected_without_function_names() -> None:
    assert expression_names("max(n, m*2) + k") == {"n", "m", "k"}


def test_huge_results_are_refused() -> None:
    with pytest.raises(ExpressionError, match="beyond"):
        evaluate("n*n*n", {"n": 2**30})
