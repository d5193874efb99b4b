"""The two tasks this package trains on, and what differs between them: where the source and target texts
live in a dataset row, which metric scores the output, and which of its numbers picks the best checkpoint.

- `translation`: a `translation` column of `{language: sentence}` dicts (Multi30k here, WMT14 on the Hub),
  scored with sacreBLEU (cased, detokenised) and chrF.
- `series`: `expression` -> `series` columns (Taylor series to O(x**6)), scored by exact string match,
  symbolic equivalence (sympy) and the share of predictions that parse.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
from datasets import Dataset, DatasetDict, concatenate_datasets, load_from_disk
from transformers import EvalPrediction, PreTrainedTokenizerBase

from .data.preprocessing import LABEL_PAD_TOKEN_ID, TextField, tokenize_pairs
from .data.translation import load_translation_dataset, translation_languages

logger = logging.getLogger(__name__)

TASKS = ("translation", "series")


@dataclass
class DataArguments:
    """Which data to train and evaluate on, and how to tokenize it."""

    task: str = field(default="series", metadata={"help": f"One of {TASKS}."})
    dataset: str = field(
        default="outputs/data/series",
        metadata={"help": "A `save_to_disk` folder, a folder of parquet files, or a Hub name (e.g. wmt14)."},
    )
    dataset_config: str | None = field(default=None, metadata={"help": "Hub dataset config, e.g. de-en."})
    tokenizer: str = field(
        default="outputs/tokenizers/series", metadata={"help": "Tokenizer folder or Hub name."}
    )
    source_lang: str = field(default="de", metadata={"help": "Translation source language."})
    target_lang: str = field(default="en", metadata={"help": "Translation target language."})
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
    max_tokens: int | None = field(
        default=None,
        metadata={
            "help": "Token budget per training batch, batching similar lengths (§5.1; fairseq's "
            "--max-tokens). Replaces per_device_train_batch_size."
        },
    )

    def __post_init__(self):
        if self.task not in TASKS:
            raise ValueError(f"Unknown task {self.task!r}; expected one of {TASKS}.")
        if self.symbol_renamings < 0:
            raise ValueError(f"`symbol_renamings` must be 0 or more, got {self.symbol_renamings}.")
        if self.symbol_renamings and self.task != "series":
            raise ValueError(
                f"`symbol_renamings` ({self.symbol_renamings}) applies to the series task only; "
                f"drop it for task {self.task!r}."
            )


def text_fields(args: DataArguments) -> tuple[TextField, TextField]:
    """`(column, key)` of the source and the target text for the task."""
    if args.task == "translation":
        return ("translation", args.source_lang), ("translation", args.target_lang)
    return ("expression", None), ("series", None)


def load_raw_dataset(args: DataArguments) -> DatasetDict:
    """Load the task's `DatasetDict` (train / validation / test)."""
    if args.task == "translation":
        dataset = load_translation_dataset(args.dataset, args.dataset_config)
        languages = translation_languages(next(iter(dataset.values())))
        for lang in (args.source_lang, args.target_lang):
            if lang not in languages:
                raise ValueError(f"Language '{lang}' is not in {args.dataset}; languages found: {languages}.")
        return dataset
    path = Path(args.dataset)
    if not path.is_dir():
        raise FileNotFoundError(
            f"No series data set at {path}: build one with `python scripts/generate_series.py --output_dir {path}`."
        )
    dataset = load_from_disk(str(path))
    for split, ds in dataset.items():
        if not {"expression", "series"} <= set(ds.column_names):
            raise ValueError(
                f"Split '{split}' of {path} lacks the columns expression/series: {ds.column_names}."
            )
    return dataset


def prepare_dataset(args: DataArguments, tokenizer: PreTrainedTokenizerBase) -> DatasetDict:
    """Load, subsample (if asked) and tokenize the task's data; too-long pairs are dropped and counted."""
    raw = load_raw_dataset(args)
    # Read before `max_eval_examples` cuts the held-out splits: no renaming may equal any of their expressions.
    held_out = held_out_expressions(raw) if args.symbol_renamings else set()
    for split, limit in (
        ("train", args.max_train_examples),
        ("validation", args.max_eval_examples),
        ("test", args.max_eval_examples),
    ):
        if limit is not None and split in raw and raw[split].num_rows > limit:
            raw[split] = raw[split].select(range(limit))
    if args.symbol_renamings and "train" in raw:
        raw["train"] = add_symbol_renamings(raw["train"], args.symbol_renamings, held_out)
    source, target = text_fields(args)
    tokenized, counts = tokenize_pairs(
        raw, tokenizer, source, target, args.max_source_length, args.max_target_length, num_proc=args.num_proc
    )
    for split, count in counts.items():
        logger.info("%s: %d pairs (%d dropped as too long)", split, count["kept"], count["dropped"])
    return tokenized


def held_out_expressions(raw: DatasetDict) -> set[str]:
    """Every expression of the splits other than train (validation and test, whole)."""
    return {e for split, ds in raw.items() if split != "train" for e in ds["expression"]}


def add_symbol_renamings(train: Dataset, per_example: int, held_out: set[str], seed: int = 0) -> Dataset:
    """The training split followed by up to `per_example` order-preserving symbol renamings of each of its
    pairs (`symbol_renamings_of_pairs`), none of which is in `held_out` (pass `held_out_expressions(raw)`
    of the whole data set, before any split is cut down)."""
    from .data.series import symbol_renamings_of_pairs

    expressions, series = symbol_renamings_of_pairs(
        train["expression"], train["series"], per_example, seed=seed, exclude=held_out
    )
    renamed = Dataset.from_dict({"expression": expressions, "series": series})
    logger.info(
        "train: %d pairs + %d symbol renamings (up to %d each)", train.num_rows, renamed.num_rows, per_example
    )
    return concatenate_datasets([train.select_columns(["expression", "series"]), renamed])


def load_task_metric(task: str):
    from .metrics import load_series_metric, load_translation_metric

    return load_translation_metric() if task == "translation" else load_series_metric()


def best_metric_name(task: str) -> str:
    """The number that picks the best checkpoint (`metric_for_best_model`; higher is better)."""
    return "bleu" if task == "translation" else "exact_match"


def score(task: str, metric, predictions: list[str], references: list[str]) -> dict[str, float]:
    """Run the task's metric and return flat numbers (plus signature strings for translation)."""
    result = metric.compute(predictions=predictions, references=references)
    if task == "translation":
        return {
            "bleu": result["score"],
            "chrf": result["chrf"],
            "bleu_signature": result["signature"],
            "chrf_signature": result["chrf_signature"],
        }
    return dict(result)


def decode_for_metrics(tokenizer: PreTrainedTokenizerBase, token_ids) -> list[str]:
    """Decode generated ids or labels; -100 (ignored labels) becomes padding first."""
    token_ids = np.where(np.asarray(token_ids) == LABEL_PAD_TOKEN_ID, tokenizer.pad_token_id, token_ids)
    return [text.strip() for text in tokenizer.batch_decode(token_ids, skip_special_tokens=True)]


def make_compute_metrics(task: str, tokenizer: PreTrainedTokenizerBase):
    """`compute_metrics` for `Seq2SeqTrainer(predict_with_generate=True)`."""
    metric = load_task_metric(task)

    def compute_metrics(prediction: EvalPrediction) -> dict[str, float]:
        predictions = decode_for_metrics(tokenizer, prediction.predictions)
        references = decode_for_metrics(tokenizer, prediction.label_ids)
        return {
            k: v for k, v in score(task, metric, predictions, references).items() if not isinstance(v, str)
        }

    return compute_metrics
