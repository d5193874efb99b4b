"""A plain training loop on Accelerate, for users who want the loop in view rather than inside the Trainer.

Same recipe as the Trainer path (Adam 0.9/0.98/1e-9, warmup + inverse square root, label smoothing in the
model, token-budget batches), with Accelerate doing what it is for: device placement, data sharding
across processes, gradient accumulation, mixed precision, gradient all-reduce, and checkpoints of the
whole training state (`save_state` / `load_state`). Runs unchanged on one CPU, several CPU processes
(`accelerate launch --cpu --num_processes 2`), one or many GPUs, or several nodes.
"""

from __future__ import annotations

import json
import logging
import math
from dataclasses import dataclass
from pathlib import Path

import torch
from accelerate import Accelerator
from accelerate.utils import set_seed
from torch.utils.data import DataLoader
from transformers import DataCollatorForSeq2Seq, get_inverse_sqrt_schedule

from .training import LOSS_PLOT_NAME, TokenBudgetBatchSampler, example_lengths, plot_loss_curves

logger = logging.getLogger(__name__)

STATE_DIR_PREFIX = "state-"


@dataclass
class LoopArguments:
    """Options of the Accelerate loop (the model and data options are shared with the Trainer script)."""

    output_dir: str = "outputs/accelerate-run"
    max_steps: int = 1000
    gradient_accumulation_steps: int = 1
    warmup_steps: int = 4000
    lr_scale: float = 1.0
    mixed_precision: str = "no"
    use_cpu: bool = False  # needed for several CPU processes: without it Accelerate looks for GPUs
    seed: int = 0
    logging_steps: int = 10
    save_steps: int = 500
    resume_from_state: str | None = None
    log_batches: bool = False


def train_loop(model, tokenizer, train_dataset, args: LoopArguments, max_tokens: int) -> dict:
    """Train `model` on a tokenized dataset (`input_ids`, `labels`) and return a summary.

    Every process builds the same batches; Accelerate gives each process a different share of them.
    Only the main process logs and writes files; `save_state` writes model, optimizer, scheduler, RNG
    and the sampler's epoch, so `resume_from_state` continues a killed run where it stopped.
    """
    accelerator = Accelerator(
        gradient_accumulation_steps=args.gradient_accumulation_steps,
        mixed_precision=args.mixed_precision,
        cpu=args.use_cpu,
    )
    set_seed(args.seed)
    output_dir = Path(args.output_dir)

    # One list of batches for the whole world; `prepare` shards it, process i taking every i-th batch.
    batch_sampler = TokenBudgetBatchSampler(
        example_lengths(train_dataset), max_tokens=max_tokens, seed=args.seed
    )
    collator = DataCollatorForSeq2Seq(tokenizer, model=model, label_pad_token_id=-100)
    loader = DataLoader(train_dataset, batch_sampler=batch_sampler, collate_fn=collator)

    peak = args.lr_scale * model.config.d_model**-0.5 * args.warmup_steps**-0.5  # eq. 3
    optimizer = torch.optim.Adam(model.parameters(), lr=peak, betas=(0.9, 0.98), eps=1e-9)
    # Not passed to `prepare`: the prepared scheduler steps once per process, but eq. 3 counts updates.
    scheduler = get_inverse_sqrt_schedule(optimizer, num_warmup_steps=args.warmup_steps)
    model, optimizer, loader = accelerator.prepare(model, optimizer, loader)
    accelerator.register_for_checkpointing(scheduler)

    step, epoch = 0, 0
    if args.resume_from_state:
        accelerator.load_state(args.resume_from_state)
        progress = json.loads((Path(args.resume_from_state) / "progress.json").read_text())
        step, epoch = progress["step"], progress["epoch"]
        accelerator.print(f"Resumed from {args.resume_from_state} at step {step}.")

    history: list[tuple[int, float]] = []
    seen_batches: list[list[int]] = []
    running, running_count = 0.0, 0
    while step < args.max_steps:
        batch_sampler.set_epoch(epoch)
        batches_per_epoch = len(loader)
        skip = (step * args.gradient_accumulation_steps) % batches_per_epoch if args.resume_from_state else 0
        epoch_loader = accelerator.skip_first_batches(loader, skip) if skip else loader
        for batch in epoch_loader:
            if args.log_batches:
                seen_batches.append(batch["input_ids"].tolist())
            with accelerator.accumulate(model):
                loss = model(**batch).loss
                accelerator.backward(loss)
                optimizer.step()
                optimizer.zero_grad()
            running += loss.detach().float().item()
            running_count += 1
            if not accelerator.sync_gradients:
                continue
            scheduler.step()
            step += 1
            if step % args.logging_steps == 0 or step == args.max_steps:
                mean_loss = accelerator.gather(
                    torch.tensor([running / running_count], device=accelerator.device)
                )
                history.append((step, mean_loss.mean().item()))
                running, running_count = 0.0, 0
                accelerator.print(
                    f"step {step}: loss {history[-1][1]:.4f}, lr {scheduler.get_last_lr()[0]:.2e}"
                )
            if step % args.save_steps == 0 or step == args.max_steps:
                state_dir = output_dir / f"{STATE_DIR_PREFIX}{step}"
                accelerator.save_state(state_dir)
                if accelerator.is_main_process:
                    (state_dir / "progress.json").write_text(json.dumps({"step": step, "epoch": epoch}))
            if step >= args.max_steps:
                break
        epoch += 1
        args.resume_from_state = None  # only the first epoch after resuming skips batches

    accelerator.wait_for_everyone()
    unwrapped = accelerator.unwrap_model(model)
    if accelerator.is_main_process:
        unwrapped.save_pretrained(output_dir / "final")
        tokenizer.save_pretrained(output_dir / "final")
        plot_loss_curves(history, [], output_dir / LOSS_PLOT_NAME)
        (output_dir / "loss_history.json").write_text(json.dumps(history))
    checksum = sum(p.detach().double().sum().item() for p in unwrapped.parameters())
    summary = {
        "rank": accelerator.process_index,
        "world_size": accelerator.num_processes,
        "steps": step,
        "loss_history": history,
        "weights_checksum": checksum,
        "batches": seen_batches,
        "batches_per_epoch": len(loader),
    }
    if not math.isfinite(checksum):
        raise FloatingPointError("Training diverged: the weights contain NaN or inf.")
    return summary
