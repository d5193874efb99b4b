"""The steps a training run is set up by, shared by both training scripts (`run.run_training`, the Trainer's,
and `scripts/train_accelerate.py`'s plain loop), in their order: the options refused before anything is read
(`check_options`, and `check_trainer_options` for what only the Trainer reads); the model's configuration
from the tokenizer (`model_config`); the checks before any data is read (`check_lengths_fit`, `resume_point`,
`prepare_output_dir`, `choose_schedule`, `check_resume`); the tokenized data (`tokenized_data`); the seeded
model (`seeded_model`). A step refuses in the same words whichever script takes it."""

from __future__ import annotations

import dataclasses
import difflib
import json
import logging
import os
import shutil
from collections.abc import Callable
from pathlib import Path
from typing import Protocol

from accelerate import PartialState
from datasets import DatasetDict
from transformers import (
    AutoConfig,
    PreTrainedTokenizerBase,
    SchedulerType,
    Seq2SeqTrainingArguments,
    set_seed,
)
from transformers.trainer_utils import PREFIX_CHECKPOINT_DIR
from transformers.training_args import ParallelMode

from ..configuration_vanilla_transformer import VanillaTransformerConfig
from ..errors import ExistingPathError, UsageError
from ..lengths import MIN_SIDE_LENGTH, check_length
from ..modeling_vanilla_transformer import VanillaTransformerForConditionalGeneration
from ..outputs import UNFINISHED_SUFFIX, check_not_a_file, exists_on_disk
from ..readers import read_json
from ..saving import check_model_for_task, check_model_location, check_tokenizer_location
from ..tasks import DataArguments, prepare_dataset
from .arguments import (
    FINE_TUNING,
    PAPER,
    ModelArguments,
    PaperSeq2SeqTrainingArguments,
    RecipeArguments,
)
from .checkpoints import remove_unfinished, resolve_resume, step_of
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


# Options: refused in one line before anything is read.


def check_trainer_options(
    data_args: DataArguments, recipe_args: RecipeArguments, training_args: PaperSeq2SeqTrainingArguments
) -> None:
    """Refuse what only the Trainer reads and cannot train with: a launch whose processes would not train
    together, recipe options that do not combine, a stream without a token budget or a step count."""
    check_processes_train_together(training_args)
    recipe_args.check(training_args)
    if data_args.streaming:
        check_streaming(recipe_args, training_args)


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


def check_options(model_args: ModelArguments, data_args: DataArguments, output_dir: str | Path) -> None:
    """Refuse what neither training script can train with: an output that is a file, no tokenizer, a
    misspelt configuration field, a tokenizer or `--model` that is not where it is said to be, a `--model`
    trained for another task."""
    check_not_a_file(output_dir)  # first: a file named as the output is no run's, whatever else is wrong
    if not data_args.tokenizer:
        raise UsageError(
            "No tokenizer given: pass --tokenizer (a folder made by `python scripts/train_tokenizer.py`, or "
            "a Hub name)."
        )
    # A misspelt config field is an option's mistake: refused with the options, before the tokenizer is read.
    load_config_overrides(model_args.config_overrides)
    check_tokenizer_location(data_args.tokenizer)
    if model_args.model:
        check_model_for_task(model_args.model, data_args.task)


# What `config_overrides` may set: the names `VanillaTransformerConfig(...)` takes (its own fields and
# `PreTrainedConfig`'s, all of its `__init__`) and the generic aliases (`hidden_size`). The configuration
# would keep any other key as an attribute that no layer reads: `d_modle` would train the preset's width for
# hours.
CONFIG_FIELDS = tuple(
    sorted(
        {field.name for field in dataclasses.fields(VanillaTransformerConfig) if field.init}
        | set(VanillaTransformerConfig.attribute_map)
    )
)

# The ids the model reads from its configuration; each must have a row in the decoder's vocabulary.
SPECIAL_TOKEN_IDS = ("pad_token_id", "bos_token_id", "eos_token_id", "decoder_start_token_id")


def load_config_overrides(value: dict | str | None) -> dict:
    """Read `config_overrides`: a mapping (from a recipe file), inline JSON, or the path of a JSON file; a key
    that is no field of the configuration is refused (`check_config_fields`)."""
    if not value:
        return {}
    if isinstance(value, dict):
        overrides = dict(value)
    elif exists_on_disk(value):
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
    check_config_fields(overrides)
    return overrides


def check_config_fields(overrides: dict) -> None:
    """Refuse, naming the nearest field, an override that is no field of the configuration (`CONFIG_FIELDS`).
    Only overrides are checked: a saved config.json also holds transformers' own keys (`architectures`,
    `auto_map`, `transformers_version`), and `from_pretrained` reads it as it is."""
    unknown = sorted((key for key in overrides if key not in CONFIG_FIELDS), key=str)
    if not unknown:
        return
    hints = []
    for key in unknown:
        close = difflib.get_close_matches(str(key), CONFIG_FIELDS, n=1)
        hints.append(repr(key) + (f" (did you mean {close[0]!r}?)" if close else ""))
    raise UsageError(
        f"--config_overrides sets {', '.join(hints)}: not a field of VanillaTransformerConfig, which would "
        "keep it unread and build the model without it. Correct the name (the configuration's docstring "
        "lists its fields)."
    )


# Tokenizer and configuration: the configuration the model will be built from, read first.


def check_vocabulary(values: dict, tokenizer, model: str | None = None) -> None:
    """Refuse, before any data is read, a vocabulary smaller than the tokenizer's (`len(tokenizer)`) or a
    special-token id outside the decoder's vocabulary: the first batch holding such a token would stop
    training with an IndexError from inside the model. `values` are the overrides over a vocabulary of the
    tokenizer's size, or the configuration of the saved `model`."""
    size, vocab = len(tokenizer), values.get("vocab_size")
    given = f"--model {model} has" if model else "--config_overrides sets"
    if isinstance(vocab, int) and vocab < size:  # another type is the configuration's own to refuse
        fix = (
            "give the tokenizer the model was trained with, or resize the model's embeddings first "
            f"(`model.resize_token_embeddings({size})`, then `save_pretrained`)."
            if model
            else "drop vocab_size from --config_overrides (the model is then sized to the tokenizer), or "
            f"make it at least {size}."
        )
        raise UsageError(
            f"{given} vocab_size {vocab}, smaller than the tokenizer's vocabulary of {size} tokens "
            f"(len(tokenizer)): {fix}"
        )
    decoder = values.get("decoder_vocab_size") or vocab
    for name in SPECIAL_TOKEN_IDS:
        ids = values.get(name)
        for token_id in ids if isinstance(ids, list) else [ids]:
            if isinstance(token_id, int) and isinstance(decoder, int) and not 0 <= token_id < decoder:
                fix = (
                    f"correct {name} in the model's config.json"
                    if model
                    else f"drop {name} from --config_overrides (the tokenizer's id is then used)"
                )
                raise UsageError(
                    f"{given} {name} {token_id}, outside the decoder's vocabulary of {decoder} tokens: "
                    f"{fix}, or give an id below {decoder}."
                )


def model_config(model_args: ModelArguments, tokenizer) -> VanillaTransformerConfig:
    """The configuration `build_model` builds from, read without building anything: a saved model's, or the
    preset sized to the tokenizer with the tokenizer's special-token ids and the overrides. Either is refused
    if the tokenizer's tokens or the special-token ids do not fit its vocabulary (`check_vocabulary`)."""
    if model_args.model:
        check_model_location(model_args.model)  # a mistyped folder is named, not sent to the Hub
        config = AutoConfig.from_pretrained(model_args.model)
        check_vocabulary(config.to_dict(), tokenizer, model_args.model)
        return config
    specials = {
        "pad_token_id": tokenizer.pad_token_id,
        "bos_token_id": tokenizer.bos_token_id,
        "eos_token_id": tokenizer.eos_token_id,
        "decoder_start_token_id": tokenizer.bos_token_id,
    }
    overrides = load_config_overrides(model_args.config_overrides)
    # The tokenizer's own ids fit a vocabulary of its size: only the overrides can put an id outside it.
    check_vocabulary({"vocab_size": len(tokenizer), **overrides}, tokenizer)
    # Overrides win over the tokenizer's ids too (`{"decoder_start_token_id": 2}` starts decoding at </s>).
    fields = {"vocab_size": len(tokenizer), **specials, **overrides}
    return VanillaTransformerConfig.from_preset(model_args.preset, **fields)


# Checks: what cannot be trained or resumed, refused before any data is read.


def check_lengths_fit(data_args: DataArguments, config: VanillaTransformerConfig) -> None:
    """Refuse, before the first step, a recipe whose pairs can be longer than the model's positions: training
    would run until the first such batch and fail there (`lengths.check_length`)."""
    positions = "the model's max_position_embeddings"
    fix = "build the model with more positions (--config_overrides '{\"max_position_embeddings\": ...}')"
    for name in ("max_source_length", "max_target_length"):
        check_length(
            name,
            getattr(data_args, name),
            {positions: config.max_position_embeddings},
            fixes={positions: fix},
            minimum=MIN_SIDE_LENGTH,
        )


class RunOptions(Protocol):
    """What `resume_point` reads of a training script's own options, which `PaperSeq2SeqTrainingArguments`
    and the plain loop's `LoopArguments` both hold."""

    output_dir: str
    resume_from_checkpoint: str | bool | None  # set to the checkpoint it names (`resolve_resume`)


def resume_point(
    run: RunOptions,
    contract: ResumeContract,
    model_args: ModelArguments,
    data_args: DataArguments,
    finished: Callable[[str], str | None],
    checkpoint_prefix: str = PREFIX_CHECKPOINT_DIR,
) -> tuple[str | None, bool]:
    """The checkpoint the run resumes from, a `<checkpoint_prefix>-<step>` folder or None for a new run
    (`resolve_resume`), which becomes `run.resume_from_checkpoint`; and whether the run goes on past a final
    folder, which its end will replace.

    `finished(checkpoint)` says whether the checkpoint ends its run (the line to say, or None): if its final
    folder was saved after it, there is nothing to do, and `RunFinished` is raised. A new run has its
    --allow_changed_options names checked against those its records will hold (`contract`)."""
    run.resume_from_checkpoint = checkpoint = resolve_resume(
        run.resume_from_checkpoint, run.output_dir, checkpoint_prefix
    )
    if not checkpoint:
        contract.check_allowed_names(model_args, data_args)
        return None, False
    return checkpoint, say_if_finished(run.output_dir, checkpoint, finished)


def say_if_finished(output_dir: str | Path, checkpoint: str, finished: Callable[[str], str | None]) -> bool:
    """Raise `RunFinished` when `checkpoint` ends its run and the final folder was saved after it. Returns
    whether the run goes on past a final folder (which its end will replace)."""
    final = Path(output_dir) / "final"
    message = finished(checkpoint)
    if message is not None and final_is_current(final, checkpoint):
        raise RunFinished(message)
    return message is None and final.is_dir()


def trainer_run_finished(
    checkpoint: str, training_args: PaperSeq2SeqTrainingArguments, recipe_args: RecipeArguments
) -> str | None:
    """`resume_point`'s `finished` for the Trainer: the line a run resumed from `checkpoint` says if that
    checkpoint ends it (`run_is_over`: its steps, its epochs or its time budget spent), else None."""
    if not run_is_over(checkpoint, training_args, recipe_args):
        return None
    reached, further = how_it_ended(checkpoint, training_args, recipe_args)
    return finished_message(training_args.output_dir, checkpoint, reached, further)


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


def trainer_contract(
    data_args: DataArguments, recipe_args: RecipeArguments, training_args: PaperSeq2SeqTrainingArguments
) -> ResumeContract:
    """The `ResumeContract` of a Trainer run: its options read once `choose_schedule` has filled them."""
    return ResumeContract(
        lambda: trainer_resume_options(data_args, recipe_args, training_args),
        recipe_args.allow_changed_options,
    )


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


def check_resume(
    checkpoint: str | None,
    contract: ResumeContract,
    config: VanillaTransformerConfig,
    output_dir: str | Path,
    state: PartialState,
    replaces_final: bool,
    checkpoint_prefix: str = PREFIX_CHECKPOINT_DIR,
) -> None:
    """Refuse, in one line, a resume from `checkpoint` with what decides its batches or its model changed
    (`contract`, which describes the run already) or with weights that do not fit the model `config` builds;
    then remove the folders of `output_dir` after it whose save never finished (on the main process of
    `state`), and say that the final folder will be replaced when the run ends (`replaces_final`, from
    `resume_point`). A new run (`checkpoint` None) has nothing to check."""
    if not checkpoint:
        return
    contract.check(checkpoint)
    check_weights_fit(checkpoint, config, VanillaTransformerForConditionalGeneration)
    if state.is_main_process:
        remove_unfinished(output_dir, step_of(checkpoint), checkpoint_prefix)
    if replaces_final:
        logger.warning(
            "%s will be replaced when this run ends: copy out what you wrote into it to keep it.",
            Path(output_dir) / "final",
        )


# Data.


def tokenized_data(
    data_args: DataArguments,
    tokenizer: PreTrainedTokenizerBase,
    state: PartialState,
    contract: ResumeContract,
    checkpoint: str | None,
) -> DatasetDict:
    """The task's splits, tokenized (`prepare_dataset`). The training pairs are recorded in `contract` and, on
    resuming from `checkpoint`, checked against those it trained on."""
    # Under several processes (`state`) the main one of each machine tokenizes first and the others read what
    # `datasets` cached (a corpus of millions of pairs is tokenized once, not once per GPU).
    with state.local_main_process_first():
        datasets_ = prepare_dataset(data_args, tokenizer)
    contract.describe_data(data_args, datasets_["train"])
    if checkpoint:
        contract.check_data(checkpoint)
    return datasets_


# Model.


def seeded_model(
    model_args: ModelArguments, data_args: DataArguments, tokenizer, seed: int
) -> VanillaTransformerForConditionalGeneration:
    """`build_model` after seeding with `seed`, so that a recipe's seed fixes the initial weights too; the
    task is recorded in its configuration (`DataArguments.record_in`)."""
    set_seed(seed)
    model = build_model(model_args, tokenizer)
    data_args.record_in(model.config)
    return model


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


def say_what_trains(model_args: ModelArguments, data_args: DataArguments, model, train) -> None:
    """The log's line of the model (its name and size) and of the training pairs (`train`, the split)."""
    logger.info(
        "Model: %s, %.2fM parameters; %s training pairs",
        model_args.model or model_args.preset,
        sum(p.numel() for p in model.parameters()) / 1e6,
        "streamed" if data_args.streaming else train.num_rows,
    )
