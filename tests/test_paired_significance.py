"""scripts/benchmarks/paired_significance.py: two evaluate_model reports through sacreBLEU's paired tests, or
McNemar's exact test where they are scored by exact match."""

import json

import pytest

from benchmarks.paired_significance import compare, main, read_report
from hf_vanilla_transformer.errors import CorruptFileError, ExistingPathError, MissingPathError, UsageError

REFERENCES = [f"A dog number {i} runs across the green field near the old house." for i in range(60)]


def _report(path, predictions, references=REFERENCES):
    examples = [
        {"source": "", "reference": r, "prediction": p} for r, p in zip(references, predictions, strict=True)
    ]
    path.write_text(json.dumps({"metrics": {"bleu": 0.0}, "examples": examples}), encoding="utf-8")
    return path


def test_a_better_system_is_found_significant_and_an_equal_one_is_not(tmp_path):
    worse = [r if i % 4 else "A cat sleeps." for i, r in enumerate(REFERENCES)]  # a quarter wrong
    better = [r if i % 20 else "A cat sleeps." for i, r in enumerate(REFERENCES)]  # a twentieth wrong
    result = compare(
        read_report(_report(tmp_path / "w.json", worse)),
        read_report(_report(tmp_path / "b.json", better)),
        ar_trials=2000,
        bootstrap_samples=200,
    )
    assert (
        result["bleu"]["other"] > result["bleu"]["baseline"]
        and result["chrf"]["other"] > result["chrf"]["baseline"]
    )
    assert result["bleu"]["p_value_approximate_randomization"] < 0.01
    assert 0 < result["bleu"]["baseline_95ci"] and "nrefs:1" in result["bleu"]["signature"]
    # as good, wrong on other sentences: no difference to find
    level = [r if i % 4 != 1 else "A cat sleeps." for i, r in enumerate(REFERENCES)]
    same = compare(
        read_report(tmp_path / "w.json"), read_report(_report(tmp_path / "l.json", level)), 2000, 200
    )
    assert same["bleu"]["p_value_approximate_randomization"] > 0.2


def test_the_command_writes_its_result_and_refuses_what_cannot_be_compared(tmp_path, capsys):
    baseline = _report(tmp_path / "a.json", REFERENCES[::-1])
    other = _report(tmp_path / "b.json", REFERENCES)
    out = tmp_path / "paired.json"
    main(
        ["--baseline", str(baseline), "--other", str(other), "--output_file", str(out), "--ar_trials", "500"]
    )
    assert json.loads(out.read_text())["bleu"]["other"] == pytest.approx(100.0)
    assert "p = " in capsys.readouterr().out
    with pytest.raises(ExistingPathError, match="--overwrite"):  # an earlier result is not replaced unasked
        main(["--baseline", str(baseline), "--other", str(other), "--output_file", str(out)])
    with pytest.raises(MissingPathError, match="No report"):
        main(["--baseline", str(tmp_path / "none.json"), "--other", str(other)])
    (tmp_path / "broken.json").write_text('{"examples": [', encoding="utf-8")
    with pytest.raises(CorruptFileError, match="does not parse as JSON"):
        read_report(tmp_path / "broken.json")
    (tmp_path / "bare.json").write_text('{"metrics": {"bleu": 30}}', encoding="utf-8")
    with pytest.raises(UsageError, match="holds no predictions"):
        read_report(tmp_path / "bare.json")
    other_data = _report(tmp_path / "c.json", REFERENCES[:30], references=REFERENCES[:30])
    with pytest.raises(UsageError, match="different references"):
        compare(read_report(baseline), read_report(other_data))


def _exact_match_report(path, right):
    """A series-like report: `right[i]` says whether example i is predicted exactly."""
    examples = [
        {"source": f"sin({i}*a*x)", "reference": f"{i}*a*x + O(x**6)", "prediction": f"{i}*a*x + O(x**6)"}
        if ok
        else {"source": f"sin({i}*a*x)", "reference": f"{i}*a*x + O(x**6)", "prediction": "O(x**6)"}
        for i, ok in enumerate(right)
    ]
    metrics = {"exact_match": sum(right) / len(right)}
    path.write_text(json.dumps({"metrics": metrics, "examples": examples}), encoding="utf-8")
    return path


def test_exact_match_reports_go_through_mcnemars_exact_test(tmp_path, capsys):
    baseline = _exact_match_report(tmp_path / "a.json", [i % 2 == 0 for i in range(200)])  # 100 right
    # right on every example the baseline is, and on 30 more: 30 discordant pairs, all one way
    better = _exact_match_report(tmp_path / "b.json", [i % 2 == 0 or i % 20 < 6 for i in range(200)])
    result = main(["--baseline", str(baseline), "--other", str(better)])
    entry = result["exact_match"]
    assert (entry["baseline"], entry["other"]) == (0.5, 0.65)
    assert (entry["right_only_in_baseline"], entry["right_only_in_other"]) == (0, 30)
    assert entry["p_value_mcnemar_exact"] == pytest.approx(2 / 2**30)  # both tails of 30 coin flips
    assert "McNemar" in capsys.readouterr().out and "bleu" not in result
    swapped = main(["--baseline", str(better), "--other", str(baseline)])["exact_match"]
    assert (swapped["right_only_in_baseline"], swapped["right_only_in_other"]) == (30, 0)
    assert swapped["p_value_mcnemar_exact"] == entry["p_value_mcnemar_exact"]
    # right where the baseline is but on 2 of its examples, and on 8 it is not: 2 against 8 of 10 coin flips
    uneven = [(i % 2 == 0 and i not in (0, 2)) or i in range(1, 17, 2) for i in range(200)]
    uneven = main(
        ["--baseline", str(baseline), "--other", str(_exact_match_report(tmp_path / "u.json", uneven))]
    )
    assert (
        uneven["exact_match"]["right_only_in_baseline"],
        uneven["exact_match"]["right_only_in_other"],
    ) == (2, 8)
    assert uneven["exact_match"]["p_value_mcnemar_exact"] == pytest.approx(2 * (1 + 10 + 45) / 2**10)
    # as good, right on other examples: 100 discordant pairs each way, no difference to find
    level = _exact_match_report(tmp_path / "l.json", [i % 2 == 1 for i in range(200)])
    same = main(["--baseline", str(baseline), "--other", str(level)])["exact_match"]
    assert same["p_value_mcnemar_exact"] == pytest.approx(1.0)
    translation = _report(tmp_path / "t.json", REFERENCES)
    with pytest.raises(
        UsageError, match="scored by exact_match and .* by bleu; compare two reports of the same"
    ):
        main(["--baseline", str(baseline), "--other", str(translation)])
    other_metric = json.loads(baseline.read_text()) | {"metrics": {"rouge1": 0.5}}
    (tmp_path / "rouge.json").write_text(json.dumps(other_metric), encoding="utf-8")
    with pytest.raises(UsageError, match=r"\(rouge1\) hold neither bleu nor exact_match"):
        main(["--baseline", str(tmp_path / "rouge.json"), "--other", str(tmp_path / "rouge.json")])
    judged_otherwise = json.loads(baseline.read_text()) | {"metrics": {"exact_match": 0.9}}
    (tmp_path / "lenient.json").write_text(json.dumps(judged_otherwise), encoding="utf-8")
    with pytest.raises(
        UsageError,
        match="--baseline report gives exact match 0.9, but its predictions match .* 0.5 of the time",
    ):
        main(["--baseline", str(tmp_path / "lenient.json"), "--other", str(baseline)])
