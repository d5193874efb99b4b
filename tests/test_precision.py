"""The precision a run takes when it is not told: the device's (`default_mixed_precision`: bf16 on a GPU with
bfloat16, fp16 with loss scaling on an older CUDA GPU, float32 on a CPU), or the launch's; TF32 where the GPU
has it; and the resume contract records what ran. The GPUs are stubbed: this machine has none."""

import os

import pytest
import torch

from hf_vanilla_transformer.cli import make_parser, parse_recipe_and_args
from hf_vanilla_transformer.devices import default_mixed_precision, tf32_available
from hf_vanilla_transformer.errors import UsageError
from hf_vanilla_transformer.training import (
    TRAINING_ARGUMENTS,
    precision_flags,
)
from hf_vanilla_transformer.training.setup import trainer_resume_options

from .test_train_scripts import RECIPE


@pytest.fixture
def gpu(monkeypatch):
    """A CUDA GPU of the compute capability the test sets (`gpu(8)`: Ampere), as torch would report it."""
    monkeypatch.delenv("ACCELERATE_MIXED_PRECISION", raising=False)

    def install(major: int):
        monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
        monkeypatch.setattr(torch.cuda, "get_device_capability", lambda device=None: (major, 0))
        monkeypatch.setattr(torch.version, "hip", None)

    return install


@pytest.mark.parametrize(("major", "chosen"), [(7, "fp16"), (8, "bf16"), (9, "bf16")])
def test_a_gpu_takes_its_fastest_precision_and_tf32_from_ampere_on(gpu, major, chosen):
    gpu(major)
    assert default_mixed_precision() == chosen
    assert precision_flags(None, None, use_cpu=False) == (chosen == "bf16", chosen == "fp16")
    assert tf32_available() == (major >= 8)
    # --use_cpu on a machine with a GPU trains in float32, as on any CPU.
    assert default_mixed_precision(use_cpu=True) == "no" and not tf32_available(use_cpu=True)


def test_options_and_the_launch_come_before_the_device(gpu, monkeypatch):
    gpu(8)
    assert precision_flags(None, True, use_cpu=False) == (False, True)
    assert precision_flags(None, False, use_cpu=False) == (True, False)  # fp16 off: the device's bf16 stays
    with pytest.raises(UsageError, match="--bf16 and --fp16 both true: give one of them"):
        precision_flags(True, True, use_cpu=False)
    monkeypatch.setenv("ACCELERATE_MIXED_PRECISION", "fp16")  # as accelerate launch passes its config's
    assert precision_flags(None, None, use_cpu=False) == (False, True)
    assert precision_flags(False, None, use_cpu=False) == (False, True)
    # The launch's turned off: float32, and the launch's is set aside, which the Trainer would otherwise take.
    assert precision_flags(None, False, use_cpu=False) == (False, False)
    assert torch.cuda.is_available() and os.environ["ACCELERATE_MIXED_PRECISION"] == "no"


def test_a_cpu_trains_in_float32(monkeypatch):
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    assert default_mixed_precision() == "no" and not tf32_available()


def _recorded(*options) -> dict:
    """What the resume contract records of a run of the Multi30k recipe with `options`, on this CPU."""
    args = [str(RECIPE), "--tokenizer", "unused", *options]
    _, data_args, recipe_args, training_args = parse_recipe_and_args(
        make_parser(*TRAINING_ARGUMENTS, args=args), args
    )
    checked, _ = trainer_resume_options(data_args, recipe_args, training_args)
    return {"bf16": checked["bf16"], "fp16": checked["fp16"], "ran": training_args.mixed_precision}


def test_the_contract_records_the_precision_that_ran(monkeypatch):
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    monkeypatch.delenv("ACCELERATE_MIXED_PRECISION", raising=False)
    assert _recorded() == {"bf16": False, "fp16": False, "ran": "no"}
    # A launch whose config asks for bf16, and a recipe that does not say: bf16 runs, and is recorded.
    monkeypatch.setenv("ACCELERATE_MIXED_PRECISION", "bf16")
    assert _recorded("--use_cpu", "true") == {"bf16": True, "fp16": False, "ran": "bf16"}
    assert _recorded("--use_cpu", "true", "--bf16", "false") == {"bf16": False, "fp16": False, "ran": "no"}


def test_a_launch_asking_for_bf16_on_a_machine_without_a_gpu_is_named(monkeypatch):
    monkeypatch.setenv("ACCELERATE_MIXED_PRECISION", "bf16")
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    with pytest.raises(UsageError, match="asks for bf16 mixed precision .* no GPU: pass --bf16 false --fp16"):
        precision_flags(None, None, use_cpu=False)
    assert precision_flags(False, False, use_cpu=False) == (False, False)  # as the line says
