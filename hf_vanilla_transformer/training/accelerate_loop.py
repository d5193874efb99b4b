"""A plain training loop on Accelerate, for users who want the loop in view rather than inside the Trainer.

One recipe, two loops: it reads the same arguments as the Trainer path (`scripts/train.py`), so the same
recipe files, and builds from them what the Trainer builds. The eq. 3 learning rate, the seeded model and the
data come from `arguments.prepare_training`; the optimizer from `optim`, `adam_*` and `weight_decay`, as
`Trainer.create_optimizer` builds it; the schedule from `lr_scheduler_type` and `warmup_steps` through
`transformers.get_scheduler`; batches from `TokenBudgetBatchSampler` and `build_seq2seq_collator`; gradient
clipping at `max_grad_norm`; the `LossLog` (`loss_log.jsonl`, `loss_curves.png`) every `logging_steps`;
`max_train_minutes` through `TimeBudget` (and with `decay_by_clock`, a linear decay over its minutes); the
final folder through `saving.save_model_folder`.

The loss is normalised as the Trainer normalises it: each micro-batch's summed, label-smoothed loss is
divided by the number of target tokens in the whole update (all accumulated micro-batches, on all processes),
so every token weighs the same whatever the split, and the two loops compute the same gradients.

Accelerate does what it is for: device placement, data sharding across processes, gradient synchronisation,
mixed precision (`bf16`/`fp16`, or the launcher's setting), gradient all-reduce, and checkpoints of the whole
training state (`save_state` into `state-<step>` every `save_steps`, `load_state` when
`resume_from_checkpoint` names one). Runs unchanged on one CPU, several CPU processes, one or many GPUs, or
several nodes. It does not evaluate: the evaluation and generation options are the Trainer's; score the saved
folder with `scripts/evaluate_model.py`. The Trainer's options it has no counterpart for are refused, not
dropped (`check_options`).
"""

from __future__ import annotations

import contextlib
import dataclasses
import itertools
import logging
import math
from dataclasses import asdict, dataclass
from pathlib import Path

import torch
from accelerate import Accelerator
from accelerate.utils import set_seed
from torch.utils.data import DataLoader
from transformers import Trainer, TrainingArguments, get_scheduler
from transformers.trainer_utils import rotate_checkpoints

from ..data.preprocessing import build_seq2seq_collator
from ..errors import UsageError
from ..saving import save_model_folder
from .arguments import PaperSeq2SeqTrainingArguments, RecipeArguments, prepare_training
from .batching import token_budget_sampler
from .logs import LossLog
from .schedules import clock_linear_schedule

logger = logging.getLogger(__name__)

STATE_DIR_PREFIX = "state-"


def create_optimizer(model: torch.nn.Module, args: TrainingArguments) -> torch.optim.Optimizer:
    """The optimizer `Trainer.create_optimizer` builds from `args`: its class and settings (`optim`,
    `learning_rate`, `adam_beta1/2`, `adam_epsilon`) from `Trainer.get_optimizer_cls_and_kwargs`, and
    `weight_decay` on the parameters the Trainer decays (all but biases and LayerNorm)."""
    # `get_decay_parameter_names` reads nothing of the Trainer instance.
    decay = set(Trainer.get_decay_parameter_names(None, model))
    trainable = [(name, p) for name, p in model.named_parameters() if p.requires_grad]
    groups = [
        {"params": [p for name, p in trainable if name in decay], "weight_decay": args.weight_decay},
        {"params": [p for name, p in trainable if name not in decay], "weight_decay": 0.0},
    ]
    optimizer_cls, optimizer_kwargs = Trainer.get_optimizer_cls_and_kwargs(args, model)
    return optimizer_cls(groups, **optimizer_kwargs)


def create_scheduler(optimizer: torch.optim.Optimizer, args: TrainingArguments, num_training_steps: int):
    """The schedule `Trainer.create_scheduler` builds from `args` (`lr_scheduler_type`, `warmup_steps`,
    `lr_scheduler_kwargs`) for `num_training_steps` optimizer updates."""
    return get_scheduler(
        args.lr_scheduler_type,
        optimizer=optimizer,
        num_warmup_steps=args.get_warmup_steps(num_training_steps),
        num_training_steps=num_training_steps,
        scheduler_specific_kwargs=args.lr_scheduler_kwargs,
    )


@dataclass
class LoopProgress:
    """Where the loop stands. Registered with `Accelerator.register_for_checkpointing`, so `save_state` and
    `load_state` keep it with the model, optimizer, scheduler and random states."""

    step: int = 0  # optimizer updates done
    epoch: int = 0
    batches_in_epoch: int = 0  # batches this process has taken in the current epoch

    def state_dict(self) -> dict:
        return asdict(self)

    def load_state_dict(self, state: dict) -> None:
        for name, value in state.items():
            setattr(self, name, value)


def _every(value: float, max_steps: int) -> int:
    """`logging_steps` or `save_steps` as a step count: below 1, a fraction of the run (as in the Trainer)."""
    return max(1, math.ceil(max_steps * value) if value < 1 else int(value))


def count_target_tokens(batches: list[dict], accelerator: Accelerator) -> torch.Tensor:
    """The target tokens (labels other than -100) of one update's micro-batches, summed over processes: the
    Trainer's `num_items_in_batch` with `average_tokens_across_devices`."""
    count = sum(batch["labels"].ne(-100).sum() for batch in batches).to(accelerator.device)
    return accelerator.reduce(count, reduction="sum") if accelerator.num_processes > 1 else count


def train_loop(
    model,
    tokenizer,
    train_dataset,
    args: TrainingArguments,
    max_tokens: int,
    recipe: RecipeArguments | None = None,
    batch_order: str = "padded_length",
    batch_size_multiple: int = 1,
) -> Path:
    """Train `model` on a tokenized dataset (`input_ids`, `labels`) as `args` say, and save the final model
    folder to `<output_dir>/final`, which is returned. `recipe` adds a time budget (`max_train_minutes`) and
    the decay over it (`decay_by_clock`); `batch_order` and `batch_size_multiple` shape the token-budget
    batches (`token_budget_sampler`).

    Every process builds the same batches; Accelerate gives each process a different share of them and
    averages the gradients, so all processes hold the same weights after every update. Only the main
    process writes the log and the final folder.
    """
    if recipe is not None:
        recipe.check(args)
    if args.save_strategy == "best":
        raise UsageError("save_strategy 'best' needs evaluation, which this loop does not do: use 'steps'.")
    # Accumulation is done here, as the Trainer does it: the loss of an update is normalised by its token
    # count, which Accelerate's own accumulation (dividing each micro-batch's loss by the step count) cannot
    # do.
    accelerator = Accelerator(mixed_precision=args.mixed_precision, cpu=args.use_cpu)
    accumulation = args.gradient_accumulation_steps
    set_seed(args.seed)
    output_dir = Path(args.output_dir)

    # One list of batches for the whole world; `prepare` shards it, process i taking every i-th batch.
    sampler = token_budget_sampler(
        train_dataset, max_tokens, batch_order, batch_size_multiple, seed=args.seed
    )
    loader = DataLoader(
        train_dataset,
        batch_sampler=sampler,
        collate_fn=build_seq2seq_collator(tokenizer, model=model),
        num_workers=args.dataloader_num_workers,
        # Its own generator: starting an epoch then draws nothing from the global RNG (dropout's), so a
        # resumed run draws the same dropout masks as an uninterrupted one.
        generator=torch.Generator().manual_seed(args.seed),
    )
    optimizer = create_optimizer(model, args)
    model, optimizer, loader = accelerator.prepare(model, optimizer, loader)
    updates_per_epoch = math.ceil(len(loader) / accumulation)
    max_steps = args.max_steps if args.max_steps > 0 else math.ceil(args.num_train_epochs * updates_per_epoch)
    budget = recipe.time_budget() if recipe is not None else None
    # Not passed to `prepare`: a prepared scheduler steps once per process, but the schedule counts updates.
    if recipe is not None and recipe.decay_by_clock:
        scheduler = clock_linear_schedule(
            optimizer.optimizer, args.get_warmup_steps(max_steps), budget, recipe.max_warmup_fraction
        )
    else:
        scheduler = create_scheduler(optimizer.optimizer, args, max_steps)
    progress = LoopProgress()
    # The budget is checkpointed too, so that a resumed run continues its clock.
    accelerator.register_for_checkpointing(scheduler, progress, *([budget] if budget is not None else []))
    if args.resume_from_checkpoint:
        accelerator.load_state(args.resume_from_checkpoint)
        accelerator.print(f"Resumed from {args.resume_from_checkpoint} at step {progress.step}.")

    logging_steps, save_steps = _every(args.logging_steps, max_steps), _every(args.save_steps, max_steps)
    saving, every_epoch = args.save_strategy != "no", args.save_strategy == "epoch"
    loss_log = LossLog(output_dir) if accelerator.is_main_process else None
    if budget is not None:
        budget.start()
    if args.eval_strategy != "no":
        logger.info("The Accelerate loop does not evaluate; score the saved folder with evaluate_model.py.")

    model.train()
    running_loss, batches_since_log, grad_norm = torch.zeros((), device=accelerator.device), 0, None
    done = progress.step >= max_steps
    while not done:
        # The loader passes its epoch to the sampler when it holds it directly (one process), and not when it
        # holds it wrapped (several): set both, so each epoch has its own order, and a resumed run the same.
        loader.set_epoch(progress.epoch)
        sampler.set_epoch(progress.epoch)
        skip = progress.batches_in_epoch  # after resuming, the batches this epoch already trained on
        batches = iter(accelerator.skip_first_batches(loader, skip) if skip else loader)
        while window := list(itertools.islice(batches, accumulation)):  # one update's micro-batches
            num_items_in_batch = count_target_tokens(window, accelerator)
            for index, batch in enumerate(window):
                progress.batches_in_epoch += 1
                # Gradients are all-reduced once, after the update's last micro-batch.
                last = index == len(window) - 1
                with contextlib.nullcontext() if last else accelerator.no_sync(model):
                    loss = model(**batch, num_items_in_batch=num_items_in_batch).loss
                    # The all-reduce averages over processes, and the loss is already a share of all of
                    # them: scaled back, as the Trainer does with `average_tokens_across_devices`.
                    accelerator.backward(loss * accelerator.num_processes)
                running_loss += loss.detach().float()  # summed over the update: its mean loss per token
            if args.max_grad_norm > 0:
                grad_norm = accelerator.clip_grad_norm_(model.parameters(), args.max_grad_norm)
            optimizer.step()
            optimizer.zero_grad()
            batches_since_log += 1
            learning_rate = scheduler.get_last_lr()[0]  # the rate this update used, as the Trainer logs it
            if not accelerator.optimizer_step_was_skipped:  # fp16 skips steps whose gradients overflowed
                scheduler.step()
            progress.step += 1
            done = progress.step >= max_steps or (budget is not None and budget.spent())
            if progress.step % logging_steps == 0 or done:
                mean = (running_loss / batches_since_log).reshape(1)  # per update
                logs = {
                    # Each process holds its share of every update's loss: summed over processes, averaged
                    # over the logging interval.
                    "loss": accelerator.gather(mean).sum().item(),
                    "learning_rate": learning_rate,
                    "epoch": progress.epoch + progress.batches_in_epoch / len(loader),
                }
                if grad_norm is not None:
                    logs["grad_norm"] = float(grad_norm)
                if loss_log is not None:
                    accelerator.print(loss_log.write(progress.step, logs))
                running_loss, batches_since_log = torch.zeros_like(running_loss), 0
            if saving and (done or (not every_epoch and progress.step % save_steps == 0)):
                save_training_state(accelerator, output_dir, progress.step, args.save_total_limit)
            if done:
                break
        else:
            progress.epoch += 1
            progress.batches_in_epoch = 0
            if every_epoch:
                save_training_state(accelerator, output_dir, progress.step, args.save_total_limit)
    if budget is not None and progress.step < max_steps:
        logger.info("Time budget of %.1f minutes reached at step %d.", budget.minutes, progress.step)

    accelerator.wait_for_everyone()
    final = output_dir / "final"
    if accelerator.is_main_process:
        save_model_folder(accelerator.unwrap_model(model), tokenizer, final)
        loss_log.plot()
    # The DDP wrapper and the loader are released while every process is still in the process group: once,
    # a process hung as this function returned (destroying them) after its peer had left.
    del model, optimizer, loader, batches
    accelerator.free_memory()
    accelerator.wait_for_everyone()
    accelerator.end_training()
    return final


def save_training_state(accelerator: Accelerator, output_dir: Path, step: int, keep: int | None) -> Path:
    """`save_state` into `<output_dir>/state-<step>`, keeping the `keep` most recent such folders (the
    Trainer's `rotate_checkpoints`)."""
    folder = output_dir / f"{STATE_DIR_PREFIX}{step}"
    accelerator.save_state(folder)
    if accelerator.is_main_process:
        rotate_checkpoints(str(output_dir), keep, checkpoint_prefix=STATE_DIR_PREFIX.rstrip("-"))
    return folder


# Training options of `TrainingArguments` that the Trainer honours and this loop does not have. Set to
# anything but their default, they are refused rather than dropped: the run would not be the one asked for.
UNSUPPORTED_OPTIONS = (
    "gradient_checkpointing",
    "torch_compile",
    "push_to_hub",
    "label_smoothing_factor",
    "neftune_noise_alpha",
    "auto_find_batch_size",
    "group_by_length",
    "deepspeed",
    "torch_empty_cache_steps",
)


def check_options(args: TrainingArguments) -> None:
    """Refuse the options this loop would ignore (`UNSUPPORTED_OPTIONS`), naming them; say once that the
    evaluation options (which the recipes set for the Trainer) go unused."""
    defaults = {field.name: field.default for field in dataclasses.fields(args)}
    given = [
        name
        for name in UNSUPPORTED_OPTIONS
        if name in defaults and getattr(args, name) not in (defaults[name], None, False, "", [])
    ]
    if given:
        options = ", ".join(f"--{name}" for name in given)
        them = "it" if len(given) == 1 else "them"
        raise UsageError(
            f"The Accelerate loop does not do {options}: drop {them}, or train with scripts/train.py (the "
            "Trainer does)."
        )
    if args.eval_strategy != "no":
        logger.warning(
            "The Accelerate loop does not evaluate during training: eval_strategy %r and the other "
            "evaluation options go unused. Score the saved folder with scripts/evaluate_model.py.",
            str(args.eval_strategy),
        )


def run_accelerate_training(
    model_args,
    data_args,
    recipe_args: RecipeArguments,
    training_args: PaperSeq2SeqTrainingArguments,
) -> Path:
    """Train with `train_loop` from the arguments `training.run_training` takes; return the final folder."""
    if data_args.max_tokens is None:
        raise UsageError(
            "The Accelerate loop batches by token budget: set `max_tokens` (e.g. --max_tokens 4096)."
        )
    check_options(training_args)
    tokenizer, datasets_, model = prepare_training(model_args, data_args, recipe_args, training_args)
    return train_loop(
        model,
        tokenizer,
        datasets_["train"],
        training_args,
        max_tokens=data_args.max_tokens,
        recipe=recipe_args,
        batch_order=data_args.batch_order,
        batch_size_multiple=data_args.batch_size_multiple,
    )
