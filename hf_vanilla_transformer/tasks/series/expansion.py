"""The canonical Taylor series of one expression, about x = 0 up to O(x**6), computed with a CAS.

How a series is computed, and why this way:

1. symengine computes the series (sympy's `series` is correct but can take minutes on a single expression).
   symengine silently drops top-order terms of quotients whose denominator vanishes at 0, so it is asked for
   more orders than are kept (`WORKING_ORDERS`) and only x**0 .. x**5 are kept. The two working orders must
   agree on every kept coefficient (otherwise a third, `TIEBREAK_ORDER`, decides, and if it disagrees too the
   example is dropped as `order_mismatch`): a truncation error cannot slip into the data silently.
2. symengine returns each coefficient as an unexpanded graph with heavily shared subtrees
   (`exp(b*x)*exp(c*x) - exp(f*x)` prints as an 88 MB string, and `expand` takes seconds), so coefficients are
   never printed or expanded there. They are converted node by node, memoised over the shared subtrees, into
   sympy's fraction field ZZ(a, b, c, d, f, g), where every intermediate result is a cancelled rational
   function.
3. Canonical form: each coefficient is the cancelled fraction N/D over the integers (numerator and
   denominator coprime, as `sympy.cancel` would give). When D is a monomial (the usual case) the coefficient
   is printed expanded, as a sum of monomials (`a*c/g + 2*a`); otherwise as `(N)/(D)` with both expanded.
   sympy's printer orders terms by its sort key, which does not depend on the hash seed, so equal
   coefficients always print as the same string.
"""

from __future__ import annotations

from collections.abc import Sequence
from functools import cache
from typing import NamedTuple

import sympy as sp

from ...errors import UsageError
from ...extras import lazy_module
from .grammar import SERIES_ORDER, SYMBOL_NAMES, VARIABLE, check_expression

# The series task's one optional dependency: training and evaluation on a data set need only sympy.
se = lazy_module("symengine", "The series CAS (data generation, the demo's reference expansions)")

# Orders asked of symengine; see the module docstring (step 1) for why more than SERIES_ORDER.
WORKING_ORDERS = (9, 12)
TIEBREAK_ORDER = 16

# Reasons a candidate expression is not in the data set, in the order the summary lists them.
DROP_REASONS = ("duplicate", "pole", "constant", "too_long", "timeout", "order_mismatch", "error")

_SP_X = sp.Symbol(VARIABLE)
_SP_SYMBOLS = tuple(sp.Symbol(name) for name in SYMBOL_NAMES)
# Coefficients of the series live in this field; arithmetic there cancels as it goes.
_FIELD, *_FIELD_GENS = sp.field(",".join(SYMBOL_NAMES), sp.ZZ)


@cache
def _symengine_symbols() -> tuple:
    """symengine's x, and its symbols mapped to the field's generators: built on first use, as symengine is
    imported on first use."""
    generators = {se.Symbol(name): gen for name, gen in zip(SYMBOL_NAMES, _FIELD_GENS, strict=True)}
    return se.Symbol(VARIABLE), generators


class SeriesError(UsageError):
    """An expression has no usable series; ``reason`` is one of ``DROP_REASONS``."""

    def __init__(self, reason: str, message: str):
        super().__init__(message)
        self.reason = reason


def _to_field(expr: se.Basic, memo: dict):
    """Convert a symengine rational expression into an element of ZZ(a, b, c, d, f, g).

    ``memo`` is shared across the coefficients of one series: symengine's results share subtrees,
    and without it the walk is exponential in the depth (see the module docstring, step 2).
    """
    done = memo.get(expr)
    if done is not None:
        return done
    if expr.is_Integer:
        out = _FIELD(int(expr))
    elif expr.is_Rational:
        out = _FIELD(int(expr.p)) / _FIELD(int(expr.q))
    elif expr.is_Symbol:
        generators = _symengine_symbols()[1]
        if expr not in generators:
            raise SeriesError("error", f"unexpected symbol {expr} in a series coefficient")
        out = generators[expr]
    elif expr.is_Add:
        out = _FIELD.zero
        for arg in expr.args:
            out += _to_field(arg, memo)
    elif expr.is_Mul:
        out = _FIELD.one
        for arg in expr.args:
            out *= _to_field(arg, memo)
    elif expr.is_Pow and expr.args[1].is_Integer:
        out = _to_field(expr.args[0], memo) ** int(expr.args[1])
    else:
        raise SeriesError("error", f"series coefficient is not a rational function: {type(expr).__name__}")
    memo[expr] = out
    return out


def _coefficients_at(expr: se.Basic, working_order: int) -> list:
    """Coefficients of x**0 .. x**(SERIES_ORDER-1) as field elements; raises on a pole."""
    pairs = se.series(expr, _symengine_symbols()[0], n=working_order, as_deg_coef_pair=True)
    if not isinstance(pairs, list):  # symengine returns a bare expression for a constant
        pairs = [(0, pairs)]
    memo: dict = {}
    coefficients = [_FIELD.zero] * SERIES_ORDER
    for degree, coefficient in pairs:
        degree = int(degree)
        if degree >= SERIES_ORDER:
            continue
        value = _to_field(se.sympify(coefficient), memo)
        if degree < 0:
            # Coefficients arrive unsimplified ("2*b - (b + b)"), so only the field can tell zero.
            if value != 0:
                raise SeriesError("pole", f"the series has a term in x**{degree}: a pole at x = 0")
            continue
        coefficients[degree] = value
    return coefficients


def _field_to_sympy(value) -> sp.Expr:
    """Canonical sympy expression of a field element (see the module docstring, step 3)."""
    numer, denom = value.numer, value.denom
    if len(denom) == 1:  # monomial denominator: print as an expanded sum of monomials
        ((denom_exponents, denom_coeff),) = denom.items()
        terms = []
        for exponents, coeff in numer.items():
            monomial = sp.Mul(
                *(s**e for s, e in zip(_SP_SYMBOLS, _sub(exponents, denom_exponents), strict=True) if e)
            )
            terms.append(sp.Rational(int(coeff), int(denom_coeff)) * monomial)
        return sp.Add(*terms)
    return sp.Mul(numer.as_expr(*_SP_SYMBOLS), sp.Pow(denom.as_expr(*_SP_SYMBOLS), -1))


def _sub(a: Sequence[int], b: Sequence[int]) -> tuple[int, ...]:
    return tuple(i - j for i, j in zip(a, b, strict=True))


def _parse_source(expression: str) -> se.Basic:
    try:
        check_expression(expression)
        expr = se.sympify(expression)
    except Exception as exc:  # the grammar's SeriesParseError, or symengine's own parser errors
        raise SeriesError("error", f"cannot parse expression {expression!r}: {exc}") from exc
    if expr.has(se.zoo) or expr.has(se.nan):
        raise SeriesError("pole", f"{expression!r} divides by zero")
    return expr


def _field_coefficients(expression: str) -> list:
    """Coefficients of x**0 .. x**5 as elements of ZZ(a, b, c, d, f, g).

    Raises `SeriesError` with reason `pole` when the series has negative powers of x, and `order_mismatch`
    when symengine's working orders disagree (see the module docstring).
    """
    expr = _parse_source(expression)
    if _symengine_symbols()[0] not in expr.free_symbols:
        return [_to_field(expr, {})] + [_FIELD.zero] * (SERIES_ORDER - 1)
    low, high = (_coefficients_at(expr, order) for order in WORKING_ORDERS)
    if low != high and _coefficients_at(expr, TIEBREAK_ORDER) != high:
        raise SeriesError(
            "order_mismatch", f"symengine's series of {expression!r} depends on the working order"
        )
    return high


def _x_power(k: int) -> str:
    return VARIABLE if k == 1 else f"{VARIABLE}**{k}"


def format_series(coefficients: Sequence[sp.Expr]) -> str:
    """Print a truncated series by increasing power of x, ending in ``+ O(x**6)``.

    A coefficient that is a sum is printed in parentheses (``x**2*(a + b)``), anything else is
    printed by sympy together with its power of x (``-2*a*x**3/g``).
    """
    pieces = []
    for k, coeff in enumerate(coefficients):
        if coeff == 0:
            continue
        if k == 0:
            pieces.append(sp.sstr(coeff))
        elif isinstance(coeff, sp.Add):
            pieces.append(f"{_x_power(k)}*({sp.sstr(coeff)})")
        else:
            pieces.append(sp.sstr(coeff * _SP_X**k))
    pieces.append(f"O({_x_power(len(coefficients))})")
    text = pieces[0]
    for piece in pieces[1:]:
        text += f" - {piece[1:]}" if piece.startswith("-") else f" + {piece}"
    return text


def taylor_series(expression: str, max_target_chars: int | None = None) -> str:
    """The data set's target for ``expression``: its canonical Taylor series up to O(x**6).

    Raises ``SeriesError`` (a ``ValueError``) with ``reason`` ``pole``, ``constant`` (no x in the
    series), ``too_long`` (longer than ``max_target_chars``) or ``order_mismatch``.

    >>> taylor_series("sin(a*x)/sin(b*x)")
    'a/b + x**2*(-a**3/(6*b) + a*b/6) + x**4*(a**5/(120*b) - a**3*b/36 + 7*a*b**3/360) + O(x**6)'
    """
    coefficients = _field_coefficients(expression)
    if all(c == 0 for c in coefficients[1:]):
        raise SeriesError("constant", f"the series of {expression!r} does not depend on x")
    if max_target_chars is not None:
        # A lower bound on the printed length (each term is at least one character plus " + ", a
        # non-monomial denominator adds "/(...)", then "O(x**6)"), so that a huge coefficient is
        # refused before sympy spends seconds building and printing it.
        at_least = 7 + sum(
            4 * len(c.numer) + (4 * len(c.denom) if len(c.denom) > 1 else 0) for c in coefficients
        )
        if at_least > max_target_chars:
            raise SeriesError(
                "too_long",
                f"series of {expression!r} has at least {at_least} characters > {max_target_chars}",
            )
    text = format_series([_field_to_sympy(c) for c in coefficients])
    if max_target_chars is not None and len(text) > max_target_chars:
        raise SeriesError(
            "too_long", f"series of {expression!r} has {len(text)} characters > {max_target_chars}"
        )
    return text


class SeriesOutcome(NamedTuple):
    """What happened to one candidate: ``status`` is ``ok`` or a drop reason."""

    status: str
    text: str  # the series when ok, else a short explanation


def expression_to_series(expression: str, max_target_chars: int | None = None) -> SeriesOutcome:
    """``taylor_series`` that never raises: failures become a ``SeriesOutcome`` with a drop reason."""
    try:
        return SeriesOutcome("ok", taylor_series(expression, max_target_chars))
    except SeriesError as exc:
        return SeriesOutcome(exc.reason, str(exc))
    except Exception as exc:  # symengine and sympy raise many types; all mean "no usable series"
        return SeriesOutcome("error", f"{type(exc).__name__}: {exc}")
