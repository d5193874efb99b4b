"""`run_training`: the recipe on `Seq2SeqTrainer` (what `scripts/train.py` runs); `build_trainer`, the Trainer
it runs, also for measuring it (`hf_vanilla_transformer.benchmarks.training_profile`); and
`TokenBudgetSeq2SeqTrainer`, the Trainer subclass both use."""

from __future__ import annotations

import logging
from pathlib import Path

import torch
from transformers import ProgressCallback, Seq2SeqTrainer

from ..data.preprocessing import build_seq2seq_collator
from ..tasks import DataArguments, make_compute_metrics
from .arguments import (
    TASK_METRIC,
    ModelArguments,
    PaperSeq2SeqTrainingArguments,
    RecipeArguments,
    prepare_training,
)
from .batching import token_budget_sampler
from .budget import TimeBudget, TimeBudgetCallback, TimeBudgetProgressCallback
from .logs import LossPlotCallback
from .schedules import clock_linear_schedule
from .tied_weights_warning import TiedKeysWarningFilter

logger = logging.getLogger(__name__)


class TokenBudgetSeq2SeqTrainer(Seq2SeqTrainer):
    """`Seq2SeqTrainer` that, given `max_tokens`, trains on token-budget batches (`token_budget_sampler`, with
    `batch_order` and `batch_size_multiple`) instead of a fixed `per_device_train_batch_size`, and given
    `clock_decay`, decays the learning rate over that time budget (`clock_linear_schedule`, its warmup ending
    by `max_warmup_fraction` of the budget at the latest). Everything else is the stock Trainer."""

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

    def create_scheduler(self, num_training_steps: int, optimizer: torch.optim.Optimizer | None = None):
        if self.lr_scheduler is None and self.clock_decay is not None:
            self.lr_scheduler = clock_linear_schedule(
                optimizer if optimizer is not None else self.optimizer,
                self.args.get_warmup_steps(num_training_steps),
                self.clock_decay,
                self.max_warmup_fraction,
            )
            self._created_lr_scheduler = True
        return super().create_scheduler(num_training_steps, optimizer)

    def train(self, *args, **kwargs):
        trainer_logger = logging.getLogger("transformers.trainer")
        quiet = TiedKeysWarningFilter(self.model)
        trainer_logger.addFilter(quiet)
        try:
            return super().train(*args, **kwargs)
        finally:
            trainer_logger.removeFilter(quiet)

    def _get_train_sampler(self, train_dataset=None):
        if self.max_tokens is None:
            return super()._get_train_sampler(train_dataset)
        dataset = train_dataset if train_dataset is not None else self.train_dataset
        return token_budget_sampler(
            dataset,
            self.max_tokens,
            self.batch_order,
            self.batch_size_multiple,
            seed=self.args.seed,
            num_replicas=self.args.world_size,
            rank=self.args.process_index,
        )


def build_trainer(
    model_args: ModelArguments,
    data_args: DataArguments,
    recipe_args: RecipeArguments,
    training_args: PaperSeq2SeqTrainingArguments,
) -> TokenBudgetSeq2SeqTrainer:
    """The Trainer the recipe trains with: model, tokenized data, token-budget batches, the task metric, the
    loss log and the time budget (restored from `resume_from_checkpoint`), ready for `train()`."""
    tokenizer, datasets_, model = prepare_training(model_args, data_args, recipe_args, training_args)
    if training_args.metric_for_best_model == TASK_METRIC:
        training_args.metric_for_best_model = data_args.task_spec.best_metric
    callbacks = [LossPlotCallback()]
    budget = recipe_args.time_budget()
    if budget is not None:
        callbacks.append(TimeBudgetCallback(budget))
        checkpoint = training_args.resume_from_checkpoint
        if checkpoint and not budget.load(checkpoint):
            logger.warning("%s holds no %s: the time budget starts again.", checkpoint, TimeBudget.STATE_FILE)
    trainer = TokenBudgetSeq2SeqTrainer(
        model=model,
        args=training_args,
        train_dataset=datasets_["train"],
        eval_dataset=datasets_.get("validation"),
        processing_class=tokenizer,
        data_collator=build_seq2seq_collator(tokenizer, model=model),
        compute_metrics=make_compute_metrics(data_args.task_spec, tokenizer)
        if training_args.predict_with_generate
        else None,
        callbacks=callbacks,
        max_tokens=data_args.max_tokens,
        batch_order=data_args.batch_order,
        batch_size_multiple=data_args.batch_size_multiple,
        clock_decay=budget if recipe_args.decay_by_clock else None,
        max_warmup_fraction=recipe_args.max_warmup_fraction,
    )
    if recipe_args.max_train_minutes is not None and not training_args.disable_tqdm:
        trainer.remove_callback(ProgressCallback)
        trainer.add_callback(
            TimeBudgetProgressCallback(budget.minutes, spent_minutes=budget.spent_before / 60)
        )
    return trainer


def run_training(
    model_args: ModelArguments,
    data_args: DataArguments,
    recipe_args: RecipeArguments,
    training_args: PaperSeq2SeqTrainingArguments,
) -> tuple[TokenBudgetSeq2SeqTrainer, Path]:
    """Train with `Seq2SeqTrainer` as configured (`build_trainer`), keep the best checkpoint by the task
    metric, and save the final model folder (weights, config, code, tokenizer, pipeline) to
    `<output_dir>/final`."""
    from ..saving import save_model_folder

    trainer = build_trainer(model_args, data_args, recipe_args, training_args)
    trainer.train(resume_from_checkpoint=training_args.resume_from_checkpoint)
    final = Path(training_args.output_dir) / "final"
    if trainer.is_world_process_zero():
        save_model_folder(trainer.model, trainer.processing_class, final)
    return trainer, final
