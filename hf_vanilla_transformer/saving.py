"""Model folders on disk: find and load one (`load_model_folder`, with errors that name a missing folder
instead of a Hub error about repository names, and a file of it cut short or unreadable: its JSON files,
through `readers.read_json`, and its weights, `load_model`), write a self-contained one (what
`from_pretrained`, `pipeline()` and Hub users need). `interop.updates` brings an existing folder up to
date."""

import json
import logging
import os
import re
import socket
from collections.abc import Sequence
from pathlib import Path
from urllib.parse import urlparse

import torch
from transformers import (
    AutoConfig,
    AutoModelForSeq2SeqLM,
    AutoTokenizer,
    PreTrainedModel,
    PreTrainedTokenizerBase,
    pipeline,
)

from . import (
    configuration_vanilla_transformer,
    modeling_vanilla_transformer,
    pipeline_seq2seq,
    sentences,
    validation,
)
from .errors import CorruptFileError, InputTypeError, MissingPathError, OfflineError, UsageError
from .pipeline_seq2seq import TASK_NAME
from .readers import is_local_path, nearest_sibling, read_json

logger = logging.getLogger(__name__)

# The files a saved folder carries for `trust_remote_code` loading, keyed by their name in the folder.
CODE_FILES = {
    Path(module.__file__).name: Path(module.__file__)
    for module in (
        configuration_vanilla_transformer,
        modeling_vanilla_transformer,
        pipeline_seq2seq,
        sentences,
        validation,
    )
}


# The JSON files `from_pretrained` reads from a saved folder, where there: a model's, then a tokenizer's.
MODEL_FILES = ("config.json", "generation_config.json")
TOKENIZER_FILES = (
    "tokenizer_config.json",
    "tokenizer.json",
    "special_tokens_map.json",
    "added_tokens.json",
    "vocab.json",
)
# Files that hold a tokenizer's vocabulary (ours: tokenizer.json; Marian's: vocab.json and SentencePiece's).
VOCABULARY_FILES = ("tokenizer.json", "vocab.json", "vocab.txt", "*.model", "*.spm")
# Files that hold a model's weights, sharded or not.
WEIGHTS_FILES = ("*.safetensors", "pytorch_model*.bin")
# The folders a training run saves, as transformers names them (`PREFIX_CHECKPOINT_DIR`).
CHECKPOINT_NAME = re.compile(r"checkpoint-\d+")


def check_files_parse(name_or_path: str | Path, names: Sequence[str] = MODEL_FILES + TOKENIZER_FILES) -> None:
    """Refuse a local folder whose file among `names` is truncated or corrupt (a download or save cut short),
    naming the file and the fix. transformers' own answers name no file (a tokenizer.json cut short ends in
    "Expecting ':' delimiter"), or are silent: `from_pretrained` drops a generation_config.json that does not
    parse, and the model then decodes greedily instead of as saved. A Hub id is left to the libraries."""
    folder = Path(name_or_path)
    if not folder.is_dir():
        return
    for name in names:
        if (folder / name).is_file():
            # Not decompressed: transformers, which reads these files next, would not.
            read_json(folder / name, how_to_mend(folder), decompress=False)


def how_to_mend(folder: Path, what: str | None = None) -> str:
    """What to do about a file of `folder` (called `what`, default its path) cut short: a checkpoint's run
    resumes from the one before."""
    if CHECKPOINT_NAME.fullmatch(folder.resolve().name):
        return (
            "Resume from the previous checkpoint (`--resume_from_checkpoint true` takes the newest whole one)"
        )
    return f"Download or save {what or folder} again"


def check_saved_location(
    name_or_path: str | Path, what: str, needs: str, made_by: str, reads: Sequence[str] = ()
) -> None:
    """Raise `FileNotFoundError` for a location that is neither a folder holding `needs` nor a possible Hub
    id, before transformers answers with an error about repository names, and `CorruptFileError` for a folder
    whose file among `reads` does not parse (`check_files_parse`). `what` names the folder ("model folder"),
    `made_by` says what writes one."""
    if not isinstance(name_or_path, str | os.PathLike):
        raise InputTypeError(f"The {what} to load is {type(name_or_path).__name__}, not a path. {made_by}")
    if isinstance(name_or_path, str) and not name_or_path.strip():
        raise UsageError(f"The {what} to load is an empty path ({name_or_path!r}). {made_by}")
    path = Path(name_or_path)
    if path.is_file():
        raise UsageError(f"{path} is a file, not a saved {what}: give the folder. {made_by}")
    if path.is_dir():
        if not (path / needs).is_file():
            raise MissingPathError(f"{path} is a folder without {needs}, so not a saved {what}. {made_by}")
        check_files_parse(path, reads)
        return
    if is_local_path(name_or_path):
        sibling = nearest_sibling(name_or_path)
        hint = f" Did you mean {sibling}?" if sibling is not None else f" {made_by}"
        raise MissingPathError(f"No {what} at {name_or_path}.{hint}")
    check_hub_reachable(str(name_or_path), needs)


def check_hub_reachable(repo_id: str, filename: str, repo_type: str = "model") -> None:
    """Refuse at once a Hub repository that can be neither downloaded nor found in the local Hub cache.
    Offline, huggingface_hub retries for half a minute and transformers then answers in several lines; a
    name that does not resolve, or one missing from the cache while `HF_HUB_OFFLINE` is set, fails here in
    one line. With `filename` cached the libraries go on as usual."""
    from huggingface_hub import constants, try_to_load_from_cache

    if isinstance(try_to_load_from_cache(repo_id, filename, repo_type=repo_type), str):
        return
    if constants.HF_HUB_OFFLINE:
        raise OfflineError(
            f"HF_HUB_OFFLINE is set and {repo_id!r} is not in the Hub cache. Unset HF_HUB_OFFLINE to "
            "download it, or pass a local folder."
        )
    # A connection, not a request through huggingface_hub: the exceptions of its HTTP client differ between
    # the releases supported (httpx2 in the newest), and only whether the host answers is asked here.
    endpoint = urlparse(constants.ENDPOINT)
    host = endpoint.hostname
    try:
        socket.create_connection(
            (host, endpoint.port or (80 if endpoint.scheme == "http" else 443)), timeout=5
        ).close()
    except OSError as error:
        raise OfflineError(
            f"Cannot reach {host} to download {repo_id!r}, and it is not in the Hub cache ({error}). "
            "Connect, or pass a local folder."
        ) from None


MODEL_MADE_BY = (
    "Pass a folder written by `save_pretrained` or `scripts/train.py` (its `final/` or `averaged/`), one of "
    "the trained models in model_cards/, or a Hub model id such as 'user/model'."
)
TOKENIZER_MADE_BY = (
    "Train one with `scripts/train_tokenizer.py` (the recipes, e.g. `bash scripts/recipes/series.sh`, do it "
    "before training), or pass a model folder or a Hub id, which hold one."
)


def check_model_location(name_or_path: str | Path) -> None:
    """`check_saved_location` for a saved model (a folder with config.json that parses, or a Hub id)."""
    check_saved_location(name_or_path, "model folder", "config.json", MODEL_MADE_BY, MODEL_FILES)


def check_tokenizer_location(name_or_path: str | Path) -> None:
    """`check_saved_location` for a saved tokenizer (a folder with tokenizer_config.json, its files parsing,
    or a Hub id)."""
    check_saved_location(
        name_or_path, "tokenizer folder", "tokenizer_config.json", TOKENIZER_MADE_BY, TOKENIZER_FILES
    )


def unreadable_weights(folder: str | Path) -> tuple[Path, str] | None:
    """The first `.safetensors` file of `folder` whose header does not read (cut short, or bytes that are no
    safetensors file), and safetensors' answer; None where all read."""
    from safetensors import SafetensorError, safe_open

    for path in sorted(Path(folder).glob("*.safetensors")):
        try:
            with safe_open(str(path), "pt") as weights:
                weights.keys()
        except (SafetensorError, OSError, ValueError) as error:
            return path, str(error)
    return None


def _weights_named(folder: str | Path) -> str:
    """The weights files of a folder, as an error names them: the one file, or the folder's .safetensors."""
    files = sorted(Path(folder).glob("*.safetensors"))
    return str(files[0]) if len(files) == 1 else f"the .safetensors files of {folder}"


def holds_any(folder: Path, patterns: Sequence[str]) -> bool:
    """Whether `folder` holds a file matching one of `patterns` (glob patterns, or plain names)."""
    return any(path.is_file() for pattern in patterns for path in folder.glob(pattern))


def load_model(
    name_or_path: str | Path, model_class=AutoModelForSeq2SeqLM, **model_kwargs
) -> PreTrainedModel:
    """`model_class.from_pretrained(name_or_path, **model_kwargs)` in eval mode, after `check_model_location`;
    weights that are missing or do not read are named by their file, and so are weights that read but are not
    numbers (NaN or infinite: garbage bytes of the right size, which safetensors takes for floats). A folder
    without generation_config.json loads with a warning: it decodes with generate()'s defaults (greedy)."""
    from safetensors import SafetensorError

    check_model_location(name_or_path)
    folder = Path(name_or_path)
    try:
        model = model_class.from_pretrained(name_or_path, **model_kwargs)
    except (SafetensorError, OSError) as error:  # the model file's UnreadableWeightsError is an OSError
        if folder.is_dir() and not holds_any(folder, WEIGHTS_FILES):
            raise MissingPathError(
                f"{folder} has a config.json but no weights (model.safetensors): a save or download cut "
                f"short, or a copy that left them behind. {how_to_mend(folder, 'the model')}; nothing was "
                "loaded."
            ) from error
        found = unreadable_weights(folder) if folder.is_dir() else None
        if found is None:
            raise
        path, reason = found
        # "Could not read the weights of": the model file's own words, for those who look for them.
        raise CorruptFileError(
            f"Could not read the weights of {folder}: a .safetensors file there is truncated or corrupt "
            f"({path}: {reason}). {how_to_mend(folder, 'the model')}; nothing was loaded."
        ) from error
    not_finite = [
        name
        for name, tensor in model.state_dict().items()
        if tensor.is_floating_point() and tensor.device.type != "meta" and not torch.isfinite(tensor).all()
    ]
    if not_finite:
        where = _weights_named(folder) if folder.is_dir() else str(name_or_path)
        fix = how_to_mend(folder, "the model") if folder.is_dir() else "Download the model again"
        names = ", ".join(not_finite[:3]) + (", ..." if len(not_finite) > 3 else "")
        raise CorruptFileError(
            f"{where} is corrupt: weights that are not numbers (NaN or infinite) in {names} (bytes damaged "
            f"in a download or save, or a run that diverged). {fix}."
        )
    if folder.is_dir() and model.can_generate() and not (folder / "generation_config.json").is_file():
        logger.warning(
            "%s has no generation_config.json: its model decodes with generate()'s defaults (greedy search) "
            "unless told otherwise. Save the model again (`save_pretrained` writes one), or pass num_beams "
            "and length_penalty.",
            folder,
        )
    return model.eval()


def load_folder_tokenizer(name_or_path: str | Path) -> PreTrainedTokenizerBase:
    """`AutoTokenizer.from_pretrained`, naming a local folder that holds no tokenizer's vocabulary: for one,
    transformers answers that sentencepiece or tiktoken should be installed."""
    try:
        return AutoTokenizer.from_pretrained(name_or_path)
    except (OSError, ValueError) as error:
        folder = Path(name_or_path)
        if not folder.is_dir() or holds_any(folder, VOCABULARY_FILES):
            raise
        raise MissingPathError(
            f"{folder} holds no tokenizer (no tokenizer.json, nor another tokenizer's vocabulary). Save the "
            "tokenizer the model was trained with into it (`tokenizer.save_pretrained`), or download or save "
            "the folder again."
        ) from error


def load_model_folder(
    name_or_path: str | Path, model_class=AutoModelForSeq2SeqLM, **model_kwargs
) -> tuple[PreTrainedModel, PreTrainedTokenizerBase]:
    """The model (with its saved generation config) and tokenizer of a saved folder or Hub id, in eval mode;
    a missing folder, or a file of it cut short or unreadable, is named as such (`load_model`). `model_kwargs`
    go to `from_pretrained` (e.g. `trust_remote_code`)."""
    check_model_location(name_or_path)
    check_files_parse(name_or_path, TOKENIZER_FILES)
    tokenizer = load_folder_tokenizer(name_or_path)
    return load_model(name_or_path, model_class, **model_kwargs), tokenizer


def report_data(location: str | Path, key: str) -> dict:
    """The data section of the first evaluation report (`eval-*.json`) a folder carries that names `key`, or
    `{}`: what a folder saved before its config recorded the task or languages was evaluated on."""
    for report in sorted(Path(location).glob("eval-*.json")):
        try:
            data = json.loads(report.read_text(encoding="utf-8"))["data"]
        except (ValueError, KeyError, TypeError):
            continue
        if isinstance(data, dict) and data.get(key) is not None:
            return data
    return {}


def model_task(config, location: str | Path | None = None) -> str | None:
    """What a model was trained for: its config's `task`; for a folder saved before configs recorded it, the
    task of the evaluation reports it carries (`eval-*.json`); else None (unknown). `config` is the model's
    config (or the model), read before any weights are loaded."""
    task = getattr(getattr(config, "config", config), "task", None)
    if task is None and location is not None and Path(location).is_dir():
        task = report_data(location, "task").get("task")
    return task


def check_model_task(config, location: str | Path, task: str, fix: str = "--task {task}") -> None:
    """Refuse a model trained for another task than `task`, naming both and the fix (`fix`, with the
    model's task for `{task}`). `config` as for `model_task`."""
    trained_for = model_task(config, location)
    if trained_for is not None and trained_for != task:
        raise UsageError(
            f"{location} is a {trained_for} model, not a {task} one: give {fix.format(task=trained_for)}, or "
            f"a {task} model."
        )


def check_model_for_task(location: str | Path, task: str) -> None:
    """Before any data is read: the model at `location` exists (`check_model_location`) and was not trained
    for another task than `task` (`check_model_task`, reading its config only)."""
    check_model_location(location)
    check_model_task(AutoConfig.from_pretrained(location), location, task)


def save_model_folder(model: PreTrainedModel, tokenizer: PreTrainedTokenizerBase, folder: str | Path) -> Path:
    """Save weights (safetensors), config with `auto_map`, the modeling/configuration code, generation config,
    tokenizer, and the `seq2seq-generation` pipeline (`custom_pipelines` in config.json plus its code).

    The folder then loads in a process that never imported this package:
    `AutoModelForSeq2SeqLM.from_pretrained(folder, trust_remote_code=True)`,
    `AutoTokenizer.from_pretrained(folder)`, and `pipeline(model=folder, trust_remote_code=True)`.
    """
    if not isinstance(model, PreTrainedModel):
        raise InputTypeError(
            f"model is {type(model).__name__}, not a transformers model: pass the one to save."
        )
    if not isinstance(tokenizer, PreTrainedTokenizerBase):
        raise InputTypeError(
            f"tokenizer is {type(tokenizer).__name__}, not a tokenizer: pass the one the model was trained "
            "with, which a folder needs to load in pipeline()."
        )
    if isinstance(folder, str) and not folder.strip():
        # Path("") is the current directory: the folder's files would land among whatever is there.
        raise UsageError(f"folder={folder!r} names no folder: give the folder to save the model into.")
    folder = Path(folder)
    # Saving through the pipeline records `custom_pipelines` and copies the pipeline's code with the model's.
    pipe = pipeline(TASK_NAME, model=model, tokenizer=tokenizer, device=model.device)
    pipe.save_pretrained(folder)
    return folder


__all__ = ["check_model_location", "check_tokenizer_location", "load_model_folder", "save_model_folder"]
