"""scripts/train.py with what each update makes the host wait for counted, for tests/test_host_syncs.py:
every read of a tensor's value into Python (`.item()`, `.tolist()`, `bool()`, ...) and every collective of
`torch.distributed`, from fetching the update's batches (`Trainer.get_batch_samples`) to the end of its
`on_step_end` callbacks (what the Trainer runs after `on_step_end`, logging, saving and evaluating, is left
out: those come every so many steps by design). Run as one process or under `accelerate launch`:

    python tests/sync_worker.py COUNTS_DIR scripts/train.py RECIPE [options ...]

Each process writes `COUNTS_DIR/rank-<i>.json`: {step: [what it waited for, ...]}. SYNC_TARGET_SECONDS, if
set, replaces `StepAgreement.TARGET_SECONDS`: a long one spaces the processes' readings by doubling alone,
whatever the machine's speed.
"""

import functools
import json
import os
import runpy
import sys
from pathlib import Path

import torch
import torch.distributed as dist
from torch.overrides import TorchFunctionMode
from transformers import Trainer, TrainerCallback

HOST_READS = {"item", "tolist", "__bool__", "__float__", "__int__", "__index__", "numpy", "cpu"}
COLLECTIVES = (
    "all_reduce", "all_gather", "all_gather_into_tensor", "all_gather_object", "broadcast",
    "broadcast_object_list", "reduce", "reduce_scatter", "reduce_scatter_tensor", "all_to_all", "barrier",
    "gather", "gather_object", "scatter",
)  # fmt: skip
# Reads of host tensors, where no device is waited for: torch's Adam and AdamW keep their step count in one
# (unless `capturable`), and a data loader draws each epoch's seed from one. Every other read is counted.
HOST_SIDE = (os.path.join("torch", "optim", ""), os.path.join("torch", "utils", "data", ""))


class Counting(TorchFunctionMode):
    def __init__(self, seen: list[str]):
        super().__init__()
        self.seen = seen

    def __torch_function__(self, func, types, args=(), kwargs=None):
        name = getattr(func, "__name__", "")
        if name in HOST_READS:
            caller = sys._getframe(1).f_code.co_filename
            if not any(part in caller for part in HOST_SIDE):
                self.seen.append(f"{name} ({Path(caller).name}:{sys._getframe(1).f_lineno})")
        return func(*args, **(kwargs or {}))


class StepCounter(TrainerCallback):
    def __init__(self, output: Path):
        self.output = output
        self.steps: dict[int, list[str]] = {}
        self.seen: list[str] | None = None
        self.mode: Counting | None = None

    def open(self) -> None:
        if self.mode is None:
            self.seen = []
            self.mode = Counting(self.seen)
            self.mode.__enter__()

    def on_step_begin(self, args, state, control, **kwargs):
        self.open()  # already open since the update's batches were fetched

    def on_step_end(self, args, state, control, **kwargs):
        self.mode.__exit__(None, None, None)
        self.steps[state.global_step] = self.seen
        self.seen = self.mode = None

    def on_train_end(self, args, state, control, **kwargs):
        rank = int(os.environ.get("RANK", "0"))
        (self.output / f"rank-{rank}.json").write_text(json.dumps(self.steps))


def main() -> None:
    output, script, *arguments = sys.argv[1:]
    output = Path(output)
    counter = StepCounter(output)

    def counted(name, collective):
        @functools.wraps(collective)
        def wrapper(*args, **kwargs):
            if counter.seen is not None:
                counter.seen.append(name)
            return collective(*args, **kwargs)

        return wrapper

    for name in COLLECTIVES:
        if hasattr(dist, name):
            setattr(dist, name, counted(name, getattr(dist, name)))
    train = Trainer.train

    def train_counted(self, *args, **kwargs):
        self.add_callback(counter)  # last: its `on_step_end` closes the step after every other callback's
        return train(self, *args, **kwargs)

    Trainer.train = train_counted
    get_batch_samples = Trainer.get_batch_samples

    def get_batch_samples_counted(self, *args, **kwargs):
        counter.open()
        return get_batch_samples(self, *args, **kwargs)

    Trainer.get_batch_samples = get_batch_samples_counted
    if os.environ.get("SYNC_TARGET_SECONDS"):
        from hf_vanilla_transformer.training import StepAgreement

        StepAgreement.TARGET_SECONDS = float(os.environ["SYNC_TARGET_SECONDS"])
    sys.argv = [script, *arguments]
    torch.set_num_threads(1)
    runpy.run_path(script, run_name="__main__")


if __name__ == "__main__":
    main()
