"""Batches filled up to a token budget (fairseq's `--max-tokens`, how the paper batched, §5.1), for the
Trainer and the plain loop. Written here because no well-kept library offers it for the Trainer."""

from __future__ import annotations

import random
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field

from transformers.trainer_pt_utils import BatchRebalanceSampler

from ..errors import UsageError

# How examples are ordered before they are cut into batches. "padded_length": by the longer of source and
# target (a batch's padded size), then by target length. "source_length": by source length, then by target
# length, as fairseq's `LanguagePairDataset` orders them.
BATCH_ORDERS = ("padded_length", "source_length")


@dataclass
class BatchingArguments:
    """How training batches are made: by a token budget (`max_tokens`, the samplers below), or, without one,
    by the Trainer's `per_device_train_batch_size`."""

    max_tokens: int | None = field(
        default=None,
        metadata={
            "help": "Token budget per training batch, batching similar lengths (§5.1; fairseq's "
            "--max-tokens). Replaces per_device_train_batch_size."
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
            "next batch), as fairseq's --required-batch-size-multiple (8 there)."
        },
    )

    def __post_init__(self):
        if self.max_tokens is not None and self.max_tokens < 1:
            raise UsageError(f"`max_tokens` must be 1 or more, got {self.max_tokens}.")
        if self.batch_size_multiple < 1:
            raise UsageError(f"`batch_size_multiple` must be 1 or more, got {self.batch_size_multiple}.")


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
        longest = max(lengths) if len(lengths) else 0
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
        if sort_keys is not None and len(sort_keys) != len(lengths):
            raise ValueError(f"{len(sort_keys)} sort keys for {len(lengths)} lengths: give one per example.")
        self.batches = self._make_batches(list(lengths), list(lengths) if sort_keys is None else sort_keys)

    def _make_batches(self, lengths: list[int], sort_keys: Sequence) -> list[list[int]]:
        order = list(range(len(lengths)))
        random.Random(self.seed).shuffle(order)  # random tie-breaking among equal keys
        order.sort(key=lambda i: sort_keys[i])
        multiple = self.batch_size_multiple
        batches, batch, batch_max = [], [], 0
        for index in order:
            new_max = max(batch_max, lengths[index])
            while batch and (len(batch) + 1) * new_max > self.max_tokens:
                # The largest multiple of `multiple` sentences goes out, the rest starts the next batch; a
                # batch smaller than `multiple` goes out whole (fairseq's rule). With `multiple` 1 all goes.
                keep = max(multiple * (len(batch) // multiple), len(batch) % multiple)
                batches.append(batch[:keep])
                batch = batch[keep:]
                batch_max = max((lengths[i] for i in batch), default=0)
                new_max = max(batch_max, lengths[index])
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


def example_sizes(dataset) -> tuple[list[int], list[int]]:
    """The source and target length of each tokenized example (`input_ids`, `labels`)."""
    if hasattr(dataset, "column_names"):  # a `datasets.Dataset`: read two columns, not every row
        pairs = zip(dataset["input_ids"], dataset["labels"], strict=True)
    else:
        pairs = ((example["input_ids"], example["labels"]) for example in dataset)
    sizes = [(len(source), len(target)) for source, target in pairs]
    return [source for source, _ in sizes], [target for _, target in sizes]


def token_budget_sampler(
    dataset, max_tokens: int, batch_order: str = "padded_length", batch_size_multiple: int = 1, **kwargs
) -> TokenBudgetBatchSampler:
    """The `TokenBudgetBatchSampler` of a tokenized dataset, its examples ordered by `batch_order` (see
    `BATCH_ORDERS`); `kwargs` go to the sampler (`seed`, `num_replicas`, `rank`)."""
    if batch_order not in BATCH_ORDERS:
        raise UsageError(f"Unknown `batch_order` {batch_order!r}; expected one of {', '.join(BATCH_ORDERS)}.")
    sources, targets = example_sizes(dataset)
    lengths = [max(pair) for pair in zip(sources, targets, strict=True)]
    first = lengths if batch_order == "padded_length" else sources
    return TokenBudgetBatchSampler(
        lengths,
        max_tokens=max_tokens,
        sort_keys=list(zip(first, targets, strict=True)),
        batch_size_multiple=batch_size_multiple,
        **kwargs,
    )
