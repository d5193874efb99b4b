"""The loss log of a run folder (`loss_log.jsonl`) and the loss curves drawn from it (`loss_curves.png`)."""

from __future__ import annotations

import json
import logging
import os
from pathlib import Path

from transformers import TrainerCallback

from ..extras import MissingExtraError, require
from ..outputs import staged

logger = logging.getLogger(__name__)

LOSS_PLOT_NAME = "loss_curves.png"
LOSS_LOG_NAME = "loss_log.jsonl"


class LossLog:
    """The log of a run folder: one JSON record per logging event appended to `loss_log.jsonl`, e.g.
    `{"step": 50, "loss": 5.1, "learning_rate": 0.0012, "epoch": 0.4}` or `{"step": 200, "eval_loss": 4.2,
    "eval_bleu": 9.8}`, and the loss curves drawn from it into `loss_curves.png`. The Trainer and the plain
    loop write through it (the Trainer through `LossPlotCallback`), so their logs read alike. Call it on one
    process."""

    def __init__(self, output_dir: str | Path):
        self.folder = Path(output_dir)
        self.train: list[tuple[int, float]] = []
        self.eval: list[tuple[int, float]] = []
        self.plot_missing = False

    def resume(self, step: int) -> None:
        """Continue the log of a run resumed at `step`: the records of later steps (written after the
        checkpoint, by the run that was stopped) are cut away, so that each step is logged once, and the
        curves are drawn from the whole run. A line cut short by a kill goes too; the file is rewritten."""
        path = self.folder / LOSS_LOG_NAME
        if not path.is_file():
            return
        kept = []
        for line in path.read_text(encoding="utf-8").splitlines():
            try:
                record = json.loads(line)
            except ValueError:
                continue
            if isinstance(record, dict) and record.get("step", step + 1) <= step:
                kept.append(record)
        temporary = path.with_name(path.name + ".tmp")
        temporary.write_text("".join(json.dumps(record) + "\n" for record in kept), encoding="utf-8")
        os.replace(temporary, path)
        for record in kept:
            self._remember(record)

    def _remember(self, record: dict) -> None:
        if "loss" in record:
            self.train.append((record["step"], float(record["loss"])))
        if "eval_loss" in record:
            self.eval.append((record["step"], float(record["eval_loss"])))

    def write(self, step: int, logs: dict) -> dict:
        """Append the numbers of `logs` (strings and other values are left out) as the record of `step`."""
        record = {"step": step, **{k: v for k, v in logs.items() if isinstance(v, int | float)}}
        self._remember(record)
        self.folder.mkdir(parents=True, exist_ok=True)
        with open(self.folder / LOSS_LOG_NAME, "a", encoding="utf-8") as log_file:
            log_file.write(json.dumps(record) + "\n")
        return record

    def plot(self) -> None:
        """Redraw `loss_curves.png` from the records written so far (nothing to draw, nothing drawn; without
        the plot extra, a warning once, and the log alone)."""
        if not (self.train or self.eval) or self.plot_missing:
            return
        try:
            plot_loss_curves(self.train, self.eval, self.folder / LOSS_PLOT_NAME)
        except MissingExtraError as error:
            self.plot_missing = True
            logger.warning("No %s: %s", LOSS_PLOT_NAME, error)


class LossPlotCallback(TrainerCallback):
    """Keeps the `LossLog` of a Trainer run next to its checkpoints, and redraws `loss_curves.png` there at
    every evaluation and at the end: people would rather look than read."""

    def __init__(self):
        self.log: LossLog | None = None

    def on_train_begin(self, args, state, control, **kwargs):
        # The state is the checkpoint's when resuming: the log goes back to its step.
        if state.is_world_process_zero:
            self.log = LossLog(args.output_dir)
            self.log.resume(state.global_step)

    def on_log(self, args, state, control, logs=None, **kwargs):
        if not state.is_world_process_zero or not logs:
            return
        if self.log is None:
            self.log = LossLog(args.output_dir)
        self.log.write(state.global_step, logs)
        if "eval_loss" in logs:
            self.log.plot()

    def on_train_end(self, args, state, control, **kwargs):
        if state.is_world_process_zero and self.log is not None:
            self.log.plot()


def plot_loss_curves(train: list[tuple[int, float]], evaluation: list[tuple[int, float]], path: Path) -> None:
    """Draw training and validation loss against the optimizer step into a PNG."""
    matplotlib = require("matplotlib", "The loss curves (loss_curves.png)")

    matplotlib.use("Agg")  # no display on servers
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(7, 4))
    if train:
        ax.plot(*zip(*train, strict=True), label="training loss", linewidth=1)
    if evaluation:
        ax.plot(*zip(*evaluation, strict=True), "o-", label="validation loss")
    ax.set_xlabel("optimizer step")
    ax.set_ylabel("loss (label-smoothed cross-entropy)")
    ax.grid(alpha=0.3)
    ax.legend()
    fig.tight_layout()
    with staged(path, folder=False) as staging:
        fig.savefig(staging, dpi=100, format="png")
    plt.close(fig)
