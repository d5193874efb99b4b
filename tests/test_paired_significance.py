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
