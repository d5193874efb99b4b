"""Estimate how long the paper's WMT14 recipes (scripts/recipes/wmt14_en_de_{base,big}.yaml) take on current
GPUs, from the model's FLOPs. An estimate, not a measurement: nothing is trained.

    python scripts/benchmarks/estimate_gpu_time.py [--vocab_size 37000] [--utilisation 0.3]
    python scripts/benchmarks/estimate_gpu_time.py --scale_out # 8 GPUs, 2 nodes x 8: memory, time, all-reduce

The work per step, and the utilisation assumed by default (the one the paper's own runs imply), are explained
in `scripts/benchmarks/gpu_estimate.py`; pass --utilisation to assume another. `--scale_out` adds
a table of the models on 8 GPUs and on 2 nodes of 8 (a minute or two: it counts each training step's memory).
"""

import sys
from dataclasses import dataclass, field
from pathlib import Path

# Run from any folder: the `benchmarks` package is in scripts/, this folder's parent.
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks.gpu_estimate import (
    estimate,
    format_scale_table,
    format_table,
    scale_out,
)
from hf_vanilla_transformer.cli import parse_arguments, run_script
from hf_vanilla_transformer.options import Options


@dataclass
class EstimateArguments(Options):
    vocab_size: int = field(
        default=37_000, metadata={"help": "The joint BPE vocabulary's size.", "range": ">= 1"}
    )
    utilisation: float | None = field(
        default=None,
        metadata={
            "help": "Share of the GPUs' bfloat16 peak assumed reached (default: what the paper's runs "
            "imply).",
            "range": "(0, 1]",
        },
    )
    scale_out: bool = field(
        default=False,
        metadata={
            "help": "Also print the models on 8 GPUs and on 2 nodes of 8: accelerate config, token budget, "
            "memory per GPU, time, and the gradient all-reduce's cost."
        },
    )


def main() -> None:
    (args,) = parse_arguments(EstimateArguments, description=__doc__)
    print(format_table(estimate(args.vocab_size, args.utilisation)))
    if args.scale_out:
        print()
        print(format_scale_table(scale_out(args.vocab_size, args.utilisation)))


if __name__ == "__main__":
    run_script(main)
