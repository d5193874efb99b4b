"""Train with a plain Accelerate loop, for users who want the loop in view and in their hands, the way
transformers' `run_translation_no_trainer.py` is written. The package gives the steps before training
(`training.setup`'s: the options, tokenizer and configuration, checks, data and model, which
`scripts/train.py` takes too, so both refuse a mistake in the same words), the token-budget batches (§5.1)
and eq. 3's learning rate; the loop is here, and yours to change. Everything else (evaluation and the best
checkpoint, time budgets, FSDP, DeepSpeed, every `Seq2SeqTrainingArguments` option, recipe files) is
`scripts/train.py`, the Trainer, the package's training engine.

    python scripts/train_accelerate.py --task translation --dataset outputs/data/multi30k-de-en \
        --tokenizer outputs/tokenizers/multi30k-de-en-bpe8k --max_tokens 4096 --max_steps 2000 \
        --warmup_steps 600 --output_dir outputs/acc
    # continue from a saved training state
    python scripts/train_accelerate.py ... --output_dir outputs/acc \
        --resume_from_checkpoint outputs/acc/state-1000
    # two CPU processes over gloo; on GPUs drop --use_cpu (or use multi_gpu.yaml, multi_node.yaml: DDP)
    accelerate launch --multi_gpu --num_processes 2 scripts/train_accelerate.py ... --use_cpu

The loss of an update is normalised by the target tokens of the whole update, over its micro-batches and
processes (as the Trainer does with `average_tokens_across_devices`), so two processes compute what one
process accumulating two batches computes. Writes `<output_dir>/final` (weights, config, model and pipeline
code, tokenizer), `state-<step>` folders (`save_state`: the whole training state, the last `save_total_limit`
kept), `loss_log.jsonl` and `loss_curves.png`. Each state records what decides the batches and the model
(`resume_contract.json`): a resume with any of it changed is refused in one line, and resuming a finished run
changes nothing (docs/training.md, "Faults and resuming").
"""

from __future__ import annotations

import contextlib
import itertools
import logging
import signal
import sys
from dataclasses import asdict, dataclass, field
from pathlib import Path

import torch
from accelerate import Accelerator, PartialState
from accelerate.utils import DistributedType, set_seed
from torch.utils.data import DataLoader
from transformers import AutoTokenizer, get_scheduler
from transformers.trainer_utils import rotate_checkpoints

from hf_vanilla_transformer.cli import make_parser, parse_dataclasses, run_script
from hf_vanilla_transformer.data.preprocessing import build_seq2seq_collator
from hf_vanilla_transformer.devices import tf32_available
from hf_vanilla_transformer.errors import UsageError
from hf_vanilla_transformer.options import Options
from hf_vanilla_transformer.tasks import DataArguments
from hf_vanilla_transformer.training import (
    BatchingArguments,
    Interruption,
    LossLog,
    ModelArguments,
    StepAgreement,
    paper_peak_learning_rate,
    precision_flags,
    token_budget_sampler,
)
from hf_vanilla_transformer.training.checkpoints import (
    forget_complete_record,
    save_whole_folder,
    step_of,
    write_complete_record,
)
from hf_vanilla_transformer.training.exits import leave_finished_run, leave_launched_process
from hf_vanilla_transformer.training.faults import stopped_message
from hf_vanilla_transformer.training.resume import ResumeContract, RunFinished, finished_message
from hf_vanilla_transformer.training.setup import (
    check_lengths_fit,
    check_options,
    check_resume,
    load_config_overrides,
    model_config,
    prepare_output_dir,
    resume_point,
    say_what_trains,
    seeded_model,
    tokenized_data,
)

logger = logging.getLogger(__name__)

STATE_PREFIX = "state-"


@dataclass
class LoopArguments(Options):
    """The loop's own settings; the paper's (§5.3) are the defaults."""

    output_dir: str = field(default="outputs/acc", metadata={"help": "Where states, logs and the model go."})
    max_steps: int = field(
        default=1000, metadata={"help": "Optimizer updates to train for.", "range": ">= 1"}
    )
    warmup_steps: int = field(
        default=4000, metadata={"help": "Linear warmup steps of eq. 3 (§5.3: 4000).", "range": ">= 0"}
    )
    lr_scale: float = field(
        default=1.0, metadata={"help": "Multiplier of eq. 3's peak learning rate.", "range": "> 0"}
    )
    adam_beta1: float = field(default=0.9, metadata={"help": "Adam's beta1 (§5.3: 0.9).", "range": "[0, 1)"})
    adam_beta2: float = field(
        default=0.98, metadata={"help": "Adam's beta2 (§5.3: 0.98).", "range": "[0, 1)"}
    )
    adam_epsilon: float = field(
        default=1e-9, metadata={"help": "Adam's epsilon (§5.3: 1e-9).", "range": "> 0"}
    )
    max_grad_norm: float = field(
        default=0.0, metadata={"help": "Clip gradients to this norm; 0 does not.", "range": ">= 0"}
    )
    gradient_accumulation_steps: int = field(
        default=1, metadata={"help": "Micro-batches per update.", "range": ">= 1"}
    )
    logging_steps: int = field(
        default=100, metadata={"help": "Log the mean loss every this many updates.", "range": ">= 1"}
    )
    save_steps: int = field(
        default=1000, metadata={"help": "Save the training state every this many updates.", "range": ">= 1"}
    )
    save_total_limit: int = field(
        default=5, metadata={"help": "Keep this many training states.", "range": ">= 1"}
    )
    seed: int = field(
        default=42,
        metadata={"help": "Seeds the model's initial weights, batches and dropout.", "range": ">= 0"},
    )
    mixed_precision: str | None = field(
        default=None,
        metadata={
            "help": "no, fp16 or bf16. Unset: the launch's (accelerate launch's --mixed_precision or its "
            "config's) if it names one, else bf16 on a GPU with bfloat16, fp16 on an older CUDA GPU, no on a "
            "CPU.",
            "choices": ["no", "fp16", "bf16"],
        },
    )
    use_cpu: bool = field(
        default=False, metadata={"help": "Train on the CPU (several processes: over gloo)."}
    )
    resume_from_checkpoint: str | None = field(
        default=None,
        metadata={"help": "A state-<step> folder, or true (latest) for the newest whole one of output_dir."},
    )
    overwrite: bool = field(default=False, metadata={"help": "Replace an earlier run in output_dir."})
    allow_changed_options: list[str] | None = field(
        default=None,
        metadata={
            "help": "Resume even though these options (or `all`) differ from those the state records "
            "(resume_contract.json); the log names each change. Without it such a resume is refused."
        },
    )

    def __post_init__(self):
        super().__post_init__()
        if self.mixed_precision is None:
            bf16, fp16 = precision_flags(None, None, self.use_cpu)
            self.mixed_precision = "bf16" if bf16 else "fp16" if fp16 else "no"


def resume_options(
    args: LoopArguments, batching: BatchingArguments, state: PartialState
) -> tuple[dict, dict]:
    """The loop's options a state records (`ResumeContract`): those that decide the batches or the updates,
    and those its optimizer state restores whatever is given (docs/training.md, "Faults and resuming")."""
    checked = {
        "max_tokens": batching.max_tokens,
        "batch_order": batching.batch_order,
        "batch_size_multiple": batching.batch_size_multiple,
        "seed": args.seed,
        "gradient_accumulation_steps": args.gradient_accumulation_steps,
        "num_processes": state.num_processes,
        "warmup_steps": args.warmup_steps,  # the schedule is built anew on resuming
        "max_grad_norm": args.max_grad_norm,
        "mixed_precision": args.mixed_precision,
    }
    restored = {
        "lr_scale": args.lr_scale,
        "adam_beta1": args.adam_beta1,
        "adam_beta2": args.adam_beta2,
        "adam_epsilon": args.adam_epsilon,
    }
    return checked, restored


@dataclass
class Progress:
    """Where the loop stands; `save_state` and `load_state` keep it with the model, optimizer and schedule."""

    step: int = 0  # optimizer updates done
    epoch: int = 0
    batches_in_epoch: int = 0  # batches this process has taken in the current epoch

    def state_dict(self) -> dict:
        return asdict(self)

    def load_state_dict(self, state: dict) -> None:
        for name, value in state.items():
            setattr(self, name, value)


def save_whole_state(
    accelerator: Accelerator, folder: Path, step: int, contract: ResumeContract | None = None
) -> None:
    """`save_state` and what decides the run's batches and model (`contract`), then, once every process has
    written its part, the record that the state is whole (resuming and averaging skip a folder without it);
    that of an earlier save into the folder goes first."""
    if accelerator.is_main_process:
        forget_complete_record(folder)
    accelerator.wait_for_everyone()
    accelerator.save_state(folder)
    accelerator.wait_for_everyone()
    if accelerator.is_main_process:
        if contract is not None:
            contract.save(folder)
        write_complete_record(folder, step)
    accelerator.wait_for_everyone()


def train_loop(
    model,
    tokenizer,
    train_dataset,
    args: LoopArguments,
    batching: BatchingArguments,
    interruption: Interruption | None = None,
    contract: ResumeContract | None = None,
) -> Path:
    """Train `model` on a tokenized dataset (`input_ids`, `labels`) and save `<output_dir>/final`, which is
    returned. `batching` says how `token_budget_sampler` cuts the batches. A SIGINT or SIGTERM
    (`interruption`) saves the state at the update reached and stops, with no final folder. Each state holds
    `contract`'s record of what decides the batches and the model, when given.

    Every process builds the same list of batches; Accelerate gives each process every n-th of them and
    averages the gradients, so all processes hold the same weights after every update. Only the main process
    writes the log and the final folder."""
    interruption = interruption if interruption is not None else Interruption()
    accelerator = Accelerator(mixed_precision=args.mixed_precision, cpu=args.use_cpu)
    if tf32_available(args.use_cpu):
        torch.set_float32_matmul_precision("high")  # TF32 for what runs in float32, as the Trainer's --tf32
    if accelerator.distributed_type in (DistributedType.FSDP, DistributedType.DEEPSPEED):
        # This loop saves the model from the main process alone, which holds all of it only under DDP.
        raise UsageError(
            f"This loop trains with DDP, not {accelerator.distributed_type.value}: launch it with "
            "multi_gpu.yaml or multi_node.yaml, or train with scripts/train.py."
        )
    set_seed(args.seed)
    output_dir = Path(args.output_dir)
    sampler = token_budget_sampler(
        train_dataset, batching.max_tokens, batching.batch_order, batching.batch_size_multiple, seed=args.seed
    )
    loader = DataLoader(
        train_dataset,
        batch_sampler=sampler,
        collate_fn=build_seq2seq_collator(tokenizer, model=model),
        # Its own generator: starting an epoch then draws nothing from the global RNG (dropout's), so a
        # resumed run draws the same dropout masks as an uninterrupted one.
        generator=torch.Generator().manual_seed(args.seed),
    )
    peak = args.lr_scale * paper_peak_learning_rate(model.config.d_model, max(1, args.warmup_steps))
    betas = (args.adam_beta1, args.adam_beta2)
    optimizer = torch.optim.AdamW(
        model.parameters(), lr=peak, betas=betas, eps=args.adam_epsilon, weight_decay=0
    )
    model, optimizer, loader = accelerator.prepare(model, optimizer, loader)
    # Eq. 3; not prepared: a prepared scheduler steps once per process, but the schedule counts updates.
    schedule = get_scheduler("inverse_sqrt", optimizer.optimizer, num_warmup_steps=args.warmup_steps)
    progress = Progress()
    accelerator.register_for_checkpointing(schedule, progress)
    if args.resume_from_checkpoint:
        accelerator.load_state(args.resume_from_checkpoint)
        accelerator.print(f"Resumed from {args.resume_from_checkpoint} at step {progress.step}.")
    loss_log = LossLog(output_dir) if accelerator.is_main_process else None
    if loss_log is not None:
        loss_log.resume(progress.step)  # each step once, whatever the stopped run wrote after its state
    interruption.phase = Interruption.TRAINING
    agreement = StepAgreement(interruption, None, accelerator)

    model.train()
    running_loss, updates_since_log, batches = torch.zeros((), device=accelerator.device), 0, None
    while progress.step < args.max_steps:
        # The loader passes its epoch to the sampler when it holds it directly (one process), and not when it
        # holds it wrapped (several): set both, so each epoch has its own order, and a resumed run the same.
        loader.set_epoch(progress.epoch)
        sampler.set_epoch(progress.epoch)
        skip = progress.batches_in_epoch  # after resuming, the batches this epoch already trained on
        batches = iter(accelerator.skip_first_batches(loader, skip) if skip else loader)
        while progress.step < args.max_steps and (
            window := list(itertools.islice(batches, args.gradient_accumulation_steps))  # one update
        ):
            # Every target token of the update weighs the same, whichever micro-batch and process holds it.
            tokens = sum(batch["labels"].ne(-100).sum() for batch in window).to(accelerator.device)
            tokens = accelerator.reduce(tokens, reduction="sum")
            for index, batch in enumerate(window):
                progress.batches_in_epoch += 1
                last = index == len(window) - 1  # gradients are all-reduced once, after the last micro-batch
                with contextlib.nullcontext() if last else accelerator.no_sync(model):
                    loss = model(**batch, num_items_in_batch=tokens).loss
                    # The all-reduce averages over processes; the loss is already a share of all of them.
                    accelerator.backward(loss * accelerator.num_processes)
                running_loss += loss.detach().float()
            grad_norm = (
                accelerator.clip_grad_norm_(model.parameters(), args.max_grad_norm)
                if args.max_grad_norm
                else None
            )
            optimizer.step()
            optimizer.zero_grad()
            learning_rate = schedule.get_last_lr()[0]  # the rate this update used, as the Trainer logs it
            if not accelerator.optimizer_step_was_skipped:  # fp16 skips updates whose gradients overflowed
                schedule.step()
            progress.step += 1
            updates_since_log += 1
            if progress.step % args.logging_steps == 0 or progress.step == args.max_steps:
                # Each process holds its share of every update's loss: summed over processes, averaged over
                # the updates since the last record.
                mean = accelerator.gather((running_loss / updates_since_log).reshape(1)).sum().item()
                logs = {
                    "loss": mean,
                    "learning_rate": learning_rate,
                    "epoch": progress.epoch + progress.batches_in_epoch / len(loader),
                }
                if grad_norm is not None:
                    logs["grad_norm"] = float(grad_norm)
                if loss_log is not None:
                    accelerator.print(loss_log.write(progress.step, logs))
                running_loss, updates_since_log = torch.zeros_like(running_loss), 0
            # Ctrl-C or SIGTERM on any process: every process saves after the same update, and stops.
            stop = agreement.after_step(progress.step)
            if stop or progress.step % args.save_steps == 0 or progress.step == args.max_steps:
                folder = output_dir / f"{STATE_PREFIX}{progress.step}"
                save_whole_state(accelerator, folder, progress.step, contract)
                if accelerator.is_main_process:
                    rotate_checkpoints(
                        str(output_dir), args.save_total_limit, checkpoint_prefix=STATE_PREFIX[:-1]
                    )
            if stop:
                interruption.received = interruption.received or signal.SIGTERM
                interruption.stopped = True
                name, folder = signal.Signals(interruption.received).name, f"{STATE_PREFIX}{progress.step}"
                if accelerator.is_main_process:
                    print(stopped_message(name, progress.step, output_dir / folder), file=sys.stderr)
                break
        if interruption.stopped:
            break
        if progress.step < args.max_steps:
            progress.epoch += 1
            progress.batches_in_epoch = 0

    accelerator.wait_for_everyone()
    final = output_dir / "final"
    interruption.phase = Interruption.AFTER
    if accelerator.is_main_process and not interruption.stopped:
        save_whole_folder(accelerator.unwrap_model(model), tokenizer, final)
    if loss_log is not None:
        loss_log.plot()
    # The DDP wrapper and the loader are released while every process is still in the process group: a
    # process can hang destroying them after its peer has left.
    del model, optimizer, loader, batches
    accelerator.free_memory()
    accelerator.end_training()
    return final


def check_loop_options(data_args: DataArguments, batching: BatchingArguments) -> None:
    """Refuse what this loop does not train with: batches of a fixed number of pairs, a stream."""
    if batching.max_tokens is None:
        raise UsageError("The loop batches by token budget: set --max_tokens (e.g. --max_tokens 4096).")
    if data_args.streaming:
        raise UsageError("This loop trains on data held on disk: drop --streaming, or use scripts/train.py.")


def loop_run_finished(checkpoint: str, args: LoopArguments) -> str | None:
    """The line a run resumed from the state `checkpoint` says if that state ends it (--max_steps reached),
    else None."""
    step = step_of(Path(checkpoint))
    if step < args.max_steps:
        return None
    reached, further = f"step {step} of --max_steps {args.max_steps}", f"raise --max_steps above {step}"
    return finished_message(args.output_dir, checkpoint, reached, further)


def main() -> None:
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    parser = make_parser(ModelArguments, DataArguments, BatchingArguments, LoopArguments, description=__doc__)
    model_args, data_args, batching, args = parse_dataclasses(parser)

    # Options: each refused in one line before anything is read; the loop's own first. A signal stops the run
    # from there on (before training, at once).
    check_loop_options(data_args, batching)
    interruption = Interruption()
    interruption.install()
    state = PartialState(cpu=args.use_cpu)
    check_options(model_args, data_args, args.output_dir)

    # Tokenizer and configuration: the configuration the model will be built from, read without building it.
    tokenizer = AutoTokenizer.from_pretrained(data_args.tokenizer)
    config = model_config(model_args, tokenizer)

    # Checks, before any data is read. Every refusal that needs no state to resume comes before
    # `prepare_output_dir`, which with --overwrite deletes the earlier run that such a refusal must leave
    # whole; a resume is then checked against its state's record of the run.
    check_lengths_fit(data_args, config)
    contract = ResumeContract(lambda: resume_options(args, batching, state), args.allow_changed_options)
    prefix = STATE_PREFIX[:-1]  # the folders are state-<step>
    try:
        checkpoint, replaces_final = resume_point(
            args,
            contract,
            model_args,
            data_args,
            finished=lambda folder: loop_run_finished(folder, args),
            checkpoint_prefix=prefix,
        )
    except RunFinished as finished:
        leave_finished_run(finished, state.is_main_process, state.num_processes)
        return
    prepare_output_dir(args.output_dir, bool(checkpoint), args.overwrite)
    overrides = load_config_overrides(model_args.config_overrides)
    contract.describe(model_args, data_args, tokenizer, config, overrides)
    check_resume(
        checkpoint, contract, config, args.output_dir, state, replaces_final, checkpoint_prefix=prefix
    )

    # Data: tokenized (the main process of each machine first), the training pairs checked against the
    # state's when resuming.
    datasets_ = tokenized_data(data_args, tokenizer, state, contract, checkpoint)

    # Model: built after seeding, so that the seed fixes the initial weights too.
    model = seeded_model(model_args, data_args, tokenizer, args.seed)
    say_what_trains(model_args, data_args, model, datasets_["train"])

    # Training and saving: the loop, which saves a state every --save_steps and at a signal, and the final
    # folder at its end.
    final = train_loop(model, tokenizer, datasets_["train"], args, batching, interruption, contract)
    status = interruption.exit_status if interruption.stopped else 0
    if state.is_main_process and not status:
        print(f"Saved the trained model to {final}")
    if state.num_processes > 1:
        leave_launched_process(status)
    if status:
        raise SystemExit(status)


if __name__ == "__main__":
    run_script(main)
