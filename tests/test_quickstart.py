"""The main job, `scripts/quickstart.py`, runs end to end (on a cut-down setting: seconds of training instead
of its default budget)."""

import json
import logging
import re

import pytest

from quickstart import (
    OPTIONS_FILE,
    QuickstartArguments,
    check_output_folder,
    run_quickstart,
)

from .script_runner import run_script_file


def test_quickstart_runs_end_to_end_without_a_transformers_warning(tmp_path, capsys, caplog):
    args = QuickstartArguments(
        output_dir=str(tmp_path),
        num_examples=400,
        test_size=20,
        vocab_size=200,
        preset="transformer-tiny",
        max_train_minutes=0.05,
        max_tokens=2000,
    )
    with caplog.at_level(logging.WARNING, logger="transformers"):
        result = run_quickstart(args)
    captured = capsys.readouterr()
    printed = captured.out
    # Generation warnings (a flag ignored, two lengths set) come from the ordinary path's own calls.
    warned = [r.getMessage() for r in caplog.records if r.name.startswith("transformers.generation")]
    warned += [
        line for line in captured.err.splitlines() if re.search(r"may be ignored|seem to have been set", line)
    ]
    assert not warned, warned
    for step in ("1/5", "2/5", "3/5", "4/5", "5/5", "model:", "CAS:", "up to 2 terms in the symbols a, b"):
        assert step in printed
    metrics = result["metrics"]
    assert metrics["n"] == 20 and 0.0 <= metrics["exact_match"] <= 1.0
    report = json.loads(next((tmp_path / "run" / "final").glob("eval-test-*.json")).read_text())
    assert report["metrics"]["exact_match"] == metrics["exact_match"]


def test_quickstart_refuses_impossible_options_before_any_work(tmp_path):
    result = run_script_file("quickstart.py", "--max_train_minutes", "-1",
                             "--output_dir", str(tmp_path / "q"), cwd=tmp_path)  # fmt: skip
    assert result.returncode == 2
    assert result.stderr.strip().splitlines() == ["error: --max_train_minutes must be more than 0, got -1.0."]
    assert not (tmp_path / "q").exists()
    with pytest.raises(ValueError, match=r"--num_examples \(300\) must exceed --test_size \(300\)"):
        QuickstartArguments(num_examples=300)
    with pytest.raises(ValueError, match="Unknown --preset 'tiny'"):
        QuickstartArguments(preset="tiny")


def test_quickstart_remakes_only_its_own_folder_unless_asked(tmp_path):
    taken = tmp_path / "mine"
    (taken / "data").mkdir(parents=True)
    (taken / "data" / "notes.txt").write_text("kept")
    result = run_script_file("quickstart.py", "--output_dir", str(taken), cwd=tmp_path)
    lines = result.stderr.strip().splitlines()
    assert result.returncode == 2 and len(lines) == 1, result.stderr[-2000:]
    assert f"--output_dir {taken} holds files that no earlier quickstart wrote" in lines[0]
    assert "--overwrite" in lines[0]
    assert [path.name for path in taken.rglob("*")] == ["data", "notes.txt"]
    # an earlier quickstart's folder (it wrote its options first) is remade; so is any folder when asked
    (taken / OPTIONS_FILE).write_text("{}")
    check_output_folder(taken, overwrite=False)
    (taken / OPTIONS_FILE).unlink()
    check_output_folder(taken, overwrite=True)
    check_output_folder(tmp_path / "new", overwrite=False)
