"""Where a series model goes wrong: exact match broken down by reference length, by the size of the integers
it has to compute, by the number of terms of the expression, by overlap with the training expressions, and by
the tutorial's length limit (the subset its accuracy was measured on).

Each breakdown is a list of rows `{<label>: ..., "n": ..., "exact_match": ..., "exact_match_stderr": ...}`,
groups without examples left out; `ROW_FORMATS` says how a report prints them.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from ...metrics import binomial_standard_error, exact_match
from .grammar import COEFFICIENT_INTEGER, TUTORIAL_MAX_TOKENS, count_terms, tutorial_length
from .renamings import symbol_renaming_shape

# Lower bounds of the bins of reference length (characters); in the 2,000-example test split of the
# generator's distribution they hold about 6, 35, 45, 12 and 2 % of the series.
LENGTH_EDGES = (0, 50, 100, 200, 400)
# Groups by the number of digits of the largest coefficient integer, the last group open-ended.
INTEGER_DIGIT_GROUPS = (1, 2, 3, 4, 5)

# Report key -> the text before " (n examples): exact match ± s.e." for one row.
ROW_FORMATS = {
    "exact_match_by_reference_length": "exact match, reference of {reference_chars} characters",
    "exact_match_by_largest_integer": "exact match, largest integer of {largest_integer_digits} digits",
    "exact_match_by_term_count": "exact match, {terms}-term expressions",
    "exact_match_by_train_overlap": "exact match, expression {expression}",
    "exact_match_by_tutorial_length": "exact match, source and target {tutorial_length}",
}


def _row(label_key: str, label: str, hits: list[bool]) -> dict:
    accuracy = sum(hits) / len(hits)
    return {
        label_key: label,
        "n": len(hits),
        "exact_match": accuracy,
        "exact_match_stderr": binomial_standard_error(accuracy, len(hits)),
    }


def _grouped(
    label_key: str, keys: Sequence, predictions: Sequence[str], references: Sequence[str], label: Callable
) -> list[dict]:
    """Rows of exact match grouped by `keys` (one per example), in sorted key order."""
    groups: dict = {}
    for key, prediction, reference in zip(keys, predictions, references, strict=True):
        groups.setdefault(key, []).append(exact_match(prediction, reference))
    return [_row(label_key, label(key), groups[key]) for key in sorted(groups)]


def exact_match_by_reference_length(
    predictions: Sequence[str], references: Sequence[str], edges: tuple[int, ...] = LENGTH_EDGES
) -> list[dict]:
    """Exact match within bins of reference length in characters (`edges` are the bins' lower bounds): how
    accuracy falls as series get longer."""
    bins = [sum(len(reference) >= edge for edge in edges) - 1 for reference in references]

    def label(i: int) -> str:
        return f"{edges[i]}-{edges[i + 1] - 1}" if i + 1 < len(edges) else f"{edges[i]}+"

    return _grouped("reference_chars", bins, predictions, references, label)


def exact_match_by_largest_integer(
    predictions: Sequence[str],
    references: Sequence[str],
    digit_groups: tuple[int, ...] = INTEGER_DIGIT_GROUPS,
) -> list[dict]:
    """Exact match grouped by the number of digits of the largest coefficient integer in the reference
    (`digit_groups` are consecutive digit counts; the last takes every longer integer too): how accuracy falls
    as the arithmetic gets harder. Exponents do not count."""
    digits = [
        min(max(max(map(len, COEFFICIENT_INTEGER.findall(r)), default=1), digit_groups[0]), digit_groups[-1])
        for r in references
    ]

    def label(d: int) -> str:
        return f"{d}+" if d == digit_groups[-1] else str(d)

    return _grouped("largest_integer_digits", digits, predictions, references, label)


def exact_match_by_term_count(
    sources: Sequence[str], predictions: Sequence[str], references: Sequence[str]
) -> list[dict]:
    """Exact match grouped by the number of terms (function calls) of the source expression, fewest first:
    how accuracy falls as expressions grow."""
    return _grouped("terms", [count_terms(s) for s in sources], predictions, references, str)


def exact_match_by_train_overlap(
    sources: Sequence[str],
    predictions: Sequence[str],
    references: Sequence[str],
    train_sources: Sequence[str],
) -> list[dict]:
    """Exact match apart for expressions that are a training expression with its symbols renamed (which a
    model can answer by recall) and for new ones (which it has to expand)."""
    train_shapes = {symbol_renaming_shape(source) for source in train_sources}
    groups = [0 if symbol_renaming_shape(source) in train_shapes else 1 for source in sources]
    names = ("renaming of a training expression", "new")
    return _grouped("expression", groups, predictions, references, names.__getitem__)


def exact_match_by_tutorial_length(
    sources: Sequence[str],
    predictions: Sequence[str],
    references: Sequence[str],
    limit: int = TUTORIAL_MAX_TOKENS,
) -> list[dict]:
    """Exact match apart for the pairs whose source and reference both fit in `limit` of the tutorial's tokens
    (start and end tokens included, `grammar.tutorial_length`) and for the longer ones. The tutorial dropped
    the longer ones, the hardest, from all its splits: the first row is the figure that compares with its
    accuracy."""
    groups = [
        0 if max(tutorial_length(source), tutorial_length(reference)) <= limit else 1
        for source, reference in zip(sources, references, strict=True)
    ]
    names = (f"within {limit} tutorial tokens", f"longer than {limit} tutorial tokens")
    return _grouped("tutorial_length", groups, predictions, references, names.__getitem__)


def series_breakdowns(
    sources: Sequence[str],
    predictions: Sequence[str],
    references: Sequence[str],
    train_sources: Sequence[str] | None = None,
) -> dict[str, list[dict]]:
    """Every breakdown of a series report (the overlap one only when the training expressions are given)."""
    breakdowns = {
        "exact_match_by_reference_length": exact_match_by_reference_length(predictions, references),
        "exact_match_by_largest_integer": exact_match_by_largest_integer(predictions, references),
        "exact_match_by_term_count": exact_match_by_term_count(sources, predictions, references),
        "exact_match_by_tutorial_length": exact_match_by_tutorial_length(sources, predictions, references),
    }
    if train_sources is not None:
        breakdowns["exact_match_by_train_overlap"] = exact_match_by_train_overlap(
            sources, predictions, references, train_sources
        )
    return breakdowns
