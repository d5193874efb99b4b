"""Train a Transformer with `Seq2SeqTrainer` on the paper's recipe (§5): Adam (0.9, 0.98, 1e-9), warmup then
inverse square-root decay (eq. 3), label smoothing 0.1, token-budget batches, best checkpoint by the task
metric, loss log and curves next to the checkpoints, the final model folder in `<output_dir>/final`.

    # a whole recipe from a YAML file; options after it override the file's values
    python scripts/train.py scripts/recipes/series.yaml
    python scripts/train.py scripts/recipes/series.yaml --max_steps 100 --output_dir outputs/series-try
    # continue a run from its newest whole checkpoint (or name one: outputs/series-50k/checkpoint-500)
    python scripts/train.py scripts/recipes/series.yaml --resume_from_checkpoint true

    # or every option on the command line
    python scripts/train.py --task series --dataset outputs/data/series-50k \
        --tokenizer outputs/tokenizers/series-bpe1k --preset transformer-small --max_tokens 4096 \
        --max_steps 2000 --warmup_steps 400 --eval_strategy steps --eval_steps 500 --save_steps 500 \
        --output_dir outputs/series-run

Every option of `Seq2SeqTrainingArguments` works (`--help` lists them all); the paper's settings are the
defaults, and a recipe's comments say why it departs from them. The Trainer picks the device (GPU if there
is one); runs unchanged under `accelerate launch` on several processes, GPUs or nodes. Ctrl-C or SIGTERM
saves a checkpoint at the step reached and stops (exit status 130 / 143); a second Ctrl-C leaves at once.
A resume refuses, in one line, options changed since the checkpoint that would make it inexact
(`--allow_changed_options` goes on anyway); resuming a finished run changes nothing and says so (exit 0).
"""

import logging
import signal
import sys
from pathlib import Path

from hf_vanilla_transformer.cli import make_parser, parse_recipe_and_args, run_script
from hf_vanilla_transformer.training import (
    TRAINING_ARGUMENTS,
    RunFinished,
    checkpoint_problem,
    end_process,
    leave_finished_run,
    run_training,
)
from hf_vanilla_transformer.training.budget import budget_report
from hf_vanilla_transformer.training.faults import stopped_message


def main() -> None:
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    parser = make_parser(
        *TRAINING_ARGUMENTS, description=__doc__, usage="train.py [recipe.yaml] [--option value ...]"
    )
    model_args, data_args, recipe_args, training_args = parse_recipe_and_args(parser)
    try:
        trainer, final = run_training(model_args, data_args, recipe_args, training_args)
    except RunFinished as finished:
        leave_finished_run(finished, training_args.process_index == 0, training_args.world_size)
        return
    status = 0 if final is not None else trainer.interruption.exit_status
    if trainer.is_world_process_zero():
        if final is not None:
            report = budget_report(trainer.time_budget)
            if report is not None:
                print(report)
            print(f"Saved the trained model to {final}")
        else:
            print(interrupted_message(trainer, training_args), file=sys.stderr)
    accelerator = trainer.accelerator
    del trainer  # the model and its engine (DDP's, DeepSpeed's), released by `end_process`
    end_process(accelerator, status)


def interrupted_message(trainer, training_args) -> str:
    step = trainer.state.global_step
    checkpoint = Path(training_args.output_dir) / f"checkpoint-{step}"
    saved = training_args.save_strategy != "no" and checkpoint_problem(checkpoint) is None
    return stopped_message(
        signal.Signals(trainer.interruption.received).name, step, checkpoint if saved else None
    )


if __name__ == "__main__":
    run_script(main)
