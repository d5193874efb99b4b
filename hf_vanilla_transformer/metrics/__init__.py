"""What every task's scores share: exact match, the metric every task reports (`tasks.base.Task.score`), its
binomial standard error, and the check that predictions and references pair up. A task's own metrics are
library calls in its task package (sacrebleu for translation, the series comparison for series).
"""

from __future__ import annotations

import math
from collections.abc import Sequence

from ..errors import InputTypeError, UsageError


def check_pairs(predictions: Sequence, references: Sequence, measure: str) -> None:
    """What every score needs: one reference per prediction, and at least one prediction; `measure` names what
    would be undefined without any."""
    for name, texts in (("predictions", predictions), ("references", references)):
        if texts is None or isinstance(texts, str):
            # One string would be scored character by character.
            raise InputTypeError(f"{name} is {type(texts).__name__}, not a list: pass one item per example.")
    if len(predictions) != len(references):
        raise UsageError(
            f"got {len(predictions)} predictions but {len(references)} references; pass exactly one "
            "reference per prediction"
        )
    if not predictions:
        raise UsageError(f"got no predictions: {measure} over zero examples is undefined")


def exact_match(prediction: str, reference: str) -> bool:
    """Every task's exact match: the strings are equal once surrounding whitespace is stripped. Every task's
    score, the series report's breakdowns, the demo and the quickstart all judge by this one function.

    >>> exact_match(" x + O(x**6)", "x + O(x**6)"), exact_match("x + O(x**6)", "O(x**6) + x")
    (True, False)
    """
    if not isinstance(prediction, str) or not isinstance(reference, str):
        raise InputTypeError(
            f"exact_match compares one prediction with one reference, two strings; got "
            f"{type(prediction).__name__} and {type(reference).__name__}. Over lists of examples, use "
            "task.score(predictions, references), one reference string each, or "
            "sum(map(exact_match, predictions, references))."
        )
    return prediction.strip() == reference.strip()


def binomial_standard_error(proportion: float, n: int) -> float:
    """Standard error sqrt(p (1 - p) / n) of a proportion p measured on n independent examples.

    >>> round(binomial_standard_error(0.868, 400), 3)  # accuracy 0.868 on 400 examples: ± 0.017
    0.017
    """
    if n <= 0:
        raise ValueError(f"a standard error needs at least one example, got n={n}")
    if not 0.0 <= proportion <= 1.0:
        raise UsageError(f"proportion={proportion!r} is no share of examples: give one from 0 to 1.")
    return math.sqrt(proportion * (1.0 - proportion) / n)


__all__ = ["binomial_standard_error", "check_pairs", "exact_match"]
