"""`run_training`: the recipe on `Seq2SeqTrainer` (what `scripts/train.py` runs); `build_trainer`, the Trainer
it runs, also for measuring it (`hf_vanilla_transformer.benchmarks.training_profile`)."""

from __future__ import annotations

import logging
from pathlib import Path

from transformers import ProgressCallback

from ..data.preprocessing import build_seq2seq_collator
from ..tasks import DataArguments, make_compute_metrics
from .arguments import (
    TASK_METRIC,
    ModelArguments,
    PaperSeq2SeqTrainingArguments,
    RecipeArguments,
    prepare_training,
)
from .batching import TokenBudgetSeq2SeqTrainer
from .budget import TimeBudget, TimeBudgetCallback, TimeBudgetProgressCallback
from .logs import LossPlotCallback

logger = logging.getLogger(__name__)


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
