"""The main job, `scripts/quickstart.py`, runs end to end (on a cut-down setting: seconds of training instead
of its default budget), and says how its steps compare with those of the README's run, whose figures it
holds."""

import dataclasses
import json
import logging
import re
import shlex

import pytest

from hf_vanilla_transformer.cli import parse_arguments
from quickstart import (
    OPTIONS_FILE,
    README_EXACT_MATCH,
    README_MACHINE,
    README_STEPS,
    QuickstartArguments,
    check_output_folder,
    fewer_steps_advice,
    run_quickstart,
)

from .script_runner import ROOT, run_script_file


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
    # The budget ended training: the run says how many steps it bought and, beside its score, whether they
    # were under half the README's.
    bought = re.search(r"The 0\.05-minute time budget bought ([\d,]+) optimizer steps; raise --max", printed)
    assert bought, printed
    steps = int(bought[1].replace(",", ""))
    advice = fewer_steps_advice(steps, args)
    assert (advice is None and "the README's run trained" not in printed) or advice in printed
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


def test_a_run_under_half_the_readmes_steps_says_why_its_score_is_lower_and_how_to_train_longer():
    advice = fewer_steps_advice(231, QuickstartArguments())
    assert advice.splitlines() == [
        "    This run trained 231 steps in 6 minutes; the README's run trained 3,024 in 6 minutes on",
        "    2 CPU cores with nothing else running, for exact match 0.660. The score follows the steps,",
        "    which the budget and the machine's speed decide. To train about as many steps here:",
        "    python scripts/quickstart.py --max_train_minutes 79",  # 6 minutes x 3,024 / 231, rounded up
    ]
    assert fewer_steps_advice(1500, QuickstartArguments()).endswith("--max_train_minutes 13")
    # The command keeps the options the run was given, so that "here" is the same run, longer; and it parses.
    given = QuickstartArguments(
        max_train_minutes=0.5, symbols=["a", "b", "c"], output_dir="my run", overwrite=True
    )
    command = fewer_steps_advice(1000, given).splitlines()[-1]
    assert command == (
        "    python scripts/quickstart.py --output_dir 'my run' --symbols a b c --max_train_minutes 2 "
        "--overwrite true"
    )
    (parsed,) = parse_arguments(QuickstartArguments, args=shlex.split(command)[2:])
    assert parsed == dataclasses.replace(given, max_train_minutes=2.0)
    assert "trained 0 steps" in fewer_steps_advice(0, QuickstartArguments())
    # Half the README's steps or more: nothing to say.
    assert fewer_steps_advice(README_STEPS // 2, QuickstartArguments()) is None
    assert fewer_steps_advice(2950, QuickstartArguments()) is None


def test_the_readme_quotes_the_run_the_quickstart_compares_with():
    """The README's quickstart figures are the quickstart's constants (and its default budget), and it names
    the command that produced them."""
    readme = " ".join((ROOT / "README.md").read_text(encoding="utf-8").split())
    minutes = QuickstartArguments.max_train_minutes
    assert "python scripts/quickstart.py" in readme
    assert f"for {minutes:g} minutes" in readme
    assert f"on {README_MACHINE}" in readme
    assert f"that run trained {README_STEPS:,} steps" in readme
    assert f"exact match {README_EXACT_MATCH:.3f} ±" in readme
