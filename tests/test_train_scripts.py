"""The Trainer script and the tools that read its runs, end to end on the committed Multi30k fixture
(`translation_data` in conftest.py), from the paper's Multi30k recipe; several processes are in
test_scale_out.py, the plain Accelerate loop in test_accelerate_loop.py."""

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import datasets
import pytest
import torch
from transformers import AutoModelForSeq2SeqLM

from hf_vanilla_transformer.training import LOSS_LOG_NAME, LOSS_PLOT_NAME, paper_peak_learning_rate

from .script_runner import run_script_file

ROOT = Path(__file__).resolve().parents[1]
FIXTURE = Path(__file__).parent / "fixtures" / "multi30k"


def _run(args, cwd, timeout=600):
    """`python script options...`, or `python -m accelerate.commands.launch ...`, which starts fresh
    interpreters of its own; one thread each, as two of them may run at once."""
    if args[1] == "-m":
        env = {**os.environ, "PYTHONPATH": str(ROOT), "OMP_NUM_THREADS": "1"}
        result = subprocess.run(
            args, cwd=cwd, env=env, capture_output=True, text=True, timeout=timeout, stdin=subprocess.DEVNULL
        )
    else:
        result = run_script_file(*args[1:], cwd=cwd, env={"OMP_NUM_THREADS": "1"})
    assert result.returncode == 0, (
        f"{' '.join(map(str, args))}\n{result.stdout[-2000:]}\n{result.stderr[-4000:]}"
    )
    return result


# The paper's Multi30k recipe: its schedule (eq. 3) counts steps, not minutes, so a run's losses do not depend
# on the machine's speed and runs can be compared step by step. The shipped recipe differs only in that.
RECIPE = ROOT / "scripts" / "recipes" / "multi30k_de_en_paper.yaml"
QUALITY_CURVE = ROOT / "scripts" / "benchmarks" / "quality_curve.py"


def _tiny(translation_data):
    """Overrides that shrink the Multi30k recipe to the fixture: its data and a tiny model."""
    return [
        "--dataset",
        str(translation_data / "data"),
        "--tokenizer",
        str(translation_data / "tokenizer"),
        "--preset",
        "transformer-tiny",
        "--max_source_length",
        "96",
        "--max_target_length",
        "96",
    ]


@pytest.fixture(scope="module")
def trained_run(translation_data, tmp_path_factory):
    """The paper's Multi30k recipe, overridden on the command line to a six-step run with evaluation
    (BLEU) every three steps and the best checkpoint kept; the Trainer, not the recipe, picks the device."""
    out = tmp_path_factory.mktemp("trainer") / "run"
    _run([sys.executable, str(ROOT / "scripts" / "train.py"), str(RECIPE), *_tiny(translation_data),
          "--max_tokens", "600", "--max_steps", "6", "--warmup_steps", "3", "--eval_steps", "3",
          "--save_steps", "3", "--logging_steps", "1", "--max_eval_examples", "8",
          "--generation_max_length", "12", "--generation_num_beams", "2", "--load_best_model_at_end",
          "--output_dir", str(out)],
         cwd=out.parent)  # fmt: skip
    return out


def test_trainer_script_trains_evaluates_and_saves(trained_run):
    state = json.loads((trained_run / "checkpoint-6" / "trainer_state.json").read_text())
    evals = [entry for entry in state["log_history"] if "eval_bleu" in entry]
    assert len(evals) == 2 and all(0.0 <= entry["eval_bleu"] <= 100.0 for entry in evals)
    assert state["best_metric"] == max(entry["eval_bleu"] for entry in evals)
    assert (trained_run / LOSS_PLOT_NAME).exists()
    # Options from the command line won over the recipe's (6 steps, warmup 3); the rest of the recipe held:
    # lr_scale 0.5 of eq. 3's peak, reached at the end of warmup.
    records = [json.loads(line) for line in (trained_run / LOSS_LOG_NAME).read_text().splitlines()]
    rates = [r["learning_rate"] for r in records if "learning_rate" in r]
    assert len(rates) == 6 and max(rates) == pytest.approx(0.5 * paper_peak_learning_rate(32, 3))
    model = AutoModelForSeq2SeqLM.from_pretrained(trained_run / "final")
    assert model.config.vocab_size == 400
    assert model.config.task == "translation"  # recorded for the tools that refuse a model of another task
    assert model.config.langs == ["de", "en"]  # recorded for the pipeline's sentence rules
    # The lengths it was trained with (--max_source_length 96): decoding cuts a longer source there.
    assert (model.config.max_source_length, model.config.max_target_length) == (96, 96)
    assert (trained_run / "final" / "tokenizer.json").exists()
    assert (trained_run / "final" / "pipeline_seq2seq.py").exists()
    assert (trained_run / "final" / "sentences.py").exists()  # which the pipeline imports


def test_a_run_its_time_budget_ends_says_how_many_steps_it_bought(translation_data, tmp_path):
    """A run that --max_train_minutes ends says once, at its end, how many optimizer steps its budget bought;
    so does a run resumed from the checkpoint that ended it, which has only its final folder left to save."""
    out = tmp_path / "run"
    options = [str(ROOT / "scripts" / "train.py"), str(RECIPE), *_tiny(translation_data),
               "--max_tokens", "600", "--max_train_minutes", "0.01", "--max_steps", "100000",
               "--warmup_steps", "3", "--eval_strategy", "no", "--save_steps", "100000",
               "--logging_steps", "1000", "--output_dir", str(out)]  # fmt: skip
    bought = re.compile(
        r"The 0\.01-minute time budget bought ([\d,]+) optimizer steps; "
        r"raise --max_train_minutes above 0\.01 to train longer\.$"
    )
    for resume in ([], ["--resume_from_checkpoint", "true"]):
        lines = _run([sys.executable, *options, *resume], cwd=tmp_path).stdout.splitlines()
        reports = [match for line in lines if (match := bought.match(line))]
        assert len(reports) == 1, lines
        # The budget's stop saved the checkpoint of its last step: the steps it bought.
        (checkpoint,) = out.glob("checkpoint-*")
        assert int(reports[0][1].replace(",", "")) == int(checkpoint.name.split("-")[1]) > 0
        assert lines[lines.index(reports[0][0]) + 1] == f"Saved the trained model to {out / 'final'}"
        shutil.rmtree(out / "final")  # a run stopped after its checkpoint, before its final folder


def test_quality_curve_scores_the_run_at_each_checkpoint(trained_run, translation_data, tmp_path):
    result = _run(
        [sys.executable, str(QUALITY_CURVE), "--run_dir", str(trained_run),
         "--last", "2", "--task", "translation", "--dataset", str(translation_data / "data"),
         "--split", "validation", "--max_examples", "6", "--num_beams", "1",
         "--output_dir", str(tmp_path / "curve")],
        cwd=tmp_path,
    )  # fmt: skip
    curve = json.loads((tmp_path / "curve" / "curve.json").read_text())
    assert curve["label"] == trained_run.name and curve["metric"] == "bleu"
    points = curve["points"]
    assert [p["step"] for p in points] == [3, 6]
    assert points[0]["checkpoints"] == ["checkpoint-3"] and points[1]["checkpoints"] == [
        "checkpoint-3",
        "checkpoint-6",
    ]
    assert 0 < points[0]["minutes"] < points[1]["minutes"] and all(
        0 <= p["metrics"]["bleu"] <= 100 for p in points
    )
    assert (tmp_path / "curve" / "curve.png").stat().st_size > 1000
    assert "| minutes | step | checkpoints averaged | bleu |" in result.stdout


def test_quality_curve_of_one_run_per_budget_beside_an_earlier_curve(trained_run, translation_data, tmp_path):
    """Several runs (a schedule decayed by the clock, one run per budget) are one point each, at the run's
    end, in order of minutes; `--compare` adds an earlier curve.json to the plot."""
    shorter = tmp_path / "shorter-budget"
    shutil.copytree(trained_run / "checkpoint-3", shorter / "checkpoint-3")
    common = ["--task", "translation", "--dataset", str(translation_data / "data"), "--split", "validation",
              "--max_examples", "6", "--num_beams", "1"]  # fmt: skip
    script = str(QUALITY_CURVE)
    _run([sys.executable, script, "--run_dir", str(trained_run), "--every", "9", "--last", "1", *common,
          "--output_dir", str(tmp_path / "one-run")], cwd=tmp_path)  # fmt: skip
    _run([sys.executable, script, "--run_dir", str(trained_run), str(shorter), "--last", "1", *common,
          "--label", "by budget", "--compare", str(tmp_path / "one-run" / "curve.json"),
          "--output_dir", str(tmp_path / "budgets")], cwd=tmp_path)  # fmt: skip
    curve = json.loads((tmp_path / "budgets" / "curve.json").read_text())
    assert curve["label"] == "by budget"
    assert [(p["step"], p["checkpoints"]) for p in curve["points"]] == [
        (3, ["checkpoint-3"]),
        (6, ["checkpoint-6"]),
    ]
    # The same checkpoint, scored the same way, scores the same in either curve.
    one_run = json.loads((tmp_path / "one-run" / "curve.json").read_text())["points"]
    assert [p["step"] for p in one_run] == [6]
    assert one_run[0]["metrics"]["bleu"] == curve["points"][1]["metrics"]["bleu"]
    assert (tmp_path / "budgets" / "curve.png").stat().st_size > 1000


@pytest.mark.parametrize(
    "options, message",
    [
        (["--every", "2", "--output_dir", "out"], "--every picks checkpoints within one run"),
        ([], "With several runs, say where the curve goes: --output_dir."),
        (["--output_dir", "out", "--compare", "missing.json"], "No curve at missing.json"),
        (["--output_dir", "out", "--compare", "old.json"], "old.json is not a curve.json"),
    ],
)
def test_quality_curve_refuses_what_it_cannot_draw(trained_run, tmp_path, options, message):
    (tmp_path / "old.json").write_text("[]")  # a list of points, without the curve's label and metric
    result = run_script_file(
        QUALITY_CURVE, "--run_dir", str(trained_run), str(trained_run),
        "--task", "translation", "--dataset", "unused", *options, cwd=tmp_path,
    )  # fmt: skip
    assert result.returncode == 2 and message in result.stderr and "Traceback" not in result.stderr


def test_evaluate_script_writes_report(trained_run, translation_data, tmp_path):
    report_file = tmp_path / "report.json"
    result = _run(
        [
            sys.executable,
            str(ROOT / "scripts" / "evaluate_model.py"),
            "--model",
            str(trained_run / "final"),
            "--task",
            "translation",
            "--dataset",
            str(translation_data / "data"),
            "--split",
            "test",
            "--max_examples",
            "6",
            "--batch_size",
            "4",
            "--max_new_tokens",
            "8",
            "--output_file",
            str(report_file),
        ],
        cwd=tmp_path,
    )
    report = json.loads(report_file.read_text())
    assert report["num_examples"] == 6 and len(report["examples"]) == 6
    assert report["generation"]["num_beams"] == 4 and report["generation"]["length_penalty"] == 0.6
    metrics = report["metrics"]
    assert {"bleu", "chrf", "bleu_lowercase", "bleu_paper_tokenized"} <= set(metrics)
    assert "13a" in metrics["bleu_signature"] and "##AT##" in metrics["bleu_paper_tokenized_signature"]
    assert "prediction:" in result.stdout and "bleu" in result.stdout
    # The saved max_length (512) must not clash with the max_new_tokens the script passes on every batch.
    assert "seem to have been set" not in result.stderr


def test_evaluate_script_on_series_reports_every_breakdown(tmp_path):
    """The series branch: exact match and symbolic equivalence, and the three breakdowns of exact match, each
    covering every example (an untrained model with a digit-level tokenizer; the numbers are not the point).
    """

    from hf_vanilla_transformer import VanillaTransformerConfig, VanillaTransformerForConditionalGeneration
    from hf_vanilla_transformer.saving import save_model_folder
    from hf_vanilla_transformer.tasks.series.dataset import generate_series_dataset
    from hf_vanilla_transformer.tasks.series.tokenizer import train_series_tokenizer

    generate_series_dataset(tmp_path / "data", 80, seed=3, num_proc=1, test_size=8, validation_size=4,
                            progress=False)  # fmt: skip
    data = datasets.load_from_disk(str(tmp_path / "data"))
    tokenizer = train_series_tokenizer(
        (text for row in data["train"] for text in (row["expression"], row["series"])),
        vocab_size=150, integer_digits=True, show_progress=False,
    )  # fmt: skip
    torch.manual_seed(0)
    config = VanillaTransformerConfig.from_preset("transformer-tiny", vocab_size=len(tokenizer))
    model = save_model_folder(
        VanillaTransformerForConditionalGeneration(config), tokenizer, tmp_path / "model"
    )
    report_file = tmp_path / "report.json"
    result = _run(
        [
            sys.executable,
            str(ROOT / "scripts" / "evaluate_model.py"),
            "--model",
            str(model),
            "--task",
            "series",
            "--dataset",
            str(tmp_path / "data"),
            "--split",
            "test",
            "--max_examples",
            "6",
            "--num_beams",
            "1",
            "--max_new_tokens",
            "10",
            "--output_file",
            str(report_file),
        ],
        cwd=tmp_path,
    )
    report = json.loads(report_file.read_text())
    assert report["num_examples"] == 6 and report["generation"]["num_beams"] == 1
    assert 0.0 <= report["metrics"]["exact_match"] <= report["metrics"]["symbolic_match"] <= 1.0
    for breakdown in ("by_reference_length", "by_largest_integer", "by_train_overlap"):
        assert sum(row["n"] for row in report[f"exact_match_{breakdown}"]) == 6, breakdown
    assert "largest integer of" in result.stdout


def test_plot_attention_script_draws_png(trained_run, tmp_path):
    png = tmp_path / "attention.png"
    result = _run(
        [
            sys.executable,
            str(ROOT / "scripts" / "plot_attention.py"),
            "--model",
            str(trained_run / "final"),
            "--text",
            "Ein Hund läuft.",
            "--target",
            "A dog runs.",
            "--output_file",
            str(png),
        ],
        cwd=tmp_path,
    )
    assert png.read_bytes().startswith(b"\x89PNG") and png.stat().st_size > 10_000
    # the default --layer -1 is the top layer, titled by its number as the paper counts layers
    layers = json.loads((trained_run / "final" / "config.json").read_text())["decoder_layers"]
    assert f"decoder layer {layers} of {layers}: Ein Hund läuft." in result.stdout


@pytest.mark.parametrize("name", ["multi_gpu", "fsdp", "multi_node", "deepspeed_zero2", "deepspeed_zero3"])
def test_shipped_accelerate_configs_load(name):
    from accelerate.commands.config.config_args import ClusterConfig

    config = ClusterConfig.from_yaml_file(ROOT / "scripts" / "accelerate_configs" / f"{name}.yaml")
    # The count is given at launch, the precision chosen by the training options (test_launch_configs.py).
    assert config.num_processes == -1 and config.mixed_precision is None
    if name == "fsdp":
        assert "VanillaTransformerEncoderLayer" in config.fsdp_config["fsdp_transformer_layer_cls_to_wrap"]


def test_training_profile_splits_the_recipes_steps(translation_data, tmp_path, monkeypatch):
    from benchmarks.training_profile import (
        ProfileArguments,
        format_profile,
        profile_training,
    )
    from hf_vanilla_transformer.cli import make_parser, parse_recipe_and_args
    from hf_vanilla_transformer.training import TRAINING_ARGUMENTS

    monkeypatch.chdir(tmp_path)
    parser = make_parser(*TRAINING_ARGUMENTS, ProfileArguments)
    *training_arguments, profile_args = parse_recipe_and_args(
        parser,
        [str(RECIPE), *_tiny(translation_data), "--max_tokens", "600", "--untimed_steps", "1",
         "--timed_steps", "3", "--operator_steps", "1"],
    )  # fmt: skip
    result = profile_training(*training_arguments, profile_args)
    assert result["steps_timed"] == 3
    assert sum(result["phases"].values()) == pytest.approx(1.0)
    assert result["phases"]["forward_backward"] > result["phases"]["after_step"]
    assert sum(result["operators"].values()) == pytest.approx(1.0, abs=1e-6)
    assert result["operators"]["matrix products"] > 0 and result["operators"]["output softmax + loss"] > 0
    # Batches of at most 600 padded positions, filled by length: little but some padding, real tokens counted.
    assert 0 < result["sentences_per_step"] and result["target_tokens_per_step"] <= 600
    pairs = datasets.load_from_disk(translation_data / "data")["train"].num_rows
    assert result["batches_per_pass"] == pytest.approx(pairs / result["sentences_per_step"], rel=0.5)
    assert 0 <= result["target_padding"] < 0.5 and 0 <= result["source_padding"] < 0.5
    assert result["useful_share_of_peak"] <= result["executed_share_of_peak"]
    assert "| target tokens per second |" in format_profile(result)
    assert list(tmp_path.iterdir()) == []  # no checkpoint, no final model, not even the recipe's output_dir


def test_training_profile_refuses_step_counts_it_cannot_time():
    from benchmarks.training_profile import ProfileArguments

    with pytest.raises(ValueError, match=r"^--untimed_steps must be at least 1, got 0\.$"):
        ProfileArguments(untimed_steps=0)
    with pytest.raises(ValueError, match=r"^--timed_steps must be at least 1, got 0\.$"):
        ProfileArguments(timed_steps=0)
    with pytest.raises(ValueError, match=r"^--operator_steps must be at least 0, got -1\.$"):
        ProfileArguments(operator_steps=-1)
    assert ProfileArguments(operator_steps=0).operator_steps == 0  # no operator table is allowed


def test_evaluating_a_shipped_folder_writes_nothing_into_it_and_overwrites_nothing(
    translation_data, tmp_path
):
    """A Hub-ready folder (its card beside the weights) keeps its files: the report goes to outputs/eval/, a
    report of the first N examples has a name of its own, and a report is replaced only when asked."""
    shipped = ROOT / "model_cards" / "vanilla-transformer-multi30k-de-en"
    folder = tmp_path / shipped.name
    shutil.copytree(shipped, folder)
    before = {path.name: path.read_bytes() for path in folder.iterdir()}
    options = ["--model", str(folder), "--task", "translation", "--dataset", str(translation_data / "data"),
               "--split", "test", "--max_examples", "3", "--num_beams", "1",
               "--max_new_tokens", "5"]  # fmt: skip
    script = ROOT / "scripts" / "evaluate_model.py"
    _run([sys.executable, script, *options], cwd=tmp_path)
    assert {path.name: path.read_bytes() for path in folder.iterdir()} == before
    report = tmp_path / "outputs" / "eval" / folder.name / "eval-test-first3-greedy.json"
    assert json.loads(report.read_text())["num_examples"] == 3
    report.write_text("kept")
    again = run_script_file(script, *options, cwd=tmp_path)
    assert again.returncode == 2 and again.stderr.strip().splitlines() == [
        f"error: {report.relative_to(tmp_path)} exists: pass --overwrite to replace it, or --output_file to "
        "write elsewhere."
    ]
    assert report.read_text() == "kept"
    _run([sys.executable, script, *options, "--overwrite"], cwd=tmp_path)
    assert json.loads(report.read_text())["num_examples"] == 3


def test_the_profiles_trainer_is_made_by_run_trainings_steps_in_its_order():
    """`benchmarks.training_profile.recipe_trainer` repeats `run_training`'s steps up to the Trainer (it must
    not train or save): the same step calls, in the same order, so that a step added to one is not missed by
    the other."""
    import ast
    import inspect

    import benchmarks.training_profile as profile
    from hf_vanilla_transformer.training import run, setup

    steps = {name for name, value in vars(setup).items() if inspect.isfunction(value)} | {"make_trainer"}

    def step_calls(function) -> list[str]:
        found = []
        for node in ast.walk(ast.parse(inspect.getsource(function))):
            name = getattr(getattr(node, "func", None), "id", None)
            if isinstance(node, ast.Call) and name in steps:
                found.append((node.lineno, node.col_offset, name))
        return [name for *_, name in sorted(found)]

    ours = step_calls(run.run_training)
    assert "check_trainer_options" in ours and "seeded_model" in ours
    assert step_calls(profile.recipe_trainer) == ours[: ours.index("make_trainer") + 1]
