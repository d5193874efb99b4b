"""Learning-rate schedules: the paper's eq. 3 and its peak, and a linear decay over a time budget (for recipes
that end by the clock). The warmup + inverse square-root schedule itself is transformers' `inverse_sqrt`."""

from __future__ import annotations

import torch

from ..errors import UsageError
from .budget import TimeBudget


def paper_peak_learning_rate(d_model: int, warmup_steps: int) -> float:
    """Peak of eq. 3, reached at step `warmup_steps`: d_model^-0.5 · warmup_steps^-0.5.

    With this as `learning_rate`, transformers' `inverse_sqrt` schedule (linear warmup, then decay as
    1/sqrt(step)) is exactly eq. 3: lrate = d_model^-0.5 · min(step^-0.5, step · warmup_steps^-1.5).
    """
    if d_model < 1 or warmup_steps < 1:
        raise UsageError(f"d_model ({d_model}) and warmup_steps ({warmup_steps}) must be positive.")
    return d_model**-0.5 * warmup_steps**-0.5


def paper_learning_rate(step: int, d_model: int, warmup_steps: int) -> float:
    """Eq. 3 as the paper writes it (for checking the schedule, not for training)."""
    if step == 0:
        return 0.0
    return d_model**-0.5 * min(step**-0.5, step * warmup_steps**-1.5)


def clock_linear_schedule(
    optimizer: torch.optim.Optimizer,
    warmup_steps: int,
    budget: TimeBudget,
    max_warmup_fraction: float | None = None,
) -> torch.optim.lr_scheduler.LambdaLR:
    """transformers' `linear` schedule with its decay counted in the budget's minutes instead of steps:
    linear warmup over `warmup_steps` updates, then a linear decay that reaches zero as the clock stops the
    run. A run ended by a time budget then ends at a learning rate of zero on a machine of any speed, where a
    step-counted decay must guess how many steps fit. transformers has no schedule driven by wall time, so
    this one is written here; the learning rate at a step depends on the machine's speed, as the step count
    of any clock-ended run does.

    With `max_warmup_fraction`, warmup also ends once that share of the budget is spent, if it comes before
    `warmup_steps` (the learning rate rises with whichever is further along): a slow machine given a short
    budget would otherwise spend all of it warming up."""

    def factor(step: int) -> float:
        spent = budget.fraction()
        if budget.decay_from is None:
            progress = step / warmup_steps if warmup_steps > 0 else 1.0
            if max_warmup_fraction is not None:
                progress = max(progress, spent / max_warmup_fraction)
            if progress < 1.0:
                return progress
            budget.decay_from = min(spent, 0.99)
        return max(0.0, (1.0 - spent) / (1.0 - budget.decay_from))

    # A closure, not a callable object: `LambdaLR.state_dict` would pickle an object's attributes (the budget)
    # into the checkpoint; the budget keeps its own state.
    return torch.optim.lr_scheduler.LambdaLR(optimizer, factor)
