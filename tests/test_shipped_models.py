"""The trained models shipped in model_cards/<name>/ are what their cards say: each folder loads with
`trust_remote_code=True` where the package cannot be imported and reproduces the predictions of the report its
card quotes, and the card's model-index holds the report's figures."""

import gzip
import hashlib
import json
import re
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from huggingface_hub import ModelCard

from .remote_code import run_without_package
from .script_runner import run_script_file
from .test_script_help import documented_command_lines

ROOT = Path(__file__).resolve().parents[1]
# A shipped model is a card folder with weights; every one of them is checked.
SHIPPED = sorted(path.parent for path in (ROOT / "model_cards").glob("*/model.safetensors"))
CHECKED_PREDICTIONS = 25

# The report's decoding, as scripts/evaluate_model.py runs it (evaluation.generate_texts), one source at a
# time.
DECODE_SCRIPT = """
    import json, sys
    import torch
    from transformers import AutoModelForSeq2SeqLM, AutoTokenizer
    folder, generation, sources = sys.argv[1], json.loads(sys.argv[2]), json.loads(sys.argv[3])
    model = AutoModelForSeq2SeqLM.from_pretrained(folder, trust_remote_code=True).eval()
    tokenizer = AutoTokenizer.from_pretrained(folder, trust_remote_code=True)
    predictions = []
    for source in sources:
        batch = tokenizer([source], return_tensors="pt")
        kwargs = dict(generation)
        max_new_tokens = kwargs.pop("max_new_tokens", None)
        if max_new_tokens is None:
            max_new_tokens = batch["input_ids"].shape[1] + 50
        with torch.inference_mode():
            ids = model.generate(**batch, **kwargs, max_length=1 + max_new_tokens)
        predictions.append(tokenizer.decode(ids[0], skip_special_tokens=True).strip())
    print(json.dumps(predictions))
"""


def _quoted_report(folder: Path) -> dict:
    """The report whose figures the card's model-index gives (its `eval-test-*.json`)."""
    reports = sorted(folder.glob("eval-test-*.json"))
    assert reports, f"{folder} ships no evaluate_model.py report"
    card_figures = {round(r.metric_value, 2) for r in ModelCard.load(folder / "README.md").data.eval_results}
    for path in reports:
        report = json.loads(path.read_text(encoding="utf-8"))
        if round(report["metrics"][_headline_metric(report)], 2) in card_figures:
            return report
    raise AssertionError(f"no report in {folder} has the card's headline figure {sorted(card_figures)}")


def _headline_metric(report: dict) -> str:
    return "bleu" if report["data"]["task"] == "translation" else "exact_match"


def test_models_are_shipped():
    assert SHIPPED, "no model_cards/<name>/ folder holds model.safetensors"


@pytest.mark.parametrize("folder", SHIPPED, ids=lambda p: p.name)
def test_folder_is_a_complete_hub_repository(folder):
    names = {path.name for path in folder.iterdir()}
    required = {
        "README.md",
        "config.json",
        "generation_config.json",
        "model.safetensors",
        "tokenizer.json",
        "tokenizer_config.json",
        "configuration_vanilla_transformer.py",
        "modeling_vanilla_transformer.py",
        "pipeline_seq2seq.py",
        "sentences.py",  # which the pipeline imports
    }
    assert required <= names, f"{folder.name} lacks {sorted(required - names)}"
    assert not [name for name in names if name.endswith((".bin", ".pt", ".pth", ".pkl"))]  # safetensors only


@pytest.mark.parametrize("folder", SHIPPED, ids=lambda p: p.name)
def test_shipped_model_reproduces_its_report_without_the_package(folder, tmp_path):
    report = _quoted_report(folder)
    examples = report["examples"][:CHECKED_PREDICTIONS]
    predictions = run_without_package(
        DECODE_SCRIPT,
        str(folder),
        json.dumps(report["generation"]),
        json.dumps([example["source"] for example in examples]),
        cwd=tmp_path,
    )
    expected = [example["prediction"] for example in examples]
    pairs = enumerate(zip(predictions, expected, strict=True))
    mismatches = [(i, got, want) for i, (got, want) in pairs if got != want]
    assert not mismatches, f"{folder.name}: predictions differ from the report at {mismatches}"


@pytest.mark.parametrize("folder", SHIPPED, ids=lambda p: p.name)
def test_card_model_index_holds_the_reports_figures(folder):
    card = ModelCard.load(folder / "README.md")
    reports = [json.loads(path.read_text(encoding="utf-8")) for path in folder.glob("eval-*.json")]
    measured = {
        round(value, 2)
        for report in reports
        for value in report["metrics"].values()
        if isinstance(value, int | float)
    }
    # and the breakdowns a series report adds (exact match on new expressions, say)
    measured |= {
        round(row["exact_match"], 2)
        for report in reports
        for rows in report.values()
        if isinstance(rows, list)
        for row in rows
        if isinstance(row, dict) and "exact_match" in row
    }
    for result in card.data.eval_results:
        assert round(result.metric_value, 2) in measured, (
            f"{folder.name}'s card gives {result.metric_type} = {result.metric_value}, which no report holds"
        )
    assert "custom_code" in card.data.tags  # the Hub's marker for trust_remote_code models


@pytest.mark.parametrize("folder", SHIPPED, ids=lambda p: p.name)
def test_card_usage_code_runs_against_the_folder(folder, tmp_path):
    """The card's snippet as a Hub user runs it, with the shipped folder standing for the Hub id it names."""
    card = (folder / "README.md").read_text(encoding="utf-8")
    code = re.search(r"## How to use.*?```python\n(.*?)```", card, re.S).group(1)
    assert f'"<owner>/{folder.name}"' in code  # becomes the repository id at a push
    code = code.replace(f'"<owner>/{folder.name}"', repr(str(folder)))
    script = code + "\nimport json\nprint(json.dumps('ran'))\n"
    assert run_without_package(script, cwd=tmp_path) == "ran"


def _readme_use_snippets() -> list[str]:
    """The snippets of the README's "Use" section that show their output (a `# [...]` line)."""
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    section = re.search(r"^## Use\n(.*?)^## ", readme, re.S | re.M).group(1)
    return [
        code for code in re.findall(r"```python\n(.*?)```", section, re.S) if re.search(r"^# \[", code, re.M)
    ]


def test_readme_uses_both_shipped_models():
    snippets = _readme_use_snippets()
    for folder in SHIPPED:
        assert any(f"model_cards/{folder.name}" in code for code in snippets), folder.name


@pytest.mark.parametrize(
    "code", _readme_use_snippets(), ids=lambda code: re.search(r"model_cards/([\w-]+)", code)[1]
)
def test_readme_snippet_prints_what_it_shows_and_quietly(code):
    """A "Use" snippet, run from the repository's root as a newcomer runs it from a fresh clone: it prints the
    output the README shows, and transformers prints no warning on the way."""
    shown = re.findall(r"^# (\[.*\])$", code, re.M)
    result = subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        timeout=600,
        cwd=ROOT,
        stdin=subprocess.DEVNULL,
    )
    assert result.returncode == 0, result.stderr[-3000:]
    printed = [line for line in result.stdout.strip().splitlines() if line.startswith("[")]
    assert printed[: len(shown)] == shown
    noisy = [line for line in result.stderr.splitlines() if re.search(r"(?i)warn|deprecat|ignored", line)]
    assert not noisy, noisy


@pytest.mark.parametrize("folder", SHIPPED, ids=lambda p: p.name)
def test_shipped_folder_carries_the_current_model_code(folder):
    from hf_vanilla_transformer.interop.updates import outdated_code_files

    outdated = outdated_code_files(folder)
    assert not outdated, (
        f"{folder.name}'s {', '.join(outdated)} differ from the package's: run "
        f"`python scripts/update_model_code.py --model model_cards/{folder.name}`"
    )


@pytest.mark.parametrize("folder", SHIPPED, ids=lambda p: p.name)
def test_reports_record_the_data_of_their_task_and_no_other_tokenizer(folder):
    """Evaluation decodes with the model folder's own tokenizer: a report names no other one, and the data it
    records is of the folder's task."""
    task = "series" if "series" in folder.name else "translation"
    for path in folder.glob("eval-*.json"):
        data = json.loads(path.read_text(encoding="utf-8"))["data"]
        assert "tokenizer" not in data and data["task"] == task, path.name


def _commands_on_shipped_folders() -> list[tuple[str, str, list[str]]]:
    """(where, script, arguments) of every command in the README, the docs, the cards and the scripts'
    docstrings that names a folder in model_cards/."""
    return [
        (where, script, shlex.split(arguments))
        for where, script, arguments in documented_command_lines()
        if "model_cards/" in arguments
    ]


def _contents(folder: Path) -> dict[str, str]:
    return {
        str(path.relative_to(folder)): hashlib.sha256(path.read_bytes()).hexdigest()
        for path in sorted(folder.rglob("*"))
        if path.is_file()
    }


def test_documented_commands_leave_the_shipped_folders_as_they_are(tmp_path):
    """Every documented command that names a shipped folder, run as written on a copy of model_cards/ (an
    upload as its dry run: the Hub is out of reach here; fine-tuning for one step, on the Multi30k fixture as
    the user's pairs), in a fresh working directory: each succeeds, and not a byte of the folders changes."""
    from hf_vanilla_transformer.tasks.translation.data import load_parallel_text

    commands = _commands_on_shipped_folders()
    assert {"plot_attention", "push_to_hub"} <= {script for _, script, _ in commands}, commands
    copies = tmp_path / "copies" / "model_cards"
    shutil.copytree(ROOT / "model_cards", copies)
    before = _contents(copies)
    work = tmp_path / "work"
    work.mkdir()
    for where, script, arguments in commands:
        arguments = [argument.replace("model_cards/", f"{copies}/") for argument in arguments]
        if "--repo_id" in arguments:
            at = arguments.index("--repo_id")
            arguments[at : at + 2] = [] if "--dry_run" in arguments else ["--dry_run"]
        if script == "train":
            data = work / arguments[arguments.index("--dataset") + 1]
            if not data.exists():
                load_parallel_text(ROOT / "tests" / "fixtures" / "multi30k", "de", "en").save_to_disk(data)
            arguments += ["--max_steps", "1", "--save_steps", "1", "--max_tokens", "600", "--overwrite"]
        if script in ("translate", "benchmarks/startup"):  # the user's file: the first German test sentences
            lines = (ROOT / "tests" / "fixtures" / "multi30k" / "test_2016_flickr.de.gz").read_bytes()
            source = work / arguments[arguments.index("--input") + 1]
            source.write_text("\n".join(gzip.decompress(lines).decode().splitlines()[:8]) + "\n")
            arguments += ["--overwrite"]
        if script == "benchmarks/startup":  # a round of the file rows: what it does to the folder, not time
            arguments += ["--runs", "1", "--only_files"]
        result = run_script_file(f"{script}.py", *arguments, cwd=work)
        assert result.returncode == 0, f"{where}: {shlex.join(arguments)}\n{result.stderr[-3000:]}"
    assert _contents(copies) == before
