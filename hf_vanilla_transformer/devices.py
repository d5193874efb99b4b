"""What a device computes in: the device a command names (`check_device`), the mixed precision a training
run takes when it is not told (`default_mixed_precision`), whether TF32 can run its float32 matrix products
(`tf32_available`), and the dtype a model decodes in (`check_dtype`, `decoding_model`).

The GPU's properties are read without a CUDA context: a context made on GPU 0 by every process of a launch
would take memory from the first process's GPU.
"""

from __future__ import annotations

import torch

from .errors import UsageError

# `--dtype` of the decoding commands; "auto": the weights' own, as saved.
DTYPES = {"auto": None, "float32": torch.float32, "bfloat16": torch.bfloat16, "float16": torch.float16}


def check_device(name: str) -> torch.device:
    """The device `--device` names, refused in one line if it is none or this machine lacks it."""
    try:
        device = torch.device(name)
    except RuntimeError as error:
        raise UsageError(f"--device {name!r} is not a device: give cpu, cuda or cuda:N.") from error
    if device.type == "cuda" and not torch.cuda.is_available():
        raise UsageError(f"--device {name}: this machine has no CUDA GPU; pass --device cpu.")
    return device


def _capability() -> int:
    """The major compute capability of this machine's first CUDA GPU (its GPUs are alike)."""
    return torch.cuda.get_device_capability(0)[0]


def has_bfloat16() -> bool:
    """Whether this machine's GPU computes in bfloat16: NVIDIA's from Ampere on, AMD's that say so."""
    if torch.version.hip:
        return torch.cuda.is_bf16_supported(including_emulation=False)
    return _capability() >= 8


def default_mixed_precision(use_cpu: bool = False) -> str:
    """The mixed precision a training run takes when neither its options nor its launch say (accelerate's
    names): bf16 on a GPU that computes in bfloat16, fp16 with loss scaling on an older CUDA GPU, and none
    (float32) on a CPU or any other device."""
    if use_cpu or not torch.cuda.is_available():
        return "no"
    return "bf16" if has_bfloat16() else "fp16"


def tf32_available(use_cpu: bool = False) -> bool:
    """Whether float32 matrix products can run in TF32 here (an NVIDIA GPU from Ampere on)."""
    return not use_cpu and torch.cuda.is_available() and not torch.version.hip and _capability() >= 8


def check_dtype(name: str, device: torch.device) -> torch.dtype | None:
    """The dtype `--dtype` names (None for auto: as saved), refused in one line if it is none, or bfloat16
    on a GPU without it."""
    if name not in DTYPES:
        raise UsageError(f"--dtype {name!r} is none: give {', '.join(DTYPES)}.")
    if name == "bfloat16" and device.type == "cuda" and not has_bfloat16():
        raise UsageError("--dtype bfloat16: this GPU does not compute in bfloat16; give float16 or float32.")
    return DTYPES[name]


def decoding_model(model: torch.nn.Module, device: torch.device, dtype: torch.dtype | None):
    """`model` on `device` in `dtype` (None: as it is). TF32 is left as torch has it (off for matrix
    products): a float32 decoding gives what float32 gives on any device."""
    return model.to(device=device, dtype=dtype)


__all__ = ["check_device", "check_dtype", "decoding_model", "default_mixed_precision"]
