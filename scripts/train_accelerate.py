"""Train with a plain Accelerate loop (`hf_vanilla_transformer.training.accelerate_loop`) on the same recipe
and options as `scripts/train.py`: the same recipe files, schedule, optimizer settings, token-budget batches,
gradient clipping, time budget, loss log and final folder. It does not evaluate during training.

    # one process, a recipe file with options overriding it
    python scripts/train_accelerate.py scripts/recipes/series.yaml --max_steps 200 --output_dir outputs/acc
    # continue a run from a saved training state
    python scripts/train_accelerate.py scripts/recipes/series.yaml --output_dir outputs/acc \
        --resume_from_checkpoint outputs/acc/state-200
    # two CPU processes over gloo: on a machine without GPUs --multi_gpu starts torchrun, and --use_cpu
    # makes the processes talk over gloo (`accelerate launch --cpu` wants MPI for several processes)
    accelerate launch --multi_gpu --num_processes 2 scripts/train_accelerate.py \
        scripts/recipes/series.yaml --use_cpu
    # any `accelerate launch` setup: GPUs, several nodes
    accelerate launch --config_file scripts/accelerate_configs/multi_gpu.yaml scripts/train_accelerate.py ...

Writes `<output_dir>/final` (weights, config, model and pipeline code, tokenizer), `state-<step>` folders
(`save_state`: the whole training state, kept to `save_total_limit`), `loss_log.jsonl` and `loss_curves.png`.
`--max_tokens` (the token budget per batch) is required. `--help` lists every option.
"""

import logging

from hf_vanilla_transformer.cli import make_parser, run_script
from hf_vanilla_transformer.training import TRAINING_ARGUMENTS, parse_recipe_and_args, run_accelerate_training


def main() -> None:
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    parser = make_parser(
        *TRAINING_ARGUMENTS,
        description=__doc__,
        usage="train_accelerate.py [recipe.yaml] [--option value ...]",
    )
    model_args, data_args, recipe_args, training_args = parse_recipe_and_args(parser)
    final = run_accelerate_training(model_args, data_args, recipe_args, training_args)
    if training_args.process_index == 0:
        print(f"Saved the trained model to {final}")


if __name__ == "__main__":
    run_script(main)
