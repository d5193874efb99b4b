"""Symbol renamings of series pairs: how evaluation tells recall from expansion, and a data augmentation.

Sources are deduplicated as strings, so a test expression can be a training expression with its symbols
renamed, which a model can answer by recall (rename the recalled series) rather than by expanding. Evaluation
reports the two groups apart (`symbol_renaming_shape`), and training can add renamings of its own pairs
(`symbol_renamings_of_pairs`, `add_symbol_renamings`), never one of a held-out expression.
"""

from __future__ import annotations

import itertools
import logging
import random
from collections.abc import Iterable, Sequence

from ...errors import UsageError
from .grammar import EXPRESSION_NAMES, FUNCTIONS, SYMBOL, SYMBOL_NAMES, names_in

logger = logging.getLogger(__name__)


def symbol_renaming_shape(expression: str) -> str:
    """The expression with its symbols renamed in order of first appearance (``sin(g*x)*cos(b*x)`` and
    ``sin(a*x)*cos(c*x)`` both give ``sin(#0*x)*cos(#1*x)``): two expressions have the same shape exactly
    when one is the other with its symbols consistently renamed.
    """
    first_seen: dict[str, str] = {}
    return SYMBOL.sub(lambda m: first_seen.setdefault(m.group(0), f"#{len(first_seen)}"), expression)


def order_preserving_renamings(expression: str, series: str) -> list[tuple[str, str]]:
    """Every other renaming of the pair's symbols that keeps their alphabetical order, as pairs
    (expression, series).

    The series' printed form depends on the symbols only through their alphabetical order (sympy sorts
    monomials by symbol name), so renaming ``b, d`` to ``a, g`` in both strings gives exactly the CAS's
    canonical series of the renamed expression, with no CAS call; a renaming that reorders the symbols
    (``b, d`` to ``g, a``) would reorder terms and is not offered. An expression with k distinct symbols has
    C(6, k) - 1 such renamings (5, 14, 19, 14 for k = 1..4).
    """
    unknown = sorted(names_in(expression) - EXPRESSION_NAMES)
    if unknown:
        # A symbol outside SYMBOL_NAMES sits somewhere in the alphabet (`e` between d and f): renaming around
        # it could reorder the symbols and silently break the canonical form, so such data is refused.
        raise UsageError(
            f"Expression {expression!r} uses {unknown}, outside this data set's symbols {SYMBOL_NAMES} and "
            f"functions {FUNCTIONS}: symbol renamings are defined only for series data made by "
            "scripts/generate_series.py; train without --symbol_renamings."
        )
    used = sorted(set(SYMBOL.findall(expression)))
    renamings = []
    for names in itertools.combinations(SYMBOL_NAMES, len(used)):  # increasing, like `used`
        if list(names) != used:
            mapping = dict(zip(used, names, strict=True))
            renamings.append((_rename_symbols(expression, mapping), _rename_symbols(series, mapping)))
    return renamings


def _rename_symbols(text: str, mapping: dict[str, str]) -> str:
    return SYMBOL.sub(lambda match: mapping[match.group(0)], text)


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
        raise UsageError(f"`per_example` must be 0 or more, got {per_example}.")
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


def held_out_expressions(raw) -> set[str]:
    """Every expression of the splits other than train of a `DatasetDict` (validation and test, whole)."""
    return {e for split, ds in raw.items() if split != "train" for e in ds["expression"]}


def add_symbol_renamings(train, per_example: int, held_out: set[str], seed: int = 0):
    """The training split (a `datasets.Dataset`) followed by up to `per_example` order-preserving symbol
    renamings of each of its pairs, none of which is in `held_out` (pass `held_out_expressions(raw)` of the
    whole data set, before any split is cut down)."""
    from datasets import Dataset, concatenate_datasets

    expressions, series = symbol_renamings_of_pairs(
        train["expression"], train["series"], per_example, seed=seed, exclude=held_out
    )
    renamed = Dataset.from_dict({"expression": expressions, "series": series})
    logger.info(
        "train: %d pairs + %d symbol renamings (up to %d each)", train.num_rows, renamed.num_rows, per_example
    )
    return concatenate_datasets([train.select_columns(["expression", "series"]), renamed])
