"""The paper's training recipe (§5) on top of `Seq2SeqTrainer`: schedule, token-budget batches, loss log and
plots, time budget, recipe files, checkpoint averaging. The Accelerate loop (`accelerate_training.py`) reads
the same recipe through the same pieces.

What comes from libraries: the optimizer (Adam in `Seq2SeqTrainingArguments`), the warmup + inverse
square-root schedule (transformers' `inverse_sqrt`), label smoothing (`torch.nn.functional.cross_entropy`,
inside the model), padding (`DataCollatorForSeq2Seq`), distributed sharding and mixed precision
(Accelerate, through the Trainer), argument and recipe parsing (`HfArgumentParser`). What is written here
because no well-kept library offers it for the Trainer: batches filled up to a token budget (fairseq's
`--max-tokens`, which is how the paper batched, §5.1), and averaging the weights of the last N checkpoints
(§6.1).
"""

from __future__ import annotations

import dataclasses
import difflib
import json
import logging
import random
import re
import sys
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import torch
import yaml
from accelerate import PartialState
from accelerate.utils import broadcast
from safetensors.torch import load_file
from tqdm.auto import tqdm
from transformers import (
    HfArgumentParser,
    ProgressCallback,
    SchedulerType,
    Seq2SeqTrainer,
    Seq2SeqTrainingArguments,
    TrainerCallback,
    set_seed,
)
from transformers.trainer_pt_utils import BatchRebalanceSampler

from .cli import parse_dataclasses
from .configuration_vanilla_transformer import PRESETS, VanillaTransformerConfig
from .data.preprocessing import build_seq2seq_collator
from .modeling_vanilla_transformer import VanillaTransformerForConditionalGeneration
from .tasks import DataArguments, make_compute_metrics, prepare_dataset

logger = logging.getLogger(__name__)

LOSS_PLOT_NAME = "loss_curves.png"
TASK_METRIC = "task_metric"  # stands for the task's own metric in `metric_for_best_model`
LOSS_LOG_NAME = "loss_log.jsonl"


# Schedule ------------------------------------------------------------------------------------------------


def paper_peak_learning_rate(d_model: int, warmup_steps: int) -> float:
    """Peak of eq. 3, reached at step `warmup_steps`: d_model^-0.5 · warmup_steps^-0.5.

    With this as `learning_rate`, transformers' `inverse_sqrt` schedule (linear warmup, then decay as
    1/sqrt(step)) is exactly eq. 3: lrate = d_model^-0.5 · min(step^-0.5, step · warmup_steps^-1.5).
    """
    if d_model < 1 or warmup_steps < 1:
        raise ValueError(f"d_model ({d_model}) and warmup_steps ({warmup_steps}) must be positive.")
    return d_model**-0.5 * warmup_steps**-0.5


def paper_learning_rate(step: int, d_model: int, warmup_steps: int) -> float:
    """Eq. 3 as the paper writes it (for checking the schedule, not for training)."""
    if step == 0:
        return 0.0
    return d_model**-0.5 * min(step**-0.5, step * warmup_steps**-1.5)


# Batching ------------------------------------------------------------------------------------------------


class TokenBudgetBatchSampler(BatchRebalanceSampler):
    """Batches of similar-length examples holding at most `max_tokens` padded tokens each (§5.1; fairseq's
    `--max-tokens`), instead of a fixed number of sentences.

    A batch's cost is `len(batch) * max(lengths in batch)`: what it occupies after padding. Batches are
    formed once from the examples sorted by length (ties broken by a seeded shuffle); each epoch shuffles
    the order of the batches with `seed + epoch`, so runs are reproducible and a resumed run sees the same
    batches. Under data parallelism, each of `num_replicas` ranks takes every `num_replicas`-th batch; the
    list is padded with repeated batches so all ranks take the same number of steps.

    It derives from transformers' `BatchRebalanceSampler` only for what the Trainer does with that type:
    pass it as a `batch_sampler` and not shard it a second time (this sampler is already rank-aware).
    """

    def __init__(
        self,
        lengths: Sequence[int],
        max_tokens: int,
        max_sentences: int | None = None,
        shuffle: bool = True,
        seed: int = 0,
        num_replicas: int = 1,
        rank: int = 0,
    ):
        if max_tokens < 1:
            raise ValueError(f"`max_tokens` must be positive, got {max_tokens}.")
        longest = max(lengths) if len(lengths) else 0
        if longest > max_tokens:
            raise ValueError(
                f"An example of {longest} tokens exceeds the batch budget `max_tokens={max_tokens}`: raise "
                "the budget or filter long examples out first."
            )
        if not 0 <= rank < num_replicas:
            raise ValueError(f"`rank` ({rank}) must be in [0, num_replicas={num_replicas}).")
        self.max_tokens = max_tokens
        self.max_sentences = max_sentences
        self.shuffle = shuffle
        self.seed = seed
        self.num_replicas = num_replicas
        self.rank = rank
        self.epoch = 0
        self.batches = self._make_batches(list(lengths))

    def _make_batches(self, lengths: list[int]) -> list[list[int]]:
        order = list(range(len(lengths)))
        random.Random(self.seed).shuffle(order)  # random tie-breaking among equal lengths
        order.sort(key=lambda i: lengths[i])
        batches, batch, batch_max = [], [], 0
        for index in order:
            new_max = max(batch_max, lengths[index])
            full = (len(batch) + 1) * new_max > self.max_tokens or (
                self.max_sentences is not None and len(batch) >= self.max_sentences
            )
            if batch and full:
                batches.append(batch)
                batch, new_max = [], lengths[index]
            batch.append(index)
            batch_max = new_max
        if batch:
            batches.append(batch)
        if self.num_replicas > 1 and len(batches) % self.num_replicas:
            batches += batches[: self.num_replicas - len(batches) % self.num_replicas]
        return batches

    def set_epoch(self, epoch: int) -> None:
        self.epoch = epoch

    def __iter__(self) -> Iterator[list[int]]:
        order = list(range(len(self.batches)))
        if self.shuffle:
            random.Random(self.seed + self.epoch).shuffle(order)
        for position in order[self.rank :: self.num_replicas]:
            yield self.batches[position]

    def __len__(self) -> int:
        return len(self.batches) // self.num_replicas


def example_lengths(dataset) -> list[int]:
    """Padded cost of each tokenized example: the longer of its source and its target."""
    if hasattr(dataset, "column_names"):  # a `datasets.Dataset`: read two columns, not every row
        return [max(len(s), len(t)) for s, t in zip(dataset["input_ids"], dataset["labels"], strict=True)]
    return [max(len(example["input_ids"]), len(example["labels"])) for example in dataset]


class TokenBudgetSeq2SeqTrainer(Seq2SeqTrainer):
    """`Seq2SeqTrainer` that, given `max_tokens`, trains on token-budget batches (`TokenBudgetBatchSampler`)
    instead of a fixed `per_device_train_batch_size`, and given `clock_decay`, decays the learning rate over
    that time budget (`clock_linear_schedule`). Everything else is the stock Trainer."""

    def __init__(self, *args, max_tokens: int | None = None, clock_decay: TimeBudget | None = None, **kwargs):
        self.max_tokens = max_tokens
        self.clock_decay = clock_decay
        super().__init__(*args, **kwargs)

    def create_scheduler(self, num_training_steps: int, optimizer: torch.optim.Optimizer | None = None):
        if self.lr_scheduler is None and self.clock_decay is not None:
            self.lr_scheduler = clock_linear_schedule(
                optimizer if optimizer is not None else self.optimizer,
                self.args.get_warmup_steps(num_training_steps),
                self.clock_decay,
            )
            self._created_lr_scheduler = True
        return super().create_scheduler(num_training_steps, optimizer)

    def _get_train_sampler(self, train_dataset=None):
        if self.max_tokens is None:
            return super()._get_train_sampler(train_dataset)
        dataset = train_dataset if train_dataset is not None else self.train_dataset
        return TokenBudgetBatchSampler(
            example_lengths(dataset),
            max_tokens=self.max_tokens,
            seed=self.args.seed,
            num_replicas=self.args.world_size,
            rank=self.args.process_index,
        )


# Logging and time budget -----------------------------------------------------------------------------------


class LossLog:
    """The log of a run folder: one JSON record per logging event appended to `loss_log.jsonl`, e.g.
    `{"step": 50, "loss": 5.1, "learning_rate": 0.0012, "epoch": 0.4}` or `{"step": 200, "eval_loss": 4.2,
    "eval_bleu": 9.8}`, and the loss curves drawn from it into `loss_curves.png`. Both training loops write
    through it (the Trainer through `LossPlotCallback`), so their logs read alike. Call it on one process."""

    def __init__(self, output_dir: str | Path):
        self.folder = Path(output_dir)
        self.train: list[tuple[int, float]] = []
        self.eval: list[tuple[int, float]] = []

    def write(self, step: int, logs: dict) -> dict:
        """Append the numbers of `logs` (strings and other values are left out) as the record of `step`."""
        record = {"step": step, **{k: v for k, v in logs.items() if isinstance(v, int | float)}}
        if "loss" in record:
            self.train.append((step, float(record["loss"])))
        if "eval_loss" in record:
            self.eval.append((step, float(record["eval_loss"])))
        self.folder.mkdir(parents=True, exist_ok=True)
        with open(self.folder / LOSS_LOG_NAME, "a", encoding="utf-8") as log_file:
            log_file.write(json.dumps(record) + "\n")
        return record

    def plot(self) -> None:
        """Redraw `loss_curves.png` from the records written so far (nothing to draw, nothing drawn)."""
        if self.train or self.eval:
            plot_loss_curves(self.train, self.eval, self.folder / LOSS_PLOT_NAME)


class LossPlotCallback(TrainerCallback):
    """Keeps the `LossLog` of a Trainer run next to its checkpoints, and redraws `loss_curves.png` there at
    every evaluation and at the end: people would rather look than read."""

    def __init__(self):
        self.log: LossLog | None = None

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
    import matplotlib

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
    fig.savefig(path, dpi=100)
    plt.close(fig)


class TimeBudget:
    """Wall time allowed for training, counted from `start()`. For recipes with a time budget rather than
    a step count. A resumed run continues the clock where its checkpoint left it (`state_dict`).

    Under data parallelism every process must stop after the same step (the others would wait forever in
    the next gradient all-reduce) and use the same learning rate, so `elapsed()` returns the main process's
    reading on every process."""

    STATE_FILE = "time_budget.json"  # in each checkpoint folder of a Trainer run

    def __init__(self, minutes: float):
        if minutes <= 0:
            raise ValueError(f"The time budget must be positive, got {minutes} minutes.")
        self.minutes = minutes
        self.started: float | None = None
        self.spent_before = 0.0  # seconds spent before a resume
        self.decay_from: float | None = None  # share of the budget spent when a clock decay began

    def start(self) -> None:
        self.started = time.monotonic() - self.spent_before

    def elapsed(self) -> float:
        """Seconds of the budget spent so far (before `start()`: those spent before a resume)."""
        elapsed = self.spent_before if self.started is None else time.monotonic() - self.started
        state = PartialState()
        if state.num_processes > 1:
            reading = torch.tensor([elapsed], dtype=torch.float64, device=state.device)
            elapsed = float(broadcast(reading, from_process=0).item())
        return elapsed

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
        if self.started is not None:
            self.start()

    def save(self, folder: str | Path, write: bool = True) -> None:
        """Record the time spent in the checkpoint `folder`; every process calls it (the reading is shared),
        the one with `write` writes."""
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


def clock_linear_schedule(
    optimizer: torch.optim.Optimizer, warmup_steps: int, budget: TimeBudget
) -> torch.optim.lr_scheduler.LambdaLR:
    """transformers' `linear` schedule with its decay counted in the budget's minutes instead of steps:
    linear warmup over `warmup_steps` updates, then a linear decay that reaches zero as the clock stops the
    run. A run ended by a time budget then ends at a learning rate of zero on a machine of any speed, where a
    step-counted decay must guess how many steps fit. transformers has no schedule driven by wall time, so
    this one is written here; the learning rate at a step depends on the machine's speed, as the step count
    of any clock-ended run does."""

    def factor(step: int) -> float:
        if step < warmup_steps:
            return step / max(1, warmup_steps)
        spent = budget.fraction()
        if budget.decay_from is None:
            budget.decay_from = min(spent, 0.99)
        return max(0.0, (1.0 - spent) / (1.0 - budget.decay_from))

    # A closure, not a callable object: `LambdaLR.state_dict` would pickle an object's attributes (the budget)
    # into the checkpoint; the budget keeps its own state.
    return torch.optim.lr_scheduler.LambdaLR(optimizer, factor)


class TimeBudgetCallback(TrainerCallback):
    """Stops a Trainer run once its `TimeBudget` is spent; the Trainer then saves and evaluates as at the end
    of any run. Each checkpoint records the time spent, so that a resumed run continues the clock."""

    def __init__(self, budget: TimeBudget):
        self.budget = budget

    def on_train_begin(self, args, state, control, **kwargs):
        self.budget.start()

    def on_step_end(self, args, state, control, **kwargs):
        if self.budget.spent():
            logger.info(
                "Time budget of %.1f minutes reached at step %d.", self.budget.minutes, state.global_step
            )
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


# Checkpoint averaging ------------------------------------------------------------------------------------


def last_checkpoints(run_dir: str | Path, n: int) -> list[Path]:
    """The `n` most recent `checkpoint-<step>` folders of a Trainer run, oldest first."""
    run_dir = Path(run_dir)
    found = sorted(
        (p for p in run_dir.glob("checkpoint-*") if re.fullmatch(r"checkpoint-\d+", p.name) and p.is_dir()),
        key=lambda p: int(p.name.split("-")[1]),
    )
    if len(found) < n:
        raise ValueError(
            f"Asked to average {n} checkpoints but {run_dir} has {len(found)}: "
            f"{[p.name for p in found] or 'none'}. Train with a larger `save_total_limit` or average fewer."
        )
    return found[-n:]


def average_checkpoints(checkpoints: Sequence[str | Path], output_dir: str | Path) -> Path:
    """Average the weights of several checkpoints of one model (§6.1: "averaging the last 5 checkpoints")
    and write a normal `save_pretrained` folder (config, generation config and tokenizer of the last one)."""
    from transformers import AutoModelForSeq2SeqLM, AutoTokenizer

    from .saving import save_model_folder

    if not checkpoints:
        raise ValueError("No checkpoints to average.")
    total: dict[str, torch.Tensor] = {}
    for checkpoint in checkpoints:
        weights = Path(checkpoint) / "model.safetensors"
        if not weights.exists():
            raise FileNotFoundError(f"{weights} not found: each checkpoint must hold safetensors weights.")
        state = load_file(weights)
        if total and state.keys() != total.keys():
            raise ValueError(
                f"{checkpoint} holds different weights from {checkpoints[0]}: not the same model."
            )
        for name, tensor in state.items():
            total[name] = total.get(name, 0) + tensor.double()
    last = Path(checkpoints[-1])
    model = AutoModelForSeq2SeqLM.from_pretrained(last)
    averaged = {
        name: (tensor / len(checkpoints)).to(model.state_dict()[name].dtype) for name, tensor in total.items()
    }
    missing, unexpected = model.load_state_dict(averaged, strict=False)
    if unexpected or any(not _is_tied_or_buffer(model, key) for key in missing):
        raise ValueError(
            f"Checkpoint weights do not fit the model: missing {missing}, unexpected {unexpected}."
        )
    model.tie_weights()
    output_dir = Path(output_dir)
    try:
        tokenizer = AutoTokenizer.from_pretrained(last)
    except (OSError, ValueError):
        logger.warning("No tokenizer in %s; the averaged model folder has none.", last)
        model.save_pretrained(output_dir)
    else:
        save_model_folder(model, tokenizer, output_dir)
    (output_dir / "averaged_from.json").write_text(json.dumps([str(c) for c in checkpoints], indent=2))
    return output_dir


def _is_tied_or_buffer(model, key: str) -> bool:
    """Keys absent from a safetensors file by design: tied copies and non-persistent buffers."""
    return key in model.get_expanded_tied_weights_keys(all_submodels=True) or "embed_positions" in key


# The training job ------------------------------------------------------------------------------------------


@dataclass
class ModelArguments:
    """Which model to train: a named preset plus overrides, a config JSON, or a saved model to continue."""

    preset: str = field(default="transformer-small", metadata={"help": f"One of {', '.join(PRESETS)}."})
    config_overrides: dict | str | None = field(
        default=None,
        metadata={
            "help": "Config fields over the preset: a mapping in a recipe file; on the command line a JSON "
            "object, e.g. '{\"dropout\": 0.3}', or the path of a JSON file."
        },
    )
    model_name_or_path: str | None = field(
        default=None, metadata={"help": "Start from a saved model instead."}
    )
    attn_implementation: str = field(default="sdpa", metadata={"help": "sdpa (default) or eager."})


@dataclass
class RecipeArguments:
    """How the learning rate is set and how long training may take (the rest of the recipe is in
    `PaperSeq2SeqTrainingArguments`)."""

    paper_learning_rate: bool = field(
        default=True,
        metadata={
            "help": "Set the peak learning rate by eq. 3 (lr_scale * d_model^-0.5 * warmup^-0.5), "
            "ignoring --learning_rate."
        },
    )
    lr_scale: float = field(default=1.0, metadata={"help": "Multiplier of the eq. 3 learning rate."})
    max_train_minutes: float | None = field(
        default=None, metadata={"help": "Stop training (and save) after this many minutes of wall time."}
    )
    decay_by_clock: bool = field(
        default=False,
        metadata={
            "help": "With lr_scheduler_type linear and max_train_minutes: decay to zero as the time budget "
            "ends, not at max_steps (which is then only an upper bound)."
        },
    )

    def check(self, training_args: Seq2SeqTrainingArguments) -> None:
        """Refuse a combination that cannot be trained, naming the options to change."""
        if not self.decay_by_clock:
            return
        if self.max_train_minutes is None:
            raise ValueError(
                "decay_by_clock decays the learning rate over the time budget: set --max_train_minutes too."
            )
        if SchedulerType(training_args.lr_scheduler_type) != SchedulerType.LINEAR:
            raise ValueError(
                "decay_by_clock is a linear decay: set --lr_scheduler_type linear (got "
                f"{SchedulerType(training_args.lr_scheduler_type).value})."
            )

    def time_budget(self) -> TimeBudget | None:
        return TimeBudget(self.max_train_minutes) if self.max_train_minutes is not None else None


@dataclass
class PaperSeq2SeqTrainingArguments(Seq2SeqTrainingArguments):
    """`Seq2SeqTrainingArguments` whose defaults are the paper's recipe (§5.3): Adam with betas (0.9, 0.98)
    and eps 1e-9 (torch's AdamW with no weight decay is Adam), no gradient clipping, linear warmup then
    inverse square-root decay over 4000 warmup steps; plus generation during evaluation so the task metric
    can pick the best checkpoint. Both training loops read these fields."""

    output_dir: str | None = field(
        default="outputs/run", metadata={"help": "Where checkpoints, logs and the final model go."}
    )
    adam_beta1: float = field(default=0.9, metadata={"help": "Adam's beta1 (§5.3: 0.9)."})
    adam_beta2: float = field(default=0.98, metadata={"help": "Adam's beta2 (§5.3: 0.98)."})
    adam_epsilon: float = field(default=1e-9, metadata={"help": "Adam's epsilon (§5.3: 1e-9)."})
    weight_decay: float = field(
        default=0.0,
        metadata={
            "help": "Decoupled weight decay (AdamW) on all weights but biases and LayerNorm (paper: 0)."
        },
    )
    max_grad_norm: float = field(
        default=0.0, metadata={"help": "Clip gradients to this global norm; 0 does not clip (the paper's)."}
    )
    lr_scheduler_type: SchedulerType | str = field(
        default="inverse_sqrt",
        metadata={"help": "Learning-rate schedule after warmup; inverse_sqrt with the eq. 3 peak is eq. 3."},
    )
    warmup_steps: float = field(
        default=4000,
        metadata={"help": "Linear warmup steps (§5.3: 4000); below 1, a fraction of the training steps."},
    )
    predict_with_generate: bool = field(
        default=True, metadata={"help": "Generate during evaluation so the task metric can be computed."}
    )
    save_total_limit: int | None = field(
        default=5,
        metadata={"help": "Keep this many checkpoints (the best one as well); §6.1 averages the last 5."},
    )
    metric_for_best_model: str | None = field(
        default=TASK_METRIC,
        metadata={"help": f"'{TASK_METRIC}' (default) is the task's metric: BLEU or exact match."},
    )
    resume_from_checkpoint: str | None = field(
        default=None,
        metadata={
            "help": "Continue a run from a checkpoint-<step> folder (train.py) or a state-<step> folder "
            "(train_accelerate.py)."
        },
    )
    dataloader_pin_memory: bool = field(
        default=torch.cuda.is_available(),
        metadata={"help": "Pin batches in page-locked memory for faster copies to a GPU (on with CUDA)."},
    )


TRAINING_ARGUMENTS = (ModelArguments, DataArguments, RecipeArguments, PaperSeq2SeqTrainingArguments)
RECIPE_SUFFIXES = (".yaml", ".yml", ".json")


def parse_recipe_and_args(parser: HfArgumentParser, args: Sequence[str] | None = None) -> tuple:
    """Parse `[recipe file] [--option value ...]` into the parser's dataclasses: the recipe's values replace
    the defaults, and options on the command line replace the recipe's.

    A recipe is a YAML (or JSON) mapping of option names to values, the keys that
    `HfArgumentParser.parse_yaml_file` reads; `config_overrides` may be a nested mapping. Its values become
    the parser's defaults, so they go through the same conversions as command-line values (`1e-9` in YAML is
    a string; it still becomes a float). A key that is no option, or a missing file, raises an error naming
    the key or the path.
    """
    args = list(sys.argv[1:] if args is None else args)
    if args and not args[0].startswith("-") and args[0].endswith(RECIPE_SUFFIXES):
        parser.set_defaults(**load_recipe(args.pop(0), parser))
    return parse_dataclasses(parser, args)


def load_recipe(path: str | Path, parser: HfArgumentParser) -> dict:
    """Read a recipe file into a dict, checking that each key is an option of `parser`'s dataclasses."""
    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"No recipe file at {path}: give the path of a .yaml (or .json) recipe.")
    text = path.read_text(encoding="utf-8")
    try:
        recipe = json.loads(text) if path.suffix == ".json" else yaml.safe_load(text)
    except (json.JSONDecodeError, yaml.YAMLError) as error:
        raise ValueError(f"Recipe {path} does not parse: {error}") from error
    if not isinstance(recipe, dict):
        raise ValueError(f"Recipe {path} must be a mapping of option names to values, got {recipe!r}.")
    options = {f.name for dtype in parser.dataclass_types for f in dataclasses.fields(dtype) if f.init}
    unknown = sorted(set(recipe) - options)
    if unknown:
        hints = []
        for key in unknown:
            close = difflib.get_close_matches(key, options, n=1)
            hints.append(f"{key!r} (did you mean {close[0]!r}?)" if close else repr(key))
        raise ValueError(
            f"Recipe {path} sets {', '.join(hints)}: not an option of "
            f"{', '.join(dtype.__name__ for dtype in parser.dataclass_types)}. `--help` lists the options."
        )
    return recipe


def load_config_overrides(value: dict | str | None) -> dict:
    """Read `config_overrides`: a mapping (from a recipe file), inline JSON, or the path of a JSON file."""
    if not value:
        return {}
    if isinstance(value, dict):
        return dict(value)
    text = Path(value).read_text() if Path(value).is_file() else value
    try:
        overrides = json.loads(text)
    except json.JSONDecodeError as error:
        raise ValueError(
            f"--config_overrides is neither a JSON object nor a JSON file: {value!r} ({error})."
        ) from error
    if not isinstance(overrides, dict):
        raise ValueError(f"--config_overrides must be a JSON object of config fields, got {overrides!r}.")
    return overrides


def build_model(model_args: ModelArguments, tokenizer) -> VanillaTransformerForConditionalGeneration:
    """A fresh model sized to the tokenizer (or a saved one), with the tokenizer's special-token ids."""
    if model_args.model_name_or_path:
        return VanillaTransformerForConditionalGeneration.from_pretrained(
            model_args.model_name_or_path, attn_implementation=model_args.attn_implementation
        )
    specials = {
        "pad_token_id": tokenizer.pad_token_id,
        "bos_token_id": tokenizer.bos_token_id,
        "eos_token_id": tokenizer.eos_token_id,
        "decoder_start_token_id": tokenizer.bos_token_id,
    }
    config = VanillaTransformerConfig.from_preset(
        model_args.preset,
        vocab_size=len(tokenizer),
        **specials,
        **load_config_overrides(model_args.config_overrides),
    )
    return VanillaTransformerForConditionalGeneration._from_config(
        config, attn_implementation=model_args.attn_implementation
    )


def set_paper_learning_rate(
    recipe_args: RecipeArguments, training_args: Seq2SeqTrainingArguments, d_model: int
) -> float:
    """Set `training_args.learning_rate` to `lr_scale` times eq. 3's peak (unless `paper_learning_rate` is
    off) and return the learning rate training will peak at."""
    if recipe_args.paper_learning_rate:
        training_args.learning_rate = recipe_args.lr_scale * paper_peak_learning_rate(
            d_model, max(1, int(training_args.warmup_steps))
        )
    return training_args.learning_rate


def prepare_training(
    model_args: ModelArguments,
    data_args: DataArguments,
    recipe_args: RecipeArguments,
    training_args: PaperSeq2SeqTrainingArguments,
):
    """What both training loops start from: the tokenizer, the tokenized splits, and the model, built after
    seeding with `training_args.seed` so that a recipe's seed fixes the initial weights too; sets the
    learning rate by eq. 3 (`set_paper_learning_rate`)."""
    from transformers import AutoTokenizer

    from .saving import check_tokenizer_location

    recipe_args.check(training_args)
    check_tokenizer_location(data_args.tokenizer)
    tokenizer = AutoTokenizer.from_pretrained(data_args.tokenizer)
    # Under several processes the main one tokenizes first and the others read what `datasets` cached (a
    # corpus of millions of pairs is tokenized once, not once per GPU).
    with training_args.main_process_first(desc="tokenizing the data"):
        datasets_ = prepare_dataset(data_args, tokenizer)
    set_seed(training_args.seed)
    model = build_model(model_args, tokenizer)
    set_paper_learning_rate(recipe_args, training_args, model.config.d_model)
    logger.info(
        "Model: %s, %.2fM parameters; peak learning rate %.2e; %d training pairs",
        model_args.model_name_or_path or model_args.preset,
        sum(p.numel() for p in model.parameters()) / 1e6,
        training_args.learning_rate,
        datasets_["train"].num_rows,
    )
    return tokenizer, datasets_, model


def run_training(
    model_args: ModelArguments,
    data_args: DataArguments,
    recipe_args: RecipeArguments,
    training_args: PaperSeq2SeqTrainingArguments,
) -> tuple[TokenBudgetSeq2SeqTrainer, Path]:
    """Train with `Seq2SeqTrainer` as configured, keep the best checkpoint by the task metric, and save the
    final model folder (weights, config, code, tokenizer, pipeline) to `<output_dir>/final`."""
    from .saving import save_model_folder

    tokenizer, datasets_, model = prepare_training(model_args, data_args, recipe_args, training_args)
    if training_args.metric_for_best_model == TASK_METRIC:
        training_args.metric_for_best_model = data_args.task_spec.best_metric
    callbacks = [LossPlotCallback()]
    budget = recipe_args.time_budget()
    if budget is not None:
        callbacks.append(TimeBudgetCallback(budget))
        checkpoint = training_args.resume_from_checkpoint
        if checkpoint and not budget.load(checkpoint):
            logger.warning("%s holds no %s: the time budget starts again.", checkpoint, TimeBudget.STATE_FILE)
    trainer = TokenBudgetSeq2SeqTrainer(
        model=model,
        args=training_args,
        train_dataset=datasets_["train"],
        eval_dataset=datasets_.get("validation"),
        processing_class=tokenizer,
        data_collator=build_seq2seq_collator(tokenizer, model=model),
        compute_metrics=make_compute_metrics(data_args.task_spec, tokenizer)
        if training_args.predict_with_generate
        else None,
        callbacks=callbacks,
        max_tokens=data_args.max_tokens,
        clock_decay=budget if recipe_args.decay_by_clock else None,
    )
    if recipe_args.max_train_minutes is not None and not training_args.disable_tqdm:
        trainer.remove_callback(ProgressCallback)
        trainer.add_callback(
            TimeBudgetProgressCallback(budget.minutes, spent_minutes=budget.spent_before / 60)
        )
    trainer.train(resume_from_checkpoint=training_args.resume_from_checkpoint)
    final = Path(training_args.output_dir) / "final"
    if trainer.is_world_process_zero():
        save_model_folder(trainer.model, tokenizer, final)
    return trainer, final
