"""The main job, `scripts/quickstart.py`, runs end to end (on a cut-down setting: seconds of training instead
of its default budget)."""

import json

from quickstart import QuickstartArguments, run_quickstart  # scripts/quickstart.py (see conftest.py)


def test_quickstart_runs_end_to_end(tmp_path, capsys):
    args = QuickstartArguments(
        output_dir=str(tmp_path),
        num_examples=400,
        test_size=20,
        vocab_size=200,
        preset="transformer-tiny",
        train_minutes=0.05,
        max_tokens=2000,
    )
    result = run_quickstart(args)
    printed = capsys.readouterr().out
    for step in ("1/5", "2/5", "3/5", "4/5", "5/5", "model:", "CAS:", "up to 2 terms in the symbols a, b"):
        assert step in printed
    metrics = result["metrics"]
    assert metrics["n"] == 20 and 0.0 <= metrics["exact_match"] <= 1.0
    report = json.loads(next((tmp_path / "run" / "final").glob("eval-test-*.json")).read_text())
    assert report["metrics"]["exact_match"] == metrics["exact_match"]
