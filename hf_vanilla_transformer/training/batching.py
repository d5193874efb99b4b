"""Batches filled up to a token budget (fairseq's `--max-tokens`, how the paper batched, §5.1), for the
Trainer and the plain loop. Written here because no well-kept library offers it for the Trainer."""

from __future__ import annotations

import random
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field

import numpy as np
import pyarrow.compute as pc
from transformers.trainer_pt_utils import BatchRebalanceSampler

from ..errors import UsageError
from ..options import Options

# How examples are ordered before they are cut into batches. "padded_length": by the longer of source and
# target (a batch's padded size), then by target length. "source_length": by source length, then by target
# length, as fairseq's `LanguagePairDataset` orders them.
BATCH_ORDERS = ("padded_length", "source_length")


@dataclass
class BatchingArguments(Options):
    """How training batches are made: by a token budget (`max_tokens`, the samplers below), or, without one,
    by the Trainer's `per_device_train_batch_size`."""

    max_tokens: int | None = field(
        default=None,
        metadata={
            "help": "Token budget per training batch, batching similar lengths (§5.1; fairseq's "
            "--max-tokens). Replaces per_device_train_batch_size.",
            "range": ">= 1",
        },
    )
    batch_order: str = field(
        default="padded_length",
        metadata={
            "help": "How examples are sorted before they are cut into token-budget batches: padded_length "
            "(the longer of source and target, then target length) or source_length (source, then target "
            "length, as fairseq orders them).",
            "choices": list(BATCH_ORDERS),
        },
    )
    batch_size_multiple: int = field(
        default=1,
        metadata={
            "help": "Token-budget batches hold a multiple of this many sentences (the remainder starts the "
            "next batch), as fairseq's --required-batch-size-multiple (8 there).",
            "range": ">= 1",
        },
    )

    stream_buffer: int = field(
        default=20_000,
        metadata={
            "help": "With --streaming: examples read, sorted by length and cut into token-budget batches "
            "at a time (what bounds memory; more examples make batches of closer lengths).",
            "range": ">= 1",
        },
    )


class TokenBudgetBatchSampler(BatchRebalanceSampler):
    """Batches of similar-length examples holding at most `max_tokens` padded tokens each (§5.1; fairseq's
    `--max-tokens`), instead of a fixed number of sentences.

    A batch's cost is `len(batch) * max(lengths in batch)`: what it occupies after padding. Batches are
    formed once from the examples in the order of `sort_keys` if given, else sorted by length
    (`token_budget_sampler` sorts by length, then by target length: among examples of one padded length,
    those with alike targets share a batch, so the decoder and the output layer, most of a step's work,
    compute on fewer padded positions); remaining ties are broken by a seeded shuffle. With
    `batch_size_multiple` m > 1, a full batch keeps the largest multiple of m sentences it holds and hands the
    rest to the next batch, as fairseq's `--required-batch-size-multiple` does. Each epoch shuffles the order
    of the batches with `seed + epoch`, so runs are reproducible and a resumed run sees the same batches.
    Under data parallelism, each of `num_replicas` ranks takes every `num_replicas`-th batch; the list is
    padded with repeated batches so all ranks take the same number of steps.

    It derives from transformers' `BatchRebalanceSampler` only for what the Trainer does with that type:
    pass it as a `batch_sampler` and not shard it a second time (this sampler is already rank-aware).
    """

    def __init__(
        self,
        lengths: Sequence[int],
        max_tokens: int,
        sort_keys: Sequence | None = None,
        batch_size_multiple: int = 1,
        shuffle: bool = True,
        seed: int = 0,
        num_replicas: int = 1,
        rank: int = 0,
    ):
        if max_tokens < 1:
            raise UsageError(f"`max_tokens` must be positive, got {max_tokens}.")
        lengths = np.asarray(lengths, dtype=np.int64)
        longest = int(lengths.max()) if len(lengths) else 0
        if longest > max_tokens:
            raise UsageError(
                f"An example of {longest} tokens exceeds the batch budget `max_tokens={max_tokens}`: raise "
                "the budget or filter long examples out first."
            )
        if batch_size_multiple < 1:
            raise UsageError(f"`batch_size_multiple` must be positive, got {batch_size_multiple}.")
        if not 0 <= rank < num_replicas:
            raise ValueError(f"`rank` ({rank}) must be in [0, num_replicas={num_replicas}).")
        self.max_tokens = max_tokens
        self.batch_size_multiple = batch_size_multiple
        self.shuffle = shuffle
        self.seed = seed
        self.num_replicas = num_replicas
        self.rank = rank
        self.epoch = 0
        keys = lengths if sort_keys is None else np.asarray(sort_keys)
        if len(keys) != len(lengths):
            raise ValueError(f"{len(keys)} sort keys for {len(lengths)} lengths: give one per example.")
        # Examples in batch order, and where each batch starts and ends in it: a batch is always a run of
        # consecutive examples of that order, so a corpus of millions costs two integer arrays, not a list of
        # lists of Python ints.
        self.order = self._sorted_order(keys)
        self.starts, self.ends = self._cut(lengths[self.order].tolist())

    def _sorted_order(self, keys: np.ndarray) -> np.ndarray:
        # Ties among equal keys are broken by a seeded shuffle; Python's, so that a seed gives the batches it
        # always gave (the shipped models' recipes), then a stable sort by the keys, first key first.
        shuffled = list(range(len(keys)))
        random.Random(self.seed).shuffle(shuffled)
        order = np.array(shuffled, dtype=np.int64)
        del shuffled
        if not len(order):
            return order
        columns = keys[order].reshape(len(order), -1)
        return order[np.lexsort(columns.T[::-1])]

    def _cut(self, lengths: list[int]) -> tuple[np.ndarray, np.ndarray]:
        """Where each batch starts and ends in `self.order`, given the examples' lengths in that order."""
        multiple = self.batch_size_multiple
        starts, start, batch_max = [], 0, 0
        for position, length in enumerate(lengths):
            new_max = max(batch_max, length)
            while position > start and (position - start + 1) * new_max > self.max_tokens:
                # The largest multiple of `multiple` sentences goes out, the rest starts the next batch; a
                # batch smaller than `multiple` goes out whole (fairseq's rule). With `multiple` 1 all goes.
                size = position - start
                starts.append(start)
                start += max(multiple * (size // multiple), size % multiple)
                batch_max = max(lengths[start:position], default=0)
                new_max = max(batch_max, length)
            batch_max = new_max
        if len(lengths):
            starts.append(start)
        ends = starts[1:] + [len(lengths)] if starts else []
        if self.num_replicas > 1 and len(starts) % self.num_replicas:
            # Padded with repeated batches so that every rank takes the same number of steps.
            missing = self.num_replicas - len(starts) % self.num_replicas
            starts, ends = starts + starts[:missing], ends + ends[:missing]
        return np.array(starts, dtype=np.int64), np.array(ends, dtype=np.int64)

    @property
    def batches(self) -> list[list[int]]:
        """Every batch, as lists of example indices (for inspection: iterating does not build this)."""
        return [self._batch(position) for position in range(len(self.starts))]

    def _batch(self, position: int) -> list[int]:
        return self.order[self.starts[position] : self.ends[position]].tolist()

    def set_epoch(self, epoch: int) -> None:
        self.epoch = epoch

    def __iter__(self) -> Iterator[list[int]]:
        order = list(range(len(self.starts)))
        if self.shuffle:
            random.Random(self.seed + self.epoch).shuffle(order)
        for position in order[self.rank :: self.num_replicas]:
            yield self._batch(position)

    def __len__(self) -> int:
        return len(self.starts) // self.num_replicas


COLUMNS = ("input_ids", "labels")
# Rows read at a time when measuring lengths: bounded memory however large the corpus.
_LENGTH_CHUNK = 100_000


def example_sizes(dataset) -> tuple[np.ndarray, np.ndarray]:
    """The source and target length of each tokenized example (`input_ids`, `labels`).

    For a `datasets.Dataset`, read from the Arrow lists' offsets a chunk of rows at a time, never as Python
    lists: a row-by-row pass over millions of pairs took minutes in every process before the first step."""
    if not hasattr(dataset, "column_names"):
        return tuple(np.array([len(row[column]) for row in dataset], np.int64) for column in COLUMNS)
    columns = dataset.select_columns(list(COLUMNS)).with_format("arrow")
    chunks = [columns[start : start + _LENGTH_CHUNK] for start in range(0, columns.num_rows, _LENGTH_CHUNK)]
    return tuple(
        np.concatenate([np.zeros(0, np.int64)] + [pc.list_value_length(t[c]).to_numpy() for t in chunks])
        for c in COLUMNS
    )


def token_budget_sampler(
    dataset, max_tokens: int, batch_order: str = "padded_length", batch_size_multiple: int = 1, **kwargs
) -> TokenBudgetBatchSampler:
    """The `TokenBudgetBatchSampler` of a tokenized dataset, its examples ordered by `batch_order` (see
    `BATCH_ORDERS`); `kwargs` go to the sampler (`seed`, `num_replicas`, `rank`)."""
    if batch_order not in BATCH_ORDERS:
        raise UsageError(f"Unknown `batch_order` {batch_order!r}; expected one of {', '.join(BATCH_ORDERS)}.")
    sources, targets = example_sizes(dataset)
    lengths = np.maximum(sources, targets)
    first = lengths if batch_order == "padded_length" else sources
    return TokenBudgetBatchSampler(
        lengths,
        max_tokens=max_tokens,
        sort_keys=np.stack([first, targets], axis=1),
        batch_size_multiple=batch_size_multiple,
        **kwargs,
    )
