"""Setting a training run up from its options (`arguments`): the output folder (`prepare_output_dir`), the
tokenizer, the data, the seeded model (`build_model`), eq. 3's learning rate or a fine-tuning schedule
(`choose_schedule`), the checks made before the first step, and what a resumed run must match
(`set_up_training`, `prepare_training`), for both training scripts."""

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
    AutoTokenizer,
    PreTrainedTokenizerBase,
    SchedulerType,
    Seq2SeqTrainingArguments,
    set_seed,
)
from transformers.trainer_utils import PREFIX_CHECKPOINT_DIR
from transformers.training_args import ParallelMode

from ..configuration_vanilla_transformer import VanillaTransformerConfig
from ..errors import ExistingPathError, UsageError
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
    # A misspelt config field is an option's mistake: refused with the options, before the tokenizer is read.
    load_config_overrides(model_args.config_overrides)
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
    if contract is not None and not checkpoint:
        contract.check_allowed_names(model_args, data_args)
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
