"""Tokenizing source/target pairs and padding batches: shared by translation and series expansion."""

from __future__ import annotations

import logging
from typing import Any

import pyarrow.compute as pc
from datasets import DatasetDict, IterableDataset
from transformers import DataCollatorForSeq2Seq, PreTrainedTokenizerBase, PreTrainedTokenizerFast

from ..errors import UsageError
from ..lengths import LONG_PAIRS, MIN_SIDE_LENGTH, check_length
from ..options import check_value

logger = logging.getLogger(__name__)

# Loss functions (torch cross_entropy, transformers' seq2seq losses) ignore this label id.
LABEL_PAD_TOKEN_ID = -100

# What bounds a pair's sides besides its options: the tokenizer (`check_length_limits`).
TOKENIZER_LIMIT = "the tokenizer's model_max_length"
TOKENIZER_FIX = {TOKENIZER_LIMIT: "retrain the tokenizer with a larger model_max_length"}

# Where a text lives in a row: a column, and for dict-valued columns such as `translation` a key in it.
TextField = tuple[str, str | None]


def _texts(batch: dict[str, list], field: TextField) -> list[str]:
    column, key = field
    values = batch[column]
    return [value[key] for value in values] if key is not None else list(values)


# transformers warns, once per tokenizer, that a text longer than `model_max_length` "will result in indexing
# errors". None reaches the model here: `_tokenize_batch` drops or truncates such pairs and `tokenize_pairs`
# logs how many, so the warning would only alarm. Filtered while tokenizing, nowhere else.
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


def appended_tokens(tokenizer: PreTrainedTokenizerBase) -> tuple[int, int]:
    """How many special tokens the tokenizer appends after a source's text and after a target's, which a
    truncated side keeps: 1 (`</s>`) for ours, Marian's and BART's (whose `<s>` goes before the text)."""
    counts = []
    for side in ("text", "text_target"):
        probe = "a b"
        plain = tokenizer(**{side: probe}, add_special_tokens=False)["input_ids"]
        full = tokenizer(**{side: probe})["input_ids"]
        starts = [i for i in range(len(full) - len(plain) + 1) if full[i : i + len(plain)] == plain]
        counts.append(len(full) - starts[0] - len(plain) if starts and plain else 0)
    return counts[0], counts[1]


def _truncated(ids: list, limit: int, appended: int) -> list:
    """`ids` cut to `limit`, ending with the `appended` tokens the tokenizer put after the text."""
    if len(ids) <= limit:
        return ids
    appended = min(appended, limit)
    return ids[: limit - appended] + ids[len(ids) - appended :]


def _tokenize_batch(
    batch: dict[str, list],
    tokenizer: PreTrainedTokenizerBase,
    source: TextField,
    target: TextField,
    max_source_length: int,
    max_target_length: int,
    long_pairs: str = "drop",
    count_truncated: bool = False,
) -> dict[str, list]:
    # No truncation by the tokenizer: too-long pairs are dropped or truncated here, in the same pass (a
    # separate `filter` would read every row again and leave an indices mapping that makes each later read a
    # gather). `count_truncated` adds a column `truncated` for `tokenize_pairs` to count and remove.
    encoded = _encode(tokenizer, _texts(batch, source), _texts(batch, target))
    fits = [
        len(source) <= max_source_length and len(target) <= max_target_length
        for source, target in zip(encoded["input_ids"], encoded["labels"], strict=True)
    ]
    if long_pairs == "truncate":
        if not all(fits):
            source_end, target_end = appended_tokens(tokenizer)
            for index in (index for index, fit in enumerate(fits) if not fit):
                ids = _truncated(encoded["input_ids"][index], max_source_length, source_end)
                for name in encoded.keys() - {"input_ids", "labels"}:  # the mask, and any other per token
                    encoded[name][index] = encoded[name][index][: len(ids)]
                encoded["input_ids"][index] = ids
                encoded["labels"][index] = _truncated(encoded["labels"][index], max_target_length, target_end)
        if count_truncated:
            encoded["truncated"] = [not fit for fit in fits]
        return encoded
    if all(fits):
        return encoded
    return {
        name: [value for value, keep in zip(values, fits, strict=True) if keep]
        for name, values in encoded.items()
    }


def check_length_limits(tokenizer, max_source_length: int, max_target_length: int) -> None:
    """Refuse a length limit below 2 (a token and </s>) or beyond what the tokenizer was made for
    (`lengths.check_length`); a command calls it before its work, so that nothing is written only to be
    refused after."""
    limit = {TOKENIZER_LIMIT: tokenizer.model_max_length}
    for name, value in (("max_source_length", max_source_length), ("max_target_length", max_target_length)):
        check_length(name, value, limit, fixes=TOKENIZER_FIX, minimum=MIN_SIDE_LENGTH)


def tokenize_pairs(
    dataset_dict: DatasetDict,
    tokenizer: PreTrainedTokenizerBase,
    source: TextField,
    target: TextField,
    max_source_length: int,
    max_target_length: int,
    num_proc: int | None = None,
    long_pairs: str = "drop",
) -> tuple[DatasetDict, dict[str, dict[str, int]]]:
    """Tokenize every split into `input_ids`, `attention_mask` and `labels`, and drop or truncate too-long
    pairs.

    Sources become `input_ids` and targets `labels` (`tokenizer(src, text_target=tgt)`), both ending in the
    tokenizer's `</s>`. A pair whose source has more than `max_source_length` tokens or whose target has more
    than `max_target_length` (counting `</s>`) is dropped by default (`long_pairs="drop"`): a truncated target
    would teach the model to stop mid-sentence. With `long_pairs="truncate"` each side is cut to its limit,
    keeping the tokens the tokenizer appends (`</s>`). Both happen in one `Dataset.map` call, so datasets
    loaded from disk reuse their cached results on the next run.

    Args:
        source, target: `(column, key)` of the texts, e.g. `("translation", "de")` or `("expression", None)`.
        long_pairs: `"drop"` or `"truncate"` (`lengths.LengthArguments.long_pairs`).

    Returns:
        The tokenized `DatasetDict` (the text columns removed), and per split the number of pairs
        `{"kept": ..., "dropped": ..., "truncated": ...}` (kept counts the truncated ones), which are also
        logged.
    """
    check_value("long_pairs", long_pairs, {"choices": LONG_PAIRS})
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
    truncating = long_pairs == "truncate"
    tokenized = DatasetDict(
        {
            split: dataset.map(
                _tokenize_batch,
                batched=True,
                fn_kwargs={
                    "tokenizer": tokenizer,
                    "source": source,
                    "target": target,
                    **limits,
                    "long_pairs": long_pairs,
                    "count_truncated": truncating,
                },
                remove_columns=dataset.column_names,
                num_proc=num_proc,
                desc=f"Tokenizing {split}",
            )
            for split, dataset in dataset_dict.items()
        }
    )
    counts = {}
    for split, dataset in tokenized.items():
        truncated = 0
        if truncating:
            truncated = pc.sum(dataset.data.column("truncated")).as_py() or 0
            tokenized[split] = dataset.remove_columns("truncated")
        kept = dataset.num_rows
        counts[split] = {
            "kept": kept,
            "dropped": dataset_dict[split].num_rows - kept,
            "truncated": truncated,
        }
        logger.info(
            "%s: kept %d pairs, %s %d longer than %d source / %d target tokens.",
            split,
            kept,
            "truncated" if truncating else "dropped",
            truncated if truncating else counts[split]["dropped"],
            max_source_length,
            max_target_length,
        )
    return tokenized, counts


def tokenize_stream(
    stream: IterableDataset,
    tokenizer: PreTrainedTokenizerBase,
    source: TextField,
    target: TextField,
    max_source_length: int,
    max_target_length: int,
    long_pairs: str = "drop",
) -> IterableDataset:
    """`tokenize_pairs` for a stream: tokenized as it is read, too-long pairs dropped or truncated as they
    come (uncounted: a stream has no end to count at)."""
    check_value("long_pairs", long_pairs, {"choices": LONG_PAIRS})
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
            "long_pairs": long_pairs,
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
