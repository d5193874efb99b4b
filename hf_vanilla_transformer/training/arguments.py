"""A training recipe: the argument dataclasses (model, recipe and the paper's Trainer defaults; the data's are
`tasks.DataArguments`) and what training builds from them (tokenizer, data, seeded model, eq. 3 learning
rate). Recipe files are read by the command line (`cli.parse_recipe_and_args`)."""

from __future__ import annotations

import json
import logging
import os
import shutil
from dataclasses import dataclass, field
from pathlib import Path

import torch
from transformers import AutoConfig, SchedulerType, Seq2SeqTrainingArguments, set_seed
from transformers.training_args import ParallelMode

from ..configuration_vanilla_transformer import PRESETS, VanillaTransformerConfig
from ..errors import ExistingPathError, UsageError
from ..modeling_vanilla_transformer import VanillaTransformerForConditionalGeneration
from ..outputs import check_not_a_file
from ..saving import check_model_for_task, check_model_location, check_tokenizer_location
from ..tasks import DataArguments, prepare_dataset
from .batching import BatchingArguments
from .budget import TimeBudget
from .logs import LOSS_LOG_NAME, LOSS_PLOT_NAME
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
# earlier run's files are not trained over unasked (`RecipeArguments.check_output_dir`).
RUN_FILES = ("checkpoint-*", "state-*", "final", LOSS_LOG_NAME, LOSS_PLOT_NAME)


@dataclass
class RecipeArguments(BatchingArguments):
    """How batches are made (`BatchingArguments`), how the learning rate is set and how long training may
    take (the rest of the recipe is in `PaperSeq2SeqTrainingArguments`)."""

    paper_learning_rate: bool = field(
        default=True,
        metadata={
            "help": "Set the peak learning rate by eq. 3 (lr_scale * d_model^-0.5 * warmup^-0.5), "
            "ignoring --learning_rate."
        },
    )
    lr_scale: float = field(default=1.0, metadata={"help": "Multiplier of the eq. 3 learning rate."})
    max_train_minutes: float | None = field(
        default=None, metadata={"help": "Stop training (and save) after this many minutes of wall time."}
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
            "budget, whichever comes first (a slow machine may not reach warmup_steps in a short budget)."
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

    def check_output_dir(self, training_args: Seq2SeqTrainingArguments) -> None:
        """Refuse to train into an earlier run's output_dir unless asked (`overwrite`, which then deletes
        that run's files, and only those), or continuing it (`resume_from_checkpoint`). Otherwise the new
        run would rotate away the earlier run's checkpoints, append to its loss log and replace its final
        model."""
        check_not_a_file(training_args.output_dir)
        if training_args.resume_from_checkpoint:
            return
        folder = Path(training_args.output_dir)
        if (folder / "config.json").is_file() and any(folder.glob("*.safetensors")) and not self.overwrite:
            raise ExistingPathError(
                f"{folder} holds a saved model (config.json and weights): a run would fill it with its "
                "checkpoints. Give another --output_dir (start from the model with --model), or pass "
                "--overwrite to train into it anyway."
            )
        earlier = sorted(path.name for pattern in RUN_FILES for path in folder.glob(pattern))
        if not earlier:
            return
        if not self.overwrite:
            shown = ", ".join(earlier[:4]) + (", ..." if len(earlier) > 4 else "")
            raise ExistingPathError(
                f"{folder} holds an earlier training run ({shown}): pass --overwrite to replace it, "
                f"--resume_from_checkpoint {folder}/<checkpoint> to continue it, or another --output_dir."
            )
        for name in earlier:
            path = folder / name
            # Every process of a multi-process run may get here; what another already deleted is gone.
            if path.is_dir():
                shutil.rmtree(path, ignore_errors=True)
            else:
                path.unlink(missing_ok=True)

    def check(self, training_args: Seq2SeqTrainingArguments) -> None:
        """Refuse a combination that cannot be trained, naming the options to change."""
        if self.max_warmup_fraction is not None:
            if not self.decay_by_clock:
                raise UsageError(
                    "max_warmup_fraction is a share of the time budget: set --decay_by_clock too."
                )
            if not 0 < self.max_warmup_fraction < 1:
                raise UsageError(f"max_warmup_fraction must be in (0, 1), got {self.max_warmup_fraction}.")
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


@dataclass
class PaperSeq2SeqTrainingArguments(Seq2SeqTrainingArguments):
    """`Seq2SeqTrainingArguments` whose defaults are the paper's recipe (§5.3): Adam with betas (0.9, 0.98)
    and eps 1e-9 (torch's AdamW with no weight decay is Adam), no gradient clipping, linear warmup then
    inverse square-root decay over 4000 warmup steps; plus generation during evaluation so the task metric
    can pick the best checkpoint."""

    output_dir: str | None = field(
        default="outputs/run", metadata={"help": "Where checkpoints, logs and the final model go."}
    )
    adam_beta1: float = field(default=0.9, metadata={"help": "Adam's beta1 (§5.3: 0.9)."})
    adam_beta2: float = field(default=0.98, metadata={"help": "Adam's beta2 (§5.3: 0.98)."})
    adam_epsilon: float = field(default=1e-9, metadata={"help": "Adam's epsilon (§5.3: 1e-9)."})
    weight_decay: float = field(
        default=0.0,
        metadata={
            "help": "Decoupled weight decay (AdamW) on all weights but biases and LayerNorm (paper: 0)."
        },
    )
    max_grad_norm: float = field(
        default=0.0, metadata={"help": "Clip gradients to this global norm; 0 does not clip (the paper's)."}
    )
    lr_scheduler_type: SchedulerType | str = field(
        default="inverse_sqrt",
        metadata={"help": "Learning-rate schedule after warmup; inverse_sqrt with the eq. 3 peak is eq. 3."},
    )
    warmup_steps: float = field(
        default=4000,
        metadata={"help": "Linear warmup steps (§5.3: 4000); below 1, a fraction of the training steps."},
    )
    predict_with_generate: bool = field(
        default=True, metadata={"help": "Generate during evaluation so the task metric can be computed."}
    )
    save_total_limit: int | None = field(
        default=5,
        metadata={"help": "Keep this many checkpoints (the best one as well); §6.1 averages the last 5."},
    )
    metric_for_best_model: str | None = field(
        default=TASK_METRIC,
        metadata={"help": f"'{TASK_METRIC}' (default) is the task's metric: BLEU or exact match."},
    )
    resume_from_checkpoint: str | None = field(
        default=None,
        metadata={"help": "Continue a run from one of its checkpoint-<step> folders."},
    )
    dataloader_pin_memory: bool = field(
        default=torch.cuda.is_available(),
        metadata={"help": "Pin batches in page-locked memory for faster copies to a GPU (on with CUDA)."},
    )


TRAINING_ARGUMENTS = (ModelArguments, DataArguments, RecipeArguments, PaperSeq2SeqTrainingArguments)


def load_config_overrides(value: dict | str | None) -> dict:
    """Read `config_overrides`: a mapping (from a recipe file), inline JSON, or the path of a JSON file."""
    if not value:
        return {}
    if isinstance(value, dict):
        return dict(value)
    text = Path(value).read_text() if Path(value).is_file() else value
    try:
        overrides = json.loads(text)
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


def set_paper_learning_rate(
    recipe_args: RecipeArguments, training_args: Seq2SeqTrainingArguments, d_model: int
) -> float:
    """Set `training_args.learning_rate` to `lr_scale` times eq. 3's peak (unless `paper_learning_rate` is
    off) and return the learning rate training will peak at."""
    if recipe_args.paper_learning_rate:
        training_args.learning_rate = recipe_args.lr_scale * paper_peak_learning_rate(
            d_model, max(1, int(training_args.warmup_steps))
        )
    return training_args.learning_rate


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


def prepare_training(
    model_args: ModelArguments,
    data_args: DataArguments,
    recipe_args: RecipeArguments,
    training_args: PaperSeq2SeqTrainingArguments,
):
    """What training starts from: the tokenizer, the tokenized splits, and the model, built after
    seeding with `training_args.seed` so that a recipe's seed fixes the initial weights too; sets the
    learning rate by eq. 3 (`set_paper_learning_rate`)."""
    from transformers import AutoTokenizer

    check_processes_train_together(training_args)
    recipe_args.check(training_args)
    recipe_args.check_output_dir(training_args)
    if not data_args.tokenizer:
        raise UsageError(
            "No tokenizer given: pass --tokenizer (a folder made by `python scripts/train_tokenizer.py`, or "
            "a Hub name)."
        )
    check_tokenizer_location(data_args.tokenizer)
    if model_args.model:  # before the data is read: a model for the other task is refused at once
        check_model_for_task(model_args.model, data_args.task)
    tokenizer = AutoTokenizer.from_pretrained(data_args.tokenizer)
    # Before the data is read and tokenized (minutes for a large corpus), from the configuration alone.
    check_lengths_fit(data_args, model_config(model_args, tokenizer))
    # Under several processes the main one tokenizes first and the others read what `datasets` cached (a
    # corpus of millions of pairs is tokenized once, not once per GPU).
    with training_args.main_process_first(desc="tokenizing the data"):
        datasets_ = prepare_dataset(data_args, tokenizer)
    set_seed(training_args.seed)
    model = build_model(model_args, tokenizer)
    data_args.record_in(model.config)
    set_paper_learning_rate(recipe_args, training_args, model.config.d_model)
    logger.info(
        "Model: %s, %.2fM parameters; peak learning rate %.2e; %d training pairs",
        model_args.model or model_args.preset,
        sum(p.numel() for p in model.parameters()) / 1e6,
        training_args.learning_rate,
        datasets_["train"].num_rows,
    )
    return tokenizer, datasets_, model
