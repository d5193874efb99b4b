"""Our evaluation metrics as local `evaluate` modules, loadable offline.

Loading a metric by its Hub name (e.g. sacrebleu) fetches a script from the Hugging Face Hub and fails without
a network. The modules here ship inside the package (as package data) and are loaded by absolute path, which
evaluate resolves locally, from a source checkout or from an installed wheel:

* ``translation_metrics/translation_metrics.py``: sacreBLEU (13a, cased; optionally lowercased)
  and chrF, each with its sacrebleu signature.
* ``series_metrics/series_metrics.py``: exact match, sympy equivalence and parse rate of
  predicted Taylor series, each with its binomial standard error.

>>> metric = load_translation_metric()
>>> metric.compute(predictions=["A dog runs."], references=["A dog runs."])["score"]  # doctest: +ELLIPSIS
100.0...

evaluate copies each script into its own cache and imports it from there; the scripts import what they
share (the series grammar and comparison, `binomial_standard_error`) from the installed package.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # importing evaluate takes seconds (it pulls in transformers); only on use
    import evaluate

_METRICS_DIR = Path(__file__).resolve().parent

# Strings, not Paths: evaluate.load() calls str methods on its argument.
TRANSLATION_METRIC_PATH: str = str(_METRICS_DIR / "translation_metrics" / "translation_metrics.py")
"""Absolute path of the sacreBLEU + chrF module script; ``evaluate.load(TRANSLATION_METRIC_PATH)``."""

SERIES_METRIC_PATH: str = str(_METRICS_DIR / "series_metrics" / "series_metrics.py")
"""Absolute path of the series exact/symbolic match module script; ``evaluate.load(SERIES_METRIC_PATH)``."""


def check_pairs(predictions: Sequence, references: Sequence, measure: str) -> None:
    """What every metric here needs: one reference (or one list of references) per prediction, and at least
    one prediction; `measure` names what would be undefined without any."""
    if len(predictions) != len(references):
        raise ValueError(
            f"got {len(predictions)} predictions but {len(references)} references; pass exactly one "
            "reference (or one list of references) per prediction"
        )
    if not predictions:
        raise ValueError(f"got no predictions: {measure} over zero examples is undefined")


def exact_match(prediction: str, reference: str) -> bool:
    """The series task's exact match: the strings are equal once surrounding whitespace is stripped. The
    metric module, the report breakdowns, the demo and the quickstart all judge by this one function.

    >>> exact_match(" x + O(x**6)", "x + O(x**6)"), exact_match("x + O(x**6)", "O(x**6) + x")
    (True, False)
    """
    return prediction.strip() == reference.strip()


def binomial_standard_error(proportion: float, n: int) -> float:
    """Standard error sqrt(p (1 - p) / n) of a proportion p measured on n independent examples.

    >>> round(binomial_standard_error(0.868, 400), 3)  # accuracy 0.868 on 400 examples: ± 0.017
    0.017
    """
    if n <= 0:
        raise ValueError(f"a standard error needs at least one example, got n={n}")
    return math.sqrt(proportion * (1.0 - proportion) / n)


def _load_local_module(path: str, **load_kwargs: Any) -> evaluate.EvaluationModule:
    if not Path(path).is_file():
        raise FileNotFoundError(
            f"metric script {path} is missing from the installed package; the wheel must ship "
            "hf_vanilla_transformer/metrics/**/*.py as package data (see pyproject.toml)"
        )
    import evaluate

    return evaluate.load(path, **load_kwargs)


def load_translation_metric(**load_kwargs: Any) -> evaluate.EvaluationModule:
    """Load sacreBLEU + chrF from the local module; never touches the network.

    Args:
        **load_kwargs: passed on to ``evaluate.load`` (e.g. ``experiment_id``, ``keep_in_memory``).

    ``compute(predictions, references, lowercase=False, tokenize="13a")`` returns ``score``,
    ``signature``, ``precisions``, ``bp``, ``sys_len``, ``ref_len``, ``chrf`` and ``chrf_signature``.
    """
    return _load_local_module(TRANSLATION_METRIC_PATH, **load_kwargs)


def load_series_metric(**load_kwargs: Any) -> evaluate.EvaluationModule:
    """Load the Taylor-series metric from the local module; never touches the network.

    Args:
        **load_kwargs: passed on to ``evaluate.load`` (e.g. ``experiment_id``, ``keep_in_memory``).

    ``compute(predictions, references, timeout=5.0)`` returns ``n``, ``exact_match``,
    ``symbolic_match``, ``parse_rate``, ``term_match`` (each with a ``*_stderr``) and ``timeouts``.
    """
    return _load_local_module(SERIES_METRIC_PATH, **load_kwargs)


__all__ = [
    "SERIES_METRIC_PATH",
    "TRANSLATION_METRIC_PATH",
    "binomial_standard_error",
    "load_series_metric",
    "load_translation_metric",
]
