"""`run_training`: the recipe on `Seq2SeqTrainer` (what `scripts/train.py` runs), one function in the order of
its steps: options, tokenizer and configuration, checks, data, model, Trainer, training, saving. The steps
before the Trainer are `setup`'s, which the plain loop (`scripts/train_accelerate.py`) takes too; the
Trainer is `trainer.make_trainer`'s."""

from __future__ import annotations

import json
import logging
from pathlib import Path

from safetensors.torch import load_file
from transformers import AutoTokenizer
from transformers.trainer import TRAINER_STATE_NAME
from transformers.utils import SAFE_WEIGHTS_NAME

from ..tasks import DataArguments
from .arguments import ModelArguments, PaperSeq2SeqTrainingArguments, RecipeArguments
from .checkpoints import checkpoint_problem, save_whole_folder, step_of
from .faults import FaultsCallback, Interruption, Watchdog, naming_a_full_disk
from .full_weights import gathered_model, plain_copy
from .resume import ended_by_budget, run_is_over
from .setup import (
    check_lengths_fit,
    check_options,
    check_resume,
    check_trainer_options,
    choose_schedule,
    load_config_overrides,
    model_config,
    prepare_output_dir,
    resume_point,
    say_what_trains,
    seeded_model,
    tokenized_data,
    trainer_contract,
    trainer_run_finished,
)
from .trainer import TokenBudgetSeq2SeqTrainer, make_trainer

logger = logging.getLogger(__name__)


def run_training(
    model_args: ModelArguments,
    data_args: DataArguments,
    recipe_args: RecipeArguments,
    training_args: PaperSeq2SeqTrainingArguments,
) -> tuple[TokenBudgetSeq2SeqTrainer, Path | None]:
    """Train with `Seq2SeqTrainer` as configured, keep the best checkpoint by the task metric, and save the
    final model folder (weights, config, code, tokenizer, pipeline) to `<output_dir>/final`, whole or absent.
    A SIGINT or SIGTERM during training saves a checkpoint at the step reached and stops without a final
    folder: the final path returned is then None, and `trainer.interruption` says which signal came. One
    after training lets the final folder be finished. A resumed run whose final folder was saved after the
    checkpoint that ends it raises `RunFinished`: there is nothing to do. Of a run its time budget ended,
    `budget_report(trainer.time_budget)` is the line that says how many steps the budget bought."""
    # From here on a signal stops the run (before training, at once), and a launch's process whose launcher
    # is gone stops too.
    interruption = Interruption()
    interruption.install()
    watchdog = Watchdog(recipe_args.stall_timeout)
    watchdog.start()
    try:
        # Options: each refused in one line before anything is read; what only the Trainer reads first.
        check_trainer_options(data_args, recipe_args, training_args)
        check_options(model_args, data_args, training_args.output_dir)

        # Tokenizer and configuration: the configuration the model will be built from, read without building
        # it, and refused if the tokenizer's tokens or special-token ids do not fit its vocabulary.
        tokenizer = AutoTokenizer.from_pretrained(data_args.tokenizer)
        config = model_config(model_args, tokenizer)

        # Checks, before any data is read. Every refusal that needs no checkpoint comes before
        # `prepare_output_dir`, which with --overwrite deletes the earlier run that such a refusal must leave
        # whole. The schedule is chosen (and said, before the data's lines) before the run's record is
        # described, which holds its options; a resume is then checked against its checkpoint's record.
        check_lengths_fit(data_args, config)
        contract = trainer_contract(data_args, recipe_args, training_args)
        checkpoint, replaces_final = resume_point(
            training_args,
            contract,
            model_args,
            data_args,
            finished=lambda folder: trainer_run_finished(folder, training_args, recipe_args),
        )
        prepare_output_dir(training_args.output_dir, bool(checkpoint), recipe_args.overwrite)
        from_trained = bool(model_args.model)
        logger.info(choose_schedule(recipe_args, training_args, config.d_model, from_trained=from_trained))
        overrides = load_config_overrides(model_args.config_overrides)
        contract.describe(model_args, data_args, tokenizer, config, overrides)
        state = training_args.distributed_state
        check_resume(checkpoint, contract, config, training_args.output_dir, state, replaces_final)

        # Data: tokenized (the main process of each machine first), the training pairs checked against the
        # checkpoint's when resuming.
        datasets_ = tokenized_data(data_args, tokenizer, state, contract, checkpoint)

        # Model: built after seeding, so that a recipe's seed fixes the initial weights too.
        model = seeded_model(model_args, data_args, tokenizer, training_args.seed)
        say_what_trains(model_args, data_args, model, datasets_["train"])

        # Trainer: a signal, here or at another process, saves a checkpoint at the end of the step and stops
        # every process after the same one; the other processes are watched while it trains.
        trainer = make_trainer(
            model, tokenizer, datasets_, data_args, recipe_args, training_args, contract, interruption
        )
        trainer.add_callback(FaultsCallback(interruption, watchdog, trainer.agreement))

        # Training, unless the checkpoint resumed from ends the run, which then lacks only its final folder
        # (the Trainer would train a step more).
        final = Path(training_args.output_dir) / "final"
        with naming_a_full_disk(Path(training_args.output_dir)):
            ended = bool(checkpoint) and run_is_over(checkpoint, training_args, recipe_args)
            if not ended:
                trainer.train(resume_from_checkpoint=checkpoint)
            if interruption.stopped:
                return trainer, None

            # Saving: the final folder, whole or absent.
            if ended:
                budget = trainer.time_budget
                if budget is not None and ended_by_budget(checkpoint, training_args, recipe_args):
                    budget.stopped_at = step_of(Path(checkpoint))  # what `budget_report` says
                save_final_from_checkpoint(trainer, checkpoint, final)
            else:
                save_final_folder(trainer, final)
        return trainer, final
    finally:
        watchdog.stop()
        interruption.restore()


def save_final_folder(trainer: TokenBudgetSeq2SeqTrainer, final: Path) -> None:
    """The trained model's folder. Under FSDP and DeepSpeed its weights are gathered from every process (each
    must call this), and the main process saves them."""
    model = gathered_model(trainer.accelerator, trainer.model_wrapped)
    if model is not None:
        save_whole_folder(model, trainer.processing_class, final)


def save_final_from_checkpoint(trainer: TokenBudgetSeq2SeqTrainer, checkpoint: str, final: Path) -> None:
    """The final folder of a run that `checkpoint` ended: the model of that checkpoint, or of the best one
    (`best_or_last`), saved by the main process while the others wait."""
    folder = best_or_last(checkpoint, trainer.args)
    logger.info("%s ends the run: %s becomes its final folder.", checkpoint, folder)
    if trainer.accelerator.is_main_process:
        weights = load_file(Path(folder) / SAFE_WEIGHTS_NAME)
        save_whole_folder(plain_copy(trainer.model, weights), trainer.processing_class, final)
    trainer.accelerator.wait_for_everyone()


def best_or_last(checkpoint: str, training_args) -> str:
    """The checkpoint a finished run's final folder holds: the best one with `load_best_model_at_end`, if it
    is whole, else `checkpoint`."""
    state = json.loads((Path(checkpoint) / TRAINER_STATE_NAME).read_text(encoding="utf-8"))
    best = state.get("best_model_checkpoint")
    if training_args.load_best_model_at_end and best and checkpoint_problem(best) is None:
        return best
    return checkpoint
