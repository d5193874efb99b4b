"""Where a recipe's training step spends its time: the recipe's own Trainer, data, batches and model, for a
few steps, split into phases (batch fetch and collation, forward + backward, optimizer, the rest) and, under
torch.profiler, into operators (matrix products, attention, the output layer's softmax and loss, the rest);
target tokens per second, the padding in the batches, and the share of this machine's float32 matmul peak.
Nothing is saved but `--output_file`. The method is in `scripts/benchmarks/training_profile.py`.

    python scripts/benchmarks/profile_training.py scripts/recipes/multi30k_de_en.yaml
    python scripts/benchmarks/profile_training.py scripts/recipes/multi30k_de_en.yaml --timed_steps 40 \
        --output_file outputs/profile-multi30k.json

Every option of `scripts/train.py` works too and changes what is measured (`--max_tokens 2048`, `--optim
adamw_torch_fused`, ...). Run it alone on the machine: anything else running beside it is measured with it.
"""

import logging
import sys
from pathlib import Path

# Run from any folder: the `benchmarks` package is in scripts/, this folder's parent.
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks.training_profile import (
    ProfileArguments,
    format_profile,
    profile_training,
)
from hf_vanilla_transformer.cli import make_parser, parse_recipe_and_args, run_script
from hf_vanilla_transformer.outputs import check_output_location, write_json
from hf_vanilla_transformer.training import TRAINING_ARGUMENTS


def main() -> None:
    logging.basicConfig(level=logging.WARNING, format="%(levelname)s %(name)s: %(message)s")
    parser = make_parser(
        *TRAINING_ARGUMENTS,
        ProfileArguments,
        description=__doc__,
        usage="profile_training.py [recipe.yaml] [--option value ...]",
    )
    model_args, data_args, recipe_args, training_args, profile_args = parse_recipe_and_args(parser)
    if profile_args.output_file:  # before the run: the recipe's --overwrite also allows replacing this file
        check_output_location(profile_args.output_file, recipe_args.overwrite, "--output_file")
    result = profile_training(model_args, data_args, recipe_args, training_args, profile_args)
    print(format_profile(result))
    if profile_args.output_file:
        path = Path(profile_args.output_file)
        path.parent.mkdir(parents=True, exist_ok=True)
        write_json(path, result)
        print(f"\nWrote {path}")


if __name__ == "__main__":
    run_script(main)
