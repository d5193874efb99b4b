"""Train with a plain Accelerate loop (see `hf_vanilla_transformer.accelerate_training`).

    # one process
    python scripts/train_accelerate.py --task series --dataset outputs/data/series \
        --tokenizer outputs/tokenizers/series --preset transformer-mini --max_tokens 4096 --max_steps 200 --output_dir outputs/acc
    # two CPU processes (gloo), or any `accelerate launch` setup: GPUs, FSDP, several nodes
    # (on a machine without GPUs, --multi_gpu starts torchrun; with --use_cpu the processes talk over gloo)
    accelerate launch --multi_gpu --num_processes 2 scripts/train_accelerate.py --use_cpu ...same options...

Writes `<output_dir>/final` (save_pretrained), `state-<step>` folders (save_state: resume with
--resume_from_state), the loss curve, and with --summary_file a JSON summary per rank.
"""

import json
import logging
from dataclasses import dataclass, field

from transformers import AutoTokenizer, HfArgumentParser

from hf_vanilla_transformer.accelerate_training import LoopArguments, train_loop
from hf_vanilla_transformer.tasks import DataArguments, prepare_dataset
from hf_vanilla_transformer.training import ModelArguments, build_model


@dataclass
class OutputArguments:
    summary_file: str | None = field(
        default=None,
        metadata={"help": "Write each rank's summary to this path, suffixed with .rank<N>.json."},
    )


def main() -> None:
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    parser = HfArgumentParser((ModelArguments, DataArguments, LoopArguments, OutputArguments))
    model_args, data_args, loop_args, output_args = parser.parse_args_into_dataclasses()
    tokenizer = AutoTokenizer.from_pretrained(data_args.tokenizer)
    train_dataset = prepare_dataset(data_args, tokenizer)["train"]
    model = build_model(model_args, tokenizer)
    if data_args.max_tokens is None:
        parser.error("--max_tokens (the token budget per batch) is required for the Accelerate loop.")
    summary = train_loop(model, tokenizer, train_dataset, loop_args, max_tokens=data_args.max_tokens)
    if output_args.summary_file:
        with open(f"{output_args.summary_file}.rank{summary['rank']}.json", "w") as f:
            json.dump(summary, f)


if __name__ == "__main__":
    main()
