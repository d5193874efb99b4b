"""The paper's WMT14 recipes: the files say what §5 says, and `wmt14_en_de.sh` runs end to end (data,
tokenizer, training under `accelerate launch` with the shipped multi-GPU config on 2 CPU processes,
averaging, evaluation with both BLEU figures) on a tiny local data set of the Hub's `wmt14` schema."""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch
import yaml
from datasets import Dataset, Features, Translation

from benchmarks import gpu_estimate
from hf_vanilla_transformer import VanillaTransformerConfig, VanillaTransformerForConditionalGeneration
from hf_vanilla_transformer.cli import make_parser, parse_recipe_and_args
from hf_vanilla_transformer.tasks.translation.data import load_parallel_text
from hf_vanilla_transformer.training import LOSS_LOG_NAME, TRAINING_ARGUMENTS, load_config_overrides

ROOT = Path(__file__).resolve().parents[1]
RECIPES = ROOT / "scripts" / "recipes"
FIXTURE = Path(__file__).parent / "fixtures" / "multi30k"

# name: (preset, steps, save_steps, checkpoints kept, dropout, the paper's parameter count in millions)
PAPER = {
    "base": ("transformer-base", 100_000, 1000, 6, 0.1, 65),
    "big": ("transformer-big", 300_000, 600, 21, 0.3, 213),
}


@pytest.mark.parametrize("size", PAPER)
def test_wmt14_recipes_are_the_papers(size, monkeypatch):
    preset, steps, save_steps, kept, dropout, paper_millions = PAPER[size]
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)  # a CPU's precision, whatever runs this
    model_args, data_args, recipe_args, args = parse_recipe_and_args(
        make_parser(*TRAINING_ARGUMENTS, args=[]), [str(RECIPES / f"wmt14_en_de_{size}.yaml")]
    )
    options = data_args.options
    assert (data_args.task, options.source_lang, options.target_lang) == ("translation", "en", "de")
    assert model_args.preset == preset and not load_config_overrides(model_args.config_overrides)
    assert (args.max_steps, args.save_steps, args.save_total_limit) == (steps, save_steps, kept)
    assert args.max_steps % args.save_steps == 0  # the last checkpoint is the last step
    # Eq. 3 with 4,000 warmup steps, Adam (0.9, 0.98, 1e-9), no clipping: the defaults, untouched.
    assert (args.lr_scheduler_type, args.warmup_steps, args.learning_rate) == ("inverse_sqrt", 4000, None)
    assert (args.adam_beta1, args.adam_beta2, args.adam_epsilon, args.max_grad_norm) == (0.9, 0.98, 1e-9, 0)
    assert recipe_args.lr_scale is None and recipe_args.max_train_minutes is None
    # The precision follows the device (`devices.default_mixed_precision`): float32 on a CPU.
    assert "bf16" not in (RECIPES / f"wmt14_en_de_{size}.yaml").read_text() and not (args.bf16 or args.fp16)
    # About 25,000 tokens a side per step on 8 GPUs: the budget counts the longer side with padding.
    assert 25_000 <= 8 * recipe_args.max_tokens * args.gradient_accumulation_steps <= 30_000
    config = VanillaTransformerConfig.from_preset(preset, vocab_size=37_000)
    assert (config.dropout, config.label_smoothing) == (dropout, 0.1)
    with torch.device("meta"):
        parameters = sum(p.numel() for p in VanillaTransformerForConditionalGeneration(config).parameters())
    assert parameters / 1e6 == pytest.approx(paper_millions, rel=0.05)


def test_gpu_time_estimate_is_calibrated_on_the_papers_runs():
    rows = {row["preset"]: row for row in gpu_estimate.estimate(37_000, None)}
    base, big = rows["transformer-base"], rows["transformer-big"]
    # 6 x weights x tokens: about 6 x 63M x 25,000 per step for base.
    assert base["flops_per_step"] == pytest.approx(6 * 63e6 * 25_000, rel=0.1)
    assert big["total_flops"] > 8 * base["total_flops"]
    for row in rows.values():  # what 8 P100s for 12 hours / 3.5 days imply: a plausible share of the peak
        assert 0.15 < row["paper_utilisation"] < 0.6
        hours = row["hours_1_gpu"]
        assert hours["NVIDIA H100 SXM"] < hours["NVIDIA A100"] < hours["NVIDIA L4"]
    table = gpu_estimate.format_table(list(rows.values()))
    assert "not measurements" in table and "63M" in table and "214M" in table
    fixed = {row["preset"]: row for row in gpu_estimate.estimate(37_000, 0.5)}
    assert fixed["transformer-base"]["assumed_utilisation"] == 0.5

    # --scale_out: the per-GPU budget is the recipes'; a step's memory grows with its tokens.
    for size in PAPER:
        recipe = yaml.safe_load((RECIPES / f"wmt14_en_de_{size}.yaml").read_text())
        assert recipe["max_tokens"] == gpu_estimate.RECIPE_MAX_TOKENS
    small, large = (
        gpu_estimate.training_step_memory("transformer-tiny", 400, tokens) for tokens in (200, 400)
    )
    assert (small["tokens"], large["tokens"]) == (200, 400)
    assert 1.8 < large["activations"] / small["activations"] < 2.1
    assert large["peak"] >= large["activations"] + large["temporaries"]
    # The arithmetic around it, with the count stubbed (the real one takes a minute for the paper's models).
    counted = []

    def step_memory(preset, vocab_size, tokens):
        counted.append((preset, tokens))
        return {"peak": 1e9, "activations": 6e8, "temporaries": 2e8}

    scale = gpu_estimate.scale_out(37_000, None, step_memory=step_memory)
    assert counted == [
        (preset, t) for preset in ("transformer-base", "transformer-big") for t in (3500, 1750)
    ]
    for one, two in zip(scale[::2], scale[1::2], strict=True):
        assert (one["config"], two["config"]) == ("multi_gpu.yaml", "multi_node.yaml")
        assert one["tokens_per_step"] == two["tokens_per_step"] == 28_000  # the paper's ~25,000 real tokens
        assert one["gradient_bytes"] == 4 * one["parameters"] and not one["inter_node_seconds"]
        assert one["peak_bytes"] == 1e9 + 12 * one["parameters"]  # Adam's moments and DDP's buckets besides
        for gpu in gpu_estimate.SCALE_GPUS:
            assert two["step_seconds"][gpu] == pytest.approx(one["step_seconds"][gpu] / 2)
        # Between two nodes every byte of the gradients crosses at least once.
        assert two["inter_node_seconds"]["1 x 100 Gb/s"] == pytest.approx(one["gradient_bytes"] / 12.5e9)
    table = gpu_estimate.format_scale_table(scale)
    assert "not measurements" in table and "`multi_node.yaml`" in table and "1,750 (28,000)" in table


def _write_wmt14_schema(folder: Path) -> Path:
    """The Multi30k fixture laid out as the Hub's wmt14: `de-en/<split>-00000-of-00001.parquet` with a
    `translation` column of {de, en} dicts, and validation / test as newstest2013 / newstest2014 are."""
    features = Features({"translation": Translation(languages=["de", "en"])})
    for split, dataset in load_parallel_text(FIXTURE, "de", "en").items():
        rows = dataset.select(range(12)) if split != "train" else dataset
        Dataset.from_dict({"translation": rows["translation"]}, features=features).to_parquet(
            folder / "de-en" / f"{split}-00000-of-00001.parquet"
        )
    return folder


def test_wmt14_recipe_runs_end_to_end_under_accelerate_launch(tmp_path):
    """bash scripts/recipes/wmt14_en_de.sh base, as a user runs it, with the data, the vocabulary size, the
    process count, and a few training steps of a tiny model set from outside; the recipe file and the
    accelerate config are the shipped ones."""
    data = _write_wmt14_schema(tmp_path / "wmt14")
    work = tmp_path / "work"
    work.mkdir()
    (work / "scripts").symlink_to(ROOT / "scripts")  # the script's relative paths, outputs/ in tmp_path
    launch = (
        f"{sys.executable} -m accelerate.commands.launch --config_file "
        f"{ROOT}/scripts/accelerate_configs/multi_gpu.yaml --num_processes 2"
    )
    options = (
        "--use_cpu true --preset transformer-tiny --max_tokens 600 --max_steps 6 --warmup_steps 3 "
        "--save_steps 1 --eval_steps 3 --logging_steps 1 --generation_max_length 12 --num_proc 2 "
        "--per_device_eval_batch_size 6 --dataloader_num_workers 0"
    )
    env = {
        **os.environ,
        "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}",
        "PYTHONPATH": str(ROOT),
        "OMP_NUM_THREADS": "1",
        "DATASET": str(data),
        "VOCAB_SIZE": "400",
        "LAUNCH": launch,
        "TRAIN_OPTIONS": options,
    }
    result = subprocess.run(
        ["bash", str(RECIPES / "wmt14_en_de.sh"), "base"],
        cwd=work,
        env=env,
        capture_output=True,
        text=True,
        timeout=900,
        stdin=subprocess.DEVNULL,
    )
    assert result.returncode == 0, f"{result.stdout[-3000:]}\n{result.stderr[-5000:]}"
    out = work / "outputs" / "wmt14-en-de-base"
    assert json.loads((work / "outputs/tokenizers/wmt14-en-de-bpe37k/tokenizer.json").read_text())["model"][
        "vocab"
    ]
    steps = [json.loads(line)["step"] for line in (out / LOSS_LOG_NAME).read_text().splitlines()]
    assert max(steps) == 6
    # Both processes trained (each logs the model it built).
    assert result.stderr.count("M parameters;") == 2
    assert "Averaging checkpoint-2, checkpoint-3, checkpoint-4, checkpoint-5, checkpoint-6" in result.stdout
    for split in ("validation", "test"):
        report = json.loads((out / "averaged" / f"eval-{split}-beam4-lp0.6.json").read_text())
        assert report["num_examples"] == 12 and report["data"]["target_lang"] == "de"
        metrics = report["metrics"]
        assert "tok:13a" in metrics["bleu_signature"]
        assert "tokenizer.perl -l de" in metrics["bleu_paper_tokenized_signature"]
        assert 0 <= metrics["bleu_paper_tokenized"] <= 100 and 0 <= metrics["bleu"] <= 100
