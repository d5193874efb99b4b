"""The grammar of the series task: its names, how the tokenizer splits its texts, and one safe parser.

A source expression is built from the functions `FUNCTIONS` of `k*s*x` (`s` one of `SYMBOL_NAMES`, `x` the
`VARIABLE`), a target is a polynomial in `x` up to `x**(SERIES_ORDER - 1)` with rational coefficients in the
symbols, followed by `+ O(x**SERIES_ORDER)`::

    expression: exp(2*d*x)*tan(c*x)**3
    series:     c**3*x**3 + 2*c**3*d*x**4 + x**5*(c**5 + 2*c**3*d**2) + O(x**6)

The generator, the tokenizer and the metric all read their names and patterns here, and parse with
`parse_series` / `parse_expression`. Parsing never runs arbitrary code: every token is checked against an
allow-list before sympy sees the text, and limits on length, exponents and nesting bound the work one string
can cause. (sympy's comparison of two parsed series can still take long; `equivalence` runs it in a worker
with a time limit.)

This file imports sympy (when it first parses), the standard library and, within the package, only `errors`
(which imports nothing), so that the metric's worker process can load it by path in a fraction of a second;
there, without the package, its errors are plain `ValueError`s.
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import sympy as sp

if __package__:
    from ...errors import UsageError
else:  # loaded by the equivalence worker (equivalence.py run as a script), without the package
    UsageError = ValueError

FUNCTIONS = ("exp", "sin", "cos", "tan", "sinh", "cosh", "tanh")
# The tutorial's symbols: "e" is skipped because it reads as Euler's number.
SYMBOL_NAMES = ("a", "b", "c", "d", "f", "g")
VARIABLE = "x"
# A series is kept up to x**(SERIES_ORDER - 1) and printed with "+ O(x**SERIES_ORDER)".
SERIES_ORDER = 6
ORDER_TERM = f"O({VARIABLE}**{SERIES_ORDER})"

SERIES_NAMES = frozenset((*SYMBOL_NAMES, VARIABLE))
EXPRESSION_NAMES = frozenset((*SERIES_NAMES, *FUNCTIONS))

# How the series tokenizer pre-splits text before BPE: multi-letter names on their own, binary "+"/"-" with
# their spaces (sympy prints " + " and " - " between terms, unary minus without spaces), any other whitespace,
# and the integers of coefficients: a denominator with its slash ("/15") and any other integer not written as
# an exponent ("**2" stays with its monomial). What is left (a monomial such as "*a**2*x**2") is a chunk
# inside which BPE may merge freely. So "64*a**5*x**5/15" becomes "64", "*a**5*x**5", "/15": the coefficient
# the model has to compute is never fused with the monomial it multiplies.
SPLIT_PATTERN = r"[A-Za-z]{2,}| [-+] |\s+|/\d+|(?<![*/\d])\d+"
# The same split with integers written digit by digit, as Lample & Charton (2020) write theirs: every digit of
# an integer that is not an exponent is its own chunk ("**12" stays whole), and so is a denominator's slash
# ("/15" -> "/", "1", "5"). The model then sees 945 as 9, 4, 5 instead of one symbol it must learn by itself.
DIGIT_SPLIT_PATTERN = r"[A-Za-z]{2,}| [-+] |\s+|/(?=\d)|(?<![*\d])\d|(?<=\d)(?<!\*\d)\d"

# The tokens of Judge & Prosper's tutorial, which feeds the model characters rather than BPE pieces: function
# names, symbols, single digits, operators and `O(x**6)` as one token. Its vocabulary has one "+" and one "-";
# here a binary sign keeps the spaces sympy prints around it (" + ", " - ") and a unary minus has none, so
# that decoding restores the exact text with the same number of tokens.
TUTORIAL_TOKEN_PATTERN = "|".join(
    [
        re.escape(ORDER_TERM),
        *sorted(FUNCTIONS, key=len, reverse=True),  # "sinh" before "sin"
        r" [-+] ",
        r"\*\*",
        r"[-*/()]",
        r"\d",
        *SYMBOL_NAMES,
        VARIABLE,
    ]
)
TUTORIAL_VOCABULARY = (
    ORDER_TERM,
    *FUNCTIONS,
    " + ",
    " - ",
    "**",
    *"-*/()",
    *"0123456789",
    *SYMBOL_NAMES,
    VARIABLE,
)
# The tutorial dropped every pair whose source or target had more than 200 of its tokens, start and end tokens
# included.
TUTORIAL_MAX_TOKENS = 200
_TUTORIAL_TOKEN = re.compile(TUTORIAL_TOKEN_PATTERN)

NAME_PATTERN = r"[A-Za-z_]\w*"
_NAME = re.compile(NAME_PATTERN)
SYMBOL = re.compile(rf"\b(?:{'|'.join(SYMBOL_NAMES)})\b")
FUNCTION_CALL = re.compile(rf"\b(?:{'|'.join(FUNCTIONS)})\(")
# An integer of a series that is not an exponent: a numerator, a denominator ("/15"), a lone constant term.
# Exponents follow "*" ("x**2", "O(x**6)"): they belong to the monomial, not to the arithmetic.
COEFFICIENT_INTEGER = re.compile(r"(?<![*\d])\d+")


def count_terms(expression: str) -> int:
    """The number of function calls in an expression: the generator's "terms" (`exp(c*x)**3 + sin(a*x)` has
    2)."""
    return len(FUNCTION_CALL.findall(expression))


def tutorial_length(text: str) -> int:
    """Length of a text in the tutorial's tokens, its start and end tokens included (what its 200-token limit
    counted)."""
    return len(_TUTORIAL_TOKEN.findall(text)) + 2


def names_in(text: str) -> set[str]:
    """Every name (identifier) in a text."""
    return set(_NAME.findall(text))


class SeriesParseError(UsageError):
    """The text is not a series (or expression) of this grammar."""


_TOKEN = re.compile(rf"\s*(?:(?P<name>{NAME_PATTERN})|(?P<number>\d+)|(?P<op>\*\*|[-+*/()]))")
_TRAILING_ORDER_TERM = re.compile(rf"\s*\+\s*O\(\s*{VARIABLE}(?:\s*\*\*\s*\d+)?\s*\)\s*$")
MAX_PARSE_CHARS = 20_000
# Targets use exponents up to ~12; 20 keeps "(a + b + c + d + f + g)**20" expandable in about a second, and a
# single integer exponent rules out towers such as 9**9**9, whose value alone would never finish.
MAX_EXPONENT = 20
MAX_DEPTH = 50


def _excerpt(text: str, limit: int = 60) -> str:
    """`text` quoted for a message: whole when short, else its start and its length (a message must not echo a
    page of input back)."""
    return repr(text) if len(text) <= limit else f"{text[:limit]!r}... ({len(text)} characters)"


def _check_tokens(text: str, allowed_names: frozenset[str], what: str) -> None:
    """Let through only allowed names, integers, + - * / ** and parentheses, single integer exponents up to
    `MAX_EXPONENT` and parentheses nested at most `MAX_DEPTH` deep: nothing sympy's `parse_expr` (an `eval`
    underneath) could turn into code, attribute access or unbounded work."""
    if not isinstance(text, str):
        raise SeriesParseError(f"{what} must be a string, got {type(text).__name__}.")
    if len(text) > MAX_PARSE_CHARS:
        raise SeriesParseError(
            f"{what} has {len(text)} characters, more than the {MAX_PARSE_CHARS} accepted."
        )
    tokens: list[tuple[str, str]] = []
    position, stripped = 0, text.rstrip()
    while position < len(stripped):
        match = _TOKEN.match(stripped, position)
        if match is None:
            raise SeriesParseError(
                f"{what} {_excerpt(text)}: unexpected character {stripped[position:].lstrip()[:1]!r} at "
                f"position {position}; allowed are names, integers, + - * / ** and parentheses."
            )
        tokens.append((match.lastgroup, match.group(match.lastgroup)))
        position = match.end()
    if not tokens:
        raise SeriesParseError(f"{what} is empty.")
    depth = 0
    for i, (kind, token) in enumerate(tokens):
        if kind == "name" and token not in allowed_names:
            raise SeriesParseError(
                f"{what} {_excerpt(text)}: unknown name {token!r} (allowed: "
                f"{', '.join(sorted(allowed_names))})."
            )
        if token == "**":
            exponent = tokens[i + 1] if i + 1 < len(tokens) else ("", "")
            following = tokens[i + 2][1] if i + 2 < len(tokens) else ""
            if exponent[0] != "number" or int(exponent[1]) > MAX_EXPONENT or following == "**":
                raise SeriesParseError(
                    f"{what} {_excerpt(text)}: a power must be a single integer exponent up to "
                    f"{MAX_EXPONENT}."
                )
        depth += (token == "(") - (token == ")")
        if not 0 <= depth <= MAX_DEPTH:
            raise SeriesParseError(
                f"{what} {_excerpt(text)}: unbalanced or more than {MAX_DEPTH}-deep parentheses."
            )
    if depth:
        raise SeriesParseError(f"{what} {_excerpt(text)}: unbalanced parentheses.")


def _parse(text: str, allowed_names: frozenset[str], what: str) -> sp.Expr:
    import sympy as sp  # imported on the first parse: listing the task (a command's `--help`) needs none

    _check_tokens(text, allowed_names, what)
    local_dict = {name: sp.Symbol(name) for name in SERIES_NAMES}
    local_dict.update({name: getattr(sp, name) for name in FUNCTIONS if name in allowed_names})
    try:
        # Fresh tables: parse_expr may write to those it is given. `__builtins__` must be present and empty:
        # without it, `eval` inserts the real builtins module.
        names = {"__builtins__": {}, "Integer": sp.Integer, "Symbol": sp.Symbol, "Rational": sp.Rational}
        expression = sp.parse_expr(text, local_dict=local_dict, global_dict=names)
    except Exception as exc:  # SyntaxError, TypeError, TokenError, ZeroDivisionError, ...
        raise SeriesParseError(
            f"{what} {_excerpt(text)} is not a valid expression: {type(exc).__name__}: {exc}"
        ) from exc
    if not isinstance(expression, sp.Expr):  # e.g. a bare function name such as "sin"
        raise SeriesParseError(
            f"{what} {_excerpt(text)} is a {type(expression).__name__}, not an expression."
        )
    return expression


def parse_series(text: str) -> sp.Expr:
    """Parse a target (or a model's prediction) into a sympy expression, without its trailing `+ O(x**k)`.

    Raises `SeriesParseError` (a `ValueError`) on anything but a polynomial in x with rational-function
    coefficients in the symbols, written with integers and + - * / ** ( ).

    >>> parse_series("1 + x*(a*c/g + 2*a) + O(x**6)")
    x*(a*c/g + 2*a) + 1
    """
    body = _TRAILING_ORDER_TERM.sub("", text) if isinstance(text, str) else text
    return _parse(body, SERIES_NAMES, "series")


def check_expression(text: str) -> None:
    """Raise `SeriesParseError` unless `text` is made of the grammar's source names, integers and operators
    (the token check of `parse_expression`, without building a sympy expression)."""
    _check_tokens(text, EXPRESSION_NAMES, "expression")


# What the generator writes (series/sampling.py): functions of k*s*x, k a small integer, s one symbol.
GRAMMAR_SUMMARY = (
    f"{', '.join(FUNCTIONS)} of k*s*x (k a small integer, s one of {', '.join(SYMBOL_NAMES)}), one to four "
    "of them joined by + - * / and parentheses, each perhaps squared or cubed; e.g. exp(2*b*x)*cos(a*x)"
)
_CALL = re.compile(rf"\b({'|'.join(FUNCTIONS)})\s*\(([^()]*)\)")
_TERM_ARGUMENT = re.compile(rf"^\s*-?\s*(?:\d+\s*\*\s*)?(?:{'|'.join(SYMBOL_NAMES)})\s*\*\s*{VARIABLE}\s*$")


def check_model_input(text: str) -> None:
    """Raise `SeriesParseError` unless `text` is an expression of the grammar the series model was trained on
    (`GRAMMAR_SUMMARY`): outside it, the model still answers, confidently and wrongly. Stricter than
    `check_expression`, which lets through any expression of the grammar's names (`sin(x)`, `a*x`). Every
    message ends with the grammar."""
    try:
        check_expression(text)
    except SeriesParseError as error:
        raise SeriesParseError(f"{error} The model's grammar: {GRAMMAR_SUMMARY}.") from None
    for call in _CALL.finditer(text):
        if not _TERM_ARGUMENT.match(call.group(2)):
            raise SeriesParseError(
                f"expression {_excerpt(text)}: {_excerpt(call.group(0))} is outside the model's grammar: "
                f"{GRAMMAR_SUMMARY}."
            )
    outside = _CALL.sub("", text)
    if re.search(r"[A-Za-z]", outside):
        raise SeriesParseError(
            f"expression {_excerpt(text)}: a name outside a function's argument is outside the model's "
            f"grammar: {GRAMMAR_SUMMARY}."
        )


def parse_expression(text: str) -> sp.Expr:
    """Parse a source expression (`exp(2*d*x)*tan(c*x)**3`) into sympy, with the same checks."""
    return _parse(text, EXPRESSION_NAMES, "expression")


__all__ = [
    "COEFFICIENT_INTEGER",
    "DIGIT_SPLIT_PATTERN",
    "EXPRESSION_NAMES",
    "FUNCTIONS",
    "FUNCTION_CALL",
    "GRAMMAR_SUMMARY",
    "MAX_EXPONENT",
    "ORDER_TERM",
    "SERIES_NAMES",
    "SERIES_ORDER",
    "SPLIT_PATTERN",
    "SYMBOL",
    "SYMBOL_NAMES",
    "TUTORIAL_MAX_TOKENS",
    "TUTORIAL_TOKEN_PATTERN",
    "TUTORIAL_VOCABULARY",
    "SeriesParseError",
    "VARIABLE",
    "count_terms",
    "check_expression",
    "check_model_input",
    "names_in",
    "parse_expression",
    "parse_series",
    "tutorial_length",
]
