r"""Average the weights of the last N checkpoints of a Trainer run into a normal model folder (§6.1: the paper
averaged the last 5 checkpoints for base models and the last 20 for big ones).

    python scripts/average_checkpoints.py --run_dir outputs/multi30k-de-en --last 5 \
        --output_dir outputs/multi30k-de-en/averaged
"""

from dataclasses import dataclass, field

from hf_vanilla_transformer.cli import parse_arguments, run_script
from hf_vanilla_transformer.options import Options
from hf_vanilla_transformer.outputs import check_output_location


@dataclass
class AverageArguments(Options):
    run_dir: str = field(metadata={"help": "A Trainer output_dir holding checkpoint-<step> folders."})
    output_dir: str = field(metadata={"help": "Where to write the averaged model."})
    last: int = field(
        default=5, metadata={"help": "How many of the most recent checkpoints to average.", "range": ">= 1"}
    )
    overwrite: bool = field(default=False, metadata={"help": "Replace what an existing output holds."})


def main() -> None:
    (args,) = parse_arguments(AverageArguments, description=__doc__)
    # torch, once the options are known to be right (`--help` and a mistyped option answer at once)
    from hf_vanilla_transformer.training.averaging import (
        average_checkpoints,
        check_output_beside_checkpoints,
        last_checkpoints,
    )

    check_output_beside_checkpoints(args.output_dir, args.run_dir)  # before --overwrite is offered as the fix
    check_output_location(args.output_dir, args.overwrite)
    checkpoints = last_checkpoints(args.run_dir, args.last)
    print("Averaging", ", ".join(c.name for c in checkpoints))
    print(f"Wrote {average_checkpoints(checkpoints, args.output_dir)}")


if __name__ == "__main__":
    run_script(main)
