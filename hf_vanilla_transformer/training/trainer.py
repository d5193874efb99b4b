"""The Trainer the recipe trains with: `TokenBudgetSeq2SeqTrainer`, `Seq2SeqTrainer` on token-budget batches
and a schedule counted by the clock; its callbacks (the sampler's epoch, the resume contract in each
checkpoint, each checkpoint marked whole); and `make_trainer`, which assembles them from a run's model, data
and options (`run.run_training`'s Trainer step, and `scripts/benchmarks/profile_training.py`'s)."""

from __future__ import annotations

import logging
from pathlib import Path

import torch
from accelerate import Accelerator, PartialState
from datasets import DatasetDict
from transformers import (
    PreTrainedTokenizerBase,
    ProgressCallback,
    Seq2SeqTrainer,
    TrainerCallback,
    TrainerState,
)
from transformers.trainer_utils import PREFIX_CHECKPOINT_DIR, rotate_checkpoints

from ..data.preprocessing import build_seq2seq_collator
from ..tasks import DataArguments, make_compute_metrics
from .agreement import StepAgreement
from .arguments import TASK_METRIC, PaperSeq2SeqTrainingArguments, RecipeArguments
from .batching import TokenBudgetBatchSampler, token_budget_sampler
from .budget import TimeBudget, TimeBudgetCallback, TimeBudgetProgressCallback
from .checkpoints import (
    checkpoint_problem,
    forget_complete_record,
    taken_unchecked,
    write_complete_record,
)
from .faults import Interruption
from .full_weights import FullWeightsCallback, missing_beyond_tied_copies, without_tied_copies
from .logs import LossPlotCallback
from .resume import ResumeContract
from .schedules import clock_linear_schedule
from .streaming import StreamedTokenBudgetBatches, load_stream_state, save_stream_state, streamed_batches

logger = logging.getLogger(__name__)


class TokenBudgetSeq2SeqTrainer(Seq2SeqTrainer):
    """`Seq2SeqTrainer` that, given `max_tokens`, trains on token-budget batches (`token_budget_sampler`, with
    `batch_order` and `batch_size_multiple`) instead of a fixed `per_device_train_batch_size`, and given
    `clock_decay`, decays the learning rate over that time budget (`clock_linear_schedule`, its warmup ending
    by `max_warmup_fraction` of the budget at the latest). Everything else is the stock Trainer."""

    _token_budget_sampler: TokenBudgetBatchSampler | None = None
    updates_per_epoch: int | None = None  # of the current training loop, as the Trainer counts them
    _clock_schedule_state: TrainerState | None = None  # the training loop's state the clock's schedule is of
    interruption: Interruption | None = None  # the signal that stopped the run, if any (`make_trainer`)
    agreement: StepAgreement | None = None  # set by `make_trainer`: what the processes share after a step
    time_budget: TimeBudget | None = None  # set by `make_trainer`: the run's, if it trains by the clock

    def __init__(
        self,
        *args,
        max_tokens: int | None = None,
        batch_order: str = "padded_length",
        batch_size_multiple: int = 1,
        clock_decay: TimeBudget | None = None,
        max_warmup_fraction: float | None = None,
        **kwargs,
    ):
        self.max_tokens = max_tokens
        self.batch_order = batch_order
        self.batch_size_multiple = batch_size_multiple
        self.clock_decay = clock_decay
        self.max_warmup_fraction = max_warmup_fraction
        super().__init__(*args, **kwargs)
        self.add_callback(SamplerEpochCallback(self))

    def create_scheduler(self, num_training_steps: int, optimizer: torch.optim.Optimizer | None = None):
        # The Trainer drops the schedule it built once the next training loop (`train()`) comes to build one,
        # and builds it anew; so here. The clock's schedule was built in an earlier loop if under another
        # `TrainerState` than the current one (each loop starts a new one): the scheduler in its place goes,
        # as the Trainer's would, whatever it is now.
        if self._clock_schedule_state is not None and self._clock_schedule_state is not self.state:
            self.lr_scheduler, self._clock_schedule_state = None, None
        if self.lr_scheduler is None and self.clock_decay is not None:
            self.lr_scheduler = clock_linear_schedule(
                optimizer if optimizer is not None else self.optimizer,
                self.args.get_warmup_steps(num_training_steps),
                self.clock_decay,
                self.max_warmup_fraction,
            )
            self._clock_schedule_state = self.state
        return super().create_scheduler(num_training_steps, optimizer)

    def _issue_warnings_after_load(self, load_result):
        # On resuming, the Trainer warns of every key missing from the checkpoint. A checkpoint holds each
        # tied matrix once, as `save_pretrained` writes it, and loading that copy restores every name of it:
        # those names are no loss, and only the others are reported (through the Trainer's own hook, which
        # each of its checkpoint loaders calls).
        model = self.accelerator.unwrap_model(self.model)
        missing = missing_beyond_tied_copies(model, load_result.missing_keys)
        super()._issue_warnings_after_load(load_result._replace(missing_keys=missing))

    def _load_best_model(self) -> None:
        best = Path(self.state.best_model_checkpoint)
        problem = checkpoint_problem(best)
        if problem is not None and not taken_unchecked(best, PREFIX_CHECKPOINT_DIR):
            logger.warning(
                "Keeping the last weights, not the best checkpoint %s: %s.",
                self.state.best_model_checkpoint,
                problem,
            )
            return
        super()._load_best_model()

    def _save_checkpoint(self, model, trial) -> None:
        # A record of an earlier save at this step goes first (a save cut short keeps its files' sizes),
        # before any process writes. The Trainer rotates old checkpoints at the end of its save, before the
        # new one is marked whole: `CompleteRecordCallback` rotates instead, after the record.
        folder = Path(self._get_output_dir(trial)) / f"{PREFIX_CHECKPOINT_DIR}-{self.state.global_step}"
        if self.args.should_save:
            forget_complete_record(folder)
        self.accelerator.wait_for_everyone()
        limit, self.args.save_total_limit = self.args.save_total_limit, None
        try:
            super()._save_checkpoint(model, trial)
        finally:
            self.args.save_total_limit = limit
        if isinstance(self.train_dataset, StreamedTokenBudgetBatches):  # each process its own share's place
            folder.mkdir(parents=True, exist_ok=True)
            save_stream_state(self.train_dataset, folder, self.args.process_index, self.args.world_size)

    def get_train_dataloader(self):
        if not isinstance(self.train_dataset, StreamedTokenBudgetBatches):
            return super().get_train_dataloader()
        # Whole batches, this process's own (the stream is split among processes already), read in this
        # process: a worker or accelerate's dispatching would read ahead of the batches the checkpoint counts.
        # A generator of its own: a loader's iterator otherwise draws its seed from torch's global generator,
        # and a resumed run, which starts its iterator after restoring that generator, would drop out anew.
        return torch.utils.data.DataLoader(
            self.train_dataset, batch_size=None, collate_fn=self.data_collator, generator=torch.Generator()
        )

    def _save(self, output_dir: str | None = None, state_dict: dict | None = None) -> None:
        # Under FSDP and DeepSpeed the Trainer saves weights gathered from the shards, one tensor per name:
        # the tied copies no longer share storage, so `save_pretrained` would write each of them.
        if state_dict is not None:
            state_dict = without_tied_copies(state_dict, self.accelerator.unwrap_model(self.model))
        super()._save(output_dir, state_dict=state_dict)

    def _get_train_sampler(self, train_dataset=None):
        if self.max_tokens is None:
            return super()._get_train_sampler(train_dataset)
        dataset = train_dataset if train_dataset is not None else self.train_dataset
        self._token_budget_sampler = token_budget_sampler(
            dataset,
            self.max_tokens,
            self.batch_order,
            self.batch_size_multiple,
            seed=self.args.seed,
            num_replicas=self.args.world_size,
            rank=self.args.process_index,
        )
        return self._token_budget_sampler

    def set_initial_training_values(self, args, dataloader):
        values = super().set_initial_training_values(args, dataloader)
        self.updates_per_epoch = values[1]  # `num_update_steps_per_epoch`, for `SamplerEpochCallback`
        return values


class SamplerEpochCallback(TrainerCallback):
    """Tells the token-budget sampler of a `TokenBudgetSeq2SeqTrainer` the epoch of the Trainer's loop as each
    epoch begins, before the loop draws its first batch. The Trainer tells it too, except where accelerate
    hides it: resumed inside an epoch on several processes, the Trainer's `set_epoch` stops at accelerate's
    `BatchSamplerShard` (under `skip_first_batches`' `SkipBatchSampler`), which has no `set_epoch`, and the
    rest of that epoch would come in the first epoch's order."""

    def __init__(self, trainer: TokenBudgetSeq2SeqTrainer):
        self.trainer = trainer
        self.epoch = 0

    def on_train_begin(self, args, state, control, **kwargs):
        # The epoch the Trainer's loop starts with, as the Trainer counts it: the updates done (restored from
        # a checkpoint) over the updates an epoch holds, which its public `set_initial_training_values` says.
        updates = self.trainer.updates_per_epoch
        self.epoch = state.global_step // updates if updates else 0

    def on_epoch_begin(self, args, state, control, **kwargs):
        if self.trainer._token_budget_sampler is not None:
            self.trainer._token_budget_sampler.set_epoch(self.epoch)
        self.epoch += 1


class ResumeContractCallback(TrainerCallback):
    """Writes the run's `ResumeContract` (what decides its batches and its model) into each checkpoint, before
    `CompleteRecordCallback` marks it whole."""

    def __init__(self, contract: ResumeContract):
        self.contract = contract

    def on_save(self, args, state, control, **kwargs):
        if args.should_save:
            self.contract.save(Path(args.output_dir) / f"{PREFIX_CHECKPOINT_DIR}-{state.global_step}")


class CompleteRecordCallback(TrainerCallback):
    """Marks each checkpoint whole once every process has written its part and the other callbacks have
    added theirs (`checkpoints.write_complete_record`), then deletes the checkpoints beyond
    `save_total_limit`, as the Trainer would have done before: so `save_total_limit` whole checkpoints are
    kept at every instant. It must be the last callback to see `on_save`."""

    def __init__(self, accelerator: Accelerator):
        self.accelerator = accelerator

    def on_save(self, args, state, control, **kwargs):
        self.accelerator.wait_for_everyone()
        folder = Path(args.output_dir) / f"{PREFIX_CHECKPOINT_DIR}-{state.global_step}"
        if args.should_save and folder.is_dir():
            write_complete_record(folder, state.global_step)
            rotate_checkpoints(
                output_dir=args.output_dir,
                save_total_limit=args.save_total_limit,
                best_model_checkpoint=state.best_model_checkpoint,
                use_mtime=True,
            )
        self.accelerator.wait_for_everyone()


def make_trainer(
    model: torch.nn.Module,
    tokenizer: PreTrainedTokenizerBase,
    datasets_: DatasetDict,
    data_args: DataArguments,
    recipe_args: RecipeArguments,
    training_args: PaperSeq2SeqTrainingArguments,
    contract: ResumeContract,
    interruption: Interruption | None = None,
) -> TokenBudgetSeq2SeqTrainer:
    """The Trainer the recipe trains `model` with: token-budget batches of `datasets_` (a stream read from its
    recorded place when resuming), the task metric, the loss log, the time budget (restored from
    `resume_from_checkpoint`), each checkpoint with `contract`'s record and full weights, marked whole. Its
    `agreement` shares `interruption` (a signal, here or at another process) and the budget's clock among
    the processes."""
    if training_args.metric_for_best_model == TASK_METRIC:
        training_args.metric_for_best_model = data_args.task_spec.best_metric
    callbacks = [LossPlotCallback(), ResumeContractCallback(contract)]
    budget = recipe_args.time_budget()
    agreement = StepAgreement(interruption or Interruption(), budget, PartialState())
    if budget is not None:
        callbacks.append(TimeBudgetCallback(budget, agreement))
        checkpoint = training_args.resume_from_checkpoint
        if checkpoint and not budget.load(checkpoint):
            logger.warning("%s holds no %s: the time budget starts again.", checkpoint, TimeBudget.STATE_FILE)
    train = datasets_["train"]
    if data_args.streaming:
        train = streamed_batches(train, recipe_args, training_args)
        if training_args.resume_from_checkpoint:
            load_stream_state(
                train,
                training_args.resume_from_checkpoint,
                training_args.process_index,
                training_args.world_size,
                # Resumed anyway with the reading changed (--allow_changed_options): a position of another
                # reading of the stream means nothing, and the stream starts again.
                start_over=bool(contract.changed & {"streaming", "num_processes"}),
            )
    trainer = TokenBudgetSeq2SeqTrainer(
        model=model,
        args=training_args,
        train_dataset=train,
        eval_dataset=datasets_.get("validation"),
        processing_class=tokenizer,
        data_collator=build_seq2seq_collator(tokenizer, model=model),
        compute_metrics=make_compute_metrics(data_args.task_spec, tokenizer)
        if training_args.predict_with_generate
        else None,
        callbacks=callbacks,
        max_tokens=recipe_args.max_tokens,
        batch_order=recipe_args.batch_order,
        batch_size_multiple=recipe_args.batch_size_multiple,
        clock_decay=budget if recipe_args.decay_by_clock else None,
        max_warmup_fraction=recipe_args.max_warmup_fraction,
    )
    trainer.agreement = agreement
    trainer.interruption = interruption
    trainer.time_budget = budget
    trainer.add_callback(FullWeightsCallback(trainer))
    trainer.add_callback(CompleteRecordCallback(trainer.accelerator))
    if recipe_args.max_train_minutes is not None and not training_args.disable_tqdm:
        trainer.remove_callback(ProgressCallback)
        trainer.add_callback(
            TimeBudgetProgressCallback(budget.minutes, spent_minutes=budget.spent_before / 60)
        )
    return trainer
