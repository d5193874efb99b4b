"""Exact match, symbolic equivalence and parse rate of predicted Taylor series, as a local `evaluate` module.

Load it by path (nothing is downloaded)::

    from hf_vanilla_transformer.tasks.series.series_metrics import load_series_metric

    metric = load_series_metric()
    metric.compute(predictions=["x + O(x**6)"], references=["x + O(x**6)"], timeout=5.0)

evaluate copies this file into its module cache and imports it from there; the parsing and the comparison
come from the installed package (`hf_vanilla_transformer.tasks.series`), the one home of the series grammar.
"""

import datasets
import evaluate

from hf_vanilla_transformer.metrics import binomial_standard_error, check_pairs, exact_match
from hf_vanilla_transformer.tasks.series.equivalence import EquivalenceChecker

_DESCRIPTION = """\
Scores predicted truncated Taylor series such as
`1 + x*(a*c/g + 2*a) + x**2*(-a**2/2 + b) + O(x**6)` (symbols a, b, c, d, f, g, x) against
references, four ways:

* exact_match: the strings are equal after stripping surrounding whitespace;
* symbolic_match: both parse with sympy and, with the O(...) terms removed, prediction minus
  reference simplifies to 0 within a per-pair time limit (a pair that runs out of time counts as
  not equivalent and is counted in `timeouts`);
* parse_rate: the prediction parses as a series over the allowed names;
* term_match: the prediction has exactly the reference's terms (monomials in a..g and x, once
  expanded), whatever their coefficients. A wrong prediction that still has the right terms got
  only coefficients wrong (term_match - symbolic_match of all examples); the rest (1 - term_match)
  miss a term, add one, or do not parse.

Each rate comes with its binomial standard error sqrt(p (1 - p) / n). Parsing never evaluates
arbitrary text: only the symbols a, b, c, d, f, g, x, integers and + - * / ** ( ) pass, with a trailing
`+ O(x**k)`.
"""

_KWARGS_DESCRIPTION = """
Args:
    predictions (`list[str]`): predicted series, one per example.
    references (`list[str]`): reference series, one per example. A reference that does not parse
        raises a ValueError naming its index.
    timeout (`float`, defaults to 5.0): seconds allowed per pair for parsing and comparing.

Returns:
    n (`int`): number of examples.
    exact_match, exact_match_stderr (`float`): share of string matches and its standard error.
    symbolic_match, symbolic_match_stderr (`float`): share of predictions equivalent to their
        reference, and its standard error.
    parse_rate, parse_rate_stderr (`float`): share of predictions that parse, and its standard error.
    term_match, term_match_stderr (`float`): share of predictions with exactly the reference's terms
        (coefficients aside; every equivalent prediction counts), and its standard error.
    timeouts (`int`): pairs that exceeded the time limit (counted as not equivalent).

Examples:
    >>> from hf_vanilla_transformer.tasks.series.series_metrics import load_series_metric
    >>> metric = load_series_metric()
    >>> result = metric.compute(
    ...     predictions=["x*(2*a + a*c/g) + O(x**6)"], references=["x*(a*c/g + 2*a) + O(x**6)"]
    ... )
    >>> result["exact_match"], result["symbolic_match"], result["parse_rate"], result["timeouts"]
    (0.0, 1.0, 1.0, 0)
    >>> metric.compute(predictions=["3*a*x + O(x**6)"], references=["2*a*x + O(x**6)"])["term_match"]
    1.0
"""


@evaluate.utils.file_utils.add_start_docstrings(_DESCRIPTION, _KWARGS_DESCRIPTION)
class SeriesMetrics(evaluate.Metric):
    """Exact match + sympy equivalence + parse rate; see the module docstring for how to load it."""

    def _info(self):
        return evaluate.MetricInfo(
            description=_DESCRIPTION,
            citation="",
            inputs_description=_KWARGS_DESCRIPTION,
            features=datasets.Features(
                {"predictions": datasets.Value("string"), "references": datasets.Value("string")}
            ),
            reference_urls=["https://docs.sympy.org/latest/modules/parsing.html"],
        )

    def _compute(self, predictions, references, timeout: float = 5.0):
        check_pairs(predictions, references, "exact match")
        n = len(predictions)

        exact = parsed = equivalent = same_terms = timeouts = 0
        with EquivalenceChecker(timeout=timeout) as checker:
            for index, (prediction, reference) in enumerate(zip(predictions, references, strict=True)):
                exact += exact_match(prediction, reference)
                try:
                    result = checker.check(prediction, reference)
                except ValueError as err:
                    raise ValueError(f"references[{index}]: {err}") from err
                parsed += result.parsed
                equivalent += result.equivalent
                same_terms += result.same_terms
                timeouts += result.timed_out

        scores = {"n": n}
        counts = {
            "exact_match": exact,
            "symbolic_match": equivalent,
            "parse_rate": parsed,
            "term_match": same_terms,
        }
        for name, count in counts.items():
            scores[name] = count / n
            scores[f"{name}_stderr"] = binomial_standard_error(count / n, n)
        scores["timeouts"] = timeouts
        return scores
