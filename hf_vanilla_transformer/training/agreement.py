"""What the processes of a run agree on after a step: whether to stop (a signal here or at a peer) and the
main process's clock (a time budget's reading, which also sets the learning rate of a schedule counted in
minutes).

Every process must stop after the same step and use the same learning rate, so these are read together: one
all-reduce of three numbers, after the steps it falls due. A reading after every step would put a collective
and a host read of its result inside every step, which holds the host until the GPU has finished the step's
queued work; so the readings are spaced, by the main process's clock, about `TARGET_SECONDS` apart. The
spacing is computed from the agreed numbers alone, so every process reads at the same steps. One process
reads its own state after every step, with no collective at all.
"""

from __future__ import annotations

import time

import torch

from .budget import TimeBudget
from .faults import Interruption


class StepAgreement:
    """The processes' shared reading of `interruption` and `budget`, taken after a step when it is due. Every
    process calls `after_step` after every step, with the same step numbers; a second call for the same step
    reads nothing again (the budget's callback and the faults' both ask)."""

    TARGET_SECONDS = 2.0  # between readings: what a stop asked for may wait, a checkpoint's save aside
    MAX_INTERVAL = 128  # steps between readings, however fast they are

    def __init__(self, interruption: Interruption, budget: TimeBudget | None, state):
        """`state`: the run's processes (accelerate's `PartialState` or an `Accelerator`)."""
        self.interruption = interruption
        self.budget = budget
        self.several = state.num_processes > 1
        self.is_main = state.is_main_process
        self.device = state.device
        self.stop = False  # every process stops after the step read last
        self.readings = 0  # how many collectives this agreement has made
        self._step = 0  # the step of the last reading
        self._next = 1  # the step after which the next reading falls due
        self._interval = 1
        self._main_time: float | None = None  # the main process's monotonic clock at the last reading
        if self.several and budget is not None:
            budget.agreed = budget.spent_before  # what every process knows before the first reading

    def after_step(self, step: int) -> bool:
        """Whether every process stops after `step`: a signal came, here or at a peer, by the last reading."""
        if not self.several:
            self.stop = self.interruption.received is not None
        elif step >= self._next:
            self._read(step)
        return self.stop

    def _read(self, step: int) -> None:
        import torch.distributed as dist

        asked = float(self.interruption.received is not None)
        clock = self.budget.reading() if self.budget is not None and self.is_main else 0.0
        now = time.monotonic() if self.is_main else 0.0
        values = torch.tensor([asked, clock, now], dtype=torch.float64, device=self.device)
        dist.all_reduce(values)  # a sum: the main process alone gives the clocks
        asked_anywhere, clock, now = values.tolist()
        self.readings += 1
        self.stop = asked_anywhere > 0
        if self.budget is not None:
            self.budget.agreed = clock
        if self._main_time is not None:
            seconds_per_step = max(now - self._main_time, 1e-6) / (step - self._step)
            self._interval = int(
                max(1, min(self.MAX_INTERVAL, 2 * self._interval, self.TARGET_SECONDS / seconds_per_step))
            )
        self._main_time, self._step, self._next = now, step, step + self._interval
