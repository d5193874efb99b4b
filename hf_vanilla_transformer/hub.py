"""Assemble a Hub-ready folder for a trained model and upload it with `huggingface_hub`."""

from __future__ import annotations

import re
import shutil
from pathlib import Path

from transformers import AutoModelForSeq2SeqLM, AutoTokenizer

from .saving import save_model_folder


def is_local_path(name_or_path: str | Path) -> bool:
    """Whether a name can only mean a local path, not a Hub repository id (`name` or `owner/name`): it
    exists as a file, starts with `.`, `/` or `~`, or has more than one `/`."""
    name = str(name_or_path)
    return Path(name).exists() or name.startswith((".", "/", "~")) or name.count("/") > 1


def check_model_location(name_or_path: str | Path) -> None:
    """Raise `FileNotFoundError` for a model location that is neither a saved model folder nor a possible Hub
    id, before transformers answers with an error about repository names."""
    path = Path(name_or_path)
    if path.is_dir():
        if not (path / "config.json").is_file():
            raise FileNotFoundError(
                f"{path} is a folder without config.json, so not a saved model. Pass a folder written by "
                "`save_pretrained` or `scripts/train.py` (e.g. outputs/run/final) or a Hub model id."
            )
        return
    if is_local_path(name_or_path):
        raise FileNotFoundError(
            f"No model folder at {name_or_path}. Pass a folder written by `save_pretrained` or "
            "`scripts/train.py` (e.g. outputs/run/final) or a Hub model id such as 'user/model'."
        )


# The shipped cards' usage snippets name the repository as "<owner>/<name>": the owner is whoever publishes.
CARD_REPO_PLACEHOLDER = re.compile(r"<owner>/[\w.-]+")


def build_hub_folder(
    model_dir: str | Path, card: str | Path | None, output_dir: str | Path, repo_id: str | None = None
) -> Path:
    """Write everything a Hub repository needs into `output_dir`: safetensors weights, config with `auto_map`,
    the modeling/configuration/pipeline code (so `trust_remote_code=True` works for Hub users), tokenizer,
    generation config, and the model card as README.md, with `repo_id` (when given) in place of the card's
    `<owner>/<name>` placeholders so that its usage snippets run as written."""
    model_dir, output_dir = Path(model_dir), Path(output_dir)
    model = AutoModelForSeq2SeqLM.from_pretrained(model_dir)
    tokenizer = AutoTokenizer.from_pretrained(model_dir)
    if output_dir.exists():
        shutil.rmtree(output_dir)
    save_model_folder(model, tokenizer, output_dir)
    if card is not None:
        card = Path(card)
        if not card.is_file():
            raise FileNotFoundError(f"No model card at {card}; write one under model_cards/<name>/README.md.")
        from huggingface_hub import ModelCard

        ModelCard.load(card)  # refuses a card whose YAML metadata does not parse
        text = card.read_text(encoding="utf-8")
        if repo_id is not None:
            text = CARD_REPO_PLACEHOLDER.sub(repo_id, text)
        (output_dir / "README.md").write_text(text, encoding="utf-8")
    return output_dir


def push_folder(folder: str | Path, repo_id: str, private: bool = False, token: str | None = None) -> str:
    """Create the repository (if needed) and upload the folder; the token comes from `hf auth login` or
    `HF_TOKEN` unless given. Returns the repository URL."""
    from huggingface_hub import HfApi

    api = HfApi(token=token)
    url = api.create_repo(repo_id, private=private, exist_ok=True)
    api.upload_folder(
        folder_path=str(folder), repo_id=repo_id, commit_message="Upload hf-vanilla-transformer model"
    )
    return str(url)
