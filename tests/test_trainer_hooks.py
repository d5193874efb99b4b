"""What `TokenBudgetSeq2SeqTrainer` takes from the Trainer beyond its public API (docs/compatibility.md, "What
the Trainer subclass uses beyond the public API"): each private method it overrides or calls is listed there,
keeps the signature it is overridden or called with here, and does what the override relies on; and what
replaced the others (a callback for the sampler's epoch, `create_scheduler` alone for the clock's schedule)
behaves as the private hooks did."""

import inspect
import logging
import re
from pathlib import Path

import pytest
import torch
import transformers.trainer
from accelerate.data_loader import BatchSamplerShard
from safetensors.torch import load_file
from transformers import Seq2SeqTrainer, TrainerCallback

from hf_vanilla_transformer import VanillaTransformerForConditionalGeneration
from hf_vanilla_transformer.training import COMPLETE_NAME, TokenBudgetSeq2SeqTrainer
from hf_vanilla_transformer.training import trainer as trainer_module
from hf_vanilla_transformer.training.checkpoints import checkpoint_problem
from hf_vanilla_transformer.training.trainer import CompleteRecordCallback

from .test_training import _SetClock, _trainer

ROOT = Path(__file__).resolve().parents[1]

# Private methods of transformers' Trainer that the subclass overrides, and those it calls, with the
# parameters it overrides or calls them with.
OVERRIDDEN = {
    "_issue_warnings_after_load": ["self", "load_result"],
    "_load_best_model": ["self"],
    "_save_checkpoint": ["self", "model", "trial"],
    "_save": ["self", "output_dir", "state_dict"],
    "_get_train_sampler": ["self", "train_dataset"],
}
CALLED = {"_get_output_dir": ["self", "trial"]}
# Private names of the package's own, not the Trainer's, that trainer.py reaches through an object.
OWN = {"_token_budget_sampler", "_clock_schedule_state", "_replace"}


def test_the_private_trainer_methods_overridden_are_those_documented():
    overridden = {
        name
        for name in vars(TokenBudgetSeq2SeqTrainer)
        if name.startswith("_") and not name.startswith("__") and hasattr(Seq2SeqTrainer, name)
    }
    assert overridden == set(OVERRIDDEN)
    source = inspect.getsource(trainer_module)
    reached = set(re.findall(r"\b(?:self|trainer|super\(\)|load_result|atexit)\.(_[a-z]\w*)", source))
    assert reached - OWN == set(OVERRIDDEN) | set(CALLED)
    doc = (ROOT / "docs" / "compatibility.md").read_text(encoding="utf-8")
    section = doc.split("## What the Trainer subclass uses beyond the public API", 1)[1].split("\n## ", 1)[0]
    rows = {
        name
        for line in section.splitlines()
        if line.startswith("| `_")
        for name in re.findall(r"`(_\w+)`", line)
    }
    assert set(OVERRIDDEN) | set(CALLED) <= rows
    assert "_created_lr_scheduler" not in source and "_run_epoch" not in source
    # The public methods overridden keep their parameters too: the epoch count rests on this one.
    assert list(inspect.signature(Seq2SeqTrainer.set_initial_training_values).parameters) == [
        "self",
        "args",
        "dataloader",
    ]


@pytest.mark.parametrize("name", [*OVERRIDDEN, *CALLED])
def test_the_private_trainer_methods_keep_the_parameters_used_here(name):
    method = getattr(Seq2SeqTrainer, name, None)
    assert method is not None, f"transformers' Trainer no longer has {name}: see docs/compatibility.md"
    parameters = list(inspect.signature(method).parameters)
    assert parameters == {**OVERRIDDEN, **CALLED}[name], f"{name}{inspect.signature(method)}"


def test_the_trainers_loader_draws_the_token_budget_batches(tmp_path, word_tokenizer):
    """`_get_train_sampler` is where the Trainer takes the sampler, then passes it as a batch sampler."""
    trainer = _trainer(tmp_path, word_tokenizer, max_steps=1)
    sizes = [batch["input_ids"].shape[0] for batch in trainer.get_train_dataloader()]
    assert sizes == [len(batch) for batch in trainer._token_budget_sampler]
    assert sorted(sizes) == [4, 5, 5, 10]  # not `per_device_train_batch_size` (8) sentences a batch


class _Epochs(TrainerCallback):
    """The sampler's epoch as each epoch begins (after `SamplerEpochCallback`) and as its first batch is
    drawn (after the Trainer's own `set_epoch`, where it reaches the sampler)."""

    def __init__(self, trainer):
        self.trainer = trainer
        self.told, self.drawn = [], []

    def on_epoch_begin(self, args, state, control, **kwargs):
        self.told.append(self.trainer._token_budget_sampler.epoch)

    def on_step_begin(self, args, state, control, **kwargs):
        if len(self.drawn) < len(self.told):
            self.drawn.append(self.trainer._token_budget_sampler.epoch)


def test_the_sampler_is_told_each_epoch_as_the_trainer_counts_it(tmp_path, word_tokenizer):
    """4 batches an epoch, 10 updates: a run from the start and one resumed from checkpoint-6 (two batches
    into the second epoch). On one process the Trainer reaches the sampler too: both count alike."""
    full = _trainer(tmp_path, word_tokenizer, max_steps=10)
    epochs = _Epochs(full)
    full.add_callback(epochs)
    full.train()
    assert epochs.told == epochs.drawn == [0, 1, 2]
    resumed = _trainer(tmp_path, word_tokenizer, max_steps=10)
    epochs = _Epochs(resumed)
    resumed.add_callback(epochs)
    resumed.train(resume_from_checkpoint=str(tmp_path / "checkpoint-6"))
    assert epochs.told == epochs.drawn == [1, 2]


def test_resumed_inside_an_epoch_where_the_trainer_cannot_reach_the_sampler_takes_that_epochs_batches(
    tmp_path, word_tokenizer, monkeypatch
):
    """On several processes a resumed epoch's loader holds the sampler under accelerate's `BatchSamplerShard`
    under `SkipBatchSampler`, out of the Trainer's reach; here one process is given that loader. The sampler
    still takes the second epoch's order (from `SamplerEpochCallback`), and the run ends as the uninterrupted
    one."""
    uninterrupted = _trainer(tmp_path / "full", word_tokenizer, max_steps=10)
    uninterrupted.train()
    killed = _trainer(tmp_path / "killed", word_tokenizer, max_steps=6)
    killed.train()

    original = transformers.trainer.skip_first_batches
    wrapped = []

    def as_on_several_processes(dataloader, num_batches=0):
        loader = original(dataloader, num_batches)
        loader.batch_sampler.batch_sampler = BatchSamplerShard(loader.batch_sampler.batch_sampler)
        wrapped.append(loader)
        return loader

    monkeypatch.setattr(transformers.trainer, "skip_first_batches", as_on_several_processes)
    resumed = _trainer(tmp_path / "killed", word_tokenizer, max_steps=10)
    epochs = _Epochs(resumed)
    resumed.add_callback(epochs)
    resumed.train(resume_from_checkpoint=str(tmp_path / "killed" / "checkpoint-6"))
    assert len(wrapped) == 1
    assert epochs.told == epochs.drawn == [1, 2]
    reference = uninterrupted.model.state_dict()
    for name, tensor in resumed.model.state_dict().items():
        torch.testing.assert_close(tensor, reference[name], atol=1e-6, rtol=1e-5, msg=name)


def test_the_clock_schedule_is_built_anew_for_each_training_loop_only(tmp_path, word_tokenizer):
    """As the Trainer's own schedule: kept between loops, built anew when `train()` runs again."""
    trainer = _trainer(tmp_path, word_tokenizer, max_steps=2)
    trainer.clock_decay = _SetClock(10)
    trainer.train()
    first = trainer.lr_scheduler
    assert "clock_linear_schedule" in first.lr_lambdas[0].__qualname__ and first.last_epoch == 2
    assert trainer.create_scheduler(2) is first  # no new loop: the same schedule
    trainer.train()
    second = trainer.lr_scheduler
    assert second is not first and "clock_linear_schedule" in second.lr_lambdas[0].__qualname__
    assert second.last_epoch == 2  # stepped by the second loop only


def test_a_gathered_state_dict_is_saved_with_each_tied_matrix_once(tmp_path, word_tokenizer):
    """Under FSDP and DeepSpeed `save_model` hands `_save` weights gathered from the shards: tied names no
    longer share storage, and `save_pretrained` writes each. The override drops the copies."""
    trainer = _trainer(tmp_path, word_tokenizer, max_steps=1)
    tied = trainer.model.all_tied_weights_keys
    gathered = {name: tensor.clone() for name, tensor in trainer.model.state_dict().items()}
    Seq2SeqTrainer._save(trainer, str(tmp_path / "stock"), state_dict=dict(gathered))
    stock = load_file(tmp_path / "stock" / "model.safetensors")
    # transformers writes every copy (once it drops them itself, the override is no longer needed).
    assert set(tied) <= set(stock)
    trainer._save(str(tmp_path / "ours"), state_dict=dict(gathered))
    ours = load_file(tmp_path / "ours" / "model.safetensors")
    assert set(ours) == set(stock) - set(tied)
    loaded = VanillaTransformerForConditionalGeneration.from_pretrained(tmp_path / "ours")
    parameters = dict(loaded.named_parameters(remove_duplicate=False))
    for target, source in tied.items():
        assert parameters[target] is parameters[source], target


def test_a_checkpoint_is_rotated_out_only_once_the_next_one_is_whole(tmp_path, word_tokenizer):
    """`save_total_limit` 1: while checkpoint-6 is written and until its record, checkpoint-3 stays; then it
    goes (`CompleteRecordCallback`), not at the end of the Trainer's save."""
    trainer = _trainer(tmp_path, word_tokenizer, max_steps=9, save_total_limit=1)
    seen = {}

    class Folders(TrainerCallback):  # on_save before CompleteRecordCallback: the save done, not yet recorded
        def on_save(self, args, state, control, **kwargs):
            folders = sorted(tmp_path.glob("checkpoint-*"), key=lambda path: int(path.name.split("-")[1]))
            seen[state.global_step] = [(path.name, checkpoint_problem(path) is None) for path in folders]

    trainer.add_callback(Folders())
    trainer.add_callback(CompleteRecordCallback(trainer.accelerator))
    trainer.train()
    assert seen == {
        3: [("checkpoint-3", False)],
        6: [("checkpoint-3", True), ("checkpoint-6", False)],
        9: [("checkpoint-6", True), ("checkpoint-9", False)],
    }
    assert [path.name for path in tmp_path.glob("checkpoint-*")] == ["checkpoint-9"]
    assert trainer.args.save_total_limit == 1


def test_a_save_into_a_whole_checkpoints_folder_forgets_its_record_before_writing(tmp_path, word_tokenizer):
    first = _trainer(tmp_path, word_tokenizer, max_steps=6)
    first.add_callback(CompleteRecordCallback(first.accelerator))
    first.train()
    assert checkpoint_problem(tmp_path / "checkpoint-6") is None
    resumed = _trainer(tmp_path, word_tokenizer, max_steps=6)
    resumed.add_callback(CompleteRecordCallback(resumed.accelerator))
    writes = []
    save_model = resumed.save_model

    def recording_save_model(output_dir=None, _internal_call=False):
        writes.append((Path(output_dir).name, (Path(output_dir) / COMPLETE_NAME).exists()))
        save_model(output_dir, _internal_call=_internal_call)

    resumed.save_model = recording_save_model
    resumed.train(resume_from_checkpoint=str(tmp_path / "checkpoint-3"))
    assert writes == [("checkpoint-6", False)]
    assert checkpoint_problem(tmp_path / "checkpoint-6") is None  # recorded again once written


class _Records(logging.Handler):
    def __init__(self):
        super().__init__(level=logging.WARNING)
        self.messages = []

    def emit(self, record):
        self.messages.append(record.getMessage())


@pytest.mark.parametrize("damaged", [False, True], ids=["whole", "damaged"])
def test_the_best_checkpoint_is_loaded_at_the_end_only_if_whole(tmp_path, word_tokenizer, damaged):
    """Evaluated at steps 3 and 6, the best by the loss is checkpoint-3. Whole, its weights are loaded at the
    end; with a truncated file the last weights stay, and a warning says why."""
    trainer = _trainer(
        tmp_path,
        word_tokenizer,
        max_steps=6,
        eval_strategy="steps",
        eval_steps=3,
        load_best_model_at_end=True,
        metric_for_best_model="loss",
    )
    last = {}

    class Damage(TrainerCallback):  # after CompleteRecordCallback: the best checkpoint was whole
        def on_save(self, args, state, control, **kwargs):
            if state.global_step == args.max_steps:
                last.update({k: v.clone() for k, v in trainer.model.state_dict().items()})
                if damaged:
                    weights = Path(state.best_model_checkpoint) / "model.safetensors"
                    weights.write_bytes(weights.read_bytes()[:1000])

    trainer.add_callback(CompleteRecordCallback(trainer.accelerator))
    trainer.add_callback(Damage())
    records = _Records()
    logging.getLogger(trainer_module.__name__).addHandler(records)
    try:
        trainer.train()
    finally:
        logging.getLogger(trainer_module.__name__).removeHandler(records)
    assert Path(trainer.state.best_model_checkpoint).name == "checkpoint-3"
    weights = trainer.model.state_dict()
    if damaged:
        assert any("Keeping the last weights, not the best checkpoint" in m for m in records.messages)
        expected = last
    else:
        assert not records.messages
        expected = load_file(tmp_path / "checkpoint-3" / "model.safetensors")
        assert any(not torch.equal(expected[name], last[name]) for name in expected)
    for name, tensor in expected.items():
        torch.testing.assert_close(weights[name], tensor, atol=0, rtol=0, msg=name)
