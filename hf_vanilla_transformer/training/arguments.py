"""A training run's options: the argument dataclasses of the model, the recipe and the paper's Trainer
defaults (the data's are `tasks.DataArguments`, the batches' `batching.BatchingArguments`, which the recipe's
extend). What training builds from them is `setup`'s. Recipe files are read by the command line
(`cli.parse_recipe_and_args`)."""

from __future__ import annotations

import logging
import os
from dataclasses import dataclass, field

import torch
from transformers import (
    SchedulerType,
    Seq2SeqTrainingArguments,
)

from ..configuration_vanilla_transformer import PRESETS
from ..devices import default_mixed_precision, tf32_available
from ..errors import UsageError
from ..options import Options
from ..tasks import DataArguments
from .batching import BatchingArguments
from .budget import TimeBudget
from .faults import Watchdog

logger = logging.getLogger(__name__)


TASK_METRIC = "task_metric"  # stands for the task's own metric in `metric_for_best_model`


@dataclass
class ModelArguments:
    """Which model to train: a named preset plus overrides, a config JSON, or a saved model to continue."""

    preset: str = field(default="transformer-small", metadata={"help": f"One of {', '.join(PRESETS)}."})
    config_overrides: dict | str | None = field(
        default=None,
        metadata={
            "help": "Config fields over the preset: a mapping in a recipe file; on the command line a JSON "
            "object, e.g. '{\"dropout\": 0.3}', or the path of a JSON file."
        },
    )
    model: str | None = field(
        default=None,
        metadata={"help": "Start from a saved model (a folder or a Hub id) instead of a preset."},
    )
    attn_implementation: str = field(default="sdpa", metadata={"help": "sdpa (default) or eager."})

    def __post_init__(self):
        if not self.model and self.preset not in PRESETS:
            raise UsageError(f"Unknown --preset {self.preset!r}; available presets: {', '.join(PRESETS)}.")


@dataclass
class RecipeArguments(BatchingArguments):
    """How batches are made (`BatchingArguments`), how the learning rate is set and how long training may
    take (the rest of the recipe is in `PaperSeq2SeqTrainingArguments`)."""

    lr_scale: float | None = field(
        default=None,
        metadata={
            "help": "Multiplier of eq. 3's peak learning rate, used when --learning_rate is not set; given, "
            "eq. 3 sets the rate from a trained --model too. Unset: 1, or a fine-tuning rate from a trained "
            "--model.",
            "range": "> 0",
        },
    )
    max_train_minutes: float | None = field(
        default=None,
        metadata={"help": "Stop training (and save) after this many minutes of wall time.", "range": "> 0"},
    )
    decay_by_clock: bool = field(
        default=False,
        metadata={
            "help": "With lr_scheduler_type linear and max_train_minutes: decay to zero as the time budget "
            "ends, not at max_steps (which is then only an upper bound)."
        },
    )
    max_warmup_fraction: float | None = field(
        default=None,
        metadata={
            "help": "With decay_by_clock: warmup ends after warmup_steps or after this share of the time "
            "budget, whichever comes first (a slow machine may not reach warmup_steps in a short budget).",
            "range": "(0, 1)",
        },
    )

    stall_timeout: float = field(
        default=120.0,
        metadata={
            "help": "Seconds a process of a multi-process run may go without answering (stopped, frozen, its "
            "machine lost) before the run ends, naming it; 0 waits for --ddp_timeout instead.",
            "range": ">= 0",
        },
    )

    overwrite: bool = field(
        default=False,
        metadata={
            "help": "Train into an output_dir that holds an earlier run: its checkpoints, final model and "
            "loss log are deleted first. Without it such an output_dir is refused (--resume_from_checkpoint "
            "continues a run instead)."
        },
    )
    allow_changed_options: list[str] | None = field(
        default=None,
        metadata={
            "help": "Resume even though these options (or `all`) differ from those the checkpoint records "
            "(resume_contract.json: what decides the batches and the model); the log names each change. "
            "Without it such a resume is refused, since it would not be exact."
        },
    )

    def check(self, training_args: Seq2SeqTrainingArguments) -> None:
        """Refuse a combination that cannot be trained, naming the options to change."""
        if 0 < self.stall_timeout < Watchdog.MIN_STALL_TIMEOUT:
            raise UsageError(
                f"--stall_timeout {self.stall_timeout:g} would name live processes as frozen: give at least "
                f"{Watchdog.MIN_STALL_TIMEOUT:g} (seconds), or 0 to turn the watch off."
            )
        if self.max_warmup_fraction is not None:
            if not self.decay_by_clock:
                raise UsageError(
                    "max_warmup_fraction is a share of the time budget: set --decay_by_clock too, or take "
                    "it back with --max_warmup_fraction none (a recipe's value included)."
                )
        if not self.decay_by_clock:
            return
        if self.max_train_minutes is None:
            raise UsageError(
                "decay_by_clock decays the learning rate over the time budget: set --max_train_minutes too."
            )
        if SchedulerType(training_args.lr_scheduler_type) != SchedulerType.LINEAR:
            raise UsageError(
                "decay_by_clock is a linear decay: set --lr_scheduler_type linear (got "
                f"{SchedulerType(training_args.lr_scheduler_type).value})."
            )

    def time_budget(self) -> TimeBudget | None:
        return TimeBudget(self.max_train_minutes) if self.max_train_minutes is not None else None


# The schedule a run takes for the options it does not set: the paper's (§5.3) for a new model, whose
# learning rate eq. 3 sets from d_model and the warmup; transformers' defaults, as its translation example
# fine-tunes, for a trained --model, which eq. 3's rate and a long warmup would train away from.
PAPER = {"learning_rate": None, "lr_scheduler_type": "inverse_sqrt", "warmup_steps": 4000}


FINE_TUNING = {"learning_rate": 5e-5, "lr_scheduler_type": "linear", "warmup_steps": 0}


@dataclass
class PaperSeq2SeqTrainingArguments(Options, Seq2SeqTrainingArguments):
    """`Seq2SeqTrainingArguments` whose defaults are the paper's recipe (§5.3): Adam with betas (0.9, 0.98)
    and eps 1e-9 (torch's AdamW with no weight decay is Adam), no gradient clipping, linear warmup then
    inverse square-root decay over 4000 warmup steps; plus generation during evaluation so the task metric
    can pick the best checkpoint."""

    output_dir: str | None = field(
        default="outputs/run", metadata={"help": "Where checkpoints, logs and the final model go."}
    )
    adam_beta1: float = field(default=0.9, metadata={"help": "Adam's beta1 (§5.3: 0.9).", "range": "[0, 1)"})
    adam_beta2: float = field(
        default=0.98, metadata={"help": "Adam's beta2 (§5.3: 0.98).", "range": "[0, 1)"}
    )
    adam_epsilon: float = field(
        default=1e-9, metadata={"help": "Adam's epsilon (§5.3: 1e-9).", "range": "> 0"}
    )
    weight_decay: float = field(
        default=0.0,
        metadata={
            "help": "Decoupled weight decay (AdamW) on all weights but biases and LayerNorm (paper: 0).",
            "range": ">= 0",
        },
    )
    max_grad_norm: float = field(
        default=0.0,
        metadata={
            "help": "Clip gradients to this global norm; 0 does not clip (the paper's).",
            "range": ">= 0",
        },
    )
    learning_rate: float | None = field(
        default=None,
        metadata={
            "help": "Peak learning rate. Unset: eq. 3's peak times --lr_scale (lr_scale * d_model^-0.5 * "
            f"warmup^-0.5) for a new model, {FINE_TUNING['learning_rate']:g} to fine-tune a trained --model "
            "(eq. 3's if --lr_scale is given).",
            "range": "> 0",
        },
    )
    lr_scheduler_type: SchedulerType | str | None = field(
        default=None,
        metadata={
            "help": "Learning-rate schedule after warmup. Unset: "
            f"{PAPER['lr_scheduler_type']} for a new model (with eq. 3's peak it is eq. 3), "
            f"{FINE_TUNING['lr_scheduler_type']} to fine-tune a trained --model."
        },
    )
    warmup_steps: float | None = field(
        default=None,
        metadata={
            "help": "Linear warmup steps; below 1, a fraction of the training steps. Unset: "
            f"{PAPER['warmup_steps']} (§5.3) for a new model, {FINE_TUNING['warmup_steps']} to fine-tune a "
            "trained --model.",
            "range": ">= 0",
        },
    )
    predict_with_generate: bool = field(
        default=True, metadata={"help": "Generate during evaluation so the task metric can be computed."}
    )
    save_total_limit: int | None = field(
        default=5,
        metadata={
            "help": "Keep this many checkpoints (the best one as well); §6.1 averages the last 5.",
            "range": ">= 1",
        },
    )
    metric_for_best_model: str | None = field(
        default=TASK_METRIC,
        metadata={"help": f"'{TASK_METRIC}' (default) is the task's metric: BLEU or exact match."},
    )
    resume_from_checkpoint: str | None = field(
        default=None,
        metadata={
            "help": "Continue a run: true (or latest) takes the newest whole checkpoint of --output_dir; or "
            "a run folder (its newest whole checkpoint), or one checkpoint-<step> folder."
        },
    )
    dataloader_pin_memory: bool = field(
        default=torch.cuda.is_available(),
        metadata={"help": "Pin batches in page-locked memory for faster copies to a GPU (on with CUDA)."},
    )
    bf16: bool | None = field(
        default=None,
        metadata={
            "help": "Mixed precision in bfloat16. Unset: the launch's --mixed_precision if it names bf16 or "
            "fp16, else what the device computes fastest in (`devices.default_mixed_precision`): bf16 on a "
            "GPU with bfloat16, fp16 on an older CUDA GPU, float32 on a CPU. --bf16 false --fp16 false: "
            "float32."
        },
    )
    fp16: bool | None = field(
        default=None,
        metadata={
            "help": "Mixed precision in float16, with loss scaling. Unset: as for --bf16 (on by default only "
            "on a CUDA GPU without bfloat16)."
        },
    )
    tf32: bool | None = field(
        default=None,
        metadata={
            "help": "TF32 for float32 matrix products on NVIDIA GPUs from Ampere on. Unset: on where the GPU "
            "has it (a CPU has none)."
        },
    )
    ddp_find_unused_parameters: bool | None = field(
        default=False,
        metadata={
            "help": "DDP's search for parameters a step left unused: every parameter of the model is used "
            "in every step, and the search is a pass over the graph after each backward."
        },
    )
    logging_nan_inf_filter: bool = field(
        default=False,
        metadata={
            "help": "Leave a NaN or infinite step loss out of the logged mean, at the cost of reading every "
            "step's loss back from the device. Off by default: the log shows a NaN loss as NaN."
        },
    )

    def __post_init__(self):
        # The schedule options left unset are chosen by what training starts from (`choose_schedule`); the
        # Trainer's own checks see the paper's values meanwhile.
        self.unset_schedule = tuple(name for name in PAPER if getattr(self, name) is None)
        for name in self.unset_schedule:
            if name != "learning_rate":
                setattr(self, name, PAPER[name])
        self.bf16, self.fp16 = precision_flags(self.bf16, self.fp16, self.use_cpu)
        if self.tf32 is None and tf32_available(self.use_cpu):
            self.tf32 = True
        super().__post_init__()
        # What the Trainer hands its Accelerator: the resume contract records these, so they say what ran.
        self.bf16, self.fp16 = self.mixed_precision == "bf16", self.mixed_precision == "fp16"


def precision_flags(bf16: bool | None, fp16: bool | None, use_cpu: bool) -> tuple[bool, bool]:
    """`--bf16` and `--fp16` as the Trainer takes them, the unset ones chosen. One given true decides. Else
    the launch's mixed precision (accelerate launch's `--mixed_precision bf16` or `fp16`, or its config's,
    passed on as ACCELERATE_MIXED_PRECISION) if it names one, else `default_mixed_precision`; a flag given
    false takes its precision out of that choice (float32 instead), and with both false no launch brings
    one back."""
    if bf16 and fp16:
        raise UsageError("--bf16 and --fp16 both true: give one of them (or neither, for the device's).")
    if bf16 or fp16:
        return bool(bf16), bool(fp16)
    launched = os.environ.get("ACCELERATE_MIXED_PRECISION", "no")
    if bf16 is False and fp16 is False:
        chosen = "no"
    elif launched not in ("bf16", "fp16"):
        chosen = default_mixed_precision(use_cpu)
    elif use_cpu or torch.cuda.is_available():
        chosen = launched
    else:
        raise UsageError(
            f"The launch asks for {launched} mixed precision (accelerate launch's --mixed_precision or its "
            f"config's), and this machine has no GPU: pass --bf16 false --fp16 false to train in float32, "
            f"or --use_cpu true to train in {launched} on the CPU."
        )
    if (chosen == "bf16" and bf16 is False) or (chosen == "fp16" and fp16 is False):
        chosen = "no"
    if chosen == "no" and launched != "no":
        os.environ["ACCELERATE_MIXED_PRECISION"] = "no"  # which the Trainer would take when no flag is on
    return chosen == "bf16", chosen == "fp16"


TRAINING_ARGUMENTS = (ModelArguments, DataArguments, RecipeArguments, PaperSeq2SeqTrainingArguments)
