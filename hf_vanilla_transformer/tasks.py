"""The two tasks this package trains on, one object each, holding everything that differs between them: where
the source and target texts live in a dataset row, how the data loads, which metric scores the output and
which of its numbers picks the best checkpoint, the generation defaults, the report's breakdowns, how a
tokenizer for the task is trained, which command prepares its data, which inputs its models take (the input
check, the demo's examples and labels). Code outside this module and `series/` asks the task object and never
switches on the task name (tests/test_layout.py).

- `translation`: a `translation` column of `{language: sentence}` dicts (Multi30k, WMT14; datasets with one
  column per language, like `bentrevett/multi30k`, are converted on loading),
  scored with sacreBLEU (cased, detokenised) and chrF, and in reports also with the paper's tokenized BLEU.
- `series`: `expression` -> `series` columns (Taylor series to O(x**6)), scored by exact string match,
  symbolic equivalence (sympy) and the share of predictions that parse.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar

import numpy as np
from datasets import Dataset, DatasetDict, IterableDataset, load_from_disk
from transformers import EvalPrediction, PreTrainedTokenizerBase

from .data.preprocessing import LABEL_PAD_TOKEN_ID, TextField, tokenize_pairs, tokenize_stream
from .data.translation import load_translation_dataset
from .errors import MissingPathError, UsageError
from .metrics import load_series_metric, load_translation_metric
from .metrics.tokenized_bleu import tokenized_bleu
from .series.grammar import check_model_input
from .series.renamings import add_symbol_renamings, held_out_expressions
from .series.reports import ROW_FORMATS, series_breakdowns
from .tokenization import (
    DEFAULT_MODEL_MAX_LENGTH,
    train_series_tokenizer,
    train_translation_tokenizer,
    tutorial_series_tokenizer,
)

logger = logging.getLogger(__name__)


class Task:
    """What one task defines; see `TranslationTask` and `SeriesTask`."""

    name: ClassVar[str]
    best_metric: ClassVar[str]  # `metric_for_best_model`: higher is better
    tokenizer_columns: ClassVar[tuple[str, ...]]  # dataset columns a tokenizer for the task is trained on
    # generate()'s output limit during evaluation when the command line sets none: None means source length +
    # 50 (§6.1), True the saved generation config's `max_length`.
    output_length_from_config: ClassVar[bool] = False
    # Report key -> the text before " (n examples): exact match ± s.e." for one row of that breakdown.
    row_formats: ClassVar[dict[str, str]] = {}
    # decode(encode(s)) == s is checked on every split after training a tokenizer for the task.
    lossless_tokenizer: ClassVar[bool] = False
    data_made_by: ClassVar[str]  # the command that prepares the task's data, for the error that asks for one
    # A model's input as a page labels its box, and as the refusal of an empty input names it.
    input_label: ClassVar[str]
    input_hint: ClassVar[str]
    demo_examples: ClassVar[tuple[str, ...]] = ()  # inputs the demo page offers
    # Whether a CAS can compute the reference output of any input (the demo shows it beside the model's).
    expands_with_cas: ClassVar[bool] = False

    def languages(self, args: DatasetArguments) -> list[str] | None:
        """The source and target languages of a model trained on `args`'s data, if it has any."""
        return None

    def check_input(self, text: str) -> None:
        """Refuse (a `UsageError`) an input outside what the task's models were trained on: outside it a model
        still answers, confidently and wrongly."""

    def load_prepared(self, folder: str | Path) -> DatasetDict:
        """The splits a data script saved (`save_to_disk`), or an error naming the script that makes them."""
        path = Path(folder)
        if not (path / "dataset_dict.json").is_file():
            state = "holds no prepared data set (no dataset_dict.json)" if path.is_dir() else "does not exist"
            raise MissingPathError(
                f"{folder} {state}. Make one with `{self.data_made_by}` (the recipes in scripts/recipes/ do "
                "it first)."
            )
        return load_from_disk(str(path))

    def check_arguments(self, args: DataArguments) -> None:
        """Raise `ValueError` for data arguments that do not apply to this task."""

    def text_fields(self, args: DataArguments) -> tuple[TextField, TextField]:
        """`(column, key)` of the source and of the target text."""
        raise NotImplementedError

    def load_raw(self, args: DatasetArguments, streaming: bool = False) -> DatasetDict:
        """The task's `DatasetDict` (train / validation / test), checked for the columns it needs; with
        `streaming`, splits it can stream may be `IterableDataset`s."""
        raise NotImplementedError

    def add_training_data(self, raw: DatasetDict, held_out: Any, args: DataArguments) -> DatasetDict:
        """Extra training pairs the arguments ask for (none by default); `held_out` is
        `held_out_data(raw)`."""
        return raw

    def held_out_data(self, raw: DatasetDict, args: DataArguments) -> Any:
        """What `add_training_data` must never produce, read before any split is cut down."""
        return None

    def load_metric(self):
        raise NotImplementedError

    def score(self, metric, predictions: list[str], references: list[str]) -> dict[str, Any]:
        """The metric's numbers, flat (plus signature strings where the metric has them)."""
        return dict(metric.compute(predictions=predictions, references=references))

    def report_details(
        self,
        metric,
        sources: list[str],
        predictions: list[str],
        references: list[str],
        train_sources,
        args: DataArguments,
    ) -> tuple[dict[str, Any], dict[str, Any]]:
        """Extra metrics and extra report sections (breakdowns) of an evaluation report; `train_sources`, when
        not None, reads the training sources when called."""
        return {}, {}

    tokenizer_option_names: tuple[str, ...] = ()  # the task's own switches of `train_tokenizer`

    def tokenizer_options(self, **options: bool) -> dict[str, Any]:
        """The task's options of `train_tokenizer` among `options`; a `ValueError` for one that is set but
        belongs to another task."""
        for name, value in options.items():
            if value and name not in self.tokenizer_option_names:
                owners = [task.name for task in TASKS.values() if name in task.tokenizer_option_names]
                raise UsageError(
                    f"`{name}` applies to the {' and '.join(owners)} task only; drop it for task "
                    f"{self.name!r}."
                )
        return {name: value for name, value in options.items() if name in self.tokenizer_option_names}

    def train_tokenizer(self, corpus, vocab_size: int, **options):
        """Train a BPE tokenizer for the task (`tokenization.train_*_tokenizer`) on texts or text files."""
        raise NotImplementedError

    def tokenizer_check_texts(self, validation: Dataset) -> dict[str, list[str]]:
        """Groups of validation texts on which `scripts/train_tokenizer.py` reports tokens per text."""
        return {column: validation[column] for column in self.tokenizer_columns}


class TranslationTask(Task):
    name = "translation"
    best_metric = "bleu"
    tokenizer_columns = ("translation",)
    tokenizer_option_names = ("split_punctuation",)
    data_made_by = (
        "python scripts/prepare_translation.py --dataset <Hub name or folder> --output_dir <folder>"
    )
    input_label = "source sentence"
    input_hint = "a sentence"
    demo_examples = (
        "Zwei Hunde spielen im Schnee.",
        "Ein Mann fährt mit dem Fahrrad eine Straße entlang.",
        "Eine Frau in einem roten Kleid singt auf einer Bühne.",
    )

    def check_arguments(self, args: DataArguments) -> None:
        if args.symbol_renamings:
            raise UsageError(
                f"`symbol_renamings` ({args.symbol_renamings}) applies to the series task only; drop it for "
                "task 'translation'."
            )

    def text_fields(self, args):
        return ("translation", args.source_lang), ("translation", args.target_lang)

    def languages(self, args):
        return [args.source_lang, args.target_lang]

    def load_raw(self, args, streaming=False):
        # The loader checks the languages, and packs flat language columns (`de`, `en`) into `translation`.
        return load_translation_dataset(
            args.dataset,
            args.dataset_config,
            languages=(args.source_lang, args.target_lang),
            **({"streaming": True} if streaming else {}),
        )

    def load_metric(self):
        return load_translation_metric()

    def score(self, metric, predictions, references):
        result = metric.compute(predictions=predictions, references=references)
        return {
            "bleu": result["score"],
            "chrf": result["chrf"],
            "bleu_signature": result["signature"],
            "chrf_signature": result["chrf_signature"],
        }

    def report_details(self, metric, sources, predictions, references, train_sources, args):
        lower = metric.compute(predictions=predictions, references=references, lowercase=True)
        # The paper's tokenized BLEU, the figure its 27.3 / 28.4 on newstest2014 compare with.
        tokenized = tokenized_bleu(predictions, references, args.target_lang)
        return {
            "bleu_lowercase": lower["score"],
            "bleu_lowercase_signature": lower["signature"],
            "bleu_paper_tokenized": tokenized["score"],
            "bleu_paper_tokenized_signature": tokenized["signature"],
        }, {}

    def train_tokenizer(self, corpus, vocab_size, **options):
        return train_translation_tokenizer(corpus, vocab_size, **options)

    def tokenizer_check_texts(self, validation):
        groups: dict[str, list[str]] = {}
        for pair in validation["translation"]:
            for lang, text in pair.items():
                groups.setdefault(lang, []).append(text)
        return groups


class SeriesTask(Task):
    name = "series"
    best_metric = "exact_match"
    tokenizer_columns = ("expression", "series")
    tokenizer_option_names = ("integer_digits", "tutorial_vocabulary")
    # A series is several times longer than its expression, so source length + 50 would cut it.
    output_length_from_config = True
    lossless_tokenizer = True
    data_made_by = "python scripts/generate_series.py --output_dir <folder>"
    input_label = "expression (series to O(x**6))"
    input_hint = "an expression such as sin(a*x)"
    demo_examples = ("sin(a*x)", "exp(2*b*x)*cos(a*x)", "tan(a*x) + cosh(b*x)", "sinh(2*b*x)/cos(a*x)")
    expands_with_cas = True

    row_formats = ROW_FORMATS

    def check_input(self, text):
        check_model_input(text)

    def text_fields(self, args):
        return ("expression", None), ("series", None)

    def load_raw(self, args, streaming=False):
        path = Path(args.dataset)
        if not path.is_dir():
            command = self.data_made_by.replace("<folder>", str(path))
            raise MissingPathError(f"No series data set at {path}: build one with `{command}`.")
        dataset = load_from_disk(str(path))
        for split, ds in dataset.items():
            if not {"expression", "series"} <= set(ds.column_names):
                raise UsageError(
                    f"Split '{split}' of {path} lacks the columns expression/series: {ds.column_names}."
                )
        return dataset

    def held_out_data(self, raw, args):
        return held_out_expressions(raw) if args.symbol_renamings else set()

    def add_training_data(self, raw, held_out, args):
        if args.symbol_renamings and "train" in raw:
            raw["train"] = add_symbol_renamings(raw["train"], args.symbol_renamings, held_out)
        return raw

    def load_metric(self):
        return load_series_metric()

    def report_details(self, metric, sources, predictions, references, train_sources, args):
        seen = train_sources() if train_sources is not None else None
        return {}, series_breakdowns(sources, predictions, references, seen)

    def tokenizer_options(self, **options):
        if options.get("integer_digits") and options.get("tutorial_vocabulary"):
            raise UsageError(
                "`integer_digits` is for BPE vocabularies; the tutorial's has single digits already."
            )
        return super().tokenizer_options(**options)

    def train_tokenizer(self, corpus, vocab_size, tutorial_vocabulary: bool = False, **options):
        if tutorial_vocabulary:  # fixed, not learned: the corpus and the BPE options do not apply
            return tutorial_series_tokenizer(
                options.get("model_max_length", DEFAULT_MODEL_MAX_LENGTH), options.get("output_dir")
            )
        return train_series_tokenizer(corpus, vocab_size, **options)


TASKS: dict[str, Task] = {task.name: task for task in (TranslationTask(), SeriesTask())}
# The task of a model that names none (`config.task`): folders saved before the field existed, and imported
# Marian models, translate.
DEFAULT_TASK = TranslationTask.name


def get_task(name: str) -> Task:
    """The task object of a name, or a `ValueError` listing the names there are."""
    try:
        return TASKS[name]
    except KeyError:
        raise UsageError(f"Unknown task {name!r}; expected one of {', '.join(TASKS)}.") from None


@dataclass
class DatasetArguments:
    """Which data set: what evaluation reads, and the first half of training's `DataArguments`."""

    task: str | None = field(
        default=None,
        metadata={"help": f"One of {', '.join(TASKS)}; default: the model's own (its config's `task`)."},
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
    source_lang: str = field(default="de", metadata={"help": "Translation source language."})
    target_lang: str = field(default="en", metadata={"help": "Translation target language."})

    def __post_init__(self):
        if self.task is not None:
            get_task(self.task)

    @property
    def task_spec(self) -> Task:
        """The `Task` object of `task`."""
        if self.task is None:
            raise UsageError(f"No task given: pass --task ({' or '.join(TASKS)}).")
        return get_task(self.task)

    def record_in(self, config) -> None:
        """What a model trained on this data carries in its config: its `task` (the tools refuse it for
        another) and, for translation, its `langs` (the pipeline splits a text by the source's rules)."""
        config.task = self.task_spec.name
        config.langs = self.task_spec.languages(self)

    def load_raw(self, streaming: bool = False) -> DatasetDict:
        """The task's raw splits of `dataset` (`Task.load_raw`)."""
        if not self.dataset:
            raise UsageError(
                "No data set given: pass --dataset (a prepared folder or a Hub name; "
                f"`{self.task_spec.data_made_by}` makes one)."
            )
        return self.task_spec.load_raw(self, streaming)


@dataclass
class DataArguments(DatasetArguments):
    """Which data to train on, and how to tokenize it (how it is batched is training's:
    `training.RecipeArguments`)."""

    # A fresh model has no task of its own to default to.
    task: str = field(default="series", metadata={"help": f"One of {', '.join(TASKS)}."})
    tokenizer: str | None = field(
        default=None,
        metadata={"help": "Required. Tokenizer folder (scripts/train_tokenizer.py) or Hub name."},
    )
    max_source_length: int = field(default=256, metadata={"help": "Longer pairs are dropped (and counted)."})
    max_target_length: int = field(default=256, metadata={"help": "Longer pairs are dropped (and counted)."})
    max_train_examples: int | None = field(
        default=None, metadata={"help": "Use only the first N training pairs."}
    )
    max_eval_examples: int | None = field(default=None, metadata={"help": "Evaluate on the first N pairs."})
    symbol_renamings: int = field(
        default=0,
        metadata={
            "help": "Series only: add up to N renamings of each training pair's symbols that keep their "
            "alphabetical order (so the renamed series is still the CAS's canonical one); none equals a "
            "validation or test expression."
        },
    )
    num_proc: int | None = field(default=None, metadata={"help": "Processes for tokenization (Dataset.map)."})
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
            "unknown token (it was trained for other data); 1 turns the check off."
        },
    )

    def __post_init__(self):
        super().__post_init__()
        if self.symbol_renamings < 0:
            raise UsageError(f"`symbol_renamings` must be 0 or more, got {self.symbol_renamings}.")
        if not 0 <= self.max_unknown_token_share <= 1:
            raise UsageError(
                f"`max_unknown_token_share` must be in [0, 1], got {self.max_unknown_token_share}."
            )
        self.task_spec.check_arguments(self)


def load_split_texts(args: DatasetArguments, split) -> tuple[list[str], list[str]]:
    """Source and target texts of one split (a `Dataset`) of the task's raw data."""
    texts = []
    for column, key in args.task_spec.text_fields(args):
        values = split[column]
        texts.append([row[key] for row in values] if key is not None else list(values))
    return texts[0], texts[1]


def prepare_dataset(args: DataArguments, tokenizer: PreTrainedTokenizerBase) -> DatasetDict:
    """Load, subsample (if asked), augment (if asked) and tokenize the task's data; too-long pairs are dropped
    and counted, and a tokenizer that does not fit the data is refused (`check_tokenizer_fits`). With
    `args.streaming`, the training split is a tokenized `IterableDataset` (`prepare_stream`)."""
    if args.streaming:
        return prepare_stream(args, tokenizer)
    task = args.task_spec
    raw = args.load_raw()
    held_out = task.held_out_data(raw, args)  # before `max_eval_examples` cuts the held-out splits
    for split, limit in (
        ("train", args.max_train_examples),
        ("validation", args.max_eval_examples),
        ("test", args.max_eval_examples),
    ):
        if limit is not None and split in raw and raw[split].num_rows > limit:
            raw[split] = raw[split].select(range(limit))
    raw = task.add_training_data(raw, held_out, args)
    source, target = task.text_fields(args)
    tokenized, _ = tokenize_pairs(
        raw, tokenizer, source, target, args.max_source_length, args.max_target_length, num_proc=args.num_proc
    )
    fitted = tokenized.get("train", next(iter(tokenized.values())))
    check_tokenizer_fits(fitted, tokenizer, args)
    return tokenized


# Files a `save_to_disk` training split is cut into when it is streamed: enough to share among processes.
_STREAM_SHARDS = 64


def prepare_stream(args: DataArguments, tokenizer: PreTrainedTokenizerBase) -> dict:
    """`prepare_dataset` for `--streaming`: the training split a stream, tokenized as it is read (too-long
    pairs dropped as they come); the held-out splits read whole and tokenized as `prepare_dataset` does. The
    tokenizer is checked on the stream's first pairs."""
    if args.symbol_renamings:
        raise UsageError("--symbol_renamings rewrites a training split held whole: drop it, or --streaming.")
    task = args.task_spec
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
    source, target = task.text_fields(args)
    tokenized, _ = tokenize_pairs(
        held_out, tokenizer, source, target, args.max_source_length, args.max_target_length, args.num_proc
    )
    stream = tokenize_stream(train, tokenizer, source, target, args.max_source_length, args.max_target_length)
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
    token_ids = np.where(np.asarray(token_ids) == LABEL_PAD_TOKEN_ID, tokenizer.pad_token_id, token_ids)
    return [text.strip() for text in tokenizer.batch_decode(token_ids, skip_special_tokens=True)]


def make_compute_metrics(task: Task, tokenizer: PreTrainedTokenizerBase):
    """`compute_metrics` for `Seq2SeqTrainer(predict_with_generate=True)`: the task's numbers, no strings."""
    metric = task.load_metric()

    def compute_metrics(prediction: EvalPrediction) -> dict[str, float]:
        predictions = decode_for_metrics(tokenizer, prediction.predictions)
        references = decode_for_metrics(tokenizer, prediction.label_ids)
        scores = task.score(metric, predictions, references)
        return {k: v for k, v in scores.items() if not isinstance(v, str)}

    return compute_metrics
