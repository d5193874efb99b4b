"""The translation task's metric, a local `evaluate` module (translation_metrics.py): sacreBLEU (13a, cased;
optionally lowercased) and chrF, each with its sacrebleu signature."""

from pathlib import Path
from typing import Any

from ....metrics import load_local_metric

# A string, not a Path: evaluate.load() calls str methods on its argument.
TRANSLATION_METRIC_PATH: str = str(Path(__file__).resolve().parent / "translation_metrics.py")


def load_translation_metric(**load_kwargs: Any):
    """Load sacreBLEU + chrF from the local module; never touches the network.

    Args:
        **load_kwargs: passed on to ``evaluate.load`` (e.g. ``experiment_id``, ``keep_in_memory``).

    ``compute(predictions, references, lowercase=False, tokenize="13a")`` returns ``score``,
    ``signature``, ``precisions``, ``bp``, ``sys_len``, ``ref_len``, ``chrf`` and ``chrf_signature``.

    >>> metric = load_translation_metric()
    >>> metric.compute(predictions=["A dog runs."], references=["A dog runs."])["score"]  # doctest: +ELLIPSIS
    100.0...
    """
    return load_local_metric(TRANSLATION_METRIC_PATH, **load_kwargs)
