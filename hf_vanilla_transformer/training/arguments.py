"""A training recipe: the argument dataclasses (model, recipe and the paper's Trainer defaults; the data's are
`tasks.DataArguments`) and what training builds from them (tokenizer, data, seeded model, eq. 3 learning
rate). Recipe files are read by the command line (`cli.parse_recipe_and_args`)."""

from __future__ import annotations

import json
import logging
import os
import shutil
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Protocol

import torch
from accelerate import PartialState
from datasets import DatasetDict
from transformers import (
    AutoConfig,
    AutoTokenizer,
    PreTrainedTokenizerBase,
    SchedulerType,
    Seq2SeqTrainingArguments,
    set_seed,
)
from transformers.trainer_utils import PREFIX_CHECKPOINT_DIR
from transformers.training_args import ParallelMode

from ..configuration_vanilla_transformer import PRESETS, VanillaTransformerConfig
from ..errors import ExistingPathError, UsageError
from ..modeling_vanilla_transformer import VanillaTransformerForConditionalGeneration
from ..options import Options
from ..outputs import check_not_a_file, exists_on_disk
from ..readers import read_json
from ..saving import check_model_for_task, check_model_location, check_tokenizer_location
from ..tasks import DataArguments, prepare_dataset
from .batching import BatchingArguments
from .budget import TimeBudget
from .checkpoints import UNFINISHED_SUFFIX, remove_unfinished, resolve_resume, step_of
from .faults import Watchdog
from .logs import LOSS_LOG_NAME, LOSS_PLOT_NAME
from .resume import (
    ResumeContract,
    RunFinished,
    check_weights_fit,
    final_is_current,
    finished_message,
    how_it_ended,
    run_is_over,
)
from .schedules import paper_peak_learning_rate

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


# What a training run writes into its output_dir (the Trainer's checkpoints, the plain loop's states): an
# earlier run's files are not trained over unasked (`prepare_output_dir`).
RUN_FILES = ("checkpoint-*", "state-*", "final", f"final{UNFINISHED_SUFFIX}", LOSS_LOG_NAME, LOSS_PLOT_NAME)


def prepare_output_dir(output_dir: str | Path, resuming: bool, overwrite: bool) -> None:
    """Refuse to train into an earlier run's output_dir unless asked (`overwrite`, which then deletes that
    run's files, and only those), or continuing it (`resuming`). Otherwise the new run would rotate away the
    earlier run's checkpoints, append to its loss log and replace its final model."""
    check_not_a_file(output_dir)
    if resuming:
        return
    folder = Path(output_dir)
    if (folder / "config.json").is_file() and any(folder.glob("*.safetensors")) and not overwrite:
        raise ExistingPathError(
            f"{folder} holds a saved model (config.json and weights): a run would fill it with its "
            "checkpoints. Give another --output_dir (start from the model with --model), or pass "
            "--overwrite to train into it anyway."
        )
    earlier = sorted(path.name for pattern in RUN_FILES for path in folder.glob(pattern))
    if not earlier:
        return
    if not overwrite:
        shown = ", ".join(earlier[:4]) + (", ..." if len(earlier) > 4 else "")
        raise ExistingPathError(
            f"{folder} holds an earlier training run ({shown}): pass --overwrite to replace it, "
            "--resume_from_checkpoint true to continue it, or another --output_dir."
        )
    for name in earlier:
        path = folder / name
        # Every process of a multi-process run may get here; what another already deleted is gone.
        if path.is_dir():
            shutil.rmtree(path, ignore_errors=True)
        else:
            path.unlink(missing_ok=True)


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

    def check_output_dir(self, training_args: Seq2SeqTrainingArguments) -> None:
        """`prepare_output_dir` for the Trainer's options, with this recipe's `overwrite`."""
        prepare_output_dir(
            training_args.output_dir, bool(training_args.resume_from_checkpoint), self.overwrite
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
                    "max_warmup_fraction is a share of the time budget: set --decay_by_clock too."
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

    def __post_init__(self):
        # The schedule options left unset are chosen by what training starts from (`choose_schedule`); the
        # Trainer's own checks see the paper's values meanwhile.
        self.unset_schedule = tuple(name for name in PAPER if getattr(self, name) is None)
        for name in self.unset_schedule:
            if name != "learning_rate":
                setattr(self, name, PAPER[name])
        super().__post_init__()


TRAINING_ARGUMENTS = (ModelArguments, DataArguments, RecipeArguments, PaperSeq2SeqTrainingArguments)


def load_config_overrides(value: dict | str | None) -> dict:
    """Read `config_overrides`: a mapping (from a recipe file), inline JSON, or the path of a JSON file."""
    if not value:
        return {}
    if isinstance(value, dict):
        return dict(value)
    if exists_on_disk(value):
        overrides = read_json(value, "Write the file again", "--config_overrides file")
    else:
        try:
            overrides = json.loads(value)
        except json.JSONDecodeError as error:
            raise UsageError(
                f"--config_overrides is neither a JSON object nor a JSON file: {value!r} ({error})."
            ) from error
    if not isinstance(overrides, dict):
        raise UsageError(f"--config_overrides must be a JSON object of config fields, got {overrides!r}.")
    return overrides


def model_config(model_args: ModelArguments, tokenizer) -> VanillaTransformerConfig:
    """The configuration `build_model` builds from, read without building anything: a saved model's, or the
    preset sized to the tokenizer with the tokenizer's special-token ids and the overrides."""
    if model_args.model:
        check_model_location(model_args.model)  # a mistyped folder is named, not sent to the Hub
        return AutoConfig.from_pretrained(model_args.model)
    specials = {
        "pad_token_id": tokenizer.pad_token_id,
        "bos_token_id": tokenizer.bos_token_id,
        "eos_token_id": tokenizer.eos_token_id,
        "decoder_start_token_id": tokenizer.bos_token_id,
    }
    # Overrides win over the tokenizer's ids too (`{"decoder_start_token_id": 2}` starts decoding at </s>).
    fields = {"vocab_size": len(tokenizer), **specials, **load_config_overrides(model_args.config_overrides)}
    return VanillaTransformerConfig.from_preset(model_args.preset, **fields)


def build_model(model_args: ModelArguments, tokenizer) -> VanillaTransformerForConditionalGeneration:
    """A fresh model sized to the tokenizer (or a saved one), with the tokenizer's special-token ids."""
    if model_args.model:
        check_model_location(model_args.model)  # a mistyped folder is named, not sent to the Hub
        return VanillaTransformerForConditionalGeneration.from_pretrained(
            model_args.model, attn_implementation=model_args.attn_implementation
        )
    return VanillaTransformerForConditionalGeneration._from_config(
        model_config(model_args, tokenizer), attn_implementation=model_args.attn_implementation
    )


def choose_schedule(
    recipe_args: RecipeArguments,
    training_args: PaperSeq2SeqTrainingArguments,
    d_model: int,
    from_trained: bool,
) -> str:
    """Fill the schedule options the run left unset (`unset_schedule`): the paper's, with eq. 3's peak times
    `lr_scale`, for a new model or when `lr_scale` is given; a fine-tuning one for a trained model otherwise.
    An option given is never replaced. Returns the line that says what the run trains with."""
    unset = getattr(training_args, "unset_schedule", ())
    fine_tuning = from_trained and recipe_args.lr_scale is None
    chosen = FINE_TUNING if fine_tuning else PAPER
    for name in unset:
        if name != "learning_rate":
            setattr(
                training_args,
                name,
                SchedulerType(chosen[name]) if name == "lr_scheduler_type" else chosen[name],
            )
    scale = 1.0 if recipe_args.lr_scale is None else recipe_args.lr_scale
    if training_args.learning_rate is None:
        warmup = (
            training_args.warmup_steps
        )  # a fraction below 1: of the training steps, as the Trainer reads it
        steps = (
            int(warmup) if warmup >= 1 else training_args.get_warmup_steps(max(training_args.max_steps, 0))
        )
        training_args.learning_rate = (
            FINE_TUNING["learning_rate"]
            if fine_tuning
            else scale * paper_peak_learning_rate(d_model, max(1, steps))
        )
    rate = f"learning rate {training_args.learning_rate:.3g}"
    if "learning_rate" in unset:
        rate += " (fine-tuning)" if fine_tuning else f" (eq. 3's peak x {scale:g})"
    start = (
        "Fine-tuning"
        if fine_tuning
        else "Training a trained model"
        if from_trained
        else "Training a new model"
    )
    given = [name for name in PAPER if name not in unset]
    return (
        f"{start}: {rate}, {SchedulerType(training_args.lr_scheduler_type).value} after "
        f"{training_args.warmup_steps:g} warmup steps"
        + (f" (given: {', '.join(given)})" if given else "")
        + (
            "; --learning_rate, --lr_scheduler_type and --warmup_steps choose others."
            if len(given) < 3
            else "."
        )
    )


def check_lengths_fit(data_args: DataArguments, config: VanillaTransformerConfig) -> None:
    """Refuse, before the first step, a recipe whose pairs can be longer than the model's positions: training
    would run until the first such batch and fail there."""
    longest = max(data_args.max_source_length, data_args.max_target_length)
    if longest > config.max_position_embeddings:
        raise UsageError(
            f"max_source_length {data_args.max_source_length} / max_target_length "
            f"{data_args.max_target_length} allow pairs of {longest} tokens, but the model has "
            f"max_position_embeddings={config.max_position_embeddings}: lower the lengths to at most "
            f"{config.max_position_embeddings}, or build the model with more positions "
            "(--config_overrides '{\"max_position_embeddings\": ...}')."
        )


def check_processes_train_together(training_args: Seq2SeqTrainingArguments) -> None:
    """Refuse a launch of several processes that would not train as one. On a machine without GPUs,
    `accelerate launch` (or torchrun) starts the processes, but unless `use_cpu` reaches the Trainer each
    of them trains the whole model on all the data alone, and all of them write into the same output_dir."""
    launched = int(os.environ.get("WORLD_SIZE", "1"))
    alone = training_args.parallel_mode in (ParallelMode.NOT_PARALLEL, ParallelMode.NOT_DISTRIBUTED)
    if launched > 1 and alone:
        raise UsageError(
            f"Launched as {launched} processes, but they would not train together: each would train alone on "
            "all the data, into the same output_dir. On a machine without GPUs pass --use_cpu true (the "
            "processes then train as one, over gloo)."
        )


def check_streaming(recipe_args: RecipeArguments, training_args: PaperSeq2SeqTrainingArguments) -> None:
    """Refuse a streamed run that cannot be one, before any data is read; a resumed streamed run goes on from
    the position its checkpoint records (`streaming.load_stream_state`), not by reading the batches again."""
    if recipe_args.max_tokens is None:
        raise UsageError("--streaming batches by a token budget: set --max_tokens (e.g. 4096).")
    if training_args.max_steps is None or training_args.max_steps <= 0:
        raise UsageError("A stream has no length to count epochs in: set --max_steps for --streaming.")
    training_args.ignore_data_skip = True


def trainer_resume_options(
    data_args: DataArguments, recipe_args: RecipeArguments, training_args: PaperSeq2SeqTrainingArguments
) -> tuple[dict, dict]:
    """The Trainer's options that a checkpoint records (`ResumeContract`; the task's, the data's and the
    model's are the contract's own): those that decide the batches or the updates, checked on resuming, and
    those the checkpoint's optimizer state restores whatever is given. Read after `choose_schedule`."""
    args = training_args
    if recipe_args.max_tokens is not None:
        batches = {
            "max_tokens": recipe_args.max_tokens,
            "batch_order": recipe_args.batch_order,
            "batch_size_multiple": recipe_args.batch_size_multiple,
        }
    else:  # the Trainer's own batches: a fixed number of pairs, in its sampler's order
        batches = {
            "per_device_train_batch_size": args.per_device_train_batch_size,
            "auto_find_batch_size": args.auto_find_batch_size,
            "dataloader_drop_last": args.dataloader_drop_last,
            "train_sampling_strategy": args.train_sampling_strategy,
            "data_seed": args.data_seed,
        }
    if data_args.streaming:
        batches["stream_buffer"] = recipe_args.stream_buffer
    else:  # a stream resumes from its recorded place, never by skipping batches (`check_streaming`)
        batches["ignore_data_skip"] = args.ignore_data_skip
    checked = {
        **batches,
        "seed": args.seed,  # the batches' order, each epoch's
        "gradient_accumulation_steps": args.gradient_accumulation_steps,
        "num_processes": args.world_size,  # each process's share of the batches
        "average_tokens_across_devices": args.average_tokens_across_devices,
        # The schedule is built anew from these on resuming (only its step count is restored).
        "lr_scheduler_type": args.lr_scheduler_type,
        "lr_scheduler_kwargs": args.lr_scheduler_kwargs,
        "warmup_steps": args.warmup_steps,
        "decay_by_clock": recipe_args.decay_by_clock,
        "max_warmup_fraction": recipe_args.max_warmup_fraction,
        "max_grad_norm": args.max_grad_norm,
        "optim": args.optim,
        "optim_args": args.optim_args,
        "label_smoothing_factor": args.label_smoothing_factor,
        "neftune_noise_alpha": args.neftune_noise_alpha,
        "bf16": args.bf16,
        "fp16": args.fp16,
    }
    restored = {
        "learning_rate": args.learning_rate,
        "lr_scale": recipe_args.lr_scale,
        "adam_beta1": args.adam_beta1,
        "adam_beta2": args.adam_beta2,
        "adam_epsilon": args.adam_epsilon,
        "weight_decay": args.weight_decay,
    }
    return checked, restored


class RunOptions(Protocol):
    """What `set_up_training` reads of a training script's own options, which `PaperSeq2SeqTrainingArguments`
    and the plain loop's `LoopArguments` both hold."""

    output_dir: str
    resume_from_checkpoint: str | bool | None  # set to the checkpoint it names (`resolve_resume`)
    seed: int


def set_up_training(
    model_args: ModelArguments,
    data_args: DataArguments,
    run: RunOptions,
    overwrite: bool,
    state: PartialState,
    checkpoint_prefix: str = PREFIX_CHECKPOINT_DIR,
    before_reading_data: Callable[[VanillaTransformerConfig], None] | None = None,
    contract: ResumeContract | None = None,
    finished: Callable[[str], str | None] | None = None,
) -> tuple[PreTrainedTokenizerBase, DatasetDict, VanillaTransformerForConditionalGeneration]:
    """What both training scripts start from: the tokenizer, the tokenized splits and the model, built after
    seeding with `run.seed` (so that a recipe's seed fixes the initial weights too) and recording the task.
    Refuses, in one line and before any data is read, what cannot be trained; then sets
    `run.resume_from_checkpoint` to the `<checkpoint_prefix>-<step>` folder it names, prepares
    `run.output_dir` (`prepare_output_dir`, with `overwrite`) and calls `before_reading_data` with the model's
    configuration. `state` is the run's processes (accelerate's `PartialState`).

    Resuming, `finished(checkpoint)` says whether the checkpoint ends its run (the line to say, or None): if
    its final folder was saved after it, nothing is done (`RunFinished` is raised). `contract` records what
    decides the batches and the model (the scripts save it into each checkpoint) and refuses a resume with
    any of it changed: the options before the data is read, the training pairs after."""
    check_not_a_file(run.output_dir)  # first: a file named as the output is no run's, whatever else is wrong
    if not data_args.tokenizer:
        raise UsageError(
            "No tokenizer given: pass --tokenizer (a folder made by `python scripts/train_tokenizer.py`, or "
            "a Hub name)."
        )
    check_tokenizer_location(data_args.tokenizer)
    if model_args.model:
        check_model_for_task(model_args.model, data_args.task)
    tokenizer = AutoTokenizer.from_pretrained(data_args.tokenizer)
    config = model_config(model_args, tokenizer)
    check_lengths_fit(data_args, config)
    run.resume_from_checkpoint = checkpoint = resolve_resume(
        run.resume_from_checkpoint, run.output_dir, checkpoint_prefix
    )
    past_final = bool(checkpoint) and say_if_finished(run.output_dir, checkpoint, finished)
    # After every refusal that can come without a checkpoint: with --overwrite it deletes the earlier run,
    # which such a refusal must leave whole. The checks below need a checkpoint, and then nothing is deleted.
    prepare_output_dir(run.output_dir, bool(checkpoint), overwrite)
    if before_reading_data is not None:
        before_reading_data(config)
    if contract is not None:
        overrides = load_config_overrides(model_args.config_overrides)
        contract.describe(model_args, data_args, tokenizer, config, overrides)
        if checkpoint:
            contract.check(checkpoint)
    if checkpoint:
        check_weights_fit(checkpoint, config, VanillaTransformerForConditionalGeneration)
        if state.is_main_process:
            remove_unfinished(run.output_dir, step_of(checkpoint), checkpoint_prefix)
    if past_final:
        logger.warning(
            "%s will be replaced when this run ends: copy out what you wrote into it to keep it.",
            Path(run.output_dir) / "final",
        )
    # Under several processes the main one of each machine tokenizes first and the others read what `datasets`
    # cached (a corpus of millions of pairs is tokenized once, not once per GPU).
    with state.local_main_process_first():
        datasets_ = prepare_dataset(data_args, tokenizer)
    if contract is not None:
        contract.describe_data(data_args, datasets_["train"])
        if checkpoint:
            contract.check_data(checkpoint)
    set_seed(run.seed)
    model = build_model(model_args, tokenizer)
    data_args.record_in(model.config)
    logger.info(
        "Model: %s, %.2fM parameters; %s training pairs",
        model_args.model or model_args.preset,
        sum(p.numel() for p in model.parameters()) / 1e6,
        "streamed" if data_args.streaming else datasets_["train"].num_rows,
    )
    return tokenizer, datasets_, model


def say_if_finished(
    output_dir: str | Path, checkpoint: str, finished: Callable[[str], str | None] | None
) -> bool:
    """Raise `RunFinished` when `checkpoint` ends its run and the final folder was saved after it. Returns
    whether the run goes on past a final folder (which its end will replace)."""
    final = Path(output_dir) / "final"
    message = finished(checkpoint) if finished is not None else None
    if message is not None and final_is_current(final, checkpoint):
        raise RunFinished(message)
    return message is None and final.is_dir()


def trainer_contract(
    data_args: DataArguments, recipe_args: RecipeArguments, training_args: PaperSeq2SeqTrainingArguments
) -> ResumeContract:
    """The `ResumeContract` of a Trainer run: its options read once `choose_schedule` has filled them."""
    return ResumeContract(
        lambda: trainer_resume_options(data_args, recipe_args, training_args),
        recipe_args.allow_changed_options,
    )


def prepare_training(
    model_args: ModelArguments,
    data_args: DataArguments,
    recipe_args: RecipeArguments,
    training_args: PaperSeq2SeqTrainingArguments,
    contract: ResumeContract | None = None,
) -> tuple[PreTrainedTokenizerBase, DatasetDict, VanillaTransformerForConditionalGeneration]:
    """`set_up_training` from the Trainer's options, after the checks of what only the Trainer reads (its
    processes, the recipe, a stream); it fills the schedule options left unset (`choose_schedule`). A run
    resumed is checked against its checkpoint's record (`contract`, by default `trainer_contract`'s), and a
    finished one raises `RunFinished`."""
    check_processes_train_together(training_args)
    recipe_args.check(training_args)
    if data_args.streaming:
        check_streaming(recipe_args, training_args)

    def say_schedule(config: VanillaTransformerConfig) -> None:
        # First in the log, before the data's lines: what the run trains with.
        from_trained = bool(model_args.model)
        logger.info(choose_schedule(recipe_args, training_args, config.d_model, from_trained=from_trained))

    def finished(checkpoint: str) -> str | None:
        if not run_is_over(checkpoint, training_args, recipe_args):
            return None
        reached, further = how_it_ended(checkpoint, training_args, recipe_args)
        return finished_message(training_args.output_dir, checkpoint, reached, further)

    if contract is None:
        contract = trainer_contract(data_args, recipe_args, training_args)
    return set_up_training(
        model_args,
        data_args,
        training_args,
        recipe_args.overwrite,
        training_args.distributed_state,
        before_reading_data=say_schedule,
        contract=contract,
        finished=finished,
    )
