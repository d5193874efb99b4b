"""Training by the clock: the wall time a run may take, kept across resumes and processes, the callback that
stops the Trainer when it is spent, and a progress bar in minutes."""

from __future__ import annotations

import json
import logging
import time
from pathlib import Path

from accelerate import PartialState
from tqdm.auto import tqdm
from transformers import ProgressCallback, TrainerCallback

from ..errors import UsageError

logger = logging.getLogger(__name__)


class TimeBudget:
    """Wall time allowed for training, counted from `start()`. For recipes with a time budget rather than
    a step count. A resumed run continues the clock where its checkpoint left it (`state_dict`).

    Under data parallelism every process must stop after the same step (the others would wait forever in
    the next gradient all-reduce) and use the same learning rate: there `elapsed()` returns `agreed`, the
    main process's reading that the processes last shared (`agreement.StepAgreement`)."""

    STATE_FILE = "time_budget.json"  # in each checkpoint folder of a Trainer run

    def __init__(self, minutes: float):
        if minutes <= 0:
            raise UsageError(f"The time budget must be positive, got {minutes} minutes.")
        self.minutes = minutes
        self.started: float | None = None
        self.spent_before = 0.0  # seconds spent before a resume
        self.decay_from: float | None = None  # share of the budget spent when a clock decay began
        self.agreed: float | None = None  # several processes: the main process's reading, as last shared
        self.stopped_at: int | None = None  # the step after which the budget ended the run, once it has

    def start(self) -> None:
        self.started = time.monotonic() - self.spent_before

    def reading(self) -> float:
        """Seconds of the budget spent so far by this process's clock (before `start()`: those spent before a
        resume)."""
        return self.spent_before if self.started is None else time.monotonic() - self.started

    def elapsed(self) -> float:
        """Seconds of the budget spent so far, the same on every process of a run."""
        if self.agreed is not None:
            return self.agreed
        if PartialState().num_processes > 1:
            # Each process's own clock would stop them after different steps, and the others would wait in
            # the next gradient all-reduce forever.
            raise RuntimeError(
                "A time budget read by several processes needs their shared reading: hand it to a "
                "training.StepAgreement (TimeBudgetCallback takes one)."
            )
        return self.reading()

    def fraction(self) -> float:
        """The share of the budget spent, from 0 to 1."""
        return min(1.0, self.elapsed() / (self.minutes * 60))

    def spent(self) -> bool:
        return self.started is not None and self.fraction() >= 1.0

    def state_dict(self) -> dict:
        return {"minutes": self.minutes, "elapsed_seconds": self.elapsed(), "decay_from": self.decay_from}

    def load_state_dict(self, state: dict) -> None:
        self.spent_before = float(state["elapsed_seconds"])
        self.decay_from = state.get("decay_from")
        if self.agreed is not None:
            self.agreed = self.spent_before
        if self.started is not None:
            self.start()

    def save(self, folder: str | Path, write: bool = True) -> None:
        """Record the time spent in the checkpoint `folder` (the reading the processes share, which set the
        learning rate); the process with `write` writes."""
        record = self.state_dict()
        if write:
            (Path(folder) / self.STATE_FILE).write_text(json.dumps(record) + "\n", encoding="utf-8")

    def load(self, folder: str | Path) -> bool:
        """Continue the clock of the checkpoint `folder`; False if it has no record of one."""
        path = Path(folder) / self.STATE_FILE
        if not path.is_file():
            return False
        self.load_state_dict(json.loads(path.read_text(encoding="utf-8")))
        return True


def train_longer(minutes: float) -> str:
    """What a run its `minutes` of budget ended is told to do to train further."""
    return f"raise --max_train_minutes above {minutes:g}"


def budget_report(budget: TimeBudget | None) -> str | None:
    """The line that ends a run its time budget ended: how many optimizer steps the budget bought, which the
    machine's speed decides, so that a score is read beside them; None if the run ended otherwise."""
    if budget is None or budget.stopped_at is None:
        return None
    return (
        f"The {budget.minutes:g}-minute time budget bought {budget.stopped_at:,} optimizer steps; "
        f"{train_longer(budget.minutes)} to train longer."
    )


class TimeBudgetCallback(TrainerCallback):
    """Stops a Trainer run once its `TimeBudget` is spent; the Trainer then saves and evaluates as at the end
    of any run. Each checkpoint records the time spent, so that a resumed run continues the clock. On several
    processes the budget is read through `agreement` (a `StepAgreement`), which every process reads at the
    same steps."""

    def __init__(self, budget: TimeBudget, agreement=None):
        self.budget = budget
        self.agreement = agreement

    def on_train_begin(self, args, state, control, **kwargs):
        self.budget.start()

    def on_step_end(self, args, state, control, **kwargs):
        if self.agreement is not None:
            self.agreement.after_step(state.global_step)
        if self.budget.spent():
            logger.info(
                "Time budget of %.1f minutes reached at step %d.", self.budget.minutes, state.global_step
            )
            if state.global_step < state.max_steps:  # at max_steps the steps end the run, not the clock
                self.budget.stopped_at = state.global_step
            control.should_training_stop = True
            control.should_save = args.save_strategy != "no"
            control.should_evaluate = args.eval_strategy != "no"

    def on_save(self, args, state, control, **kwargs):
        folder = Path(args.output_dir) / f"checkpoint-{state.global_step}"
        self.budget.save(folder, write=state.is_world_process_zero and folder.is_dir())


class TimeBudgetProgressCallback(ProgressCallback):
    """The training bar of a run with a time budget counts the budget's minutes, the step beside them: a bar
    of `max_steps` would promise steps (and hours) that a run stopped by the clock never reaches."""

    def __init__(self, minutes: float, spent_minutes: float = 0.0):
        super().__init__()
        self.minutes = minutes
        self.spent_minutes = spent_minutes  # before a resume
        self.started = 0.0

    def on_train_begin(self, args, state, control, **kwargs):
        if state.is_world_process_zero:
            self.started = time.monotonic() - self.spent_minutes * 60
            self.training_bar = tqdm(
                total=self.minutes,
                desc="training",
                unit="min",
                bar_format="{desc}: {percentage:3.0f}%|{bar}| {n:.1f}/{total:g} min of the budget{postfix}",
                dynamic_ncols=True,
                mininterval=1.0,
            )

    def on_step_end(self, args, state, control, **kwargs):
        if state.is_world_process_zero:
            elapsed = min(self.minutes, (time.monotonic() - self.started) / 60)
            self.training_bar.n = elapsed
            self.training_bar.set_postfix_str(f"step {state.global_step}", refresh=False)
            self.training_bar.update(0)  # redraws at most every `mininterval` seconds
