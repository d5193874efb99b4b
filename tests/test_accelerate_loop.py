"""scripts/train_accelerate.py, the plain Accelerate loop for users who write their own: it computes what the
Trainer computes from the same settings (one process, in memory), resumes exactly, and on two CPU processes
(gloo) computes what one process accumulating two batches computes."""

import importlib
import json
import sys

import pytest
import torch
from datasets import Dataset
from safetensors.torch import load_file
from transformers import AutoModelForSeq2SeqLM

from hf_vanilla_transformer import VanillaTransformerForConditionalGeneration
from hf_vanilla_transformer.data.preprocessing import build_seq2seq_collator
from hf_vanilla_transformer.training import (
    LOSS_LOG_NAME,
    LOSS_PLOT_NAME,
    BatchingArguments,
    LossPlotCallback,
    PaperSeq2SeqTrainingArguments,
    TokenBudgetSeq2SeqTrainer,
    paper_peak_learning_rate,
)

from .conftest import tiny_config
from .script_runner import SCRIPTS, run_script_file
from .test_scale_out import accelerate_launch
from .test_train_scripts import _tiny

MAX_TOKENS = 40
BATCHING = BatchingArguments(max_tokens=MAX_TOKENS)


@pytest.fixture(scope="module")
def loop():
    """The script as a module, imported as `python scripts/train_accelerate.py` finds its imports."""
    sys.path.insert(0, str(SCRIPTS))
    try:
        yield importlib.import_module("train_accelerate")
    finally:
        sys.path.remove(str(SCRIPTS))


def _features(word_tokenizer):
    pairs = [
        ("ein hund läuft im park", "a dog runs in the park"),
        ("zwei katzen schlafen", "two cats sleep"),
        ("ein hund", "a dog"),
        ("zwei katzen schlafen im park", "two cats sleep in the park"),
    ] * 6
    return Dataset.from_list([dict(word_tokenizer(src, text_target=tgt)) for src, tgt in pairs])


SETTINGS = {
    "max_steps": 6,
    "warmup_steps": 2,
    "logging_steps": 2,
    "save_steps": 3,
    "seed": 0,
    "use_cpu": True,
}


def _model(**config):
    torch.manual_seed(0)
    return VanillaTransformerForConditionalGeneration(tiny_config(**config))


def _records(folder):
    return [json.loads(line) for line in (folder / LOSS_LOG_NAME).read_text().splitlines()]


def test_loop_computes_what_the_trainer_computes(loop, tmp_path, word_tokenizer):
    """The same settings, batches and initial weights, two micro-batches an update and clipping: the loop's
    log matches the Trainer's record for record (the keys, the learning rate of every step, the loss: no
    dropout, whose masks would differ with the random numbers each loop draws for other things)."""
    features = _features(word_tokenizer)
    settings = {**SETTINGS, "gradient_accumulation_steps": 2, "max_grad_norm": 1.0}
    model = _model(dropout=0.0)
    trainer_args = PaperSeq2SeqTrainingArguments(
        output_dir=str(tmp_path / "trainer"),
        learning_rate=paper_peak_learning_rate(32, 2),
        report_to=[],
        dataloader_num_workers=0,
        **{name: value for name, value in settings.items() if name != "save_steps"},
    )
    TokenBudgetSeq2SeqTrainer(
        model=model,
        args=trainer_args,
        train_dataset=features,
        data_collator=build_seq2seq_collator(word_tokenizer, model=model),
        max_tokens=MAX_TOKENS,
        callbacks=[LossPlotCallback()],
    ).train()
    trainer_records = [r for r in _records(tmp_path / "trainer") if "loss" in r]

    args = loop.LoopArguments(output_dir=str(tmp_path / "loop"), **settings)
    final = loop.train_loop(_model(dropout=0.0), word_tokenizer, features, args, BATCHING)
    loop_records = _records(tmp_path / "loop")
    assert [r["step"] for r in loop_records] == [r["step"] for r in trainer_records] == [2, 4, 6]
    for ours, theirs in zip(loop_records, trainer_records, strict=True):
        assert set(ours) == set(theirs) == {"step", "loss", "grad_norm", "learning_rate", "epoch"}
        assert ours["learning_rate"] == pytest.approx(theirs["learning_rate"], rel=1e-9)
        assert ours["loss"] == pytest.approx(theirs["loss"], rel=1e-4)
        assert ours["epoch"] == pytest.approx(theirs["epoch"], rel=1e-6)
    assert (tmp_path / "loop" / LOSS_PLOT_NAME).read_bytes().startswith(b"\x89PNG")
    config = json.loads((final / "config.json").read_text())
    assert "seq2seq-generation" in config["custom_pipelines"]
    assert (final / "pipeline_seq2seq.py").exists() and (final / "tokenizer.json").exists()
    assert sorted(p.name for p in (tmp_path / "loop").glob("state-*")) == ["state-3", "state-6"]


def test_loop_resumes_exactly_like_an_uninterrupted_run(loop, tmp_path, word_tokenizer):
    """Stopped after step 3 (mid-epoch), resumed from state-3: the same weights after step 8 as a run that was
    never stopped, dropout included, across an epoch boundary."""
    features = _features(word_tokenizer)

    def run(folder, **settings):
        args = loop.LoopArguments(output_dir=str(tmp_path / folder), **{**SETTINGS, **settings})
        return loop.train_loop(_model(), word_tokenizer, features, args, BATCHING)

    uninterrupted = run("full", max_steps=8, logging_steps=1)
    run("stopped", max_steps=3, logging_steps=1)
    resumed = run(
        "stopped", max_steps=8, logging_steps=1, resume_from_checkpoint=str(tmp_path / "stopped/state-3")
    )
    records = _records(tmp_path / "stopped")
    assert [r["step"] for r in records] == list(range(1, 9))
    assert records[-1]["epoch"] > 1  # the run crossed an epoch boundary after resuming
    reference = AutoModelForSeq2SeqLM.from_pretrained(uninterrupted).state_dict()
    for name, tensor in AutoModelForSeq2SeqLM.from_pretrained(resumed).state_dict().items():
        torch.testing.assert_close(tensor, reference[name], atol=1e-6, rtol=1e-5, msg=name)


def _train(translation_data, out, *options, processes=1):
    """The script on the Multi30k fixture: 20 updates of a tiny model, no dropout (the processes would draw
    other masks than one process), logged every 5 steps."""
    script = [str(SCRIPTS / "train_accelerate.py"), "--task", "translation", *_tiny(translation_data),
              "--config_overrides", '{"dropout": 0.0}', "--max_tokens", "200", "--max_steps", "20",
              "--warmup_steps", "10", "--lr_scale", "0.2", "--logging_steps", "5", "--save_steps", "10",
              "--use_cpu", "--output_dir", str(out), *options]  # fmt: skip
    if processes > 1:
        accelerate_launch("multi_gpu", *script)
    else:
        result = run_script_file(*script, cwd=out.parent, env={"OMP_NUM_THREADS": "1"})
        assert result.returncode == 0, result.stderr[-4000:]
    return _records(out)


def test_loop_on_two_cpu_processes_computes_what_one_process_accumulates(translation_data, tmp_path):
    """Two gloo processes (each taking every other batch) against one process that accumulates two
    consecutive batches per update: the same updates, if and only if the processes took different batches,
    weighed every target token alike, averaged their gradients, and held the same weights all along. So: the
    same loss log and the same final weights."""
    two = _train(translation_data, tmp_path / "two", processes=2)
    one = _train(translation_data, tmp_path / "one", "--gradient_accumulation_steps", "2")
    assert [r["step"] for r in two] == [r["step"] for r in one] == [5, 10, 15, 20]
    assert one[-1]["epoch"] <= 1.0  # within the first epoch, where both go through the batches alike
    for sharded, accumulated in zip(two, one, strict=True):
        assert sharded["loss"] == pytest.approx(accumulated["loss"], rel=1e-4)
        assert sharded["epoch"] == pytest.approx(accumulated["epoch"], abs=0.05)
    assert two[-1]["loss"] < two[0]["loss"] - 0.5, two
    weights = [load_file(run / "final" / "model.safetensors") for run in (tmp_path / "two", tmp_path / "one")]
    for name, tensor in weights[0].items():
        torch.testing.assert_close(tensor, weights[1][name], atol=1e-5, rtol=1e-4, msg=name)
    state = tmp_path / "two" / "state-20"
    assert (state / "random_states_0.pkl").exists() and (state / "random_states_1.pkl").exists()
    assert (tmp_path / "two" / "state-10").is_dir() and (tmp_path / "two" / LOSS_PLOT_NAME).exists()


@pytest.mark.parametrize(
    ("options", "message"),
    [
        (["--max_steps", "0"], "--max_steps must be at least 1, got 0."),
        ([], "The loop batches by token budget: set --max_tokens"),
        (
            ["--max_source_length", "300"],
            "--max_source_length 300 is more than 256, the model's max_position_embeddings",
        ),
        (["--streaming", "true"], "This loop trains on data held on disk: drop --streaming"),
    ],
)
def test_loop_refuses_what_it_cannot_train_in_one_line(translation_data, tmp_path, options, message):
    script = [SCRIPTS / "train_accelerate.py", "--task", "translation", *_tiny(translation_data)]
    max_tokens = [] if not options else ["--max_tokens", "200"]
    result = run_script_file(*script, *max_tokens, *options, "--output_dir", tmp_path / "o", cwd=tmp_path)
    assert result.returncode == 2 and "Traceback" not in result.stderr
    assert result.stderr.strip().splitlines()[-1].startswith(f"error: {message}")
    assert not (tmp_path / "o").exists()


@pytest.mark.parametrize(
    ("mistake", "message"),
    [
        ("no tokenizer", "No tokenizer given: pass --tokenizer"),
        ("a model of another task", "is a series model, not a translation one: give --task series"),
        (
            "lengths beyond the positions",
            "--max_source_length 300 is more than 256, the model's max_position_embeddings",
        ),
        ("an earlier run", f"holds an earlier training run ({LOSS_LOG_NAME}): pass --overwrite"),
    ],
)
def test_both_scripts_refuse_a_mistake_in_the_same_words(translation_data, tmp_path, mistake, message):
    """The Trainer script and the loop start from the same steps (`training.setup`'s): a mistake either can
    make is refused by both in the same line, before anything is written."""
    options = ["--task", "translation", *_tiny(translation_data), "--max_tokens", "200"]
    out = tmp_path / "run"
    if mistake == "no tokenizer":
        at = options.index("--tokenizer")
        del options[at : at + 2]
    elif mistake == "a model of another task":
        tiny_config(task="series").save_pretrained(tmp_path / "series-model")
        options += ["--model", tmp_path / "series-model"]
    elif mistake == "lengths beyond the positions":
        options += ["--max_source_length", "300"]
    else:
        out.mkdir()
        (out / LOSS_LOG_NAME).write_text("{}\n")
    errors = []
    for script in ("train.py", "train_accelerate.py"):
        result = run_script_file(script, *options, "--output_dir", out, cwd=tmp_path)
        assert result.returncode == 2 and "Traceback" not in result.stderr, result.stderr[-2000:]
        errors.append(result.stderr.strip().splitlines()[-1])
    assert errors[0] == errors[1]
    assert errors[0].startswith("error: ") and message in errors[0]
    assert not out.exists() or [path.name for path in out.iterdir()] == [LOSS_LOG_NAME]
