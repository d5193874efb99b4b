"""The series task's metric, a local `evaluate` module (series_metrics.py): exact match, sympy
equivalence and parse rate of predicted Taylor series, each with its binomial standard error."""

from pathlib import Path
from typing import Any

from ....metrics import load_local_metric

# A string, not a Path: evaluate.load() calls str methods on its argument.
SERIES_METRIC_PATH: str = str(Path(__file__).resolve().parent / "series_metrics.py")


def load_series_metric(**load_kwargs: Any):
    """Load the Taylor-series metric from the local module; never touches the network.

    Args:
        **load_kwargs: passed on to ``evaluate.load`` (e.g. ``experiment_id``, ``keep_in_memory``).

    ``compute(predictions, references, timeout=5.0)`` returns ``n``, ``exact_match``,
    ``symbolic_match``, ``parse_rate``, ``term_match`` (each with a ``*_stderr``) and ``timeouts``.
    """
    return load_local_metric(SERIES_METRIC_PATH, **load_kwargs)
