"""The training recipe: eq. 3 schedule, token-budget batches, resume, loss plot, checkpoint averaging."""

import json
import logging
import random

import pytest
import torch
from datasets import Dataset
from safetensors.torch import load_file
from transformers import DataCollatorForSeq2Seq, Seq2SeqTrainingArguments, TrainerCallback, get_scheduler

from hf_vanilla_transformer import VanillaTransformerForConditionalGeneration
from hf_vanilla_transformer.training import (
    LOSS_LOG_NAME,
    LOSS_PLOT_NAME,
    LossLog,
    LossPlotCallback,
    PaperSeq2SeqTrainingArguments,
    RecipeArguments,
    TimeBudget,
    TimeBudgetCallback,
    TimeBudgetProgressCallback,
    TokenBudgetBatchSampler,
    TokenBudgetSeq2SeqTrainer,
    average_checkpoints,
    choose_schedule,
    clock_linear_schedule,
    example_sizes,
    last_checkpoints,
    missing_beyond_tied_copies,
    paper_learning_rate,
    paper_peak_learning_rate,
    prepare_output_dir,
    token_budget_sampler,
)
from hf_vanilla_transformer.training.budget import budget_report
from hf_vanilla_transformer.training.checkpoints import write_complete_record

from .conftest import tiny_config
from .fault_matrix import sha
from .script_runner import run_script_file


def test_inverse_sqrt_schedule_with_paper_peak_is_equation_3():
    d_model, warmup = 512, 4000
    param = torch.nn.Parameter(torch.zeros(1))
    optimizer = torch.optim.Adam(
        [param], lr=paper_peak_learning_rate(d_model, warmup), betas=(0.9, 0.98), eps=1e-9
    )
    scheduler = get_scheduler("inverse_sqrt", optimizer, num_warmup_steps=warmup)
    optimizer.step()
    scheduler.step()  # the rate of update 1, as the Trainer steps it
    assert scheduler.get_last_lr()[0] == pytest.approx(paper_learning_rate(1, d_model, warmup), rel=1e-9)
    # After n scheduler steps the rate is the peak times the schedule's factor at n: check the formula there.
    (factor,) = scheduler.lr_lambdas
    peak = paper_peak_learning_rate(d_model, warmup)
    for step in (100, 3999, 4000, 4001, 10000, 20000, 10**6):
        assert peak * factor(step) == pytest.approx(paper_learning_rate(step, d_model, warmup), rel=1e-9)
    assert paper_learning_rate(4000, 512, 4000) == pytest.approx(512**-0.5 * 4000**-0.5)


def test_token_budget_batches_cover_everything_within_budget():
    lengths = [((i * 7919) % 50) + 1 for i in range(500)]
    sampler = TokenBudgetBatchSampler(lengths, max_tokens=200, seed=3)
    batches = list(sampler)
    assert len(batches) == len(sampler)
    seen = sorted(i for batch in batches for i in batch)
    assert seen == list(range(500))  # every example exactly once
    for batch in batches:
        assert len(batch) * max(lengths[i] for i in batch) <= 200
    # similar lengths together: short examples get big batches, long ones small batches
    sizes = {max(lengths[i] for i in b): len(b) for b in batches}
    assert sizes[min(sizes)] > sizes[max(sizes)]
    assert list(TokenBudgetBatchSampler(lengths, max_tokens=200, seed=3)) == batches  # reproducible
    sampler.set_epoch(1)
    assert list(sampler) != batches and sorted(map(tuple, sampler)) == sorted(map(tuple, batches))


def test_target_lengths_as_second_sort_key_pad_targets_less_in_as_many_batches():
    generator = torch.Generator().manual_seed(0)
    sources = torch.randint(5, 40, (2000,), generator=generator)
    targets = (sources.float() * (0.6 + 0.8 * torch.rand(2000, generator=generator))).long().clamp(min=2)
    features = Dataset.from_dict(
        {"input_ids": [[1] * n for n in sources.tolist()], "labels": [[1] * n for n in targets.tolist()]}
    )
    sizes = example_sizes(features)
    assert [side.tolist() for side in sizes] == [sources.tolist(), targets.tolist()]
    # A dataset cut and reordered (an indices mapping over its Arrow table), and a plain list of rows.
    picked = [1999, 3, 17, 3]
    assert [side.tolist() for side in example_sizes(features.select(picked))] == [
        sources[picked].tolist(),
        targets[picked].tolist(),
    ]
    rows = [{"input_ids": [1] * 4, "labels": [1] * 2}, {"input_ids": [1], "labels": [1] * 3}]
    assert [side.tolist() for side in example_sizes(rows)] == [[4, 1], [2, 3]]
    lengths, target_lengths = torch.maximum(sources, targets).tolist(), targets.tolist()

    def target_padding(sampler):
        positions = sum(len(batch) * max(target_lengths[i] for i in batch) for batch in sampler)
        return 1 - sum(target_lengths) / positions

    plain = TokenBudgetBatchSampler(lengths, max_tokens=400, seed=0)
    by_target = list(zip(lengths, target_lengths, strict=True))
    tight = TokenBudgetBatchSampler(lengths, max_tokens=400, seed=0, sort_keys=by_target)
    assert len(tight) == len(plain)
    assert target_padding(tight) < 0.7 * target_padding(plain)
    with pytest.raises(ValueError, match="3 sort keys for 2000 lengths"):
        TokenBudgetBatchSampler(lengths, max_tokens=400, sort_keys=[1, 2, 3])


def test_fairseq_batch_formation_orders_by_source_then_target_and_keeps_multiples_of_eight():
    generator = torch.Generator().manual_seed(1)
    sources = torch.randint(3, 40, (3000,), generator=generator).tolist()
    targets = torch.randint(3, 40, (3000,), generator=generator).tolist()
    features = Dataset.from_dict(
        {"input_ids": [[1] * n for n in sources], "labels": [[1] * n for n in targets]}
    )
    assert [side.tolist() for side in example_sizes(features)] == [sources, targets]
    lengths = [max(pair) for pair in zip(sources, targets, strict=True)]
    padded = token_budget_sampler(features, 600, seed=0)
    fairseq = token_budget_sampler(features, 600, "source_length", 8, seed=0)
    by_target = list(zip(lengths, targets, strict=True))
    assert padded.batches == TokenBudgetBatchSampler(lengths, 600, sort_keys=by_target, seed=0).batches
    batches = fairseq.batches
    assert sorted(i for batch in batches for i in batch) == list(range(3000))
    for batch in batches:
        assert len(batch) * max(lengths[i] for i in batch) <= 600
    # Every batch but the last holds a multiple of 8 sentences; the remainder went on to the next batch.
    assert all(len(batch) % 8 == 0 for batch in batches[:-1]), [len(batch) for batch in batches]
    # In order of (source, target) length: each batch follows on from the one before.
    keys = [(sources[i], targets[i]) for batch in batches for i in batch]
    assert keys == sorted(keys)
    # Sorted by the source alone, batches pad more and fewer sentences fit: more batches than by padded size.
    assert len(batches) > len(padded.batches)
    with pytest.raises(ValueError, match=r"Unknown `batch_order` 'target'; expected one of padded_length"):
        token_budget_sampler(features, 600, "target")
    with pytest.raises(ValueError, match="`batch_size_multiple` must be positive, got 0"):
        TokenBudgetBatchSampler(lengths, 600, batch_size_multiple=0)


def _batches_one_by_one(lengths, max_tokens, sort_keys, multiple, seed, num_replicas):
    """The sampler's batches formed the plain way, one example at a time, as lists: what the sampler's
    arrays must reproduce exactly (a recipe's seed gives the batches it always gave)."""
    order = list(range(len(lengths)))
    random.Random(seed).shuffle(order)
    order.sort(key=lambda i: sort_keys[i])
    batches, batch, batch_max = [], [], 0
    for index in order:
        new_max = max(batch_max, lengths[index])
        while batch and (len(batch) + 1) * new_max > max_tokens:
            keep = max(multiple * (len(batch) // multiple), len(batch) % multiple)
            batches.append(batch[:keep])
            batch = batch[keep:]
            batch_max = max((lengths[i] for i in batch), default=0)
            new_max = max(batch_max, lengths[index])
        batch.append(index)
        batch_max = new_max
    if batch:
        batches.append(batch)
    if num_replicas > 1 and len(batches) % num_replicas:
        batches += batches[: num_replicas - len(batches) % num_replicas]
    return batches


@pytest.mark.parametrize("trial", range(12))
def test_token_budget_batches_are_those_formed_one_example_at_a_time(trial):
    rng = random.Random(trial)
    size = rng.choice([0, 1, 7, 500, 2000])
    sources = [rng.randrange(1, 60) for _ in range(size)]
    targets = [rng.randrange(1, 60) for _ in range(size)]
    lengths = [max(pair) for pair in zip(sources, targets, strict=True)]
    keys = list(zip(sources if trial % 2 else lengths, targets, strict=True))
    multiple, replicas, budget = rng.choice([1, 3, 8]), rng.choice([1, 2, 3]), rng.choice([60, 200, 1000])
    sampler = TokenBudgetBatchSampler(
        lengths,
        budget,
        sort_keys=keys or None,
        batch_size_multiple=multiple,
        seed=trial,
        num_replicas=replicas,
    )
    assert sampler.batches == _batches_one_by_one(lengths, budget, keys, multiple, trial, replicas)


def test_token_budget_batches_are_sharded_across_ranks():
    lengths = [((i * 31) % 40) + 1 for i in range(301)]
    ranks = [TokenBudgetBatchSampler(lengths, max_tokens=120, seed=0, num_replicas=2, rank=r) for r in (0, 1)]
    assert len(ranks[0]) == len(ranks[1]) == len(list(ranks[0])) == len(list(ranks[1]))
    first = {tuple(b) for b in ranks[0]}
    second = {tuple(b) for b in ranks[1]}
    covered = {i for batch in first | second for i in batch}
    assert covered == set(range(301))
    assert len(first & second) <= 1  # at most the one batch repeated to even out the ranks


def test_token_budget_rejects_impossible_budget():
    with pytest.raises(ValueError, match="exceeds the batch budget `max_tokens=10`"):
        TokenBudgetBatchSampler([3, 12, 5], max_tokens=10)


def _features(word_tokenizer):
    pairs = [
        ("ein hund läuft im park", "a dog runs in the park"),
        ("zwei katzen schlafen", "two cats sleep"),
        ("ein hund", "a dog"),
        ("zwei katzen schlafen im park", "two cats sleep in the park"),
    ] * 6
    return Dataset.from_list([dict(word_tokenizer(src, text_target=tgt)) for src, tgt in pairs])


def _trainer(tmp_path, word_tokenizer, max_steps, **kwargs):
    torch.manual_seed(0)
    model = VanillaTransformerForConditionalGeneration(tiny_config())
    args = Seq2SeqTrainingArguments(
        output_dir=str(tmp_path),
        max_steps=max_steps,
        learning_rate=paper_peak_learning_rate(32, 4),
        lr_scheduler_type="inverse_sqrt",
        warmup_steps=4,
        adam_beta1=0.9,
        adam_beta2=0.98,
        adam_epsilon=1e-9,
        weight_decay=0.0,
        optim="adamw_torch",
        report_to=[],
        logging_steps=1,
        use_cpu=True,
        seed=0,
        save_strategy="steps",
        save_steps=3,
        dataloader_num_workers=0,
        **kwargs,
    )
    features = _features(word_tokenizer)
    return TokenBudgetSeq2SeqTrainer(
        model=model,
        args=args,
        train_dataset=features,
        eval_dataset=features.select(range(4)),
        data_collator=DataCollatorForSeq2Seq(word_tokenizer, model=model),
        max_tokens=40,
        callbacks=[LossPlotCallback()],
    )


class _RecordingHandler(logging.Handler):
    def __init__(self):
        super().__init__(level=logging.WARNING)
        self.messages = []

    def emit(self, record):
        self.messages.append(record.getMessage())


def test_only_tied_copies_of_a_loaded_matrix_are_no_loss():
    model = VanillaTransformerForConditionalGeneration(tiny_config())
    tied = ["model.encoder.embed_tokens.weight", "model.decoder.embed_tokens.weight", "lm_head.weight"]
    assert missing_beyond_tied_copies(model, tied) == []
    every = [*tied, "model.shared.weight"]  # no copy was loaded: all of them are lost
    assert missing_beyond_tied_copies(model, every) == every
    other = "model.encoder.layers.0.mlp.fc1.weight"
    assert missing_beyond_tied_copies(model, [*tied, other]) == [other]


def test_resume_continues_exactly_like_an_uninterrupted_run(tmp_path, word_tokenizer):
    uninterrupted = _trainer(tmp_path / "full", word_tokenizer, max_steps=6)
    uninterrupted.train()
    reference = {k: v.clone() for k, v in uninterrupted.model.state_dict().items()}

    killed = _trainer(
        tmp_path / "killed", word_tokenizer, max_steps=3
    )  # stands for a run killed after step 3
    killed.train()
    resumed = _trainer(tmp_path / "killed", word_tokenizer, max_steps=6)
    warnings = _RecordingHandler()
    logging.getLogger("transformers").addHandler(warnings)
    try:
        resumed.train(resume_from_checkpoint=str(tmp_path / "killed" / "checkpoint-3"))
    finally:
        logging.getLogger("transformers").removeHandler(warnings)
    # The checkpoint holds the tied embeddings once: no "missing keys" warning for the other names.
    assert not [message for message in warnings.messages if "missing keys" in message], warnings.messages
    assert resumed.state.global_step == 6
    for name, tensor in resumed.model.state_dict().items():
        torch.testing.assert_close(tensor, reference[name], atol=1e-6, rtol=1e-5, msg=name)
    optimizer_state = resumed.optimizer.state_dict()["state"]
    assert all(int(s["step"]) == 6 for s in optimizer_state.values())
    assert resumed.lr_scheduler.last_epoch == 6


def test_loss_log_and_plot_written_next_to_checkpoints(tmp_path, word_tokenizer):
    trainer = _trainer(tmp_path, word_tokenizer, max_steps=4, eval_strategy="steps", eval_steps=2)
    trainer.train()
    records = [json.loads(line) for line in (tmp_path / LOSS_LOG_NAME).read_text().splitlines()]
    assert any("loss" in r for r in records) and any("eval_loss" in r for r in records)
    png = (tmp_path / LOSS_PLOT_NAME).read_bytes()
    assert png.startswith(b"\x89PNG") and len(png) > 5000


def test_loss_log_appends_number_records_and_draws_both_curves(tmp_path):
    log = LossLog(tmp_path / "run")
    log.plot()
    assert not (tmp_path / "run" / LOSS_PLOT_NAME).exists()  # nothing logged, nothing drawn
    log.write(10, {"loss": 3.5, "learning_rate": 1e-3, "epoch": 0.5})
    log.write(20, {"eval_loss": 3.1, "eval_bleu": 4.2, "eval_bleu_signature": "nrefs:1|case:mixed"})
    LossLog(tmp_path / "run").write(30, {"loss": 2.9})  # a resumed run appends to the same file
    records = [json.loads(line) for line in (tmp_path / "run" / LOSS_LOG_NAME).read_text().splitlines()]
    assert records == [
        {"step": 10, "loss": 3.5, "learning_rate": 1e-3, "epoch": 0.5},
        {"step": 20, "eval_loss": 3.1, "eval_bleu": 4.2},  # strings are left out
        {"step": 30, "loss": 2.9},
    ]
    assert (log.train, log.eval) == ([(10, 3.5)], [(20, 3.1)])
    log.plot()
    assert (tmp_path / "run" / LOSS_PLOT_NAME).read_bytes().startswith(b"\x89PNG")


def test_time_budget_is_spent_only_after_its_minutes():
    with pytest.raises(ValueError, match="must be positive, got 0 minutes"):
        TimeBudget(0)
    budget = TimeBudget(1e-9)
    assert not budget.spent()  # not started
    budget.start()
    assert budget.spent()
    long = TimeBudget(60)
    long.start()
    assert not long.spent()


class _SetClock(TimeBudget):
    """A time budget whose clock the test sets (`now`, in seconds)."""

    def __init__(self, minutes):
        super().__init__(minutes)
        self.now = 0.0

    def elapsed(self):
        return self.now


def test_clock_decay_warms_up_by_steps_then_reaches_zero_as_the_budget_ends():
    budget = _SetClock(10)
    optimizer = torch.optim.SGD([torch.nn.Parameter(torch.zeros(1))], lr=1.0)
    (factor,) = clock_linear_schedule(optimizer, warmup_steps=4, budget=budget).lr_lambdas
    assert [factor(step) for step in range(4)] == [0, 0.25, 0.5, 0.75]
    budget.now = 60  # warmup ended a tenth into the budget: the decay starts from the peak there
    assert factor(4) == 1.0
    budget.now = 330  # half of the remaining time, whatever the step count
    assert factor(50) == pytest.approx(0.5)
    budget.now = 600
    assert factor(90) == 0.0
    budget.now = 700  # the step that runs while the run stops
    assert factor(91) == 0.0


def test_clock_decay_ends_warmup_by_a_share_of_the_budget_on_a_slow_machine():
    budget = _SetClock(10)
    optimizer = torch.optim.SGD([torch.nn.Parameter(torch.zeros(1))], lr=1.0)
    schedule = clock_linear_schedule(optimizer, warmup_steps=100, budget=budget, max_warmup_fraction=0.2)
    (factor,) = schedule.lr_lambdas
    budget.now = 30  # step 10 of 100, but a quarter of the warmup's minutes: the further along leads
    assert factor(10) == pytest.approx(0.25)
    budget.now = 48
    assert factor(90) == pytest.approx(0.9)  # here the steps are further along
    budget.now = 120  # a fifth of the budget spent at step 20: warmup is over, the decay starts
    assert factor(20) == 1.0
    budget.now = 360
    assert factor(60) == pytest.approx(0.5)
    budget.now = 600
    assert factor(100) == 0.0  # past warmup_steps, still decaying: the decay never warms up again


def test_time_budget_continues_the_clock_of_a_checkpoint(tmp_path):
    assert not TimeBudget(1).load(tmp_path)  # no record: the caller says the clock starts again
    (tmp_path / TimeBudget.STATE_FILE).write_text(
        json.dumps({"minutes": 1, "elapsed_seconds": 30.0, "decay_from": 0.1}), encoding="utf-8"
    )
    budget = TimeBudget(1)
    assert budget.load(tmp_path) and budget.decay_from == 0.1
    assert budget.elapsed() == 30.0  # before the run starts
    budget.start()
    assert 0.5 <= budget.fraction() < 0.6 and not budget.spent()


def test_trainer_decays_over_the_clock_stops_at_its_end_and_records_it(tmp_path, word_tokenizer):
    """Each step takes ten seconds of a two-minute budget: the Trainer warms up over 4 steps, decays linearly
    in time, stops after step 12, and each checkpoint records the time spent for a resume."""
    budget = _SetClock(2)

    class Tick(TrainerCallback):
        def on_step_end(self, args, state, control, **kwargs):
            budget.now += 10

    trainer = _trainer(tmp_path, word_tokenizer, max_steps=1000)  # 4 warmup steps
    trainer.clock_decay = budget
    trainer.add_callback(Tick())  # before the budget's callback: a step's time has passed when it is read
    trainer.add_callback(TimeBudgetCallback(budget))
    trainer.train()
    assert trainer.state.global_step == 12
    rates = [r["learning_rate"] for r in trainer.state.log_history if "learning_rate" in r]
    peak = trainer.args.learning_rate
    # Logged at step n: the rate update n used, set after update n - 1 (m below), when the time of m - 1 steps
    # (10 s each) had passed. The decay starts from the peak after update 4 (30 s), reaching zero at 120 s.
    expected = [m / 4 if m < 4 else (1 - 10 * (m - 1) / 120) / (1 - 30 / 120) for m in range(12)]
    assert rates == pytest.approx([peak * factor for factor in expected])
    record = json.loads((tmp_path / "checkpoint-12" / TimeBudget.STATE_FILE).read_text(encoding="utf-8"))
    assert record == {"minutes": 2, "elapsed_seconds": 120, "decay_from": 0.25}
    assert budget_report(budget) == (
        "The 2-minute time budget bought 12 optimizer steps; raise --max_train_minutes above 2 to train "
        "longer."
    )


def test_a_run_its_steps_end_says_nothing_of_its_time_budget(tmp_path, word_tokenizer):
    """The budget's line is for runs the clock ended: a run that reached max_steps (even with the budget spent
    at that very step) or has no budget has none."""
    budget = _SetClock(1)
    budget.now = 60  # spent from the first step on, but max_steps ends the run after it
    trainer = _trainer(tmp_path, word_tokenizer, max_steps=1)
    trainer.add_callback(TimeBudgetCallback(budget))
    trainer.train()
    assert trainer.state.global_step == 1
    assert budget.stopped_at is None and budget_report(budget) is None
    assert budget_report(None) is None
    budget.stopped_at = 2950
    assert budget_report(budget).startswith("The 1-minute time budget bought 2,950 optimizer steps;")


def test_clock_decay_needs_a_linear_schedule_and_a_time_budget():
    args = Seq2SeqTrainingArguments(output_dir="unused", lr_scheduler_type="linear", report_to=[])
    RecipeArguments(decay_by_clock=True, max_train_minutes=10).check(args)
    RecipeArguments(decay_by_clock=True, max_train_minutes=10, max_warmup_fraction=0.2).check(args)
    with pytest.raises(ValueError, match="set --decay_by_clock too"):
        RecipeArguments(max_train_minutes=10, max_warmup_fraction=0.2).check(args)
    with pytest.raises(ValueError, match=r"must be in \(0, 1\), got 1.5"):
        RecipeArguments(decay_by_clock=True, max_train_minutes=10, max_warmup_fraction=1.5).check(args)
    with pytest.raises(ValueError, match="set --max_train_minutes too"):
        RecipeArguments(decay_by_clock=True).check(args)
    args.lr_scheduler_type = "inverse_sqrt"
    with pytest.raises(ValueError, match="set --lr_scheduler_type linear .got inverse_sqrt"):
        RecipeArguments(decay_by_clock=True, max_train_minutes=10).check(args)
    RecipeArguments(max_train_minutes=10).check(args)  # a clock without the decay: any schedule


def test_unset_schedule_is_eq_3_for_a_new_model_and_fine_tuning_for_a_trained_one():
    args = PaperSeq2SeqTrainingArguments(output_dir="unused", report_to=[])
    line = choose_schedule(RecipeArguments(lr_scale=0.8), args, 192, from_trained=False)
    assert args.learning_rate == pytest.approx(0.8 * 192**-0.5 * 4000**-0.5)
    assert (args.lr_scheduler_type, args.warmup_steps) == ("inverse_sqrt", 4000)
    assert line.startswith("Training a new model: learning rate 0.000913 (eq. 3's peak x 0.8), inverse_sqrt")
    args = PaperSeq2SeqTrainingArguments(output_dir="unused", report_to=[])
    line = choose_schedule(RecipeArguments(), args, 192, from_trained=True)
    assert (args.learning_rate, args.lr_scheduler_type, args.warmup_steps) == (5e-5, "linear", 0)
    assert line.startswith("Fine-tuning: learning rate 5e-05 (fine-tuning), linear after 0 warmup steps;")
    # A trained model with --lr_scale given (a recipe's eq. 3) trains by eq. 3.
    args = PaperSeq2SeqTrainingArguments(output_dir="unused", report_to=[])
    line = choose_schedule(RecipeArguments(lr_scale=0.5), args, 192, from_trained=True)
    assert args.learning_rate == pytest.approx(0.5 * 192**-0.5 * 4000**-0.5)
    assert line.startswith(
        "Training a trained model: learning rate 0.000571 (eq. 3's peak x 0.5), inverse_sqrt"
    )


@pytest.mark.parametrize("from_trained", [False, True])
def test_a_schedule_option_given_is_never_replaced(from_trained):
    args = PaperSeq2SeqTrainingArguments(
        output_dir="unused", learning_rate=5e-5, warmup_steps=400, report_to=[]
    )
    line = choose_schedule(RecipeArguments(), args, 192, from_trained=from_trained)
    assert (args.learning_rate, args.warmup_steps) == (5e-5, 400)
    assert args.lr_scheduler_type == ("linear" if from_trained else "inverse_sqrt")
    assert "(given: learning_rate, warmup_steps)" in line


def test_checkpoint_averaging_writes_mean_weights(tmp_path, word_tokenizer):
    trainer = _trainer(tmp_path, word_tokenizer, max_steps=6)
    trainer.train()
    checkpoints = last_checkpoints(tmp_path, 2)
    assert [c.name for c in checkpoints] == ["checkpoint-3", "checkpoint-6"]
    out = average_checkpoints(checkpoints, tmp_path / "averaged")
    a, b = (load_file(c / "model.safetensors") for c in checkpoints)
    averaged = load_file(out / "model.safetensors")
    for name in a:
        torch.testing.assert_close(averaged[name], (a[name] + b[name]) / 2)
    model = VanillaTransformerForConditionalGeneration.from_pretrained(out)
    assert model.lm_head.weight is model.model.shared.weight
    with pytest.raises(ValueError, match="has 2"):
        last_checkpoints(tmp_path, 5)


def _saved_checkpoint(folder, step, tokenizer, dtype=torch.float32, **config):
    """A checkpoint of a tiny model as a run leaves one: weights, config, tokenizer and its record."""
    torch.manual_seed(step)
    model = VanillaTransformerForConditionalGeneration(tiny_config(**config)).to(dtype)
    model.save_pretrained(folder)
    tokenizer.save_pretrained(folder)
    write_complete_record(folder, step)
    return folder


def test_average_checkpoints_refuses_checkpoints_of_two_model_sizes_in_one_line(tmp_path, word_tokenizer):
    """A run folder whose checkpoints two runs of different d_model saved: the sum of their weights would end
    in a RuntimeError; the first weight whose shape differs is named, with both shapes."""
    run = tmp_path / "run"
    small = _saved_checkpoint(run / "checkpoint-2", 2, word_tokenizer)
    large = _saved_checkpoint(run / "checkpoint-4", 4, word_tokenizer, d_model=64)
    a, b = load_file(small / "model.safetensors"), load_file(large / "model.safetensors")
    name = next(name for name in a if a[name].shape != b[name].shape)
    before = sha(tmp_path)
    result = run_script_file(
        "average_checkpoints.py", "--run_dir", run, "--last", "2", "--output_dir", tmp_path / "averaged",
        cwd=tmp_path,
    )  # fmt: skip
    assert result.returncode == 2 and "Traceback" not in result.stderr, result.stderr[-3000:]
    assert result.stderr.strip().splitlines() == [
        f"error: {small} and {large} are models of different sizes: {name} is {list(a[name].shape)} in "
        f"checkpoint-2 and {list(b[name].shape)} in checkpoint-4. Average the checkpoints of one model: "
        "fewer of them (--last), all saved since its size last changed."
    ]
    assert sha(tmp_path) == before and not (tmp_path / "averaged").exists()


def test_average_checkpoints_writes_beside_the_checkpoints_and_takes_mixed_dtypes(tmp_path, word_tokenizer):
    """`--output_dir <run>/averaged`, inside the run folder it reads, stays fine. Weights saved in bfloat16
    by one checkpoint and float32 by the next average in float64, written in the last one's dtype, said."""
    run = tmp_path / "run"
    older = _saved_checkpoint(run / "checkpoint-2", 2, word_tokenizer, dtype=torch.bfloat16)
    newer = _saved_checkpoint(run / "checkpoint-4", 4, word_tokenizer)
    before = sha(run)
    result = run_script_file(
        "average_checkpoints.py", "--run_dir", run, "--last", "2", "--output_dir", run / "averaged",
        cwd=tmp_path,
    )  # fmt: skip
    assert result.returncode == 0, result.stderr[-3000:]
    assert (
        "checkpoint-2 holds " in result.stderr and " in bfloat16, checkpoint-4 in float32: " in result.stderr
    )
    assert "written in float32, as checkpoint-4 loads" in result.stderr
    assert {path: digest for path, digest in sha(run).items() if "averaged" not in path} == before
    a, b = (load_file(folder / "model.safetensors") for folder in (older, newer))
    averaged = load_file(run / "averaged" / "model.safetensors")
    for name in a:
        assert averaged[name].dtype == torch.float32
        torch.testing.assert_close(averaged[name], ((a[name].double() + b[name].double()) / 2).float())


def test_a_time_budgeted_run_shows_minutes_of_its_budget_not_max_steps():
    """A run stopped by the clock must not show a bar of `max_steps` (and an estimate of hours)."""
    from types import SimpleNamespace

    callback = TimeBudgetProgressCallback(minutes=6)
    state = SimpleNamespace(is_world_process_zero=True, global_step=0, max_steps=100_000)
    callback.on_train_begin(None, state, None)
    callback.started -= 90  # a minute and a half into the budget
    state.global_step = 250
    callback.on_step_end(None, state, None)
    bar = callback.training_bar
    assert bar.total == 6 and abs(bar.n - 1.5) < 0.01
    text = str(bar)
    assert "1.5/6 min of the budget, step 250" in text and "100000" not in text
    callback.on_train_end(None, state, None)


def test_training_refuses_an_earlier_runs_output_dir_unless_asked(tmp_path):
    """A second run into the same output_dir would rotate away the first run's checkpoints and append to its
    loss log: refused, unless it continues that run or is asked to replace it (and then only the run's own
    files go)."""
    run = tmp_path / "run"
    (run / "checkpoint-200").mkdir(parents=True)
    (run / LOSS_LOG_NAME).write_text("{}\n")
    (run / "notes.txt").write_text("mine")
    args = Seq2SeqTrainingArguments(output_dir=str(run))
    with pytest.raises(
        FileExistsError,
        match=rf"{run} holds an earlier training run \(checkpoint-200, {LOSS_LOG_NAME}\): pass --overwrite "
        r"to replace it, --resume_from_checkpoint true to continue it, or another "
        r"--output_dir",
    ):
        prepare_output_dir(args.output_dir, False, overwrite=False)
    resume = Seq2SeqTrainingArguments(output_dir=str(run), resume_from_checkpoint=str(run / "checkpoint-200"))
    prepare_output_dir(resume.output_dir, True, overwrite=False)
    assert (run / "checkpoint-200").is_dir()
    prepare_output_dir(args.output_dir, False, overwrite=True)
    assert sorted(path.name for path in run.iterdir()) == ["notes.txt"]
    prepare_output_dir(args.output_dir, False, overwrite=False)  # nothing of a run is left to refuse
    prepare_output_dir(tmp_path / "new", False, overwrite=False)


def test_a_folder_holding_a_saved_model_is_not_trained_into_unasked(tmp_path, tiny_model):
    from hf_vanilla_transformer.training import PaperSeq2SeqTrainingArguments

    tiny_model.save_pretrained(tmp_path / "model")
    args = PaperSeq2SeqTrainingArguments(output_dir=str(tmp_path / "model"), report_to=[])
    with pytest.raises(FileExistsError, match=r"holds a saved model \(config.json and weights\).*--model"):
        prepare_output_dir(args.output_dir, False, overwrite=False)
    prepare_output_dir(args.output_dir, False, overwrite=True)  # asked: the run goes beside it, untouched
    assert (tmp_path / "model" / "model.safetensors").is_file()


def test_lengths_beyond_the_models_positions_are_refused_before_training():
    from hf_vanilla_transformer.tasks import DataArguments
    from hf_vanilla_transformer.training.setup import check_lengths_fit

    config = tiny_config()  # 256 positions
    check_lengths_fit(DataArguments(max_source_length=256, max_target_length=200), config)
    with pytest.raises(
        ValueError,
        match=r"--max_target_length 300 is more than 256, the model's max_position_embeddings: give "
        r"--max_target_length 256 or less, or build the model with more positions \(--config_overrides",
    ):
        check_lengths_fit(DataArguments(max_source_length=100, max_target_length=300), config)


def test_a_model_records_the_lengths_it_was_trained_with(tmp_path):
    """Training records its data's lengths in the model's configuration (`DataArguments.record_in`, beside
    the task and the languages): saved and loaded with it, decoding reads them. A configuration saved before,
    without them, loads with none recorded."""
    from hf_vanilla_transformer import VanillaTransformerConfig
    from hf_vanilla_transformer.tasks import DataArguments

    config = tiny_config()
    assert (config.max_source_length, config.max_target_length) == (None, None)  # not recorded
    DataArguments(task="translation", max_source_length=50, max_target_length=70).record_in(config)
    config.save_pretrained(tmp_path / "model")
    loaded = VanillaTransformerConfig.from_pretrained(tmp_path / "model")
    assert (loaded.max_source_length, loaded.max_target_length, loaded.task) == (50, 70, "translation")
    saved = json.loads((tmp_path / "model" / "config.json").read_text())
    del saved["max_source_length"], saved["max_target_length"]
    (tmp_path / "model" / "config.json").write_text(json.dumps(saved))
    earlier = VanillaTransformerConfig.from_pretrained(tmp_path / "model")
    assert (earlier.max_source_length, earlier.max_target_length) == (None, None)
