"""The training scripts end to end on the committed Multi30k fixture: the Trainer script (one process) and
the Accelerate loop on two CPU processes (gloo)."""

import json
import os
import subprocess
import sys
from pathlib import Path

import datasets
import pytest
from transformers import AutoModelForSeq2SeqLM

from hf_vanilla_transformer.data.translation import load_parallel_text
from hf_vanilla_transformer.tokenization import train_translation_tokenizer
from hf_vanilla_transformer.training import LOSS_PLOT_NAME

ROOT = Path(__file__).resolve().parents[1]
FIXTURE = Path(__file__).parent / "fixtures" / "multi30k"


@pytest.fixture(scope="module")
def translation_data(tmp_path_factory):
    """The fixture corpus as a saved DatasetDict, and a small joint BPE tokenizer trained on it."""
    folder = tmp_path_factory.mktemp("multi30k")
    load_parallel_text(FIXTURE, "de", "en").save_to_disk(folder / "data")
    train_translation_tokenizer(
        [FIXTURE / "train.de.gz", FIXTURE / "train.en.gz"],
        vocab_size=400,
        show_progress=False,
        model_max_length=128,
        output_dir=folder / "tokenizer",
    )
    return folder


def _run(args, cwd, timeout=600):
    env = {**os.environ, "PYTHONPATH": str(ROOT), "OMP_NUM_THREADS": "1", "TOKENIZERS_PARALLELISM": "false"}
    result = subprocess.run(
        args, cwd=cwd, env=env, capture_output=True, text=True, timeout=timeout, stdin=subprocess.DEVNULL
    )
    assert result.returncode == 0, (
        f"{' '.join(map(str, args))}\n{result.stdout[-2000:]}\n{result.stderr[-4000:]}"
    )
    return result


COMMON = [
    "--task",
    "translation",
    "--source_lang",
    "de",
    "--target_lang",
    "en",
    "--preset",
    "transformer-tiny",
    "--max_source_length",
    "96",
    "--max_target_length",
    "96",
]


@pytest.fixture(scope="module")
def trained_run(translation_data, tmp_path_factory):
    """A six-step Trainer run with evaluation (BLEU) every three steps, the best checkpoint kept."""
    out = tmp_path_factory.mktemp("trainer") / "run"
    _run([sys.executable, str(ROOT / "scripts" / "train.py"), *COMMON,
          "--dataset", str(translation_data / "data"), "--tokenizer", str(translation_data / "tokenizer"),
          "--max_tokens", "600", "--max_steps", "6", "--warmup_steps", "3", "--eval_strategy", "steps",
          "--eval_steps", "3", "--save_steps", "3", "--logging_steps", "1", "--max_eval_examples", "8",
          "--generation_max_length", "12", "--generation_num_beams", "2", "--load_best_model_at_end",
          "--use_cpu", "--output_dir", str(out)], cwd=out.parent)
    return out


def test_trainer_script_trains_evaluates_and_saves(trained_run):
    state = json.loads((trained_run / "checkpoint-6" / "trainer_state.json").read_text())
    evals = [entry for entry in state["log_history"] if "eval_bleu" in entry]
    assert len(evals) == 2 and all(0.0 <= entry["eval_bleu"] <= 100.0 for entry in evals)
    assert state["best_metric"] == max(entry["eval_bleu"] for entry in evals)
    assert (trained_run / LOSS_PLOT_NAME).exists()
    model = AutoModelForSeq2SeqLM.from_pretrained(trained_run / "final")
    assert model.config.vocab_size == 400
    assert (trained_run / "final" / "tokenizer.json").exists()


def test_evaluate_script_writes_report(trained_run, translation_data, tmp_path):
    report_file = tmp_path / "report.json"
    result = _run([sys.executable, str(ROOT / "scripts" / "evaluate_model.py"), "--model", str(trained_run / "final"),
                   "--task", "translation", "--dataset", str(translation_data / "data"), "--split", "test",
                   "--max_examples", "6", "--batch_size", "4", "--max_new_tokens", "8",
                   "--output_file", str(report_file)], cwd=tmp_path)
    report = json.loads(report_file.read_text())
    assert report["num_examples"] == 6 and len(report["examples"]) == 6
    assert report["generation"]["num_beams"] == 4 and report["generation"]["length_penalty"] == 0.6
    metrics = report["metrics"]
    assert {"bleu", "chrf", "bleu_lowercase"} <= set(metrics) and "13a" in metrics["bleu_signature"]
    assert "prediction:" in result.stdout and "bleu" in result.stdout
    # The saved max_length (512) must not clash with the max_new_tokens the script passes on every batch.
    assert "seem to have been set" not in result.stderr


def test_evaluate_script_on_series_reports_every_breakdown(tmp_path):
    """The series branch: exact match and symbolic equivalence, and the three breakdowns of exact match, each
    covering every example (an untrained model with a digit-level tokenizer; the numbers are not the point)."""
    import torch

    from hf_vanilla_transformer import VanillaTransformerConfig, VanillaTransformerForConditionalGeneration
    from hf_vanilla_transformer.data.series import generate_series_dataset
    from hf_vanilla_transformer.saving import save_model_folder
    from hf_vanilla_transformer.tokenization import train_series_tokenizer

    generate_series_dataset(tmp_path / "data", 80, seed=3, num_workers=1, test_size=8, validation_size=4,
                            progress=False)  # fmt: skip
    data = datasets.load_from_disk(str(tmp_path / "data"))
    tokenizer = train_series_tokenizer(
        (text for row in data["train"] for text in (row["expression"], row["series"])),
        vocab_size=150, integer_digits=True, show_progress=False,
    )  # fmt: skip
    torch.manual_seed(0)
    config = VanillaTransformerConfig.from_preset("transformer-tiny", vocab_size=len(tokenizer))
    model = save_model_folder(VanillaTransformerForConditionalGeneration(config), tokenizer, tmp_path / "model")
    report_file = tmp_path / "report.json"
    result = _run([sys.executable, str(ROOT / "scripts" / "evaluate_model.py"), "--model", str(model),
                   "--task", "series", "--dataset", str(tmp_path / "data"), "--split", "test", "--max_examples", "6",
                   "--num_beams", "1", "--max_new_tokens", "10", "--output_file", str(report_file)], cwd=tmp_path)
    report = json.loads(report_file.read_text())
    assert report["num_examples"] == 6 and report["generation"]["num_beams"] == 1
    assert 0.0 <= report["metrics"]["exact_match"] <= report["metrics"]["symbolic_match"] <= 1.0
    for breakdown in ("by_reference_length", "by_largest_integer", "by_train_overlap"):
        assert sum(row["n"] for row in report[f"exact_match_{breakdown}"]) == 6, breakdown
    assert "largest integer of" in result.stdout


def test_plot_attention_script_draws_png(trained_run, tmp_path):
    png = tmp_path / "attention.png"
    _run([sys.executable, str(ROOT / "scripts" / "plot_attention.py"), "--model", str(trained_run / "final"),
          "--text", "Ein Hund läuft.", "--target", "A dog runs.", "--output", str(png)], cwd=tmp_path)
    assert png.read_bytes().startswith(b"\x89PNG") and png.stat().st_size > 10_000


def test_accelerate_two_cpu_processes_shard_data_and_agree(translation_data, tmp_path):
    """Two gloo processes: the run finishes, the loss falls, both ranks end with identical weights, and each
    rank saw different batches."""
    out = tmp_path / "acc"
    summary = tmp_path / "summary"
    _run(
        [
            sys.executable,
            "-m",
            "accelerate.commands.launch",
            "--multi_gpu",
            "--num_processes",
            "2",
            "--num_machines",
            "1",
            "--mixed_precision",
            "no",
            "--dynamo_backend",
            "no",
            str(ROOT / "scripts" / "train_accelerate.py"),
            *COMMON,
            "--dataset",
            str(translation_data / "data"),
            "--tokenizer",
            str(translation_data / "tokenizer"),
            "--max_tokens",
            "400",
            "--max_steps",
            "40",
            "--warmup_steps",
            "10",
            "--lr_scale",
            "0.2",
            "--logging_steps",
            "10",
            "--save_steps",
            "20",
            "--log_batches",
            "--use_cpu",
            "--output_dir",
            str(out),
            "--summary_file",
            str(summary),
        ],
        cwd=tmp_path,
    )
    ranks = [json.loads(Path(f"{summary}.rank{r}.json").read_text()) for r in (0, 1)]
    assert [r["world_size"] for r in ranks] == [2, 2] and [r["steps"] for r in ranks] == [40, 40]
    history = ranks[0]["loss_history"]
    assert history[-1][1] < history[0][1] - 0.5, history  # mean loss of steps 31-40 vs 1-10
    assert ranks[0]["weights_checksum"] == ranks[1]["weights_checksum"]
    # In one epoch the ranks split the batches: no sentence is seen by both (but for padding rows and the
    # batch Accelerate repeats to even out the ranks).
    epoch = ranks[0]["batches_per_epoch"]
    assert epoch < 40
    rows = [
        {tuple(t for t in row if t != 0) for batch in r["batches"][:epoch] for row in batch} for r in ranks
    ]
    assert len(rows[0] & rows[1]) <= 0.05 * min(len(rows[0]), len(rows[1])), len(rows[0] & rows[1])
    assert (out / "final" / "model.safetensors").exists() and (out / "state-20").is_dir()


@pytest.mark.parametrize("name", ["multi_gpu", "fsdp", "multi_node"])
def test_shipped_accelerate_configs_load(name):
    from accelerate.commands.config.config_args import ClusterConfig

    config = ClusterConfig.from_yaml_file(ROOT / "scripts" / "accelerate_configs" / f"{name}.yaml")
    assert config.num_processes >= 8 and config.mixed_precision == "bf16"
    if name == "fsdp":
        assert "VanillaTransformerEncoderLayer" in config.fsdp_config["fsdp_transformer_layer_cls_to_wrap"]
