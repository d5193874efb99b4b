"""What every task's data goes through: the arguments that name a task and its data set (with the task's
own options, `TaskChoice`), loading and tokenizing its splits (`prepare_dataset`, `prepare_stream`), the
check that a tokenizer fits them, and the metrics of `Seq2SeqTrainer`."""

from __future__ import annotations

import dataclasses
import logging
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from ..errors import UsageError
from ..lengths import LengthArguments
from ..options import Options
from .base import Task
from .registry import get_task, option_types, registered_tasks, task_named_in

# The data libraries (datasets, numpy, transformers) are imported by the functions that read data: a command
# parses these arguments, and answers `--help`, without them.
if TYPE_CHECKING:
    from datasets import Dataset, DatasetDict
    from transformers import EvalPrediction, PreTrainedTokenizerBase

logger = logging.getLogger(__name__)


class TaskChoice:
    """An arguments dataclass with a `task` field, and the options of the task it names (`options`): as the
    command line gave them (`take_options_from`), else as library code sets them (`with_options`), else their
    defaults. Each task's options are its own: only the chosen task's are made, so two tasks may have options
    of the same name."""

    task: str | None

    @classmethod
    def task_option_types(cls, argv: Sequence[str] = ()) -> dict[str, type]:
        """The options dataclass of every task, by name, the task file `argv` names imported first."""
        named = task_named_in(argv)
        if named is not None and named.endswith(".py"):
            get_task(named)
        return option_types()

    @classmethod
    def chosen_task(cls, argv: Sequence[str]) -> Task | None:
        """The installed task or the task file `argv` names (`--task`, a leading recipe's `task:`), if any."""
        named = task_named_in(argv)
        if named is not None and named.endswith(".py"):
            return get_task(named)
        return registered_tasks().get(named) if named is not None else None

    def take_options_from(self, make: Callable[[Task], Any]) -> None:
        """Make the chosen task's options with `make(task)`, the command line's parse of the strings it gave
        them: at once if the task is known, else as soon as it is (an evaluation's from its model)."""
        self._make_options, self._options_of = make, None
        if self.task is not None:
            _ = self.task_spec

    @property
    def task_spec(self) -> Task:
        """The `Task` object of `task`; its options are made the first time it is asked for."""
        if self.task is None:
            raise UsageError(f"No task given: pass --task ({' or '.join(sorted(registered_tasks()))}).")
        task = get_task(self.task)
        if getattr(self, "_options_of", None) != task.name:
            make = getattr(self, "_make_options", None)
            self._options = make(task) if make is not None else task.default_options()
            self._options_of = task.name
        return task

    @property
    def options(self):
        """The chosen task's options (None for a task without options)."""
        _ = self.task_spec
        return self._options

    def with_options(self, **values):
        """Set the chosen task's options, as library code gives them (`DataArguments(...).with_options(
        source_lang="fr")`); returns the arguments."""
        task = self.task_spec
        self._options, self._options_of = task.options(**values), task.name
        return self

    def options_record(self) -> dict:
        """The chosen task's options as a report records them."""
        options = self.options
        return dataclasses.asdict(options) if options is not None else {}


@dataclass
class DatasetArguments(TaskChoice, Options):
    """Which data set: what evaluation reads, and the first half of training's `DataArguments`."""

    task: str | None = field(
        default=None,
        metadata={
            "help": "A task's name or a Python file that defines one (docs/tasks.md); default: the model's "
            "own (its config's `task`)."
        },
    )
    dataset: str | None = field(
        default=None,
        metadata={
            "help": "Required. A `save_to_disk` folder, a folder of parquet/JSON Lines files, a folder of "
            "line-aligned text files (translation: train.de.gz, ...), or a Hub name (e.g. wmt14, "
            "bentrevett/multi30k)."
        },
    )
    dataset_config: str | None = field(default=None, metadata={"help": "Hub dataset config, e.g. de-en."})

    def __post_init__(self):
        super().__post_init__()
        if self.task is not None:  # a task file is imported here, and known by its task's name from now on
            self.task = get_task(self.task).name

    def record_in(self, config) -> None:
        """What a model trained on this data carries in its config: its `task` (the tools refuse it for
        another) and its `langs` where the task has languages (the pipeline splits a text by the source's
        rules)."""
        config.task = self.task_spec.name
        config.langs = self.task_spec.languages(self.options)

    def load_raw(self, streaming: bool = False) -> DatasetDict:
        """The task's raw splits of `dataset` (`Task.load_raw`)."""
        if not self.dataset:
            raise UsageError(
                "No data set given: pass --dataset (a prepared folder or a Hub name; "
                f"`{self.task_spec.data_made_by}` makes one)."
            )
        return self.task_spec.load_raw(self.dataset, self.dataset_config, self.options, streaming)


@dataclass
class DataArguments(LengthArguments, DatasetArguments):
    """Which data to train on, and how to tokenize it: the lengths of a pair's sides and what becomes of a
    longer pair are `lengths.LengthArguments`' (how it is batched is training's:
    `training.RecipeArguments`)."""

    # A fresh model has no task of its own to default to: required (`task_spec` says so when it is missing).
    task: str | None = field(
        default=None,
        metadata={"help": "Required. A task's name or a Python file that defines one (docs/tasks.md)."},
    )
    tokenizer: str | None = field(
        default=None,
        metadata={"help": "Required. Tokenizer folder (scripts/train_tokenizer.py) or Hub name."},
    )
    max_train_examples: int | None = field(
        default=None, metadata={"help": "Use only the first N training pairs.", "range": ">= 1"}
    )
    max_eval_examples: int | None = field(
        default=None, metadata={"help": "Evaluate on the first N pairs.", "range": ">= 1"}
    )
    num_proc: int | None = field(
        default=None, metadata={"help": "Processes for tokenization (Dataset.map).", "range": ">= 1"}
    )
    streaming: bool = field(
        default=False,
        metadata={
            "help": "Read the training split as a stream (Hub or a folder of data files), tokenized as it is "
            "read, for corpora larger than memory or disk; validation and test are read whole. Needs "
            "--max_tokens and --max_steps."
        },
    )
    max_unknown_token_share: float = field(
        default=0.05,
        metadata={
            "help": "Refuse to train when more than this share of the training tokens are the tokenizer's "
            "unknown token (it was trained for other data); 1 turns the check off.",
            "range": "[0, 1]",
        },
    )

    def record_in(self, config) -> None:
        """`DatasetArguments.record_in`, and the lengths of the pairs the model is trained on
        (`max_source_length`, `max_target_length`): decoding cuts a source to the length it was trained
        with."""
        super().record_in(config)
        config.max_source_length = self.max_source_length
        config.max_target_length = self.max_target_length


def load_split_texts(args: DatasetArguments, split) -> tuple[list[str], list[str]]:
    """Source and target texts of one split (a `Dataset`) of the task's raw data."""
    texts = []
    for column, key in args.task_spec.text_fields(args.options):
        values = split[column]
        texts.append([row[key] for row in values] if key is not None else list(values))
    return texts[0], texts[1]


def prepare_dataset(args: DataArguments, tokenizer: PreTrainedTokenizerBase) -> DatasetDict:
    """Load, subsample (if asked), augment (if asked) and tokenize the task's data; too-long pairs are dropped
    or truncated (`args.long_pairs`) and counted, and a tokenizer that does not fit the data is refused
    (`check_tokenizer_fits`). With `args.streaming`, the training split is a tokenized `IterableDataset`
    (`prepare_stream`)."""
    if args.streaming:
        return prepare_stream(args, tokenizer)
    from ..data.preprocessing import tokenize_pairs

    task = args.task_spec
    raw = args.load_raw()
    held_out = task.held_out_data(raw, args.options)  # before `max_eval_examples` cuts the held-out splits
    for split, limit in (
        ("train", args.max_train_examples),
        ("validation", args.max_eval_examples),
        ("test", args.max_eval_examples),
    ):
        if limit is not None and split in raw and raw[split].num_rows > limit:
            raw[split] = raw[split].select(range(limit))
    raw = task.add_training_data(raw, held_out, args.options)
    source, target = task.text_fields(args.options)
    tokenized, _ = tokenize_pairs(
        raw,
        tokenizer,
        source,
        target,
        args.max_source_length,
        args.max_target_length,
        num_proc=args.num_proc,
        long_pairs=args.long_pairs,
    )
    fitted = tokenized.get("train", next(iter(tokenized.values())))
    check_tokenizer_fits(fitted, tokenizer, args)
    return tokenized


# Files a `save_to_disk` training split is cut into when it is streamed: enough to share among processes.
_STREAM_SHARDS = 64


def prepare_stream(args: DataArguments, tokenizer: PreTrainedTokenizerBase) -> dict:
    """`prepare_dataset` for `--streaming`: the training split a stream, tokenized as it is read (too-long
    pairs dropped or truncated as they come); the held-out splits read whole and tokenized as
    `prepare_dataset` does. The tokenizer is checked on the stream's first pairs."""
    from datasets import Dataset, DatasetDict, IterableDataset

    from ..data.preprocessing import tokenize_pairs, tokenize_stream

    task = args.task_spec
    refusal = task.refuses_streaming(args.options)
    if refusal:
        raise UsageError(refusal)
    raw = args.load_raw(streaming=True)
    if "train" not in raw:
        raise UsageError(f"{args.dataset} has no train split to stream; splits found: {', '.join(raw)}.")
    train = raw.pop("train")
    if isinstance(train, Dataset):  # a folder on disk: read it as a stream of its Arrow files
        train = train.to_iterable_dataset(num_shards=max(1, min(_STREAM_SHARDS, train.num_rows)))
    if args.max_train_examples is not None:
        train = train.take(args.max_train_examples)
    held_out = DatasetDict()
    for split, dataset in raw.items():
        limit = args.max_eval_examples
        if isinstance(dataset, IterableDataset):  # small: read whole, as `prepare_dataset` reads it
            dataset = Dataset.from_list(list(dataset if limit is None else dataset.take(limit)))
        elif limit is not None:
            dataset = dataset.select(range(min(limit, dataset.num_rows)))
        held_out[split] = dataset
    source, target = task.text_fields(args.options)
    lengths = (args.max_source_length, args.max_target_length)
    tokenized, _ = tokenize_pairs(
        held_out, tokenizer, source, target, *lengths, args.num_proc, long_pairs=args.long_pairs
    )
    stream = tokenize_stream(train, tokenizer, source, target, *lengths, long_pairs=args.long_pairs)
    check_tokenizer_fits(Dataset.from_list(list(stream.take(_CHECKED_ROWS))), tokenizer, args)
    return {"train": stream, **tokenized}


# Above this share of unknown tokens a warning says the tokenizer may not fit; `max_unknown_token_share`
# refuses.
UNKNOWN_SHARE_WARNING = 0.01
# A BPE vocabulary this much larger than an alphabet should merge: fewer characters per token than this means
# its merges do not apply to the data (a tokenizer trained on other text splits it almost character by
# character).
MIN_CHARS_PER_TOKEN = 1.5
_CHECKED_ROWS = 10_000


def check_tokenizer_fits(tokenized: Dataset, tokenizer: PreTrainedTokenizerBase, args: DataArguments) -> dict:
    """Refuse a tokenizer whose unknown token covers more than `args.max_unknown_token_share` of the tokens of
    (the first 10,000 pairs of) a tokenized split, and warn at a smaller share or when a vocabulary of
    hundreds of tokens spends a token per character. Returns the measured `unknown_share` and
    `chars_per_token`."""
    rows = tokenized.select(range(min(_CHECKED_ROWS, tokenized.num_rows)))
    sequences = [*rows["input_ids"], *rows["labels"]]
    num_tokens = sum(len(ids) for ids in sequences)
    if num_tokens == 0:
        return {"unknown_share": 0.0, "chars_per_token": float("inf")}
    unknown = (
        0 if tokenizer.unk_token_id is None else sum(ids.count(tokenizer.unk_token_id) for ids in sequences)
    )
    share = unknown / num_tokens
    # Characters per token, special tokens (one </s> per sequence) aside.
    chars = sum(len(text) for text in tokenizer.batch_decode(sequences, skip_special_tokens=True))
    chars_per_token = chars / max(1, num_tokens - len(sequences))
    fix = (
        f"Train a tokenizer on this data (`python scripts/train_tokenizer.py --task {args.task} "
        f"--dataset <data> --output_dir <folder>`) and pass it with --tokenizer"
    )
    where = f"of the tokens of {rows.num_rows} pairs of {args.dataset} tokenized with {args.tokenizer}"
    if share > args.max_unknown_token_share:
        raise UsageError(
            f"{share:.1%} {where} are the unknown token {tokenizer.unk_token!r}, more than "
            f"max_unknown_token_share={args.max_unknown_token_share}: the tokenizer does not fit the data. "
            f"{fix}."
        )
    if share > UNKNOWN_SHARE_WARNING:
        logger.warning(
            "%.1f%% %s are the unknown token %r. %s.", 100 * share, where, tokenizer.unk_token, fix
        )
    if len(tokenizer) > 200 and chars_per_token < MIN_CHARS_PER_TOKEN:
        logger.warning(
            "The %d-token vocabulary of %s spends a token per %.2f characters of %s: its merges do not "
            "apply, so it was probably trained on other data. %s.",
            len(tokenizer),
            args.tokenizer,
            chars_per_token,
            args.dataset,
            fix,
        )
    return {"unknown_share": share, "chars_per_token": chars_per_token}


def decode_for_metrics(tokenizer: PreTrainedTokenizerBase, token_ids) -> list[str]:
    """Decode generated ids or labels; -100 (ignored labels) becomes padding first."""
    import numpy as np

    from ..data.preprocessing import LABEL_PAD_TOKEN_ID

    token_ids = np.where(np.asarray(token_ids) == LABEL_PAD_TOKEN_ID, tokenizer.pad_token_id, token_ids)
    return [text.strip() for text in tokenizer.batch_decode(token_ids, skip_special_tokens=True)]


def make_compute_metrics(task: Task, tokenizer: PreTrainedTokenizerBase):
    """`compute_metrics` for `Seq2SeqTrainer(predict_with_generate=True)`: the task's numbers, no strings."""

    def compute_metrics(prediction: EvalPrediction) -> dict[str, float]:
        predictions = decode_for_metrics(tokenizer, prediction.predictions)
        references = decode_for_metrics(tokenizer, prediction.label_ids)
        scores = task.score(predictions, references)
        return {k: v for k, v in scores.items() if not isinstance(v, str)}

    return compute_metrics
