"""Full weights of a run sharded by FSDP or DeepSpeed: `gathered_model` (the trained model whole, on the main
process, for the final folder), `FullWeightsCallback` (every sharded checkpoint also loads with
`from_pretrained`), and what the tied embedding matrix needs on the way (`without_tied_copies`,
`missing_beyond_tied_copies`): a gathered state dict holds each tied name as a tensor of its own."""

from __future__ import annotations

import copy
from pathlib import Path

import torch
from accelerate import Accelerator
from accelerate.utils import DistributedType
from transformers import PreTrainedModel, TrainerCallback
from transformers.trainer_utils import PREFIX_CHECKPOINT_DIR


def missing_beyond_tied_copies(model: torch.nn.Module, missing: list[str]) -> list[str]:
    """The names of `missing` that are not tied copies of a Parameter loaded under another of its names."""
    names: dict[int, list[str]] = {}
    for name, parameter in model.named_parameters(remove_duplicate=False):
        names.setdefault(id(parameter), []).append(name)
    missing_set = set(missing)
    loaded_copies = {
        name for group in names.values() if len(group) > 1 and not set(group) <= missing_set for name in group
    }
    return [name for name in missing if name not in loaded_copies]


def without_tied_copies(state_dict: dict, model: PreTrainedModel) -> dict:
    """`state_dict` without the names `model` ties to another (`all_tied_weights_keys`, target: source), so
    that a gathered state dict is saved with one matrix per tie, as `save_pretrained` saves a plain model."""
    tied = getattr(model, "all_tied_weights_keys", None) or {}
    return {
        name: value for name, value in state_dict.items() if not (name in tied and tied[name] in state_dict)
    }


def gathered_model(accelerator: Accelerator, model: torch.nn.Module) -> PreTrainedModel | None:
    """The trained model with all of its weights on the main process, `None` on the others.

    Under FSDP or DeepSpeed every process holds a shard: Accelerate gathers the full weights (a collective
    that every process must join) and they are loaded into a plain copy of the model, tied as a fresh model
    is, with the trained model's generation config. Otherwise it is the unwrapped model itself."""
    unwrapped = accelerator.unwrap_model(model, keep_torch_compile=False)
    if accelerator.distributed_type not in (DistributedType.FSDP, DistributedType.DEEPSPEED):
        return unwrapped if accelerator.is_main_process else None
    state_dict = accelerator.get_state_dict(model)
    if not accelerator.is_main_process:
        return None
    return plain_copy(unwrapped, state_dict)


def plain_copy(model: PreTrainedModel, state_dict: dict) -> PreTrainedModel:
    """A plain copy of `model` (built as a fresh model is, whatever engine holds `model`) holding the weights
    of `state_dict`, tied, with `model`'s generation config."""
    with torch.random.fork_rng(devices=[]):  # its random start, overwritten, draws nothing from training's
        plain = _model_class(model)(model.config)
    missing, unexpected = plain.load_state_dict(without_tied_copies(state_dict, plain), strict=False)
    if unexpected or set(missing) - set(plain.all_tied_weights_keys):
        raise RuntimeError(f"Weights do not fit the model: missing {missing}, unexpected {unexpected}")
    plain.tie_weights()
    plain.generation_config = copy.deepcopy(model.generation_config)
    return plain


def _model_class(model: PreTrainedModel) -> type[PreTrainedModel]:
    """The model's own class: FSDP2 makes a wrapped model an instance of a class derived from it."""
    from torch.distributed.fsdp import FSDPModule

    return next(cls for cls in type(model).__mro__ if not issubclass(cls, FSDPModule))


def sharded_checkpoints(accelerator: Accelerator) -> bool:
    """Whether the Trainer writes checkpoints as FSDP shards, with no model file beside them."""
    if accelerator.distributed_type != DistributedType.FSDP:
        return False
    return "SHARDED_STATE_DICT" in str(accelerator.state.fsdp_plugin.state_dict_type)


class FullWeightsCallback(TrainerCallback):
    """Under FSDP with sharded checkpoints (`fsdp.yaml`) the Trainer saves each checkpoint as shards, which it
    resumes from, and no model file. This adds the gathered weights, config and tokenizer
    (`save_model_folder`), so that every checkpoint also loads with `from_pretrained` and can be averaged
    (§6.1). Sharded rather than full checkpoints, because torch's loader of a full FSDP2 state dict keys the
    matrix that the three embeddings share by one of its names only, and refuses the others on resume."""

    def __init__(self, trainer):
        self.trainer = trainer

    def on_save(self, args, state, control, **kwargs):
        from ..saving import save_model_folder

        accelerator = self.trainer.accelerator
        if not sharded_checkpoints(accelerator):
            return
        model = gathered_model(accelerator, self.trainer.model_wrapped)  # every process takes part
        if model is not None:
            checkpoint = Path(args.output_dir) / f"{PREFIX_CHECKPOINT_DIR}-{state.global_step}"
            save_model_folder(model, self.trainer.processing_class, checkpoint)
