"""A small, safe evaluator for the size and scalar expressions of `regraph.task/v1`.

Expressions such as ``"n*m"``, ``"(n+255)/256"`` or ``"max(1, n//2)"`` come from task files and from
HTTP requests, so they are parsed with :mod:`ast` and walked over a whitelist; nothing is ever passed
to ``eval``.
"""

from __future__ import annotations

import ast
import math
from collections.abc import Callable, Mapping

from executor.errors import ExpressionError

Number = int | float

# Long expressions and huge powers are the only ways to make this evaluator expensive.
MAX_EXPRESSION_CHARS = 200
MAX_EXPONENT = 64
MAX_MAGNITUDE = 2**62

_FUNCTIONS: dict[str, Callable[..., Number]] = {"min": min, "max": max}


def _parse(expr: str) -> ast.expr:
    if not isinstance(expr, str) or not expr.strip():
        raise ExpressionError(f"expression must be a non-empty string, got {expr!r}")
    if len(expr) > MAX_EXPRESSION_CHARS:
        raise ExpressionError(f"expression longer than {MAX_EXPRESSION_CHARS} characters: {expr[:40]!r}...")
    try:
        tree = ast.parse(expr.strip(), mode="eval")
    except SyntaxError as e:
        raise ExpressionError(f"cannot parse expression {expr!r}: {e.msg}") from e
    return tree.body


def expression_names(expr: str) -> set[str]:
    """Return the parameter names an expression refers to (function names excluded).

    Raises :class:`ExpressionError` if the expression is malformed or uses a construct outside
    the whitelist, so that validation can report it before any evaluation.
    """
    names: set[str] = set()
    _check(_parse(expr), expr, names)
    return names


def _check(node: ast.expr, expr: str, names: set[str]) -> None:
    match node:
        case ast.Constant(value=value) if isinstance(value, int | float) and not isinstance(value, bool):
            return
        case ast.Name(id=name):
            names.add(name)
        case ast.BinOp(left=left, op=op, right=right) if isinstance(
            op, ast.Add | ast.Sub | ast.Mult | ast.Div | ast.FloorDiv | ast.Mod | ast.Pow
        ):
            _check(left, expr, names)
            _check(right, expr, names)
        case ast.UnaryOp(op=op, operand=operand) if isinstance(op, ast.UAdd | ast.USub):
            _check(operand, expr, names)
        case ast.Call(func=ast.Name(id=fname), args=args, keywords=[]) if fname in _FUNCTIONS and args:
            for arg in args:
                _check(arg, expr, names)
        case _:
            raise ExpressionError(f"unsupported construct {ast.dump(node)[:60]} in expression {expr!r}")


def evaluate(expr: str, params: Mapping[str, Number]) -> Number:
    """Evaluate an expression over integer parameters.

    ``/`` between two integers is integer division (the C meaning, which grid expressions such as
    ``(n+255)/256`` rely on); between floats it is true division. Unknown names, division by zero,
    huge exponents and results beyond 2**62 raise :class:`ExpressionError`.
    """
    return _eval(_parse(expr), expr, params)


def _eval(node: ast.expr, expr: str, params: Mapping[str, Number]) -> Number:
    match node:
        case ast.Constant(value=value) if isinstance(value, int | float) and not isinstance(value, bool):
            return value
        case ast.Name(id=name):
            if name not in params:
                raise ExpressionError(f"unknown name {name!r} in expression {expr!r}")
            return params[name]
        case ast.UnaryOp(op=ast.USub(), operand=operand):
            return -_eval(operand, expr, params)
        case ast.UnaryOp(op=ast.UAdd(), operand=operand):
            return _eval(operand, expr, params)
        case ast.Call(func=ast.Name(id=fname), args=args, keywords=[]) if fname in _FUNCTIONS and args:
            return _FUNCTIONS[fname](*(_eval(a, expr, params) for a in args))
        case ast.BinOp(left=left, op=op, right=right):
            return _binop(op, _eval(left, expr, params), _eval(right, expr, params), expr)
        case _:
            raise ExpressionError(f"unsupported construct in expression {expr!r}")


def _binop(op: ast.operator, a: Number, b: Number, expr: str) -> Number:
    both_int = isinstance(a, int) and isinstance(b, int)
    try:
        match op:
            case ast.Add():
                result: Number = a + b
            case ast.Sub():
                result = a - b
            case ast.Mult():
                result = a * b
            case ast.Div():
                # C semantics for integers (truncation toward zero), true division otherwise.
                if both_int:
                    assert isinstance(a, int) and isinstance(b, int)  # narrowed for mypy
                    quotient = abs(a) // abs(b)
                    result = quotient if (a >= 0) == (b > 0) else -quotient
                else:
                    result = a / b
            case ast.FloorDiv():
                result = a // b
            case ast.Mod():
                result = a % b
            case ast.Pow():
                if abs(b) > MAX_EXPONENT:
                    raise ExpressionError(f"exponent {b} too large in expression {expr!r}")
                result = a**b
            case _:
                raise ExpressionError(f"unsupported operator in expression {expr!r}")
    except ZeroDivisionError as e:
        raise ExpressionError(f"division by zero in expression {expr!r}") from e
    if isinstance(result, complex) or (isinstance(result, float) and not math.isfinite(result)):
        raise ExpressionError(f"expression {expr!r} does not give a finite real number")
    if abs(result) > MAX_MAGNITUDE:
        raise ExpressionError(f"expression {expr!r} gives {result}, beyond 2**62")
    return result
