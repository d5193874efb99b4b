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
from ..outputs import staged
from .checkpoints import complete_checkpoints, is_numbered, not_whole, numbered_folders

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


def check_output_apart(
    output_dir: str | Path, checkpoints: Sequence[str | Path], option: str = "--output_dir"
) -> None:
    """Refuse an `output_dir` that is one of `checkpoints`, holds one or lies inside one (symlinks resolved),
    `--overwrite` or not: writing there would replace or change a checkpoint, whole or not (an unfinished one
    may be all that is left of a save the user means to look at). A folder beside them is fine."""
    target = Path(output_dir).resolve()
    for checkpoint in map(Path, checkpoints):
        place = checkpoint.resolve()
        if target == place:
            problem = f"is the checkpoint {checkpoint}: writing there would replace it"
        elif place in target.parents:
            problem = f"lies inside the checkpoint {checkpoint}: writing there would change it"
        elif target in place.parents:
            problem = f"holds the checkpoint {checkpoint}: writing there would replace it"
        else:
            continue
        instead = checkpoint.parent / "averaged"
        raise UsageError(
            f"{option} {output_dir} {problem}; give a folder of its own, e.g. {option} {instead}."
        )


def check_output_beside_checkpoints(
    output_dir: str | Path, run_dir: str | Path, option: str = "--output_dir"
) -> None:
    """`check_output_apart` for every `checkpoint-<step>` folder of `run_dir`, whole or not, averaged or
    not, and for the name of one that is not there yet: the run would take an output there for a save that
    did not finish, and delete it when resumed (`checkpoints.remove_unfinished`). For a script to call
    before any work."""
    check_output_apart(output_dir, numbered_folders(run_dir), option)
    target, run = Path(output_dir).resolve(), Path(run_dir).resolve()
    for folder in (target, *target.parents):
        if folder.parent == run and is_numbered(folder, "checkpoint"):
            raise UsageError(
                f"{option} {output_dir} is named as a checkpoint of the run ({folder.name}): the run would "
                "take it for a save that did not finish, and delete it when resumed; give a folder of its "
                f"own, e.g. {option} {Path(run_dir) / 'averaged'}."
            )


def average_checkpoints(checkpoints: Sequence[str | Path], output_dir: str | Path) -> Path:
    """Average the weights of several checkpoints of one model (§6.1: "averaging the last 5 checkpoints")
    and write a normal `save_pretrained` folder (config, generation config and tokenizer of the last one).
    Before anything is written, an output that is one of the checkpoints (`check_output_apart`) and
    checkpoints of different models (other weight names or shapes) are refused. Weights saved in different
    floating-point dtypes are averaged in float64 like any others and written in the dtype the last
    checkpoint loads in; that is said."""
    from transformers import AutoModelForSeq2SeqLM, AutoTokenizer

    from ..saving import check_files_parse, save_model_folder

    if not checkpoints:
        raise UsageError("No checkpoints to average.")
    check_output_apart(output_dir, checkpoints)
    total: dict[str, torch.Tensor] = {}
    first: dict[str, torch.Tensor] = {}  # the first checkpoint's weights on the meta device: shapes, dtypes
    other_dtype = None  # (checkpoint, name, dtype) of the first weight in another dtype than in `first`
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
        first = first or {name: tensor.to("meta") for name, tensor in state.items()}
        _check_shapes(state, first, (checkpoints[0], checkpoint))
        for name, tensor in state.items():
            if other_dtype is None and tensor.dtype != first[name].dtype:
                other_dtype = Path(checkpoint), name, tensor.dtype
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
    if other_dtype is not None:
        checkpoint, name, dtype = other_dtype
        logger.warning(
            "%s holds %s in %s, %s in %s: the average, taken in float64, is written in %s, as %s loads.",
            Path(checkpoints[0]).name,
            name,
            str(first[name].dtype).removeprefix("torch."),
            checkpoint.name,
            str(dtype).removeprefix("torch."),
            str(model.state_dict()[name].dtype).removeprefix("torch."),
            last.name,
        )
    try:
        tokenizer = AutoTokenizer.from_pretrained(last)
    except (OSError, ValueError):
        logger.warning("No tokenizer in %s; the averaged model folder has none.", last)
        tokenizer = None
    with staged(output_dir) as staging:
        if tokenizer is None:
            model.save_pretrained(staging)
        else:
            save_model_folder(model, tokenizer, staging)
        (staging / "averaged_from.json").write_text(json.dumps([str(c) for c in checkpoints], indent=2))
    return Path(output_dir)


def _check_shapes(state: dict[str, torch.Tensor], first: dict[str, torch.Tensor], names: tuple) -> None:
    """Refuse a checkpoint (`names[1]`) holding a weight of another shape than in the first (`names[0]`,
    whose weights are `first`): a model of another size saved into the same run folder, whose sum would end
    in a `RuntimeError`."""
    for name, tensor in state.items():
        if tensor.shape != first[name].shape:
            earlier, later = map(Path, names)
            raise UsageError(
                f"{earlier} and {later} are models of different sizes: {name} is "
                f"{list(first[name].shape)} in {earlier.name} and {list(tensor.shape)} in {later.name}. "
                "Average the checkpoints of one model: fewer of them (--last), all saved since its size last "
                "changed."
            )


def _is_tied_or_buffer(model, key: str) -> bool:
    """Keys absent from a safetensors file by design: tied copies and non-persistent buffers."""
    return key in model.get_expanded_tied_weights_keys(all_submodels=True) or "embed_positions" in key
