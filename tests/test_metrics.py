"""Tests for the local evaluate modules in hf_vanilla_transformer.metrics.

Both metrics are loaded once per module, with the network blocked, through the same helpers that
training and evaluation code use.
"""

import math
import os
import socket
import sys
from pathlib import Path

import pytest
import sacrebleu

from hf_vanilla_transformer.metrics import check_pairs, exact_match
from hf_vanilla_transformer.tasks.series.series_metrics import SERIES_METRIC_PATH, load_series_metric
from hf_vanilla_transformer.tasks.translation.tokenized_bleu import (
    paper_tokenize,
    split_compounds,
    tokenized_bleu,
)
from hf_vanilla_transformer.tasks.translation.translation_metrics import (
    TRANSLATION_METRIC_PATH,
    load_translation_metric,
)

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
    raise AssertionError(f"a metric tried to open a network connection: {args}")


@pytest.fixture(scope="module")
def offline(tmp_path_factory):
    """For the whole module: Hub offline flags set *and* sockets unable to connect.

    Yields a temporary cache directory for evaluate's prediction files.
    """
    import evaluate

    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("HF_HUB_OFFLINE", "1")
        patch.setenv("HF_EVALUATE_OFFLINE", "1")
        # evaluate reads the variable once, at import; the config attribute is what it consults.
        patch.setattr(evaluate.config, "HF_EVALUATE_OFFLINE", True)
        patch.setattr(socket.socket, "connect", _refuse_connection)
        patch.setattr(socket.socket, "connect_ex", _refuse_connection)
        yield str(tmp_path_factory.mktemp("evaluate_cache"))


@pytest.fixture(scope="module")
def translation_metric(offline):
    return load_translation_metric(cache_dir=offline)


@pytest.fixture(scope="module")
def series_metric(offline):
    return load_series_metric(cache_dir=offline)


# An exception inside compute() leaves an evaluate module holding its half-initialised writer
# (and the input format it guessed), which breaks the next compute() on the same instance. Tests
# that make compute() raise therefore get their own instance, kept in memory so that it holds no
# lock on a cache file the shared instances use (evaluate would wait a second for it).
@pytest.fixture
def fresh_translation_metric(offline):
    return load_translation_metric(keep_in_memory=True)


@pytest.fixture
def fresh_series_metric(offline):
    return load_series_metric(keep_in_memory=True)


def test_metric_paths_are_absolute_script_paths():
    for path in (TRANSLATION_METRIC_PATH, SERIES_METRIC_PATH):
        assert isinstance(path, str)  # evaluate.load() needs a str
        assert Path(path).is_absolute() and Path(path).is_file()
    assert Path(TRANSLATION_METRIC_PATH).parts[-2:] == ("translation_metrics", "translation_metrics.py")
    assert Path(SERIES_METRIC_PATH).parts[-2:] == ("series_metrics", "series_metrics.py")


def test_loaded_modules_are_ours(translation_metric, series_metric):
    assert type(translation_metric).__name__ == "TranslationMetrics"
    assert type(series_metric).__name__ == "SeriesMetrics"


# --------------------------------------------------------------------------------------- BLEU/chrF


def test_bleu_equals_sacrebleu_corpus_bleu(translation_metric):
    result = translation_metric.compute(predictions=HYPOTHESES, references=REFERENCES)
    expected = sacrebleu.corpus_bleu(HYPOTHESES, [REFERENCES])
    assert 0 < result["score"] < 100
    assert result["score"] == pytest.approx(expected.score)
    assert result["bp"] == pytest.approx(expected.bp)
    assert result["precisions"] == pytest.approx(expected.precisions)


def test_bleu_with_several_references_per_segment(translation_metric):
    per_segment = [list(pair) for pair in zip(REFERENCES, SECOND_REFERENCES, strict=True)]
    result = translation_metric.compute(predictions=HYPOTHESES, references=per_segment)
    expected = sacrebleu.corpus_bleu(HYPOTHESES, [REFERENCES, SECOND_REFERENCES])
    assert result["score"] == pytest.approx(expected.score)
    assert result["signature"].startswith("nrefs:2|")


def test_perfect_prediction_scores_100(translation_metric):
    result = translation_metric.compute(predictions=REFERENCES, references=REFERENCES)
    assert result["score"] == pytest.approx(100.0)
    assert result["chrf"] == pytest.approx(100.0)


def test_signature_and_chrf_are_reported(translation_metric):
    result = translation_metric.compute(predictions=HYPOTHESES, references=REFERENCES)
    assert (
        result["signature"] == f"nrefs:1|case:mixed|eff:no|tok:13a|smooth:exp|version:{sacrebleu.__version__}"
    )
    assert result["chrf"] == pytest.approx(sacrebleu.corpus_chrf(HYPOTHESES, [REFERENCES]).score)
    assert result["chrf_signature"].startswith("nrefs:1|case:mixed|eff:yes|nc:6|nw:0|")


def test_lowercase_bleu_differs_on_cased_input(translation_metric):
    shouted = [sentence.upper() for sentence in HYPOTHESES]
    cased = translation_metric.compute(predictions=shouted, references=REFERENCES)
    lowercased = translation_metric.compute(predictions=shouted, references=REFERENCES, lowercase=True)
    assert lowercased["score"] > cased["score"]
    assert lowercased["score"] == pytest.approx(
        sacrebleu.corpus_bleu(shouted, [REFERENCES], lowercase=True).score
    )
    assert "|case:lc|" in lowercased["signature"]


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


def test_translation_length_mismatch_names_both_lengths(fresh_translation_metric):
    with pytest.raises(ValueError, match=r"\(3\).*\(2\)"):
        fresh_translation_metric.compute(predictions=HYPOTHESES, references=REFERENCES[:2])


def test_uneven_reference_counts_are_rejected(fresh_translation_metric):
    with pytest.raises(ValueError, match="same number of references"):
        fresh_translation_metric.compute(
            predictions=HYPOTHESES[:2], references=[[REFERENCES[0]], [REFERENCES[1], SECOND_REFERENCES[1]]]
        )


# ------------------------------------------------------------------------------------------ series


def _score_one(series_metric, prediction, reference, **kwargs):
    return series_metric.compute(predictions=[prediction], references=[reference], **kwargs)


def test_series_exact_match_ignores_surrounding_whitespace(series_metric):
    result = _score_one(series_metric, f"  {SERIES}\n", SERIES)
    assert (result["exact_match"], result["symbolic_match"], result["parse_rate"]) == (1.0, 1.0, 1.0)
    assert (result["n"], result["timeouts"]) == (1, 0)


def test_rewritten_series_is_equivalent_but_not_exact(series_metric):
    result = _score_one(series_metric, SERIES_REWRITTEN, SERIES)
    assert result["exact_match"] == 0.0
    assert result["symbolic_match"] == 1.0
    assert result["parse_rate"] == 1.0


def test_wrong_series_is_not_equivalent(series_metric):
    result = _score_one(series_metric, SERIES_WRONG, SERIES)
    assert (result["exact_match"], result["symbolic_match"], result["parse_rate"]) == (0.0, 0.0, 1.0)


def test_term_match_separates_wrong_coefficients_from_wrong_terms(series_metric):
    # SERIES_WRONG only flips a coefficient's sign; the second drops the x**2*b term; the third adds
    # a term whose coefficient is 0 once expanded (so it is no term at all); the last does not parse.
    predictions = [
        SERIES_WRONG,
        "1 + x*(a*c/g + 2*a) - a**2*x**2/2 + O(x**6)",
        "1 + x*(a*c/g + 2*a + d - d) + x**2*(-a**2/2 + b) + O(x**6)",
        "x**(",
    ]
    result = series_metric.compute(predictions=predictions, references=[SERIES] * 4)
    assert (result["symbolic_match"], result["term_match"]) == (0.25, 0.5)
    assert result["term_match_stderr"] == pytest.approx(math.sqrt(0.5 * 0.5 / 4))


def test_unparsable_predictions_fail_to_parse_without_running_anything(series_metric, tmp_path):
    marker = tmp_path / "executed"
    attacks = [
        "x**(",
        f"__import__('os').system('touch {marker}')",
        f"open('{marker}', 'w')",
        "().__class__.__bases__[0].__subclasses__()",
        "x + y",  # an unknown symbol is not a series of this data set
    ]
    result = series_metric.compute(predictions=attacks, references=[SERIES] * len(attacks))
    assert result["parse_rate"] == 0.0
    assert result["symbolic_match"] == 0.0
    assert not marker.exists()


def test_metric_parses_with_the_series_grammar(series_metric):
    """The metric parses with the package's one series grammar: integers only, the data set's symbols, no
    code."""
    from hf_vanilla_transformer.tasks.series import equivalence, grammar

    assert equivalence.parse_series is grammar.parse_series
    for text in ("__import__('os')", "x.__class__", "lambda: 0", "[x]", "1j*x", "x**(", "9**9**9*x", "0.5*x"):
        with pytest.raises(grammar.SeriesParseError):
            grammar.parse_series(text)
    result = series_metric.compute(predictions=["0.5*x + O(x**6)"], references=["x/2 + O(x**6)"])
    assert (result["parse_rate"], result["symbolic_match"]) == (0.0, 0.0)


def test_unparsable_reference_raises_with_its_index(fresh_series_metric):
    with pytest.raises(ValueError, match=r"references\[1\]"):
        fresh_series_metric.compute(predictions=[SERIES, SERIES], references=[SERIES, "x +"])


def test_series_length_mismatch_names_both_lengths(fresh_series_metric):
    with pytest.raises(ValueError, match=r"\(2\).*\(1\)"):
        fresh_series_metric.compute(predictions=[SERIES, SERIES], references=[SERIES])


def test_standard_errors_are_binomial(series_metric):
    predictions = [SERIES, SERIES_REWRITTEN, SERIES_WRONG, "x**("]
    result = series_metric.compute(predictions=predictions, references=[SERIES] * 4)
    n = result["n"]
    assert (result["exact_match"], result["symbolic_match"], result["parse_rate"]) == (0.25, 0.5, 0.75)
    for name in ("exact_match", "symbolic_match", "parse_rate"):
        p = result[name]
        assert result[f"{name}_stderr"] == pytest.approx(math.sqrt(p * (1 - p) / n))


def test_tutorial_accuracy_error_bar(series_metric):
    # The tutorial's "0.868 ± 0.017 on 400 examples": the ± is sqrt(p (1 - p) / n), both for
    # 0.868 itself and for the nearest reachable count, 347 of 400 (0.8675).
    n, right = 400, 347
    predictions = ["x + O(x**6)"] * right + ["2*x + O(x**6)"] * (n - right)
    result = series_metric.compute(predictions=predictions, references=["x + O(x**6)"] * n)
    assert result["symbolic_match"] == pytest.approx(right / n)
    assert round(result["symbolic_match_stderr"], 3) == 0.017
    assert round(math.sqrt(0.868 * (1 - 0.868) / n), 3) == 0.017


def test_pathological_pair_times_out_and_the_next_pair_still_runs(series_metric):
    predictions = [SERIES, SLOW_PREDICTION, SERIES_REWRITTEN]
    references = [SERIES, SLOW_REFERENCE, SERIES]
    result = series_metric.compute(predictions=predictions, references=references, timeout=1.0)
    assert result["timeouts"] == 1
    # The timed-out pair parsed but is not credited as equivalent; the pair after it is scored by a fresh
    # worker.
    assert result["symbolic_match"] == pytest.approx(2 / 3)
    assert result["parse_rate"] == 1.0


def test_non_positive_timeout_is_rejected(fresh_series_metric):
    with pytest.raises(ValueError, match="timeout must be a positive"):
        _score_one(fresh_series_metric, SERIES, SERIES, timeout=0)


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
def test_worker_processes_are_not_left_behind(series_metric):
    before = _child_pids()
    _score_one(series_metric, SERIES, SERIES)
    _score_one(series_metric, SLOW_PREDICTION, SLOW_REFERENCE, timeout=0.5)
    assert _child_pids() == before
