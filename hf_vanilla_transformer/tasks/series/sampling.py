"""Random source expressions of the series data set, after Judge & Prosper's tutorial.

An expression has one to `MAX_TERMS` terms `f(k*s*x)` (`f` one of the grammar's functions, `k` a small
integer, `s` one of its symbols), sometimes raised to a small power, combined with +, -, * and /, e.g.
`(exp(3*a*x) - sin(c*x)/sinh(g*x))*exp(-a*x)`. The stream is reproducible: one `random.Random(seed)`.
"""

from __future__ import annotations

import random
from collections.abc import Iterator, Sequence
from typing import NamedTuple

from ...errors import UsageError
from .grammar import FUNCTIONS, SYMBOL_NAMES, VARIABLE

# Sampler weights. Multipliers 1..4 with small ones more likely keep the coefficients readable;
# "/" is rarer than "*" because a quotient by an odd function is a pole about half the time.
_MULTIPLIERS = (1, 2, 3, 4)
_MULTIPLIER_WEIGHTS = (5, 3, 2, 1)
_NEGATIVE_PROBABILITY = 0.2
_POWER_PROBABILITY = 0.1
_POWERS = (2, 3)
_OPERATORS = ("+", "-", "*", "/")
_OPERATOR_WEIGHTS = (3, 2, 3, 2)
MAX_TERMS = 4


def _sample_term(rng: random.Random, symbols: Sequence[str]) -> str:
    """One term ``f(k*s*x)``, e.g. ``tan(c*x)``, ``exp(-3*a*x)`` or ``sinh(2*g*x)**3``."""
    multiplier = rng.choices(_MULTIPLIERS, _MULTIPLIER_WEIGHTS)[0]
    symbol = rng.choice(symbols)
    sign = "-" if rng.random() < _NEGATIVE_PROBABILITY else ""
    scale = f"{multiplier}*" if multiplier > 1 else ""
    term = f"{rng.choice(FUNCTIONS)}({sign}{scale}{symbol}*{VARIABLE})"
    if rng.random() < _POWER_PROBABILITY:
        term += f"**{rng.choice(_POWERS)}"
    return term


class _Node(NamedTuple):
    operator: str  # "" for a term
    text: str  # the printed subexpression


def _combine(op: str, left: _Node, right: _Node) -> _Node:
    """Print ``left op right`` with the parentheses the operator precedence needs, and no others."""
    left_text, right_text = left.text, right.text
    # Tuples, not strings: "" (a term) is a substring of every string.
    sums = ("+", "-")
    if op in ("*", "/") and left.operator in sums:
        left_text = f"({left_text})"
    if (op in ("-", "*") and right.operator in sums) or (op == "/" and right.operator):
        right_text = f"({right_text})"
    text = f"{left_text} {op} {right_text}" if op in sums else f"{left_text}{op}{right_text}"
    return _Node(op, text)


def check_sampling(max_terms: int, symbols: Sequence[str]) -> None:
    """Raise `ValueError` for a term count or symbols the sampler cannot use, naming the value."""
    if not isinstance(max_terms, int) or isinstance(max_terms, bool) or max_terms < 1:
        raise UsageError(f"max_terms={max_terms!r} must be an integer of at least 1.")
    unknown = [s for s in symbols if s not in SYMBOL_NAMES]
    if not symbols or unknown:
        raise UsageError(
            f"symbols={list(symbols)!r} must be a non-empty subset of the grammar's {list(SYMBOL_NAMES)}"
            + (f"; {unknown} are not." if unknown else ".")
        )


def sample_expression(
    rng: random.Random, max_terms: int = MAX_TERMS, symbols: Sequence[str] = SYMBOL_NAMES
) -> str:
    """Draw one random source expression, e.g. ``(exp(3*a*x) - sin(c*x)/sinh(g*x))*exp(-a*x)``.

    The number of terms is uniform in 1..max_terms; terms are joined pairwise at random positions,
    which gives random tree shapes (``(t1 + t2)*t3`` as well as ``t1 + t2*t3``). Each term draws its symbol
    from `symbols`.
    """
    check_sampling(max_terms, symbols)
    nodes = [_Node("", _sample_term(rng, symbols)) for _ in range(rng.randint(1, max_terms))]
    while len(nodes) > 1:
        i = rng.randrange(len(nodes) - 1)
        op = rng.choices(_OPERATORS, _OPERATOR_WEIGHTS)[0]
        nodes[i : i + 2] = [_combine(op, nodes[i], nodes[i + 1])]
    return nodes[0].text


def iter_candidates(
    seed: int, max_terms: int = MAX_TERMS, symbols: Sequence[str] = SYMBOL_NAMES
) -> Iterator[str]:
    """Endless, reproducible stream of candidate expressions (duplicates included) for ``seed``."""
    check_sampling(max_terms, symbols)
    rng = random.Random(seed)
    while True:
        yield sample_expression(rng, max_terms, symbols)
