"""Where a training step of a recipe spends its time (`scripts/benchmarks/profile_training.py`).

The recipe's own Trainer (`recipe_trainer`: `run_training`'s steps up to its Trainer, with its data,
token-budget batches, model, optimizer and callbacks) trains for a few steps. A callback reads the clock at
the Trainer's hooks, which splits each step into phases: fetching and collating the batch (and the previous
step's logging), forward + backward (with the gradient norm the Trainer logs), the optimizer step, and the
schedule and `zero_grad` after it. Then a few more steps run under `torch.profiler`, whose operator times
say what the forward and backward are made of: matrix products, the attention kernel, the output layer's
softmax and loss, everything else.

From the batches themselves: target tokens per second, and the share of the batches' positions that are
padding (the encoder, decoder and output layer compute on them too). From the model's weights: the matrix
products' FLOPs per step, over the machine's float32 matmul peak measured in the same run.
"""

from __future__ import annotations

import logging
import tempfile
import time
from dataclasses import dataclass, field
from statistics import median

import torch
from transformers import TrainerCallback
from transformers.trainer_utils import IntervalStrategy, SaveStrategy

from hf_vanilla_transformer.options import Options

from .harness import MATMUL_OPERATORS, matmul_peak_gflops, training_flops_per_step

logger = logging.getLogger(__name__)

PHASES = ("data", "forward_backward", "optimizer", "after_step")
PHASE_NAMES = {
    "data": "batch fetch + collation (and the previous step's logging)",
    "forward_backward": "forward + backward (+ gradient norm)",
    "optimizer": "optimizer step",
    "after_step": "schedule step + zero_grad",
}
# Operator categories of the profiled steps, by self CPU time; the first pattern an operator's name
# contains decides. SDPA's CPU kernel does its own matrix products, softmax and masking: its own category.
OPERATOR_CATEGORIES = (
    ("matrix products", MATMUL_OPERATORS),
    ("attention kernel (SDPA)", ("scaled_dot_product", "flash_attention")),
    ("output softmax + loss", ("log_softmax", "nll_loss", "cross_entropy")),
)


@dataclass
class ProfileArguments(Options):
    untimed_steps: int = field(
        default=3,
        metadata={
            "help": "Steps run before anything is measured (the first timed step needs the end of the one "
            "before it).",
            "range": ">= 1",
        },
    )
    timed_steps: int = field(default=20, metadata={"help": "Steps timed phase by phase.", "range": ">= 1"})
    operator_steps: int = field(
        default=3,
        metadata={
            "help": "Steps run after those under torch.profiler, for the operator table (0: no table).",
            "range": ">= 0",
        },
    )
    output_file: str | None = field(default=None, metadata={"help": "Also write the results here (JSON)."})


class PhaseClock(TrainerCallback):
    """Reads `time.perf_counter()` at the Trainer's step hooks; the gaps between them are its phases."""

    def __init__(self):
        self.marks: list[dict[str, float]] = []
        self.last_end: float | None = None
        self.current: dict[str, float] = {}

    def on_step_begin(self, args, state, control, **kwargs):
        self.current = {"begin": time.perf_counter(), "previous_end": self.last_end}

    def on_pre_optimizer_step(self, args, state, control, **kwargs):
        self.current["pre_optimizer"] = time.perf_counter()

    def on_optimizer_step(self, args, state, control, **kwargs):
        self.current["optimizer"] = time.perf_counter()

    def on_step_end(self, args, state, control, **kwargs):
        self.last_end = time.perf_counter()
        self.current["end"] = self.last_end
        self.marks.append(self.current)

    def phases(self, first: int, last: int) -> list[dict[str, float]]:
        """Seconds per phase of steps `first` to `last - 1` (0-based; `first` >= 1, as a step's data phase
        starts at the end of the step before it)."""
        result = []
        for mark in self.marks[first:last]:
            result.append(
                {
                    "data": mark["begin"] - mark["previous_end"],
                    "forward_backward": mark["pre_optimizer"] - mark["begin"],
                    "optimizer": mark["optimizer"] - mark["pre_optimizer"],
                    "after_step": mark["end"] - mark["optimizer"],
                }
            )
        return result


class ProfilerWindow(TrainerCallback):
    """Runs `torch.profiler` over the steps after the first `start` ones, until `stop` steps have ended."""

    def __init__(self, start: int, stop: int):
        from torch.profiler import ProfilerActivity, profile

        self.start, self.stop = start, stop
        self.profiler = profile(activities=[ProfilerActivity.CPU])
        self.wall_seconds = 0.0
        self._began = 0.0

    def on_step_end(self, args, state, control, **kwargs):
        if state.global_step == self.start:
            self.profiler.__enter__()
            self._began = time.perf_counter()
        elif state.global_step == self.stop:
            self.wall_seconds = time.perf_counter() - self._began
            self.profiler.__exit__(None, None, None)


def batch_shapes(loader, steps: int) -> list[dict[str, int]]:
    """Real and padded token counts of the first `steps` batches of `loader` (the Trainer's own dataloader:
    the same batches in the same order as a fresh run with the same seed trains on)."""
    shapes = []
    for batch in loader:
        if len(shapes) == steps:
            break
        labels = batch["labels"]
        shapes.append(
            {
                "sentences": int(labels.shape[0]),
                "source_tokens": int(batch["attention_mask"].sum()),
                "source_positions": int(batch["input_ids"].numel()),
                "target_tokens": int((labels != -100).sum()),
                "target_positions": int(labels.numel()),
            }
        )
    return shapes


def categorize_operators(events, wall_seconds: float) -> dict[str, float]:
    """Share of `wall_seconds` in each of `OPERATOR_CATEGORIES`, in the remaining operators, and outside any
    operator (Python: the Trainer, the model's own code, the data pipeline)."""
    totals = {name: 0.0 for name, _ in OPERATOR_CATEGORIES}
    totals["other operators"] = 0.0
    for event in events:
        if not event.key.startswith("aten::"):
            continue  # user annotations (the optimizer's, the dataloader's) would count their operators twice
        seconds = event.self_cpu_time_total / 1e6
        for name, patterns in OPERATOR_CATEGORIES:
            if any(pattern in event.key for pattern in patterns):
                totals[name] += seconds
                break
        else:
            totals["other operators"] += seconds
    totals["outside operators (Python)"] = max(0.0, wall_seconds - sum(totals.values()))
    return {name: seconds / wall_seconds for name, seconds in totals.items()} if wall_seconds > 0 else totals


def recipe_trainer(model_args, data_args, recipe_args, training_args):
    """The Trainer `training.run_training` trains with, made by its steps up to the Trainer
    (`training.setup`'s, then `training.make_trainer`), in its order and with its checks; nothing watches
    for signals."""
    from transformers import AutoTokenizer

    from hf_vanilla_transformer.training import (
        check_lengths_fit,
        check_options,
        check_resume,
        check_trainer_options,
        choose_schedule,
        load_config_overrides,
        make_trainer,
        model_config,
        prepare_output_dir,
        resume_point,
        say_what_trains,
        seeded_model,
        tokenized_data,
        trainer_contract,
    )
    from hf_vanilla_transformer.training.setup import trainer_run_finished

    # Options.
    check_trainer_options(data_args, recipe_args, training_args)
    check_options(model_args, data_args, training_args.output_dir)
    # Tokenizer and configuration.
    tokenizer = AutoTokenizer.from_pretrained(data_args.tokenizer)
    config = model_config(model_args, tokenizer)
    # Checks, as `run_training` makes them: a checkpoint named is refused as a training run would refuse it.
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
    contract.describe(
        model_args, data_args, tokenizer, config, load_config_overrides(model_args.config_overrides)
    )
    state = training_args.distributed_state
    check_resume(checkpoint, contract, config, training_args.output_dir, state, replaces_final)
    # Data.
    datasets_ = tokenized_data(data_args, tokenizer, state, contract, checkpoint)
    # Model.
    model = seeded_model(model_args, data_args, tokenizer, training_args.seed)
    say_what_trains(model_args, data_args, model, datasets_["train"])
    # Trainer.
    return make_trainer(model, tokenizer, datasets_, data_args, recipe_args, training_args, contract)


def profile_training(
    model_args, data_args, recipe_args, training_args, profile_args: ProfileArguments
) -> dict:
    """Train the recipe for `untimed_steps + timed_steps + operator_steps` steps and return where the
    time went (see the module docstring). Nothing is saved: no checkpoints, no evaluation, no final model."""
    warmup, timed, profiled = (
        profile_args.untimed_steps,
        profile_args.timed_steps,
        profile_args.operator_steps,
    )
    total = warmup + timed + profiled
    with tempfile.TemporaryDirectory() as scratch:
        training_args.output_dir = scratch
        training_args.max_steps = total
        training_args.eval_strategy = IntervalStrategy.NO
        training_args.save_strategy = SaveStrategy.NO
        training_args.load_best_model_at_end = False
        training_args.report_to = []
        training_args.disable_tqdm = True
        trainer = recipe_trainer(model_args, data_args, recipe_args, training_args)
        loader = trainer.get_train_dataloader()
        shapes, batches_per_pass = batch_shapes(loader, total), len(loader)
        clock = PhaseClock()
        trainer.add_callback(clock)
        window = ProfilerWindow(warmup + timed, total) if profiled else None
        if window is not None:
            trainer.add_callback(window)
        peak = matmul_peak_gflops(trainer.args.device)
        trainer.train()

    phases = clock.phases(warmup, warmup + timed)
    measured = shapes[warmup : warmup + timed]  # step i trains on batch i
    step_seconds = [sum(p.values()) for p in phases]
    seconds = sum(step_seconds)
    flops = sum(
        training_flops_per_step(trainer.model, s["source_tokens"], s["target_tokens"]) for s in measured
    )
    padded_flops = sum(
        training_flops_per_step(trainer.model, s["source_positions"], s["target_positions"]) for s in measured
    )

    def total_of(key):
        return sum(s[key] for s in measured)

    result = {
        "torch_threads": torch.get_num_threads(),
        "steps_timed": len(phases),
        "seconds_per_step": seconds / len(phases),
        "median_seconds_per_step": median(step_seconds),
        "batches_per_pass": batches_per_pass,
        "sentences_per_step": total_of("sentences") / len(measured),
        "target_tokens_per_step": total_of("target_tokens") / len(measured),
        "target_tokens_per_second": total_of("target_tokens") / seconds,
        "source_padding": 1 - total_of("source_tokens") / total_of("source_positions"),
        "target_padding": 1 - total_of("target_tokens") / total_of("target_positions"),
        "matmul_peak_gflops": peak,
        "useful_matmul_gflops": flops / seconds / 1e9,
        "useful_share_of_peak": flops / seconds / 1e9 / peak,
        "executed_share_of_peak": padded_flops / seconds / 1e9 / peak,
        "phases": {name: sum(p[name] for p in phases) / seconds for name in PHASES},
    }
    if window is not None and window.wall_seconds:
        events = window.profiler.key_averages()
        result["operators"] = categorize_operators(events, window.wall_seconds)
        result["operator_table"] = events.table(sort_by="self_cpu_time_total", row_limit=15)
    return result


def format_profile(result: dict) -> str:
    """The profile as the Markdown of docs/benchmarks.md, then the profiler's operator table."""
    lines = [
        f"| measure ({result['torch_threads']} threads, {result['steps_timed']} steps) | value |",
        "|---|---|",
        f"| seconds per step (mean / median) | {result['seconds_per_step']:.3f} / "
        f"{result['median_seconds_per_step']:.3f} |",
        f"| sentences / target tokens per step | {result['sentences_per_step']:.0f} / "
        f"{result['target_tokens_per_step']:.0f} |",
        f"| batches per pass over the data | {result['batches_per_pass']} |",
        f"| target tokens per second | {result['target_tokens_per_second']:,.0f} |",
        f"| padding: source / target positions | {result['source_padding']:.1%} / "
        f"{result['target_padding']:.1%} |",
        f"| matmul peak of this machine, GFLOP/s | {result['matmul_peak_gflops']:.0f} |",
        f"| share of peak: real tokens / all positions | {result['useful_share_of_peak']:.0%} / "
        f"{result['executed_share_of_peak']:.0%} |",
    ]
    lines += [f"| time in {PHASE_NAMES[name]} | {share:.1%} |" for name, share in result["phases"].items()]
    for name, share in result.get("operators", {}).items():
        lines.append(f"| profiled steps: {name} | {share:.1%} |")
    text = "\n".join(lines)
    if "operator_table" in result:
        text += "\n\n" + result["operator_table"]
    return text
