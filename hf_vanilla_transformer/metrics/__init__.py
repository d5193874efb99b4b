"""What every task's metric shares: exact match, its binomial standard error, the check that predictions and
references pair up, and loading a metric script shipped in the package (`load_local_metric`).

Loading a metric by its Hub name (e.g. sacrebleu) fetches a script from the Hugging Face Hub and fails without
a network. A task's metric is a local `evaluate` module beside its task
(`tasks/translation/translation_metrics/`, `tasks/series/series_metrics/`), shipped as package data and
loaded by its absolute path, which evaluate resolves locally. evaluate copies each script into its own cache
and imports it from there; the scripts import what they share from the installed package.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from .._moved import moved_name
from ..caches import check_metric_caches
from ..errors import InputTypeError, UsageError

if TYPE_CHECKING:  # importing evaluate takes seconds (it pulls in transformers); only on use
    import evaluate


def check_pairs(predictions: Sequence, references: Sequence, measure: str) -> None:
    """What every metric here needs: one reference (or one list of references) per prediction, and at least
    one prediction; `measure` names what would be undefined without any."""
    for name, texts in (("predictions", predictions), ("references", references)):
        if texts is None or isinstance(texts, str):
            # One string would be scored character by character.
            raise InputTypeError(f"{name} is {type(texts).__name__}, not a list: pass one item per example.")
    if len(predictions) != len(references):
        raise UsageError(
            f"got {len(predictions)} predictions but {len(references)} references; pass exactly one "
            "reference (or one list of references) per prediction"
        )
    if not predictions:
        raise UsageError(f"got no predictions: {measure} over zero examples is undefined")


def exact_match(prediction: str, reference: str) -> bool:
    """The series task's exact match: the strings are equal once surrounding whitespace is stripped. The
    metric module, the report breakdowns, the demo and the quickstart all judge by this one function.

    >>> exact_match(" x + O(x**6)", "x + O(x**6)"), exact_match("x + O(x**6)", "O(x**6) + x")
    (True, False)
    """
    if not isinstance(prediction, str) or not isinstance(reference, str):
        raise InputTypeError(
            f"exact_match compares one prediction with one reference, two strings; got "
            f"{type(prediction).__name__} and {type(reference).__name__}. Over lists, score with the task's "
            "metric, or sum(map(exact_match, predictions, references))."
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


def load_local_metric(path: str, **load_kwargs: Any) -> evaluate.EvaluationModule:
    """`evaluate.load` of a metric script shipped inside the package (a task's), by its absolute path: loaded
    offline, from a source checkout or an installed wheel."""
    if not Path(path).is_file():
        raise FileNotFoundError(
            f"metric script {path} is missing from the installed package; the wheel must ship every "
            "metric script under hf_vanilla_transformer/tasks/ as package data (see pyproject.toml)"
        )
    import evaluate

    check_metric_caches()
    return evaluate.load(str(path), **load_kwargs)


__all__ = ["binomial_standard_error", "check_pairs", "exact_match", "load_local_metric"]


def __getattr__(name: str):
    return moved_name(__name__, name)
