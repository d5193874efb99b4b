"""Taylor-series data set of the FSU/DESY Transformer tutorial (Judge & Prosper, 2023), at scale.

Each example maps a random expression to its Taylor series about x = 0 up to O(x**6)::

    expression: exp(2*d*x)*tan(c*x)**3
    series:     c**3*x**3 + 2*c**3*d*x**4 + x**5*(c**5 + 2*c**3*d**2) + O(x**6)

An expression has one to four terms ``f(k*s*x)`` (``f`` one of exp, sin, cos, tan, sinh, cosh,
tanh; ``k`` a small integer; ``s`` one of the symbols a, b, c, d, f, g), sometimes raised to a small
power, combined with +, -, * and /. Expressions without a Taylor series at 0 (poles) or whose
series does not depend on x are dropped, and every drop is counted by reason.

How a series is computed, and why this way
------------------------------------------
1. symengine computes the series (sympy's ``series`` is correct but can take minutes on a single
   expression). symengine silently drops top-order terms of quotients whose denominator vanishes
   at 0 (measured in the project's NOTES.md), so it is asked for more orders than are kept (working orders 9 and 12)
   and only x**0 .. x**5 are kept. The two working orders must agree on every kept coefficient
   (otherwise a third, order 16, decides, and if it disagrees too the example is dropped as
   ``order_mismatch``): a truncation error cannot slip into the data silently.
2. symengine returns each coefficient as an unexpanded graph with heavily shared subtrees
   (``exp(b*x)*exp(c*x) - exp(f*x)`` prints as an 88 MB string, and ``expand`` takes seconds), so
   coefficients are never printed or expanded there. They are converted node by node, memoised over
   the shared subtrees, into sympy's fraction field ZZ(a, b, c, d, f, g), where every intermediate
   result is a cancelled rational function.
3. Canonical form: each coefficient is the cancelled fraction N/D over the integers (numerator and
   denominator coprime, as ``sympy.cancel`` would give). When D is a monomial (the usual case) the
   coefficient is printed expanded, as a sum of monomials (``a*c/g + 2*a``); otherwise as
   ``(N)/(D)`` with both expanded. sympy's printer orders terms by its sort key, which does not
   depend on the hash seed, so equal coefficients always print as the same string.

Generation is deterministic: candidate expressions come from ``random.Random(seed)`` in the main
process, workers only compute, and results are consumed in candidate order, so the output does not
depend on the number of workers or on scheduling. The one exception is the per-expression time
limit: an expression close to the limit may time out on a loaded machine and not on an idle one.
With the conversion of step 2 nothing came near the default 2 s: in a 50,000-example run on a
loaded 2-core machine the slowest expression took 1.1 s (0.2 s alone) and none timed out. The
summary lists timeouts and the slowest expression, so a run that came close can be spotted.
"""

from __future__ import annotations

import itertools
import json
import math
import multiprocessing
import multiprocessing.connection
import os
import random
import re
import resource
import signal
import time
from collections import Counter
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import NamedTuple

import symengine as se
import sympy as sp
from tqdm.auto import tqdm

__all__ = [
    "DROP_REASONS",
    "FUNCTIONS",
    "SERIES_ORDER",
    "SYMBOL_NAMES",
    "GenerationResult",
    "SeriesDataArguments",
    "SeriesError",
    "SeriesOutcome",
    "count_terms",
    "default_split_sizes",
    "expression_to_series",
    "format_series",
    "generate_examples",
    "generate_series_dataset",
    "iter_candidates",
    "length_stats",
    "order_preserving_renamings",
    "parse_expression",
    "parse_series",
    "sample_expression",
    "series_match",
    "split_examples",
    "symbol_renaming_shape",
    "symbol_renamings_of_pairs",
    "taylor_coefficients",
    "taylor_series",
]

# ----------------------------------------------------------------------------------------------
# Vocabulary of the data set
# ----------------------------------------------------------------------------------------------

FUNCTIONS = ("exp", "sin", "cos", "tan", "sinh", "cosh", "tanh")
# The tutorial's symbols: "e" is skipped because it reads as Euler's number.
SYMBOL_NAMES = ("a", "b", "c", "d", "f", "g")
VARIABLE = "x"
# The series is kept up to x**(SERIES_ORDER - 1) and printed with "+ O(x**SERIES_ORDER)".
SERIES_ORDER = 6
# Orders asked of symengine; see the module docstring (step 1) for why more than SERIES_ORDER.
WORKING_ORDERS = (9, 12)
TIEBREAK_ORDER = 16

# Reasons a candidate expression is not in the data set, in the order the summary lists them.
DROP_REASONS = ("duplicate", "pole", "constant", "too_long", "timeout", "order_mismatch", "error")

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

_SE_X = se.Symbol(VARIABLE)
_SP_X = sp.Symbol(VARIABLE)
_SP_SYMBOLS = tuple(sp.Symbol(name) for name in SYMBOL_NAMES)
# Coefficients of the series live in this field; arithmetic there cancels as it goes.
_FIELD, *_FIELD_GENS = sp.field(",".join(SYMBOL_NAMES), sp.ZZ)
_SE_SYMBOL_TO_GEN = {se.Symbol(name): gen for name, gen in zip(SYMBOL_NAMES, _FIELD_GENS, strict=True)}


# ----------------------------------------------------------------------------------------------
# Random expressions
# ----------------------------------------------------------------------------------------------


def _sample_term(rng: random.Random) -> str:
    """One term ``f(k*s*x)``, e.g. ``tan(c*x)``, ``exp(-3*a*x)`` or ``sinh(2*g*x)**3``."""
    multiplier = rng.choices(_MULTIPLIERS, _MULTIPLIER_WEIGHTS)[0]
    symbol = rng.choice(SYMBOL_NAMES)
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


def sample_expression(rng: random.Random, max_terms: int = MAX_TERMS) -> str:
    """Draw one random source expression, e.g. ``(exp(3*a*x) - sin(c*x)/sinh(g*x))*exp(-a*x)``.

    The number of terms is uniform in 1..max_terms; terms are joined pairwise at random positions,
    which gives random tree shapes (``(t1 + t2)*t3`` as well as ``t1 + t2*t3``).
    """
    if max_terms < 1:
        raise ValueError(f"max_terms={max_terms} must be at least 1.")
    nodes = [_Node("", _sample_term(rng)) for _ in range(rng.randint(1, max_terms))]
    while len(nodes) > 1:
        i = rng.randrange(len(nodes) - 1)
        op = rng.choices(_OPERATORS, _OPERATOR_WEIGHTS)[0]
        nodes[i : i + 2] = [_combine(op, nodes[i], nodes[i + 1])]
    return nodes[0].text


def iter_candidates(seed: int, max_terms: int = MAX_TERMS) -> Iterator[str]:
    """Endless, reproducible stream of candidate expressions (duplicates included) for ``seed``."""
    rng = random.Random(seed)
    while True:
        yield sample_expression(rng, max_terms)


# ----------------------------------------------------------------------------------------------
# Series
# ----------------------------------------------------------------------------------------------


class SeriesError(ValueError):
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
        if expr not in _SE_SYMBOL_TO_GEN:
            raise SeriesError("error", f"unexpected symbol {expr} in a series coefficient")
        out = _SE_SYMBOL_TO_GEN[expr]
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
    pairs = se.series(expr, _SE_X, n=working_order, as_deg_coef_pair=True)
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
        expr = se.sympify(expression)
    except Exception as exc:  # symengine raises its own parser errors
        raise SeriesError("error", f"cannot parse expression {expression!r}: {exc}") from exc
    if expr.has(se.zoo) or expr.has(se.nan):
        raise SeriesError("pole", f"{expression!r} divides by zero")
    return expr


def _field_coefficients(expression: str) -> list:
    """Coefficients of x**0 .. x**5 as elements of ZZ(a, b, c, d, f, g); see ``taylor_coefficients``."""
    expr = _parse_source(expression)
    if _SE_X not in expr.free_symbols:
        return [_to_field(expr, {})] + [_FIELD.zero] * (SERIES_ORDER - 1)
    low, high = (_coefficients_at(expr, order) for order in WORKING_ORDERS)
    if low != high and _coefficients_at(expr, TIEBREAK_ORDER) != high:
        raise SeriesError(
            "order_mismatch", f"symengine's series of {expression!r} depends on the working order"
        )
    return high


def taylor_coefficients(expression: str) -> list[sp.Expr]:
    """Canonical coefficients of x**0 .. x**5 of the Taylor series of ``expression`` about x = 0.

    Raises ``SeriesError`` with reason ``pole`` when the series has negative powers of x, and
    ``order_mismatch`` when symengine's working orders disagree (see the module docstring).
    """
    return [_field_to_sympy(value) for value in _field_coefficients(expression)]


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


# ----------------------------------------------------------------------------------------------
# Parsing targets back (for metrics) and sources (for checks)
# ----------------------------------------------------------------------------------------------

_NAME_PATTERN = r"[A-Za-z_]\w*"
_TOKEN = re.compile(rf"\s*(?:(?P<name>{_NAME_PATTERN})|(?P<number>\d+)|(?P<op>\*\*|[-+*/()]))")
_MAX_PARSE_CHARS = 20_000
# Targets use exponents up to ~12; 20 keeps "(a + b + c + d + f + g)**20" expandable in a second.
_MAX_EXPONENT = 20
_MAX_DEPTH = 50
_ORDER_TERM = re.compile(r"\s*\+\s*O\(\s*x(?:\s*\*\*\s*\d+)?\s*\)\s*$")
_SERIES_NAMES = frozenset((*SYMBOL_NAMES, VARIABLE))
_SOURCE_NAMES = frozenset((*SYMBOL_NAMES, VARIABLE, *FUNCTIONS))


def _safe_parse(text: str, allowed_names: frozenset[str], what: str) -> sp.Expr:
    """Parse with sympy after checking every token, so that model output cannot run code.

    ``sympy.parse_expr`` evaluates Python; only names from ``allowed_names``, integers, + - * / **
    and parentheses get through, exponents must be single integers up to 20 (``9**9**9`` would
    never finish) and parentheses may nest 50 deep.
    """
    if not isinstance(text, str):
        raise ValueError(f"{what} must be a string, got {type(text).__name__}.")
    if len(text) > _MAX_PARSE_CHARS:
        raise ValueError(f"{what} has {len(text)} characters, more than the {_MAX_PARSE_CHARS} accepted.")
    tokens: list[tuple[str, str]] = []
    position, stripped = 0, text.rstrip()
    while position < len(stripped):
        match = _TOKEN.match(stripped, position)
        if match is None:
            raise ValueError(f"{what} {text!r}: unexpected character at position {position}.")
        tokens.append((match.lastgroup, match.group(match.lastgroup)))
        position = match.end()
    if not tokens:
        raise ValueError(f"{what} is empty.")
    depth = 0
    for i, (kind, token) in enumerate(tokens):
        if kind == "name" and token not in allowed_names:
            raise ValueError(f"{what} {text!r}: unknown name {token!r} (allowed: {sorted(allowed_names)}).")
        if token == "**":
            exponent = tokens[i + 1] if i + 1 < len(tokens) else ("", "")
            following = tokens[i + 2][1] if i + 2 < len(tokens) else ""
            if exponent[0] != "number" or int(exponent[1]) > _MAX_EXPONENT or following == "**":
                raise ValueError(
                    f"{what} {text!r}: a power must be a single integer exponent up to {_MAX_EXPONENT}."
                )
        depth += (token == "(") - (token == ")")
        if not 0 <= depth <= _MAX_DEPTH:
            raise ValueError(f"{what} {text!r}: unbalanced or more than {_MAX_DEPTH}-deep parentheses.")
    if depth:
        raise ValueError(f"{what} {text!r}: unbalanced parentheses.")
    local_dict = {name: sp.Symbol(name) for name in (*SYMBOL_NAMES, VARIABLE)}
    local_dict.update({name: getattr(sp, name) for name in FUNCTIONS if name in allowed_names})
    global_dict = {"Integer": sp.Integer, "Symbol": sp.Symbol, "Rational": sp.Rational, "Float": sp.Float}
    try:
        return sp.parse_expr(text, local_dict=local_dict, global_dict=global_dict)
    except Exception as exc:  # parse_expr raises SyntaxError, TypeError, TokenError, ...
        raise ValueError(f"{what} {text!r} is not a valid expression: {exc}") from exc


def parse_series(text: str, keep_order: bool = False) -> sp.Expr:
    """Parse a target (or a model's prediction) back into a sympy expression.

    The trailing ``+ O(x**6)`` is removed, or kept as a sympy ``Order`` with ``keep_order=True``.
    Raises ``ValueError`` on anything that is not a polynomial in x with rational-function
    coefficients in a, b, c, d, f, g.

    >>> parse_series("1 + x*(a*c/g + 2*a) + O(x**6)")
    x*(a*c/g + 2*a) + 1
    """
    body = _ORDER_TERM.sub("", text) if isinstance(text, str) else text
    expr = _safe_parse(body, _SERIES_NAMES, "series")
    return expr + sp.O(_SP_X**SERIES_ORDER) if keep_order else expr


def parse_expression(text: str) -> sp.Expr:
    """Parse a source expression (``exp(2*d*x)*tan(c*x)**3``) into sympy, with the same checks."""
    return _safe_parse(text, _SOURCE_NAMES, "expression")


_CHECK_FIELD, *_ = sp.field(",".join((VARIABLE, *SYMBOL_NAMES)), sp.ZZ)


def series_match(prediction: str, reference: str) -> bool:
    """True when two printed series are the same polynomial (any form, e.g. factored or expanded).

    The comparison is exact, in the field ZZ(x, a, b, c, d, f, g). A prediction that does not parse
    is a mismatch; a reference that does not parse raises ``ValueError``.
    """
    expected = _CHECK_FIELD.from_expr(parse_series(reference))
    try:
        predicted = _CHECK_FIELD.from_expr(parse_series(prediction))
    except Exception:  # unparsable, 1/0, non-rational, ...: a wrong prediction either way
        return False
    return predicted == expected


# ----------------------------------------------------------------------------------------------
# Parallel generation with a hard per-expression time limit
# ----------------------------------------------------------------------------------------------

ProcessFn = Callable[[str, int | None], SeriesOutcome]


def _worker_loop(conn, process: ProcessFn, max_target_chars: int | None, memory_limit_mb: int) -> None:
    """Body of a worker process: compute outcomes for the expressions it is sent, one at a time."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C is the main process's to handle
    if memory_limit_mb > 0:
        # A limit on address space above what the (forked) process already maps: a blow-up then
        # fails with MemoryError inside this worker instead of taking the machine's memory.
        page_size = os.sysconf("SC_PAGE_SIZE")
        with open("/proc/self/statm") as statm:
            mapped = int(statm.read().split()[0]) * page_size
        limit = mapped + memory_limit_mb * 2**20
        resource.setrlimit(resource.RLIMIT_AS, (limit, resource.getrlimit(resource.RLIMIT_AS)[1]))
    while True:
        try:
            task = conn.recv()
        except (EOFError, OSError):
            return
        if task is None:
            return
        index, expression = task
        try:
            outcome = process(expression, max_target_chars)
        except Exception as exc:  # a bug in `process` must not kill the worker
            outcome = SeriesOutcome("error", f"{type(exc).__name__}: {exc}")
        conn.send((index, outcome))


class _Worker:
    """One worker process and its pipe; at most one task in flight, so a hang can be timed."""

    def __init__(self, context, args: tuple):
        self.conn, child_conn = context.Pipe()
        self.process = context.Process(target=_worker_loop, args=(child_conn, *args), daemon=True)
        self.process.start()
        child_conn.close()
        self.index: int | None = None  # candidate index in flight
        self.started = 0.0

    def submit(self, index: int, expression: str) -> None:
        self.conn.send((index, expression))
        self.index, self.started = index, time.monotonic()

    def kill(self) -> None:
        self.process.kill()
        self.process.join()
        self.conn.close()

    def stop(self) -> None:
        try:
            self.conn.send(None)
        except (BrokenPipeError, OSError):
            pass
        self.process.join(timeout=1.0)
        if self.process.is_alive():
            self.kill()
        else:
            self.conn.close()


@dataclass
class GenerationResult:
    """Examples in candidate order and what was dropped on the way (by ``DROP_REASONS``)."""

    examples: list[tuple[str, str]]
    drops: dict[str, int]
    num_candidates: int
    timed_out: list[str] = field(default_factory=list)
    # Wall time (dispatch to result, any outcome) of the slowest expression that finished, to see
    # how close the run came to the time limit.
    slowest: tuple[float, str] = (0.0, "")


class _NoMonitorProgress(tqdm):
    # tqdm's monitor thread would be running while workers are forked; it is not needed here.
    monitor_interval = 0


def _validate_positive(name: str, value, allow_zero: bool = False, integer: bool = False) -> None:
    """Raise a ValueError that names the argument, its value and what is expected."""
    kind = "an integer" if integer else "a number"
    if isinstance(value, bool) or not isinstance(value, int if integer else int | float) or value != value:
        raise ValueError(f"{name}={value!r} must be {kind}.")
    if value < 0 or (value == 0 and not allow_zero):
        raise ValueError(f"{name}={value!r} must be {'zero or more' if allow_zero else 'positive'}.")


def generate_examples(
    num_examples: int,
    *,
    seed: int = 0,
    num_workers: int = 2,
    timeout: float = 2.0,
    max_target_chars: int | None = 1000,
    memory_limit_mb: int = 2048,
    candidates: Iterable[str] | None = None,
    max_candidates: int | None = None,
    process: ProcessFn = expression_to_series,
    progress: bool = True,
) -> GenerationResult:
    """Compute ``num_examples`` unique (expression, series) pairs in parallel.

    Candidates come from ``iter_candidates(seed)`` unless ``candidates`` is given (then generation
    stops early if they run out). Duplicates, by source string or by symengine's canonical form of
    the source (``sin(a*x)*cos(b*x)`` equals ``cos(b*x)*sin(a*x)``), are dropped before any work.
    Each worker handles one expression at a time; one that is still busy after ``timeout`` seconds
    is killed and replaced, and the expression counted as ``timeout``. Results are consumed in
    candidate order, so the examples and the drop counts do not depend on ``num_workers``.

    ``process`` computes one outcome (default ``expression_to_series``); workers are forked, so it
    need not be picklable (tests pass one that hangs on purpose).
    """
    _validate_positive("num_examples", num_examples, integer=True)
    _validate_positive("num_workers", num_workers, integer=True)
    _validate_positive("timeout", timeout)
    _validate_positive("memory_limit_mb", memory_limit_mb, allow_zero=True, integer=True)
    if max_target_chars is not None:
        _validate_positive("max_target_chars", max_target_chars, integer=True)
    if max_candidates is None:
        max_candidates = 20 * num_examples + 1000

    source_iter = iter(candidates) if candidates is not None else iter_candidates(seed)
    seen_text: set[str] = set()
    seen_canonical: set = set()
    outcomes: dict[int, SeriesOutcome] = {}  # candidate index -> outcome, until the cursor eats it
    sources: dict[int, str] = {}
    next_index = 0

    def next_task() -> tuple[int, str] | None:
        """Next candidate that needs a worker; duplicates and unparsable ones are settled here."""
        nonlocal next_index
        for expression in source_iter:
            index = next_index
            next_index += 1
            if index >= max_candidates:
                raise RuntimeError(
                    f"Gave up after {max_candidates} candidates with {len(examples)} of {num_examples} "
                    f"examples (drops so far: {dict(drops)}). The sampler's space is too small for "
                    f"num_examples={num_examples}, or almost everything is dropped; lower num_examples."
                )
            sources[index] = expression
            try:
                key = se.sympify(expression)
            except Exception as exc:
                outcomes[index] = SeriesOutcome("error", f"cannot parse: {exc}")
                continue
            if expression in seen_text or key in seen_canonical:
                outcomes[index] = SeriesOutcome("duplicate", "same source as an earlier candidate")
                continue
            seen_text.add(expression)
            seen_canonical.add(key)
            return index, expression
        return None

    examples: list[tuple[str, str]] = []
    drops: Counter = Counter({reason: 0 for reason in DROP_REASONS})
    timed_out: list[str] = []
    slowest = (0.0, "")
    cursor = 0

    def advance() -> None:
        """Consume outcomes in candidate order; this is what makes the output scheduling-free."""
        nonlocal cursor
        while cursor in outcomes and len(examples) < num_examples:
            outcome = outcomes.pop(cursor)
            expression = sources.pop(cursor)
            if outcome.status == "ok":
                examples.append((expression, outcome.text))
                bar.update(1)
            else:
                drops[outcome.status] += 1
                if outcome.status == "timeout":
                    timed_out.append(expression)
            cursor += 1

    # Fork: workers start in milliseconds with sympy and symengine already imported, which matters
    # because every timeout costs a new worker (spawn/forkserver would re-import for ~1 s each).
    context = multiprocessing.get_context("fork")
    worker_args = (process, max_target_chars, memory_limit_mb)
    workers = [_Worker(context, worker_args) for _ in range(num_workers)]
    exhausted = False
    bar = _NoMonitorProgress(
        total=num_examples, desc="series", unit="ex", disable=not progress, mininterval=2
    )
    try:
        while len(examples) < num_examples:
            for worker in workers:
                if worker.index is None and not exhausted:
                    task = next_task()
                    if task is None:
                        exhausted = True
                    else:
                        worker.submit(*task)
            advance()  # duplicates settled by next_task may complete the cursor's run
            busy = [w for w in workers if w.index is not None]
            if not busy or len(examples) >= num_examples:
                break
            deadline = min(w.started for w in busy) + timeout
            ready = multiprocessing.connection.wait(
                [w.conn for w in busy], timeout=max(0.0, deadline - time.monotonic())
            )
            for i, worker in enumerate(workers):
                if worker.index is None:
                    continue
                if worker.conn in ready:
                    try:
                        index, outcome = worker.conn.recv()
                    except (EOFError, OSError):  # the worker died (e.g. killed by the kernel)
                        index, outcome = worker.index, SeriesOutcome("error", "worker process died")
                        worker.kill()
                        workers[i] = worker = _Worker(context, worker_args)
                    outcomes[index] = outcome
                    seconds = time.monotonic() - worker.started
                    if seconds > slowest[0] and index in sources:
                        slowest = (seconds, sources[index])
                    worker.index = None
                elif time.monotonic() - worker.started > timeout:
                    outcomes[worker.index] = SeriesOutcome("timeout", f"took more than {timeout} s")
                    worker.kill()
                    workers[i] = _Worker(context, worker_args)
            advance()
            bar.set_postfix({k: v for k, v in drops.items() if v}, refresh=False)
    finally:
        bar.close()
        for worker in workers:
            if worker.index is None:
                worker.stop()
            else:  # busy on a candidate past the last one needed
                worker.kill()
    return GenerationResult(examples, {r: drops[r] for r in DROP_REASONS}, cursor, timed_out, slowest)


# ----------------------------------------------------------------------------------------------
# Splits, summary, writing
# ----------------------------------------------------------------------------------------------


def split_examples(
    examples: Sequence[tuple[str, str]], test_size: int, validation_size: int, seed: int = 0
) -> dict[str, list[tuple[str, str]]]:
    """Shuffle (seeded) and cut into test, validation and train, in that order.

    Sources are unique (``generate_examples`` removes duplicates), so no source is in two splits.
    """
    _validate_positive("test_size", test_size, allow_zero=True, integer=True)
    _validate_positive("validation_size", validation_size, allow_zero=True, integer=True)
    if test_size + validation_size >= len(examples):
        raise ValueError(
            f"test_size={test_size} + validation_size={validation_size} leaves no training examples "
            f"out of {len(examples)}; lower them or raise num_examples."
        )
    order = list(range(len(examples)))
    # A string seed goes through sha512, so the split order does not follow the sampler's stream.
    random.Random(f"split-{seed}").shuffle(order)
    shuffled = [examples[i] for i in order]
    return {
        "train": shuffled[test_size + validation_size :],
        "validation": shuffled[test_size : test_size + validation_size],
        "test": shuffled[:test_size],
    }


_FUNCTION_CALL = re.compile(rf"\b(?:{'|'.join(FUNCTIONS)})\(")


def count_terms(expression: str) -> int:
    """The number of function calls in an expression: the generator's "terms" (``exp(c*x)**3 + sin(a*x)`` has 2)."""
    return len(_FUNCTION_CALL.findall(expression))


_SYMBOL = re.compile(rf"\b(?:{'|'.join(SYMBOL_NAMES)})\b")
_NAME = re.compile(_NAME_PATTERN)


def symbol_renaming_shape(expression: str) -> str:
    """The expression with its symbols renamed in order of first appearance (``sin(g*x)*cos(b*x)`` and
    ``sin(a*x)*cos(c*x)`` both give ``sin(#0*x)*cos(#1*x)``): two expressions have the same shape exactly
    when one is the other with its symbols consistently renamed.

    Sources are deduplicated as strings, so a test expression can be a renaming of a training one, and a
    model can answer it by recall (rename the recalled series) rather than by expanding; evaluation
    reports the two groups apart.
    """
    first_seen: dict[str, str] = {}
    return _SYMBOL.sub(lambda m: first_seen.setdefault(m.group(0), f"#{len(first_seen)}"), expression)


def order_preserving_renamings(expression: str, series: str) -> list[tuple[str, str]]:
    """Every other renaming of the pair's symbols that keeps their alphabetical order, as pairs
    (expression, series).

    The series' printed form depends on the symbols only through their alphabetical order (sympy sorts
    monomials by symbol name), so renaming ``b, d`` to ``a, g`` in both strings gives exactly the CAS's
    canonical series of the renamed expression, with no CAS call; a renaming that reorders the symbols
    (``b, d`` to ``g, a``) would reorder terms and is not offered. An expression with k distinct symbols has
    C(6, k) - 1 such renamings (5, 14, 19, 14 for k = 1..4). `tests/test_series_data.py` checks them
    against the CAS.
    """
    unknown = sorted(set(_NAME.findall(expression)) - _SOURCE_NAMES)
    if unknown:
        # A symbol outside SYMBOL_NAMES sits somewhere in the alphabet (`e` between d and f): renaming around
        # it could reorder the symbols and silently break the canonical form, so such data is refused.
        raise ValueError(
            f"Expression {expression!r} uses {unknown}, outside this data set's symbols {SYMBOL_NAMES} and "
            f"functions {FUNCTIONS}: symbol renamings are defined only for series data made by "
            "scripts/generate_series.py; train without --symbol_renamings."
        )
    used = sorted(set(_SYMBOL.findall(expression)))
    renamings = []
    for names in itertools.combinations(SYMBOL_NAMES, len(used)):  # increasing, like `used`
        if list(names) != used:
            mapping = dict(zip(used, names, strict=True))
            renamings.append((_rename_symbols(expression, mapping), _rename_symbols(series, mapping)))
    return renamings


def _rename_symbols(text: str, mapping: dict[str, str]) -> str:
    return _SYMBOL.sub(lambda match: mapping[match.group(0)], text)


def symbol_renamings_of_pairs(
    expressions: Sequence[str],
    series: Sequence[str],
    per_example: int,
    seed: int = 0,
    exclude: Iterable[str] = (),
) -> tuple[list[str], list[str]]:
    """Up to `per_example` order-preserving renamings (`order_preserving_renamings`) of each pair, drawn
    at random with `seed`: data augmentation by a symmetry of the task, for training only.

    Renamings whose expression is in `exclude` (pass the validation and test expressions) or is already a
    pair of the input, or was drawn before, are skipped, so no held-out example is ever trained on and no
    pair appears twice. Returns the new pairs only, as two lists.
    """
    if per_example < 0:
        raise ValueError(f"`per_example` must be 0 or more, got {per_example}.")
    rng = random.Random(seed)
    taken = set(exclude) | set(expressions)
    new_expressions: list[str] = []
    new_series: list[str] = []
    for expression, target in zip(expressions, series, strict=True):
        candidates = [pair for pair in order_preserving_renamings(expression, target) if pair[0] not in taken]
        for renamed_expression, renamed_series in rng.sample(candidates, min(per_example, len(candidates))):
            taken.add(renamed_expression)
            new_expressions.append(renamed_expression)
            new_series.append(renamed_series)
    return new_expressions, new_series


def length_stats(values: Sequence[int]) -> dict[str, float]:
    """Mean, min, max and nearest-rank percentiles (50, 90, 99) of a list of lengths."""
    if not values:
        return {}
    ordered = sorted(values)

    def percentile(p: float) -> int:
        return ordered[min(len(ordered) - 1, max(0, math.ceil(p / 100 * len(ordered)) - 1))]

    return {
        "mean": round(sum(ordered) / len(ordered), 2),
        "min": ordered[0],
        "p50": percentile(50),
        "p90": percentile(90),
        "p99": percentile(99),
        "max": ordered[-1],
    }


@dataclass
class SeriesDataArguments:
    """Command-line arguments of ``scripts/generate_series.py`` (parsed with ``HfArgumentParser``)."""

    output_dir: str = field(
        default="outputs/data/series", metadata={"help": "Where to save the DatasetDict and summary.json."}
    )
    num_examples: int = field(default=50_000, metadata={"help": "Unique examples in all splits together."})
    seed: int = field(default=0, metadata={"help": "Seed of the expression sampler and of the split."})
    num_workers: int = field(default=2, metadata={"help": "Worker processes computing series."})
    test_size: int | None = field(
        default=None,
        metadata={"help": "Examples in the test split (default: 2000, or 4 percent below 50,000)."},
    )
    validation_size: int | None = field(
        default=None,
        metadata={"help": "Examples in the validation split (default: 1000, or 2 percent below 50,000)."},
    )
    timeout: float = field(
        default=2.0, metadata={"help": "Seconds per expression before its worker is killed and replaced."}
    )
    max_target_chars: int = field(
        default=1000,
        metadata={"help": "Longer series are dropped as too_long (the 99th percentile is ~500)."},
    )
    memory_limit_mb: int = field(
        default=2048, metadata={"help": "Extra address space per worker; 0 disables the limit."}
    )
    overwrite: bool = field(default=False, metadata={"help": "Replace an existing non-empty output_dir."})

    def __post_init__(self):
        _validate_arguments(**asdict(self))


def default_split_sizes(num_examples: int) -> tuple[int, int]:
    """(test_size, validation_size) when not given: 2000 and 1000, scaled to 4% and 2% of smaller sets."""
    return min(2000, num_examples * 4 // 100), min(1000, num_examples * 2 // 100)


def _validate_arguments(
    *,
    output_dir,
    num_examples,
    seed,
    num_workers,
    test_size,
    validation_size,
    timeout,
    max_target_chars,
    memory_limit_mb,
    overwrite,
) -> None:
    for name, value in (
        ("num_examples", num_examples),
        ("num_workers", num_workers),
        ("max_target_chars", max_target_chars),
    ):
        _validate_positive(name, value, integer=True)
    _validate_positive("timeout", timeout)
    _validate_positive("memory_limit_mb", memory_limit_mb, allow_zero=True, integer=True)
    if not isinstance(seed, int) or isinstance(seed, bool):
        raise ValueError(f"seed={seed!r} must be an integer.")
    default_test, default_validation = default_split_sizes(num_examples)
    test_size = default_test if test_size is None else test_size
    validation_size = default_validation if validation_size is None else validation_size
    for name, value in (("test_size", test_size), ("validation_size", validation_size)):
        _validate_positive(name, value, allow_zero=True, integer=True)
    if test_size + validation_size >= num_examples:
        raise ValueError(
            f"test_size={test_size} + validation_size={validation_size} must be smaller than "
            f"num_examples={num_examples} so that the train split is not empty; lower the split sizes "
            f"or raise num_examples."
        )
    path = Path(output_dir)
    if path.exists() and not path.is_dir():
        raise ValueError(f"output_dir={output_dir!r} exists and is not a directory.")
    if path.is_dir() and any(path.iterdir()) and not overwrite:
        raise ValueError(
            f"output_dir={output_dir!r} is not empty; choose another directory or pass overwrite=True "
            f"(--overwrite) to replace it."
        )


def generate_series_dataset(
    output_dir: str | os.PathLike,
    num_examples: int = 50_000,
    *,
    seed: int = 0,
    num_workers: int = 2,
    test_size: int | None = None,
    validation_size: int | None = None,
    timeout: float = 2.0,
    max_target_chars: int = 1000,
    memory_limit_mb: int = 2048,
    overwrite: bool = False,
    progress: bool = True,
) -> dict:
    """Generate, split and save the data set; return the summary (also written to summary.json).

    ``output_dir`` receives a ``datasets.DatasetDict`` (``save_to_disk``; splits train, validation
    and test; columns ``expression`` and ``series``) and ``summary.json`` (split sizes, drops by
    reason, character-length statistics, the arguments and the time taken). Same arguments give
    byte-identical data files, whatever ``num_workers`` is (see the module docstring for the one
    caveat, timeouts).
    """
    arguments = dict(
        output_dir=str(output_dir),
        num_examples=num_examples,
        seed=seed,
        num_workers=num_workers,
        test_size=test_size,
        validation_size=validation_size,
        timeout=timeout,
        max_target_chars=max_target_chars,
        memory_limit_mb=memory_limit_mb,
        overwrite=overwrite,
    )
    _validate_arguments(**arguments)
    default_test, default_validation = default_split_sizes(num_examples)
    test_size = arguments["test_size"] = default_test if test_size is None else test_size
    validation_size = arguments["validation_size"] = (
        default_validation if validation_size is None else validation_size
    )
    started = time.perf_counter()
    result = generate_examples(
        num_examples,
        seed=seed,
        num_workers=num_workers,
        timeout=timeout,
        max_target_chars=max_target_chars,
        memory_limit_mb=memory_limit_mb,
        progress=progress,
    )
    generation_seconds = time.perf_counter() - started
    if len(result.examples) < num_examples:  # only possible if the candidate stream ends
        raise RuntimeError(f"Only {len(result.examples)} of {num_examples} examples could be generated.")
    splits = split_examples(result.examples, test_size, validation_size, seed)

    # datasets is imported only now: it maps ~1.3 GB of address space and may start threads, and
    # neither should be inherited by the forked workers above.
    from datasets import Dataset, DatasetDict

    dataset = DatasetDict(
        {
            name: Dataset.from_dict({"expression": [e for e, _ in rows], "series": [s for _, s in rows]})
            for name, rows in splits.items()
        }
    )
    path = Path(output_dir)
    path.mkdir(parents=True, exist_ok=True)
    dataset.save_to_disk(str(path))

    train_targets = {s for _, s in splits["train"]}
    train_shapes = {symbol_renaming_shape(e) for e, _ in splits["train"]}
    summary = {
        "description": (
            "Taylor series about x = 0 up to O(x**6) of random expressions in exp, sin, cos, tan, sinh, "
            "cosh, tanh of k*s*x, s in {a, b, c, d, f, g} (after Judge & Prosper 2023). Coefficients are "
            "cancelled rational functions, printed expanded over a monomial denominator, else as (N)/(D)."
        ),
        "splits": {name: len(rows) for name, rows in splits.items()},
        "num_candidates": result.num_candidates,
        "drops": result.drops,
        "timed_out_expressions": result.timed_out[:50],
        "slowest_expression": {"seconds": round(result.slowest[0], 3), "expression": result.slowest[1]},
        # Single terms run out fast (a few hundred exist), hence most duplicates and few 1-term examples.
        "terms_per_expression": dict(
            sorted(Counter(str(count_terms(e)) for e, _ in result.examples).items())
        ),
        "lengths_chars": {
            "expression": length_stats([len(e) for e, _ in result.examples]),
            "series": length_stats([len(s) for _, s in result.examples]),
        },
        # Different sources can share a series (e.g. tan(a*x)*cos(a*x) and sin(a*x)); informational.
        "series_also_in_train": {
            name: sum(s in train_targets for _, s in splits[name]) for name in ("validation", "test")
        },
        # Expressions that are a training expression with its symbols renamed: answerable by recall.
        "expressions_renaming_train": {
            name: sum(symbol_renaming_shape(e) in train_shapes for e, _ in splits[name])
            for name in ("validation", "test")
        },
        "arguments": arguments,
        "versions": {"sympy": sp.__version__, "symengine": se.__version__},
        "seconds": {
            "generation": round(generation_seconds, 1),
            "total": round(time.perf_counter() - started, 1),
        },
    }
    (path / "summary.json").write_text(json.dumps(summary, indent=2) + "\n")
    return summary
