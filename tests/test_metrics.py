"""Tests for the tasks' scores: what every task reports (`Task.score`: exact match) and each built-in task's
own, plain library calls (sacrebleu for translation, the series comparison for series), checked against the
libraries themselves and against the reports the shipped model cards quote. Scoring never opens a network
connection.
"""

import json
import math
import os
import re
import socket
import sys
from pathlib import Path

import pytest
import sacrebleu

from hf_vanilla_transformer.metrics import check_pairs, exact_match
from hf_vanilla_transformer.tasks import Task
from hf_vanilla_transformer.tasks.series import SeriesTask
from hf_vanilla_transformer.tasks.translation import TranslationOptions, TranslationTask
from hf_vanilla_transformer.tasks.translation.tokenized_bleu import (
    paper_tokenize,
    split_compounds,
    tokenized_bleu,
)

ROOT = Path(__file__).resolve().parents[1]
# Detokenised, cased sentences with partial overlaps, so BLEU is neither 0 nor 100.
HYPOTHESES = [
    "A man in an orange hat is staring at something.",
    "Two dogs play in the snow.",
    "The girl is riding a Bicycle down the street.",
]
REFERENCES = [
    "A man in an orange hat starring at something.",
    "Two dogs are playing in the snow.",
    "A girl rides her bicycle down the street.",
]
SECOND_REFERENCES = [
    "A man wearing an orange hat stares at something.",
    "Two dogs play together in the snow.",
    "The girl is riding a bike along the street.",
]

SERIES = "1 + x*(a*c/g + 2*a) + x**2*(-a**2/2 + b) + O(x**6)"
# Same series, terms and factors reordered and one coefficient put over a common denominator.
SERIES_REWRITTEN = "x**2*(b - a**2/2) + x*(a*c + 2*a*g)/g + 1 + O(x**6)"
SERIES_WRONG = "1 + x*(a*c/g + 2*a) + x**2*(a**2/2 + b) + O(x**6)"
# Equal (a product of a sum and a difference against a difference of squares), so the cheap check at a sample
# point cannot tell them apart and sympy has to expand two degree-40 polynomials: far beyond a small time
# limit.
SLOW_PREDICTION = "x*(a + b + c + d + f + g)**20*(a - b + c - d + f - g)**20 + O(x**6)"
SLOW_REFERENCE = "x*((a + c + f)**2 - (b + d + g)**2)**20 + O(x**6)"


def _refuse_connection(*args, **kwargs):
    raise AssertionError(f"a score tried to open a network connection: {args}")


@pytest.fixture(autouse=True, scope="module")
def offline():
    """For the whole module: sockets unable to connect."""
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(socket.socket, "connect", _refuse_connection)
        patch.setattr(socket.socket, "connect_ex", _refuse_connection)
        yield


@pytest.fixture(scope="module")
def translation():
    return TranslationTask()


@pytest.fixture(scope="module")
def series():
    return SeriesTask()


# ------------------------------------------------------------------------------------ every task's scores


def test_every_task_reports_exact_match_and_adds_its_own_on_top():
    """`Task.score` is the one place for what every task reports: a task's `task_scores` come on top of it,
    and the built-in tasks' reports carry it too."""

    class Counting(Task):
        name = "counting"

        def task_scores(self, predictions, references):
            return {"predicted_characters": sum(map(len, predictions))}

    predictions, references = ["a", "b ", "c", "x"], ["a", "b", "c", "d"]
    assert Task().score(predictions, references) == {
        "exact_match": 0.75,
        "exact_match_stderr": pytest.approx(math.sqrt(0.75 * 0.25 / 4)),
    }
    assert Counting().score(predictions, references) == {
        **Task().score(predictions, references),
        "predicted_characters": 5,
    }
    assert TranslationTask().score(REFERENCES, REFERENCES)["exact_match"] == 1.0
    assert TranslationTask().score(HYPOTHESES, REFERENCES)["exact_match"] == 0.0
    scored = SeriesTask().score([SERIES, SERIES_REWRITTEN], [SERIES, SERIES])
    assert (scored["exact_match"], scored["symbolic_match"]) == (0.5, 1.0)


# --------------------------------------------------------------------------------------- BLEU/chrF


def test_bleu_equals_sacrebleu_corpus_bleu(translation):
    result = translation.score(HYPOTHESES, REFERENCES)
    expected = sacrebleu.corpus_bleu(HYPOTHESES, [REFERENCES])
    assert 0 < result["bleu"] < 100
    assert result["bleu"] == expected.score


def test_perfect_prediction_scores_100(translation):
    result = translation.score(REFERENCES, REFERENCES)
    assert result["bleu"] == pytest.approx(100.0)
    assert result["chrf"] == pytest.approx(100.0)


def test_signature_and_chrf_are_reported(translation):
    result = translation.score(HYPOTHESES, REFERENCES)
    assert (
        result["bleu_signature"]
        == f"nrefs:1|case:mixed|eff:no|tok:13a|smooth:exp|version:{sacrebleu.__version__}"
    )
    assert result["chrf"] == sacrebleu.corpus_chrf(HYPOTHESES, [REFERENCES]).score
    assert result["chrf_signature"].startswith("nrefs:1|case:mixed|eff:yes|nc:6|nw:0|")


def test_lowercase_bleu_in_reports_differs_on_cased_input(translation):
    shouted = [sentence.upper() for sentence in HYPOTHESES]
    cased = translation.score(shouted, REFERENCES)
    details, sections = translation.report_details(
        HYPOTHESES, shouted, REFERENCES, None, TranslationOptions()
    )
    assert details["bleu_lowercase"] > cased["bleu"]
    assert details["bleu_lowercase"] == sacrebleu.corpus_bleu(shouted, [REFERENCES], lowercase=True).score
    assert "|case:lc|" in details["bleu_lowercase_signature"]
    assert details["bleu_paper_tokenized"] == tokenized_bleu(shouted, REFERENCES, "en")["score"]
    assert sections == {}


def test_paper_tokenization_is_moses_then_compound_splitting():
    # Moses tokenizer.perl -l de: punctuation split off, HTML-escaped; then the hyphen rule, which (as Perl's
    # s///g) takes non-overlapping matches, so the second hyphen of "a-b-c" stays.
    assert paper_tokenize('Die "Rich-Text"-Datei & mehr.', "de") == (
        "Die &quot; Rich ##AT##-##AT## Text &quot; -Datei &amp; mehr ."
    )
    assert split_compounds("a-b-c x - y") == "a ##AT##-##AT## b-c x - y"


def test_tokenized_bleu_is_multi_bleu_on_the_papers_tokenization():
    hypotheses = [
        "Das neue Auto-Haus in der alten Stadt ist groß.",
        "Ein Hund läuft heute im tiefen Schnee.",
    ]
    references = [
        "Das neue Autohaus in der alten Stadt ist sehr groß.",
        "Ein Hund rennt heute im tiefen Schnee.",
    ]
    tokenized = [
        "Das neue Auto ##AT##-##AT## Haus in der alten Stadt ist groß .",
        "Ein Hund läuft heute im tiefen Schnee .",
    ]
    tokenized_references = [
        "Das neue Autohaus in der alten Stadt ist sehr groß .",
        "Ein Hund rennt heute im tiefen Schnee .",
    ]
    expected = sacrebleu.metrics.BLEU(tokenize="none", smooth_method="none", force=True).corpus_score(
        tokenized, [tokenized_references]
    )
    result = tokenized_bleu(hypotheses, references, "de")
    assert result["score"] == pytest.approx(expected.score) and 0 < result["score"] < 100
    assert "tokenizer.perl -l de" in result["signature"] and "##AT##" in result["signature"]
    # Not sacreBLEU: the two tokenizations count different n-grams.
    assert result["score"] != pytest.approx(sacrebleu.corpus_bleu(hypotheses, [references]).score)
    assert tokenized_bleu(references, references, "de")["score"] == pytest.approx(100.0)
    with pytest.raises(ValueError, match="2 predictions but 1 references"):
        tokenized_bleu(hypotheses, references[:1], "de")


def test_the_shared_checks_every_metric_and_report_uses():
    check_pairs(["a"], [["a", "b"]], "BLEU")
    with pytest.raises(ValueError, match="got 2 predictions but 1 references"):
        check_pairs(["a", "b"], ["a"], "BLEU")
    with pytest.raises(ValueError, match="got no predictions: exact match over zero examples"):
        check_pairs([], [], "exact match")
    assert exact_match(" x + O(x**6) ", "x + O(x**6)") and not exact_match("x + O(x**6)", "O(x**6) + x")


def test_translation_length_mismatch_names_both_lengths(translation):
    with pytest.raises(ValueError, match="got 3 predictions but 2 references"):
        translation.score(HYPOTHESES, REFERENCES[:2])


# ------------------------------------------------------------------------------------------ series


def _score_one(series, prediction, reference):
    return series.score([prediction], [reference])


def test_series_exact_match_ignores_surrounding_whitespace(series):
    result = _score_one(series, f"  {SERIES}\n", SERIES)
    assert (result["exact_match"], result["symbolic_match"], result["parse_rate"]) == (1.0, 1.0, 1.0)
    assert (result["n"], result["timeouts"]) == (1, 0)


def test_rewritten_series_is_equivalent_but_not_exact(series):
    result = _score_one(series, SERIES_REWRITTEN, SERIES)
    assert result["exact_match"] == 0.0
    assert result["symbolic_match"] == 1.0
    assert result["parse_rate"] == 1.0


def test_wrong_series_is_not_equivalent(series):
    result = _score_one(series, SERIES_WRONG, SERIES)
    assert (result["exact_match"], result["symbolic_match"], result["parse_rate"]) == (0.0, 0.0, 1.0)


def test_term_match_separates_wrong_coefficients_from_wrong_terms(series):
    # SERIES_WRONG only flips a coefficient's sign; the second drops the x**2*b term; the third adds
    # a term whose coefficient is 0 once expanded (so it is no term at all); the last does not parse.
    predictions = [
        SERIES_WRONG,
        "1 + x*(a*c/g + 2*a) - a**2*x**2/2 + O(x**6)",
        "1 + x*(a*c/g + 2*a + d - d) + x**2*(-a**2/2 + b) + O(x**6)",
        "x**(",
    ]
    result = series.score(predictions, [SERIES] * 4)
    assert (result["symbolic_match"], result["term_match"]) == (0.25, 0.5)
    assert result["term_match_stderr"] == pytest.approx(math.sqrt(0.5 * 0.5 / 4))


def test_unparsable_predictions_fail_to_parse_without_running_anything(series, tmp_path):
    marker = tmp_path / "executed"
    attacks = [
        "x**(",
        f"__import__('os').system('touch {marker}')",
        f"open('{marker}', 'w')",
        "().__class__.__bases__[0].__subclasses__()",
        "x + y",  # an unknown symbol is not a series of this data set
    ]
    result = series.score(attacks, [SERIES] * len(attacks))
    assert result["parse_rate"] == 0.0
    assert result["symbolic_match"] == 0.0
    assert not marker.exists()


def test_series_scores_parse_with_the_series_grammar(series):
    """The scores parse with the package's one series grammar: integers only, the data set's symbols, no
    code."""
    from hf_vanilla_transformer.tasks.series import equivalence, grammar

    assert equivalence.parse_series is grammar.parse_series
    for text in ("__import__('os')", "x.__class__", "lambda: 0", "[x]", "1j*x", "x**(", "9**9**9*x", "0.5*x"):
        with pytest.raises(grammar.SeriesParseError):
            grammar.parse_series(text)
    result = series.score(["0.5*x + O(x**6)"], ["x/2 + O(x**6)"])
    assert (result["parse_rate"], result["symbolic_match"]) == (0.0, 0.0)


def test_unparsable_reference_raises_with_its_index(series):
    with pytest.raises(ValueError, match=r"references\[1\]"):
        series.score([SERIES, SERIES], [SERIES, "x +"])


def test_series_length_mismatch_names_both_lengths(series):
    with pytest.raises(ValueError, match="got 2 predictions but 1 references"):
        series.score([SERIES, SERIES], [SERIES])


def test_standard_errors_are_binomial(series):
    predictions = [SERIES, SERIES_REWRITTEN, SERIES_WRONG, "x**("]
    result = series.score(predictions, [SERIES] * 4)
    n = result["n"]
    assert (result["exact_match"], result["symbolic_match"], result["parse_rate"]) == (0.25, 0.5, 0.75)
    for name in ("exact_match", "symbolic_match", "parse_rate"):
        p = result[name]
        assert result[f"{name}_stderr"] == pytest.approx(math.sqrt(p * (1 - p) / n))


def test_tutorial_accuracy_error_bar(series):
    # The tutorial's "0.868 ± 0.017 on 400 examples": the ± is sqrt(p (1 - p) / n), both for
    # 0.868 itself and for the nearest reachable count, 347 of 400 (0.8675).
    n, right = 400, 347
    predictions = ["x + O(x**6)"] * right + ["2*x + O(x**6)"] * (n - right)
    result = series.score(predictions, ["x + O(x**6)"] * n)
    assert result["symbolic_match"] == pytest.approx(right / n)
    assert round(result["symbolic_match_stderr"], 3) == 0.017
    assert round(math.sqrt(0.868 * (1 - 0.868) / n), 3) == 0.017


def test_pathological_pair_times_out_and_the_next_pair_still_runs(series, monkeypatch):
    predictions = [SERIES, SLOW_PREDICTION, SERIES_REWRITTEN]
    references = [SERIES, SLOW_REFERENCE, SERIES]
    monkeypatch.setattr(series, "equivalence_timeout", 1.0)
    result = series.score(predictions, references)
    assert result["timeouts"] == 1
    # The timed-out pair parsed but is not credited as equivalent; the pair after it is scored by a fresh
    # worker.
    assert result["symbolic_match"] == pytest.approx(2 / 3)
    assert result["parse_rate"] == 1.0


def test_non_positive_timeout_is_rejected(series, monkeypatch):
    monkeypatch.setattr(series, "equivalence_timeout", 0)
    with pytest.raises(ValueError, match=r"timeout \(seconds\) must be more than 0, got 0"):
        _score_one(series, SERIES, SERIES)


def _child_pids() -> list[int]:
    children = []
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            # Field 4 is the parent pid; split after the ")" that closes the command name.
            parent = int(stat.read_text().rsplit(")", 1)[1].split()[1])
        except (OSError, IndexError, ValueError):
            continue  # the process ended while we looked
        if parent == os.getpid():
            children.append(int(stat.parent.name))
    return children


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc")
def test_worker_processes_are_not_left_behind(series, monkeypatch):
    before = _child_pids()
    _score_one(series, SERIES, SERIES)
    monkeypatch.setattr(series, "equivalence_timeout", 0.5)
    _score_one(series, SLOW_PREDICTION, SLOW_REFERENCE)
    assert _child_pids() == before


# ------------------------------------------------------------------------------------ the shipped reports


def _shipped_report(path: Path):
    # Scoring a series report compares 2,000 pairs in sympy: seconds, not the default suite's milliseconds.
    series_report = path.parent.name == "vanilla-transformer-series"
    return pytest.param(
        path, id=f"{path.parent.name}/{path.name}", marks=[pytest.mark.slow] if series_report else []
    )


@pytest.mark.parametrize(
    "path", [_shipped_report(path) for path in sorted(ROOT.glob("model_cards/*/eval-*.json"))]
)
def test_shipped_reports_come_out_of_the_scores_unchanged(path):
    """The figures the model cards quote (sacreBLEU 39.96, chrF, lowercased and tokenized BLEU; the series
    model's exact and symbolic match) are what the tasks' scores give, to the last bit, for the predictions
    their reports hold; every task's scores add exact match to a translation report, and nothing else."""
    from dataclasses import fields

    from hf_vanilla_transformer.tasks.registry import get_task

    report = json.loads(path.read_text(encoding="utf-8"))
    task = get_task(report["data"]["task"])
    options = task.options(**{option.name: report["data"][option.name] for option in fields(task.options)})
    texts = {
        key: [example[key] for example in report["examples"]] for key in ("source", "prediction", "reference")
    }
    scores = task.score(texts["prediction"], texts["reference"])
    details, _ = task.report_details(texts["source"], texts["prediction"], texts["reference"], None, options)
    scores.update(details)
    assert {name: _unversioned(scores[name]) for name in report["metrics"]} == {
        name: _unversioned(value) for name, value in report["metrics"].items()
    }
    assert set(scores) - set(report["metrics"]) <= {"exact_match", "exact_match_stderr"}


def _unversioned(value):
    """A signature without the versions of the libraries that computed it (sacrebleu, sacremoses): the figures
    are the same at every release the package supports, the signature names the one installed."""
    return (
        re.sub(r"(version:|sacrebleu |sacremoses )[0-9.]+", r"\1*", value)
        if isinstance(value, str)
        else value
    )
