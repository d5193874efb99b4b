"""Bringing a saved model folder, or a Hub repository, up to date with the installed package
(`update_model_code`, `update_hub_model_code`): its code files replaced with the package's, its config files
written as this version writes them (`folder_repairs`). A folder's task says whether its texts are sentences,
and so whether its config should record their languages: this is the layer that may ask the task registry."""

import filecmp
import json
import shutil
import tempfile
from pathlib import Path

from ..configuration_vanilla_transformer import VanillaTransformerConfig, check_languages
from ..errors import CorruptFileError, MissingPathError, UsageError
from ..saving import CODE_FILES, MODEL_FILES, check_files_parse, how_to_mend, report_data, unreadable_weights
from ..tasks.registry import task_or_plain


def _splits_sentences(task: str) -> bool:
    return task_or_plain(task).splits_into_sentences


def check_model_config(config: dict, where: str) -> None:
    """Refuse a config.json that is not this package's model, before any of its files is replaced."""
    if config.get("model_type") != VanillaTransformerConfig.model_type:
        raise UsageError(
            f"{where} holds a {config.get('model_type')!r} model, not a "
            f"{VanillaTransformerConfig.model_type!r} model saved by hf-vanilla-transformer: its code files "
            "are not this package's to replace."
        )


def outdated_code_files(folder: str | Path) -> list[str]:
    """The code files of a saved folder that differ from (or are missing beside) this package's."""
    folder = Path(folder)
    return [
        name
        for name, source in CODE_FILES.items()
        if not (folder / name).is_file() or not filecmp.cmp(source, folder / name, shallow=False)
    ]


GENERATION_CONFIG = "generation_config.json"


def slim_generation_config(text: str, model_config: dict) -> str | None:
    """A saved generation_config.json without the values `generate()` uses anyway for a field left unset, as
    transformers v5 writes one (earlier releases spelled out every default); `None` if it holds none of
    them. What the folder's decoding differs by (beam 4, length penalty 0.6, its `max_length`) stays, and so
    does what v5 copies from the model's config (`model_config`, e.g. `use_cache`)."""
    from transformers import GenerationConfig

    # transformers' own table of those values; it has no public name for it.
    defaults = GenerationConfig._get_default_generation_params()
    saved = json.loads(text)
    slim = {
        key: value
        for key, value in saved.items()
        if not (key in defaults and defaults[key] == value and key not in model_config)
    }
    return None if slim == saved else json.dumps(slim, indent=2, sort_keys=True) + "\n"


def folder_repairs(folder: Path, where: str) -> dict[str, Path | str]:
    """What `update_model_code` writes into the saved folder `folder` (`where` names it in errors), by file
    name: each outdated code file (the package's, as a path); config.json with the bare model in `auto_map`
    if it lacks it (as `save_pretrained` writes it now) and, for a translation folder, the languages its
    evaluation reports name if it records none (`langs`); generation_config.json as v5 writes one
    (`slim_generation_config`). Other files, weights included, are never touched. The lengths a model was
    trained with (`max_source_length`, `max_target_length`) are not added to a folder that lacks them:
    nothing in it says what they were (its reports name the data, not the lengths), and without them it
    decodes as it did, its sources cut at its positions."""
    config = json.loads((folder / "config.json").read_text(encoding="utf-8"))
    check_model_config(config, where)
    repairs: dict[str, Path | str] = {name: CODE_FILES[name] for name in outdated_code_files(folder)}
    repaired = dict(config)
    auto_map = config.get("auto_map") or {}
    if "AutoModelForSeq2SeqLM" in auto_map and "AutoModel" not in auto_map:
        repaired["auto_map"] = {
            **auto_map,
            "AutoModel": "modeling_vanilla_transformer.VanillaTransformerModel",
        }
    task = config.get("task") or report_data(folder, "task").get("task")
    if repaired.get("langs") is None and task is not None and _splits_sentences(task):  # a task of texts
        data = report_data(folder, "source_lang")  # what the folder's config did not record yet
        languages = [data.get("source_lang"), data.get("target_lang")]
        try:
            check_languages(languages)
            repaired["langs"] = languages
        except ValueError:  # no report names two languages: nothing to record
            pass
    if repaired != config:
        repairs["config.json"] = json.dumps(repaired, indent=2, sort_keys=True) + "\n"
    generation_file = folder / GENERATION_CONFIG
    if generation_file.is_file():
        slim = slim_generation_config(generation_file.read_text(encoding="utf-8"), config)
        if slim is not None:
            repairs[GENERATION_CONFIG] = slim
    return repairs


def update_model_code(folder: str | Path, dry_run: bool = False) -> list[str]:
    """Bring a saved model folder up to date (`folder_repairs`): its code files replaced with the installed
    package's, so that a folder saved by an earlier version loads and decodes correctly under the
    transformers releases this version supports, and its config files written as this version writes them.

    Weights and tokenizer are left as they are. Returns the names of the files replaced (or that would be,
    with `dry_run`); an up-to-date folder returns `[]`.
    """
    folder = Path(folder)
    if not folder.is_dir():
        raise MissingPathError(f"No model folder at {folder}. Pass a folder written by `save_pretrained`.")
    if not (folder / "config.json").is_file():
        raise MissingPathError(f"{folder} has no config.json, so it is not a saved model folder.")
    check_files_parse(folder, MODEL_FILES)
    # The weights stay as they are, but a folder whose weights do not read would not load once repaired.
    if (found := unreadable_weights(folder)) is not None:
        path, reason = found
        raise CorruptFileError(
            f"{path} is truncated or corrupt: its weights do not read ({reason}). "
            f"{how_to_mend(folder, 'the model')}; nothing was changed."
        )
    repairs = folder_repairs(folder, str(folder))
    if not dry_run:
        for name, content in repairs.items():
            if isinstance(content, Path):
                shutil.copyfile(content, folder / name)
            else:
                (folder / name).write_text(content, encoding="utf-8")
    return list(repairs)


def update_hub_model_code(repo_id: str, token: str | None = None, dry_run: bool = False) -> list[str]:
    """`update_model_code` for a Hub repository: one commit of `folder_repairs` (nothing else is uploaded).
    Returns the names of the files the commit replaces."""
    from huggingface_hub import CommitOperationAdd, HfApi, snapshot_download

    with tempfile.TemporaryDirectory() as download:
        snapshot_download(
            repo_id,
            local_dir=download,
            allow_patterns=["config.json", GENERATION_CONFIG, *CODE_FILES],
            token=token,
        )
        repairs = folder_repairs(Path(download), repo_id)
        operations = [
            CommitOperationAdd(name, str(content) if isinstance(content, Path) else content.encode("utf-8"))
            for name, content in repairs.items()
        ]
    if operations and not dry_run:
        HfApi(token=token).create_commit(
            repo_id,
            operations=operations,
            commit_message="Update the model code to the current hf-vanilla-transformer",
        )
    return list(repairs)
