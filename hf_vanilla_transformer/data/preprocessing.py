"""Tokenizing source/target pairs and padding batches: shared by translation and series expansion."""

from __future__ import annotations

import logging
from typing import Any

from datasets import DatasetDict
from transformers import DataCollatorForSeq2Seq, PreTrainedTokenizerBase

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
# errors". None reaches the model here: `_fits` drops such pairs and `tokenize_pairs` logs how many, so the
# warning would only alarm. Filtered while tokenizing, nowhere else.
_TOO_LONG_WARNING = "longer than the specified maximum sequence length"
_TOKENIZER_LOGGER = logging.getLogger("transformers.tokenization_utils_base")


def _not_the_too_long_warning(record: logging.LogRecord) -> bool:
    return _TOO_LONG_WARNING not in record.getMessage()


def _tokenize_batch(
    batch: dict[str, list], tokenizer: PreTrainedTokenizerBase, source: TextField, target: TextField
) -> dict[str, list]:
    # No truncation: pairs that are too long are dropped afterwards, and counted, by `_fits`.
    _TOKENIZER_LOGGER.addFilter(_not_the_too_long_warning)
    try:
        return tokenizer(_texts(batch, source), text_target=_texts(batch, target), truncation=False)
    finally:
        _TOKENIZER_LOGGER.removeFilter(_not_the_too_long_warning)


def _fits(batch: dict[str, list], max_source_length: int, max_target_length: int) -> list[bool]:
    return [
        len(source) <= max_source_length and len(target) <= max_target_length
        for source, target in zip(batch["input_ids"], batch["labels"], strict=True)
    ]


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
    would teach the model to stop mid-sentence. Both steps are `Dataset.map`/`filter` calls, so datasets
    loaded from disk reuse their cached results on the next run.

    Args:
        source, target: `(column, key)` of the texts, e.g. `("translation", "de")` or `("expression", None)`.

    Returns:
        The tokenized `DatasetDict` (the text columns removed), and per split the number of pairs
        `{"kept": ..., "dropped": ...}`, which are also logged.
    """
    for name, value in (("max_source_length", max_source_length), ("max_target_length", max_target_length)):
        if not isinstance(value, int) or value < 2:
            raise UsageError(f"`{name}` must be an integer >= 2 (a token and </s>), got {value!r}.")
        if value > tokenizer.model_max_length:
            raise UsageError(
                f"`{name}`={value} exceeds the tokenizer's model_max_length={tokenizer.model_max_length}; "
                f"lower `{name}` or retrain the tokenizer with a larger `model_max_length`."
            )
    for split, dataset in dataset_dict.items():
        for column, _ in (source, target):
            if column not in dataset.column_names:
                raise UsageError(
                    f"Split '{split}' has no column '{column}'; columns found: "
                    f"{', '.join(dataset.column_names)}."
                )

    # Keep only the model's inputs: a leftover text column would break the collator.
    tokenized = DatasetDict(
        {
            split: dataset.map(
                _tokenize_batch,
                batched=True,
                fn_kwargs={"tokenizer": tokenizer, "source": source, "target": target},
                remove_columns=dataset.column_names,
                num_proc=num_proc,
                desc=f"Tokenizing {split}",
            )
            for split, dataset in dataset_dict.items()
        }
    )
    filtered = tokenized.filter(
        _fits,
        batched=True,
        fn_kwargs={"max_source_length": max_source_length, "max_target_length": max_target_length},
        num_proc=num_proc,
        desc="Dropping too-long pairs",
    )
    counts = {}
    for split in filtered:
        kept = filtered[split].num_rows
        counts[split] = {"kept": kept, "dropped": tokenized[split].num_rows - kept}
        logger.info(
            "%s: kept %d pairs, dropped %d longer than %d source / %d target tokens.",
            split,
            kept,
            counts[split]["dropped"],
            max_source_length,
            max_target_length,
        )
    return filtered, counts


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
