"""Training from a streamed corpus (`datasets`' `IterableDataset`: Hub or local data files), for corpora
larger than memory or disk: read a buffer of examples, tokenized on the fly, cut it into token-budget batches
(`TokenBudgetBatchSampler`, as for a corpus on disk), hand them out in a shuffled order, read the next buffer.
Memory is bounded by the buffer; each process reads its own share of the stream (`split_dataset_by_node`); a
checkpoint records where each process's stream stands, and a resumed run goes on from there with the batches
the uninterrupted run would have taken.

Written here because `datasets` shuffles examples, not token-budget batches, and does not resume a shuffled
stream exactly (it refills its shuffle buffer from the resumed position)."""

from __future__ import annotations

import copy
import itertools
import json
import logging
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import torch
from datasets import IterableDataset
from datasets.distributed import split_dataset_by_node

from ..errors import CorruptFileError, UsageError
from .batching import BATCH_ORDERS, token_budget_sampler

logger = logging.getLogger(__name__)

STATE_FILE = "stream_state-{rank}.json"


class StreamedTokenBudgetBatches(torch.utils.data.IterableDataset):
    """Token-budget batches of a stream of tokenized examples (`input_ids`, `labels`), without end.

    The stream is read `buffer_size` examples at a time; each buffer is cut into batches as
    `TokenBudgetBatchSampler` cuts a corpus (by `batch_order`, at most `max_tokens` padded tokens each) and
    its batches come in an order shuffled with the seed, the epoch and the buffer's number. At the stream's
    end the next epoch starts, reading the stream in the same order: a corpus grouped by source should be
    shuffled once on disk.

    `state_dict()` is where the batches stand after the last one handed out: the stream's state where the
    current buffer began, and how many of its batches are done. A run resumed from it re-reads that one buffer
    and goes on with the next batch, the same as without the stop.
    """

    def __init__(
        self,
        stream: IterableDataset,
        max_tokens: int,
        buffer_size: int,
        batch_order: str = "padded_length",
        batch_size_multiple: int = 1,
        seed: int = 0,
    ):
        if batch_order not in BATCH_ORDERS:
            raise UsageError(
                f"Unknown `batch_order` {batch_order!r}; expected one of {', '.join(BATCH_ORDERS)}."
            )
        self.stream = stream
        self.max_tokens = max_tokens
        self.buffer_size = buffer_size
        self.batch_order = batch_order
        self.batch_size_multiple = batch_size_multiple
        self.seed = seed
        self._state = {"epoch": 0, "buffer": 0, "stream": None, "batches_done": 0}

    def state_dict(self) -> dict:
        return copy.deepcopy(self._state)

    def load_state_dict(self, state: dict) -> None:
        self._state = copy.deepcopy(state)

    def _batches(self, examples: list[dict], seed: int) -> list[list[int]]:
        sampler = token_budget_sampler(
            examples, self.max_tokens, self.batch_order, self.batch_size_multiple, seed=seed
        )
        return list(sampler)

    def __iter__(self) -> Iterator[list[dict]]:
        state = self.state_dict()
        while True:
            self.stream.set_epoch(state["epoch"])
            if state["stream"] is not None:  # else the epoch starts at the stream's beginning
                self.stream.load_state_dict(state["stream"])
            examples = iter(self.stream)
            while buffer := list(itertools.islice(examples, self.buffer_size)):
                seed = int(
                    np.random.SeedSequence([self.seed, state["epoch"], state["buffer"]]).generate_state(1)[0]
                )
                batches = self._batches(buffer, seed)
                for number in range(state["batches_done"], len(batches)):
                    self._state = {**state, "batches_done": number + 1}
                    yield [buffer[i] for i in batches[number]]
                state = {
                    **state,
                    "buffer": state["buffer"] + 1,
                    "stream": self.stream.state_dict(),
                    "batches_done": 0,
                }
                self._state = state
            if state["buffer"] == 0:
                raise UsageError(
                    "This process's share of the training stream holds no pair: the stream is empty, has "
                    "fewer pairs than processes, or none within --max_source_length and --max_target_length."
                )
            state = {"epoch": state["epoch"] + 1, "buffer": 0, "stream": None, "batches_done": 0}
            self._state = state


def streamed_batches(stream: IterableDataset, recipe_args, training_args) -> StreamedTokenBudgetBatches:
    """This process's share of a tokenized stream (`split_dataset_by_node`: whole files where their number
    divides among the processes, else every n-th example), in token-budget batches."""
    share = split_dataset_by_node(
        stream, rank=training_args.process_index, world_size=training_args.world_size
    )
    return StreamedTokenBudgetBatches(
        share,
        recipe_args.max_tokens,
        recipe_args.stream_buffer,
        recipe_args.batch_order,
        recipe_args.batch_size_multiple,
        seed=training_args.seed,
    )


def state_file(checkpoint: str | Path, rank: int) -> Path:
    return Path(checkpoint) / STATE_FILE.format(rank=rank)


def save_stream_state(
    batches: StreamedTokenBudgetBatches, checkpoint: str | Path, rank: int, world_size: int
):
    """Where this process's stream stands, into the checkpoint it belongs to."""
    record = {"world_size": world_size, **batches.state_dict()}
    state_file(checkpoint, rank).write_text(json.dumps(record))


def load_stream_state(
    batches: StreamedTokenBudgetBatches,
    checkpoint: str | Path,
    rank: int,
    world_size: int,
    start_over: bool = False,
):
    """Put the stream back where a checkpoint left it; a checkpoint of another way of reading the data, or of
    another number of processes (whose shares differ), is refused by name (the checkpoint's record of the run,
    `resume.ResumeContract`, refuses both first; these refusals are for checkpoints of earlier versions). With
    `start_over` (the user resumes anyway) such a checkpoint starts the stream from its beginning instead."""
    path = state_file(checkpoint, rank)
    if start_over and not _same_reading(path, world_size):
        logger.warning(
            "%s holds no position of this reading of the stream: it starts from the beginning.", checkpoint
        )
        return
    if not path.is_file():
        raise UsageError(
            f"{checkpoint} holds no {path.name}: it was not written by a streamed run. Resume it without "
            "--streaming, or start the streamed run afresh in another --output_dir."
        )
    try:
        record = json.loads(path.read_text())
    except ValueError as error:
        raise CorruptFileError(
            f"{path} does not parse ({error}): resume from an earlier checkpoint."
        ) from None
    if not isinstance(record, dict) or "world_size" not in record:
        raise CorruptFileError(f"{path} records no world_size: resume from an earlier checkpoint.")
    saved_world = record.pop("world_size")
    if saved_world != world_size:
        raise UsageError(
            f"{checkpoint} was written by {saved_world} processes, each reading its own share of the stream; "
            f"resume it with {saved_world}, not {world_size}."
        )
    batches.load_state_dict(record)


def _same_reading(path: Path, world_size: int) -> bool:
    try:
        return json.loads(path.read_text()).get("world_size") == world_size
    except (OSError, ValueError, AttributeError):
        return False
