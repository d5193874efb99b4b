"""Train a Transformer with `Seq2SeqTrainer` on the paper's recipe (§5): Adam (0.9, 0.98, 1e-9), warmup then
inverse square-root decay (eq. 3), label smoothing 0.1, token-budget batches, best checkpoint by the task
metric, loss curves as a PNG next to the checkpoints.

    python scripts/train.py --task series --dataset outputs/data/series --tokenizer outputs/tokenizers/series \
        --preset transformer-small --max_tokens 4096 --max_steps 2000 --warmup_steps 400 \
        --eval_strategy steps --eval_steps 500 --save_steps 500 --output_dir outputs/series-run

    # a whole recipe from a JSON file (any of the options below as keys)
    python scripts/train.py recipes/series.json

Every option of `Seq2SeqTrainingArguments` works (`--help` lists them); the paper's settings are the
defaults. Runs unchanged under `accelerate launch` on several processes, GPUs or nodes.
"""

import logging
import sys

from transformers import HfArgumentParser

from hf_vanilla_transformer.tasks import DataArguments
from hf_vanilla_transformer.training import (
    ModelArguments,
    PaperSeq2SeqTrainingArguments,
    RecipeArguments,
    run_training,
)


def main() -> None:
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    parser = HfArgumentParser((ModelArguments, DataArguments, RecipeArguments, PaperSeq2SeqTrainingArguments))
    if len(sys.argv) == 2 and sys.argv[1].endswith(".json"):
        model_args, data_args, recipe_args, training_args = parser.parse_json_file(sys.argv[1])
    else:
        model_args, data_args, recipe_args, training_args = parser.parse_args_into_dataclasses()
    trainer, final = run_training(model_args, data_args, recipe_args, training_args)
    if trainer.is_world_process_zero():
        print(f"Saved the trained model to {final}")


if __name__ == "__main__":
    main()
