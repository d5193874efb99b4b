"""Assemble a Hub-ready folder for a trained model and upload it with `huggingface_hub`."""

from __future__ import annotations

import re
import shutil
from pathlib import Path

from ..errors import ExistingPathError, MissingPathError, UsageError
from ..outputs import check_not_a_file, staged
from ..readers import read_text
from ..saving import check_model_location, load_model_folder, save_model_folder

# A card's usage code names its repository "<owner>/<name>" until it is pushed: the owner is whoever
# publishes.
CARD_REPO_PLACEHOLDER = re.compile(r"<owner>/[\w.-]+")


def build_hub_folder(
    model_dir: str | Path, output_dir: str | Path, card: str | Path | None = None, overwrite: bool = False
) -> Path:
    """Assemble a Hub repository's files in `output_dir`: safetensors weights, config with `auto_map`, the
    modeling/configuration/pipeline code (so `trust_remote_code=True` works for Hub users), tokenizer and
    generation config, all saved anew from `model_dir`; the evaluation reports of `model_dir`
    (`eval-*.json`, which the card quotes); and the model card as README.md, from `card` or else the README.md
    already in `output_dir` (how `model_cards/<name>/` is refreshed). Other files in `output_dir` stay. A
    model already in `output_dir` (a shipped folder, say) is replaced only with `overwrite`, its reports
    with it: they describe the model replaced."""
    model_dir, output_dir = Path(model_dir), Path(output_dir)
    if output_dir.resolve() == model_dir.resolve():
        raise UsageError(f"{model_dir} is both the model and the folder to assemble: give another --folder.")
    check_not_a_file(output_dir, "--folder")
    check_model_location(model_dir)
    held = sorted(
        path.name
        for pattern in ("config.json", "*.safetensors", "eval-*.json")
        for path in output_dir.glob(pattern)
    )
    if held and not overwrite:
        raise ExistingPathError(
            f"{output_dir} holds a model already ({', '.join(held[:4])}{', ...' if len(held) > 4 else ''}): "
            f"pass --overwrite to replace it with {model_dir}, or another --folder."
        )
    card = Path(card) if card is not None else output_dir / "README.md"
    if not card.exists():
        raise MissingPathError(f"No model card at {card}; write one under model_cards/<name>/README.md.")
    card_text = read_text(card, "model card")  # a folder, text that is not UTF-8, ... named
    if not card_text.strip():
        raise UsageError(
            f"The model card {card} is empty: write one (model_cards/<name>/README.md are examples)."
        )
    from huggingface_hub import ModelCard

    try:
        ModelCard(card_text)
    except Exception as error:  # yaml's ScannerError/ParserError, or huggingface_hub's checks of the fields
        first_line = str(error).strip().splitlines()[0] if str(error).strip() else type(error).__name__
        raise UsageError(
            f"The metadata of the model card {card} (the YAML block between the --- lines at its top) does "
            f"not parse: {first_line}. Fix the YAML; the Hub would reject the card too."
        ) from error
    model, tokenizer = load_model_folder(model_dir)
    with staged(output_dir, "--folder") as staging:
        if output_dir.is_dir():  # what the folder holds besides the model (a card's pictures) stays
            shutil.copytree(output_dir, staging, symlinks=True, dirs_exist_ok=True)
        for report in staging.glob("eval-*.json"):
            report.unlink()
        save_model_folder(model, tokenizer, staging)
        for report in sorted(model_dir.glob("eval-*.json")):
            shutil.copyfile(report, staging / report.name)
        (staging / "README.md").write_text(card_text, encoding="utf-8")
    return output_dir


def upload_plan(folder: str | Path) -> list[tuple[str, int]]:
    """The files a push of `folder` uploads, with their sizes in bytes: all of them, as they are (hidden files
    and folders, such as a `.cache`, excepted)."""
    folder = Path(folder)
    if not (folder / "config.json").is_file() or not (folder / "README.md").is_file():
        raise MissingPathError(
            f"{folder} is not a Hub-ready model folder (it needs config.json and README.md); assemble one "
            "with `scripts/push_to_hub.py --model <trained model folder> --folder <folder> --dry_run`."
        )
    return [
        (path.relative_to(folder).as_posix(), path.stat().st_size)
        for path in sorted(folder.rglob("*"))
        if path.is_file() and not any(part.startswith(".") for part in path.relative_to(folder).parts)
    ]


def push_folder(folder: str | Path, repo_id: str, private: bool = False, token: str | None = None) -> str:
    """Create the repository (if needed) and upload the folder in one commit, every file as it is except the
    card's `<owner>/<name>` placeholders, which become `repo_id` so that its usage code runs as written. The
    token comes from `hf auth login` or `HF_TOKEN` unless given. Returns the repository URL."""
    from huggingface_hub import CommitOperationAdd, HfApi

    folder = Path(folder)
    operations = []
    for name, _ in upload_plan(folder):
        content: str | bytes = str(folder / name)
        if name == "README.md":
            content = CARD_REPO_PLACEHOLDER.sub(repo_id, (folder / name).read_text(encoding="utf-8")).encode()
        operations.append(CommitOperationAdd(path_in_repo=name, path_or_fileobj=content))
    api = HfApi(token=token)
    url = api.create_repo(repo_id, private=private, exist_ok=True)
    api.create_commit(repo_id, operations=operations, commit_message="Upload hf-vanilla-transformer model")
    return str(url)
