r"""Average the weights of the last N checkpoints of a Trainer run into a normal model folder (§6.1: the paper
averaged the last 5 checkpoints for base models and the last 20 for big ones).

    python scripts/average_checkpoints.py --run_dir outputs/multi30k-de-en --last 5 \
        --output_dir outputs/multi30k-de-en/averaged
"""

import argparse

from hf_vanilla_transformer.cli import ArgumentParser, run_script
from hf_vanilla_transformer.training import average_checkpoints, last_checkpoints


def main() -> None:
    parser = ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument(
        "--run_dir", required=True, help="A Trainer output_dir holding checkpoint-<step> folders."
    )
    parser.add_argument(
        "--last", type=int, default=5, help="How many of the most recent checkpoints to average."
    )
    parser.add_argument("--output_dir", required=True, help="Where to write the averaged model.")
    args = parser.parse_args()
    checkpoints = last_checkpoints(args.run_dir, args.last)
    print("Averaging", ", ".join(c.name for c in checkpoints))
    print(f"Wrote {average_checkpoints(checkpoints, args.output_dir)}")


if __name__ == "__main__":
    run_script(main)
