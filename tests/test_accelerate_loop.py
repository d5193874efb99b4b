"""The Accelerate loop reads the Trainer path's recipe and builds the same pieces from it: optimizer,
schedule, batches, loss log and final folder; it resumes exactly and stops on its time budget. One process,
in memory; two processes are in test_train_scripts.py."""

import json

import pytest
import torch
from datasets import Dataset
from transformers import AutoModelForSeq2SeqLM, Trainer

from hf_vanilla_transformer import VanillaTransformerForConditionalGeneration
from hf_vanilla_transformer.data.preprocessing import build_seq2seq_collator
from hf_vanilla_transformer.training import (
    LOSS_LOG_NAME,
    LOSS_PLOT_NAME,
    LossPlotCallback,
    PaperSeq2SeqTrainingArguments,
    RecipeArguments,
    TokenBudgetSeq2SeqTrainer,
    create_optimizer,
    create_scheduler,
    paper_peak_learning_rate,
    train_loop,
)

from .conftest import tiny_config

MAX_TOKENS = 40


def _features(word_tokenizer):
    pairs = [
        ("ein hund läuft im park", "a dog runs in the park"),
        ("zwei katzen schlafen", "two cats sleep"),
        ("ein hund", "a dog"),
        ("zwei katzen schlafen im park", "two cats sleep in the park"),
    ] * 6
    return Dataset.from_list([dict(word_tokenizer(src, text_target=tgt)) for src, tgt in pairs])


def _args(output_dir, **overrides):
    settings = {
        "output_dir": str(output_dir),
        "max_steps": 6,
        "warmup_steps": 2,
        "learning_rate": paper_peak_learning_rate(32, 2),
        "logging_steps": 1,
        "save_steps": 3,
        "use_cpu": True,
        "report_to": [],
        "seed": 0,
        "dataloader_num_workers": 0,
        **overrides,
    }
    return PaperSeq2SeqTrainingArguments(**settings)


def _model(**config):
    torch.manual_seed(0)
    return VanillaTransformerForConditionalGeneration(tiny_config(**config))


def _records(folder):
    return [json.loads(line) for line in (folder / LOSS_LOG_NAME).read_text().splitlines()]


def test_loop_builds_the_trainers_optimizer_and_schedule(tmp_path):
    args = _args(tmp_path, weight_decay=0.1, lr_scheduler_type="linear", max_steps=10, adam_beta2=0.97)
    model = _model()
    ours = create_optimizer(model, args)
    trainer = Trainer(model=model, args=args)
    theirs = trainer.create_optimizer()
    assert type(ours) is type(theirs)
    assert ours.defaults == theirs.defaults and ours.defaults["betas"] == (0.9, 0.97)
    for mine, reference in zip(ours.param_groups, theirs.param_groups, strict=True):
        assert [id(p) for p in mine["params"]] == [id(p) for p in reference["params"]]
        assert mine["weight_decay"] == reference["weight_decay"]
    assert [g["weight_decay"] for g in ours.param_groups] == [0.1, 0.0] and all(
        g["params"] for g in ours.param_groups
    )

    our_schedule = create_scheduler(ours, args, num_training_steps=10)
    their_schedule = trainer.create_scheduler(num_training_steps=10, optimizer=theirs)
    for _ in range(10):
        assert our_schedule.get_last_lr() == their_schedule.get_last_lr()
        ours.step(), our_schedule.step(), theirs.step(), their_schedule.step()
    assert our_schedule.get_last_lr() == [0.0, 0.0]  # linear decay reaches zero at the last step


def test_loop_trains_and_logs_as_the_trainer_does(tmp_path, word_tokenizer):
    """Same recipe, same batches, same initial weights: the loop's log matches the Trainer's, record for
    record (the keys, the learning rate of every step, the loss: no dropout, whose masks would differ with the
    random numbers each loop draws for other things), and its final folder carries the pipeline."""
    features = _features(word_tokenizer)
    settings = {"lr_scheduler_type": "linear", "max_grad_norm": 1.0, "weight_decay": 0.1, "logging_steps": 2}

    args = _args(tmp_path / "trainer", **settings)
    model = _model(dropout=0.0)
    TokenBudgetSeq2SeqTrainer(
        model=model,
        args=args,
        train_dataset=features,
        data_collator=build_seq2seq_collator(word_tokenizer, model=model),
        max_tokens=MAX_TOKENS,
        callbacks=[LossPlotCallback()],
    ).train()
    trainer_records = [r for r in _records(tmp_path / "trainer") if "loss" in r]

    final = train_loop(
        _model(dropout=0.0),
        word_tokenizer,
        features,
        _args(tmp_path / "loop", **settings),
        max_tokens=MAX_TOKENS,
    )
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
    assert AutoModelForSeq2SeqLM.from_pretrained(final).config.vocab_size == tiny_config().vocab_size
    # save_total_limit (5 by default) keeps both states; the last holds every rank's random state
    assert sorted(p.name for p in (tmp_path / "loop").glob("state-*")) == ["state-3", "state-6"]
    assert (tmp_path / "loop" / "state-6" / "random_states_0.pkl").exists()


def test_loop_resume_continues_exactly_like_an_uninterrupted_run(tmp_path, word_tokenizer):
    """Killed after step 3 (mid-epoch), resumed from state-3: the same weights after step 8 as a run that was
    never interrupted, dropout included, across an epoch boundary."""
    features = _features(word_tokenizer)
    uninterrupted = train_loop(
        _model(), word_tokenizer, features, _args(tmp_path / "full", max_steps=8), MAX_TOKENS
    )
    killed = _args(tmp_path / "killed", max_steps=3)  # stands for a run killed after step 3
    train_loop(_model(), word_tokenizer, features, killed, MAX_TOKENS)
    resumed_args = _args(
        tmp_path / "killed", max_steps=8, resume_from_checkpoint=str(tmp_path / "killed" / "state-3")
    )
    resumed = train_loop(_model(), word_tokenizer, features, resumed_args, MAX_TOKENS)

    records = _records(tmp_path / "killed")
    assert [r["step"] for r in records] == list(range(1, 9))
    assert records[-1]["epoch"] > 1  # the run crossed an epoch boundary after resuming
    reference = AutoModelForSeq2SeqLM.from_pretrained(uninterrupted).state_dict()
    for name, tensor in AutoModelForSeq2SeqLM.from_pretrained(resumed).state_dict().items():
        torch.testing.assert_close(tensor, reference[name], atol=1e-6, rtol=1e-5, msg=name)


def test_loop_stops_and_saves_when_its_time_budget_is_spent(tmp_path, word_tokenizer):
    args = _args(tmp_path, max_steps=1000, save_steps=500)
    final = train_loop(
        _model(),
        word_tokenizer,
        _features(word_tokenizer),
        args,
        MAX_TOKENS,
        RecipeArguments(max_train_minutes=1e-9),
    )
    assert [r["step"] for r in _records(tmp_path)] == [1]
    assert (tmp_path / "state-1").is_dir() and (final / "model.safetensors").exists()


def test_loop_decays_over_its_clock_and_checkpoints_the_time_spent(tmp_path, word_tokenizer):
    """With no warmup, the first update runs at the peak; the budget is spent by then, so the decay has
    reached zero and the loop stops. The state folder holds the clock for a resume."""
    args = _args(tmp_path, max_steps=1000, save_steps=500, warmup_steps=0, lr_scheduler_type="linear")
    train_loop(
        _model(),
        word_tokenizer,
        _features(word_tokenizer),
        args,
        MAX_TOKENS,
        RecipeArguments(max_train_minutes=1e-9, decay_by_clock=True),
    )
    (record,) = _records(tmp_path)
    assert record["step"] == 1 and record["learning_rate"] == pytest.approx(args.learning_rate)
    clocks = [
        torch.load(path, weights_only=True) for path in (tmp_path / "state-1").glob("custom_checkpoint_*")
    ]
    clock = next(state for state in clocks if "elapsed_seconds" in state)
    assert clock["elapsed_seconds"] > 0 and clock["decay_from"] == 0.0


def test_both_loops_compute_the_same_update_under_gradient_accumulation(tmp_path, word_tokenizer):
    """Micro-batches of different token counts, accumulated three to an update: both loops divide the summed
    loss by the update's token count, so with plain SGD (the weights move by exactly the gradient times the
    rate) they end with the same weights after every update, and log the same loss."""
    features = _features(word_tokenizer)
    settings = {
        "gradient_accumulation_steps": 3,
        "optim": "sgd",
        "learning_rate": 0.5,
        "lr_scheduler_type": "constant",
        "warmup_steps": 0,
        "max_grad_norm": 0.0,
        "weight_decay": 0.0,
        "max_steps": 3,
        "logging_steps": 1,
    }
    model = _model(dropout=0.0)
    TokenBudgetSeq2SeqTrainer(
        model=model,
        args=_args(tmp_path / "trainer", **settings),
        train_dataset=features,
        data_collator=build_seq2seq_collator(word_tokenizer, model=model),
        max_tokens=MAX_TOKENS,
        callbacks=[LossPlotCallback()],
    ).train()
    final = train_loop(
        _model(dropout=0.0),
        word_tokenizer,
        features,
        _args(tmp_path / "loop", **settings),
        max_tokens=MAX_TOKENS,
    )
    loop_model = VanillaTransformerForConditionalGeneration.from_pretrained(final)
    moved = 0.0
    for (name, ours), theirs in zip(
        loop_model.state_dict().items(), model.state_dict().values(), strict=True
    ):
        torch.testing.assert_close(ours, theirs, atol=1e-6, rtol=1e-5, msg=name)
        moved = max(moved, float((ours - _model(dropout=0.0).state_dict()[name]).abs().max()))
    assert moved > 1e-3  # the updates did move the weights
    trainer_losses = [r["loss"] for r in _records(tmp_path / "trainer") if "loss" in r]
    loop_losses = [r["loss"] for r in _records(tmp_path / "loop")]
    assert loop_losses == pytest.approx(trainer_losses, rel=1e-5) and len(loop_losses) == 3
