"""Tokenizing source/target pairs and padding batches: shared by translation and series expansion."""

from __future__ import annotations

import logging
from typing import Any

from datasets import DatasetDict, IterableDataset
from transformers import DataCollatorForSeq2Seq, PreTrainedTokenizerBase, PreTrainedTokenizerFast

from ..errors import UsageError

logger = logging.getLogger(__name__)

# Loss functions (torch cross_entropy, transformers' seq2seq losses) ignore this label id.
LABEL_PAD_TOKEN_ID = -100

# Where a text lives in a row: a column, and for dict-valued columns such as `translation` a key in it.
TextField = tuple[str, str | None]


def _texts(batch: dict[str, list], field: TextField) -> list[str]:
    column, key = field
    values = batch[column]
    return [value[key] for value in values] if key is not None else list(values)


# transformers warns, once per tokenizer, that a text longer than `model_max_length` "will result in indexing
# errors". None reaches the model here: `_tokenize_batch` drops such pairs and `tokenize_pairs` logs how
# many, so the warning would only alarm. Filtered while tokenizing, nowhere else.
_TOO_LONG_WARNING = "longer than the specified maximum sequence length"
_TOKENIZER_LOGGER = logging.getLogger("transformers.tokenization_utils_base")


def _not_the_too_long_warning(record: logging.LogRecord) -> bool:
    return _TOO_LONG_WARNING not in record.getMessage()


def _calls_rust_directly(tokenizer: PreTrainedTokenizerBase) -> bool:
    # The generic fast tokenizer (our trained ones) treats targets as sources and, with no truncation or
    # padding saved, its Rust tokenizer gives `tokenizer(...)`'s ids at the library's own speed, which the
    # Python around a `tokenizer(...)` call falls short of (docs/benchmarks.md, corpora of millions of pairs).
    # Subclasses (Marian, mBART, ...) may treat targets differently and keep the full call.
    if type(tokenizer) is not PreTrainedTokenizerFast:
        return False
    backend = tokenizer.backend_tokenizer
    return backend.truncation is None and backend.padding is None


def _encode(tokenizer: PreTrainedTokenizerBase, sources: list[str], targets: list[str]) -> dict[str, list]:
    if _calls_rust_directly(tokenizer):
        backend = tokenizer.backend_tokenizer
        input_ids = [encoding.ids for encoding in backend.encode_batch(sources)]
        labels = [encoding.ids for encoding in backend.encode_batch(targets)]
        return {
            "input_ids": input_ids,
            "attention_mask": [[1] * len(ids) for ids in input_ids],
            "labels": labels,
        }
    _TOKENIZER_LOGGER.addFilter(_not_the_too_long_warning)
    try:
        return dict(tokenizer(sources, text_target=targets, truncation=False))
    finally:
        _TOKENIZER_LOGGER.removeFilter(_not_the_too_long_warning)


def _tokenize_batch(
    batch: dict[str, list],
    tokenizer: PreTrainedTokenizerBase,
    source: TextField,
    target: TextField,
    max_source_length: int,
    max_target_length: int,
) -> dict[str, list]:
    # No truncation: pairs that are too long are dropped here, in the same pass (a separate `filter` would
    # read every row again and leave an indices mapping that makes each later read a gather).
    encoded = _encode(tokenizer, _texts(batch, source), _texts(batch, target))
    fits = [
        len(source) <= max_source_length and len(target) <= max_target_length
        for source, target in zip(encoded["input_ids"], encoded["labels"], strict=True)
    ]
    if all(fits):
        return encoded
    return {
        name: [value for value, keep in zip(values, fits, strict=True) if keep]
        for name, values in encoded.items()
    }


def check_length_limits(tokenizer, max_source_length: int, max_target_length: int) -> None:
    """Refuse a length limit below 2 (a token and </s>) or beyond what the tokenizer was made for; a command
    calls it before its work, so that nothing is written only to be refused after."""
    for name, value in (("max_source_length", max_source_length), ("max_target_length", max_target_length)):
        if not isinstance(value, int) or value < 2:
            raise UsageError(f"`{name}` must be an integer >= 2 (a token and </s>), got {value!r}.")
        if value > tokenizer.model_max_length:
            raise UsageError(
                f"`{name}`={value} exceeds the tokenizer's model_max_length={tokenizer.model_max_length}; "
                f"lower `{name}` or retrain the tokenizer with a larger `model_max_length`."
            )


def tokenize_pairs(
    dataset_dict: DatasetDict,
    tokenizer: PreTrainedTokenizerBase,
    source: TextField,
    target: TextField,
    max_source_length: int,
    max_target_length: int,
    num_proc: int | None = None,
) -> tuple[DatasetDict, dict[str, dict[str, int]]]:
    """Tokenize every split into `input_ids`, `attention_mask` and `labels`, and drop too-long pairs.

    Sources become `input_ids` and targets `labels` (`tokenizer(src, text_target=tgt)`), both ending in the
    tokenizer's `</s>`. Pairs whose source has more than `max_source_length` tokens or whose target has more
    than `max_target_length` (counting `</s>`) are dropped rather than truncated: a truncated target
    would teach the model to stop mid-sentence. Both happen in one `Dataset.map` call, so datasets
    loaded from disk reuse their cached results on the next run.

    Args:
        source, target: `(column, key)` of the texts, e.g. `("translation", "de")` or `("expression", None)`.

    Returns:
        The tokenized `DatasetDict` (the text columns removed), and per split the number of pairs
        `{"kept": ..., "dropped": ...}`, which are also logged.
    """
    check_length_limits(tokenizer, max_source_length, max_target_length)
    for split, dataset in dataset_dict.items():
        for column, _ in (source, target):
            if column not in dataset.column_names:
                raise UsageError(
                    f"Split '{split}' has no column '{column}'; columns found: "
                    f"{', '.join(dataset.column_names)}."
                )

    # Keep only the model's inputs: a leftover text column would break the collator.
    limits = {"max_source_length": max_source_length, "max_target_length": max_target_length}
    filtered = DatasetDict(
        {
            split: dataset.map(
                _tokenize_batch,
                batched=True,
                fn_kwargs={"tokenizer": tokenizer, "source": source, "target": target, **limits},
                remove_columns=dataset.column_names,
                num_proc=num_proc,
                desc=f"Tokenizing {split}",
            )
            for split, dataset in dataset_dict.items()
        }
    )
    counts = {}
    for split in filtered:
        kept = filtered[split].num_rows
        counts[split] = {"kept": kept, "dropped": dataset_dict[split].num_rows - kept}
        logger.info(
            "%s: kept %d pairs, dropped %d longer than %d source / %d target tokens.",
            split,
            kept,
            counts[split]["dropped"],
            max_source_length,
            max_target_length,
        )
    return filtered, counts


def tokenize_stream(
    stream: IterableDataset,
    tokenizer: PreTrainedTokenizerBase,
    source: TextField,
    target: TextField,
    max_source_length: int,
    max_target_length: int,
) -> IterableDataset:
    """`tokenize_pairs` for a stream: tokenized as it is read, too-long pairs dropped as they come (uncounted:
    a stream has no end to count at)."""
    # The text columns go in the map itself: a batch that drops pairs cannot keep a column of full length.
    texts = sorted({source[0], target[0]})
    return stream.select_columns(texts).map(
        _tokenize_batch,
        batched=True,
        remove_columns=texts,
        fn_kwargs={
            "tokenizer": tokenizer,
            "source": source,
            "target": target,
            "max_source_length": max_source_length,
            "max_target_length": max_target_length,
        },
    )


def build_seq2seq_collator(
    tokenizer: PreTrainedTokenizerBase,
    model: Any | None = None,
    pad_to_multiple_of: int | None = None,
) -> DataCollatorForSeq2Seq:
    """A collator that pads each batch to its longest sequence.

    Inputs are padded with the tokenizer's pad id (0) and labels with -100, which the loss ignores. Given
    the `model`, the collator also builds `decoder_input_ids` from the labels (labels shifted right behind
    the decoder start token); without it the model does that itself. `pad_to_multiple_of=8` helps tensor
    cores on GPUs.
    """
    return DataCollatorForSeq2Seq(
        tokenizer,
        model=model,
        padding="longest",
        label_pad_token_id=LABEL_PAD_TOKEN_ID,
        pad_to_multiple_of=pad_to_multiple_of,
    )
