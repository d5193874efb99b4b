"""Time a training checkpoint's save, as `scripts/train.py` writes one, for the paper's model sizes: what a
preemption notice (SIGTERM) must leave room for. Each save is the Trainer's own (weights, Adam's state,
schedule, RNG state, Trainer state) followed by the completeness record, whose flush to the disk it times
apart. Nothing is trained: the optimizer takes one step on zero gradients so that its state exists.

    python scripts/benchmarks/time_checkpoint_save.py                # transformer-base and -big, 3 saves each
    python scripts/benchmarks/time_checkpoint_save.py --presets transformer-base --output_dir /scratch/me

The checkpoints go to a temporary folder inside --output_dir (the disk measured), deleted afterwards.
"""

import statistics
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

import torch
from transformers import Seq2SeqTrainer, Seq2SeqTrainingArguments, TrainerState
from transformers.trainer_callback import ExportableState

from hf_vanilla_transformer import VanillaTransformerConfig, VanillaTransformerForConditionalGeneration
from hf_vanilla_transformer.cli import parse_arguments, run_script
from hf_vanilla_transformer.configuration_vanilla_transformer import PRESETS
from hf_vanilla_transformer.errors import UsageError
from hf_vanilla_transformer.options import Options
from hf_vanilla_transformer.training.checkpoints import write_complete_record


@dataclass
class SaveTimeArguments(Options):
    presets: list[str] = field(
        default_factory=lambda: ["transformer-base", "transformer-big"],
        metadata={"help": f"Model sizes to time, of {', '.join(PRESETS)}."},
    )
    vocab_size: int = field(
        default=37_000, metadata={"help": "The vocabulary (WMT14's joint BPE: 37,000).", "range": ">= 1"}
    )
    repeats: int = field(
        default=3, metadata={"help": "Saves timed per size; the median is reported.", "range": ">= 1"}
    )
    output_dir: str = field(
        default="outputs",
        metadata={
            "help": "The folder, and so the disk, to save into (in a temporary folder, deleted after)."
        },
    )


def time_saves(preset: str, vocab_size: int, repeats: int, folder: Path) -> dict:
    """Median seconds of the Trainer's save and of the completeness record, and the checkpoint's size."""
    config = VanillaTransformerConfig.from_preset(preset, vocab_size=vocab_size)
    model = VanillaTransformerForConditionalGeneration(config)
    args = Seq2SeqTrainingArguments(output_dir=str(folder), report_to=[], save_total_limit=None, use_cpu=True)
    trainer = Seq2SeqTrainer(model=model, args=args)
    trainer.create_optimizer_and_scheduler(num_training_steps=10)
    for parameter in model.parameters():
        parameter.grad = torch.zeros_like(parameter)
    trainer.optimizer.step()  # Adam's two moments now exist, as in any checkpoint after the first step
    # As the Trainer starts a run: the state records the stateful callbacks' states with each checkpoint.
    handlers = trainer.callback_handler.callbacks + [trainer.control]
    trainer.state = TrainerState(stateful_callbacks=[h for h in handlers if isinstance(h, ExportableState)])
    saves, records, sizes = [], [], []
    for step in range(1, repeats + 1):
        trainer.state.global_step = step
        started = time.perf_counter()
        trainer._save_checkpoint(model, trial=None)
        saved = time.perf_counter()
        checkpoint = folder / f"checkpoint-{step}"
        write_complete_record(checkpoint, step)
        saves.append(saved - started)
        records.append(time.perf_counter() - saved)
        sizes.append(sum(path.stat().st_size for path in checkpoint.iterdir()))
    return {
        "preset": preset,
        "parameters": sum(p.numel() for p in model.parameters()),
        "gigabytes": statistics.median(sizes) / 1e9,
        "save_seconds": statistics.median(saves),
        "record_seconds": statistics.median(records),
    }


def main() -> None:
    (args,) = parse_arguments(SaveTimeArguments, description=__doc__)
    unknown = [preset for preset in args.presets if preset not in PRESETS]
    if unknown:
        raise UsageError(f"Unknown preset(s) {', '.join(unknown)}; available: {', '.join(PRESETS)}.")
    Path(args.output_dir).mkdir(parents=True, exist_ok=True)
    print("| model | parameters | checkpoint | Trainer's save | completeness record (flush) | in all |")
    print("|---|---|---|---|---|---|")
    for preset in args.presets:
        with tempfile.TemporaryDirectory(dir=args.output_dir, prefix="save-time-") as folder:
            row = time_saves(preset, args.vocab_size, args.repeats, Path(folder))
        total = row["save_seconds"] + row["record_seconds"]
        print(
            f"| {row['preset']} | {row['parameters'] / 1e6:.1f}M | {row['gigabytes']:.2f} GB | "
            f"{row['save_seconds']:.1f} s | {row['record_seconds']:.1f} s | {total:.1f} s |",
            flush=True,
        )


if __name__ == "__main__":
    run_script(main)
