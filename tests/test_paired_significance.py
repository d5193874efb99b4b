"""scripts/benchmarks/paired_significance.py: two evaluate_model reports through sacreBLEU's paired tests."""

import json

import pytest

from benchmarks.paired_significance import compare, main, read_report
from hf_vanilla_transformer.errors import CorruptFileError, ExistingPathError, MissingPathError, UsageError

REFERENCES = [f"A dog number {i} runs across the green field near the old house." for i in range(60)]


def _report(path, predictions, references=REFERENCES):
    examples = [
        {"source": "", "reference": r, "prediction": p} for r, p in zip(references, predictions, strict=True)
    ]
    path.write_text(json.dumps({"metrics": {}, "examples": examples}), encoding="utf-8")
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
    path.write_text(json.dumps({"metrics": {"exact_match": 0.0}, "examples": examples}), encoding="utf-8")
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
    # as good, right on other examples: 100 discordant pairs each way, no difference to find
    level = _exact_match_report(tmp_path / "l.json", [i % 2 == 1 for i in range(200)])
    same = main(["--baseline", str(baseline), "--other", str(level)])["exact_match"]
    assert same["p_value_mcnemar_exact"] == pytest.approx(1.0)
    translation = _report(tmp_path / "t.json", REFERENCES)
    with pytest.raises(UsageError, match="same task"):
        main(["--baseline", str(baseline), "--other", str(translation)])
