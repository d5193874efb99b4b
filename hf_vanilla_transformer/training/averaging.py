"""Averaging the weights of the last N checkpoints of a run (§6.1). Written here because no well-kept library
averages Trainer checkpoints."""

from __future__ import annotations

import json
import logging
from collections.abc import Sequence
from pathlib import Path

import torch
from safetensors import SafetensorError
from safetensors.torch import load_file

from ..errors import CorruptFileError, MissingPathError, UsageError
from .checkpoints import complete_checkpoints, not_whole

logger = logging.getLogger(__name__)


def last_checkpoints(run_dir: str | Path, n: int) -> list[Path]:
    """The `n` most recent whole `checkpoint-<step>` folders of a Trainer run, oldest first; one whose save
    did not finish is skipped, and named (`checkpoints.complete_checkpoints`)."""
    run_dir = Path(run_dir)
    found = complete_checkpoints(run_dir, unrecorded=True)
    if len(found) < n:
        raise UsageError(
            f"Asked to average {n} checkpoints but {run_dir} has {len(found)} whole ones: "
            f"{[p.name for p in found] or 'none'}{not_whole(run_dir)}. Train with a larger "
            "`save_total_limit` or average fewer."
        )
    return found[-n:]


def average_checkpoints(checkpoints: Sequence[str | Path], output_dir: str | Path) -> Path:
    """Average the weights of several checkpoints of one model (§6.1: "averaging the last 5 checkpoints")
    and write a normal `save_pretrained` folder (config, generation config and tokenizer of the last one)."""
    from transformers import AutoModelForSeq2SeqLM, AutoTokenizer

    from ..saving import check_files_parse, save_model_folder

    if not checkpoints:
        raise UsageError("No checkpoints to average.")
    total: dict[str, torch.Tensor] = {}
    for checkpoint in checkpoints:
        weights = Path(checkpoint) / "model.safetensors"
        if not weights.exists():
            raise MissingPathError(f"{weights} not found: each checkpoint must hold safetensors weights.")
        try:
            state = load_file(weights)
        except SafetensorError as error:  # bytes of the recorded size that are no weights
            raise CorruptFileError(
                f"{weights} is truncated or corrupt ({error}): average other checkpoints (--last)."
            ) from error
        if total and state.keys() != total.keys():
            raise UsageError(
                f"{checkpoint} holds different weights from {checkpoints[0]}: not the same model."
            )
        for name, tensor in state.items():
            total[name] = total.get(name, 0) + tensor.double()
    last = Path(checkpoints[-1])
    check_files_parse(last)  # a file cut short is named: from_pretrained would drop or misreport it
    model = AutoModelForSeq2SeqLM.from_pretrained(last)
    averaged = {
        name: (tensor / len(checkpoints)).to(model.state_dict()[name].dtype) for name, tensor in total.items()
    }
    missing, unexpected = model.load_state_dict(averaged, strict=False)
    if unexpected or any(not _is_tied_or_buffer(model, key) for key in missing):
        raise ValueError(
            f"Checkpoint weights do not fit the model: missing {missing}, unexpected {unexpected}."
        )
    model.tie_weights()
    output_dir = Path(output_dir)
    try:
        tokenizer = AutoTokenizer.from_pretrained(last)
    except (OSError, ValueError):
        logger.warning("No tokenizer in %s; the averaged model folder has none.", last)
        model.save_pretrained(output_dir)
    else:
        save_model_folder(model, tokenizer, output_dir)
    (output_dir / "averaged_from.json").write_text(json.dumps([str(c) for c in checkpoints], indent=2))
    return output_dir


def _is_tied_or_buffer(model, key: str) -> bool:
    """Keys absent from a safetensors file by design: tied copies and non-persistent buffers."""
    return key in model.get_expanded_tied_weights_keys(all_submodels=True) or "embed_positions" in key
